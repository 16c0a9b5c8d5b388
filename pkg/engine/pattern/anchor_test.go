package pattern

import "testing"

func TestParseAnchor(t *testing.T) {
	tests := map[string]struct {
		kind AnchorKind
		key  string
	}{
		"(name)":  {Condition, "name"},
		"=(name)": {Equality, "name"},
		"+(name)": {AddIfAbsent, "name"},
		"<(name)": {Global, "name"},
		"X(name)": {Negation, "name"},
		"^(name)": {Existence, "name"},
		"name":    {NoAnchor, "name"},
		"()":      {NoAnchor, "()"},
		"+()":     {NoAnchor, "+()"},
		"+x)":     {NoAnchor, "+x)"},
		"Y(name)": {NoAnchor, "Y(name)"},
		"x(name)": {NoAnchor, "x(name)"},
		"(a.b/c)": {Condition, "a.b/c"},
		"((a))":   {Condition, "(a)"},
		"+((a)":   {AddIfAbsent, "(a"},
		"(a)(b)":  {Condition, "a)(b"},
		"X(a b)":  {Negation, "a b"},
		"(a)x":    {NoAnchor, "(a)x"},
		"X (a)":   {NoAnchor, "X (a)"},
		// Kyverno's anchor.Parse trims the key first and its expression
		// `^([+<=X^])?\((.+)\)$` reads one line only.
		" (app) ":    {Condition, "app"},
		"\t=(app)\n": {Equality, "app"},
		"(a\nb)":     {NoAnchor, "(a\nb)"},
		"(\n)":       {NoAnchor, "(\n)"},
		"(a\rb)":     {Condition, "a\rb"},
	}
	for in, tc := range tests {
		t.Run(in, func(t *testing.T) {
			k, key := ParseAnchor(in)
			if k != tc.kind || key != tc.key {
				t.Fatalf("ParseAnchor(%q) = %v, %q; want %v, %q", in, k, key, tc.kind, tc.key)
			}
			if k != NoAnchor && FormatAnchor(k, key) != trimmed(in) {
				t.Errorf("FormatAnchor(%v, %q) = %q, want %q", k, key, FormatAnchor(k, key), trimmed(in))
			}
		})
	}
}

func trimmed(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t' || s[0] == '\n') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t' || s[len(s)-1] == '\n') {
		s = s[:len(s)-1]
	}
	return s
}

func TestIsConditional(t *testing.T) {
	for k, want := range map[AnchorKind]bool{
		NoAnchor: false, Condition: true, Global: true, Equality: false,
		AddIfAbsent: false, Negation: false, Existence: false,
	} {
		if got := k.IsConditional(); got != want {
			t.Errorf("%v.IsConditional() = %v, want %v", k, got, want)
		}
	}
}
