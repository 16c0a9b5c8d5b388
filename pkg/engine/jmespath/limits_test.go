package jmespath

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestRegexReplaceMatchesStdlib(t *testing.T) {
	tests := map[string]struct {
		re, src, repl string
	}{
		"groups":             {re: `([0-9])([0-9])`, src: "hello im 42 months old 1234", repl: "${1}1"},
		"empty matches":      {re: `x*`, src: "abxxc", repl: "-"},
		"empty pattern":      {re: ``, src: "abc", repl: "."},
		"anchored":           {re: `^[^/]+`, src: "docker.io/nginx", repl: "registry"},
		"named group":        {re: `(?P<word>[a-z]+)`, src: "ab 12 cd", repl: "<$word>"},
		"no match":           {re: `z`, src: "abc", repl: "y"},
		"dollar escape":      {re: `b`, src: "abc", repl: "$$"},
		"unknown reference":  {re: `b`, src: "abc", repl: "$9"},
		"utf8":               {re: `é`, src: "héllo wörld é", repl: "e"},
		"adjacent empty":     {re: `a|`, src: "baaac", repl: "[$0]"},
		"multiline anchors":  {re: `(?m)^`, src: "a\nb\nc", repl: "> "},
		"whole string $0 x3": {re: `.+`, src: "abc", repl: "$0$0$0"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			re := regexp.MustCompile(tc.re)
			for _, literal := range []bool{false, true} {
				want := re.ReplaceAllString(tc.src, tc.repl)
				fn := "regex_replace_all"
				if literal {
					want = re.ReplaceAllLiteralString(tc.src, tc.repl)
					fn = "regex_replace_all_literal"
				}
				got, err := regexReplace(fn, []any{tc.re, tc.src, tc.repl}, literal)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("%s(%q, %q, %q) = %q, want %q", fn, tc.re, tc.src, tc.repl, got, want)
				}
			}
		})
	}
}

func TestOutputLimits(t *testing.T) {
	i := newTestInterpreter(t)
	big := strings.Repeat("x", 200<<10)
	var nested strings.Builder
	for range 40 {
		nested.WriteString("base64_encode(")
	}
	nested.WriteString("s")
	nested.WriteString(strings.Repeat(")", 40))
	var refs []string
	for range 100 {
		refs = append(refs, "$s")
	}
	var lets strings.Builder
	prev := "@"
	for n := range 40 {
		fmt.Fprintf(&lets, "let $v%d = [%s, %s] in ", n, prev, prev)
		prev = fmt.Sprintf("$v%d", n)
	}
	tests := map[string]searchCase{
		"pad_left width":          {expr: "pad_left('a', `100000000000`, 'x')", wantErr: ErrFunction},
		"pad_right width":         {expr: "pad_right('a', `100000000`)", wantErr: ErrFunction},
		"pad_left small":          {expr: "pad_left('a', `3`, 'x')", want: "xxa"},
		"replace_all quadratic":   {expr: "replace_all(s, '', s)", data: map[string]any{"s": big}, wantErr: ErrFunction},
		"replace quadratic":       {expr: "replace(s, 'x', s, `-1`)", data: map[string]any{"s": big}, wantErr: ErrFunction},
		"replace bounded count":   {expr: "length(replace(s, 'x', 'yy', `2`))", data: map[string]any{"s": big}, want: float64(len(big) + 2)},
		"regex_replace quadratic": {expr: "regex_replace_all('', s, s)", data: map[string]any{"s": big}, wantErr: ErrFunction},
		"regex_replace refs":      {expr: "regex_replace_all('.+', s, r)", data: map[string]any{"s": big, "r": strings.Repeat("$0", 100)}, wantErr: ErrFunction},
		"regex_replace_literal":   {expr: "regex_replace_all_literal('', s, s)", data: map[string]any{"s": big}, wantErr: ErrFunction},
		"nested growth":           {expr: nested.String(), data: map[string]any{"s": big}, wantErr: ErrMemoryLimit},
		"join many":               {expr: "let $s = s in join('', [" + strings.Join(refs, ",") + "])", data: map[string]any{"s": big}, wantErr: ErrFunction},
		"join small":              {expr: "join('-', ['a', 'b'])", want: "a-b"},
		"to_string exponential":   {expr: lets.String() + "to_string(" + prev + ")", data: "abc", wantErr: ErrFunction},
		"to_string small":         {expr: "to_string(`{\"a\": [1, \"b\"]}`)", want: `{"a":[1,"b"]}`},
		"length of shared value":  {expr: lets.String() + "length(" + prev + ")", data: "abc", want: 2.0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			got, err := i.Search(tc.expr, tc.data)
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %s", d)
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}
