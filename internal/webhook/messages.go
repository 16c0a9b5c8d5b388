package webhook

import (
	"fmt"
	"strings"
	"unicode/utf8"

	yamlv2 "go.yaml.in/yaml/v2"

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
	return "policy " + p.Name() + "." + rr.Name + ": " + rr.Message
}

// blockedMessage is Kyverno's denial message: the resource as
// Kind/namespace/name, then a YAML map of policy name → rule name →
// message, sorted, formatted as yaml.v2 formats it (Kyverno marshals it
// with sigs.k8s.io/yaml, which is yaml.v2 after a JSON round trip, so long
// messages fold at 80 columns the same way). The map is given to yaml.v2
// directly: the round trip only coerces strings to valid UTF-8, which
// validUTF8 does as encoding/json would (TestBlockedMessageAsKyverno
// holds the two to the same bytes).
func blockedMessage(obj map[string]any, failures map[string]map[string]string) (string, error) {
	const head = " was blocked due to the following policies \n\n"
	kind, ns, name := document.String(obj, "kind"), document.String(obj, "metadata", "namespace"), document.String(obj, "metadata", "name")
	b := make([]byte, 0, 128+len(kind)+len(ns)+len(name)+blockedSize(failures))
	b = append(b, "\n\nresource "...)
	b = append(b, kind...)
	b = append(b, '/')
	b = append(b, ns...)
	b = append(b, '/')
	b = append(b, name...)
	b = append(b, head...)
	if out, ok := appendBlockedYAML(b, failures); ok {
		return string(out), nil
	}
	results, err := blockedYAMLv2(failures)
	if err != nil {
		return "", err
	}
	return string(append(b, results...)), nil
}

// blockedSize is about the length of the YAML of failures.
func blockedSize(failures map[string]map[string]string) int {
	n := 0
	for p, rules := range failures {
		n += len(p) + 2
		for r, msg := range rules {
			n += len(r) + len(msg) + 16
		}
	}
	return n
}

// blockedYAMLv2 is failures written by yaml.v2, for what
// appendBlockedYAML does not take.
func blockedYAMLv2(failures map[string]map[string]string) ([]byte, error) {
	clean := failures
	for p, rules := range failures {
		ok := utf8.ValidString(p)
		for rule, msg := range rules {
			ok = ok && utf8.ValidString(rule) && utf8.ValidString(msg)
		}
		if !ok {
			clean = validUTF8Map(failures)
			break
		}
	}
	return yamlv2.Marshal(clean)
}

// validUTF8Map is failures with every string coerced to valid UTF-8.
func validUTF8Map(failures map[string]map[string]string) map[string]map[string]string {
	out := make(map[string]map[string]string, len(failures))
	for p, rules := range failures {
		m := make(map[string]string, len(rules))
		for r, msg := range rules {
			m[validUTF8(r)] = validUTF8(msg)
		}
		out[validUTF8(p)] = m
	}
	return out
}

// validUTF8 replaces each byte that is not part of valid UTF-8 with
// U+FFFD, as encoding/json does.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
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
