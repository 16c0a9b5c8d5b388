package main

import (
	"flag"
	"strings"

	"github.com/verdict-dev/verdict/internal/queueflags"
	"github.com/verdict-dev/verdict/internal/reporter"
)

// bindFlags binds every field of cfg to a kebab-case flag; the values in
// cfg are the defaults.
func bindFlags(fs *flag.FlagSet, cfg *reporter.Config) {
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", cfg.Kubeconfig, "kubeconfig file (empty: in-cluster config)")
	fs.Float64Var(&cfg.APIQPS, "api-qps", cfg.APIQPS, "requests per second to the API server, all kinds")
	fs.IntVar(&cfg.APIBurst, "api-burst", cfg.APIBurst, "burst of requests to the API server")
	fs.Float64Var(&cfg.WriteQPS, "write-qps", cfg.WriteQPS, "report writes (create, apply, delete) per second")
	fs.IntVar(&cfg.WriteBurst, "write-burst", cfg.WriteBurst, "burst of report writes")
	fs.DurationVar(&cfg.APITimeout, "api-timeout", cfg.APITimeout, "upper bound of one API request")
	natsSet := false
	fs.Func("nats-url", "JetStream server URL (repeatable, or comma-separated; default "+strings.Join(cfg.NATSURLs, ",")+")", func(s string) error {
		if !natsSet {
			cfg.NATSURLs, natsSet = nil, true
		}
		for _, u := range strings.Split(s, ",") {
			if u = strings.TrimSpace(u); u != "" {
				cfg.NATSURLs = append(cfg.NATSURLs, u)
			}
		}
		return nil
	})
	fs.StringVar(&cfg.NATSCredentials, "nats-credentials", cfg.NATSCredentials, "NATS credentials file")
	fs.IntVar(&cfg.StreamReplicas, "stream-replicas", cfg.StreamReplicas, "replicas of the JetStream streams (1, or 3 or 5 with a NATS cluster)")
	queueflags.BindStreamLimits(fs, &cfg.Streams)
	fs.DurationVar(&cfg.VerifyGrace, "verify-grace", cfg.VerifyGrace, "how long a result's resource may be missing (a CREATE is evaluated before it is stored) before the result is dropped as unverified")
	fs.DurationVar(&cfg.CoalesceWindow, "coalesce-window", cfg.CoalesceWindow, "how long a resource's results gather before its report is written")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "result messages one replica holds at once (summed over replicas: at most 500)")
	fs.IntVar(&cfg.FlushWorkers, "flush-workers", cfg.FlushWorkers, "reports one replica writes at once")
	fs.DurationVar(&cfg.AckWait, "ack-wait", cfg.AckWait, "how long a replica may hold a message without a sign of life before another gets it")
	fs.IntVar(&cfg.Attempts, "attempts", cfg.Attempts, "deliveries of a result whose report cannot be written before it is dead-lettered")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "how long results in flight may take to be written at shutdown")
	fs.BoolVar(&cfg.Scan, "scan", cfg.Scan, "run the background scan (policy changes, the periodic scan, purging deleted resources' results)")
	fs.DurationVar(&cfg.ScanInterval, "scan-interval", cfg.ScanInterval, "period of the full background scan (0: only on policy changes)")
	fs.IntVar(&cfg.ScanConcurrency, "scan-concurrency", cfg.ScanConcurrency, "scan items one replica works on at once")
	fs.StringVar(&cfg.ProbeAddress, "probe-address", cfg.ProbeAddress, "address serving /metrics, /healthz and /readyz (empty: none)")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "trace, debug, info, warn or error")
	fs.StringVar(&cfg.LogFormat, "log-format", cfg.LogFormat, "json or console")
}
