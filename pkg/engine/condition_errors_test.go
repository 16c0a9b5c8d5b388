package engine_test

import (
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// TestConditionErrors pins what becomes of a condition that cannot be
// evaluated: a variable naming a missing field, a JMESPath function that
// fails, operands an operator cannot compare. Each case names the Kyverno
// code it follows (kyverno/kyverno unless said otherwise).
func TestConditionErrors(t *testing.T) {
	const match = "  - name: r\n    match: {any: [{resources: {kinds: [Pod]}}]}\n    "
	tests := map[string]struct {
		// kyverno is the behaviour the case pins and where it comes from.
		kyverno string
		rule    string
		// exception is a PolicyException for the rule, if any.
		exception string
		want      engine.Status
		// message is a substring of the rule's message.
		message string
		// loadErr is a substring of the error refusing the policy.
		loadErr string
		// skip names a known difference from Kyverno that is not fixed yet.
		skip string
	}{
		"invalid regex in deny": {
			kyverno: "jmespath/functions.go jpRegexMatch returns regexp's error; handlers/validation/validate_resource.go validateDeny: RuleError",
			rule:    `validate: {deny: {conditions: {any: [{key: "{{ regex_match('([a-z', request.object.metadata.name) }}", operator: Equals, value: true}]}}}`,
			want:    engine.StatusError, message: "failed to check deny conditions: any[0]: failed to substitute variables in condition key",
		},
		"invalid regex in a precondition": {
			kyverno: "variables/evaluate.go Evaluate returns the substitution error; validate_resource.go validate: RuleError \"failed to evaluate preconditions\"",
			rule:    "preconditions: {all: [{key: \"{{ regex_match('([a-z', request.object.metadata.name) }}\", operator: Equals, value: true}]}\n    validate: {pattern: {metadata: {name: web}}}",
			want:    engine.StatusError, message: "failed to evaluate preconditions: all[0]",
		},
		"missing field in a precondition": {
			kyverno: "variables/vars.go newPreconditionsVariableResolver returns the error since 1.8 (#4217); test/cli/test/nil-values-in-variables/limit-duration expects error",
			rule:    "preconditions: {all: [{key: \"{{ request.object.spec.nodeName }}\", operator: NotEquals, value: \"\"}]}\n    validate: {pattern: {metadata: {name: web}}}",
			want:    engine.StatusError, message: "unknown key in request.object.spec.nodeName",
		},
		"missing field after a false all condition is not reached": {
			kyverno: "variables/evaluate.go evaluateAnyAllConditionsWithContext stops all at the first false; limit-duration's letsencrypt-crt expects skip",
			rule:    "preconditions: {all: [{key: \"{{ request.object.metadata.name }}\", operator: Equals, value: api}, {key: \"{{ request.object.spec.nodeName }}\", operator: NotEquals, value: \"\"}]}\n    validate: {pattern: {metadata: {name: web}}}",
			want:    engine.StatusSkip,
		},
		"missing field after a true any condition is not reached": {
			kyverno: "evaluateAnyAllConditionsWithContext stops any at the first true",
			rule:    "preconditions: {any: [{key: \"{{ request.object.metadata.name }}\", operator: Equals, value: web}, {key: \"{{ request.object.spec.nodeName }}\", operator: NotEquals, value: \"\"}]}\n    validate: {pattern: {metadata: {name: web}}}",
			want:    engine.StatusPass,
		},
		"any is evaluated before all": {
			kyverno: "evaluateAnyAllConditionsWithContext evaluates any, then all even when any failed",
			rule:    "preconditions: {all: [{key: a, operator: Equals, value: b}], any: [{key: \"{{ request.object.spec.nodeName }}\", operator: Equals, value: x}]}\n    validate: {pattern: {metadata: {name: web}}}",
			want:    engine.StatusError, message: "failed to evaluate preconditions: any[0]",
		},
		"all is evaluated when no any condition held": {
			kyverno: "evaluateAnyAllConditionsWithContext evaluates all after a failed any block; an error there is returned",
			rule:    "preconditions: {any: [{key: a, operator: Equals, value: b}], all: [{key: \"{{ request.object.spec.nodeName }}\", operator: Equals, value: x}]}\n    validate: {pattern: {metadata: {name: web}}}",
			want:    engine.StatusError, message: "failed to evaluate preconditions: all[0]",
		},
		"missing field with a default": {
			kyverno: "kyverno/go-jmespath interpreter.go ASTOrExpression drops NotFoundError: the default is used",
			rule:    "preconditions: {all: [{key: \"{{ request.object.spec.nodeName || '' }}\", operator: Equals, value: \"\"}]}\n    validate: {pattern: {metadata: {name: web}}}",
			want:    engine.StatusPass,
		},
		"missing field in deny": {
			kyverno: "internal/preconditions.go CheckDenyPreconditions uses the same strict resolver; validateDeny: RuleError",
			rule:    `validate: {deny: {conditions: {any: [{key: "{{ request.object.spec.nodeName }}", operator: Equals, value: x}]}}}`,
			want:    engine.StatusError, message: "failed to check deny conditions",
		},
		"missing field as a function argument is null, then a type error": {
			kyverno: "kyverno/go-jmespath interpreter.go ASTFunctionExpression passes null for a NotFoundError; functions.go argument type check fails",
			rule:    `validate: {deny: {conditions: {any: [{key: "{{ length(request.object.spec.nodeName) }}", operator: GreaterThan, value: 0}]}}}`,
			want:    engine.StatusError, message: "length",
		},
		"wrong argument type": {
			kyverno: "kyverno/go-jmespath functions.go CallFunction: invalid type for the argument is an error",
			rule:    `validate: {deny: {conditions: {any: [{key: "{{ starts_with(request.object.spec.containers, 'x') }}", operator: Equals, value: true}]}}}`,
			want:    engine.StatusError, message: "starts_with",
		},
		"division by zero": {
			kyverno: "jmespath/arithmetic.go divide: zeroDivisionError",
			rule:    "validate: {deny: {conditions: {any: [{key: \"{{ divide(`1`, `0`) }}\", operator: Equals, value: 1}]}}}",
			want:    engine.StatusError, message: "zero divisor",
		},
		"error after a false any condition": {
			kyverno: "evaluateAnyAllConditionsWithContext returns the first error it meets in any",
			rule:    `validate: {deny: {conditions: {any: [{key: a, operator: Equals, value: b}, {key: "{{ regex_match('(', 'x') }}", operator: Equals, value: true}]}}}`,
			want:    engine.StatusError, message: "any[1]",
		},
		"to_number of text is null, not an error": {
			kyverno: "kyverno/go-jmespath functions.go jpfToNumber returns null for text that is not a number",
			rule:    `validate: {deny: {conditions: {any: [{key: "{{ to_number('x') }}", operator: Equals, value: 1}]}}}`,
			want:    engine.StatusPass,
		},
		"numeric operator on an object is false": {
			kyverno: "variables/operator/numeric.go validateValueWithMapPattern returns false",
			rule:    `validate: {deny: {conditions: {any: [{key: {a: 1}, operator: GreaterThan, value: 0}]}}}`,
			want:    engine.StatusPass,
		},
		"Equals on a list and a string is false": {
			kyverno: "variables/operator/equal.go validateValueWithSlicePattern: a non-list value is false",
			rule:    `validate: {deny: {conditions: {any: [{key: "{{ request.object.spec.containers }}", operator: Equals, value: nginx}]}}}`,
			want:    engine.StatusPass,
		},
		"duration operator on text is false": {
			kyverno: "variables/operator/duration.go: values that are not durations log and return false",
			rule:    `validate: {deny: {conditions: {any: [{key: abc, operator: DurationGreaterThan, value: 1h}]}}}`,
			want:    engine.StatusPass,
		},
		"unknown operator is refused at load": {
			kyverno: "api/kyverno/v1/common_types.go ConditionOperator enum (CRD validation); at run time operator.CreateOperatorHandler returns nil and Evaluate errors",
			rule:    `validate: {deny: {conditions: {any: [{key: a, operator: Matches, value: a}]}}}`,
			loadErr: `unknown operator "Matches"`,
		},
		"precondition error in a mutate rule": {
			kyverno: "engine.go invokeRuleHandler: \"failed to evaluate preconditions\" is a RuleError for every rule type",
			rule:    "preconditions: {all: [{key: \"{{ regex_match('[', 'x') }}\", operator: Equals, value: true}]}\n    mutate: {patchStrategicMerge: {metadata: {labels: {x: y}}}}",
			want:    engine.StatusError, message: "failed to evaluate preconditions",
		},
		"precondition error in a mutate foreach": {
			kyverno: "handlers/mutation/common.go: mutate.foreach preconditions error is an error response",
			rule:    "mutate: {foreach: [{list: request.object.spec.containers, preconditions: {all: [{key: \"{{ element.securityContext.privileged }}\", operator: Equals, value: true}]}, patchStrategicMerge: {metadata: {labels: {x: y}}}}]}",
			want:    engine.StatusError, message: "unknown key",
		},
		"deny error in a validate foreach": {
			kyverno: "validate_resource.go validateElements: only precondition errors skip an element; a deny error is the rule's error",
			rule:    `validate: {foreach: [{list: request.object.spec.containers, deny: {conditions: {any: [{key: "{{ regex_match('(', element.name) }}", operator: Equals, value: true}]}}}]}`,
			want:    engine.StatusError, message: "failed to check deny conditions",
		},
		"precondition error in a validate foreach skips the element": {
			kyverno: "validate_resource.go validateElements: an element whose preconditions fail to evaluate is skipped; no element applied: the rule is skipped",
			rule:    `validate: {foreach: [{list: request.object.spec.containers, preconditions: {all: [{key: "{{ element.securityContext.privileged }}", operator: Equals, value: true}]}, deny: {}}]}`,
			want:    engine.StatusSkip,
		},
		"message that fails to substitute in deny": {
			kyverno: "validate_resource.go getDenyMessage: the message as written, the rule still fails",
			rule:    `validate: {message: "bad {{ request.object.nothing.here }}", deny: {}}`,
			want:    engine.StatusFail, message: "bad {{ request.object.nothing.here }}",
		},
		"exception whose conditions fail to evaluate does not apply": {
			kyverno: "utils/exceptions.go MatchesException logs the error and goes on to the next exception",
			rule:    `validate: {deny: {}}`,
			exception: `apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: e, namespace: prod}
spec:
  exceptions: [{policyName: p, ruleNames: [r]}]
  match: {any: [{resources: {kinds: [Pod]}}]}
  conditions: {any: [{key: "{{ regex_match('(', 'x') }}", operator: Equals, value: false}]}
`,
			want: engine.StatusFail,
		},
	}
	eng := newEngine(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.skip != "" {
				t.Skipf("known difference from Kyverno (%s): %s", tc.kyverno, tc.skip)
			}
			docs, err := policy.Parse([]byte(policyYAML(match+tc.rule+"\n")), "test")
			if tc.loadErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.loadErr) {
					t.Fatalf("load error = %v, want one containing %q", err, tc.loadErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse policy: %v", err)
			}
			p, err := eng.Compile(docs.Policies[0])
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			var exc []*policy.Exception
			if tc.exception != "" {
				edocs, err := policy.Parse([]byte(tc.exception), "exception")
				if err != nil || len(edocs.Exceptions) != 1 {
					t.Fatalf("parse exception: %v", err)
				}
				exc = edocs.Exceptions
			}
			rr, ok := statuses(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: obj(t, podTpl)}, exc...)["r"]
			if !ok {
				t.Fatal("rule did not apply")
			}
			if rr.Status != tc.want {
				t.Fatalf("status = %s (%s), want %s as Kyverno (%s)", rr.Status, rr.Message, tc.want, tc.kyverno)
			}
			if !strings.Contains(rr.Message, tc.message) {
				t.Fatalf("message = %q, want it to contain %q", rr.Message, tc.message)
			}
		})
	}
}
