package webhook

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// setMeta sets one metadata field of the pod.
func setMeta(field string, v any) func(map[string]any) {
	return func(p map[string]any) { p["metadata"].(map[string]any)[field] = v }
}

// TestForgedIdentifiersRefused: a review whose identifiers the API server
// cannot have sent (issue 28, finding 6: a 5,000-byte metadata.uid became a
// result subject longer than nats-server's control line) or whose userInfo
// no API server sends (finding 14: a megabyte of invented groups copied
// into every work item) is answered 400 and counted by reason, before it
// is evaluated, published or queued. What the API server sends passes.
func TestForgedIdentifiersRefused(t *testing.T) {
	const uuid = "6f1c2a3e-9d7b-4c1e-8f2a-0b9e8d7c6a5f"
	long := strings.Repeat("a", 5000)
	manyGroups := make([]string, 2000)
	for i := range manyGroups {
		manyGroups[i] = "g"
	}
	bigExtra := map[string]authenticationv1.ExtraValue{"k": {strings.Repeat("x", 1<<20)}}
	largeTotal := make([]string, 100)
	for i := range largeTotal {
		largeTotal[i] = strings.Repeat("g", 1000)
	}
	oldPod, err := json.Marshal(pod("p", setMeta("uid", "another-uid")))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		op     admissionv1.Operation
		object map[string]any
		mods   []func(*admissionv1.AdmissionRequest)
		reason string // "" when the review is the API server's and passes
	}{
		"long object uid": {op: admissionv1.Create, object: pod("p", setMeta("uid", long)), reason: refusedIdentifier},
		"long request uid": {op: admissionv1.Create, object: pod("p"), reason: refusedIdentifier,
			mods: []func(*admissionv1.AdmissionRequest){func(r *admissionv1.AdmissionRequest) { r.UID = types.UID(long) }}},
		"request uid with a NUL": {op: admissionv1.Create, object: pod("p"), reason: refusedIdentifier,
			mods: []func(*admissionv1.AdmissionRequest){func(r *admissionv1.AdmissionRequest) { r.UID = "u\x00" }}},
		"uid with a dot-star":   {op: admissionv1.Create, object: pod("p", setMeta("uid", "a.*")), reason: refusedIdentifier},
		"uid with a space":      {op: admissionv1.Create, object: pod("p", setMeta("uid", "a b")), reason: refusedIdentifier},
		"uid not a string":      {op: admissionv1.Create, object: pod("p", setMeta("uid", 7.0)), reason: refusedIdentifier},
		"namespace not a label": {op: admissionv1.Create, object: pod("p", inNamespace("Team_A")), reason: refusedIdentifier},
		"long namespace":        {op: admissionv1.Create, object: pod("p", inNamespace(strings.Repeat("n", 64))), reason: refusedIdentifier},
		"name with a slash":     {op: admissionv1.Create, object: pod("a/b", setMeta("uid", uuid)), reason: refusedIdentifier},
		"long name":             {op: admissionv1.Create, object: pod(long, setMeta("uid", uuid)), reason: refusedIdentifier},
		"name disagrees": {op: admissionv1.Create, object: pod("p"), reason: refusedIdentifier,
			mods: []func(*admissionv1.AdmissionRequest){func(r *admissionv1.AdmissionRequest) { r.Name = "q" }}},
		"create with a resourceVersion": {op: admissionv1.Create, object: pod("p"), reason: refusedIdentifier,
			mods: []func(*admissionv1.AdmissionRequest){func(r *admissionv1.AdmissionRequest) {
				r.Object = runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default","uid":"uid-p","resourceVersion":"9"}}`)}
			}}},
		"update of another object": {op: admissionv1.Update, object: pod("p"), reason: refusedIdentifier,
			mods: []func(*admissionv1.AdmissionRequest){func(r *admissionv1.AdmissionRequest) { r.OldObject = runtime.RawExtension{Raw: oldPod} }}},
		"2,000 groups": {op: admissionv1.Create, object: pod("p"), reason: refusedUserInfo,
			mods: []func(*admissionv1.AdmissionRequest){func(r *admissionv1.AdmissionRequest) { r.UserInfo.Groups = manyGroups }}},
		"a megabyte of extra": {op: admissionv1.Create, object: pod("p"), reason: refusedUserInfo,
			mods: []func(*admissionv1.AdmissionRequest){func(r *admissionv1.AdmissionRequest) { r.UserInfo.Extra = bigExtra }}},
		"100 KB of groups": {op: admissionv1.Create, object: pod("p"), reason: refusedUserInfo,
			mods: []func(*admissionv1.AdmissionRequest){func(r *admissionv1.AdmissionRequest) { r.UserInfo.Groups = largeTotal }}},
		"long username": {op: admissionv1.Create, object: pod("p"), reason: refusedUserInfo,
			mods: []func(*admissionv1.AdmissionRequest){func(r *admissionv1.AdmissionRequest) { r.UserInfo.Username = long }}},

		"the API server's create": {op: admissionv1.Create, object: pod("p", setMeta("uid", uuid)),
			mods: []func(*admissionv1.AdmissionRequest){func(r *admissionv1.AdmissionRequest) {
				r.UID = uuid
				r.UserInfo = authenticationv1.UserInfo{
					Username: "system:serviceaccount:" + strings.Repeat("n", 63) + ":" + strings.Repeat("s", 253),
					Groups:   manyGroups[:300],
					Extra:    map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"p"}},
				}
			}}},
		"a generated name": {op: admissionv1.Create, object: pod("p-x7k2q"),
			mods: []func(*admissionv1.AdmissionRequest){func(r *admissionv1.AdmissionRequest) { r.Name = "" }}},
		"an RBAC name": {op: admissionv1.Create, object: pod("system:controller:"+strings.Repeat("c", 300), setMeta("uid", uuid))},
		"an update":    {op: admissionv1.Update, object: pod("p")},
		"a subresource of another kind": {op: admissionv1.Create, object: pod("p"),
			mods: []func(*admissionv1.AdmissionRequest){func(r *admissionv1.AdmissionRequest) {
				r.SubResource = "binding"
				r.Object = runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"Binding","metadata":{"name":"p","namespace":"default"}}`)}
			}}},
		"a Namespace": {op: admissionv1.Create, object: namespaceObj("team-a"),
			mods: []func(*admissionv1.AdmissionRequest){func(r *admissionv1.AdmissionRequest) {
				r.Namespace = "team-a"
				r.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "namespaces"}
			}}},
	}
	h := newHarness(t, staticSource(t, enforcePrivileged), testConfig())
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			// The request's uid is the API server's (reviewOf makes one of
			// the object's name), unless the case changes it.
			ar := reviewOf(t, tc.op, tc.object, append([]func(*admissionv1.AdmissionRequest){func(r *admissionv1.AdmissionRequest) { r.UID = uuid }}, tc.mods...)...)
			if tc.op == admissionv1.Update && len(ar.Request.OldObject.Raw) == 0 {
				ar.Request.OldObject = ar.Request.Object
			}
			body, err := json.Marshal(ar)
			if err != nil {
				t.Fatal(err)
			}
			before := counter(t, h.reg, "verdict_webhook_refused_reviews_total", map[string]string{"reason": tc.reason})
			code, out := h.post(PathValidate, contentTypeJSON, body)
			if tc.reason == "" {
				if code != http.StatusOK {
					t.Fatalf("status %d, want 200: %s", code, out)
				}
				return
			}
			if code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", code, out)
			}
			var st metav1.Status
			if err := json.Unmarshal(out, &st); err != nil || st.Code != http.StatusBadRequest || st.Reason != metav1.StatusReasonBadRequest {
				t.Fatalf("answer is not a 400 Status: %v: %s", err, out)
			}
			if len(out) > 2048 {
				t.Fatalf("the refusal echoes %d bytes of the review back", len(out))
			}
			if got := counter(t, h.reg, "verdict_webhook_refused_reviews_total", map[string]string{"reason": tc.reason}); got != before+1 {
				t.Fatalf("refused_reviews_total{reason=%q} went from %v to %v", tc.reason, before, got)
			}
		})
	}
	// Nothing refused was published.
	for _, ev := range h.results.Events() {
		if len(ev.Resource.UID) > maxUIDLen || len(ev.Resource.Name) > maxNameLen || ev.Resource.Name == "q" {
			t.Fatalf("a refused review's result was published: %+v", ev.Resource)
		}
	}
}
