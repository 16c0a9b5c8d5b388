package app

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/internal/webhook"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// queueSettings are what the webhook needs of JetStream.
type queueSettings struct {
	nats     platform.NATSConfig
	identity string
	buffer   int
	linger   time.Duration
	// decisions: publish the admission log (Config.Decisions).
	decisions bool
	// spoolDir and spoolBytes: keep the decisions on disk until
	// acknowledged (Config.DecisionSpool).
	spoolDir   string
	spoolBytes int64
	// spool is opened by startJetStream from spoolDir.
	spool *queue.Spool
	// replaceDelay is the first wait before a connection closed for good
	// is replaced (doubling to maxReplaceDelay while replacements keep
	// closing); 0 is defaultReplaceDelay.
	replaceDelay time.Duration
}

// Waits before a closed connection is replaced: a server that closes every
// new connection (credentials revoked, say) is not hammered.
const (
	defaultReplaceDelay = time.Second
	maxReplaceDelay     = 30 * time.Second
	// replaceReset: a connection that lived this long resets the wait.
	replaceReset = time.Minute
)

// errConnClosed is readiness's error while the replica's connection is
// closed for good and not replaced yet.
var errConnClosed = errors.New("the NATS connection is closed: generate work cannot be queued until it is replaced")

// jetStream is the webhook's side of JetStream: a connection that may not
// be up yet, the asynchronous result publisher and the sinks the admission
// server uses. The connection reconnects by itself after a disconnection;
// one closed for good (the server dropped the client over a protocol
// error, issue 28 finding 6) is replaced by a new one, and until it is the
// replica is not ready.
type jetStream struct {
	qs      queueSettings
	opts    []queue.ConnOption
	popts   []bus.ProvisionOption
	results *resultSink
	// decisions is the admission log's sink; nil when it is off.
	decisions *decisionSink
	work      *workSink
	log       zerolog.Logger
	// down is why the replica cannot queue work now (its connection closed
	// for good and not replaced yet); nil while it has a connection.
	down     atomic.Pointer[error]
	replaced prometheus.Counter
	stop     context.CancelFunc
	done     chan struct{}
}

// startJetStream connects to NATS in the background and starts the result
// publisher at once: the webhook serves admissions whatever NATS is doing
// (DESIGN.md invariant 8). Results wait in the publisher's bounded buffer
// (or are dropped and counted when it is full or their deadline passes);
// generate work fails to publish until the connection is up, and
// Config.OnWorkPublishFailure decides. Streams are provisioned in the
// background, retried until they are. A connection closed for good is
// replaced (keep).
func startJetStream(ctx context.Context, qs queueSettings, reg webhook.Registry, log zerolog.Logger) (*jetStream, error) {
	opts, err := qs.nats.ConnOptions("verdict-webhook-"+qs.identity, log, reg)
	if err != nil {
		return nil, err
	}
	// Kept for a replacement, with the same metrics.
	opts = append(opts, queue.WithBackgroundConnect())
	replaced := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "verdict", Subsystem: "webhook", Name: "nats_connections_replaced_total",
		Help: "NATS connections closed for good (the server dropped the client) and replaced by a new one; /readyz fails in between."})
	if err := reg.Register(replaced); err != nil {
		return nil, err
	}
	if qs.decisions && qs.spoolDir != "" {
		// A spool that cannot be opened (a folder not writable) is no
		// reason not to serve: decisions are then published unkept.
		if qs.spool, err = queue.OpenSpool(qs.spoolDir, qs.spoolBytes); err != nil {
			log.Error().Err(err).Msg("decisionSpoolUnavailable")
			qs.spool = nil
		}
	}
	conn, pubs, err := dial(ctx, opts, qs)
	if err != nil {
		return nil, err
	}
	results, err := newResultSink(pubs.results, reg, log)
	if err != nil {
		pubs.close(ctx)
		conn.Close()
		return nil, err
	}
	var decisions *decisionSink
	if pubs.decisions != nil {
		if decisions, err = newDecisionSink(pubs.decisions, qs.spool, qs.identity, reg, log); err != nil {
			pubs.close(ctx)
			conn.Close()
			return nil, err
		}
	}
	if qs.replaceDelay <= 0 {
		qs.replaceDelay = defaultReplaceDelay
	}
	kctx, stop := context.WithCancel(ctx)
	js := &jetStream{
		qs: qs, opts: opts, popts: append(qs.nats.ProvisionOptions(), bus.WithConsumers()),
		results: results, decisions: decisions, work: &workSink{}, log: log, replaced: replaced, stop: stop, done: make(chan struct{}),
	}
	js.work.conn.Store(conn)
	if decisions != nil {
		if err := registerLogMetrics(ctx, reg, js); err != nil {
			stop()
			pubs.close(ctx)
			conn.Close()
			return nil, err
		}
	}
	go js.keep(kctx)
	if qs.spool != nil {
		go js.keepSpool(kctx)
	}
	return js, nil
}

// spoolResendInterval is how often decisions the publisher gave up on are
// published again from the spool while connected.
const spoolResendInterval = 30 * time.Second

// keepSpool publishes what a previous process left in the spool, then,
// every spoolResendInterval while connected, what the publisher gave up
// on since.
func (j *jetStream) keepSpool(ctx context.Context) {
	publish := func(m queue.Message) error { return j.decisions.pub.Load().Publish(m) }
	if n, err := j.qs.spool.Recover(publish); err != nil {
		j.log.Error().Err(err).Int(logkey.Count, n).Msg("decisionSpoolNotRecovered")
	} else if n > 0 {
		j.log.Info().Int(logkey.Count, n).Msg("decisionSpoolRecovered")
	}
	t := time.NewTicker(spoolResendInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !j.conn().Connected() {
			continue
		}
		if n, err := j.qs.spool.Resend(publish); err != nil {
			j.log.Error().Err(err).Msg("decisionSpoolNotResent")
		} else if n > 0 {
			j.log.Info().Int(logkey.Count, n).Msg("decisionSpoolResent")
		}
	}
}

// publishers are a connection's asynchronous publishers: results and,
// when the admission log is on, decisions. Each has its own buffer: a
// flood of one never crowds out the other.
type publishers struct {
	results, decisions *queue.AsyncPublisher
}

// close stops the publishers within 100ms of ctx (what they hold then is
// dropped and counted).
func (p publishers) close(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 100*time.Millisecond)
	defer cancel()
	for _, pub := range []*queue.AsyncPublisher{p.results, p.decisions} {
		if pub != nil {
			_ = pub.Close(ctx)
		}
	}
}

// dial makes a connection (in the background) and its publishers.
func dial(ctx context.Context, opts []queue.ConnOption, qs queueSettings) (*queue.Conn, publishers, error) {
	var pubs publishers
	conn, err := bus.Connect(ctx, opts...)
	if err != nil {
		return nil, pubs, fmt.Errorf("nats client: %w", err)
	}
	if pubs.results, err = conn.NewAsyncPublisher(queue.WithPublisherName("webhook-results"), queue.WithBufferSize(qs.buffer), queue.WithLinger(qs.linger)); err != nil {
		conn.Close()
		return nil, pubs, err
	}
	if qs.decisions {
		popts := []queue.PublisherOption{queue.WithPublisherName("webhook-decisions"), queue.WithBufferSize(qs.buffer), queue.WithLinger(qs.linger)}
		if sp := qs.spool; sp != nil {
			popts = append(popts, queue.WithAckHandler(func(m queue.Message) { sp.Acked(m.ID) }),
				queue.WithDropHandler(func(m queue.Message, _ error) { sp.GivenUp(m.ID) }))
		}
		if pubs.decisions, err = conn.NewAsyncPublisher(popts...); err != nil {
			pubs.close(ctx)
			conn.Close()
			return nil, pubs, err
		}
	}
	return conn, pubs, nil
}

// decisionOption is the server's option for the admission log: its sink
// when it is on, nothing otherwise.
func (j *jetStream) decisionOption() webhook.Option {
	return func(s *webhook.Server) error {
		if j.decisions == nil {
			return nil
		}
		return webhook.WithDecisionSink(j.decisions)(s)
	}
}

// conn is the current connection.
func (j *jetStream) conn() *queue.Conn { return j.work.conn.Load() }

// ready is /readyz's NATS check: it fails only while the replica's
// connection is closed for good and not replaced yet. A NATS outage does
// not fail it (the connection is reconnecting, and every replica shares the
// outage: taking them all out of the Service would fail every write the
// webhooks select, DESIGN.md invariant 8); a replica whose own connection
// is gone does.
func (j *jetStream) ready(context.Context) error {
	if err := j.down.Load(); err != nil {
		return fmt.Errorf("%w: %w", errConnClosed, *err)
	}
	return nil
}

// keep provisions the streams through the current connection and, when
// it closes for good, replaces it (after a wait that doubles while new
// ones keep closing), until ctx ends.
func (j *jetStream) keep(ctx context.Context) {
	defer close(j.done)
	delay := j.qs.replaceDelay
	for {
		conn := j.conn()
		// The provisioning of this connection ends with it, and is
		// waited for: nothing keep starts outlives it.
		pctx, cancelProvision := context.WithCancel(ctx)
		provisioned := make(chan struct{})
		go func() {
			defer close(provisioned)
			j.provision(pctx, conn)
		}()
		stopProvision := func() {
			cancelProvision()
			<-provisioned
		}
		since := time.Now()
		select {
		case <-ctx.Done():
			stopProvision()
			return
		case <-conn.Done():
		}
		stopProvision()
		if time.Since(since) > replaceReset {
			delay = j.qs.replaceDelay
		}
		err := conn.Err()
		if err == nil {
			err = errors.New("closed")
		}
		j.down.Store(&err)
		j.log.Error().Err(err).Dur(logkey.Delay, delay).Msg("natsConnectionClosedForGood")
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, maxReplaceDelay)
			if err := j.replace(ctx); err != nil {
				j.log.Error().Err(err).Dur(logkey.Delay, delay).Msg("natsConnectionNotReplaced")
				continue
			}
			break
		}
	}
}

// replace makes a new connection and publisher and puts them in the
// sinks; the old publisher is stopped (what it still held is dropped and
// counted).
func (j *jetStream) replace(ctx context.Context) error {
	conn, pubs, err := dial(ctx, j.opts, j.qs)
	if err != nil {
		return err
	}
	old := publishers{results: j.results.pub.Swap(pubs.results)}
	if j.decisions != nil {
		old.decisions = j.decisions.pub.Swap(pubs.decisions)
	}
	j.work.conn.Store(conn)
	j.down.Store(nil)
	j.replaced.Inc()
	j.log.Info().Msg("natsConnectionReplaced")
	old.close(ctx)
	return nil
}

// provision creates or updates the streams through conn, retrying until
// it succeeds or ctx ends: a refused configuration is logged and tried
// again later (an operator may fix the server meanwhile).
func (j *jetStream) provision(ctx context.Context, conn *queue.Conn) {
	for attempt := 1; ; attempt++ {
		err := bus.Provision(ctx, conn, j.popts...)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			return
		}
		j.log.Error().Err(err).Int(logkey.Attempt, attempt).Msg("streams not provisioned; retrying")
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(time.Duration(attempt)*5*time.Second, time.Minute)):
		}
	}
}

// close stops replacing connections, stops the publisher (the server
// flushed it already during its shutdown; what is still pending when the
// reserve runs out is dropped and counted) and closes the connection.
func (j *jetStream) close(ctx context.Context) {
	j.stop()
	<-j.done
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), webhook.ShutdownReserve())
	defer cancel()
	if err := j.results.pub.Load().Close(cctx); err != nil {
		j.log.Warn().Err(err).Msg("results not published before exit")
	}
	if j.decisions != nil {
		if err := j.decisions.pub.Load().Close(cctx); err != nil {
			j.log.Warn().Err(err).Msg("decisions not published before exit")
		}
	}
	if sp := j.qs.spool; sp != nil {
		// What is not acknowledged stays for the next start.
		if pending, _ := sp.Stats(); pending > 0 {
			j.log.Warn().Int(logkey.Count, pending).Msg("decisionsKeptInSpool")
		}
		_ = sp.Close()
	}
	j.conn().Close()
}
