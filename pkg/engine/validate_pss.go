//go:build !nopss

package engine

import (
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/engine/pss"
)

// podSecurity is a podSecurity rule prepared at Compile: its profile (or
// why the level or version is invalid) and its exclusions.
type podSecurity struct {
	profile  *pss.Profile
	err      error
	excludes []pss.Exclude
}

// compilePodSecurity prepares the rule's podSecurity check, if it has one.
func (r *Rule) compilePodSecurity() {
	v := r.Validation
	if v == nil || v.PodSecurity == nil {
		return
	}
	ps := v.PodSecurity
	c := &podSecurity{excludes: make([]pss.Exclude, len(ps.Exclude))}
	for i, ex := range ps.Exclude {
		c.excludes[i] = pss.Exclude{ControlName: ex.ControlName, Images: ex.Images, RestrictedField: ex.RestrictedField, Values: ex.Values}
	}
	c.profile, c.err = pss.NewProfile(ps.Level, ps.Version)
	r.podSecurity = c
}

func (run *ruleRun) validatePodSecurity(rr RuleResponse, ps *policy.PodSecurity) RuleResponse {
	c := run.rule.podSecurity
	if c == nil {
		return run.errorf(rr, "rule %s: podSecurity not prepared", run.rule.Name)
	}
	kind := document.String(run.obj, "kind")
	pod, err := pss.PodFromResource(kind, run.obj)
	if err != nil {
		return run.errorf(rr, "failed to check pod security: %v", err)
	}
	sc := run.req.scratch()
	if id := identity(run.obj); sc.pod == nil || sc.podObj != id {
		sc.pod, sc.podErr = pss.ToPod(pod)
		sc.podObj = id
		if sc.podErr == nil {
			sc.podMemo = pss.NewMemo(sc.pod)
		}
	}
	if sc.podErr != nil {
		return run.errorf(rr, "failed to read the pod: %v", sc.podErr)
	}
	if c.err != nil {
		return run.errorf(rr, "failed to check pod security: %v", c.err)
	}
	// The exclusions' wildcards are charged to the request's budget.
	res, err := c.profile.CheckPodMetered(c.excludes, sc.pod, sc.podMemo, run.meter())
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
