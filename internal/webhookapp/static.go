package webhookapp

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/webhook"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// RunFiles runs the webhook with policies from files (cfg.Webhook's
// PolicyPaths) and certificates from files, publishing results and work to
// JetStream at natsURLs. It is the local and benchmark mode: no API server
// is needed.
func RunFiles(ctx context.Context, cfg webhook.Config, natsURLs []string, replicas, buffer int, log zerolog.Logger) error {
	reg := prometheus.NewRegistry()
	ctx = log.WithContext(ctx)
	conn, err := queue.Connect(ctx, queue.WithURL(natsURLs...), queue.WithName("verdict-webhook"), queue.WithLogger(log), queue.WithRegisterer(reg))
	if err != nil {
		return fmt.Errorf("connect to NATS: %w", err)
	}
	defer conn.Close()
	if err := conn.Provision(ctx, queue.WithReplicas(replicas), queue.WithConsumers()); err != nil {
		log.Warn().Err(err).Msg("streams not provisioned yet; publishing will be retried")
	}
	pub, err := conn.NewAsyncPublisher(queue.WithPublisherName("webhook-results"), queue.WithBufferSize(buffer))
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = pub.Close(cctx)
	}()
	sink, err := newResultSink(pub, reg, log)
	if err != nil {
		return err
	}
	return webhook.Run(ctx, cfg,
		webhook.WithLogger(log),
		webhook.WithRegistry(reg),
		webhook.WithResultSink(sink),
		webhook.WithWorkSink(&workSink{conn: conn}),
	)
}
