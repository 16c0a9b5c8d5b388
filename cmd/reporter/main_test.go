package main

import (
	"bytes"
	"flag"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform"
	"github.com/verdict-dev/verdict/internal/platform/natsconn"
	reporterapp "github.com/verdict-dev/verdict/internal/reports/app"
)

func TestFlags(t *testing.T) {
	cfg := reporterapp.DefaultConfig()
	fs := flag.NewFlagSet("reporter", flag.ContinueOnError)
	bindFlags(fs, &cfg)
	err := fs.Parse([]string{
		"--kubeconfig=/k/config",
		"--api-qps=20", "--api-burst=40", "--write-qps=5.5", "--write-burst=10", "--api-timeout=10s",
		"--nats-url=nats://a:4222,nats://b:4222", "--nats-url=nats://c:4222",
		"--nats-credentials=/n/creds", "--stream-replicas=3",
		"--result-history=8", "--results-max-bytes=10Gi", "--work-max-messages=5000", "--work-max-bytes=64Mi", "--verify-grace=1m",
		"--coalesce-window=1s", "--concurrency=32", "--flush-workers=4", "--attempts=3", "--shutdown-timeout=5s",
		"--pending-results=100", "--pending-bytes=1Mi", "--pending-rechecks=1000",
		"--ack-wait=12s", "--scan=false", "--scan-interval=10m", "--scan-concurrency=3", "--candidate-window=2h", "--kyverno-metrics",
		"--probe-address=:9090", "--log-level=debug", "--log-format=console",
		"--serve-reports", "--serve-address=127.0.0.1", "--serve-port=9443", "--serve-tls-cert-file=/c/tls.crt",
		"--serve-tls-private-key-file=/c/tls.key", "--serve-cert-dir=/c", "--serve-snapshot-interval=2m",
		"--serve-service-name=reports", "--serve-lease=lease",
		"--serve-api-services=v1alpha2.wgpolicyk8s.io", "--serve-api-services=v1.example.com", "--namespace=ns", "--identity=pod-1",
		"--max-foreach-elements=500", "--max-foreach-depth=2", "--work-budget=20000", "--max-expression-steps=5000", "--memory-budget=8Mi",
		"--registry-blocklist=10.0.0.0/8", "--registry-blocklist=metadata", "--registry-ca-file=/r/ca.pem", "--registry-dial-timeout=2s",
		"--image-verify-max-concurrent=4", "--image-verify-cache-ttl=10m", "--image-verify-cache-entries=50", "--image-verify-shared-cache-bytes=1Mi",
		"--image-verify-max-response-bytes=2Mi", "--registry-credential-secrets=regcred,mirror", "--registry-namespace-credentials",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := reporterapp.Config{
		Kube:     platform.KubeConfig{Kubeconfig: "/k/config", QPS: 20, Burst: 40, Timeout: 10 * time.Second},
		WriteQPS: 5.5, WriteBurst: 10,
		Limits: platform.EvaluationLimits{MaxForEachElements: 500, MaxForEachDepth: 2, WorkBudget: 20000, MaxExpressionSteps: 5000, MemoryBudget: 8 << 20},
		Registries: platform.Registries{Blocklist: []string{"10.0.0.0/8", "metadata"}, CAFile: "/r/ca.pem", DialTimeout: 2 * time.Second,
			MaxConcurrent: 4, CacheTTL: 10 * time.Minute, CacheEntries: 50, SharedCacheBytes: 1 << 20, MaxResponseBytes: 2 << 20,
			CredentialSecrets: []string{"regcred", "mirror"}, NamespaceCredentials: true},
		NATS: platform.NATSConfig{
			Config:         natsconn.Config{URLs: []string{"nats://a:4222", "nats://b:4222", "nats://c:4222"}, Credentials: "/n/creds"},
			StreamReplicas: 3,
			Streams: bus.StreamLimits{ResultHistory: 8, ResultsMaxBytes: 10 << 30, WorkMaxMsgs: 5000, WorkMaxBytes: 64 << 20,
				DecisionsMaxAge: bus.DefaultDecisionsMaxAge, DecisionsMaxBytes: bus.DefaultDecisionsMaxBytes},
		},
		VerifyGrace:    time.Minute,
		CoalesceWindow: time.Second, Concurrency: 32, FlushWorkers: 4, Attempts: 3, ShutdownTimeout: 5 * time.Second,
		PendingResults: 100, PendingBytes: 1 << 20, PendingRechecks: 1000,
		AckWait: 12 * time.Second, Scan: false, ScanInterval: 10 * time.Minute, ScanConcurrency: 3, CandidateWindow: 2 * time.Hour, KyvernoMetrics: true,
		ProbeAddress: ":9090", Log: platform.LogConfig{Level: "debug", Format: "console"},
		Serve: true, ServeAddress: "127.0.0.1", ServePort: 9443, ServeCertFile: "/c/tls.crt", ServeKeyFile: "/c/tls.key", ServeCertDir: "/c",
		ServeSnapshotInterval: 2 * time.Minute, ServeServiceName: "reports", ServeLeaseName: "lease",
		ServeAPIServices: []string{"v1alpha2.wgpolicyk8s.io", "v1.example.com"}, Namespace: "ns", Identity: "pod-1",
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("config\n%+v\nwant\n%+v", cfg, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	// The certificate from a Secret, kept by the replicas.
	cfg = reporterapp.DefaultConfig()
	fs = flag.NewFlagSet("reporter", flag.ContinueOnError)
	bindFlags(fs, &cfg)
	if err := fs.Parse([]string{"--serve-reports", "--serve-tls-secret=tls", "--serve-ca-secret=ca"}); err != nil {
		t.Fatal(err)
	}
	// The default APIServices: the reports' two and the admission log's denials.
	if cfg.ServeTLSSecret != "tls" || cfg.ServeCASecret != "ca" ||
		!slices.Equal(cfg.ServeAPIServices, []string{"v1alpha2.wgpolicyk8s.io", "v1alpha1.openreports.io", "v1alpha1.decisions.verdict.dev"}) {
		t.Fatalf("config %+v", cfg)
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
		"help":                  {args: []string{"-h"}, code: exitOK, out: "reporter replay [--prune]"},
		"replay help":           {args: []string{"replay", "-h"}, code: exitOK, out: "-prune"},
		"unknown flag":          {args: []string{"--nope"}, code: exitUsage, out: "flag provided but not defined"},
		"prune is for replay":   {args: []string{"run", "--prune"}, code: exitUsage, out: "flag provided but not defined: -prune"},
		"stray argument":        {args: []string{"extra"}, code: exitUsage, out: "unexpected arguments"},
		"invalid window":        {args: []string{"--coalesce-window=0s"}, code: exitUsage, out: "coalesce window"},
		"invalid qps":           {args: []string{"replay", "--write-qps=0"}, code: exitUsage, out: "write QPS"},
		"too much concurrency":  {args: []string{"--concurrency=1000"}, code: exitUsage, out: "concurrency 1000"},
		"short ack wait":        {args: []string{"--ack-wait=1s"}, code: exitUsage, out: "ack wait"},
		"bad scan interval":     {args: []string{"--scan-interval=10ms"}, code: exitUsage, out: "scan interval"},
		"bad snapshot interval": {args: []string{"--serve-snapshot-interval=1s"}, code: exitUsage, out: "snapshot interval"},
		"bad log level":         {args: []string{"--log-level=loud"}, code: exitUsage, out: "log-level"},
		"history too long":      {args: []string{"--result-history=100"}, code: exitUsage, out: "result history 100"},
		"bytes not a quantity":  {args: []string{"--results-max-bytes=lots"}, code: exitUsage, out: "results-max-bytes"},
		"results too small":     {args: []string{"--results-max-bytes=1Ki"}, code: exitUsage, out: "results max bytes"},
		"no work":               {args: []string{"--work-max-messages=0"}, code: exitUsage, out: "work max messages"},
		"work too small":        {args: []string{"--work-max-bytes=10"}, code: exitUsage, out: "work max bytes"},
		"short grace":           {args: []string{"--verify-grace=10ms"}, code: exitUsage, out: "verify grace"},
		"memory budget no size": {args: []string{"--memory-budget=lots"}, code: exitUsage, out: "memory-budget"},
		"pending over the acks": {args: []string{"--pending-results=900", "--concurrency=64"}, code: exitUsage, out: "pending results 900"},
		"negative pending":      {args: []string{"--pending-results=-1"}, code: exitUsage, out: "pending results -1"},
		"pending bytes":         {args: []string{"--pending-bytes=lots"}, code: exitUsage, out: "pending-bytes"},
		"too many rechecks":     {args: []string{"--pending-rechecks=2000000"}, code: exitUsage, out: "pending rechecks 2000000"},
		"secret and files":      {args: []string{"--serve-reports", "--serve-tls-secret=s", "--serve-tls-cert-file=c", "--serve-tls-private-key-file=k"}, code: exitUsage, out: "a certificate Secret or certificate files"},
		"keeper needs secret":   {args: []string{"--serve-reports", "--serve-ca-secret=ca"}, code: exitUsage, out: "keeping the certificate"},
		"no kubeconfig, not in a cluster": {
			args: []string{"replay", "--log-level=error", "--probe-address="}, code: platform.ExitFailed, out: "kubernetes client config",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.out) {
				t.Fatalf("stderr %q lacks %q", stderr.String(), tc.out)
			}
		})
	}
}
