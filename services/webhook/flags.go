package main

import (
	"flag"
	"strings"

	"github.com/verdict-dev/verdict/internal/webhook"
)

// bindFlags binds every field of cfg to a kebab-case flag; the values in
// cfg are the defaults.
func bindFlags(fs *flag.FlagSet, cfg *webhook.Config) {
	fs.StringVar(&cfg.Address, "address", cfg.Address, "address of the HTTPS admission server")
	fs.StringVar(&cfg.ProbeAddress, "probe-address", cfg.ProbeAddress, "address that also serves /healthz, /readyz and /metrics over plain HTTP (empty: none)")
	fs.StringVar(&cfg.CertFile, "tls-cert-file", cfg.CertFile, "serving certificate chain (PEM), reloaded when it changes")
	fs.StringVar(&cfg.KeyFile, "tls-private-key-file", cfg.KeyFile, "serving private key (PEM), reloaded when it changes")
	fs.DurationVar(&cfg.CertReloadInterval, "tls-reload-interval", cfg.CertReloadInterval, "how often the certificate files are checked for changes")
	fs.Int64Var(&cfg.MaxRequestBytes, "max-request-bytes", cfg.MaxRequestBytes, "largest request body accepted; larger ones get 413")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", cfg.RequestTimeout, "upper bound of one admission evaluation (the API server's ?timeout= lowers it)")
	fs.IntVar(&cfg.MaxWarnings, "max-warnings", cfg.MaxWarnings, "most warnings in one admission response")
	fs.DurationVar(&cfg.WorkPublishTimeout, "work-publish-timeout", cfg.WorkPublishTimeout, "how long generate work may take to be acknowledged before the answer")
	fs.Func("on-work-publish-failure", "deny or allow a request whose generate work was not acknowledged in time (default "+string(cfg.OnWorkPublishFailure)+")", func(s string) error {
		cfg.OnWorkPublishFailure = webhook.WorkFailureMode(s)
		return nil
	})
	fs.DurationVar(&cfg.ShutdownDelay, "shutdown-delay", cfg.ShutdownDelay, "how long to keep serving with /readyz failing after SIGTERM")
	fs.DurationVar(&cfg.ShutdownGracePeriod, "shutdown-grace-period", cfg.ShutdownGracePeriod, "how long in-flight requests may take to finish at shutdown")
	fs.DurationVar(&cfg.FlushTimeout, "flush-timeout", cfg.FlushTimeout, "how long buffered results may take to flush at shutdown")
	fs.Func("policies", "file or directory of ClusterPolicies, Policies and PolicyExceptions (repeatable, or comma-separated)", func(s string) error {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				cfg.PolicyPaths = append(cfg.PolicyPaths, p)
			}
		}
		return nil
	})
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "trace, debug, info, warn or error")
	fs.StringVar(&cfg.LogFormat, "log-format", cfg.LogFormat, "json or console")
}
