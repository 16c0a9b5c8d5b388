package webhook

import "sort"

// appendBlockedYAML writes failures (policy → rule → message) as yaml.v2
// writes such a map, without reflection or its emitter, for the shape
// denial messages take: every name and message printable ASCII, starting
// with a letter and not a word YAML reads as a boolean or null, names of
// at most 128 bytes, no policy without rules. ok is false for anything
// else, and yaml.v2 writes it. The rules followed are yaml.v2's (v2.4):
//   - keys sorted in its natural order (yamlKeyLess);
//   - a scalar plain unless ": ", a final ':', " #" or a final space
//     would make it read otherwise, then single-quoted with quotes
//     doubled;
//   - a message folded at a single space once the line is past 80
//     columns, continuing at 4 columns; names never folded.
//
// TestBlockedMessageAsKyverno and FuzzBlockedYAML hold it to yaml.v2's
// bytes.
func appendBlockedYAML(b []byte, failures map[string]map[string]string) ([]byte, bool) {
	if len(failures) == 0 {
		return b, false
	}
	policies := make([]string, 0, len(failures))
	for p, rules := range failures {
		if len(rules) == 0 || !yamlSimpleName(p) {
			return b, false
		}
		policies = append(policies, p)
	}
	sort.Slice(policies, func(i, j int) bool { return yamlKeyLess(policies[i], policies[j]) })
	var names []string
	for _, p := range policies {
		b = appendYAMLName(b, p)
		b = append(b, ':')
		rules := failures[p]
		names = names[:0]
		for r, msg := range rules {
			if !yamlSimpleName(r) || !yamlPlainString(msg) {
				return b, false
			}
			names = append(names, r)
		}
		sort.Slice(names, func(i, j int) bool { return yamlKeyLess(names[i], names[j]) })
		for _, r := range names {
			b = append(b, "\n  "...)
			start := len(b) - 2
			b = appendYAMLName(b, r)
			b = append(b, ':')
			b = appendYAMLMessage(b, rules[r], len(b)-start)
		}
		b = append(b, '\n')
	}
	return b, true
}

// yamlPlainString: printable ASCII, starting with a letter, not a word
// yaml.v2 resolves to a boolean or null (it would quote those).
func yamlPlainString(s string) bool {
	if s == "" || !isASCIILetter(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	switch s {
	case "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
		"true", "True", "TRUE", "false", "False", "FALSE",
		"on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL":
		return false
	}
	return true
}

// yamlSimpleName: a plain string short enough to be a simple key.
func yamlSimpleName(s string) bool { return len(s) <= 128 && yamlPlainString(s) }

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// yamlNeedsQuotes: the emitter's block-context indicators for a string
// yamlPlainString took: ':' before a space or at the end, '#' after a
// space, or a final space.
func yamlNeedsQuotes(s string) bool {
	if s[len(s)-1] == ' ' {
		return true
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case ':':
			if i+1 == len(s) || s[i+1] == ' ' {
				return true
			}
		case '#':
			if s[i-1] == ' ' {
				return true
			}
		}
	}
	return false
}

// appendYAMLName writes a key: never folded.
func appendYAMLName(b []byte, s string) []byte {
	if !yamlNeedsQuotes(s) {
		return append(b, s...)
	}
	b = append(b, '\'')
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			b = append(b, '\'')
		}
		b = append(b, s[i])
	}
	return append(b, '\'')
}

// yamlWidth and yamlValueIndent: where yaml.v2 folds a value of the
// nested map and where the next line starts.
const (
	yamlWidth       = 80
	yamlValueIndent = "\n    "
)

// appendYAMLMessage writes a value that starts at column col (after its
// key's colon), folding as yaml.v2 does.
func appendYAMLMessage(b []byte, s string, col int) []byte {
	quoted := yamlNeedsQuotes(s)
	b = append(b, ' ')
	col++
	if quoted {
		b = append(b, '\'')
		col++
	}
	spaces := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ' ' {
			// Plain: a space is never last (yamlNeedsQuotes). Quoted:
			// neither the first nor the last character folds.
			fold := !spaces && col > yamlWidth && i+1 < len(s) && s[i+1] != ' ' && (!quoted || i > 0)
			if fold {
				b = append(b, yamlValueIndent...)
				col = len(yamlValueIndent) - 1
			} else {
				b = append(b, ' ')
				col++
			}
			spaces = true
			continue
		}
		if quoted && c == '\'' {
			b = append(b, '\'')
			col++
		}
		b = append(b, c)
		col++
		spaces = false
	}
	if quoted {
		b = append(b, '\'')
	}
	return b
}

// yamlKeyLess is yaml.v2's order of string keys, for ASCII: letters
// before anything else, runs of digits compared as numbers.
func yamlKeyLess(a, b string) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] == b[i] {
			continue
		}
		al, bl := isASCIILetter(a[i]), isASCIILetter(b[i])
		if al && bl {
			return a[i] < b[i]
		}
		if al || bl {
			return bl
		}
		var an, bn int64
		if a[i] == '0' || b[i] == '0' {
			// A zero after other digits: the run so far is not all
			// zeros, and both numbers start from one.
			for j := i - 1; j >= 0 && isDigit(a[j]); j-- {
				if a[j] != '0' {
					an, bn = 1, 1
					break
				}
			}
		}
		ai, bi := i, i
		for ; ai < len(a) && isDigit(a[ai]); ai++ {
			an = an*10 + int64(a[ai]-'0')
		}
		for ; bi < len(b) && isDigit(b[bi]); bi++ {
			bn = bn*10 + int64(b[bi]-'0')
		}
		if an != bn {
			return an < bn
		}
		if ai != bi {
			return ai < bi
		}
		return a[i] < b[i]
	}
	return len(a) < len(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
