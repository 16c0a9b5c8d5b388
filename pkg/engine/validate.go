package engine

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/pattern"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

func (run *ruleRun) validate(rr RuleResponse) RuleResponse {
	v := run.rule.Validation
	switch {
	case v.Deny != nil:
		return run.validateDeny(rr, v.Deny, v.Message)
	case (v.Pattern != nil || len(v.AnyPattern) > 0 || v.PodSecurity != nil) && run.req.Operation == OpDelete:
		// As Kyverno's validation handlers: the state a DELETE leaves
		// behind is no object to check, so patterns and Pod Security give
		// no result (deny conditions still decide).
		rr.Status = statusNone
		return rr
	case v.Pattern != nil || len(v.AnyPattern) > 0:
		return run.validatePatterns(rr, run.obj, v.Pattern, v.AnyPattern, v.Message, run.rule.pattern, run.rule.anyPattern)
	case len(v.ForEach) > 0:
		return run.validateForEach(rr, v.ForEach, v.Message)
	case v.PodSecurity != nil:
		return run.validatePodSecurity(rr, v.PodSecurity)
	case v.CEL != nil:
		return run.validateCEL(rr)
	case v.Manifests != nil:
		return run.validateManifests(rr, v.Manifests)
	case v.Assert != nil:
		rr.Status, rr.Unsupported = StatusSkip, true
		rr.Message = "validate.assert is not evaluated by this engine yet"
		return rr
	}
	return run.errorf(rr, "rule %s has no validation", run.rule.Name)
}

func (run *ruleRun) message(msg string) (string, error) {
	if msg == "" {
		return "", nil
	}
	m, err := run.e.substitute(run.ctx, msg, substStrict, run.req.Operation)
	if err != nil {
		return "", err
	}
	return toText(m), nil
}

func (run *ruleRun) validateDeny(rr RuleResponse, deny *policy.Deny, msg string) RuleResponse {
	denied, _, err := run.conditions(deny.Conditions)
	if deny.Conditions.IsEmpty() {
		denied = true
	}
	if err != nil {
		return run.errorf(rr, "failed to check deny conditions: %v", err)
	}
	if !denied {
		rr.Status = StatusPass
		rr.Message = run.rule.passMessage
		return rr
	}
	m, err := run.message(msg)
	if err != nil {
		// As Kyverno's getDenyMessage: the denial stands, with the message
		// as written.
		m = msg
	}
	if m == "" {
		m = fmt.Sprintf("validation error: rule %s failed", run.rule.Name)
	}
	rr.Status = StatusFail
	rr.Message = m
	return rr
}

// validatePatterns checks pattern or anyPattern. prepared and anyPrepared
// hold the patterns prepared at compile time; a nil one has variables to
// substitute first.
func (run *ruleRun) validatePatterns(rr RuleResponse, obj map[string]any, pat any, anyPat []any, msg string, prepared *pattern.Pattern, anyPrepared []*pattern.Pattern) RuleResponse {
	op := run.req.Operation
	if pat != nil {
		if err := run.step(1); err != nil {
			return run.errorf(rr, "%v", err)
		}
		var perr *pattern.Error
		if prepared != nil {
			perr = prepared.ValidateMetered(obj, run.meter())
		} else {
			p, err := run.e.substitute(run.ctx, pat, substStrict, op)
			if err != nil {
				return run.errorf(rr, "variable substitution failed for rule %s: %v", run.rule.Name, err)
			}
			perr = pattern.ValidateMetered(obj, p, run.meter())
		}
		if perr == nil {
			rr.Status = StatusPass
			rr.Message = run.rule.passMessage
			return rr
		}
		if perr.Skip() {
			rr.Status = StatusSkip
			rr.Message = perr.Msg
			return rr
		}
		rr.Status = StatusFail
		rr.Message = run.failMessage(msg, perr)
		return rr
	}
	var failed, skipped []string
	for i, ap := range anyPat {
		if err := run.step(1); err != nil {
			return run.errorf(rr, "%v", err)
		}
		var perr *pattern.Error
		if i < len(anyPrepared) && anyPrepared[i] != nil {
			perr = anyPrepared[i].ValidateMetered(obj, run.meter())
		} else {
			p, err := run.e.substitute(run.ctx, ap, substStrict, op)
			if err != nil {
				return run.errorf(rr, "variable substitution failed for rule %s: %v", run.rule.Name, err)
			}
			perr = pattern.ValidateMetered(obj, p, run.meter())
		}
		if perr == nil {
			rr.Status = StatusPass
			rr.Message = fmt.Sprintf("validation rule '%s' anyPattern[%d] passed.", run.rule.Name, i)
			return rr
		}
		switch {
		case perr.Skip():
			skipped = append(skipped, fmt.Sprintf("rule %s[%d] skipped: %s", run.rule.Name, i, perr.Msg))
		case perr.Path == "":
			failed = append(failed, fmt.Sprintf("rule %s[%d] failed: %s", run.rule.Name, i, perr.Msg))
		default:
			failed = append(failed, fmt.Sprintf("rule %s[%d] failed at path %s", run.rule.Name, i, perr.Path))
		}
	}
	if len(failed) == 0 && len(skipped) > 0 {
		rr.Status = StatusSkip
		rr.Message = strings.Join(skipped, " ")
		return rr
	}
	m, err := run.message(msg)
	if err != nil {
		return run.errorf(rr, "failed to substitute variables in message: %v", err)
	}
	rr.Status = StatusFail
	if m == "" {
		rr.Message = "validation error: " + strings.Join(failed, " ")
	} else {
		rr.Message = "validation error: " + withPeriod(m) + " " + strings.Join(failed, " ")
	}
	return rr
}

func withPeriod(s string) string {
	if strings.HasSuffix(s, ".") {
		return s
	}
	return s + "."
}

// failMessage writes Kyverno's failure text: "validation error: <message>
// rule <name> failed at path <path>".
func (run *ruleRun) failMessage(msg string, perr *pattern.Error) string {
	m, err := run.message(msg)
	if err != nil {
		return fmt.Sprintf("failed to substitute variables in message: %v", err)
	}
	name := run.rule.Name
	if m == "" {
		if perr.Path != "" {
			return fmt.Sprintf("validation error: rule %s failed at path %s", name, perr.Path)
		}
		return fmt.Sprintf("validation error: rule %s execution error: %s", name, perr.Msg)
	}
	if perr.Path != "" {
		return fmt.Sprintf("validation error: %s rule %s failed at path %s", withPeriod(m), name, perr.Path)
	}
	return fmt.Sprintf("validation error: %s rule %s execution error: %s", withPeriod(m), name, perr.Msg)
}

// foreach outcome for one list.
type foreachOutcome struct {
	applied int
	status  Status
	message string
}

func (run *ruleRun) validateForEach(rr RuleResponse, fes []policy.ForEachValidation, msg string) RuleResponse {
	applied := 0
	for i := range fes {
		out := run.foreachValidate(&fes[i], msg, 0)
		switch out.status {
		case StatusFail, StatusError:
			rr.Status, rr.Message = out.status, out.message
			return rr
		}
		applied += out.applied
	}
	if applied == 0 {
		rr.Status = StatusSkip
		rr.Message = "rule skipped"
		return rr
	}
	rr.Status = StatusPass
	rr.Message = run.rule.passMessage
	return rr
}

// foreachValidate evaluates one foreach block over its list.
func (run *ruleRun) foreachValidate(fe *policy.ForEachValidation, msg string, depth int) foreachOutcome {
	if err := run.checkForEachDepth(depth); err != nil {
		return foreachOutcome{status: StatusError, message: err.Error()}
	}
	list, err := run.evalList(fe.List)
	if err != nil {
		return foreachOutcome{status: StatusError, message: fmt.Sprintf("failed to evaluate list %s: %v", fe.List, err)}
	}
	saved := run.ctx
	defer func() { run.ctx = saved }()
	out := foreachOutcome{status: StatusPass}
	// Without context entries, an element changes only the element
	// variables, which the next element overwrites: one context serves
	// every element.
	var shared *evalContext
	savedProvided := run.provided
	defer func() { run.provided = savedProvided }()
	for idx, el := range list {
		if err := run.step(1); err != nil {
			return foreachOutcome{status: StatusError, message: err.Error()}
		}
		if el == nil {
			// As Kyverno's validateElements: null elements are passed over.
			continue
		}
		if _, isMap := el.(map[string]any); !isMap && fe.ElementScope != nil && *fe.ElementScope {
			return foreachOutcome{status: StatusError, message: fmt.Sprintf("failed to process foreach: cannot use elementScope=true foreach rules for elements that are not maps, expected type=map got type=%T", el)}
		}
		var values map[string]any
		if run.req.ForEachValues != nil {
			values = run.req.ForEachValues(run.policy.Name(), run.rule.Name, idx)
		}
		switch {
		case len(fe.Context) > 0 || len(values) > 0:
			run.ctx = saved.clone()
		case shared == nil:
			shared = saved.clone()
			run.ctx = shared
		default:
			run.ctx = shared
		}
		setElement(run.ctx, el, idx, depth)
		run.provided = savedProvided
		if len(values) > 0 {
			run.provided = make(map[string]any, len(savedProvided)+len(values))
			maps.Copy(run.provided, savedProvided)
			for k, v := range values {
				run.ctx.set(k, v)
				run.provided[k] = v
			}
		}
		if err := run.loadEntries(fe.Context); err != nil {
			return foreachOutcome{status: StatusError, message: fmt.Sprintf("failed to load context: %v", err)}
		}
		ok, _, err := run.conditions(fe.Preconditions)
		if err != nil || !ok {
			// As Kyverno's validateElements: an element whose preconditions
			// fail to evaluate is skipped. A stopped evaluation is not lost:
			// the next step reports it, and the rule reports the stop.
			continue
		}
		var res RuleResponse
		switch {
		case fe.Deny != nil:
			res = run.validateDeny(RuleResponse{}, fe.Deny, msg)
		case fe.Pattern != nil || len(fe.AnyPattern) > 0:
			target := run.obj
			if fe.ElementScope == nil || *fe.ElementScope {
				m, isMap := el.(map[string]any)
				if isMap {
					target = m
				} else {
					target = map[string]any{}
					if fe.Pattern != nil {
						res = run.validateScalar(el, fe.Pattern, msg)
						break
					}
				}
			}
			if res.Status == "" {
				res = run.validatePatterns(RuleResponse{}, target, fe.Pattern, fe.AnyPattern, msg, nil, nil)
			}
		case len(fe.ForEach) > 0:
			var nested []policy.ForEachValidation
			if err := json.Unmarshal(fe.ForEach, &nested); err != nil {
				return foreachOutcome{status: StatusError, message: fmt.Sprintf("invalid nested foreach: %v", err)}
			}
			inner := foreachOutcome{status: StatusPass}
			for j := range nested {
				o := run.foreachValidate(&nested[j], msg, depth+1)
				if o.status == StatusFail || o.status == StatusError {
					inner = o
					break
				}
				inner.applied += o.applied
			}
			if inner.status != StatusPass {
				return inner
			}
			if inner.applied == 0 {
				continue
			}
			res.Status = StatusPass
		default:
			return foreachOutcome{status: StatusError, message: "foreach has no pattern, anyPattern, deny or foreach"}
		}
		switch res.Status {
		case StatusFail, StatusError:
			return foreachOutcome{status: res.Status, message: res.Message}
		case StatusPass:
			out.applied++
		}
	}
	return out
}

// validateScalar checks a pattern against a non-object element.
func (run *ruleRun) validateScalar(el, pat any, msg string) RuleResponse {
	p, err := run.e.substitute(run.ctx, pat, substStrict, run.req.Operation)
	if err != nil {
		return RuleResponse{Status: StatusError, Message: err.Error()}
	}
	if perr := pattern.ValidateMetered(el, p, run.meter()); perr != nil {
		if perr.Skip() {
			return RuleResponse{Status: StatusSkip, Message: perr.Msg}
		}
		return RuleResponse{Status: StatusFail, Message: run.failMessage(msg, perr)}
	}
	return RuleResponse{Status: StatusPass}
}

// evalList evaluates a foreach list expression; null is an empty list. A
// list longer than the engine's limit stops the rule.
func (run *ruleRun) evalList(expr string) ([]any, error) {
	e, err := run.e.substitute(run.ctx, expr, substStrict, run.req.Operation)
	if err != nil {
		return nil, err
	}
	s := strings.TrimSpace(toText(e))
	s = strings.TrimSuffix(strings.TrimPrefix(s, "{{"), "}}")
	v, err := run.ctx.query(strings.TrimSpace(s))
	if err != nil {
		return nil, err
	}
	switch t := v.(type) {
	case nil:
		return nil, nil
	case []any:
		if err := run.checkForEachList(expr, len(t)); err != nil {
			return nil, err
		}
		return t, nil
	case map[string]any:
		if err := run.checkForEachList(expr, len(t)); err != nil {
			return nil, err
		}
		// A map iterates over its entries as {key, value}.
		out := make([]any, 0, len(t))
		for _, k := range sortedKeys(t) {
			out = append(out, map[string]any{"key": k, "value": t[k]})
		}
		return out, nil
	default:
		return []any{t}, nil
	}
}

// setElement sets the variables of a foreach element at depth.
func setElement(c *evalContext, el any, idx, depth int) {
	c.own()
	elName, idxName := elementNames(depth)
	c.data["element"] = el
	c.data["elementIndex"] = float64(idx)
	c.data[elName] = el
	c.data[idxName] = float64(idx)
}

// elementVariables are the names of the element variables of the first
// foreach depths, built once.
var elementVariables = func() (names [DefaultMaxForEachDepth + 1][2]string) {
	for d := range names {
		names[d] = [2]string{"element" + strconv.Itoa(d), "elementIndex" + strconv.Itoa(d)}
	}
	return names
}()

// elementNames returns the names of the element and index variables of
// a foreach at depth: element0 and elementIndex0 at depth 0.
func elementNames(depth int) (element, index string) {
	if depth < len(elementVariables) {
		return elementVariables[depth][0], elementVariables[depth][1]
	}
	return "element" + strconv.Itoa(depth), "elementIndex" + strconv.Itoa(depth)
}
