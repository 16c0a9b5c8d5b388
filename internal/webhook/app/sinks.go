package app

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/webhook"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// resultSink publishes rule results to VERDICT_RESULTS through the
// queue's asynchronous publisher: Publish never blocks (a full buffer is
// counted as dropped by the publisher's metrics), Flush waits for the
// buffer at shutdown.
type resultSink struct {
	// pub is the current connection's publisher (jetStream replaces it
	// with the connection).
	pub atomic.Pointer[queue.AsyncPublisher]
	log zerolog.Logger
	// unpublishable counts results that cannot become a message (no
	// resource uid: the API server gives validating webhooks the uid of a
	// created object, so this is a malformed or foreign request), or not
	// a valid one.
	unpublishable prometheus.Counter
}

// newResultSink returns the sink and registers its counter on reg.
func newResultSink(pub *queue.AsyncPublisher, reg prometheus.Registerer, log zerolog.Logger) (*resultSink, error) {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "verdict", Subsystem: "webhook", Name: "results_unpublishable_total",
		Help: "Rule results not published because the admission request named no resource uid."})
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	s := &resultSink{log: log, unpublishable: c}
	s.pub.Store(pub)
	return s, nil
}

var _ webhook.ResultSink = (*resultSink)(nil)

func (s *resultSink) Publish(_ context.Context, evs []bus.ResultEvent) {
	ms := bus.ResultMessages(evs, func(_ bus.ResultEvent, err error) { s.skip(err) })
	// One batch through the publisher's buffer. It counts what it drops;
	// the admission answer does not wait. Result messages are valid by
	// construction (escaped subject tokens, hex ids); were one not, the
	// batch would be refused whole, and counted here.
	if err := s.pub.Load().PublishAll(ms); errors.Is(err, queue.ErrInvalidSubject) || errors.Is(err, queue.ErrMissingID) {
		for range ms {
			s.skip(err)
		}
	}
}

// skip counts a result that makes no message.
func (s *resultSink) skip(err error) {
	s.unpublishable.Inc()
	s.log.Debug().Err(err).Msg("result not published")
}

func (s *resultSink) Flush(ctx context.Context) error { return s.pub.Load().Flush(ctx) }

// workSink publishes generate work to VERDICT_WORK and returns only once
// the stream acknowledged it (or ctx, carrying the deadline, ends).
type workSink struct {
	// conn is the current connection (jetStream replaces a closed one).
	conn atomic.Pointer[queue.Conn]
}

var _ webhook.WorkSink = (*workSink)(nil)

func (s *workSink) Publish(ctx context.Context, item bus.WorkItem) error {
	m, err := bus.WorkMessage(item)
	if err != nil {
		return err
	}
	_, err = s.conn.Load().PublishSync(ctx, m)
	return err
}
