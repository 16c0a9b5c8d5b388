package kyvernometrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdict-dev/verdict/pkg/engine"
)

// RuleInfo registers kyverno_policy_rule_info_total on reg: 1 for each
// rule (autogen rules included) of each ClusterPolicy and Policy that
// policies returns, read at every scrape, so the evaluation path pays
// nothing for it. status_ready is the policy's status.ready as the
// service read it (true once the policy compiled and its webhooks are in
// place, policystatus).
func RuleInfo(reg prometheus.Registerer, policies func() []*engine.Policy) error {
	if err := reg.Register(ruleInfo{policies: policies}); err != nil {
		return fmt.Errorf("register %s: %w", NamePolicyRuleInfo, err)
	}
	return nil
}

var ruleInfoDesc = prometheus.NewDesc(NamePolicyRuleInfo,
	"Kyverno's name: 1 for each rule of each ClusterPolicy and Policy this service holds, autogen rules included.",
	ruleInfoLabels[:], nil)

// ruleInfo is the collector of kyverno_policy_rule_info_total.
type ruleInfo struct {
	policies func() []*engine.Policy
}

func (ruleInfo) Describe(ch chan<- *prometheus.Desc) { ch <- ruleInfoDesc }

func (c ruleInfo) Collect(ch chan<- prometheus.Metric) {
	// A scrape never takes the process down: a policy source that
	// panics gives no series this time.
	defer func() { _ = recover() }()
	type key struct{ policy, namespace, rule string }
	seen := map[key]bool{}
	for _, p := range c.policies() {
		if p == nil || p.Raw == nil || !classic(p.Raw) {
			continue
		}
		info := classicInfo(p.Raw)
		ready := formatBool(p.Raw.Status != nil && p.Raw.Status.Ready)
		for _, r := range p.Rules {
			k := key{info.name, info.namespace, r.Name}
			if seen[k] {
				// One series per rule: a gatherer refuses a series twice.
				continue
			}
			seen[k] = true
			ch <- prometheus.MustNewConstMetric(ruleInfoDesc, prometheus.GaugeValue, 1,
				r.Name, ruleType(&r.Rule), info.namespace, info.name, ready, info.mode, info.typ, info.background)
		}
	}
}
