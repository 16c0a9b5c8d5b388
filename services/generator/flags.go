package main

import (
	"flag"

	"github.com/verdict-dev/verdict/internal/generatorapp"
	"github.com/verdict-dev/verdict/internal/service"
)

// bindFlags binds every field of cfg to a kebab-case flag; the values in
// cfg are the defaults.
func bindFlags(fs *flag.FlagSet, cfg *generatorapp.Config) {
	service.BindKubeFlags(fs, &cfg.Kube)
	service.BindPolicyHTTPFlags(fs, &cfg.PolicyHTTP)
	service.BindExceptionFlags(fs, &cfg.Exceptions)
	fs.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "Verdict's namespace: no policy reads its Secrets")
	service.BindNATSFlags(fs, &cfg.NATS)
	fs.DurationVar(&cfg.VerifyGrace, "verify-grace", cfg.VerifyGrace, "how long a work item's trigger may be missing (a CREATE is published before it is stored) before the item is skipped")
	service.BindWorkerFlags(fs, &cfg.Worker)
	fs.StringVar(&cfg.ProbeAddress, "probe-address", cfg.ProbeAddress, "address serving /metrics, /healthz and /readyz (empty: none)")
	service.BindLogFlags(fs, &cfg.Log)
}
