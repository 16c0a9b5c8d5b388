package main

import (
	"flag"

	generatorapp "github.com/verdict-dev/verdict/internal/generator/app"
	"github.com/verdict-dev/verdict/internal/platform"
)

// bindFlags binds every field of cfg to a kebab-case flag; the values in
// cfg are the defaults.
func bindFlags(fs *flag.FlagSet, cfg *generatorapp.Config) {
	platform.BindKubeFlags(fs, &cfg.Kube)
	platform.BindPolicyHTTPFlags(fs, &cfg.PolicyHTTP)
	platform.BindEvaluationLimitFlags(fs, &cfg.Limits)
	platform.BindExceptionFlags(fs, &cfg.Exceptions)
	platform.BindPolicyAPIFlag(fs, &cfg.PolicyAPI)
	fs.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "Verdict's namespace: no policy reads its Secrets")
	platform.BindNATSFlags(fs, &cfg.NATS)
	fs.DurationVar(&cfg.VerifyGrace, "verify-grace", cfg.VerifyGrace, "how long a work item's trigger may be missing (a CREATE is published before it is stored) before the item is skipped")
	platform.BindWorkerFlags(fs, &cfg.Worker)
	fs.StringVar(&cfg.ProbeAddress, "probe-address", cfg.ProbeAddress, "address serving /metrics, /healthz and /readyz (empty: none)")
	platform.BindLogFlags(fs, &cfg.Log)
}
