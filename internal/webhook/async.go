package webhook

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// ResultPublisher publishes results durably and may block until they are
// acknowledged: the JetStream publisher of VERDICT_RESULTS implements it.
type ResultPublisher interface {
	PublishResults(ctx context.Context, events []ResultEvent) error
}

// AsyncResultSink is a ResultSink that never blocks: Publish puts the
// events into a bounded buffer, one goroutine hands them to a
// ResultPublisher. Events that do not fit, or whose publish fails, are
// counted and dropped: background scans reconcile the reports later.
type AsyncResultSink struct {
	pub     ResultPublisher
	queue   chan []ResultEvent
	timeout time.Duration
	log     zerolog.Logger
	dropped *prometheus.CounterVec
	sent    prometheus.Counter

	mu      sync.Mutex
	pending int
	idle    chan struct{} // closed while pending == 0
	closed  bool
	stop    chan struct{}
	done    chan struct{}
}

// AsyncOption configures an AsyncResultSink.
type AsyncOption func(*asyncOptions) error

type asyncOptions struct {
	size    int
	timeout time.Duration
	reg     prometheus.Registerer
	log     zerolog.Logger
}

// WithBufferSize sets how many batches (one per admission request) the
// buffer holds; the default is 4096.
func WithBufferSize(n int) AsyncOption {
	return func(o *asyncOptions) error {
		if n <= 0 {
			return fmt.Errorf("%w: buffer size %d", ErrInvalidOption, n)
		}
		o.size = n
		return nil
	}
}

// WithPublishTimeout bounds one publish of the ResultPublisher; the
// default is 5s.
func WithPublishTimeout(d time.Duration) AsyncOption {
	return func(o *asyncOptions) error {
		if d <= 0 {
			return fmt.Errorf("%w: publish timeout %s", ErrInvalidOption, d)
		}
		o.timeout = d
		return nil
	}
}

// WithSinkRegisterer registers the sink's metrics.
func WithSinkRegisterer(reg prometheus.Registerer) AsyncOption {
	return func(o *asyncOptions) error {
		if reg == nil {
			return fmt.Errorf("%w: nil registerer", ErrInvalidOption)
		}
		o.reg = reg
		return nil
	}
}

// WithSinkLogger sets the sink's logger.
func WithSinkLogger(l zerolog.Logger) AsyncOption {
	return func(o *asyncOptions) error {
		o.log = l
		return nil
	}
}

// NewAsyncResultSink starts the sink's publishing goroutine; Close stops it.
func NewAsyncResultSink(pub ResultPublisher, opts ...AsyncOption) (*AsyncResultSink, error) {
	if pub == nil {
		return nil, fmt.Errorf("%w: nil result publisher", ErrInvalidOption)
	}
	o := asyncOptions{size: 4096, timeout: 5 * time.Second, log: zerolog.Nop()}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	s := &AsyncResultSink{
		pub:     pub,
		queue:   make(chan []ResultEvent, o.size),
		timeout: o.timeout,
		log:     o.log,
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "result_publish_failures_total",
			Help: "Result events not published, by reason (buffer_full, error, closed).",
		}, []string{"reason"}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "results_published_total",
			Help: "Result events acknowledged by the result publisher.",
		}),
		idle: make(chan struct{}),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	close(s.idle)
	if o.reg != nil {
		for _, c := range []prometheus.Collector{s.dropped, s.sent} {
			if err := o.reg.Register(c); err != nil {
				return nil, fmt.Errorf("register result sink metrics: %w", err)
			}
		}
	}
	go s.loop()
	return s, nil
}

// Publish queues the events without blocking; when the buffer is full they
// are dropped and counted.
func (s *AsyncResultSink) Publish(_ context.Context, events []ResultEvent) {
	if len(events) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.dropped.WithLabelValues("closed").Add(float64(len(events)))
		return
	}
	select {
	case s.queue <- events:
		if s.pending == 0 {
			s.idle = make(chan struct{})
		}
		s.pending++
	default:
		s.dropped.WithLabelValues("buffer_full").Add(float64(len(events)))
	}
}

// Flush waits until every batch queued so far is published (or dropped
// after a failed publish), or ctx ends.
func (s *AsyncResultSink) Flush(ctx context.Context) error {
	s.mu.Lock()
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("flush results: %w", ctx.Err())
	}
}

// Close flushes (bounded by ctx), then stops the publishing goroutine.
// Events published after Close are dropped and counted.
func (s *AsyncResultSink) Close(ctx context.Context) error {
	err := s.Flush(ctx)
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.stop)
	}
	s.mu.Unlock()
	<-s.done
	return err
}

func (s *AsyncResultSink) loop() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			// Whatever was queued after the last flush is counted, not
			// silently lost.
			for {
				select {
				case batch := <-s.queue:
					s.dropped.WithLabelValues("closed").Add(float64(len(batch)))
					s.settle()
				default:
					return
				}
			}
		case batch := <-s.queue:
			s.publish(batch)
		}
	}
}

func (s *AsyncResultSink) publish(batch []ResultEvent) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	err := s.pub.PublishResults(ctx, batch)
	cancel()
	if err != nil {
		s.dropped.WithLabelValues(reasonError).Add(float64(len(batch)))
		s.log.Warn().Err(err).Int(keyCount, len(batch)).Msg("result publish failed")
	} else {
		s.sent.Add(float64(len(batch)))
	}
	s.settle()
}

// settle marks one queued batch as done.
func (s *AsyncResultSink) settle() {
	s.mu.Lock()
	s.pending--
	if s.pending == 0 {
		close(s.idle)
	}
	s.mu.Unlock()
}
