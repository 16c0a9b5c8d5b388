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
	service.BindNATSFlags(fs, &cfg.NATS)
	fs.DurationVar(&cfg.VerifyGrace, "verify-grace", cfg.VerifyGrace, "how long a work item's trigger may be missing (a CREATE is published before it is stored) before the item is skipped")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "work items one replica works on at once")
	fs.DurationVar(&cfg.AckWait, "ack-wait", cfg.AckWait, "how long a replica may hold a work item without a sign of life before another gets it")
	fs.IntVar(&cfg.Attempts, "attempts", cfg.Attempts, "deliveries of a work item that keeps failing before it is dead-lettered")
	fs.DurationVar(&cfg.RetryMin, "retry-min", cfg.RetryMin, "delay before the first retry of a failed work item (doubling after)")
	fs.DurationVar(&cfg.RetryMax, "retry-max", cfg.RetryMax, "longest delay between retries")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "how long work items in flight may take to finish at shutdown")
	fs.StringVar(&cfg.ProbeAddress, "probe-address", cfg.ProbeAddress, "address serving /metrics, /healthz and /readyz (empty: none)")
	service.BindLogFlags(fs, &cfg.Log)
}
