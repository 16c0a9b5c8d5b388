package jmespath

import (
	"errors"
	"testing"
)

var fuzzSeeds = []string{
	"request.object.spec.containers[].image",
	`request.object.metadata.labels."app.kubernetes.io/name"`,
	"request.object.metadata.labels.missing || ''",
	"request.object.spec.[initContainers, containers][].name",
	"request.object.spec.containers[?name=='nginx'].image | [0]",
	"request.object.spec.containers[?pattern_match('*:v*', image)].name",
	"request.object.spec.containers[].image_normalize(image)",
	"sum(request.object.spec.containers[].resources.requests.memory)",
	"add('1Gi', '512Mi')",
	"divide('1h', '30m')",
	"modulo(`10`, `3`)",
	"multiply('250m', `2`)",
	"round(`10.125`, `2`)",
	"split('a,b', ',')",
	"items(request.object.metadata.labels, 'key', 'value')",
	"object_from_lists(`[\"a\"]`, `[1]`)",
	"lookup(request.object.metadata.labels, 'team')",
	"regex_replace_all('([0-9])', 'a1', '${1}0')",
	"regex_match('^[a-z]+$', request.namespace)",
	"truncate(request.object.metadata.name, `3`)",
	"semver_compare('1.2.3', '>=1.0.0 <2.0.0')",
	"time_add(time_now_utc(), '4h') | time_to_cron(@)",
	"time_since('', '2022-04-10T03:14:05-07:00', '')",
	"time_between('2023-01-12T19:05:59Z', '2023-01-01T19:05:59Z', '2023-01-15T19:05:59Z')",
	"parse_json('{\"a\": [1, 2]}').a[1]",
	"parse_yaml('a: b')",
	"base64_decode(base64_encode('x'))",
	"x509_decode('x')",
	"random('[a-z]{4}')",
	"is_external_url('http://127.0.0.1')",
	"label_match(`{\"team\": \"apple\"}`, request.object.metadata.labels)",
	"sort_by(request.object.spec.containers, &name)[].name",
	"let $ns = request.namespace in $ns",
	"`1` + `2` * -`3`",
	"to_string(@) | length(@)",
	"[&name]",
	"request.object.spec.containers[0:2].name",
	"*.object.*.containers[*].name",
	"request.object.spec.containers[*].ports[*].containerPort",
	"request.object.spec.containers[?contains($.request.object.spec.containers[].name, name)].name",
	"map(&sort_by(@, &name)[].[name][], [request.object.spec.containers])",
}

// FuzzSearch evaluates arbitrary expressions against a fixed document: it
// must never panic, and what it returns must be JSON-compatible.
func FuzzSearch(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	// The fake resolver keeps is_external_url off the network.
	i := newTestInterpreter(f, WithCacheSize(64))
	doc := mustJSON(f, admissionReview)
	f.Fuzz(func(t *testing.T, expr string) {
		got, err := i.Search(expr, doc)
		if err != nil {
			if errors.Is(err, errPanic) {
				t.Fatalf("Search(%q) panicked: %v", expr, err)
			}
			if !errors.Is(err, ErrInvalidExpression) && !errors.Is(err, ErrEvaluation) {
				t.Fatalf("Search(%q) error %v wraps no sentinel", expr, err)
			}
			return
		}
		if !isJSONValue(got) {
			t.Fatalf("Search(%q) = %#v is not JSON-compatible", expr, got)
		}
	})
}
