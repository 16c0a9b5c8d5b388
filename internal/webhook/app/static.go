package app

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/platform"
	"github.com/verdict-dev/verdict/internal/webhook"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// runFiles serves policies (cfg.Webhook.PolicyPaths) and the certificate
// (cfg.Webhook.CertFile, KeyFile) from files, publishing results and work
// to JetStream like the cluster mode, and like it serving whatever NATS is
// doing. No API server is needed.
func runFiles(ctx context.Context, cfg Config, log zerolog.Logger) error {
	reg := platform.NewRegistry()
	ctx = log.WithContext(ctx)
	verifier, err := cfg.Registries.Verifier(reg, nil, nil)
	if err != nil {
		return err
	}
	js, err := startJetStream(ctx, cfg.queueSettings(), reg, log)
	if err != nil {
		return err
	}
	defer js.close(ctx)
	return webhook.Run(ctx, cfg.Webhook,
		webhook.WithLogger(log),
		webhook.WithRegistry(reg),
		webhook.WithKindResolver(builtinKinds()),
		webhook.WithExceptionAdmission(cfg.Exceptions.Admit),
		webhook.WithResultSink(js.results),
		webhook.WithWorkSink(js.work),
		webhook.WithReadinessCheck("nats", js.ready),
		js.decisionOption(),
		webhook.WithEngineOptions(append(cfg.Limits.Options(), engine.WithImageVerifier(verifier))...),
	)
}
