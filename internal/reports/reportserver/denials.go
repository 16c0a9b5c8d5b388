package reportserver

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// Decisions is the group of the admission log's recent denials
// (docs/decisions.md, "The API").
var Decisions = schema.GroupVersion{Group: "decisions.verdict.dev", Version: "v1alpha1"}

// AdmissionDenial is one denied admission request in a namespace, as the
// admission log recorded it: read-only, served to whoever may list
// admissiondenials in that namespace (the API server's RBAC decides).
type AdmissionDenial struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	RequestUID        string               `json:"requestUid"`
	Webhook           string               `json:"webhook"`
	Operation         string               `json:"operation"`
	Resource          bus.DecisionResource `json:"resource"`
	User              bus.DecisionUser     `json:"user"`
	DryRun            bool                 `json:"dryRun,omitempty"`
	Message           string               `json:"message,omitempty"`
	Findings          []bus.Finding        `json:"findings,omitempty"`
	// Verified: the webhook's caller proved to be the API server
	// (mutual TLS); without it, the request is its caller's word.
	Verified bool        `json:"verified,omitempty"`
	Replica  string      `json:"replica,omitempty"`
	Time     metav1.Time `json:"time"`
}

// AdmissionDenialList is a list of them.
type AdmissionDenialList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AdmissionDenial `json:"items"`
}

// DeepCopyObject copies the denial.
func (d *AdmissionDenial) DeepCopyObject() runtime.Object { return d.deepCopy() }

func (d *AdmissionDenial) deepCopy() *AdmissionDenial {
	out := *d
	d.DeepCopyInto(&out.ObjectMeta)
	out.User.Groups = slices.Clone(d.User.Groups)
	out.Findings = slices.Clone(d.Findings)
	return &out
}

// DeepCopyObject copies the list.
func (l *AdmissionDenialList) DeepCopyObject() runtime.Object {
	out := &AdmissionDenialList{TypeMeta: l.TypeMeta}
	l.DeepCopyInto(&out.ListMeta)
	out.Items = make([]AdmissionDenial, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].deepCopy()
	}
	return out
}

// Bounds of the denials a replica serves: DefaultDenialsKept, the
// newest first, within DefaultDenialsWindow.
const (
	DefaultDenialsKept   = 10_000
	DefaultDenialsWindow = 24 * time.Hour
)

// Denials are the recent denials of namespaced resources the admission
// log recorded, the newest kept (at most max, within window), as the API
// serves them. Add is safe with the server's reads.
type Denials struct {
	mu     sync.RWMutex
	max    int
	window time.Duration
	now    func() time.Time
	// order is every denial kept, oldest first; byKey finds them.
	order []*AdmissionDenial
	byKey map[string]*AdmissionDenial // namespace/name
	seq   uint64
}

// NewDenials keeps at most max denials (DefaultDenialsKept when 0), none
// older than window (DefaultDenialsWindow when 0).
func NewDenials(max int, window time.Duration) *Denials {
	if max <= 0 {
		max = DefaultDenialsKept
	}
	if window <= 0 {
		window = DefaultDenialsWindow
	}
	return &Denials{max: max, window: window, now: time.Now, byKey: map[string]*AdmissionDenial{}}
}

// Window is how far back the denials go.
func (s *Denials) Window() time.Duration { return s.window }

// Add keeps d, a denial of the log's message of sequence seq; other
// outcomes and cluster-scoped resources' denials are left out (the API
// serves a namespace's). The same request and endpoint is kept once.
func (s *Denials) Add(d bus.Decision, seq uint64) {
	if d.Outcome != bus.DecisionDenied || d.Resource.Namespace == "" {
		return
	}
	o := &AdmissionDenial{
		TypeMeta: metav1.TypeMeta{APIVersion: Decisions.String(), Kind: "AdmissionDenial"},
		ObjectMeta: metav1.ObjectMeta{
			Name: denialName(d), Namespace: d.Resource.Namespace,
			CreationTimestamp: metav1.NewTime(d.Time.Truncate(time.Second)),
			ResourceVersion:   strconv.FormatUint(seq, 10),
		},
		RequestUID: d.RequestUID, Webhook: d.Webhook, Operation: d.Operation, Resource: d.Resource,
		User: d.User, DryRun: d.DryRun, Message: d.Message, Findings: d.Findings, Verified: d.Verified, Replica: d.Replica,
		Time: metav1.NewTime(d.Time),
	}
	key := o.Namespace + "/" + o.Name
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byKey[key]; ok {
		return
	}
	s.byKey[key] = o
	s.order = append(s.order, o)
	s.seq = max(s.seq, seq)
	s.prune()
}

// prune drops what is past the bounds, the oldest first.
func (s *Denials) prune() {
	cut := s.now().Add(-s.window)
	drop := 0
	for drop < len(s.order) && (len(s.order)-drop > s.max || s.order[drop].Time.Time.Before(cut)) {
		delete(s.byKey, s.order[drop].Namespace+"/"+s.order[drop].Name)
		drop++
	}
	if drop > 0 {
		s.order = slices.Delete(s.order, 0, drop)
	}
}

// denialName names a denial in its namespace: the resource's kind and
// name and a short hash of the request and the endpoint.
func denialName(d bus.Decision) string {
	id := queue.MsgID("denial", d.RequestUID, d.Webhook)[:10]
	name := strings.ToLower(d.Resource.Kind)
	if n := d.Resource.Name; n != "" {
		name += "." + n
	}
	if len(name) > 240 {
		name = name[:240]
	}
	return name + "." + id
}

// list returns copies of the denials of ns ("" every namespace), the
// oldest first, and the version they were read at.
func (s *Denials) list(ns string, sel func(*AdmissionDenial) bool) ([]AdmissionDenial, uint64) {
	s.mu.Lock()
	s.prune()
	s.mu.Unlock()
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []AdmissionDenial
	for _, o := range s.order {
		if (ns == "" || o.Namespace == ns) && sel(o) {
			out = append(out, *o.deepCopy())
		}
	}
	return out, s.seq
}

// get returns a copy of a denial.
func (s *Denials) get(ns, name string) (*AdmissionDenial, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.byKey[ns+"/"+name]
	if !ok || o.Time.Time.Before(s.now().Add(-s.window)) {
		return nil, false
	}
	return o.deepCopy(), true
}

// denials serves AdmissionDenials: get, list (label and field
// selectors), tables. They are read-only.
type denials struct{ s *Denials }

var (
	_ rest.Storage              = denials{}
	_ rest.Scoper               = denials{}
	_ rest.KindProvider         = denials{}
	_ rest.SingularNameProvider = denials{}
	_ rest.Getter               = denials{}
	_ rest.Lister               = denials{}
	_ rest.TableConvertor       = denials{}
)

func (denials) New() runtime.Object     { return &AdmissionDenial{} }
func (denials) NewList() runtime.Object { return &AdmissionDenialList{} }
func (denials) Destroy()                {}
func (denials) NamespaceScoped() bool   { return true }
func (denials) Kind() string            { return "AdmissionDenial" }
func (denials) GetSingularName() string { return "admissiondenial" }
func (denials) resource() schema.GroupResource {
	return Decisions.WithResource("admissiondenials").GroupResource()
}

// Get is one denial.
func (r denials) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	o, ok := r.s.get(genericapirequest.NamespaceValue(ctx), name)
	if !ok {
		return nil, apierrors.NewNotFound(r.resource(), name)
	}
	return o, nil
}

// List lists a namespace's denials (or every namespace's), the oldest
// first.
func (r denials) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	ls, fs := labels.Everything(), fields.Everything()
	if opts != nil && opts.LabelSelector != nil {
		ls = opts.LabelSelector
	}
	if opts != nil && opts.FieldSelector != nil {
		fs = opts.FieldSelector
	}
	items, seq := r.s.list(genericapirequest.NamespaceValue(ctx), func(o *AdmissionDenial) bool {
		return ls.Matches(labels.Set(o.Labels)) && fs.Matches(fields.Set{"metadata.name": o.Name, "metadata.namespace": o.Namespace})
	})
	if items == nil {
		items = []AdmissionDenial{}
	}
	return &AdmissionDenialList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(seq, 10)}, Items: items}, nil
}

var denialColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "the denial's name: the resource's kind and name, and a hash of the request"},
	{Name: "Operation", Type: "string", Description: ".operation"},
	{Name: "Kind", Type: "string", Description: ".resource.kind"},
	{Name: "Resource", Type: "string", Description: ".resource.name"},
	{Name: "User", Type: "string", Description: ".user.username"},
	{Name: "Policies", Type: "string", Description: "the policies that denied"},
	{Name: "Age", Type: "date", Description: ".time"},
}

// ConvertToTable is the table of a denial or a list of them.
func (denials) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	t := &metav1.Table{ColumnDefinitions: denialColumns}
	add := func(o *AdmissionDenial) {
		var policies []string
		for _, f := range o.Findings {
			if f.Action == bus.ActionDeny && !slices.Contains(policies, f.Policy) {
				policies = append(policies, f.Policy)
			}
		}
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells:  []any{o.Name, o.Operation, o.Resource.Kind, o.Resource.Name, o.User.Username, strings.Join(policies, ","), duration.HumanDuration(time.Since(o.Time.Time))},
			Object: runtime.RawExtension{Object: o},
		})
	}
	switch v := obj.(type) {
	case *AdmissionDenial:
		add(v)
	case *AdmissionDenialList:
		t.ResourceVersion = v.ResourceVersion
		for i := range v.Items {
			add(&v.Items[i])
		}
	}
	return t, nil
}
