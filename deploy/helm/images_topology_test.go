package helm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/testkit/ocitest"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/imageref"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/imageverify"
)

// imageTopologyPods is how many Pods of one signed image
// TestE2EImageVerificationTopology admits.
const imageTopologyPods = 100

// privatePassword is the private registry's, in image pull Secrets.
const privatePassword = "s3cret-of-the-private-registry"

// TestE2EImageVerificationTopology runs the chart's HA webhook (three
// replicas) and reporter (three replicas, scanning) as processes on a
// real control plane, with a registry in the test process holding a
// signed and an unsigned image (issue 30's acceptance):
//   - Pods that existed before the verifyImages policy are checked by the
//     background scan: their PolicyReports show the signed image's pass
//     and the unsigned image's failure, from the "background scan";
//   - the policy is enforced at admission: an unsigned image is denied;
//   - 100 Pods of the signed image, named by tag, are admitted through
//     the API server and each pinned to the digest;
//   - images of a private registry are verified with the image pull
//     Secrets the chart lets the services read (the chart's RBAC): one of
//     Verdict's namespace the operator lists, for a ClusterPolicy; a
//     tenant's own, for its namespaced Policy; the Pod's imagePullSecrets;
//   - all of that, the scan and 200 webhook calls, reached the registry
//     for the signed image's signature as often as one verification does:
//     once, not once per replica, through the key-value bucket the
//     replicas share.
func TestE2EImageVerificationTopology(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the chart's topology on a real control plane; skipped under -short")
	}
	begin := time.Now()
	reg := ocitest.NewRegistry(t) // plain HTTP on loopback, which registries are reached over
	key := ocitest.NewKey(t)
	signed := reg.PushImage(t, "trusted/app", "v1")
	reg.Sign(t, signed.Ref, key)
	unsigned := reg.PushImage(t, "trusted/unsigned", "v1")
	sigTag := strings.Replace(signed.Digest, ":", "-", 1) + ".sig"
	once := oneVerification(t, reg, signed, key, sigTag)

	// A private registry, and its credentials in image pull Secrets.
	private := ocitest.NewRegistry(t, ocitest.WithBasicAuth("robot", privatePassword))
	privateImages := map[string]ocitest.Image{}
	for _, repo := range []string{"cluster", "tenant", "pulled"} {
		img := private.PushImage(t, repo+"/app", "v1")
		private.Sign(t, img.Ref, key)
		privateImages[repo] = img
	}

	// The loopback registries are allowed: the HA values block
	// 127.0.0.0/8. The registry credentials: one Secret of Verdict's
	// namespace, and tenants' own.
	env := startChartTopology(t, []string{"webhook", "reporter"}, "--set", "imageRegistries.blocklist={169.254.0.0/16}",
		"--set", "imageRegistries.credentialSecrets={regcred}", "--set", "imageRegistries.namespaceCredentials=true")
	ctx, kube, dyn := t.Context(), env.kube, env.dyn
	t.Logf("topology ready: %v", time.Since(begin).Round(time.Millisecond))
	pods := kube.CoreV1().Pods(topoNamespace)
	checkPrivateRegistry(t, env, private, privateImages, key)

	// Before the policy: admitted unverified, for the scan to check.
	scanned := map[string]*corev1.Pod{}
	for name, image := range map[string]string{"scan-signed": signed.Tag, "scan-unsigned": unsigned.Tag} {
		p, err := pods.Create(ctx, imageTopoPod(name, image), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("Pod %s before the policy: %v", name, err)
		}
		scanned[name] = p
	}
	reg.ResetLog()
	createPolicy(t, dyn, policycache.ClusterPolicies, "", signedImagesTopoPolicy(t, reg.Host(), key.PublicKeyPEM()))

	topoEventually(t, 60*time.Second, "the policy enforced", func() error {
		_, err := pods.Create(ctx, imageTopoPod("probe", unsigned.Tag), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return fmt.Errorf("a Pod of an unsigned image admitted")
		}
		if !strings.Contains(err.Error(), "failed to verify image "+unsigned.Tag) {
			return fmt.Errorf("unsigned image: %w", err)
		}
		return nil
	})
	topoEventually(t, 90*time.Second, "the background scan's results in the reports", func() error {
		if err := scanResult(ctx, dyn, scanned["scan-signed"], "pass"); err != nil {
			return err
		}
		return scanResult(ctx, dyn, scanned["scan-unsigned"], "fail")
	})
	t.Logf("scanned and enforced: %v", time.Since(begin).Round(time.Millisecond))

	// 100 Pods of the signed image, by tag, ten clients at once, in one
	// batch per webhook replica: the API server keeps its connection to
	// the replica it reached, so before each batch the balancer closes it
	// and sends the next to the batch's replica.
	pinned := signed.Tag + "@" + signed.Digest
	replicas := len(env.topo.replicas["webhook"])
	cachedSeries, verifiedSeries := `verdict_image_verifications_total{cached="true",outcome="pass"}`, `verdict_image_verifications_total{cached="false",outcome="pass"}`
	before := map[string][2]float64{}
	for _, r := range env.topo.replicas["webhook"] {
		before[r.name] = [2]float64{replicaMetric(t, r, cachedSeries), replicaMetric(t, r, verifiedSeries)}
	}
	for batch, r := range env.topo.replicas["webhook"] {
		env.topo.lb.pin(r)
		awaitReconnected(t, pods, imageTopoPod("reconnect", signed.Tag))
		var wg sync.WaitGroup
		errs := make(chan error, imageTopologyPods)
		names := make(chan int, imageTopologyPods)
		for i := batch; i < imageTopologyPods; i += replicas {
			names <- i
		}
		close(names)
		for range 10 {
			wg.Go(func() {
				for i := range names {
					p, err := pods.Create(ctx, imageTopoPod(fmt.Sprintf("signed-%03d", i), signed.Tag), metav1.CreateOptions{})
					switch {
					case err != nil:
						errs <- fmt.Errorf("Pod %d: %w", i, err)
					case p.Spec.Containers[0].Image != pinned:
						errs <- fmt.Errorf("Pod %d admitted with image %q, want %q", i, p.Spec.Containers[0].Image, pinned)
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	env.topo.lb.pin(nil)
	t.Logf("%d Pods admitted: %v", imageTopologyPods, time.Since(begin).Round(time.Millisecond))

	if got := reg.ManifestFetches("trusted/app", sigTag); got != once {
		t.Errorf("the signed image's signature fetched %d times by the scan and %d admissions, one verification fetches it %d times", got, imageTopologyPods, once)
	}
	// Every replica answered, and took the image from the cache.
	served := 0
	for _, r := range env.topo.replicas["webhook"] {
		cached := replicaMetric(t, r, cachedSeries) - before[r.name][0]
		verified := replicaMetric(t, r, verifiedSeries) - before[r.name][1]
		t.Logf("%s: %v image verifications from the cache, %v against the registry", r.name, cached, verified)
		if cached > 0 {
			served++
		}
		if verified > 0 {
			t.Errorf("%s verified the signed image against the registry %v times, want 0 (the scan verified it)", r.name, verified)
		}
	}
	if served != replicas {
		t.Errorf("%d of %d webhook replicas took verifications from the cache, want every one", served, replicas)
	}
	env.topo.checkAlive()
	env.topo.checkForbidden()
	t.Logf("scenario done in %v", time.Since(begin).Round(time.Millisecond))
}

// checkPrivateRegistry admits Pods of the private registry's signed
// images, each verified with image pull Secrets read as the chart's RBAC
// allows: a ClusterPolicy's from Verdict's namespace (imageRegistries.
// credentialSecrets), a namespaced Policy's from its namespace, and the
// Pod's imagePullSecrets (imageRegistries.namespaceCredentials); a Pod
// whose Secret is missing is denied, with no password in the answer.
func checkPrivateRegistry(t *testing.T, env *chartTopology, reg *ocitest.Registry, images map[string]ocitest.Image, key *ocitest.Key) {
	t.Helper()
	ctx := t.Context()
	cfg := []byte(`{"auths":{"` + reg.Host() + `":{"username":"robot","password":"` + privatePassword + `"}}}`)
	for _, s := range [][2]string{{namespace, "regcred"}, {topoNamespace, "team-pull"}} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s[1], Namespace: s[0]}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: cfg}}
		if _, err := env.kube.CoreV1().Secrets(s[0]).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	k, err := json.Marshal(key.PublicKeyPEM())
	if err != nil {
		t.Fatal(err)
	}
	entry := func(repo, secrets string) string {
		return `{"imageReferences":["` + reg.Host() + `/` + repo + `/*"],` + secrets + `"attestors":[{"entries":[{"keys":{"publicKeys":` + string(k) +
			`,"rekor":{"ignoreTlog":true},"ctlog":{"ignoreSCT":true}}}]}]}`
	}
	policy := func(kind, ns, name string, entries ...string) string {
		meta := `{"name":"` + name + `"}`
		if ns != "" {
			meta = `{"name":"` + name + `","namespace":"` + ns + `"}`
		}
		return `{"apiVersion":"verdict.dev/v1","kind":"` + kind + `","metadata":` + meta + `,
"spec":{"validationFailureAction":"Enforce","background":false,"webhookTimeoutSeconds":15,"rules":[{"name":"signed",
"match":{"any":[{"resources":{"kinds":["Pod"],"namespaces":["` + topoNamespace + `"]}}]},"verifyImages":[` + strings.Join(entries, ",") + `]}]}}`
	}
	createPolicy(t, env.dyn, policycache.ClusterPolicies, "", policy("ClusterPolicy", "", "private-images",
		entry("cluster", `"imageRegistryCredentials":{"secrets":["regcred"]},`), entry("pulled", "")))
	createPolicy(t, env.dyn, policycache.Policies, topoNamespace, policy("Policy", topoNamespace, "tenant-images",
		entry("tenant", `"imageRegistryCredentials":{"secrets":["team-pull"]},`)))

	pods := env.kube.CoreV1().Pods(topoNamespace)
	pod := func(name string, img ocitest.Image, pullSecrets ...string) *corev1.Pod {
		p := imageTopoPod(name, img.Tag)
		for _, s := range pullSecrets {
			p.Spec.ImagePullSecrets = append(p.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
		}
		return p
	}
	// The policies reach the replicas' caches: until they do, a Pod of
	// the tenant's image is admitted unverified (and unpinned).
	topoEventually(t, 60*time.Second, "the private registry's policies enforced", func() error {
		_, err := pods.Create(ctx, pod("probe-private", images["pulled"]), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return fmt.Errorf("a Pod of the private registry without its pull Secret admitted")
		}
		if strings.Contains(err.Error(), privatePassword) {
			t.Fatalf("the password in a denial: %v", err)
		}
		if !strings.Contains(err.Error(), "failed to verify image "+images["pulled"].Tag) {
			return err
		}
		p, err := pods.Create(ctx, pod("probe-tenant", images["tenant"]), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err
		}
		if want := images["tenant"].Tag + "@" + images["tenant"].Digest; p.Spec.Containers[0].Image != want {
			return fmt.Errorf("the tenant's image admitted as %q, not yet pinned to %s", p.Spec.Containers[0].Image, want)
		}
		return nil
	})
	for _, c := range []struct {
		pod *corev1.Pod
		img ocitest.Image
	}{
		{pod("private-cluster", images["cluster"]), images["cluster"]},
		{pod("private-tenant", images["tenant"]), images["tenant"]},
		{pod("private-pulled", images["pulled"], "team-pull"), images["pulled"]},
	} {
		p, err := pods.Create(ctx, c.pod, metav1.CreateOptions{})
		if err != nil {
			t.Errorf("Pod %s: %v", c.pod.Name, err)
			continue
		}
		if want := c.img.Tag + "@" + c.img.Digest; p.Spec.Containers[0].Image != want {
			t.Errorf("Pod %s admitted with image %q, want %q", c.pod.Name, p.Spec.Containers[0].Image, want)
		}
	}
	if n := reg.Count(func(r ocitest.Request) bool {
		return r.Status == 200 && r.User == "robot" && strings.HasSuffix(r.Ref, ".sig")
	}); n < 3 {
		t.Errorf("the private registry served %d signatures to the services, want the three images'", n)
	}
}

// oneVerification is how many times one verification of img, in this
// process, fetches its signature manifest sigTag.
func oneVerification(t *testing.T, reg *ocitest.Registry, img ocitest.Image, key *ocitest.Key, sigTag string) int {
	t.Helper()
	v, err := imageverify.New(imageverify.WithRemoteOptions(reg.RemoteOptions()...))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := imageref.Parse(img.Tag, imageref.DefaultRegistry, true)
	if err != nil {
		t.Fatal(err)
	}
	entry := &policy.ImageVerification{ImageReferences: []string{"*"}, Attestors: []policy.AttestorSet{{Entries: []policy.Attestor{{Keys: &policy.StaticKeyAttestor{
		PublicKeys: key.PublicKeyPEM(), Rekor: &policy.Rekor{IgnoreTlog: true}, CTLog: &policy.CTLog{IgnoreSCT: true}}}}}}}
	reg.ResetLog()
	if res, err := v.Verify(t.Context(), engine.ImageVerifyRequest{Image: engine.Image{Image: img.Tag, Ref: ref}, Verification: entry}); err != nil || !res.Verified {
		t.Fatalf("verify in the test: %+v, %v", res, err)
	}
	n := reg.ManifestFetches("trusted/app", sigTag)
	if n == 0 {
		t.Fatal("one verification fetched no signature")
	}
	reg.ResetLog()
	return n
}

// signedImagesTopoPolicy requires images of the registry's trusted/ path
// to be signed by key (no transparency log or SCT: no public Rekor is
// reachable here), pinning them to their digests; the background scan
// checks it too.
func signedImagesTopoPolicy(t *testing.T, host, keyPEM string) string {
	t.Helper()
	k, err := json.Marshal(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return `{"apiVersion":"verdict.dev/v1","kind":"ClusterPolicy","metadata":{"name":"signed-images"},
"spec":{"validationFailureAction":"Enforce","background":true,"webhookTimeoutSeconds":15,"rules":[{"name":"signed",
"match":{"any":[{"resources":{"kinds":["Pod"],"namespaces":["` + topoNamespace + `"]}}]},
"verifyImages":[{"imageReferences":["` + host + `/trusted/*"],"attestors":[{"entries":[{"keys":{"publicKeys":` + string(k) + `,
"rekor":{"url":"https://rekor.example","ignoreTlog":true},"ctlog":{"ignoreSCT":true}}}]}]}]}]}}`
}

func imageTopoPod(name, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: topoNamespace},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}},
	}
}

// scanResult checks that p's PolicyReport holds the signed-images
// policy's result want, from the background scan.
func scanResult(ctx context.Context, dyn dynamic.Interface, p *corev1.Pod, want string) error {
	r, err := dyn.Resource(model.PolicyReports).Namespace(p.Namespace).Get(ctx, string(p.UID), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("Pod %s: %w", p.Name, err)
	}
	results, _, _ := unstructured.NestedSlice(r.Object, "results")
	for _, x := range results {
		m, _ := x.(map[string]any)
		if m["policy"] != "signed-images" {
			continue
		}
		props, _ := m["properties"].(map[string]any)
		if m["result"] != want || props[model.PropertyProcess] != model.ProcessBackground {
			return fmt.Errorf("Pod %s: result %v, want %s from the %s", p.Name, m, want, model.ProcessBackground)
		}
		return nil
	}
	return fmt.Errorf("Pod %s: no result of signed-images in %v", p.Name, results)
}

// awaitReconnected waits until the API server calls the webhook on a new
// connection after the balancer closed its old ones: a call it makes on a
// connection before it sees the close fails with a broken pipe or EOF (it
// retries no POST), so dry runs go first until five in a row are answered.
func awaitReconnected(t *testing.T, pods typedcorev1.PodInterface, probe *corev1.Pod) {
	t.Helper()
	answered := 0
	topoEventually(t, 30*time.Second, "the API server reconnected to the pinned replica", func() error {
		for answered < 5 {
			if _, err := pods.Create(t.Context(), probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				answered = 0
				return err
			}
			answered++
		}
		return nil
	})
}
