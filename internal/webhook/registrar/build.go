// Package registrar keeps Verdict's admission webhook configurations in
// step with the installed policies. One leader (client-go leader election,
// Lease lock) reconciles; the configurations it writes are a pure function
// of the policies, so two leaders acting at once write the same objects.
package registrar

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/verdict-dev/verdict/internal/platform/admissionfilter"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// Paths the webhook serves (internal/webhook's). Each webhook points at
// the path of the policies it was registered for: the shared webhooks at
// the cluster policies' (PathMutateCluster, PathValidateCluster), a
// tenant's webhooks at its namespace's (PathMutateNamespaced,
// PathValidateNamespaced). A request in a tenant's namespace may go
// through both, and each call evaluates only its own policies, so every
// policy is evaluated once per request: its mutation applied once, its
// results and generate work published once. PathMutate and PathValidate
// evaluate every policy: they are the paths of releases before the scoped
// ones, and configurations point at them only while such a replica may
// still answer (Options.LegacyPaths, replicas.go).
const (
	PathMutate             = "/mutate"
	PathValidate           = "/validate"
	PathMutateCluster      = "/mutate-cluster"
	PathValidateCluster    = "/validate-cluster"
	PathMutateNamespaced   = "/mutate-namespaced"
	PathValidateNamespaced = "/validate-namespaced"
	PathValidatePolicy     = "/validate-policy"
)

// Default names of the configurations.
const (
	DefaultMutatingName   = "verdict-mutating"
	DefaultValidatingName = "verdict-validating"
)

// Resource is an API resource a kind selector resolves to.
type Resource struct {
	Group, Version, Resource string
	// Subresource is set for selectors like Pod/exec.
	Subresource string
	Namespaced  bool
}

// Resolver turns a policy kind selector (Kind, Version/Kind,
// Group/Version/Kind, Kind/subresource, wildcards) into API resources.
type Resolver interface {
	Resolve(selector string) ([]Resource, error)
}

// Options say where the webhooks point and what they skip.
type Options struct {
	// Service points the webhooks at a Service (in a cluster); URL at an
	// address (the local control plane). Exactly one is set.
	Service *admissionregistrationv1.ServiceReference
	URL     string
	// CABundle verifies the webhook's serving certificate.
	CABundle []byte
	// Filter is what no webhook receives: its namespaces go into every
	// webhook's namespaceSelector and its resources into a match condition
	// of every webhook, the policy-validation webhook included. The zero
	// Filter means admissionfilter.New(nil, nil): the system namespaces
	// and the resources a cluster needs to heal itself.
	Filter         admissionfilter.Filter
	MutatingName   string
	ValidatingName string
	// DefaultTimeoutSeconds is used when no policy sets one (10).
	DefaultTimeoutSeconds int32
	// GuardTTL adds the TTL label's webhook (ttl.go): the label is set
	// only by whoever may delete the object.
	GuardTTL bool
	// LegacyPaths writes what a replica of a release before WebhookAPI 2
	// answers, for as long as one may still be called (a rolling upgrade
	// from such a release, replicas.go): every admission webhook at
	// PathMutate or PathValidate, which evaluate every policy, so the
	// namespaced policies' kinds join the shared webhooks as that release
	// registered them (their timeouts still capped at
	// MaxNamespacedTimeoutSeconds), and no TTL webhook. A path such a
	// replica does not serve would be answered 404, and every write a
	// webhook failing closed receives would be refused.
	LegacyPaths bool
	// Shadow registers a shadow's webhooks (the webhook's --shadow): the
	// validating ones only, of the rules whose results admission reports
	// (validate, verifyImages), every one with failurePolicy Ignore, and
	// no webhook for the policy kinds (the running admission controller
	// validates them) or the TTL label.
	Shadow bool
	// API is where the policies are served: the policy-validation webhook
	// selects its kinds (the zero API is Verdict's).
	API policycache.API
	// Generated, when set, names the policies the API server enforces
	// as ValidatingAdmissionPolicies Verdict generated for them
	// (internal/webhook/nativegen): no webhook of Verdict's is
	// registered for them.
	Generated func(p *engine.Policy) bool
	// Candidates are the candidate policies: never enforced, but the
	// requests they select reach the validating webhook, with
	// failurePolicy Ignore, so that the admission log records them for
	// the reporter's evaluation of the candidates (none in a shadow's
	// configurations).
	Candidates []*engine.Policy
}

func (o *Options) defaults() {
	if o.MutatingName == "" {
		o.MutatingName = DefaultMutatingName
	}
	if o.ValidatingName == "" {
		o.ValidatingName = DefaultValidatingName
	}
	if o.DefaultTimeoutSeconds == 0 {
		o.DefaultTimeoutSeconds = 10
	}
	if len(o.Filter.Namespaces()) == 0 {
		o.Filter = admissionfilter.New(nil, nil)
	}
}

// webhookKey groups rules into one webhook: its kind and failure policy.
type webhookKey struct {
	mutate bool
	fail   bool
}

// tenantKey is what one namespace's namespaced policies need of one
// webhook kind and failure policy.
type tenantKey struct {
	webhookKey
	namespace string
}

// ruleKey is one resource of one webhook.
type ruleKey struct {
	group, version, resource string
}

// accum collects what one webhook must receive.
type accum struct {
	ops     map[ruleKey]map[admissionregistrationv1.OperationType]bool
	timeout int32
	// scope of its rules: all for cluster policies, namespaced resources
	// only for namespaced policies.
	scope admissionregistrationv1.ScopeType
	// namespaces a namespaced policies' webhook selects; none for the
	// cluster policies' webhooks.
	namespaces []string
	// reinvoke: a MutatingPolicy of the webhook asks to be reinvoked
	// when a later mutation changes the object (reinvocationPolicy
	// IfNeeded).
	reinvoke bool
}

func newAccum(scope admissionregistrationv1.ScopeType) *accum {
	return &accum{ops: map[ruleKey]map[admissionregistrationv1.OperationType]bool{}, scope: scope}
}

// Build computes the mutating and validating configurations for the
// policies: only the kinds and operations their rules match, one webhook
// with failurePolicy Fail and one with Ignore per type (left out when
// empty) for the cluster policies, with the largest timeout they ask
// for, and webhooks of their own for the namespaced policies (see
// tenantWebhooks); a namespaceSelector that skips the excluded
// namespaces and a match condition that skips the excluded resources on
// every webhook, and a webhook that validates Verdict's own policy
// kinds. The result is deterministic.
func Build(policies []*engine.Policy, r Resolver, o Options) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	o.defaults()
	hooks := map[webhookKey]*accum{}
	tenants := map[tenantKey]*accum{}
	excluded := o.Filter.Namespaces()
	for _, p := range policies {
		if !p.Raw.Spec.AdmissionEnabled() || p.Raw.Native != nil || (o.Generated != nil && o.Generated(p)) {
			// A Kubernetes admission policy, or one generated from a
			// ValidatingPolicy, is the API server's to enforce.
			continue
		}
		ns := ""
		if p.Raw.Namespaced() {
			ns = p.Raw.Metadata.Namespace
			if ns == "" || slices.Contains(excluded, ns) {
				continue // no request from its namespace ever arrives
			}
		}
		timeout := p.Raw.Spec.WebhookTimeoutSeconds
		if ns != "" && o.LegacyPaths {
			ns = "" // the shared webhooks, as the earlier release has them
			if timeout != nil && *timeout > MaxNamespacedTimeoutSeconds {
				capped := int32(MaxNamespacedTimeoutSeconds)
				timeout = &capped
			}
		}
		fail := p.Raw.Spec.FailurePolicy != "Ignore" && !o.Shadow
		for _, rule := range p.Rules {
			which := webhooksOf(rule)
			if o.Shadow {
				which = shadowWebhooks(rule)
			}
			for _, mutate := range which {
				reinvoke := mutate && p.Raw.MPol != nil && p.Raw.MPol.ReinvocationPolicy == "IfNeeded"
				if err := addPolicyRule(hooks, tenants, webhookKey{mutate: mutate, fail: fail}, ns, timeout, reinvoke, rule, r); err != nil {
					return nil, nil, fmt.Errorf("policy %s rule %s: %w", p.Raw.Key(), rule.Name, err)
				}
			}
		}
	}
	if err := addCandidates(hooks, tenants, excluded, r, o); err != nil {
		return nil, nil, err
	}
	mut := &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: o.MutatingName, Labels: managedLabels()},
	}
	val := &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: o.ValidatingName, Labels: managedLabels()},
	}
	mutatePath, validatePath := PathMutateCluster, PathValidateCluster
	if o.LegacyPaths {
		mutatePath, validatePath = PathMutate, PathValidate
	}
	for _, fail := range []bool{true, false} {
		if a := hooks[webhookKey{mutate: true, fail: fail}]; a != nil && len(a.ops) > 0 {
			mut.Webhooks = append(mut.Webhooks, mutatingWebhook("mutate-"+suffix(fail), mutatePath, a, fail, o))
		}
		if a := hooks[webhookKey{mutate: false, fail: fail}]; a != nil && len(a.ops) > 0 {
			val.Webhooks = append(val.Webhooks, validatingWebhook("validate-"+suffix(fail), validatePath, a, fail, o))
		}
	}
	for _, g := range tenantWebhooks(tenants, true, o) {
		mut.Webhooks = append(mut.Webhooks, mutatingWebhook(g.name, PathMutateNamespaced, g.accum, g.fail, o))
	}
	for _, g := range tenantWebhooks(tenants, false, o) {
		val.Webhooks = append(val.Webhooks, validatingWebhook(g.name, PathValidateNamespaced, g.accum, g.fail, o))
	}
	if !o.Shadow {
		val.Webhooks = append(val.Webhooks, policyWebhook(o))
	}
	if o.GuardTTL && !o.LegacyPaths && !o.Shadow {
		val.Webhooks = append(val.Webhooks, ttlWebhook(o))
	}
	return mut, val, nil
}

// addCandidates sends what the candidate policies' rules select, of
// every type, to the validating webhooks that fail open (their
// namespace's, for a namespaced kind): the webhook evaluates nothing of
// theirs and records the requests in the admission log. A candidate's
// kind that does not resolve is left out: it must never stop the
// configurations of the policies in force.
func addCandidates(hooks map[webhookKey]*accum, tenants map[tenantKey]*accum, excluded []string, r Resolver, o Options) error {
	if o.Shadow {
		return nil
	}
	for _, p := range o.Candidates {
		if !p.Raw.Spec.AdmissionEnabled() || p.Raw.Native != nil {
			continue
		}
		ns := ""
		if p.Raw.Namespaced() {
			ns = p.Raw.Metadata.Namespace
			if ns == "" || slices.Contains(excluded, ns) {
				continue
			}
		}
		if o.LegacyPaths {
			ns = "" // the shared webhooks, as the earlier release has them
		}
		for _, rule := range p.Rules {
			if len(webhooksOf(rule)) == 0 {
				continue
			}
			// Resolved first into a scratch accumulator: a kind the API
			// server does not serve leaves the rule out.
			if err := addPolicyRule(map[webhookKey]*accum{}, map[tenantKey]*accum{}, webhookKey{}, ns, nil, false, rule, r); err != nil {
				continue
			}
			if err := addPolicyRule(hooks, tenants, webhookKey{mutate: false, fail: false}, ns, nil, false, rule, r); err != nil {
				return fmt.Errorf("candidate %s rule %s: %w", p.Raw.Key(), rule.Name, err)
			}
		}
	}
	return nil
}

// webhooksOf says which webhooks a rule needs, each as whether it is the
// mutating one; none for a rule admission does not evaluate. A
// mutate-existing rule's triggers come through the validating webhook (as
// in Kyverno), which queues the work. A verifyImages rule that pins images
// to their digests needs both: the mutating webhook verifies and pins,
// the validating one verifies again (from the cache) and checks
// verifyDigest and required on what the mutations left.
func webhooksOf(rule *engine.Rule) []bool {
	switch {
	case rule.Mutation != nil:
		return []bool{!rule.MutatesExisting()}
	case len(rule.VerifyImages) > 0:
		for i := range rule.VerifyImages {
			if rule.VerifyImages[i].MutatesDigest() {
				return []bool{true, false}
			}
		}
		return []bool{false}
	case rule.Validation != nil, rule.Generation != nil:
		return []bool{false}
	}
	return nil
}

// shadowWebhooks is webhooksOf for a shadow: the validating webhook for
// the rules whose admission results are reported (validate, verifyImages
// checked again after the mutations), none for the others: a shadow
// mutates nothing and queues no work.
func shadowWebhooks(rule *engine.Rule) []bool {
	if rule.Validation != nil || len(rule.VerifyImages) > 0 {
		return []bool{false}
	}
	return nil
}

// addPolicyRule adds a rule of a policy (of namespace ns, "" for the
// cluster's webhooks) to the webhook k.
func addPolicyRule(hooks map[webhookKey]*accum, tenants map[tenantKey]*accum, k webhookKey, ns string, timeout *int32, reinvoke bool, rule *engine.Rule, r Resolver) error {
	a := accumFor(hooks, tenants, k, ns, timeout, reinvoke)
	if rr, ok := rule.ResourceRules(); ok {
		addResourceRules(a, rr, nil)
		if syncsDeletes(rule) {
			// A synchronized GeneratingPolicy's triggers are also watched
			// for their deletes, whatever operations it selects. The
			// webhook only queues the removal of their downstream and never
			// denies a delete: the Ignore webhook, so that no replica being
			// down ever blocks a deletion.
			ignore := accumFor(hooks, tenants, webhookKey{mutate: k.mutate, fail: false}, ns, timeout, false)
			addResourceRules(ignore, rr, []string{"DELETE"})
		}
		return nil
	}
	ops := admissionOps
	if k.mutate {
		ops = mutationOps
	}
	return addRule(a, &rule.MatchResources, ops, r)
}

// Unresolved returns the kind selectors of a policy's admission rules that
// name no resource the resolver knows (a kind the API server does not
// serve, a typo): no webhook can be registered for them, and the policy is
// not ready. A policy with admission off has none.
func Unresolved(p *engine.Policy, r Resolver) ([]string, error) {
	if !p.Raw.Spec.AdmissionEnabled() {
		return nil, nil
	}
	var out []string
	for _, rule := range p.Rules {
		if len(webhooksOf(rule)) == 0 {
			continue
		}
		if _, ok := rule.ResourceRules(); ok {
			continue // resources named as the API server names them
		}
		for _, k := range matchKinds(&rule.MatchResources) {
			res, err := r.Resolve(k)
			if err != nil {
				return nil, err
			}
			if len(res) == 0 && !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out, nil
}

// matchKinds lists the kind selectors of a match block.
func matchKinds(m *policy.MatchResources) []string {
	kinds := slices.Clone(m.Kinds)
	for i := range m.Any {
		kinds = append(kinds, m.Any[i].Kinds...)
	}
	for i := range m.All {
		kinds = append(kinds, m.All[i].Kinds...)
	}
	return kinds
}

func managedLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": "verdict"}
}

// The operations a webhook receives for a rule whose match block names
// none, as Kyverno registers them: mutations see creates and updates;
// validations and generate triggers see every operation (a policy may
// guard deletes or exec with preconditions on request.operation).
var (
	mutationOps  = []string{"CREATE", "UPDATE"}
	admissionOps = []string{"CREATE", "UPDATE", "DELETE", "CONNECT"}
)

// addRule adds the resources and operations a match block selects; a
// resource description without operations gets defaultOps.
func addRule(a *accum, m *policy.MatchResources, defaultOps []string, r Resolver) error {
	type sel struct {
		kinds []string
		ops   []string
	}
	var sels []sel
	add := func(rd *policy.ResourceDescription) {
		if len(rd.Kinds) > 0 {
			sels = append(sels, sel{kinds: rd.Kinds, ops: rd.Operations})
		}
	}
	add(&m.ResourceDescription)
	for i := range m.Any {
		add(&m.Any[i].ResourceDescription)
	}
	for i := range m.All {
		add(&m.All[i].ResourceDescription)
	}
	for _, s := range sels {
		ops := s.ops
		if len(ops) == 0 {
			ops = defaultOps
		}
		for _, k := range s.kinds {
			resources, err := r.Resolve(k)
			if err != nil {
				return err
			}
			for _, res := range resources {
				name := res.Resource
				if res.Subresource != "" {
					name += "/" + res.Subresource
				}
				a.add(ruleKey{group: res.Group, version: res.Version, resource: name}, ops)
				if res.Group == "" && res.Version == "v1" && name == "pods" {
					// Ephemeral containers are added to a Pod through their
					// own subresource: a rule on Pods sees them too, as in
					// Kyverno.
					a.add(ruleKey{version: "v1", resource: "pods/ephemeralcontainers"}, ops)
				}
			}
		}
	}
	return nil
}

// addResourceRules records a ValidatingPolicy's resource rules as they
// are written (their excludes, names and selectors are checked by the
// engine on what the webhook receives). Unlike a kind selector on Pods,
// "pods" does not take in pods/ephemeralcontainers: a ValidatingPolicy
// selects subresources by name, as the API server's policies do.
// accumFor is the webhook k of namespace ns ("" for the cluster's),
// made if it is not yet, its timeout raised to timeout and reinvoked if
// reinvoke.
func accumFor(hooks map[webhookKey]*accum, tenants map[tenantKey]*accum, k webhookKey, ns string, timeout *int32, reinvoke bool) *accum {
	var a *accum
	if ns == "" {
		a = hooks[k]
		if a == nil {
			a = newAccum(admissionregistrationv1.AllScopes)
			hooks[k] = a
		}
	} else {
		tk := tenantKey{webhookKey: k, namespace: ns}
		a = tenants[tk]
		if a == nil {
			a = newAccum(admissionregistrationv1.NamespacedScope)
			tenants[tk] = a
		}
	}
	if t := timeout; t != nil && *t > a.timeout {
		a.timeout = *t
	}
	a.reinvoke = a.reinvoke || reinvoke
	return a
}

// addResourceRules adds resource rules to a webhook, each with its own
// operations, or with ops when given.
func addResourceRules(a *accum, rules []policy.ResourceRule, ops []string) {
	for _, rr := range rules {
		ops := ops
		if ops == nil {
			ops = rr.Operations
		}
		for _, g := range rr.APIGroups {
			for _, v := range rr.APIVersions {
				for _, res := range rr.Resources {
					a.add(ruleKey{group: g, version: v, resource: res}, ops)
				}
			}
		}
	}
}

// syncsDeletes reports whether a rule is a synchronized GeneratingPolicy's
// that does not select deletes itself: the deletes of its triggers take
// their downstream along.
func syncsDeletes(rule *engine.Rule) bool {
	return rule.Generation != nil && rule.Generation.Synchronize && rule.Generation.FromCEL && !rule.SelectsOperation("DELETE")
}

// add records that the webhook receives ops on a resource.
func (a *accum) add(rk ruleKey, ops []string) {
	set := a.ops[rk]
	if set == nil {
		set = map[admissionregistrationv1.OperationType]bool{}
		a.ops[rk] = set
	}
	for _, op := range ops {
		set[admissionregistrationv1.OperationType(strings.ToUpper(op))] = true
	}
}

// rules writes the accumulated resources in a fixed order.
func (a *accum) rules() []admissionregistrationv1.RuleWithOperations {
	keys := make([]ruleKey, 0, len(a.ops))
	for k := range a.ops {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].group != keys[j].group {
			return keys[i].group < keys[j].group
		}
		if keys[i].version != keys[j].version {
			return keys[i].version < keys[j].version
		}
		return keys[i].resource < keys[j].resource
	})
	out := make([]admissionregistrationv1.RuleWithOperations, 0, len(keys))
	for _, k := range keys {
		var ops []admissionregistrationv1.OperationType
		for op := range a.ops[k] {
			ops = append(ops, op)
		}
		slices.Sort(ops)
		scope := a.scope
		out = append(out, admissionregistrationv1.RuleWithOperations{
			Operations: ops,
			Rule: admissionregistrationv1.Rule{
				APIGroups:   []string{k.group},
				APIVersions: []string{k.version},
				Resources:   []string{k.resource},
				Scope:       &scope,
			},
		})
	}
	return out
}

func (a *accum) timeoutOr(def int32) *int32 {
	t := a.timeout
	if t == 0 {
		t = def
	}
	if t < 1 {
		t = 1
	}
	if t > 30 {
		t = 30
	}
	return &t
}

func clientConfig(path string, o Options) admissionregistrationv1.WebhookClientConfig {
	cc := admissionregistrationv1.WebhookClientConfig{CABundle: o.CABundle}
	if o.Service != nil {
		svc := *o.Service
		p := path
		svc.Path = &p
		if svc.Port == nil {
			port := int32(443)
			svc.Port = &port
		}
		cc.Service = &svc
	} else {
		u := strings.TrimSuffix(o.URL, "/") + path
		cc.URL = &u
	}
	return cc
}

// ExcludedNamespaces is the namespace selector of every webhook: it
// skips the filter's namespaces. A policy Verdict generates for the API
// server carries it too.
func ExcludedNamespaces(f admissionfilter.Filter) *metav1.LabelSelector {
	return namespaceSelector(Options{Filter: f}, nil)
}

// namespaceSelector skips the excluded namespaces and, for a namespaced
// policies' webhook, selects only the namespaces it lists.
func namespaceSelector(o Options, namespaces []string) *metav1.LabelSelector {
	excluded := o.Filter.Namespaces()
	sel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key:      corev1.LabelMetadataName,
		Operator: metav1.LabelSelectorOpNotIn,
		Values:   excluded,
	}}}
	if len(namespaces) > 0 {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key:      corev1.LabelMetadataName,
			Operator: metav1.LabelSelectorOpIn,
			Values:   namespaces,
		})
	}
	return sel
}

// matchConditions keep the excluded resources away from a webhook whose
// rules could select one (a "*", or an excluded resource named); the API
// server evaluates them before calling it. A webhook whose rules reach
// none has none: the API server would convert every object it sends for
// a condition that is always true (about 0.3 ms of its CPU per Pod
// admission, BENCHMARKS.md), and the webhook applies the filter to every
// request it receives anyway.
func matchConditions(o Options, rules []admissionregistrationv1.RuleWithOperations) []admissionregistrationv1.MatchCondition {
	for _, r := range rules {
		if o.Filter.Reaches(r.APIGroups, r.Resources) {
			return []admissionregistrationv1.MatchCondition{{Name: admissionfilter.MatchConditionName, Expression: o.Filter.Expression()}}
		}
	}
	return nil
}

func failurePolicy(fail bool) *admissionregistrationv1.FailurePolicyType {
	p := admissionregistrationv1.Ignore
	if fail {
		p = admissionregistrationv1.Fail
	}
	return &p
}

func suffix(fail bool) string {
	if fail {
		return "fail"
	}
	return "ignore"
}

var (
	sideEffectsNone     = admissionregistrationv1.SideEffectClassNone
	sideEffectsOnDryRun = admissionregistrationv1.SideEffectClassNoneOnDryRun
	matchEquivalent     = admissionregistrationv1.Equivalent
	reinvokeNever       = admissionregistrationv1.NeverReinvocationPolicy
	reinvokeIfNeeded    = admissionregistrationv1.IfNeededReinvocationPolicy
)

// The admission webhooks publish results and work, except on dry runs:
// NoneOnDryRun. Every field the API server would default is set, so that a written
// configuration reads back equal and updates happen only on real change.
// path is the endpoint of the policies the webhook is registered for.
// A webhook is reinvoked when a later mutation changed the object only
// if one of its MutatingPolicies asks for it (reinvocationPolicy
// IfNeeded); the reinvocation then runs every mutation of the webhook
// again, as Kyverno's webhooks (all IfNeeded) do.
func mutatingWebhook(name, path string, a *accum, fail bool, o Options) admissionregistrationv1.MutatingWebhook {
	reinvoke := &reinvokeNever
	if a.reinvoke {
		reinvoke = &reinvokeIfNeeded
	}
	rules := a.rules()
	return admissionregistrationv1.MutatingWebhook{
		Name:                    name + ".verdict.dev",
		ClientConfig:            clientConfig(path, o),
		Rules:                   rules,
		FailurePolicy:           failurePolicy(fail),
		MatchPolicy:             &matchEquivalent,
		NamespaceSelector:       namespaceSelector(o, a.namespaces),
		ObjectSelector:          &metav1.LabelSelector{},
		MatchConditions:         matchConditions(o, rules),
		SideEffects:             &sideEffectsOnDryRun,
		TimeoutSeconds:          a.timeoutOr(o.DefaultTimeoutSeconds),
		AdmissionReviewVersions: []string{"v1"},
		ReinvocationPolicy:      reinvoke,
	}
}

func validatingWebhook(name, path string, a *accum, fail bool, o Options) admissionregistrationv1.ValidatingWebhook {
	rules := a.rules()
	return admissionregistrationv1.ValidatingWebhook{
		Name:                    name + ".verdict.dev",
		ClientConfig:            clientConfig(path, o),
		Rules:                   rules,
		FailurePolicy:           failurePolicy(fail),
		MatchPolicy:             &matchEquivalent,
		NamespaceSelector:       namespaceSelector(o, a.namespaces),
		ObjectSelector:          &metav1.LabelSelector{},
		MatchConditions:         matchConditions(o, rules),
		SideEffects:             &sideEffectsOnDryRun,
		TimeoutSeconds:          a.timeoutOr(o.DefaultTimeoutSeconds),
		AdmissionReviewVersions: []string{"v1"},
	}
}

// policyWebhook validates the policy kinds of o.API at create and
// update: Verdict's, or Kyverno's once Verdict owns them.
func policyWebhook(o Options) admissionregistrationv1.ValidatingWebhook {
	scope := admissionregistrationv1.AllScopes
	timeout := int32(10)
	var rules []admissionregistrationv1.RuleWithOperations
	groups := o.API.Groups()
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		rules = append(rules, admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{
				APIGroups:   []string{g},
				APIVersions: groups[g],
				Resources:   o.API.PolicyResources(g),
				Scope:       &scope,
			},
		})
	}
	return admissionregistrationv1.ValidatingWebhook{
		Name:                    "policy.verdict.dev",
		ClientConfig:            clientConfig(PathValidatePolicy, o),
		Rules:                   rules,
		FailurePolicy:           failurePolicy(true),
		MatchPolicy:             &matchEquivalent,
		NamespaceSelector:       namespaceSelector(o, nil),
		ObjectSelector:          &metav1.LabelSelector{},
		MatchConditions:         matchConditions(o, rules),
		SideEffects:             &sideEffectsNone,
		TimeoutSeconds:          &timeout,
		AdmissionReviewVersions: []string{"v1"},
	}
}
