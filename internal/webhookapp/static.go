package webhookapp

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/webhook"
)

// RunFiles runs the webhook with policies from files (cfg.Webhook's
// PolicyPaths) and certificates from files, publishing results and work to
// JetStream at cfg.NATSURLs (with cfg.NATSCredentials). It is the local and
// benchmark mode: no API server is needed. Like Run, it serves whatever
// NATS is doing.
func RunFiles(ctx context.Context, cfg Config, log zerolog.Logger) error {
	if err := cfg.Webhook.Validate(); err != nil {
		return err
	}
	if len(cfg.NATSURLs) == 0 {
		return errors.Join(ErrInvalidConfig, errors.New("at least one NATS URL is required"))
	}
	if err := cfg.Streams.Validate(); err != nil {
		return errors.Join(ErrInvalidConfig, err)
	}
	reg := prometheus.NewRegistry()
	ctx = log.WithContext(ctx)
	js, err := startJetStream(ctx, cfg.queueSettings(), reg, log)
	if err != nil {
		return err
	}
	defer js.close(ctx)
	return webhook.Run(ctx, cfg.Webhook,
		webhook.WithLogger(log),
		webhook.WithRegistry(reg),
		webhook.WithResultSink(js.results),
		webhook.WithWorkSink(js.work),
	)
}
