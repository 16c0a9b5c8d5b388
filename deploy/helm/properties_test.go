package helm_test

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/verdict-dev/verdict/internal/platform/admissionfilter"
	"github.com/verdict-dev/verdict/internal/webhook/registrar"
)

var services = []string{"webhook", "reporter", "generator", "cleaner"}

// manifest is a rendered chart, decoded into typed objects (strictly: a
// field the Go types do not know fails the test).
type manifest struct {
	deployments  map[string]*appsv1.Deployment // by service
	pdbs         map[string]*policyv1.PodDisruptionBudget
	clusterRoles map[string]*rbacv1.ClusterRole // by name
	roles        map[string]*rbacv1.Role
	crbs         []*rbacv1.ClusterRoleBinding
	rbs          []*rbacv1.RoleBinding
	accounts     map[string]*corev1.ServiceAccount
	services     map[string]*corev1.Service
	all          []*unstructured.Unstructured
}

func typed(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

func parse(t *testing.T, out []byte) manifest {
	t.Helper()
	m := manifest{
		deployments: map[string]*appsv1.Deployment{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
		clusterRoles: map[string]*rbacv1.ClusterRole{}, roles: map[string]*rbacv1.Role{},
		accounts: map[string]*corev1.ServiceAccount{}, services: map[string]*corev1.Service{},
	}
	m.all = decode(t, out)
	for _, u := range m.all {
		component := u.GetLabels()["app.kubernetes.io/component"]
		switch u.GetKind() {
		case "Deployment":
			d := &appsv1.Deployment{}
			typed(t, u, d)
			m.deployments[component] = d
		case "PodDisruptionBudget":
			p := &policyv1.PodDisruptionBudget{}
			typed(t, u, p)
			m.pdbs[component] = p
		case "ClusterRole":
			r := &rbacv1.ClusterRole{}
			typed(t, u, r)
			m.clusterRoles[r.Name] = r
		case "Role":
			r := &rbacv1.Role{}
			typed(t, u, r)
			m.roles[r.Name] = r
		case "ClusterRoleBinding":
			b := &rbacv1.ClusterRoleBinding{}
			typed(t, u, b)
			m.crbs = append(m.crbs, b)
		case "RoleBinding":
			b := &rbacv1.RoleBinding{}
			typed(t, u, b)
			m.rbs = append(m.rbs, b)
		case "ServiceAccount":
			a := &corev1.ServiceAccount{}
			typed(t, u, a)
			m.accounts[a.Name] = a
		case "Service":
			s := &corev1.Service{}
			typed(t, u, s)
			m.services[s.Name] = s
		}
	}
	return m
}

// arg returns the value of --name=value in args.
func arg(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// TestHAProperties checks, on the rendered objects, what makes the install
// highly available and safe, for the default and the HA values.
func TestHAProperties(t *testing.T) {
	wantReplicas := map[string]map[string]int32{
		"default": {"webhook": 3, "reporter": 2, "generator": 2, "cleaner": 2},
		"ha":      {"webhook": 3, "reporter": 3, "generator": 3, "cleaner": 3},
		"serve":   {"webhook": 3, "reporter": 2, "generator": 2, "cleaner": 2},
		// A shadow runs no generator and no cleaner: their work has effects.
		"kyverno-shadow": {"webhook": 3, "reporter": 2},
	}
	for name, args := range renders {
		t.Run(name, func(t *testing.T) {
			m := parse(t, render(t, args...))
			if got, want := slices.Sorted(maps.Keys(m.deployments)), slices.Sorted(maps.Keys(wantReplicas[name])); !slices.Equal(got, want) {
				t.Fatalf("deployments of %v, want %v", got, want)
			}
			for _, svc := range services {
				if _, ok := m.deployments[svc]; !ok {
					continue
				}
				t.Run(svc, func(t *testing.T) {
					d := m.deployments[svc]
					checkDeployment(t, svc, d, wantReplicas[name][svc])
					checkPDB(t, m.pdbs[svc], d)
					checkScheduling(t, d)
					checkProbes(t, svc, d)
					checkGrace(t, svc, d)
					checkAccount(t, m, d)
				})
			}
			checkNamespaceExclusion(t, m, name)
			checkWebhookService(t, m)
			checkWebhookReplicas(t, m)
		})
	}
}

// checkWebhookReplicas: the webhook pods say which paths their binary
// serves (the registrar's WebhookAPI), and --replica-selector selects
// them and no other component's pods, so that during a rolling upgrade
// the leader sees every replica and only those.
func checkWebhookReplicas(t *testing.T, m manifest) {
	t.Helper()
	d := m.deployments["webhook"]
	if got, want := d.Spec.Template.Labels[registrar.LabelWebhookAPI], strconv.Itoa(registrar.WebhookAPI); got != want {
		t.Errorf("webhook pods labelled %s=%q, want %q (this release's paths)", registrar.LabelWebhookAPI, got, want)
	}
	v, ok := arg(d.Spec.Template.Spec.Containers[0].Args, "replica-selector")
	if !ok {
		t.Fatal("no --replica-selector: an upgrade from an earlier release would send requests to paths its replicas answer 404")
	}
	sel, err := labels.Parse(v)
	if err != nil {
		t.Fatalf("--replica-selector=%s: %v", v, err)
	}
	for svc, other := range m.deployments {
		if got, want := sel.Matches(labels.Set(other.Spec.Template.Labels)), svc == "webhook"; got != want {
			t.Errorf("--replica-selector=%s selects the %s pods: %v, want %v", v, svc, got, want)
		}
	}
}

func checkDeployment(t *testing.T, svc string, d *appsv1.Deployment, replicas int32) {
	t.Helper()
	if d.Spec.Replicas == nil || *d.Spec.Replicas != replicas {
		t.Errorf("replicas %v, want %d", d.Spec.Replicas, replicas)
	}
	if d.Namespace != namespace {
		t.Errorf("namespace %q", d.Namespace)
	}
	sel, err := metaSelector(d)
	if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("selector %v does not select the pod template's labels %v (%v)", d.Spec.Selector, d.Spec.Template.Labels, err)
	}
	ru := d.Spec.Strategy.RollingUpdate
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.String() != "0" {
		t.Errorf("rollout %+v: want RollingUpdate with maxUnavailable 0", d.Spec.Strategy)
	}
	if svc == "webhook" && (ru == nil || ru.MaxSurge == nil || ru.MaxSurge.String() != "100%") {
		t.Errorf("webhook rollout maxSurge %v, want 100%%", ru.MaxSurge)
	}
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%d containers", len(d.Spec.Template.Spec.Containers))
	}
	c := d.Spec.Template.Spec.Containers[0]
	if want := "ghcr.io/verdict-dev/verdict-" + svc + ":v0.1.0"; c.Image != want {
		t.Errorf("image %q, want %q (docs/images.md)", c.Image, want)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			t.Errorf("no %s request", r)
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
		t.Error("no memory limit")
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container security context %+v", sc)
	}
	psc := d.Spec.Template.Spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
		t.Errorf("pod security context %+v: want non-root 65532 (the images' user)", psc)
	}
	if ns, ok := arg(c.Args, "stream-replicas"); !ok || ns == "" {
		t.Error("no --stream-replicas")
	}
	if u, ok := arg(c.Args, "nats-url"); !ok || u == "" {
		t.Error("no --nats-url")
	}
}

func metaSelector(d *appsv1.Deployment) (labels.Selector, error) {
	return labels.ValidatedSelectorFromSet(d.Spec.Selector.MatchLabels)
}

func checkPDB(t *testing.T, p *policyv1.PodDisruptionBudget, d *appsv1.Deployment) {
	t.Helper()
	if p == nil {
		t.Fatal("no PodDisruptionBudget")
	}
	if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != 1 || p.Spec.MinAvailable != nil {
		t.Errorf("PDB maxUnavailable %v minAvailable %v: want maxUnavailable 1", p.Spec.MaxUnavailable, p.Spec.MinAvailable)
	}
	sel := labels.SelectorFromSet(p.Spec.Selector.MatchLabels)
	if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("PDB selector %v does not select the pods %v", p.Spec.Selector, d.Spec.Template.Labels)
	}
	if p.Namespace != d.Namespace {
		t.Errorf("PDB in %q, pods in %q", p.Namespace, d.Namespace)
	}
}

func checkScheduling(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	pod := d.Spec.Template.Spec
	podLabels := labels.Set(d.Spec.Template.Labels)
	var zone bool
	for _, c := range pod.TopologySpreadConstraints {
		if c.TopologyKey != "topology.kubernetes.io/zone" {
			continue
		}
		zone = true
		if c.WhenUnsatisfiable != corev1.ScheduleAnyway || c.MaxSkew != 1 {
			t.Errorf("zone spread %+v: want maxSkew 1, ScheduleAnyway", c)
		}
		if !slices.Contains(c.MatchLabelKeys, "pod-template-hash") {
			t.Errorf("zone spread matchLabelKeys %v: want pod-template-hash", c.MatchLabelKeys)
		}
		if c.LabelSelector == nil || !labels.SelectorFromSet(c.LabelSelector.MatchLabels).Matches(podLabels) {
			t.Errorf("zone spread selector %v does not select the pods", c.LabelSelector)
		}
	}
	if !zone {
		t.Error("no topology spread across zones")
	}
	var node bool
	if a := pod.Affinity; a != nil && a.PodAntiAffinity != nil {
		if len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			t.Error("required anti-affinity: a cluster with fewer nodes than replicas could not schedule")
		}
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			if w.PodAffinityTerm.TopologyKey == "kubernetes.io/hostname" && w.PodAffinityTerm.LabelSelector != nil &&
				labels.SelectorFromSet(w.PodAffinityTerm.LabelSelector.MatchLabels).Matches(podLabels) {
				node = true
			}
		}
	}
	if !node {
		t.Error("no preferred anti-affinity across nodes")
	}
}

func checkProbes(t *testing.T, svc string, d *appsv1.Deployment) {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	addr, ok := arg(c.Args, "probe-address")
	if !ok {
		t.Fatal("no --probe-address: the probes would have nothing to call")
	}
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(p)
	var named int32
	for _, cp := range c.Ports {
		if cp.Name == "probes" {
			named = cp.ContainerPort
		}
	}
	if named == 0 || int(named) != port {
		t.Errorf("port probes %d, --probe-address %s", named, addr)
	}
	for what, pr := range map[string]*corev1.Probe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe} {
		if pr == nil || pr.HTTPGet == nil {
			t.Errorf("no HTTP probe on %s", what)
			continue
		}
		if pr.HTTPGet.Path != what || pr.HTTPGet.Port.String() != "probes" || (pr.HTTPGet.Scheme != "" && pr.HTTPGet.Scheme != corev1.URISchemeHTTP) {
			t.Errorf("probe %+v, want %s on the plain-HTTP probe port", pr.HTTPGet, what)
		}
	}
	if svc == "webhook" {
		if a, _ := arg(c.Args, "address"); a == "" || a == addr {
			t.Errorf("--address %q: the admission port must differ from the probe port", a)
		}
	}
}

func checkGrace(t *testing.T, svc string, d *appsv1.Deployment) {
	t.Helper()
	flag := "shutdown-timeout"
	if svc == "webhook" {
		flag = "shutdown-budget"
	}
	v, ok := arg(d.Spec.Template.Spec.Containers[0].Args, flag)
	if !ok {
		t.Fatalf("no --%s", flag)
	}
	bound, err := time.ParseDuration(v)
	if err != nil {
		t.Fatal(err)
	}
	g := d.Spec.Template.Spec.TerminationGracePeriodSeconds
	if g == nil || time.Duration(*g)*time.Second <= bound+5*time.Second {
		t.Errorf("terminationGracePeriodSeconds %v: want over --%s %s with a margin", g, flag, bound)
	}
}

func checkAccount(t *testing.T, m manifest, d *appsv1.Deployment) {
	t.Helper()
	sa := d.Spec.Template.Spec.ServiceAccountName
	if m.accounts[sa] == nil {
		t.Errorf("service account %q not rendered", sa)
	}
	for _, other := range m.deployments {
		if other != d && other.Spec.Template.Spec.ServiceAccountName == sa {
			t.Errorf("service account %q shared with %s", sa, other.Name)
		}
	}
}

// checkNamespaceExclusion: the webhook is told the release namespace and
// the NATS namespace, and the filter it builds from them (the one the
// registrar writes into the configurations) skips those and kube-system.
func checkNamespaceExclusion(t *testing.T, m manifest, values string) {
	t.Helper()
	args := m.deployments["webhook"].Spec.Template.Spec.Containers[0].Args
	ns, _ := arg(args, "namespace")
	if ns != namespace {
		t.Errorf("--namespace=%q, want the release namespace %q", ns, namespace)
	}
	excluded, _ := arg(args, "excluded-namespaces")
	list := append(strings.Split(excluded, ","), ns)
	f := admissionfilter.New(list, nil)
	skip := []string{"kube-system", "kube-public", "kube-node-lease", namespace, "nats"}
	if values == "ha" {
		skip = append(skip, "cert-manager", "monitoring")
	}
	for _, s := range skip {
		if !f.SkipsNamespace(s) {
			t.Errorf("the webhooks do not skip namespace %s (args %v)", s, args)
		}
	}
	if f.SkipsNamespace("default") {
		t.Error("the webhooks skip namespace default")
	}
	// The configurations are the release's (uninstall deletes them) and
	// empty: the registrar fills them in.
	for _, u := range m.all {
		if k := u.GetKind(); k == "MutatingWebhookConfiguration" || k == "ValidatingWebhookConfiguration" {
			if _, has := u.Object["webhooks"]; has {
				t.Errorf("%s %s renders webhooks: the registrar's field, which an upgrade would reset", k, u.GetName())
			}
			if n := u.GetName(); n != "verdict-mutating" && n != "verdict-validating" {
				t.Errorf("%s %s: the registrar writes verdict-mutating and verdict-validating", k, n)
			}
		}
	}
}

func checkWebhookService(t *testing.T, m manifest) {
	t.Helper()
	d := m.deployments["webhook"]
	args := d.Spec.Template.Spec.Containers[0].Args
	name, _ := arg(args, "service-name")
	s := m.services[name]
	if s == nil {
		t.Fatalf("--service-name=%s: no such Service rendered", name)
	}
	if !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("Service %s does not select the webhook pods", name)
	}
	port, _ := arg(args, "service-port")
	var ok bool
	for _, p := range s.Spec.Ports {
		if strconv.Itoa(int(p.Port)) == port && p.TargetPort.String() == "https" {
			ok = true
		}
	}
	if !ok {
		t.Errorf("Service ports %+v: none is --service-port=%s to https", s.Spec.Ports, port)
	}
}

// grants flattens rules into "group/resource[/name...]: verbs" lines.
func grants(scope string, rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		verbs := slices.Clone(r.Verbs)
		sort.Strings(verbs)
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				key := scope + " " + g + "/" + res
				if len(r.ResourceNames) > 0 {
					names := slices.Clone(r.ResourceNames)
					sort.Strings(names)
					key += "[" + strings.Join(names, ",") + "]"
				}
				out = append(out, key+": "+strings.Join(verbs, ","))
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestRBAC: each service's ServiceAccount is bound to exactly the verbs its
// code uses (the default values' open-ended rules included), and nothing
// else is bound to it.
func TestRBAC(t *testing.T) {
	// The built-in kinds but Secrets (reporter.rbac.readSecrets,
	// generator.rbac.readSecrets).
	readBuiltIn := []string{
		"cluster /configmaps: get,list,watch",
		"cluster /endpoints: get,list,watch",
		"cluster /limitranges: get,list,watch",
		"cluster /namespaces: get,list,watch",
		"cluster /nodes: get,list,watch",
		"cluster /persistentvolumeclaims: get,list,watch",
		"cluster /persistentvolumes: get,list,watch",
		"cluster /pods: get,list,watch",
		"cluster /podtemplates: get,list,watch",
		"cluster /replicationcontrollers: get,list,watch",
		"cluster /resourcequotas: get,list,watch",
		"cluster /serviceaccounts: get,list,watch",
		"cluster /services: get,list,watch",
		"cluster apps/*: get,list,watch",
		"cluster autoscaling/*: get,list,watch",
		"cluster batch/*: get,list,watch",
		"cluster discovery.k8s.io/*: get,list,watch",
		"cluster networking.k8s.io/*: get,list,watch",
		"cluster node.k8s.io/*: get,list,watch",
		"cluster policy/*: get,list,watch",
		"cluster rbac.authorization.k8s.io/*: get,list,watch",
		"cluster scheduling.k8s.io/*: get,list,watch",
		"cluster storage.k8s.io/*: get,list,watch",
	}
	want := map[string][]string{
		"webhook": {
			"cluster verdict.dev/clusterpolicies: list,watch",
			"cluster verdict.dev/policies: list,watch",
			"cluster verdict.dev/policyexceptions: list,watch",
			"cluster verdict.dev/validatingpolicies: list,watch",
			"cluster verdict.dev/namespacedvalidatingpolicies: list,watch",
			"cluster verdict.dev/mutatingpolicies: list,watch",
			"cluster verdict.dev/namespacedmutatingpolicies: list,watch",
			"cluster verdict.dev/generatingpolicies: list,watch",
			"cluster verdict.dev/namespacedgeneratingpolicies: list,watch",
			"cluster verdict.dev/imagevalidatingpolicies: list,watch",
			"cluster verdict.dev/namespacedimagevalidatingpolicies: list,watch",
			"cluster verdict.dev/clusterpolicies/status: update",
			"cluster verdict.dev/policies/status: update",
			"cluster /namespaces: list,watch",
			"cluster rbac.authorization.k8s.io/rolebindings: list,watch",
			"cluster rbac.authorization.k8s.io/clusterrolebindings: list,watch",
			"cluster /configmaps: get",
			// The TTL label's check: may the requester delete the object?
			"cluster authorization.k8s.io/subjectaccessreviews: create",
			"cluster admissionregistration.k8s.io/mutatingwebhookconfigurations[verdict-mutating]: get,list,update,watch",
			"cluster admissionregistration.k8s.io/validatingwebhookconfigurations[verdict-validating]: get,list,update,watch",
			"verdict /secrets[verdict-webhook-ca,verdict-webhook-tls]: get,list,update,watch",
			"verdict /secrets: create",
			"verdict coordination.k8s.io/leases[verdict-webhook]: get,update",
			"verdict coordination.k8s.io/leases: create",
			// Its own pods: which paths every replica serves (an upgrade).
			"verdict /pods: list,watch",
		},
		"reporter": {
			"cluster verdict.dev/clusterpolicies: get,list,watch",
			"cluster verdict.dev/policies: get,list,watch",
			"cluster verdict.dev/policyexceptions: get,list,watch",
			"cluster verdict.dev/validatingpolicies: get,list,watch",
			"cluster verdict.dev/namespacedvalidatingpolicies: get,list,watch",
			"cluster verdict.dev/mutatingpolicies: get,list,watch",
			"cluster verdict.dev/namespacedmutatingpolicies: get,list,watch",
			"cluster verdict.dev/generatingpolicies: get,list,watch",
			"cluster verdict.dev/namespacedgeneratingpolicies: get,list,watch",
			"cluster verdict.dev/imagevalidatingpolicies: get,list,watch",
			"cluster verdict.dev/namespacedimagevalidatingpolicies: get,list,watch",
			"cluster verdict.dev/clusterpolicies/status: patch",
			"cluster verdict.dev/policies/status: patch",
			"cluster verdict.dev/validatingpolicies/status: patch",
			"cluster verdict.dev/namespacedvalidatingpolicies/status: patch",
			"cluster verdict.dev/mutatingpolicies/status: patch",
			"cluster verdict.dev/namespacedmutatingpolicies/status: patch",
			"cluster verdict.dev/generatingpolicies/status: patch",
			"cluster verdict.dev/namespacedgeneratingpolicies/status: patch",
			"cluster verdict.dev/imagevalidatingpolicies/status: patch",
			"cluster verdict.dev/namespacedimagevalidatingpolicies/status: patch",
			"cluster admissionregistration.k8s.io/validatingadmissionpolicies: get,list,watch",
			"cluster admissionregistration.k8s.io/validatingadmissionpolicybindings: get,list,watch",
			"cluster admissionregistration.k8s.io/mutatingadmissionpolicies: get,list,watch",
			"cluster admissionregistration.k8s.io/mutatingadmissionpolicybindings: get,list,watch",
			"cluster /namespaces: get,list,watch",
			"cluster /configmaps: get",
			"cluster wgpolicyk8s.io/policyreports: create,delete,get,list,patch,watch",
			"cluster wgpolicyk8s.io/clusterpolicyreports: create,delete,get,list,patch,watch",
		},
		"generator": {
			"cluster verdict.dev/clusterpolicies: get,list,watch",
			"cluster verdict.dev/policies: get,list,watch",
			"cluster verdict.dev/policyexceptions: get,list,watch",
			"cluster verdict.dev/validatingpolicies: get,list,watch",
			"cluster verdict.dev/namespacedvalidatingpolicies: get,list,watch",
			"cluster verdict.dev/mutatingpolicies: get,list,watch",
			"cluster verdict.dev/namespacedmutatingpolicies: get,list,watch",
			"cluster verdict.dev/generatingpolicies: get,list,watch",
			"cluster verdict.dev/namespacedgeneratingpolicies: get,list,watch",
			"cluster verdict.dev/imagevalidatingpolicies: get,list,watch",
			"cluster verdict.dev/namespacedimagevalidatingpolicies: get,list,watch",
			// The kinds a synchronized GeneratingPolicy generated.
			"cluster verdict.dev/generatingpolicies/status: update",
			"cluster verdict.dev/namespacedgeneratingpolicies/status: update",
			"cluster /namespaces: get,list,watch",
			"cluster /configmaps: get",
			"cluster /events: create",
			"cluster /configmaps: create,delete,get,list,patch,update,watch",
			"cluster /limitranges: create,delete,get,list,patch,update,watch",
			"cluster /resourcequotas: create,delete,get,list,patch,update,watch",
			"cluster networking.k8s.io/networkpolicies: create,delete,get,list,patch,update,watch",
		},
		"cleaner": {
			"cluster verdict.dev/clustercleanuppolicies: get,list,watch",
			"cluster verdict.dev/cleanuppolicies: get,list,watch",
			"cluster verdict.dev/deletingpolicies: get,list,watch",
			"cluster verdict.dev/namespaceddeletingpolicies: get,list,watch",
			"cluster verdict.dev/clustercleanuppolicies/status: patch",
			"cluster verdict.dev/cleanuppolicies/status: patch",
			"cluster /namespaces: get",
			"cluster events.k8s.io/events: create",
			"cluster /pods: delete,get,list,watch",
			"cluster /configmaps: delete,get,list,watch",
			"cluster batch/jobs: delete,get,list,watch",
		},
	}
	want["reporter"] = append(want["reporter"], readBuiltIn...)
	want["generator"] = append(want["generator"], readBuiltIn...)
	m := parse(t, render(t))
	for _, svc := range services {
		t.Run(svc, func(t *testing.T) {
			got := boundGrants(t, m, svc)
			w := slices.Clone(want[svc])
			sort.Strings(w)
			if !slices.Equal(got, w) {
				t.Errorf("grants of %s:\n%s\nwant:\n%s", svc, strings.Join(got, "\n"), strings.Join(w, "\n"))
			}
			for _, g := range got {
				_, verbs, _ := strings.Cut(g, ": ")
				for _, v := range strings.Split(verbs, ",") {
					if v == "*" || v == "escalate" || v == "bind" || v == "impersonate" {
						t.Errorf("dangerous grant %q", g)
					}
				}
			}
		})
	}
	// No service reads Secrets cluster-wide unless a value says so
	// (docs/security.md): not by name, not through a wildcard.
	for _, svc := range services {
		for _, g := range boundGrants(t, m, svc) {
			if readsSecrets(g) {
				t.Errorf("%s: %q grants Secrets by default", svc, g)
			}
		}
	}
	for _, svc := range []string{"reporter", "generator"} {
		sm := parse(t, render(t, "--set", svc+".rbac.readSecrets=true"))
		if !slices.Contains(boundGrants(t, sm, svc), "cluster /secrets: get,list,watch") {
			t.Errorf("%s.rbac.readSecrets=true: no read of Secrets", svc)
		}
	}
	// webhook.generateAdmissionPolicies: the webhook alone may write
	// ValidatingAdmissionPolicies and their bindings, and the status of
	// ValidatingPolicies; by default nobody may.
	gm := parse(t, render(t, "--set", "webhook.generateAdmissionPolicies=true"))
	generation := []string{
		"cluster admissionregistration.k8s.io/validatingadmissionpolicies: create,delete,get,list,update",
		"cluster admissionregistration.k8s.io/validatingadmissionpolicybindings: create,delete,get,list,update",
		"cluster verdict.dev/validatingpolicies: get",
		"cluster verdict.dev/validatingpolicies/status: update",
	}
	for _, svc := range services {
		for _, g := range generation {
			if got := slices.Contains(boundGrants(t, gm, svc), g); got != (svc == "webhook") {
				t.Errorf("%s with generateAdmissionPolicies: %q granted %v", svc, g, got)
			}
			if slices.Contains(boundGrants(t, m, svc), g) {
				t.Errorf("%s: %q granted by default", svc, g)
			}
		}
	}
	// Registry credentials: the listed Secrets of the release namespace,
	// and with namespaceCredentials a get of any Secret, for the two
	// services that verify images; nothing for the others.
	rm := parse(t, render(t, "--set", "imageRegistries.credentialSecrets={regcred,mirror}"))
	nm := parse(t, render(t, "--set", "imageRegistries.namespaceCredentials=true"))
	for _, svc := range services {
		verifies := svc == "webhook" || svc == "reporter"
		if got := slices.Contains(boundGrants(t, rm, svc), namespace+" /secrets[mirror,regcred]: get"); got != verifies {
			t.Errorf("%s: imageRegistries.credentialSecrets granted: %v, want %v", svc, got, verifies)
		}
		if got := slices.Contains(boundGrants(t, nm, svc), "cluster /secrets: get"); got != verifies {
			t.Errorf("%s: imageRegistries.namespaceCredentials granted: %v, want %v", svc, got, verifies)
		}
	}
	// Only the webhook may touch webhook configurations, and nobody may
	// create them (uninstall deletes them for good).
	for name, r := range m.clusterRoles {
		for _, g := range grants("cluster", r.Rules) {
			if strings.Contains(g, "webhookconfigurations") && (name != "verdict-webhook" || strings.Contains(g, "create")) {
				t.Errorf("%s grants %q", name, g)
			}
		}
	}
}

// boundGrants are the grants (grants) of every role bound to the
// ServiceAccount of svc's Deployment.
func boundGrants(t *testing.T, m manifest, svc string) []string {
	t.Helper()
	sa := m.deployments[svc].Spec.Template.Spec.ServiceAccountName
	var got []string
	for _, b := range m.crbs {
		if bound(b.Subjects, sa) {
			r := m.clusterRoles[b.RoleRef.Name]
			if b.RoleRef.Kind != "ClusterRole" || r == nil {
				t.Fatalf("binding %s to %s %s, not rendered", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
			}
			got = append(got, grants("cluster", r.Rules)...)
		}
	}
	for _, b := range m.rbs {
		if bound(b.Subjects, sa) {
			r := m.roles[b.RoleRef.Name]
			if b.RoleRef.Kind != "Role" || r == nil {
				t.Fatalf("binding %s to %s %s, not rendered", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
			}
			got = append(got, grants(b.Namespace, r.Rules)...)
		}
	}
	sort.Strings(got)
	return got
}

// readsSecrets reports whether a cluster-wide grant (grants) lets its
// holder read Secrets: the core group or every group, Secrets or every
// resource, and a read verb.
func readsSecrets(g string) bool {
	res, verbs, _ := strings.Cut(g, ": ")
	res, ok := strings.CutPrefix(res, "cluster ")
	if !ok || strings.Contains(res, "[") {
		return false // namespaced, or by name
	}
	group, resource, _ := strings.Cut(res, "/")
	if (group != "" && group != "*") || (resource != "secrets" && resource != "*") {
		return false
	}
	for _, v := range strings.Split(verbs, ",") {
		if v == "get" || v == "list" || v == "watch" || v == "*" {
			return true
		}
	}
	return false
}

func bound(subjects []rbacv1.Subject, sa string) bool {
	for _, s := range subjects {
		if s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == namespace {
			return true
		}
	}
	return false
}

// TestValuesReachTheFlags: values a user sets end up as the flags the
// services read.
func TestValuesReachTheFlags(t *testing.T) {
	m := parse(t, render(t, "-f", haValues, "--set", "log.level=debug", "--set", "generator.log.level=warn",
		"--set", "imageRegistries.credentialSecrets={regcred,mirror}", "--set", "imageRegistries.namespaceCredentials=true",
		"--set", "imageRegistries.caConfigMapName=registry-ca", "--set", "imageRegistries.cache.ttl=30m",
		"--set", "imageRegistries.cache.entries=500", "--set", "imageRegistries.cache.sharedBytes=128Mi",
		"--set", "imageRegistries.maxResponseBytes=8Mi", "--set", "imageRegistries.sigstoreTrustedRoot.configMapName=sigstore-root",
		"--set", "webhook.image.digest=sha256:"+strings.Repeat("ab", 32), "--set", "image.tag=v9",
		"--set", "reporter.pending.results=100", "--set", "reporter.pending.bytes=1Mi", "--set", "reporter.pending.rechecks=0"))
	for svc, want := range map[string]map[string]string{
		"webhook": {
			"stream-replicas": "3", "nats-url": "tls://nats.nats.svc:4222",
			"nats-credentials": "/etc/verdict/nats/credentials/nats.creds", "nats-ca-file": "/etc/verdict/nats/ca/ca.crt",
			"results-max-bytes": "8Gi", "work-max-bytes": "2Gi", "log-level": "debug",
			"client-ca-file": "/etc/verdict/client-ca/ca.crt", "excluded-namespaces": "cert-manager,monitoring,nats",
			"registry-blocklist": "10.0.0.0/8,127.0.0.0/8,169.254.0.0/16,metadata.google.internal", "image-verify-max-concurrent": "16",
			"registry-credential-secrets": "regcred,mirror", "registry-namespace-credentials": "true",
			"registry-ca-file": "/etc/verdict/registry-ca/ca.crt", "image-verify-cache-ttl": "30m",
			"image-verify-cache-entries": "500", "image-verify-shared-cache-bytes": "128Mi", "image-verify-max-response-bytes": "8Mi",
			"sigstore-trusted-root": "/etc/verdict/sigstore/trusted_root.json",
		},
		"generator": {"stream-replicas": "3", "log-level": "warn", "nats-credentials": "/etc/verdict/nats/credentials/nats.creds"},
		"reporter": {"pending-results": "100", "pending-bytes": "1Mi", "pending-rechecks": "0",
			"registry-blocklist": "10.0.0.0/8,127.0.0.0/8,169.254.0.0/16,metadata.google.internal", "image-verify-max-concurrent": "16",
			"registry-credential-secrets": "regcred,mirror", "registry-namespace-credentials": "true",
			"registry-ca-file": "/etc/verdict/registry-ca/ca.crt", "image-verify-cache-ttl": "30m",
			"image-verify-cache-entries": "500", "image-verify-shared-cache-bytes": "128Mi", "image-verify-max-response-bytes": "8Mi",
			"sigstore-trusted-root": "/etc/verdict/sigstore/trusted_root.json"},
		"cleaner": {"identity": "$(POD_NAME)", "log-level": "debug"},
	} {
		c := m.deployments[svc].Spec.Template.Spec.Containers[0]
		for flag, v := range want {
			if got, _ := arg(c.Args, flag); got != v {
				t.Errorf("%s --%s=%q, want %q", svc, flag, got, v)
			}
		}
	}
	// The registries' CA bundle and the Sigstore trusted root are mounted
	// where --registry-ca-file and --sigstore-trusted-root read them, in
	// the two services that verify images.
	for _, svc := range []string{"webhook", "reporter"} {
		spec := m.deployments[svc].Spec.Template.Spec
		for _, vol := range []struct{ name, path, configMap string }{
			{"registry-ca", "/etc/verdict/registry-ca", "registry-ca"},
			{"sigstore-trusted-root", "/etc/verdict/sigstore", "sigstore-root"},
		} {
			mounted := false
			for _, vm := range spec.Containers[0].VolumeMounts {
				if vm.Name == vol.name && vm.MountPath == vol.path {
					mounted = true
				}
			}
			sourced := false
			for _, v := range spec.Volumes {
				if v.Name == vol.name && v.ConfigMap != nil && v.ConfigMap.Name == vol.configMap {
					sourced = true
				}
			}
			if !mounted || !sourced {
				t.Errorf("%s: %s mounted %v, from its ConfigMap %v", svc, vol.name, mounted, sourced)
			}
		}
	}
	if img := m.deployments["webhook"].Spec.Template.Spec.Containers[0].Image; img != fmt.Sprintf("ghcr.io/verdict-dev/verdict-webhook:v9@sha256:%s", strings.Repeat("ab", 32)) {
		t.Errorf("webhook image %s", img)
	}
	if img := m.deployments["reporter"].Spec.Template.Spec.Containers[0].Image; img != "ghcr.io/verdict-dev/verdict-reporter:v9" {
		t.Errorf("reporter image %s", img)
	}
	if pc := m.deployments["webhook"].Spec.Template.Spec.PriorityClassName; pc != "system-cluster-critical" {
		t.Errorf("webhook priorityClassName %q", pc)
	}
	// hostNetwork: the node's network, DNS still the cluster's.
	h := parse(t, render(t, "--set", "webhook.hostNetwork=true", "--set", "webhook.port=10250"))
	spec := h.deployments["webhook"].Spec.Template.Spec
	if !spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("hostNetwork %v dnsPolicy %q", spec.HostNetwork, spec.DNSPolicy)
	}
	if a, _ := arg(spec.Containers[0].Args, "address"); a != ":10250" {
		t.Errorf("--address=%s", a)
	}
}

// TestEvaluationLimitArgs: the chart's evaluationLimits reach every
// service that evaluates policies as its limit flags, large numbers
// written whole.
func TestEvaluationLimitArgs(t *testing.T) {
	m := parse(t, render(t, "--set", "evaluationLimits.maxForEachElements=500", "--set", "evaluationLimits.maxForEachDepth=2",
		"--set", "evaluationLimits.workBudget=20000000", "--set", "evaluationLimits.maxExpressionSteps=3000000",
		"--set", "evaluationLimits.memoryBudget=32Mi"))
	want := map[string]string{
		"max-foreach-elements": "500", "max-foreach-depth": "2", "work-budget": "20000000",
		"max-expression-steps": "3000000", "memory-budget": "32Mi",
	}
	for _, svc := range services {
		args := m.deployments[svc].Spec.Template.Spec.Containers[0].Args
		for name, v := range want {
			if got, ok := arg(args, name); !ok || got != v {
				t.Errorf("%s: --%s=%q (given: %t), want %q", svc, name, got, ok, v)
			}
		}
	}
	bytes := parse(t, render(t, "--set", "evaluationLimits.memoryBudget=100000000"))
	if got, _ := arg(bytes.deployments["webhook"].Spec.Template.Spec.Containers[0].Args, "memory-budget"); got != "100000000" {
		t.Errorf("memory budget in bytes: --memory-budget=%q", got)
	}
}
