package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/verdict-dev/verdict/internal/cleaner"
)

// deleters is a DeleteAuthorizer: the users in may delete, "broken"
// gets an error; it records what it was asked.
type deleters struct {
	may   map[string]bool
	mu    sync.Mutex
	asked []DeleteTarget
}

func (d *deleters) MayDelete(_ context.Context, u authenticationv1.UserInfo, t DeleteTarget) (bool, string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked = append(d.asked, t)
	if u.Username == "broken" {
		return false, "", errors.New("the API server is unreachable")
	}
	return d.may[u.Username], "RBAC: no rule", nil
}

func configMap(name string, labels map[string]any) map[string]any {
	meta := map[string]any{"name": name, "namespace": "team", "resourceVersion": "7"}
	if labels != nil {
		meta["labels"] = labels
	}
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
}

// TestValidateTTL: PathValidateTTL admits the TTL label only from
// whoever may delete the object, when it is set or changed; removing it,
// leaving it as it is, a subresource's write and a delete need nothing
// (issue 28, finding 12; TestE2ETTLLabelNeedsDelete on the API server).
func TestValidateTTL(t *testing.T) {
	if LabelTTL != cleaner.LabelTTL {
		t.Fatalf("the webhook guards %s, the cleaner honours %s", LabelTTL, cleaner.LabelTTL)
	}
	ttl := map[string]any{LabelTTL: "1h"}
	tests := map[string]struct {
		user     string
		op       admissionv1.Operation
		obj, old map[string]any
		sub      string
		allowed  bool
		asked    bool
		message  string
	}{
		"create, may delete":                {user: "carol", op: admissionv1.Create, obj: configMap("a", ttl), allowed: true, asked: true},
		"create, may not delete":            {user: "bob", op: admissionv1.Create, obj: configMap("a", ttl), asked: true, message: "bob may not delete it (RBAC: no rule)"},
		"label added, may not delete":       {user: "bob", op: admissionv1.Update, obj: configMap("a", ttl), old: configMap("a", nil), asked: true, message: "may not delete"},
		"label changed, may not delete":     {user: "bob", op: admissionv1.Update, obj: configMap("a", ttl), old: configMap("a", map[string]any{LabelTTL: "2h"}), asked: true, message: "may not delete"},
		"label kept":                        {user: "bob", op: admissionv1.Update, obj: configMap("a", ttl), old: configMap("a", ttl), allowed: true},
		"label removed":                     {user: "bob", op: admissionv1.Update, obj: configMap("a", nil), old: configMap("a", ttl), allowed: true},
		"no label":                          {user: "bob", op: admissionv1.Create, obj: configMap("a", map[string]any{"x": "y"}), allowed: true},
		"a subresource's write":             {user: "bob", op: admissionv1.Update, obj: configMap("a", ttl), old: configMap("a", nil), sub: "status", allowed: true},
		"the authorizer fails: fail closed": {user: "broken", op: admissionv1.Create, obj: configMap("a", ttl), asked: true, message: "could not be checked"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := &deleters{may: map[string]bool{"carol": true}}
			h := newHarness(t, staticSource(t), testConfig(), WithDeleteAuthorizer(d))
			resp := h.admit(PathValidateTTL, reviewOf(t, tc.op, tc.obj, func(r *admissionv1.AdmissionRequest) {
				r.UserInfo = authenticationv1.UserInfo{Username: tc.user}
				r.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}
				r.SubResource = tc.sub
				if tc.old != nil {
					raw, err := json.Marshal(tc.old)
					if err != nil {
						t.Fatal(err)
					}
					r.OldObject = runtime.RawExtension{Raw: raw}
				}
			}))
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed %v, want %v: %+v", resp.Allowed, tc.allowed, resp.Result)
			}
			if tc.message != "" && (resp.Result == nil || !strings.Contains(resp.Result.Message, tc.message)) {
				t.Fatalf("message %+v, want it to say %q", resp.Result, tc.message)
			}
			want := DeleteTarget{Version: "v1", Resource: "configmaps", Namespace: "team", Name: "a"}
			if asked := len(d.asked) > 0; asked != tc.asked || (asked && d.asked[0] != want) {
				t.Fatalf("asked %+v, want asked %v about %+v", d.asked, tc.asked, want)
			}
			if tc.asked {
				result := ttlAllowed
				switch {
				case tc.user == "broken":
					result = ttlError
				case !tc.allowed:
					result = ttlDenied
				}
				if got := counter(t, h.reg, "verdict_webhook_ttl_label_checks_total", map[string]string{"result": result}); got != 1 {
					t.Fatalf("%s counted %v", result, got)
				}
			}
		})
	}
}
