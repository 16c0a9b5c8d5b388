package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestExitCodes(t *testing.T) {
	cases := map[string]struct {
		args []string
		code int
		out  string
	}{
		"no command":      {code: exitUsage, out: "usage: verdict-dev demo"},
		"unknown command": {args: []string{"apply"}, code: exitUsage, out: "usage: verdict-dev demo"},
		"help":            {args: []string{"--help"}, code: exitOK, out: "usage"},
		"demo help":       {args: []string{"demo", "-h"}, code: exitOK, out: "-once"},
		"unknown flag":    {args: []string{"demo", "--twice"}, code: exitUsage, out: "flag provided but not defined"},
		"stray argument":  {args: []string{"demo", "extra"}, code: exitUsage, out: "unexpected arguments"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(t.Context(), tc.args, &stdout, &stderr); code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.out) {
				t.Fatalf("stderr %q lacks %q", stderr.String(), tc.out)
			}
		})
	}
}
