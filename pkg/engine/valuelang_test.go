package engine_test

import (
	"encoding/json"
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine"
)

// TestValueLanguageOneAnswer runs (value, pattern) pairs through the two
// public paths that read Kyverno's value language and requires one answer
// from both:
//
//   - a validate rule with the pattern {spec: {field: <pattern>}} against a
//     resource {spec: {field: <value>}}: want is "pass";
//   - a mutate rule whose patchStrategicMerge adds an annotation under the
//     conditional anchor {(spec): {field: <pattern>}}: want is "applied".
//
// A third path is checked too: the conditional anchor on the field itself,
// {spec: {(field): <pattern>}}. Kyverno reads an anchor's scalar value and
// the resource's scalar as YAML text before matching them (mutate/patch
// convertRNodeToInterface), so there 80.0 and "80", true and "true" are the
// same; scalarAnchor gives that answer where it differs from want.
//
// The rows are the disagreements found when the copies of the value
// language in packages pattern, patch, conditions and jmespath were merged
// (a differential fuzz of the old copies against the new code, seeded with
// the conformance corpus's patterns and values); before is what the old
// validate / old mutate paths answered. Each is decided by the Kyverno
// function named in kyverno.
func TestValueLanguageOneAnswer(t *testing.T) {
	yes, no := true, false
	tests := map[string]struct {
		value, pattern any
		want           bool
		scalarAnchor   *bool
		before         string // what the old validate / old mutate (nested anchor) paths answered
		kyverno        string
	}{
		"integer as text for wildcards": {
			value: 80, pattern: "8?", want: true, before: "true/false",
			kyverno: "pattern.compareString: an integer (int64 in Kubernetes' decoding) is written with strconv.FormatInt, \"80\"",
		},
		"every integer as text": {
			value: 3, pattern: "!*+* & !*=*", want: true, before: "true/false",
			kyverno: "pattern.compareString (FormatInt); the old mutate copy wrote every number as 3E+00",
		},
		"integer text from 1e15 on": {
			value: 1e15, pattern: "!*+*", want: true, before: "false/false",
			kyverno: "pattern.compareString (FormatInt for any int64); the old validate copy switched to 1E+15",
		},
		"integer wildcard suffix": {
			value: 4, pattern: "*0", want: false, before: "false/true",
			kyverno: "pattern.compareString (FormatInt): \"4\", not \"4E+00\"",
		},
		"zero is a duration": {
			value: 0, pattern: "<1h", want: true, before: "true/false",
			kyverno: "pattern.convertNumberToString: FormatInt gives \"0\", which time.ParseDuration reads (\"0.000000\" it does not)",
		},
		"compound duration is no range bound": {
			value: "90m", pattern: "1h30m-2h", want: false, before: "false/true",
			kyverno: "operator.InRangeRegex: a bound is [-|+]?\\d+(\\.\\d+)?[A-Za-z]*, so the term is compared whole, as text",
		},
		"exponent is no range bound": {
			value: "1500", pattern: "1e3-2e3", want: false, before: "false/true",
			kyverno: "operator.InRangeRegex (as above)",
		},
		"signed range bound": {
			value: -3, pattern: "-5-5", want: true, before: "false/false",
			kyverno: "operator.InRangeRegex allows a sign before each bound",
		},
		"null in a signed range": {
			value: nil, pattern: "-5-5", want: true, scalarAnchor: &no, before: "false/false",
			kyverno: "pattern.convertNumberToString: null is \"0\"; the scalar anchor compares the text \"null\"",
		},
		"bound without digits": {
			value: "0", pattern: "0-.5", want: false, before: "true/false",
			kyverno: "operator.InRangeRegex needs a digit before the fraction; the old validate copy took [0-9.]+",
		},
		"bound with trailing text": {
			value: nil, pattern: "0-0E0", want: false, scalarAnchor: &no, before: "false/true",
			kyverno: "operator.InRangeRegex; the old mutate copy took [^-]* after the number",
		},
		"integer pattern against a decimal string": {
			value: "80.0", pattern: 80, want: false, scalarAnchor: &yes, before: "false/true",
			kyverno: "pattern.validateIntPattern: strconv.ParseInt(\"80.0\") fails; the scalar anchor compares the texts \"80.0\" and \"80\" as quantities",
		},
		"integer pattern against a fraction-only string": {
			value: ".0000000000", pattern: 0, want: false, scalarAnchor: &yes, before: "false/true",
			kyverno: "pattern.validateIntPattern (ParseInt); the scalar anchor compares quantities",
		},
		"suffix-only quantity": {
			value: "0", pattern: "M", want: true, before: "false/true",
			kyverno: "pattern.compareQuantity: resource.ParseQuantity reads \"M\" as 0 (the old validate copy skipped the parse for a leading letter)",
		},
		"suffix-only quantity against a fraction": {
			value: ".0", pattern: "G", want: true, before: "false/true",
			kyverno: "pattern.compareQuantity (as above)",
		},
		"star in the value": {
			value: "a*x", pattern: "a*", want: true, before: "true/false",
			kyverno: "wildcard.Match (IGLOU-EU/go-wildcard v1.0.3); the old mutate copy took a * in the value for the pattern's *",
		},
		"star against stars": {
			value: "* * * * *", pattern: "*", want: true, before: "true/true, false on the scalar anchor",
			kyverno: "wildcard.Match (as above)",
		},
		"tab before an operator": {
			value: 7, pattern: "\t>5", want: false, before: "true/true",
			kyverno: "pattern.validateStringPatterns trims only spaces around | and & terms, so \"\\t>5\" has no operator and is compared as the text \">5\"",
		},
		"tab before a negation": {
			value: "1", pattern: "\t!0", want: false, before: "true/true",
			kyverno: "pattern.validateStringPatterns (as above)",
		},
		"huge exponent": {
			value: "1E-71000000", pattern: ">0", want: false, before: "true (after minutes)/true (after minutes)",
			kyverno: "Verdict deviates: pattern.compareQuantity would answer true after a minute of resource.ParseQuantity; exponents beyond ±1000 are not quantities here",
		},

		// Kyverno's two readings of a scalar anchor, unchanged.
		"bool pattern against a string": {
			value: "true", pattern: true, want: false, scalarAnchor: &yes, before: "false/false",
			kyverno: "pattern.validateBoolPattern needs a bool; the scalar anchor compares the texts \"true\"",
		},
		"null pattern against an empty string": {
			value: "", pattern: nil, want: true, scalarAnchor: &no, before: "true/true",
			kyverno: "pattern.validateNilPattern; the scalar anchor compares the text \"null\" with \"\"",
		},
		"number text against a number": {
			value: 3, pattern: "3", want: true, before: "true/true",
			kyverno: "pattern.compareQuantity",
		},
	}
	eng := newEngine(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			value, pat := jsonText(t, tc.value), jsonText(t, tc.pattern)
			res := obj(t, `{apiVersion: v1, kind: Pod, metadata: {name: p, namespace: default}, spec: {field: `+value+`}}`)

			validate := compile(t, eng, policyYAML(`
  - name: check
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: no
      pattern: {spec: {field: `+pat+`}}
`))
			got := statuses(t, eng, validate, &engine.Request{Operation: engine.OpCreate, Object: res})["check"]
			if passed := got.Status == engine.StatusPass; passed != tc.want {
				t.Errorf("validate pattern: status %s (%s), want pass=%v", got.Status, got.Message, tc.want)
			}

			if applied := mutated(t, eng, res, `{"(spec)": {field: `+pat+`}}`); applied != tc.want {
				t.Errorf("mutate conditional anchor on spec: applied=%v, want %v", applied, tc.want)
			}
			wantScalar := tc.want
			if tc.scalarAnchor != nil {
				wantScalar = *tc.scalarAnchor
			}
			if applied := mutated(t, eng, res, `{spec: {"(field)": `+pat+`}}`); applied != wantScalar {
				t.Errorf("mutate conditional anchor on the field: applied=%v, want %v", applied, wantScalar)
			}
		})
	}
}

// TestMetadataWildcardOneAnswer: a wildcard label key in a pattern stands
// for every label it matches, in a validate pattern and in a mutate
// condition alike (Kyverno's wildcards.ExpandInMetadata takes one of them,
// whichever its map iteration gives first; the old mutate copy took the
// first in sorted order). Keys are expanded in an object that holds
// metadata, here a pod template.
func TestMetadataWildcardOneAnswer(t *testing.T) {
	tests := map[string]struct {
		labels string
		want   bool
	}{
		"one label matches":         {`{app.kubernetes.io/name: web}`, true},
		"every matching label":      {`{app.kubernetes.io/name: web, app.kubernetes.io/part: web}`, true},
		"one matching label is off": {`{app.kubernetes.io/a: web, app.kubernetes.io/b: db}`, false},
		"no label matches":          {`{tier: web}`, false},
	}
	const labels = `{labels: {"app.kubernetes.io/*": web}}`
	eng := newEngine(t)
	validate := compile(t, eng, policyYAML(`
  - name: check
    match: {any: [{resources: {kinds: [Deployment]}}]}
    validate:
      message: no
      pattern: {spec: {template: {metadata: `+labels+`}}}
`))
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := obj(t, `{apiVersion: apps/v1, kind: Deployment, metadata: {name: d, namespace: default}, spec: {template: {metadata: {labels: `+tc.labels+`}}}}`)
			got := statuses(t, eng, validate, &engine.Request{Operation: engine.OpCreate, Object: res})["check"]
			if passed := got.Status == engine.StatusPass; passed != tc.want {
				t.Errorf("validate pattern: status %s (%s), want pass=%v", got.Status, got.Message, tc.want)
			}
			if applied := mutated(t, eng, res, `{spec: {"(template)": {metadata: `+labels+`}}}`); applied != tc.want {
				t.Errorf("mutate conditional anchor: applied=%v, want %v", applied, tc.want)
			}
		})
	}
}

// mutated applies a patchStrategicMerge made of cond plus an annotation
// and reports whether the annotation was added.
func mutated(t *testing.T, eng *engine.Engine, res map[string]any, cond string) bool {
	t.Helper()
	var patch map[string]any
	if err := json.Unmarshal([]byte(yamlToJSON(t, cond)), &patch); err != nil {
		t.Fatalf("condition %s: %v", cond, err)
	}
	patch["metadata"] = map[string]any{"annotations": map[string]any{"matched": "yes"}}
	pj, err := json.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	p := compile(t, eng, policyYAML(`
  - name: add
    match: {any: [{resources: {kinds: [Pod, Deployment]}}]}
    mutate:
      patchStrategicMerge: `+string(pj)+`
`))
	_, patched := eng.Apply(t.Context(), &engine.Request{Operation: engine.OpCreate, Object: res}, &engine.Set{Policies: []*engine.Policy{p}})
	meta, _ := patched["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	return ann["matched"] == "yes"
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// yamlToJSON turns a flow-style YAML object into JSON through the
// document decoder.
func yamlToJSON(t *testing.T, y string) string {
	t.Helper()
	return jsonText(t, obj(t, y))
}
