package engine_test

import (
	"errors"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine"
)

// TestRuleClock checks that WithRuleClock times each evaluated rule with
// the clock it is given (two reads a rule) and that, without it, no rule
// carries a duration.
func TestRuleClock(t *testing.T) {
	const p = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: timed}
spec:
  rules:
  - name: one
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {message: m, pattern: {metadata: {name: "?*"}}}
  - name: two
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {message: m, pattern: {metadata: {labels: {app: "?*"}}}}
  - name: other-kind
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate: {message: m, pattern: {metadata: {name: "?*"}}}
`
	pod := obj(t, `{apiVersion: v1, kind: Pod, metadata: {name: p, namespace: default}}`)
	reads := 0
	base := time.Unix(1000, 0)
	clock := func() time.Time {
		reads++
		// Each read is 3ms after the one before: a rule's two reads are
		// 3ms apart.
		return base.Add(time.Duration(reads) * 3 * time.Millisecond)
	}
	eng := newEngine(t, engine.WithRuleClock(clock))
	resp := eng.Validate(t.Context(), &engine.Request{Operation: engine.OpCreate, Object: pod}, compile(t, eng, p), nil)
	if len(resp.Rules) != 2 {
		t.Fatalf("rules: %+v", resp.Rules)
	}
	for _, rr := range resp.Rules {
		if rr.Duration != 3*time.Millisecond {
			t.Errorf("%s: duration %s, want 3ms", rr.Name, rr.Duration)
		}
	}
	if reads != 4 {
		t.Errorf("clock read %d times, want 4 (two a matched rule; none for the rule that does not match)", reads)
	}

	untimed := newEngine(t)
	for _, rr := range untimed.Validate(t.Context(), &engine.Request{Operation: engine.OpCreate, Object: pod}, compile(t, untimed, p), nil).Rules {
		if rr.Duration != 0 {
			t.Errorf("%s: duration %s without a rule clock", rr.Name, rr.Duration)
		}
	}
	if _, err := engine.New(engine.WithRuleClock(nil)); !errors.Is(err, engine.ErrInvalidOption) {
		t.Errorf("nil rule clock: %v", err)
	}
}
