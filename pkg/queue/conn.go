package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Conn is a connection to NATS with JetStream, the logger and the metrics
// every publisher, runner and replay made from it uses.
type Conn struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	log     zerolog.Logger
	metrics *Metrics
	opts    connOptions
	// heal provisions again what Provision provisioned when a publish or
	// a runner finds a stream or consumer missing (streams.go).
	heal reprovisioner
	// done is closed when the connection is closed for good, whoever
	// closed it (Close, Drain, or the client after an error the server
	// answered by dropping it).
	done      chan struct{}
	closeOnce sync.Once
}

// ConnOption configures Connect.
type ConnOption func(*connOptions) error

type connOptions struct {
	urls         []string
	embedded     nats.InProcessConnProvider
	name         string
	caFile       string
	certFile     string
	keyFile      string
	credsFile    string
	nkeyFile     string
	reconnectMin time.Duration
	reconnectMax time.Duration
	apiTimeout   time.Duration
	background   bool
	logger       *zerolog.Logger
	metrics      *Metrics
	topology     *Topology
}

// WithURL connects to external NATS servers (nats:// or tls:// URLs; more
// than one for a cluster).
func WithURL(urls ...string) ConnOption {
	return func(o *connOptions) error {
		if len(urls) == 0 {
			return fmt.Errorf("%w: WithURL needs at least one URL", ErrInvalidOption)
		}
		for _, u := range urls {
			if strings.TrimSpace(u) == "" {
				return fmt.Errorf("%w: empty NATS URL", ErrInvalidOption)
			}
		}
		o.urls = append(o.urls, urls...)
		return nil
	}
}

// WithEmbedded connects in process to a server running in this process
// (no TCP), such as an embedded.Server, which works for an InProcessOnly
// server too.
func WithEmbedded(e nats.InProcessConnProvider) ConnOption {
	return func(o *connOptions) error {
		if e == nil {
			return fmt.Errorf("%w: nil embedded server", ErrInvalidOption)
		}
		o.embedded = e
		return nil
	}
}

// WithName sets the connection name the server shows.
func WithName(name string) ConnOption {
	return func(o *connOptions) error { o.name = name; return nil }
}

// WithTLS uses TLS: caFile verifies the server (empty: the system roots),
// certFile and keyFile (both or neither) are the client certificate.
func WithTLS(caFile, certFile, keyFile string) ConnOption {
	return func(o *connOptions) error {
		if (certFile == "") != (keyFile == "") {
			return fmt.Errorf("%w: TLS client certificate and key go together", ErrInvalidOption)
		}
		o.caFile, o.certFile, o.keyFile = caFile, certFile, keyFile
		return nil
	}
}

// WithCredentialsFile authenticates with a NATS credentials (JWT + seed) file.
func WithCredentialsFile(path string) ConnOption {
	return func(o *connOptions) error {
		if path == "" {
			return fmt.Errorf("%w: empty credentials file", ErrInvalidOption)
		}
		o.credsFile = path
		return nil
	}
}

// WithNKeyFile authenticates with an NKey seed file.
func WithNKeyFile(path string) ConnOption {
	return func(o *connOptions) error {
		if path == "" {
			return fmt.Errorf("%w: empty nkey file", ErrInvalidOption)
		}
		o.nkeyFile = path
		return nil
	}
}

// WithReconnectBackoff sets the reconnect delays: exponential from min to
// max, with jitter. Default 100ms to 5s. The client reconnects forever.
func WithReconnectBackoff(minDelay, maxDelay time.Duration) ConnOption {
	return func(o *connOptions) error {
		if minDelay <= 0 || maxDelay < minDelay {
			return fmt.Errorf("%w: reconnect backoff %s..%s", ErrInvalidOption, minDelay, maxDelay)
		}
		o.reconnectMin, o.reconnectMax = minDelay, maxDelay
		return nil
	}
}

// WithAPITimeout bounds JetStream API calls whose context has no deadline.
// Default 5s.
func WithAPITimeout(d time.Duration) ConnOption {
	return func(o *connOptions) error {
		if d <= 0 {
			return fmt.Errorf("%w: API timeout %s", ErrInvalidOption, d)
		}
		o.apiTimeout = d
		return nil
	}
}

// WithBackgroundConnect makes Connect return at once, before the first
// connection is up: the client keeps trying in the background (with the
// reconnect backoff) and everything made from the Conn copes with a
// connection that is not up yet (asynchronous publishers wait or drop by
// their deadlines, PublishSync and Provision retry within their contexts).
// A service that must serve whatever NATS is doing (the webhook) uses it.
func WithBackgroundConnect() ConnOption {
	return func(o *connOptions) error { o.background = true; return nil }
}

// WithLogger sets the logger; the default is the one in Connect's context
// (zerolog.Ctx).
func WithLogger(l zerolog.Logger) ConnOption {
	return func(o *connOptions) error { o.logger = &l; return nil }
}

// WithMetrics records the connection's metrics, and those of everything
// made from it, in m (queueprom.NewMetrics makes one on a prometheus
// registerer); connections may share one. Without it nothing is recorded.
func WithMetrics(m *Metrics) ConnOption {
	return func(o *connOptions) error {
		if m == nil {
			return fmt.Errorf("%w: nil metrics", ErrInvalidOption)
		}
		o.metrics = m
		return nil
	}
}

// WithTopology names the application's work, dead-letter and schedule
// streams and subjects, which the work-queue calls use (see Topology).
func WithTopology(t Topology) ConnOption {
	return func(o *connOptions) error {
		if err := t.Validate(); err != nil {
			return err
		}
		t.Kinds = slices.Clone(t.Kinds)
		o.topology = &t
		return nil
	}
}

// Topology returns the connection's topology, or ErrNoTopology.
func (c *Conn) Topology() (Topology, error) {
	if c.opts.topology == nil {
		return Topology{}, ErrNoTopology
	}
	return *c.opts.topology, nil
}

// Connect connects to NATS and returns once the connection is up, or fails
// when ctx ends first (with WithBackgroundConnect it returns at once).
// Afterwards the client reconnects forever with
// exponential backoff and logs each state change once (disconnected,
// reconnected, closed).
func Connect(ctx context.Context, opts ...ConnOption) (*Conn, error) {
	o := connOptions{reconnectMin: 100 * time.Millisecond, reconnectMax: 5 * time.Second, apiTimeout: 5 * time.Second}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if (o.embedded == nil) == (len(o.urls) == 0) {
		return nil, fmt.Errorf("%w: give exactly one of WithURL or WithEmbedded", ErrInvalidOption)
	}
	log := *zerolog.Ctx(ctx)
	if o.logger != nil {
		log = *o.logger
	}
	log = log.With().Str(logKeyComponent, "queue").Logger()
	m := o.metrics
	if m == nil {
		m = MetricsFrom(nil)
	}
	c := &Conn{log: log, metrics: m, opts: o, done: make(chan struct{})}

	url := strings.Join(o.urls, ",")
	var lastAttempt atomic.Pointer[error]
	natsOpts := []nats.Option{
		nats.Name(o.name),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.CustomReconnectDelay(func(attempts int) time.Duration {
			return backoffDelay(attempts, o.reconnectMin, o.reconnectMax)
		}),
		nats.PingInterval(20 * time.Second),
		nats.MaxPingsOutstanding(3),
		nats.ConnectHandler(func(nc *nats.Conn) {
			log.Info().Str(logKeyURL, nc.ConnectedUrlRedacted()).Str(logKeyServer, nc.ConnectedServerName()).Msg("natsConnected")
		}),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			m.connEvents.WithLabelValues("disconnected").Inc()
			log.Warn().Err(err).Msg("natsDisconnected")
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			m.connEvents.WithLabelValues("reconnected").Inc()
			log.Info().Str(logKeyURL, nc.ConnectedUrlRedacted()).Str(logKeyServer, nc.ConnectedServerName()).Msg("natsReconnected")
		}),
		nats.ClosedHandler(func(nc *nats.Conn) { c.closed(nc) }),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			// The client forgets a failed attempt's error; keep the last
			// one for waitConnected to say why it is not connected.
			if err != nil {
				lastAttempt.Store(&err)
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			m.connEvents.WithLabelValues("error").Inc()
			ev := log.Error().Err(err)
			if sub != nil {
				ev = ev.Str(logKeySubject, sub.Subject)
			}
			ev.Msg("natsAsyncError")
		}),
	}
	if o.embedded != nil {
		natsOpts = append(natsOpts, nats.InProcessServer(o.embedded))
		url = ""
	}
	if o.caFile != "" {
		natsOpts = append(natsOpts, nats.RootCAs(o.caFile))
	}
	if o.certFile != "" {
		natsOpts = append(natsOpts, nats.ClientCert(o.certFile, o.keyFile))
	}
	if o.caFile != "" || o.certFile != "" {
		natsOpts = append(natsOpts, nats.Secure())
	}
	if o.credsFile != "" {
		natsOpts = append(natsOpts, nats.UserCredentials(o.credsFile))
	}
	if o.nkeyFile != "" {
		nk, err := nats.NkeyOptionFromSeed(o.nkeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: nkey file: %w", ErrInvalidOption, err)
		}
		natsOpts = append(natsOpts, nk)
	}
	nc, err := nats.Connect(url, natsOpts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats: %w", err)
	}
	if !o.background {
		if err := waitConnected(ctx, nc, &lastAttempt); err != nil {
			nc.Close()
			return nil, err
		}
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(o.apiTimeout))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream context: %w", err)
	}
	c.nc, c.js = nc, js
	return c, nil
}

// waitConnected waits until nc is connected; the error of a failure says
// why, with the error of the last failed attempt when the client has none.
func waitConnected(ctx context.Context, nc *nats.Conn, lastAttempt *atomic.Pointer[error]) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !nc.IsConnected() {
		if nc.IsClosed() {
			return fmt.Errorf("%w: connection closed: %w", ErrNotConnected, nc.LastError())
		}
		select {
		case <-ctx.Done():
			err := nc.LastError()
			if err == nil {
				if last := lastAttempt.Load(); last != nil {
					err = fmt.Errorf("%w (last attempt: %w)", ctx.Err(), *last)
				} else {
					err = ctx.Err()
				}
			}
			return fmt.Errorf("%w: %w", ErrNotConnected, err)
		case <-t.C:
		}
	}
	return nil
}

// backoffDelay is min·2^(attempt-1) capped at max, with ±20% jitter.
func backoffDelay(attempt int, minDelay, maxDelay time.Duration) time.Duration {
	d := minDelay
	for i := 1; i < attempt && d < maxDelay; i++ {
		d *= 2
	}
	d = min(d, maxDelay)
	jitter := time.Duration(rand.Int64N(int64(d)/5+1)) - d/10
	return d + jitter
}

// closed records that the connection is closed for good: counted, logged
// (with the error that closed it, when the client did), and Done closed.
func (c *Conn) closed(nc *nats.Conn) {
	c.closeOnce.Do(func() {
		c.metrics.connEvents.WithLabelValues("closed").Inc()
		ev := c.log.Info()
		if err := nc.LastError(); err != nil {
			ev = c.log.Error().Err(err)
		}
		ev.Msg("natsClosed")
		close(c.done)
	})
}

// Done is closed once the connection is closed for good. The client
// reconnects by itself after every disconnection but one: an error the
// server answers by dropping it (a protocol line over its
// max_control_line, for one) closes the connection for good, and then
// only a new Conn connects again. Err says why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is the error that closed the connection, or that the last
// connection attempt failed with; nil when there is none.
func (c *Conn) Err() error { return c.nc.LastError() }

// Connected reports whether the connection is up now.
func (c *Conn) Connected() bool { return c.nc.IsConnected() }

// NATS is the underlying connection.
func (c *Conn) NATS() *nats.Conn { return c.nc }

// JetStream is the JetStream context of the connection.
func (c *Conn) JetStream() jetstream.JetStream { return c.js }

// Metrics are the metrics this connection records in (ones that record
// nothing without WithMetrics).
func (c *Conn) Metrics() *Metrics { return c.metrics }

// Logger is the connection's logger.
func (c *Conn) Logger() zerolog.Logger { return c.log }

// Close closes the connection at once; runners and publishers made from it
// stop. Prefer stopping them first (their Run returns, Close(ctx) on a
// publisher) so nothing in flight is abandoned.
func (c *Conn) Close() { c.nc.Close() }

// Drain drains the connection (subscriptions finish, publishes flush) and
// waits for it to close or ctx to end.
func (c *Conn) Drain(ctx context.Context) error {
	closed := make(chan struct{})
	c.nc.SetClosedHandler(func(nc *nats.Conn) {
		c.closed(nc)
		close(closed)
	})
	if err := c.nc.Drain(); err != nil {
		if errors.Is(err, nats.ErrConnectionClosed) {
			return nil
		}
		return fmt.Errorf("drain nats: %w", err)
	}
	select {
	case <-closed:
		return nil
	case <-ctx.Done():
		c.nc.Close()
		return ctx.Err()
	}
}
