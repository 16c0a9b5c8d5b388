package bus

import (
	"testing"

	"github.com/verdict-dev/verdict/pkg/queue"
)

// A verified copy's subject is never a subject an admission publishes on,
// is matched by VerifiedOfResource (not ResultsOfResource, so no consumer
// of results takes it), and parses back to its original.
func TestVerifiedCopySubject(t *testing.T) {
	tests := map[string]struct {
		uid, policy string
	}{
		"plain":            {uid: "uid-1", policy: "disallow-latest"},
		"namespaced":       {uid: "uid-1", policy: "team-a/require-labels"},
		"dots and percent": {uid: "a.b", policy: "p%.v"},
		"empty policy key": {uid: "uid-1", policy: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			orig := ResultSubject(tc.uid, tc.policy)
			if _, ok := ParseVerifiedCopy(orig); ok {
				t.Fatalf("%q, an admission's subject, parses as a verified copy", orig)
			}
			cp := VerifiedCopySubject(orig)
			back, ok := ParseVerifiedCopy(cp)
			if !ok || back != orig {
				t.Fatalf("ParseVerifiedCopy(%q) = %q, %v; want %q", cp, back, ok, orig)
			}
			if _, _, _, err := ParseResultsSubject(cp); err == nil {
				t.Errorf("%q parses as an admission's result subject", cp)
			}
			if !queue.SubjectMatches(VerifiedOfResource(tc.uid), cp) || queue.SubjectMatches(ResultsOfResource(tc.uid), cp) ||
				queue.SubjectMatches(resultsPrefix+">", cp) {
				t.Errorf("filters: the copy %q must match VerifiedOfResource only", cp)
			}
			if err := (queue.Message{Subject: cp, ID: "x"}).Validate(); err != nil {
				t.Errorf("the copy's subject cannot be published: %v", err)
			}
		})
	}
}
