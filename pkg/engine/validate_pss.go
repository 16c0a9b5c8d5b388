//go:build !nopss

package engine

import (
	"fmt"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/engine/pss"
)

func (run *ruleRun) validatePodSecurity(rr RuleResponse, ps *policy.PodSecurity) RuleResponse {
	excludes := make([]pss.Exclude, len(ps.Exclude))
	for i, ex := range ps.Exclude {
		excludes[i] = pss.Exclude{ControlName: ex.ControlName, Images: ex.Images, RestrictedField: ex.RestrictedField, Values: ex.Values}
	}
	pod := podOf(run.obj)
	if document.String(run.obj, "kind") != "Pod" {
		pod = map[string]any{"metadata": document.Map(pod, "metadata"), "spec": document.Map(pod, "spec")}
	}
	res, err := pss.Check(ps.Level, ps.Version, excludes, pod)
	if err != nil {
		return run.errorf(rr, "failed to check pod security: %v", err)
	}
	version := ps.Version
	if version == "" {
		version = "latest"
	}
	if res.Allowed {
		rr.Status = StatusPass
		rr.Message = fmt.Sprintf("Validation rule '%s' passed.", run.rule.Name)
		return rr
	}
	var parts []string
	for _, c := range res.Failed {
		rr.PodSecurityChecks = append(rr.PodSecurityChecks, PodSecurityCheck{ID: c.ID, Reason: c.Reason, Details: c.Details})
		parts = append(parts, fmt.Sprintf("{%s %s %s}", c.ID, c.Reason, c.Details))
	}
	rr.Status = StatusFail
	rr.Message = fmt.Sprintf("Validation rule '%s' failed. It violates PodSecurity \"%s:%s\": %s", run.rule.Name, ps.Level, version, strings.Join(parts, ", "))
	return rr
}
