package main

import (
	"slices"
	"testing"

	"github.com/verdict-dev/verdict/internal/testkit/podload"
)

func TestParseAPIServer(t *testing.T) {
	tests := map[string]struct {
		args       []string
		clients    []int
		iterations []int
		mode       podload.Mode
		fail       bool
	}{
		"Kyverno's matrix by default": {args: []string{"--kubeconfig=k"}, clients: []int{10, 50, 200, 500}, iterations: []int{1000, 5000, 10000, 10000}, mode: podload.ModeK6},
		"levels and mode":             {args: []string{"--kubeconfig=k", "--clients=5, 7", "--iterations=10,20", "--mode=fresh"}, clients: []int{5, 7}, iterations: []int{10, 20}, mode: podload.ModeFresh},
		"a count per level":           {args: []string{"--kubeconfig=k", "--clients=5,7", "--iterations=10"}, fail: true},
		"no zero":                     {args: []string{"--kubeconfig=k", "--clients=0", "--iterations=10"}, fail: true},
		"unknown mode":                {args: []string{"--kubeconfig=k", "--mode=ws"}, fail: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, err := parseAPIServer(tc.args)
			if (err != nil) != tc.fail {
				t.Fatalf("parse: %v, want failure %v", err, tc.fail)
			}
			if tc.fail {
				return
			}
			if !slices.Equal(cfg.clients, tc.clients) || !slices.Equal(cfg.iterations, tc.iterations) || cfg.mode != tc.mode {
				t.Fatalf("%+v", cfg)
			}
		})
	}
}
