package app_test

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit"
)

// sidecarWebhook is a mutating webhook, in the test process, that adds a
// container "sidecar" to Pods that lack one: a mutation made after
// Verdict's.
func sidecarWebhook(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		if !strings.Contains(string(review.Request.Object.Raw), `"name":"sidecar"`) {
			pt := admissionv1.PatchTypeJSONPatch
			resp.PatchType = &pt
			resp.Patch = []byte(`[{"op":"add","path":"/spec/containers/-","value":{"name":"sidecar","image":"busybox:1.36"}}]`)
		}
		review.Response, review.Request = resp, nil
		_ = json.NewEncoder(w).Encode(review)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestE2EReinvocation: through the real API server, a MutatingPolicy with
// reinvocationPolicy IfNeeded is reinvoked after another webhook changed
// the object (its Verdict webhook is registered IfNeeded): the sidecar
// the later webhook adds gets the policy's pull policy too.
func TestE2EReinvocation(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	mpol := strings.Replace(alwaysPullMPol, "spec:\n  autogen:", "spec:\n  reinvocationPolicy: IfNeeded\n  autogen:", 1)
	if _, err := e.dyn.Resource(policycache.MutatingPolicies).Create(ctx, testkit.Unstructured(t, mpol), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	srv := sidecarWebhook(t)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	none := admissionregistrationv1.SideEffectClassNone
	// After Verdict's configuration by name, as the API server orders them.
	sidecar := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "zz-sidecar"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "sidecar.test.example",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(srv.URL + "/mutate"), CABundle: ca},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "team"}},
			SideEffects:             &none,
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := e.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, sidecar, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startReplica(t, "replica-a", "", nil)
	waitEnforced(t, e.kube)

	pods := e.kube.CoreV1().Pods("team")
	testkit.EventuallyTrue(t, 30*time.Second, "the sidecar mutated by the reinvoked policy", func() bool {
		p, err := pods.Create(ctx, pod("reinvoked", false), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Logf("create: %v", err)
			return false
		}
		for _, c := range p.Spec.Containers {
			if c.ImagePullPolicy != "Always" {
				t.Logf("container %s: imagePullPolicy %q", c.Name, c.ImagePullPolicy)
				return false
			}
		}
		return len(p.Spec.Containers) == 2
	})
}
