package app_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/ocitest"
	webhookapp "github.com/verdict-dev/verdict/internal/webhook/app"
)

// signedImagesPolicy requires images of the registry's trusted/ path to
// be signed by key (the transparency log and SCTs off: no public Rekor
// is reachable here), pinning them to their digests.
func signedImagesPolicy(t *testing.T, host, keyPEM string) string {
	t.Helper()
	key, err := json.Marshal(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return `{"apiVersion":"verdict.dev/v1","kind":"ClusterPolicy","metadata":{"name":"signed-images"},
"spec":{"validationFailureAction":"Enforce","webhookTimeoutSeconds":15,"rules":[{"name":"signed",
"match":{"any":[{"resources":{"kinds":["Pod"]}}]},
"verifyImages":[{"imageReferences":["` + host + `/trusted/*"],"attestors":[{"entries":[{"keys":{"publicKeys":` + string(key) + `,
"rekor":{"url":"https://rekor.example","ignoreTlog":true},"ctlog":{"ignoreSCT":true}}}]}]}]}]}}`
}

func imagePod(name, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}},
	}
}

// TestE2EVerifyImages: through the real kube-apiserver, with images pushed
// and signed in a registry in the test process, a Pod with an unsigned
// image is denied with the verifier's reason; a Pod with a signed image,
// named by tag, is admitted with its image rewritten to the digest; a
// Deployment is checked through autogen, its template pinned too.
func TestE2EVerifyImages(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	// A registry with TLS from its own CA, which the replica is given.
	reg := ocitest.NewRegistry(t, ocitest.WithTLS(ocitest.NewCA(t)))
	key := ocitest.NewKey(t)
	signed := reg.PushImage(t, "trusted/app", "v1")
	reg.Sign(t, signed.Ref, key)
	unsigned := reg.PushImage(t, "trusted/unsigned", "v1")
	if _, err := e.dyn.Resource(policycache.ClusterPolicies).Create(ctx, testkit.Unstructured(t, signedImagesPolicy(t, reg.Host(), key.PublicKeyPEM())), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "registry-ca.pem")
	if err := os.WriteFile(caFile, []byte(reg.RootsPEM()), 0o600); err != nil {
		t.Fatal(err)
	}
	e.startReplica(t, "replica-a", "", func(c *webhookapp.Config) {
		c.Registries.CAFile = caFile
		// The registry is on the loopback, which the default blocklist
		// refuses: the operator allows it by replacing the list.
		c.Registries.Blocklist = []string{"169.254.0.0/16"}
	})
	waitEnforced(t, e.kube)

	pods := e.kube.CoreV1().Pods("team")
	var err error
	testkit.EventuallyTrue(t, 30*time.Second, "the unsigned image denied", func() bool {
		_, err = pods.Create(ctx, imagePod("unsigned", unsigned.Tag), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "signed-images")
	})
	// The denial lists the blocking rules in YAML, which folds long lines.
	for _, want := range []string{"failed to verify image " + unsigned.Tag + ": .attestors[0].entries[0].keys:", "no signatures found"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("denial %q does not give the verifier's reason %q", err, want)
		}
	}

	p, err := pods.Create(ctx, imagePod("signed", signed.Tag), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("signed image refused: %v", err)
	}
	if got, want := p.Spec.Containers[0].Image, signed.Tag+"@"+signed.Digest; got != want {
		t.Errorf("stored image %q, want %q (pinned to its digest)", got, want)
	}

	deploys := e.kube.AppsV1().Deployments("team")
	deploy := func(name, image string) *appsv1.Deployment {
		labels := map[string]string{"app": name}
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: imagePod(name, image).Spec},
			},
		}
	}
	if _, err := deploys.Create(ctx, deploy("unsigned", unsigned.Tag), metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "failed to verify image") {
		t.Errorf("Deployment of an unsigned image: %v, want a denial through autogen", err)
	}
	d, err := deploys.Create(ctx, deploy("signed", signed.Tag), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Deployment of a signed image refused: %v", err)
	}
	if got, want := d.Spec.Template.Spec.Containers[0].Image, signed.Tag+"@"+signed.Digest; got != want {
		t.Errorf("Deployment's image %q, want %q", got, want)
	}
}

// TestE2EImageValidatingPolicy: an ImageValidatingPolicy in Verdict's
// group, through the real kube-apiserver and a registry in the test
// process. The mutating webhook pins a Pod's image, named by tag, to its
// digest; the validating webhook then verifies the pinned image's
// signature with the policy's attestor, admitting the signed image and
// denying the unsigned one with Kyverno's wording ("Policy <name>
// failed: <message>"); an image the policy does not select is left as
// written.
func TestE2EImageValidatingPolicy(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	reg := ocitest.NewRegistry(t, ocitest.WithTLS(ocitest.NewCA(t)))
	key := ocitest.NewKey(t)
	signed := reg.PushImage(t, "trusted/app", "v1")
	reg.Sign(t, signed.Ref, key)
	unsigned := reg.PushImage(t, "trusted/unsigned", "v1")
	other := reg.PushImage(t, "other/tool", "v1")
	keyJSON, err := json.Marshal(key.PublicKeyPEM())
	if err != nil {
		t.Fatal(err)
	}
	doc := `{"apiVersion":"verdict.dev/v1","kind":"ImageValidatingPolicy","metadata":{"name":"signed-images"},
"spec":{"webhookConfiguration":{"timeoutSeconds":15},
"matchConstraints":{"resourceRules":[{"apiGroups":[""],"apiVersions":["v1"],"operations":["CREATE","UPDATE"],"resources":["pods"]}]},
"matchImageReferences":[{"glob":"` + reg.Host() + `/trusted/*"}],
"attestors":[{"name":"ours","cosign":{"key":{"data":` + string(keyJSON) + `},"ctlog":{"insecureIgnoreTlog":true}}}],
"validations":[{"expression":"images.containers.map(i, verifyImageSignatures(i, [attestors.ours])).all(n, n > 0)","message":"not signed by our key"}]}}`
	ivpols := policycache.ImageValidatingPolicies
	if _, err := e.dyn.Resource(ivpols).Create(ctx, testkit.Unstructured(t, doc), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "registry-ca.pem")
	if err := os.WriteFile(caFile, []byte(reg.RootsPEM()), 0o600); err != nil {
		t.Fatal(err)
	}
	e.startReplica(t, "replica-a", "", func(c *webhookapp.Config) {
		c.Registries.CAFile = caFile
		c.Registries.Blocklist = []string{"169.254.0.0/16"}
	})
	pods := e.kube.CoreV1().Pods("team")
	testkit.EventuallyTrue(t, 30*time.Second, "the unsigned image denied", func() bool {
		_, err = pods.Create(ctx, imagePod("unsigned", unsigned.Tag), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "signed-images")
	})
	if want := "Policy signed-images failed: not signed by our key"; !strings.Contains(err.Error(), want) {
		t.Errorf("denial %q, want %q", err, want)
	}
	p, err := pods.Create(ctx, imagePod("signed", signed.Tag), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("signed image refused: %v", err)
	}
	if got, want := p.Spec.Containers[0].Image, signed.Tag+"@"+signed.Digest; got != want {
		t.Errorf("stored image %q, want %q (pinned to its digest)", got, want)
	}
	p, err = pods.Create(ctx, imagePod("other", other.Tag), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("an image the policy does not select refused: %v", err)
	}
	if got := p.Spec.Containers[0].Image; got != other.Tag {
		t.Errorf("an image the policy does not select was changed to %q", got)
	}
}
