package reportserver

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/reports/reportindex"
)

// kind is one of the four kinds served: where, and how its objects and
// lists are made from the index's reports.
type kind struct {
	gv      schema.GroupVersion
	name    string
	plural  string
	cluster bool
	// source is the report-level source (openreports.io only).
	source string
	newObj func() runtime.Object
	list   func(metav1.ListMeta, []*PolicyReport) runtime.Object
	typed  func(*PolicyReport) runtime.Object
}

// kinds are the kinds served: wgpolicyk8s.io's and openreports.io's,
// namespaced and cluster-wide, over the same reports.
var kinds = []kind{
	{gv: GroupVersion, name: "PolicyReport", plural: "policyreports",
		newObj: func() runtime.Object { return &PolicyReport{} },
		typed:  func(o *PolicyReport) runtime.Object { return o },
		list: func(m metav1.ListMeta, items []*PolicyReport) runtime.Object {
			l := &PolicyReportList{ListMeta: m, Items: make([]PolicyReport, len(items))}
			for i, o := range items {
				l.Items[i] = *o
			}
			return l
		}},
	{gv: GroupVersion, name: "ClusterPolicyReport", plural: "clusterpolicyreports", cluster: true,
		newObj: func() runtime.Object { return &ClusterPolicyReport{} },
		typed:  func(o *PolicyReport) runtime.Object { return (*ClusterPolicyReport)(o) },
		list: func(m metav1.ListMeta, items []*PolicyReport) runtime.Object {
			l := &ClusterPolicyReportList{ListMeta: m, Items: make([]ClusterPolicyReport, len(items))}
			for i, o := range items {
				l.Items[i] = ClusterPolicyReport(*o)
			}
			return l
		}},
	{gv: OpenReports, name: "Report", plural: "reports", source: model.Source,
		newObj: func() runtime.Object { return &Report{} },
		typed:  func(o *PolicyReport) runtime.Object { return (*Report)(o) },
		list: func(m metav1.ListMeta, items []*PolicyReport) runtime.Object {
			l := &ReportList{ListMeta: m, Items: make([]Report, len(items))}
			for i, o := range items {
				l.Items[i] = Report(*o)
			}
			return l
		}},
	{gv: OpenReports, name: "ClusterReport", plural: "clusterreports", cluster: true, source: model.Source,
		newObj: func() runtime.Object { return &ClusterReport{} },
		typed:  func(o *PolicyReport) runtime.Object { return (*ClusterReport)(o) },
		list: func(m metav1.ListMeta, items []*PolicyReport) runtime.Object {
			l := &ClusterReportList{ListMeta: m, Items: make([]ClusterReport, len(items))}
			for i, o := range items {
				l.Items[i] = ClusterReport(*o)
			}
			return l
		}},
}

// reports serves one kind from the index: get, list (label and field
// selectors, pages with continue tokens), watch (from a
// resourceVersion), tables, delete.
type reports struct {
	kind
	x   *reportindex.Index
	del func(ctx context.Context, uid string) (bool, error)
	// stop ends every watch (the server is stopping).
	stop <-chan struct{}
}

var (
	_ rest.Storage              = (*reports)(nil)
	_ rest.Scoper               = (*reports)(nil)
	_ rest.KindProvider         = (*reports)(nil)
	_ rest.SingularNameProvider = (*reports)(nil)
	_ rest.Getter               = (*reports)(nil)
	_ rest.Lister               = (*reports)(nil)
	_ rest.Watcher              = (*reports)(nil)
	_ rest.GracefulDeleter      = (*reports)(nil)
)

// Delete deletes a report: every replica drops it (its results are
// retracted in the stream) until newer results arrive. It answers once
// this replica no longer serves it.
func (r *reports) Delete(ctx context.Context, name string, validate rest.ValidateObjectFunc, _ *metav1.DeleteOptions) (runtime.Object, bool, error) {
	if r.del == nil {
		return nil, false, apierrors.NewMethodNotSupported(r.resource(), "delete")
	}
	ns := genericapirequest.NamespaceValue(ctx)
	o, ok := r.object(name)
	if !ok || o.Namespace != ns {
		return nil, false, apierrors.NewNotFound(r.resource(), name)
	}
	obj := r.typed(o)
	if validate != nil {
		if err := validate(ctx, obj); err != nil {
			return nil, false, err
		}
	}
	found, err := r.del(ctx, name)
	if err != nil {
		return nil, false, apierrors.NewInternalError(err)
	}
	if !found {
		return nil, false, apierrors.NewNotFound(r.resource(), name)
	}
	return obj, true, nil
}

func (r *reports) New() runtime.Object { return r.newObj() }

func (r *reports) NewList() runtime.Object { return r.list(metav1.ListMeta{}, nil) }

func (r *reports) Destroy() {}

func (r *reports) NamespaceScoped() bool { return !r.cluster }

func (r *reports) Kind() string { return r.name }

func (r *reports) GetSingularName() string {
	return strings.ToLower(r.Kind())
}

func (r *reports) resource() schema.GroupResource {
	return r.gv.WithResource(r.plural).GroupResource()
}

// object is the report of uid as served, or false when there is none
// (or it is of the other kind).
func (r *reports) object(uid string) (*PolicyReport, bool) {
	e, ok := r.x.Get(uid)
	if !ok || e.Report.Cluster() != r.cluster {
		return nil, false
	}
	out := &PolicyReport{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(e.Report.Object.Object, out); err != nil {
		return nil, false
	}
	out.APIVersion, out.Kind, out.Source = r.gv.String(), r.name, r.source
	out.ResourceVersion = strconv.FormatUint(e.Version, 10)
	if !e.Created.IsZero() {
		out.CreationTimestamp = metav1.NewTime(e.Created.Truncate(time.Second))
	}
	return out, true
}

// Get is one report.
func (r *reports) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	o, ok := r.object(name)
	if !ok || o.Namespace != ns {
		return nil, apierrors.NewNotFound(r.resource(), name)
	}
	return r.typed(o), nil
}

// selector is what a list or watch selects.
type selector struct {
	ns     string
	all    bool
	labels labels.Selector
	fields fields.Selector
}

func (r *reports) selector(ctx context.Context, opts *metainternalversion.ListOptions) selector {
	ns, ok := genericapirequest.NamespaceFrom(ctx)
	s := selector{ns: ns, all: !r.cluster && (!ok || ns == metav1.NamespaceAll), labels: labels.Everything(), fields: fields.Everything()}
	if opts != nil && opts.LabelSelector != nil {
		s.labels = opts.LabelSelector
	}
	if opts != nil && opts.FieldSelector != nil {
		s.fields = opts.FieldSelector
	}
	return s
}

func (s selector) matches(o *PolicyReport) bool {
	return s.labels.Matches(labels.Set(o.Labels)) &&
		s.fields.Matches(fields.Set{"metadata.name": o.Name, "metadata.namespace": o.Namespace})
}

// List lists the reports of a namespace (or all), page by page.
func (r *reports) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	s := r.selector(ctx, opts)
	after := ""
	var limit int64
	if opts != nil {
		limit = opts.Limit
		if opts.Continue != "" {
			c, err := decodeContinue(opts.Continue)
			if err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			after = c
		}
	}
	if opts != nil && opts.ResourceVersion != "" && opts.ResourceVersion != "0" && opts.Continue == "" {
		v, err := strconv.ParseUint(opts.ResourceVersion, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("resourceVersion %q is not one this server gave", opts.ResourceVersion))
		}
		if opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact {
			// No history is kept: only the present can be listed.
			return nil, apierrors.NewResourceExpired(fmt.Sprintf("resourceVersion %d: this server keeps no past states to list exactly; list without resourceVersionMatch=Exact", v))
		}
		// Not older than v: a replica behind the one that gave it
		// waits a little for it.
		if err := r.reach(ctx, v); err != nil {
			return nil, err
		}
	}
	version := r.x.Version()
	items, after, more := r.page(s, after, limit)
	meta := metav1.ListMeta{ResourceVersion: strconv.FormatUint(r.x.Served(version), 10)}
	if more && limit > 0 {
		meta.Continue = encodeContinue(after)
	}
	return r.list(meta, items), nil
}

// page reads up to limit reports (all when limit is 0) the selector
// selects, in key order after the key after: the reports, the key of the
// last one read, and whether there are more. Selectors apply to what is
// read, so a page is filled from as many reads as it takes.
func (r *reports) page(s selector, after string, limit int64) (items []*PolicyReport, last string, more bool) {
	last = after
	for {
		batch := 500
		if limit > 0 {
			batch = int(limit) - len(items)
		}
		uids, _, m := r.x.Reports(s.ns, s.all || r.cluster && s.ns == "", last, batch)
		for _, uid := range uids {
			o, ok := r.object(uid)
			last = reportindex.ContinueKey(o.namespaceOr(), uid)
			if ok && s.matches(o) {
				items = append(items, o)
			}
		}
		more = m
		if !m || (limit > 0 && int64(len(items)) >= limit) {
			return items, last, more
		}
	}
}

// namespaceOr is the report's namespace, for continue keys (nil-safe).
func (o *PolicyReport) namespaceOr() string {
	if o == nil {
		return ""
	}
	return o.Namespace
}

func encodeContinue(after string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("v1:" + after))
}

func decodeContinue(token string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || !strings.HasPrefix(string(b), "v1:") {
		return "", fmt.Errorf("continue token %q is not one this server gave", token)
	}
	return strings.TrimPrefix(string(b), "v1:"), nil
}

// Watch streams the changes after opts.ResourceVersion. Without one (or
// with "0") it first gives every report it selects as Added, as the API
// server's watches do, unless sendInitialEvents is false; with
// sendInitialEvents (client-go's streaming lists) it then marks the end
// of them with a bookmark annotated k8s.io/initial-events-end.
func (r *reports) Watch(ctx context.Context, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	if opts == nil {
		opts = &metainternalversion.ListOptions{}
	}
	s := r.selector(ctx, opts)
	var since uint64
	if opts.ResourceVersion != "" {
		v, err := strconv.ParseUint(opts.ResourceVersion, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("resourceVersion %q is not one this server gave", opts.ResourceVersion))
		}
		since = v
	}
	streaming := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	initial := streaming || opts.SendInitialEvents == nil && since == 0
	w := &watcher{r: r, s: s, out: make(chan watch.Event, 64), done: make(chan struct{})}
	if !initial {
		if since == 0 {
			since = r.x.Version()
		}
		sub, err := r.x.Subscribe(since)
		if err != nil {
			return nil, apierrors.NewResourceExpired(err.Error())
		}
		w.sub, w.since = sub, since
		go w.run(ctx)
		return w, nil
	}
	// The initial state must be no older than the version asked for: a
	// replica behind the one that gave it waits a little, then says so
	// as the API server does (the client retries).
	if since > 0 {
		if err := r.reach(ctx, since); err != nil {
			return nil, err
		}
	}
	go w.runInitial(ctx, streaming && opts.AllowWatchBookmarks)
	return w, nil
}

// reach waits until the index has served version v, for up to 5 s.
func (r *reports) reach(ctx context.Context, v uint64) error {
	deadline := time.Now().Add(5 * time.Second)
	for r.x.Served(r.x.Version()) < v {
		if time.Now().After(deadline) {
			err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", v, r.x.Served(r.x.Version())), 1)
			err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// watcher turns index changes into watch events.
type watcher struct {
	r   *reports
	s   selector
	sub *reportindex.Subscription
	// since is where the watch started: local changes given again
	// (reportindex.Subscribe) carry it, so the watcher's version never
	// goes back.
	since uint64
	out   chan watch.Event
	done  chan struct{}
}

func (w *watcher) ResultChan() <-chan watch.Event { return w.out }

func (w *watcher) Stop() {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
}

// runInitial gives every report selected now as Added, the end of them
// as a bookmark if asked, then the changes since they were read.
func (w *watcher) runInitial(ctx context.Context, bookmark bool) {
	version := w.r.x.Version()
	items, after, more := w.r.page(w.s, "", 500)
	for {
		for _, o := range items {
			o.APIVersion, o.Kind = w.r.gv.String(), w.r.name
			if !w.send(ctx, watch.Event{Type: watch.Added, Object: w.r.typed(o)}) {
				close(w.out)
				return
			}
		}
		if !more {
			break
		}
		items, after, more = w.r.page(w.s, after, 500)
	}
	served := w.r.x.Served(version)
	if bookmark {
		mark := &PolicyReport{ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.FormatUint(served, 10),
			Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
		mark.APIVersion, mark.Kind = w.r.gv.String(), w.r.name
		if !w.send(ctx, watch.Event{Type: watch.Bookmark, Object: w.r.typed(mark)}) {
			close(w.out)
			return
		}
	}
	// The reports were read at version or later: the changes after it
	// bring the watcher up to date (some of them twice, as Modified).
	sub, err := w.r.x.Subscribe(version)
	if err != nil {
		w.send(ctx, watch.Event{Type: watch.Error, Object: &apierrors.NewResourceExpired(err.Error()).ErrStatus})
		close(w.out)
		return
	}
	w.sub, w.since = sub, version
	w.run(ctx)
}

func (w *watcher) run(ctx context.Context) {
	defer close(w.out)
	defer w.sub.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.done:
			return
		case <-w.r.stop:
			return
		case ch, ok := <-w.sub.C:
			if !ok {
				if err := w.sub.Err(); err != nil {
					w.send(ctx, watch.Event{Type: watch.Error, Object: &apierrors.NewResourceExpired(err.Error()).ErrStatus})
				}
				return
			}
			if ev, ok := w.event(ch); ok && !w.send(ctx, ev) {
				return
			}
		}
	}
}

func (w *watcher) send(ctx context.Context, ev watch.Event) bool {
	select {
	case w.out <- ev:
		return true
	case <-ctx.Done():
	case <-w.done:
	case <-w.r.stop:
	}
	return false
}

// event is the watch event of a change, if the watch selects it.
func (w *watcher) event(ch reportindex.Change) (watch.Event, bool) {
	if (ch.Namespace == "") != w.r.cluster || (!w.s.all && !w.r.cluster && ch.Namespace != w.s.ns) {
		return watch.Event{}, false
	}
	o, ok := w.r.object(ch.UID)
	typ := watch.EventType(ch.Type)
	if ch.Type == reportindex.Deleted || !ok {
		// Gone (now, if not at this change): the last state is not
		// kept, so the object names the report only.
		o = &PolicyReport{ObjectMeta: metav1.ObjectMeta{Name: ch.UID, Namespace: ch.Namespace}}
		typ = watch.Deleted
	}
	o.ResourceVersion = strconv.FormatUint(max(w.r.x.Served(ch.Version), w.since), 10)
	if typ != watch.Deleted && !w.s.matches(o) {
		return watch.Event{}, false
	}
	o.APIVersion, o.Kind = w.r.gv.String(), w.r.name
	return watch.Event{Type: typ, Object: w.r.typed(o)}, true
}
