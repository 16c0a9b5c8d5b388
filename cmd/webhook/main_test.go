package main

import (
	"bytes"
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/platform"
	"github.com/verdict-dev/verdict/internal/webhook"
)

func TestFlags(t *testing.T) {
	cfg := webhook.DefaultConfig()
	fs := flag.NewFlagSet("webhook", flag.ContinueOnError)
	bindFlags(fs, &cfg)
	err := fs.Parse([]string{
		"--address=127.0.0.1:8443",
		"--probe-address=:8081", "--pprof", "--kyverno-metrics",
		"--tls-cert-file=/certs/tls.crt", "--tls-private-key-file=/certs/tls.key",
		"--tls-reload-interval=1m",
		"--max-request-bytes=1024",
		"--max-concurrent-body-reads=7", "--max-body-bytes-in-flight=4096",
		"--request-timeout=3s",
		"--max-warnings=4",
		"--work-publish-timeout=500ms",
		"--on-work-publish-failure=allow",
		"--unverified-results-per-second=100", "--unverified-work-per-second=0",
		"--shutdown-delay=0s", "--shutdown-grace-period=9s", "--flush-timeout=2s", "--shutdown-budget=20s",
		"--max-concurrent-evaluations=3", "--evaluation-queue-timeout=250ms",
		"--excluded-namespaces=nats,monitoring", "--excluded-namespaces=ci",
		"--excluded-resources=widgets.example.com/status",
		"--policies=/p/a.yaml,/p/b", "--policies=/p/c",
		"--log-level=debug", "--log-format=console",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := webhook.Config{
		Address: "127.0.0.1:8443", ProbeAddress: ":8081", Pprof: true, KyvernoMetrics: true,
		CertFile: "/certs/tls.crt", KeyFile: "/certs/tls.key", CertReloadInterval: time.Minute,
		MaxRequestBytes: 1024, MaxConcurrentBodyReads: 7, MaxBodyBytesInFlight: 4096, RequestTimeout: 3 * time.Second, MaxWarnings: 4,
		WorkPublishTimeout: 500 * time.Millisecond, OnWorkPublishFailure: webhook.WorkFailureAllow,
		UnverifiedResultsPerSecond: 100, UnverifiedWorkPerSecond: 0,
		ShutdownDelay: 0, ShutdownGracePeriod: 9 * time.Second, FlushTimeout: 2 * time.Second, ShutdownBudget: 20 * time.Second,
		MaxConcurrentEvaluations: 3, EvaluationQueueTimeout: 250 * time.Millisecond,
		ExcludedNamespaces: []string{"nats", "monitoring", "ci"}, ExcludedResources: []string{"widgets.example.com/status"},
		PolicyPaths: []string{"/p/a.yaml", "/p/b", "/p/c"},
		Log:         platform.LogConfig{Level: "debug", Format: "console"},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("config\n%+v\nwant\n%+v", cfg, want)
	}
}

func TestExitCodes(t *testing.T) {
	cases := map[string]struct {
		args []string
		code int
		out  string
	}{
		"help":                        {args: []string{"-h"}, code: exitOK},
		"unknown flag":                {args: []string{"--nope"}, code: exitUsage, out: "flag provided but not defined"},
		"invalid config":              {args: []string{"--on-work-publish-failure=maybe"}, code: exitUsage, out: "on-work-publish-failure"},
		"bad excluded resource":       {args: []string{"--excluded-resources=Lease"}, code: exitUsage, out: "excluded-resources"},
		"shutdown over budget":        {args: []string{"--shutdown-budget=5s"}, code: exitUsage, out: "shutdown-budget"},
		"bad stream limit":            {args: []string{"--work-max-bytes=1"}, code: exitUsage, out: "work max bytes"},
		"bad gc percent":              {args: []string{"--gc-percent=5"}, code: exitUsage, out: "gc-percent 5"},
		"stray argument":              {args: []string{"extra"}, code: exitUsage, out: "unexpected arguments"},
		"unknown mode":                {args: []string{"--mode=local"}, code: exitUsage, out: `mode "local": cluster or files`},
		"files without policies":      {args: []string{"--mode=files", "--tls-cert-file=a", "--tls-private-key-file=b"}, code: exitUsage, out: "files mode needs --policies"},
		"files without a certificate": {args: []string{"--mode=files", "--policies=p"}, code: exitUsage, out: "files mode needs --tls-cert-file"},
		"cluster flag in files mode": {args: []string{"--mode=files", "--policies=p", "--tls-cert-file=a", "--tls-private-key-file=b", "--namespace=x", "--kubeconfig=k"},
			code: exitUsage, out: "--kubeconfig, --namespace: cluster mode's flags"},
		"policies in cluster mode":    {args: []string{"--policies=p"}, code: exitUsage, out: "--policies is files mode's"},
		"certificate in cluster mode": {args: []string{"--tls-cert-file=a", "--tls-private-key-file=b"}, code: exitUsage, out: "--tls-cert-file is files mode's"},
		"two NATS authentications":    {args: []string{"--nats-credentials=c", "--nats-nkey-file=n"}, code: exitUsage, out: "give one"},
		"zero foreach elements":       {args: []string{"--max-foreach-elements=0"}, code: exitUsage, out: "--max-foreach-elements 0: must be positive"},
		"limits in files mode too": {args: []string{"--mode=files", "--policies=p", "--tls-cert-file=a", "--tls-private-key-file=b", "--memory-budget=0"},
			code: exitUsage, out: "--memory-budget 0: must be positive"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
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
