package helm_test

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestNATSAuthRequired: the chart renders only with a way to authenticate
// to NATS (issue 28, finding 7: a NATS that takes any client lets any pod
// delete VERDICT_WORK), or with the explicit opt-out.
func TestNATSAuthRequired(t *testing.T) {
	tests := map[string]struct {
		args   []string
		refuse bool
	}{
		"the defaults":            {refuse: true},
		"a credentials file":      {args: []string{"--set", "nats.credentials.secretName=c"}},
		"an NKey":                 {args: []string{"--set", "nats.nkey.secretName=k"}},
		"a client certificate":    {args: []string{"--set", "nats.tls.clientCertSecretName=tls"}},
		"unauthenticated, chosen": {args: []string{"--set", "nats.allowUnauthenticated=true"}},
		"credentials cleared":     {args: []string{"-f", haValues, "--set", "nats.credentials.secretName="}, refuse: true},
		"one service without": {args: []string{"--set", "nats.credentials.services.webhook=w", "--set", "nats.credentials.services.reporter=r",
			"--set", "nats.credentials.services.generator=g"}, refuse: true},
		"every service its own": {args: []string{"--set", "nats.nkey.services.webhook=w", "--set", "nats.nkey.services.reporter=r",
			"--set", "nats.nkey.services.generator=g", "--set", "nats.nkey.services.cleaner=c"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			// helm directly: render adds natsAuth.
			r := helm(t, append([]string{"template", release, chartDir, "--namespace", namespace}, tc.args...)...)
			if !tc.refuse {
				if r.Err != nil {
					t.Fatalf("helm template %v: %v\n%s", tc.args, r.Err, r.Stderr)
				}
				return
			}
			var exit *exec.ExitError
			if !errors.As(r.Err, &exit) {
				t.Fatalf("helm template %v: want a refusal, got %v", tc.args, r.Err)
			}
			for _, w := range []string{"NATS needs authentication", "nats.credentials.secretName", "nats.allowUnauthenticated=true"} {
				if !strings.Contains(string(r.Stderr), w) {
					t.Errorf("the refusal does not say %q:\n%s", w, r.Stderr)
				}
			}
		})
	}
}

// TestNATSCredentialsPerService: a service's own credentials or NKey
// Secret replaces the shared one for that service only (one NATS user per
// service, each with its own permissions: deploy/nats/verdict-auth.conf).
func TestNATSCredentialsPerService(t *testing.T) {
	tests := map[string]struct {
		args   []string
		volume string
		shared string // what the other services mount
		flag   string
	}{
		"credentials": {args: []string{"--set", "nats.credentials.services.webhook=verdict-nats-webhook"},
			volume: "nats-credentials", shared: "verdict-nats-credentials", flag: "--nats-credentials="},
		"nkey": {args: []string{"--set", "nats.credentials.secretName=", "--set", "nats.nkey.secretName=verdict-nats",
			"--set", "nats.nkey.services.webhook=verdict-nats-webhook"},
			volume: "nats-nkey", shared: "verdict-nats", flag: "--nats-nkey-file="},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := parse(t, render(t, tc.args...))
			for _, svc := range services {
				want := tc.shared
				if svc == "webhook" {
					want = "verdict-nats-webhook"
				}
				spec := m.deployments[svc].Spec.Template.Spec
				var got []string
				for _, v := range spec.Volumes {
					if v.Name == tc.volume && v.Secret != nil {
						got = append(got, v.Secret.SecretName)
					}
				}
				if len(got) != 1 || got[0] != want {
					t.Errorf("%s mounts %s from %v, want %s", svc, tc.volume, got, want)
				}
				if !slices.ContainsFunc(spec.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, tc.flag) }) {
					t.Errorf("%s has no %s flag: %v", svc, tc.flag, spec.Containers[0].Args)
				}
			}
		})
	}
}

// natsPolicies are the NetworkPolicies rendered in NATS's namespace.
func natsPolicies(t *testing.T, args ...string) []networkingv1.NetworkPolicy {
	t.Helper()
	var out []networkingv1.NetworkPolicy
	for _, u := range decode(t, render(t, args...)) {
		if u.GetKind() != "NetworkPolicy" || u.GetNamespace() == namespace {
			continue
		}
		var np networkingv1.NetworkPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &np); err != nil {
			t.Fatal(err)
		}
		out = append(out, np)
	}
	return out
}

// TestNATSNetworkPolicy: by default the chart puts a NetworkPolicy around
// the NATS servers: their client port only from this release's pods in
// its namespace (and the peers an operator adds), their cluster port only
// from each other, the monitoring port open; nothing else reaches them.
func TestNATSNetworkPolicy(t *testing.T) {
	nps := natsPolicies(t)
	if len(nps) != 1 {
		t.Fatalf("%d NetworkPolicies outside the release's namespace, want 1 around NATS", len(nps))
	}
	np := nps[0]
	if np.Namespace != "nats" || np.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] != "nats" {
		t.Errorf("policy %s/%s selects %v, want the NATS servers in namespace nats", np.Namespace, np.Name, np.Spec.PodSelector.MatchLabels)
	}
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Errorf("policy types %v, want Ingress", np.Spec.PolicyTypes)
	}
	ports := map[int32][]networkingv1.NetworkPolicyPeer{}
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			ports[p.Port.IntVal] = append(ports[p.Port.IntVal], rule.From...)
			if len(rule.From) == 0 {
				ports[p.Port.IntVal] = append(ports[p.Port.IntVal], networkingv1.NetworkPolicyPeer{}) // anyone
			}
		}
	}
	if len(ports) != 3 {
		t.Errorf("ports %v, want the client, cluster and monitoring ports only", ports)
	}
	clients := ports[4222]
	if len(clients) != 1 || clients[0].NamespaceSelector == nil || clients[0].PodSelector == nil ||
		clients[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != namespace ||
		clients[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "verdict" ||
		clients[0].PodSelector.MatchLabels["app.kubernetes.io/instance"] != release {
		t.Errorf("client port open to %+v, want only the release's pods in %s", clients, namespace)
	}
	routes := ports[6222]
	if len(routes) != 1 || routes[0].NamespaceSelector != nil || routes[0].PodSelector == nil ||
		routes[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "nats" {
		t.Errorf("cluster port open to %+v, want only the NATS servers", routes)
	}

	t.Run("extra clients", func(t *testing.T) {
		nps := natsPolicies(t, "--set", "nats.networkPolicy.extraClients[0].podSelector.matchLabels.app=nats-box")
		if len(nps) != 1 || len(nps[0].Spec.Ingress[0].From) != 2 || nps[0].Spec.Ingress[0].From[1].PodSelector.MatchLabels["app"] != "nats-box" {
			t.Errorf("extraClients not added to the client port: %+v", nps)
		}
	})
	t.Run("off", func(t *testing.T) {
		if nps := natsPolicies(t, "--set", "nats.networkPolicy.enabled=false"); len(nps) != 0 {
			t.Errorf("%d NATS NetworkPolicies with nats.networkPolicy.enabled=false", len(nps))
		}
	})
	t.Run("no namespace", func(t *testing.T) {
		r := helm(t, append([]string{"template", release, chartDir, "--namespace", namespace}, withAuth("--set", "nats.namespace=")...)...)
		if r.Err == nil || !strings.Contains(string(r.Stderr), "nats.networkPolicy.enabled needs nats.namespace") {
			t.Errorf("no NATS namespace: %v\n%s", r.Err, r.Stderr)
		}
	})
}
