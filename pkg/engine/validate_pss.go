//go:build !nopss

package engine

import (
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/engine/pss"
)

func (run *ruleRun) validatePodSecurity(rr RuleResponse, ps *policy.PodSecurity) RuleResponse {
	excludes := make([]pss.Exclude, len(ps.Exclude))
	for i, ex := range ps.Exclude {
		excludes[i] = pss.Exclude{ControlName: ex.ControlName, Images: ex.Images, RestrictedField: ex.RestrictedField, Values: ex.Values}
	}
	kind := document.String(run.obj, "kind")
	pod, err := pss.PodFromResource(kind, run.obj)
	if err != nil {
		return run.errorf(rr, "failed to check pod security: %v", err)
	}
	c := run.req.scratch()
	if id := identity(run.obj); c.pod == nil || c.podObj != id {
		c.pod, c.podErr = pss.ToPod(pod)
		c.podObj = id
		if c.podErr == nil {
			c.podMemo = pss.NewMemo(c.pod)
		}
	}
	if c.podErr != nil {
		return run.errorf(rr, "failed to read the pod: %v", c.podErr)
	}
	res, err := pss.CheckPodMemo(ps.Level, ps.Version, excludes, c.pod, c.podMemo)
	if err != nil {
		return run.errorf(rr, "failed to check pod security: %v", err)
	}
	version := ps.Version
	if version == "" {
		version = "latest"
	}
	if res.Allowed {
		rr.Status = StatusPass
		rr.Message = run.rule.pssPassMessage
		return rr
	}
	rr.Message = res.Message(run.rule.Name, ps.Level, version, kind)
	for _, c := range res.Failed {
		rr.PodSecurityChecks = append(rr.PodSecurityChecks, PodSecurityCheck{ID: c.ID, Reason: c.Reason, Details: c.Detail})
	}
	rr.Status = StatusFail
	return rr
}
