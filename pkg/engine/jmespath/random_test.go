package jmespath

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRandom(t *testing.T) {
	i := newTestInterpreter(t)
	tests := map[string]struct {
		pattern string
		wantErr error
	}{
		"classes and count":  {pattern: `[0-9a-z]{5}`},
		"license key":        {pattern: `[A-Z0-9]{8}-[A-Z0-9]{4}-[A-Z0-9]{4}-[A-Z0-9]{4}-[A-Z0-9]{12}`},
		"alternation":        {pattern: `(foo|bar|baz)`},
		"plus":               {pattern: `(ab)+`},
		"star":               {pattern: `x*y`},
		"optional":           {pattern: `colou?r`},
		"perl classes":       {pattern: `\d{3}-\w{2}\s`},
		"any char":           {pattern: `.{4}`},
		"negated class":      {pattern: `[^a-z]{3}`},
		"email like":         {pattern: `[a-z]{3,8}@[a-z]{3}\.com`},
		"anchors ignored":    {pattern: `^abc$`},
		"bounded range":      {pattern: `a{2,4}`},
		"open range":         {pattern: `a{2,}`},
		"unicode class":      {pattern: `\p{Greek}{3}`},
		"non ascii negation": {pattern: `[^\x00-\x7f]{2}`},
		"case insensitive":   {pattern: `(?i)abc`},
		"empty pattern":      {pattern: ``, wantErr: ErrFunction},
		"invalid pattern":    {pattern: `[`, wantErr: ErrFunction},
		"nested repeat":      {pattern: `(a{1000}){1000}`, wantErr: ErrFunction},
		"huge output":        {pattern: strings.Repeat(`a{1000}`, 70), wantErr: ErrFunction},
		"too many steps":     {pattern: strings.Repeat(`(?:){1000}`, 1100), wantErr: ErrFunction},
		"matches nothing":    {pattern: `[^\x00-\x{10FFFF}]`, wantErr: ErrFunction},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := i.Search("random(@)", tc.pattern)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("random(%q) error = %v, want %v (got %#v)", tc.pattern, err, tc.wantErr, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("random(%q): %v", tc.pattern, err)
			}
			s, ok := got.(string)
			if !ok || !utf8.ValidString(s) {
				t.Fatalf("random(%q) = %#v, want a valid string", tc.pattern, got)
			}
			re := regexp.MustCompile(`^(?:` + tc.pattern + `)$`)
			for range 20 {
				if !re.MatchString(s) {
					t.Fatalf("random(%q) = %q does not match the pattern", tc.pattern, s)
				}
				if got, err = i.Search("random(@)", tc.pattern); err != nil {
					t.Fatal(err)
				}
				s, _ = got.(string)
			}
		})
	}

	t.Run("not a string", func(t *testing.T) {
		if _, err := i.Search("random(`1`)", nil); !errors.Is(err, ErrFunction) {
			t.Fatalf("error = %v, want ErrFunction", err)
		}
	})
	t.Run("varies", func(t *testing.T) {
		a, err := i.Search("random('[a-z]{32}')", nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := i.Search("random('[a-z]{32}')", nil)
		if err != nil {
			t.Fatal(err)
		}
		if a == b {
			t.Fatalf("two random strings are equal: %v", a)
		}
	})
}
