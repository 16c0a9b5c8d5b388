package kyvernometrics

import (
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// PolicyChanges returns the watch handler that counts
// kyverno_policy_changes_total, for the informers of ClusterPolicies and
// Policies (policycache.Cache.OnPolicyChange); objects of other kinds are
// ignored. As Kyverno counts them: every policy the watch lists at start
// is created; an update counts only when the spec changed, under the old
// policy's labels, and under the new one's too when its background or
// enforce mode changed; a delete under the deleted policy's labels.
func (m *Metrics) PolicyChanges() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := watched(obj); ok {
				m.change(p, changeCreated)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok := watched(oldObj)
			n, ok2 := watched(newObj)
			if !ok || !ok2 || reflect.DeepEqual(o.spec, n.spec) {
				return
			}
			m.change(o, changeUpdated)
			if oi, ni := classicInfo(o.policy), classicInfo(n.policy); oi.mode != ni.mode || oi.background != ni.background {
				m.change(n, changeUpdated)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := watched(obj); ok {
				m.change(p, changeDeleted)
			}
		},
	}
}

func (m *Metrics) change(p watchedPolicy, change string) {
	info := classicInfo(p.policy)
	m.changes.WithLabelValues(info.mode, info.typ, info.background, info.namespace, info.name, change).Inc()
}

// watchedPolicy is what the labels of a watched ClusterPolicy or Policy
// are read from, and its spec as stored.
type watchedPolicy struct {
	policy *policy.Policy
	spec   any
}

// watched reads a ClusterPolicy or a Policy from a watch event's object:
// its kind, name and namespace, and of its spec what the labels need
// (validationFailureAction, the rules' validate.failureAction,
// background).
func watched(obj any) (watchedPolicy, bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || (u.GetKind() != policy.KindClusterPolicy && u.GetKind() != policy.KindPolicy) {
		return watchedPolicy{}, false
	}
	p := &policy.Policy{Kind: u.GetKind(), Metadata: policy.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace()}}
	spec, _ := u.Object["spec"].(map[string]any)
	p.Spec.ValidationFailureAction, _ = spec["validationFailureAction"].(string)
	if b, ok := spec["background"].(bool); ok {
		p.Spec.Background = &b
	}
	rules, _ := spec["rules"].([]any)
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		v, _ := rule["validate"].(map[string]any)
		if v == nil {
			continue
		}
		action, _ := v["failureAction"].(string)
		p.Spec.Rules = append(p.Spec.Rules, policy.Rule{Validation: &policy.Validation{FailureAction: action}})
	}
	return watchedPolicy{policy: p, spec: u.Object["spec"]}, true
}
