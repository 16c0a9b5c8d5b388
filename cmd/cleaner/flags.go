package main

import (
	"flag"

	cleanerapp "github.com/verdict-dev/verdict/internal/cleaner/app"
	"github.com/verdict-dev/verdict/internal/platform"
)

// bindFlags binds every field of cfg to a kebab-case flag; the values in
// cfg are the defaults.
func bindFlags(fs *flag.FlagSet, cfg *cleanerapp.Config) {
	platform.BindKubeFlags(fs, &cfg.Kube)
	platform.BindPolicyAPIFlag(fs, &cfg.PolicyAPI)
	platform.BindPolicyHTTPFlags(fs, &cfg.PolicyHTTP)
	platform.BindEvaluationLimitFlags(fs, &cfg.Limits)
	fs.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "Verdict's namespace: no policy reads its Secrets")
	platform.BindNATSFlags(fs, &cfg.NATS)
	platform.BindWorkerFlags(fs, &cfg.Worker)
	fs.DurationVar(&cfg.TTLInterval, "ttl-interval", cfg.TTLInterval, "how often resources labelled cleanup.kyverno.io/ttl are checked and deleted when due (one schedule for every replica: give them all the same)")
	fs.DurationVar(&cfg.Resync, "schedule-resync", cfg.Resync, "how often every cleanup policy's schedule is checked again")
	fs.StringVar(&cfg.Identity, "identity", cfg.Identity, "this replica's name in the Events it records (default: the host name)")
	fs.StringVar(&cfg.ProbeAddress, "probe-address", cfg.ProbeAddress, "address serving /metrics, /healthz and /readyz (empty: none)")
	platform.BindLogFlags(fs, &cfg.Log)
}
