//go:build nopss

package engine

import "github.com/verdict-dev/verdict/pkg/engine/policy"

// podSecurity is not built in.
type podSecurity struct{}

func (r *Rule) compilePodSecurity() {}

func (run *ruleRun) validatePodSecurity(rr RuleResponse, ps *policy.PodSecurity) RuleResponse {
	return run.errorf(rr, "podSecurity not built in")
}
