package webhookapp

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/service"
	"github.com/verdict-dev/verdict/internal/webhook"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// keyAttempt is the log key of a retry's attempt number.
const keyAttempt = "attempt"

// queueSettings are what the webhook needs of JetStream.
type queueSettings struct {
	nats     service.NATSConfig
	identity string
	buffer   int
}

// jetStream is the webhook's side of JetStream: a connection that may not
// be up yet, the asynchronous result publisher and the sinks the admission
// server uses.
type jetStream struct {
	conn    *queue.Conn
	pub     *queue.AsyncPublisher
	results *resultSink
	work    *workSink
	log     zerolog.Logger
}

// startJetStream connects to NATS in the background and starts the result
// publisher at once: the webhook serves admissions whatever NATS is doing
// (DESIGN.md invariant 8). Results wait in the publisher's bounded buffer
// (or are dropped and counted when it is full or their deadline passes);
// generate work fails to publish until the connection is up, and
// Config.OnWorkPublishFailure decides. Streams are provisioned in the
// background, retried until they are.
func startJetStream(ctx context.Context, qs queueSettings, reg webhook.Registry, log zerolog.Logger) (*jetStream, error) {
	opts, err := qs.nats.ConnOptions("verdict-webhook-"+qs.identity, log, reg)
	if err != nil {
		return nil, err
	}
	conn, err := queue.Connect(ctx, append(opts, queue.WithBackgroundConnect())...)
	if err != nil {
		return nil, fmt.Errorf("nats client: %w", err)
	}
	pub, err := conn.NewAsyncPublisher(queue.WithPublisherName("webhook-results"), queue.WithBufferSize(qs.buffer))
	if err != nil {
		conn.Close()
		return nil, err
	}
	results, err := newResultSink(pub, reg, log)
	if err != nil {
		conn.Close()
		return nil, err
	}
	js := &jetStream{conn: conn, pub: pub, results: results, work: &workSink{conn: conn}, log: log}
	popts := append(qs.nats.ProvisionOptions(), queue.WithConsumers())
	go js.provision(ctx, popts)
	return js, nil
}

// provision creates or updates the streams, retrying until it succeeds or
// ctx ends: a refused configuration is logged and tried again later (an
// operator may fix the server meanwhile).
func (j *jetStream) provision(ctx context.Context, opts []queue.ProvisionOption) {
	for attempt := 1; ; attempt++ {
		err := j.conn.Provision(ctx, opts...)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			return
		}
		j.log.Error().Err(err).Int(keyAttempt, attempt).Msg("streams not provisioned; retrying")
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(time.Duration(attempt)*5*time.Second, time.Minute)):
		}
	}
}

// close stops the publisher (the server flushed it already during its
// shutdown; what is still pending when the reserve runs out is dropped and
// counted) and closes the connection.
func (j *jetStream) close(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), webhook.ShutdownReserve())
	defer cancel()
	if err := j.pub.Close(cctx); err != nil {
		j.log.Warn().Err(err).Msg("results not published before exit")
	}
	j.conn.Close()
}
