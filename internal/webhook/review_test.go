package webhook

import (
	"errors"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzDecodeReview: any body is a review or a bad request, and the fast
// path, whenever it takes a body, decodes it as encoding/json does.
func FuzzDecodeReview(f *testing.F) {
	f.Add(mustJSON(f, reviewOf(f, admissionv1.Create, pod("p", privileged))))
	f.Add(mustJSON(f, reviewOf(f, admissionv1.Delete, pod("p"))))
	f.Add(mustJSON(f, reviewOf(f, admissionv1.Update, namespaceObj("n"), dryRun)))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"CREATE","object":{"a":[1,2.5,null,{"b":true}]}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"UPDATE","object":{},"oldObject":"x"}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"CONNECT","object":null,"userInfo":{"extra":{"k":["v"]}}}}`))
	f.Add([]byte(`{"request":{"object":{"metadata":{"name":1e400}}}}`))
	f.Add([]byte(`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`))
	f.Add([]byte(``))
	f.Add([]byte(`{"request":{"object":{"a":"\u00e9\ud800","b":[1,-2.5e3,{}],"c":null}},"kind":"AdmissionReview"}`))
	f.Add([]byte(`{"request":{"userInfo":{"extra":{"k":[]}},"dryRun":null,"requestKind":null}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		sameAsSlow(t, body)
		rv, err := decodeReview(body)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v is not a bad request", err)
			}
			return
		}
		if rv.req == nil || rv.req.UID == "" {
			t.Fatal("decoded a review without a request uid")
		}
		switch rv.req.Operation {
		case admissionv1.Create, admissionv1.Update:
			if rv.object == nil {
				t.Fatal("create or update without an object")
			}
		case admissionv1.Delete, admissionv1.Connect:
		default:
			t.Fatalf("operation %q accepted", rv.req.Operation)
		}
		// What the handlers derive from a decoded review must not panic.
		_ = rv.ref()
		_ = rv.dryRun()
		_ = terminating(rv)
		_ = engineRequest(rv, nil)
	})
}

// TestRefOfNamespace: the API server puts a Namespace's own name in the
// request's namespace; the reference of the resource (what results and
// work items name) has none, as the Namespace is cluster-scoped, while a
// namespaced object without metadata.namespace takes the request's.
func TestRefOfNamespace(t *testing.T) {
	ns := reviewOf(t, admissionv1.Create, namespaceObj("team-a"), func(r *admissionv1.AdmissionRequest) {
		r.Namespace = "team-a"
		r.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	})
	rv, err := decodeReview(mustJSON(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	if ref := rv.ref(); ref.Namespace != "" || ref.Name != "team-a" || ref.Kind != "Namespace" {
		t.Fatalf("ref of a Namespace: %+v", ref)
	}
	if got := rv.namespace(); got != "team-a" {
		t.Fatalf("namespace for namespaceSelector = %q", got)
	}
	p := pod("p")
	delete(p["metadata"].(map[string]any), "namespace")
	podReview := reviewOf(t, admissionv1.Create, p, func(r *admissionv1.AdmissionRequest) { r.Namespace = "team-b" })
	if rv, err = decodeReview(mustJSON(t, podReview)); err != nil {
		t.Fatal(err)
	}
	if ref := rv.ref(); ref.Namespace != "team-b" {
		t.Fatalf("ref of a Pod without metadata.namespace: %+v", ref)
	}
}
