package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/rs/zerolog"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
)

const (
	admissionAPIVersion = "admission.k8s.io/v1"
	admissionKind       = "AdmissionReview"
)

// review is a decoded AdmissionReview request: the request itself and its
// objects in the engine's untyped form (float64 numbers).
type review struct {
	req       *admissionv1.AdmissionRequest
	object    map[string]any
	oldObject map[string]any
	// resourceRef is ref's answer, made once by decodeReview: every
	// result event of the request names the resource.
	resourceRef ResourceRef
}

// dryRun reports whether the request is a dry run.
func (rv *review) dryRun() bool { return rv.req.DryRun != nil && *rv.req.DryRun }

// namespace is the namespace a namespaceSelector looks at: the request's,
// or for a Namespace its own name.
func (rv *review) namespace() string {
	if rv.isNamespace() && rv.req.Namespace == "" {
		return rv.req.Name
	}
	return rv.req.Namespace
}

// resource is the object the request is about: the new object, or the old
// one for a delete.
func (rv *review) resource() map[string]any {
	if rv.object != nil {
		return rv.object
	}
	return rv.oldObject
}

// ref names the request's resource.
func (rv *review) ref() ResourceRef { return rv.resourceRef }

// makeRef names the request's resource, from the object where it has the
// field and from the request otherwise.
func (rv *review) makeRef() ResourceRef {
	obj := rv.resource()
	r := ResourceRef{
		APIVersion:      document.String(obj, "apiVersion"),
		Kind:            document.String(obj, "kind"),
		Namespace:       document.String(obj, "metadata", "namespace"),
		Name:            document.String(obj, "metadata", "name"),
		UID:             document.String(obj, "metadata", "uid"),
		ResourceVersion: document.String(obj, "metadata", "resourceVersion"),
	}
	if r.Kind == "" {
		r.Kind = rv.req.Kind.Kind
		r.APIVersion = metav1.GroupVersion{Group: rv.req.Kind.Group, Version: rv.req.Kind.Version}.String()
	}
	if r.Name == "" {
		r.Name = rv.req.Name
	}
	if r.Namespace == "" && !rv.isNamespace() {
		// (For a Namespace the API server puts its own name in the
		// request's namespace; the object is cluster-scoped.)
		r.Namespace = rv.req.Namespace
	}
	return r
}

// isNamespace reports whether the request is about a Namespace.
func (rv *review) isNamespace() bool {
	return rv.req.Resource.Group == "" && rv.req.Resource.Resource == "namespaces"
}

// decodeReview reads an admission.k8s.io/v1 AdmissionReview request. Every
// problem is an ErrBadRequest with a reason.
func decodeReview(body []byte) (*review, error) {
	ar, object, oldObject, fast := fastReview(body)
	if !fast {
		ar = admissionv1.AdmissionReview{}
		if err := json.Unmarshal(body, &ar); err != nil {
			return nil, httpError(ErrBadRequest, err, "malformed AdmissionReview")
		}
	}
	if ar.APIVersion != admissionAPIVersion || ar.Kind != admissionKind {
		return nil, httpError(ErrBadRequest, nil, "expected %s %s, got apiVersion %q kind %q", admissionAPIVersion, admissionKind, ar.APIVersion, ar.Kind)
	}
	req := ar.Request
	if req == nil {
		return nil, httpError(ErrBadRequest, nil, "AdmissionReview has no request")
	}
	if req.UID == "" {
		return nil, httpError(ErrBadRequest, nil, "request.uid is empty")
	}
	switch req.Operation {
	case admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect:
	default:
		return nil, httpError(ErrBadRequest, nil, "request.operation %q is not CREATE, UPDATE, DELETE or CONNECT", req.Operation)
	}
	rv := &review{req: req, object: object, oldObject: oldObject}
	if !fast {
		var err error
		if rv.object, err = decodeObject(req.Object.Raw); err != nil {
			return nil, httpError(ErrBadRequest, err, "request.object")
		}
		if rv.oldObject, err = decodeObject(req.OldObject.Raw); err != nil {
			return nil, httpError(ErrBadRequest, err, "request.oldObject")
		}
	}
	if rv.object == nil && (req.Operation == admissionv1.Create || req.Operation == admissionv1.Update) {
		return nil, httpError(ErrBadRequest, nil, "request.object is required for %s", req.Operation)
	}
	if err := rv.consistent(); err != nil {
		return nil, err
	}
	if err := rv.checkReview(); err != nil {
		return nil, err
	}
	rv.resourceRef = rv.makeRef()
	return rv, nil
}

var errNotObject = errors.New("not a JSON object")

// consistent checks that the objects say what the request says of them:
// the API server sends the object in the kind and namespace of the
// request (it converts to the webhook's version and sets the namespace
// from the path before admission), so a disagreement is a malformed or
// forged review, not something to evaluate.
func (rv *review) consistent() error {
	if rv.req.SubResource != "" {
		return nil // a subresource's object is of another kind (PodExecOptions, Scale)
	}
	for _, o := range []struct {
		field string
		obj   map[string]any
	}{{"request.object", rv.object}, {"request.oldObject", rv.oldObject}} {
		if o.obj == nil {
			continue
		}
		if k := document.String(o.obj, "kind"); k != "" && k != rv.req.Kind.Kind {
			return httpError(ErrBadRequest, nil, "%s is a %s, request.kind says %s", o.field, k, rv.req.Kind.Kind)
		}
		if ns := document.String(o.obj, "metadata", "namespace"); ns != "" && ns != rv.req.Namespace {
			return httpError(ErrBadRequest, nil, "%s is in namespace %q, request.namespace says %q", o.field, ns, rv.req.Namespace)
		}
	}
	return nil
}

// decodeObject decodes raw JSON into the engine's untyped form; null or
// nothing is nil.
func decodeObject(raw []byte) (map[string]any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	switch t := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return t, nil
	default:
		return nil, errNotObject
	}
}

// decision is what an admission endpoint decides.
type decision struct {
	resp    *admissionv1.AdmissionResponse
	outcome Outcome
	// findings are the policies' rules that denied, warned or mutated,
	// collected for the admission log only when it is on.
	findings []Finding
}

// admissionFunc decides one decoded admission request.
type admissionFunc func(ctx context.Context, rv *review) (decision, error)

// admissionHandler adapts an admissionFunc to a Handler: it reads and
// decodes the AdmissionReview, adds the request's identity to the logger
// and encodes the answer.
func (s *Server) admissionHandler(endpoint string, fn admissionFunc) Handler {
	return func(ctx context.Context, r *http.Request) (*Reply, error) {
		body, err := bodyFrom(ctx)
		if err != nil {
			return nil, err
		}
		rv, err := decodeReview(body)
		if err != nil {
			if reason := refusedReason(err); reason != "" {
				s.metrics.refused.WithLabelValues(reason).Inc()
			}
			return nil, err
		}
		// Kyverno's admission metrics (withMetrics) count every decoded
		// review, those that end in an error as not allowed.
		var kept *answer
		if s.metrics.kyverno != nil {
			if a, ok := ctx.Value(answerKey{}).(*answer); ok {
				a.review, kept = rv, a
			}
		}
		ref := rv.ref()
		logFrom(ctx).UpdateContext(func(c zerolog.Context) zerolog.Context {
			return c.Str(logkey.AdmissionUID, string(rv.req.UID)).Str(logkey.Operation, string(rv.req.Operation)).
				Str(logkey.Kind, ref.Kind).Str(logkey.Namespace, ref.Namespace).Str(logkey.Name, ref.Name).
				Str(logkey.Subresource, rv.req.SubResource).Bool(logkey.DryRun, rv.dryRun())
		})
		var d decision
		if s.filter.Skips(rv.req.Resource.Group, rv.req.Resource.Resource, rv.req.SubResource, rv.namespace()) {
			// The configurations never send these; a stale configuration or
			// a forged review gets the same answer.
			d = allow(nil)
			d.outcome = OutcomeSkipped
		} else if d, err = fn(ctx, rv); err != nil {
			return nil, err
		}
		d.resp.UID = rv.req.UID
		if kept != nil {
			kept.allowed = d.resp.Allowed
		}
		out, err := encodeReview(d.resp)
		if err != nil {
			return nil, fmt.Errorf("encode AdmissionReview: %w", err)
		}
		reply := &Reply{ContentType: contentTypeJSON, Body: out, Outcome: d.outcome}
		if s.decisions != nil && d.outcome != OutcomeSkipped {
			// Recorded once the answer went out, and only if it did.
			reply.sent = func() { s.recordDecision(ctx, endpoint, rv, d) }
		}
		return reply, nil
	}
}

// allow admits, with warnings if any.
func allow(warnings []string) decision {
	outcome := OutcomeAllowed
	if len(warnings) > 0 {
		outcome = OutcomeWarned
	}
	return decision{resp: &admissionv1.AdmissionResponse{Allowed: true, Warnings: warnings}, outcome: outcome}
}

// deny refuses with a message (403 Forbidden, as the API server reports a
// webhook denial).
func deny(msg string, warnings []string) decision {
	return decision{resp: &admissionv1.AdmissionResponse{
		Allowed:  false,
		Warnings: warnings,
		Result: &metav1.Status{
			Status:  metav1.StatusFailure,
			Message: msg,
			Reason:  metav1.StatusReasonForbidden,
			Code:    http.StatusForbidden,
		},
	}, outcome: OutcomeDenied}
}

// engineRequest builds the engine's view of the admission request.
func engineRequest(rv *review, nsLabels map[string]string) *engine.Request {
	ui := rv.req.UserInfo
	var extra map[string][]string
	if len(ui.Extra) > 0 {
		extra = make(map[string][]string, len(ui.Extra))
		for k, v := range ui.Extra {
			extra[k] = []string(v)
		}
	}
	return &engine.Request{
		Operation:   string(rv.req.Operation),
		Object:      rv.object,
		OldObject:   rv.oldObject,
		SubResource: rv.req.SubResource,
		Resource:    rv.req.Resource.Resource,
		UserInfo: engine.UserInfo{
			Username: ui.Username,
			UID:      ui.UID,
			Groups:   ui.Groups,
			Extra:    extra,
		},
		NamespaceLabels: nsLabels,
		DryRun:          rv.dryRun(),
		Namespace:       rv.req.Namespace,
		Name:            rv.req.Name,
	}
}
