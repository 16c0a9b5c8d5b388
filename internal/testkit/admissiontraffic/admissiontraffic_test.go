package admissiontraffic

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

// twoPods is a workload of two Pods, the first with a uid of its own and
// no namespace.
const twoPods = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  uid: from-the-file\nspec:\n  containers:\n  - name: c\n    image: nginx\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: b\n  namespace: team\nspec:\n  containers:\n  - name: c\n    image: nginx\n"

func writePods(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pods.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Every review sent has its own request uid and object uid, as the API
// server gives them, and is otherwise the review built from the Pod.
func TestTemplatesHaveUniqueUIDs(t *testing.T) {
	rs, err := ReadTemplates(writePods(t, twoPods), "CREATE", "loadgen")
	if err != nil || len(rs) != 2 {
		t.Fatalf("%d reviews, %v", len(rs), err)
	}
	seen := map[string]bool{}
	for n := range uint64(2000) {
		var ar struct {
			Request struct {
				UID       string `json:"uid"`
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
				Object    struct {
					Metadata struct {
						UID string `json:"uid"`
					} `json:"metadata"`
				} `json:"object"`
			} `json:"request"`
		}
		r := rs[n%2]
		if err := json.Unmarshal(r.WithUIDs(n+1<<47), &ar); err != nil {
			t.Fatal(err)
		}
		req, uid := ar.Request.UID, ar.Request.Object.Metadata.UID
		if len(req) != 36 || len(uid) != 36 || seen[req] || seen[uid] || req == uid {
			t.Fatalf("review %d: request uid %q, object uid %q (seen before: %v, %v)", n, req, uid, seen[req], seen[uid])
		}
		seen[req], seen[uid] = true, true
		if want := []string{"a", "b"}[n%2]; ar.Request.Name != want || ar.Request.Namespace != []string{"default", "team"}[n%2] {
			t.Fatalf("review %d names %s/%s", n, ar.Request.Namespace, ar.Request.Name)
		}
	}
}

// A workload that cannot be sent says which document and why.
func TestReadTemplatesSaysWhy(t *testing.T) {
	tests := map[string]struct {
		content string
		want    string
	}{
		"no documents":   {"", "no documents in "},
		"no metadata":    {"apiVersion: v1\nkind: Pod\n", "has no metadata"},
		"a uid repeated": {"apiVersion: v1\nkind: Pod\nmetadata:\n  name: loadgen-request-uid-0000000000000000\n", "its uids cannot be placed"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ReadTemplates(writePods(t, tc.content), "CREATE", "loadgen")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// Review is an AdmissionReview as the API server's types read it.
func TestReviewDecodes(t *testing.T) {
	pods, err := ReadPods(writePods(t, twoPods))
	if err != nil {
		t.Fatal(err)
	}
	body, err := Review(pods[0], Request{UID: "req-1", Operation: "UPDATE", Username: "bench"})
	if err != nil {
		t.Fatal(err)
	}
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &ar); err != nil {
		t.Fatal(err)
	}
	r := ar.Request
	if ar.Kind != "AdmissionReview" || r == nil || r.UID != "req-1" || r.Operation != admissionv1.Update || r.Name != "a" || r.Namespace != "default" ||
		r.Kind.Kind != "Pod" || r.Resource.Resource != "pods" || r.UserInfo.Username != "bench" || len(r.UserInfo.Groups) != 1 {
		t.Fatalf("review %s", body)
	}
	var obj struct {
		Metadata struct{ UID string } `json:"metadata"`
	}
	if err := json.Unmarshal(r.Object.Raw, &obj); err != nil || obj.Metadata.UID != "from-the-file" {
		t.Fatalf("object %s: %v", r.Object.Raw, err)
	}
}

// Send reads the answer: allowed or not, or why there is none.
func TestSend(t *testing.T) {
	tests := map[string]struct {
		status  int
		answer  string
		allowed bool
		check   func(error) bool
	}{
		"allowed":      {200, `{"response":{"uid":"u","allowed":true}}`, true, func(err error) bool { return err == nil }},
		"denied":       {200, `{"response":{"uid":"u","allowed":false}}`, false, func(err error) bool { return err == nil }},
		"overloaded":   {429, `{"kind":"Status"}`, false, func(err error) bool { var se *StatusError; return errors.As(err, &se) && se.Code == 429 }},
		"not a review": {200, `{"kind":"Status"}`, false, func(err error) bool { return errors.Is(err, ErrNotReview) }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Content-Type") != "application/json" {
					http.Error(w, "content type", http.StatusUnsupportedMediaType)
					return
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.answer))
			}))
			defer ts.Close()
			allowed, err := Send(t.Context(), ts.Client(), ts.URL, []byte(`{}`))
			if allowed != tc.allowed || !tc.check(err) {
				t.Fatalf("allowed %v, error %v", allowed, err)
			}
		})
	}
}
