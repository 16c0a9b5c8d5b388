package platform_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/verdict-dev/verdict/internal/platform"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/internal/testkit/ocitest"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// TestE2ERegistryCredentials: verifyImages rules reach a private
// registry with the image pull Secrets the operator allows, read from a
// real API server: a cluster policy with the Secrets of Verdict's
// namespace the operator lists (and no other), a namespaced Policy with
// those of its own namespace only (never Verdict's, nor another
// tenant's), the Pod's imagePullSecrets in its namespace; without
// --registry-namespace-credentials none outside Verdict's namespace.
// Attestors' keys in Secrets (keys.secret) are read under the same
// rules. No password appears in any answer.
func TestE2ERegistryCredentials(t *testing.T) {
	const password = "s3cret-of-the-registry"
	reg := ocitest.NewRegistry(t, ocitest.WithBasicAuth("robot", password))
	key := ocitest.NewKey(t)
	img := reg.PushImage(t, "private/app", "v1")
	reg.Sign(t, img.Ref, key)

	cp := controlplane.StartForTest(t)
	kc, err := platform.KubeConfig{Kubeconfig: cp.KubeconfigPath(), QPS: 50, Burst: 100}.Clients("verdict-test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	dockerConfig := func(pass string) []byte {
		return []byte(`{"auths":{"` + reg.Host() + `":{"username":"robot","password":"` + pass + `"}}}`)
	}
	for _, s := range []struct{ ns, name, pass string }{
		{"verdict", "regcred", password},
		{"verdict", "other", password}, // not one the operator lists
		{"team-a", "regcred", "wrong"}, // the tenant's own, of the same name as Verdict's
		{"team-a", "pull", password},
		{"team-b", "regcred", password},
	} {
		if _, err := kc.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
			t.Fatal(err)
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.ns}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig(s.pass)}}
		if _, err := kc.Kube.CoreV1().Secrets(s.ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The key, in Secrets too (keys.secret).
	for _, ns := range []string{"team-a", "verdict"} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cosign", Namespace: ns}, Data: map[string][]byte{"cosign.pub": []byte(key.PublicKeyPEM())}}
		if _, err := kc.Kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	k, err := json.Marshal(key.PublicKeyPEM())
	if err != nil {
		t.Fatal(err)
	}
	keyInline := `{"publicKeys":` + string(k)
	keyIn := func(ns string) string { return `{"secret":{"namespace":"` + ns + `","name":"cosign"}` }
	compileKey := func(eng *engine.Engine, kind, ns, keys string, secrets ...string) *engine.Policy {
		t.Helper()
		creds := ""
		if len(secrets) > 0 {
			b, _ := json.Marshal(secrets)
			creds = `"imageRegistryCredentials":{"secrets":` + string(b) + `},`
		}
		doc := fmt.Sprintf(`{"apiVersion":"kyverno.io/v1","kind":%q,"metadata":{"name":"private","namespace":%q},
"spec":{"validationFailureAction":"Enforce","rules":[{"name":"signed","match":{"any":[{"resources":{"kinds":["Pod"]}}]},
"verifyImages":[{"imageReferences":["%s/private/*"],%s"attestors":[{"entries":[{"keys":%s,
"rekor":{"ignoreTlog":true},"ctlog":{"ignoreSCT":true}}}]}]}]}]}}`, kind, ns, reg.Host(), creds, keys)
		docs, err := policy.Parse([]byte(doc), "test")
		if err != nil {
			t.Fatal(err)
		}
		p, err := eng.Compile(docs.Policies[0])
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	compile := func(eng *engine.Engine, kind, ns string, secrets ...string) *engine.Policy {
		t.Helper()
		return compileKey(eng, kind, ns, keyInline, secrets...)
	}
	verify := func(eng *engine.Engine, p *engine.Policy, ns string, pullSecrets ...string) engine.RuleResponse {
		t.Helper()
		var refs []any
		for _, s := range pullSecrets {
			refs = append(refs, map[string]any{"name": s})
		}
		pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "app", "namespace": ns},
			"spec": map[string]any{"imagePullSecrets": refs, "containers": []any{map[string]any{"name": "c", "image": img.Tag}}}}
		vctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		resp := eng.VerifyImages(vctx, &engine.Request{Operation: engine.OpCreate, Object: pod}, p, nil)
		if len(resp.Rules) != 1 {
			t.Fatalf("%d rule responses", len(resp.Rules))
		}
		rr := resp.Rules[0]
		if strings.Contains(rr.Message, password) {
			t.Errorf("the password in the answer: %q", rr.Message)
		}
		return rr
	}
	newEngine := func(namespaces bool, allowed ...string) *engine.Engine {
		t.Helper()
		r := platform.DefaultRegistries()
		r.Blocklist = []string{} // the registry is on loopback
		r.CacheTTL = 0           // each verification reaches the registry
		r.CredentialSecrets = allowed
		r.NamespaceCredentials = namespaces
		eng, err := platform.NewEngine(kc, platform.EngineConfig{Namespace: "verdict", Limits: platform.DefaultEvaluationLimits(), Registries: r})
		if err != nil {
			t.Fatal(err)
		}
		return eng.Engine
	}
	type want struct {
		status engine.Status
		msg    string // a part of the message
	}
	check := func(name string, rr engine.RuleResponse, w want) {
		t.Helper()
		if rr.Status != w.status || !strings.Contains(rr.Message, w.msg) {
			t.Errorf("%s: %s %q, want %s with %q", name, rr.Status, rr.Message, w.status, w.msg)
		}
	}
	unauthorized := want{engine.StatusFail, "UNAUTHORIZED"}

	// Nothing allowed: a Secret a policy names is refused, saying why.
	eng := newEngine(false)
	check("nothing allowed, a cluster policy's Secret", verify(eng, compile(eng, "ClusterPolicy", "", "regcred"), "team-a"),
		want{engine.StatusError, "is not one of the registry credentials the operator allows"})
	check("nothing allowed, a key in a Secret", verify(eng, compileKey(eng, "ClusterPolicy", "", keyIn("verdict"), "regcred"), "team-a"),
		want{engine.StatusError, "is not one of the registry credentials the operator allows"})

	eng = newEngine(false, "regcred")
	check("cluster policy, an allowed Secret of Verdict's namespace", verify(eng, compile(eng, "ClusterPolicy", "", "regcred"), "team-a"),
		want{engine.StatusPass, "verified image signatures"})
	check("cluster policy, a Secret of Verdict's namespace the operator does not list", verify(eng, compile(eng, "ClusterPolicy", "", "other"), "team-a"),
		want{engine.StatusError, "is not one of the registry credentials the operator allows"})
	check("namespaced Policy, its namespace's Secret, namespace credentials off", verify(eng, compile(eng, "Policy", "team-a", "regcred"), "team-a"),
		want{engine.StatusError, "outside Verdict's namespace are off"})
	check("the Pod's imagePullSecrets, namespace credentials off", verify(eng, compile(eng, "ClusterPolicy", ""), "team-a", "pull"), unauthorized)

	eng = newEngine(true, "regcred")
	// The tenant's regcred (a wrong password), not Verdict's of the same name.
	check("namespaced Policy, a name", verify(eng, compile(eng, "Policy", "team-a", "regcred"), "team-a"), unauthorized)
	check("namespaced Policy, its own pull Secret", verify(eng, compile(eng, "Policy", "team-a", "pull"), "team-a"),
		want{engine.StatusPass, "verified image signatures"})
	check("namespaced Policy, another tenant's Secret", verify(eng, compile(eng, "Policy", "team-a", "team-b/regcred"), "team-a"),
		want{engine.StatusError, "may only name Secrets of its namespace"})
	check("namespaced Policy, Verdict's Secret", verify(eng, compile(eng, "Policy", "team-a", "verdict/regcred"), "team-a"),
		want{engine.StatusError, "may only name Secrets of its namespace"})
	check("cluster policy, another namespace's Secret", verify(eng, compile(eng, "ClusterPolicy", "", "team-b/regcred"), "team-a"),
		want{engine.StatusPass, "verified image signatures"})
	check("the Pod's imagePullSecrets", verify(eng, compile(eng, "ClusterPolicy", ""), "team-a", "pull"),
		want{engine.StatusPass, "verified image signatures"})
	check("the Pod's imagePullSecrets naming another namespace's Secret", verify(eng, compile(eng, "ClusterPolicy", ""), "team-b", "pull"), unauthorized)
	check("the Pod's imagePullSecrets in Verdict's namespace", verify(eng, compile(eng, "ClusterPolicy", ""), "verdict", "regcred"), unauthorized)

	// Keys in Secrets, under the same rules.
	check("namespaced Policy, the key in its namespace", verify(eng, compileKey(eng, "Policy", "team-a", keyIn("team-a"), "pull"), "team-a"),
		want{engine.StatusPass, "verified image signatures"})
	check("namespaced Policy, the key in Verdict's namespace", verify(eng, compileKey(eng, "Policy", "team-a", keyIn("verdict"), "pull"), "team-a"),
		want{engine.StatusError, "may only name Secrets of its namespace"})
	check("cluster policy, a key Secret of Verdict's namespace the operator does not list", verify(eng, compileKey(eng, "ClusterPolicy", "", keyIn("verdict"), "regcred"), "team-a"),
		want{engine.StatusError, "is not one of the registry credentials the operator allows"})
	check("cluster policy, a key Secret of a tenant's namespace", verify(eng, compileKey(eng, "ClusterPolicy", "", keyIn("team-a"), "regcred"), "team-a"),
		want{engine.StatusPass, "verified image signatures"})
}
