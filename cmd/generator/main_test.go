package main

import (
	"bytes"
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/bus"
	generatorapp "github.com/verdict-dev/verdict/internal/generator/app"
	"github.com/verdict-dev/verdict/internal/platform"
	"github.com/verdict-dev/verdict/internal/platform/natsconn"
)

func TestFlags(t *testing.T) {
	cfg := generatorapp.DefaultConfig()
	fs := flag.NewFlagSet("generator", flag.ContinueOnError)
	bindFlags(fs, &cfg)
	err := fs.Parse([]string{
		"--kubeconfig=/k/config", "--api-qps=20", "--api-burst=40", "--api-timeout=10s",
		"--nats-url=nats://a:4222,nats://b:4222", "--nats-credentials=/n/creds", "--stream-replicas=3",
		"--work-max-messages=5000", "--verify-grace=1m", "--concurrency=16", "--ack-wait=12s", "--attempts=3",
		"--retry-min=2s", "--retry-max=30s", "--shutdown-timeout=5s",
		"--probe-address=:9090", "--log-level=debug", "--log-format=console", "--namespace=verdict-system",
		"--max-foreach-elements=500", "--max-foreach-depth=2", "--work-budget=20000", "--max-expression-steps=5000", "--memory-budget=8Mi",
	})
	if err != nil {
		t.Fatal(err)
	}
	limits := bus.DefaultStreamLimits()
	limits.WorkMaxMsgs = 5000
	want := generatorapp.Config{
		Kube:        platform.KubeConfig{Kubeconfig: "/k/config", QPS: 20, Burst: 40, Timeout: 10 * time.Second},
		NATS:        platform.NATSConfig{Config: natsconn.Config{URLs: []string{"nats://a:4222", "nats://b:4222"}, Credentials: "/n/creds"}, StreamReplicas: 3, Streams: limits},
		Namespace:   "verdict-system",
		VerifyGrace: time.Minute,
		Worker: platform.WorkerConfig{
			Concurrency: 16, AckWait: 12 * time.Second, Attempts: 3,
			RetryMin: 2 * time.Second, RetryMax: 30 * time.Second, ShutdownTimeout: 5 * time.Second,
		},
		Limits:       platform.EvaluationLimits{MaxForEachElements: 500, MaxForEachDepth: 2, WorkBudget: 20000, MaxExpressionSteps: 5000, MemoryBudget: 8 << 20},
		ProbeAddress: ":9090", Log: platform.LogConfig{Level: "debug", Format: "console"},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("config\n%+v\nwant\n%+v", cfg, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestExitCodes(t *testing.T) {
	cases := map[string]struct {
		args []string
		code int
		out  string
	}{
		"help":               {args: []string{"-h"}, code: exitOK, out: "usage: generator"},
		"unknown flag":       {args: []string{"--nope"}, code: exitUsage, out: "flag provided but not defined"},
		"stray argument":     {args: []string{"extra"}, code: exitUsage, out: "unexpected arguments"},
		"no concurrency":     {args: []string{"--concurrency=0"}, code: exitUsage, out: "concurrency 0"},
		"short ack wait":     {args: []string{"--ack-wait=1s"}, code: exitUsage, out: "ack wait"},
		"no attempts":        {args: []string{"--attempts=0"}, code: exitUsage, out: "attempts 0"},
		"retries reversed":   {args: []string{"--retry-min=1m", "--retry-max=1s"}, code: exitUsage, out: "retry delays"},
		"short grace":        {args: []string{"--verify-grace=10ms"}, code: exitUsage, out: "verify grace"},
		"bad log level":      {args: []string{"--log-level=loud"}, code: exitUsage, out: "log-level"},
		"no nats":            {args: []string{"--nats-url="}, code: exitUsage, out: "nats-url"},
		"zero foreach depth": {args: []string{"--max-foreach-depth=0"}, code: exitUsage, out: "--max-foreach-depth 0: must be positive"},
		"no kubeconfig, not in a cluster": {
			args: []string{"--log-level=error", "--probe-address="}, code: platform.ExitFailed, out: "kubernetes client config",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			var stderr bytes.Buffer
			if code := run(tc.args, &stderr); code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.out) {
				t.Fatalf("stderr %q lacks %q", stderr.String(), tc.out)
			}
		})
	}
}
