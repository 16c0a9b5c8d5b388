package platform

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestParseFlags(t *testing.T) {
	tests := map[string]struct {
		args []string
		code int
		done bool
		out  string
	}{
		"flags":          {args: []string{"--n=3"}},
		"help":           {args: []string{"-h"}, code: ExitOK, done: true},
		"unknown flag":   {args: []string{"--nope"}, code: ExitUsage, done: true, out: "flag provided but not defined"},
		"stray argument": {args: []string{"x"}, code: ExitUsage, done: true, out: "unexpected arguments: [x]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
			fs.SetOutput(&out)
			fs.Int("n", 0, "a number")
			code, done := ParseFlags(fs, tc.args)
			if code != tc.code || done != tc.done || !strings.Contains(out.String(), tc.out) {
				t.Fatalf("code %d done %v, output %q; want %d %v and %q", code, done, out.String(), tc.code, tc.done, tc.out)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	errInvalid := errors.New("invalid")
	var out bytes.Buffer
	if code := ExitCode(&out, "svc", nil, errInvalid); code != ExitOK || out.Len() != 0 {
		t.Fatalf("no error: %d %q", code, out.String())
	}
	if code := ExitCode(&out, "svc", fmt.Errorf("flag x: %w", errInvalid), errInvalid); code != ExitUsage || out.String() != "svc: flag x: invalid\n" {
		t.Fatalf("invalid: %d %q", code, out.String())
	}
	out.Reset()
	if code := ExitCode(&out, "svc", errors.New("down"), errInvalid); code != ExitFailed || out.String() != "svc: down\n" {
		t.Fatalf("failure: %d %q", code, out.String())
	}
}

func TestServe(t *testing.T) {
	errInvalid := errors.New("invalid")
	ok := func() error { return nil }
	tests := map[string]struct {
		validate func() error
		logs     LogConfig
		run      func(context.Context, zerolog.Logger) error
		code     int
		out      string
	}{
		"runs":             {validate: ok, logs: DefaultLogConfig(), run: func(context.Context, zerolog.Logger) error { return nil }, code: ExitOK},
		"bad config":       {validate: func() error { return errors.New("flag x: bad") }, logs: DefaultLogConfig(), code: ExitUsage, out: "flag x: bad"},
		"bad log level":    {validate: ok, logs: LogConfig{Level: "shouting"}, code: ExitUsage, out: "shouting"},
		"refused by run":   {validate: ok, logs: DefaultLogConfig(), run: func(context.Context, zerolog.Logger) error { return fmt.Errorf("x: %w", errInvalid) }, code: ExitUsage, out: "svc: x: invalid"},
		"failed":           {validate: ok, logs: DefaultLogConfig(), run: func(context.Context, zerolog.Logger) error { return errors.New("down") }, code: ExitFailed, out: "svc: down"},
		"ctx is the drain": {validate: ok, logs: DefaultLogConfig(), run: func(ctx context.Context, _ zerolog.Logger) error { return ctx.Err() }, code: ExitOK},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if code := Serve(&out, "svc", tc.validate, tc.logs, tc.run, errInvalid); code != tc.code || !strings.Contains(out.String(), tc.out) {
				t.Fatalf("code %d, output %q; want %d and %q", code, out.String(), tc.code, tc.out)
			}
		})
	}
}
