package webhook

import (
	"fmt"
	"unicode/utf8"

	"sigs.k8s.io/yaml"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
)

// Limits the API server puts on warnings: longer ones may be truncated,
// and past the total budget further warnings are dropped.
const (
	maxWarningLen    = 256
	maxWarningsTotal = 4096
)

// ruleWarning is Kyverno's warning for a rule that failed without
// blocking: "policy <name>.<rule>: <message>".
func ruleWarning(p *engine.Policy, rr engine.RuleResponse) string {
	return fmt.Sprintf("policy %s.%s: %s", p.Name(), rr.Name, rr.Message)
}

// blockedMessage is Kyverno's denial message: the resource as
// Kind/namespace/name, then a YAML map of policy name → rule name →
// message, sorted, formatted as yaml.v2 formats it (Kyverno marshals it
// with yaml.v2, so long messages fold at 80 columns the same way).
func blockedMessage(obj map[string]any, failures map[string]map[string]string) (string, error) {
	results, err := yaml.Marshal(failures)
	if err != nil {
		return "", err
	}
	resource := fmt.Sprintf("%s/%s/%s", document.String(obj, "kind"), document.String(obj, "metadata", "namespace"), document.String(obj, "metadata", "name"))
	return fmt.Sprintf("\n\nresource %s was blocked due to the following policies \n\n%s", resource, results), nil
}

// capWarnings keeps at most cfg.MaxWarnings warnings, each at most 256
// bytes and 4096 bytes in all; when some are left out, the last one kept
// says how many.
func (s *Server) capWarnings(warnings []string) []string {
	return capWarnings(warnings, s.cfg.MaxWarnings)
}

func capWarnings(warnings []string, max int) []string {
	if len(warnings) == 0 || max <= 0 {
		return nil
	}
	const summaryRoom = 48
	out := make([]string, 0, min(len(warnings), max))
	total := 0
	for i, w := range warnings {
		w = truncate(w, maxWarningLen)
		last := i == len(warnings)-1
		fitsCount := len(out) < max-1 || (last && len(out) < max)
		budget := maxWarningsTotal
		if !last {
			budget -= summaryRoom
		}
		if !fitsCount || total+len(w) > budget {
			return append(out, fmt.Sprintf("%d more policy warnings not shown", len(warnings)-i))
		}
		out = append(out, w)
		total += len(w)
	}
	return out
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "..."
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
