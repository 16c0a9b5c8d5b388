package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine/celeval"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// celException is a compiled policies.kyverno.io PolicyException.
type celException struct {
	key string
	// namespace and clusterWide: how far it reaches (exceptionReaches).
	namespace     string
	clusterWide   bool
	conditions    []*celeval.Program
	images        []string
	allowedValues []string
	reportPass    bool
	// expiresAt, when not zero, is when it stops applying: checked at
	// each evaluation, so that an exception compiled into a policy
	// before it expired stops exempting on time.
	expiresAt time.Time
}

// WithCELExceptions returns p with the PolicyExceptions of excs that
// name it (by name and kind) compiled in, as Kyverno compiles a CEL
// policy with its exceptions. p is not changed; a policy of another kind,
// or one no exception names, is returned as it is. An exception whose
// condition does not compile is an error naming it.
func (e *Engine) WithCELExceptions(p *Policy, excs []*policy.CELException) (*Policy, error) {
	if p.Raw.VPol == nil && p.Raw.MPol == nil && p.Raw.GPol == nil && p.Raw.IVPol == nil {
		return p, nil
	}
	var compiled []*celException
	for _, ex := range excs {
		if !slices.ContainsFunc(ex.Spec.PolicyRefs, func(r policy.PolicyRef) bool {
			return r.Name == p.Name() && r.Kind == p.Raw.Kind
		}) {
			continue
		}
		if p.Raw.Namespaced() && ex.Metadata.Namespace != p.Raw.Metadata.Namespace {
			continue
		}
		ce, err := compileCELException(ex)
		if err != nil {
			return nil, err
		}
		compiled = append(compiled, ce)
	}
	if len(compiled) == 0 {
		return p, nil
	}
	cp := *p
	cp.Rules = make([]*Rule, len(p.Rules))
	for i, r := range p.Rules {
		rc := *r
		if r.cel != nil {
			c := *r.cel
			c.exceptions = compiled
			rc.cel = &c
		}
		cp.Rules[i] = &rc
	}
	return &cp, nil
}

// compileCELException compiles a PolicyException's match conditions; an
// error names the exception and the condition's path.
func compileCELException(ex *policy.CELException) (*celException, error) {
	ce := &celException{key: ex.Key(), namespace: ex.Metadata.Namespace, clusterWide: ex.ClusterWide, images: ex.Spec.Images, allowedValues: ex.Spec.AllowedValues, reportPass: ex.Spec.ReportResult == "pass"}
	if t := ex.Spec.ExpiresAt; t != nil {
		ce.expiresAt = *t
	}
	var errs []error
	for i, c := range ex.Spec.MatchConditions {
		prog, err := celeval.Compile(c.Expression, celeval.Bool)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.matchConditions[%d].expression: %w", i, err))
		}
		ce.conditions = append(ce.conditions, prog)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("PolicyException %s: %w", ex.Key(), errors.Join(errs...))
	}
	return ce, nil
}

// CheckCELException reports what keeps a PolicyException of the CEL shape
// from being used: a condition that does not compile.
func (e *Engine) CheckCELException(ex *policy.CELException) error {
	_, err := compileCELException(ex)
	return err
}

// applyCELExceptions evaluates the policy's exceptions before it, as
// Kyverno does: an exception applies when all its conditions hold; one
// without images or allowed values exempts the request wholly (the
// result is a skip, or a pass when it says reportResult: pass); the
// others only give the policy what they allow. done is set when the
// result is decided (an exemption, or an error in a condition before
// any whole exemption was found).
func (run *ruleRun) applyCELExceptions(rr *RuleResponse, cr *celRule, ev *celeval.Evaluation) (done bool) {
	var whole []*celException
	var images, values []string
	resNS := document.String(run.req.resource(), "metadata", "namespace")
	now := run.e.now()
	for _, ex := range cr.exceptions {
		if !exceptionReaches(ex.clusterWide, ex.namespace, run.req, resNS) {
			continue
		}
		if !ex.expiresAt.IsZero() && !now.Before(ex.expiresAt) {
			continue // expired: the policy applies again
		}
		matched := true
		for _, c := range ex.conditions {
			ok, err := ev.Bool(c)
			if err != nil {
				if len(whole) > 0 {
					matched = false
					break
				}
				rr.Name, rr.Status, rr.Message = "evaluation", StatusError, "failed to load context: "+celeval.Cause(err).Error()
				return true
			}
			if !ok {
				matched = false
				break
			}
		}
		if !matched {
			continue
		}
		if len(ex.images) == 0 && len(ex.allowedValues) == 0 {
			whole = append(whole, ex)
		} else if len(whole) == 0 {
			images = append(images, ex.images...)
			values = append(values, ex.allowedValues...)
		}
	}
	if len(whole) > 0 {
		keys := make([]string, len(whole))
		for i, ex := range whole {
			keys[i] = ex.key
		}
		joined := strings.Join(keys, ", ")
		rr.Name, rr.Exception = "exception", joined
		if whole[0].reportPass {
			rr.Status, rr.Message = StatusPass, "rule is passed due to policy exception: "+joined
		} else {
			rr.Status, rr.Message = StatusSkip, "rule is skipped due to policy exception: "+joined
		}
		return true
	}
	if len(images) > 0 || len(values) > 0 {
		ev.SetExceptions(images, values)
	}
	return false
}

// HasCELExceptions reports whether CEL PolicyExceptions were given to
// the policy (WithCELExceptions).
func (p *Policy) HasCELExceptions() bool {
	for _, r := range p.Rules {
		if r.cel != nil && len(r.cel.exceptions) > 0 {
			return true
		}
	}
	return false
}

// HasAutogen reports whether the policy has autogen rules (for Pod
// controllers).
func (p *Policy) HasAutogen() bool {
	return slices.ContainsFunc(p.Rules, func(r *Rule) bool { return r.Autogen })
}
