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

// Publish publishes the results of one admission (one resource at one
// version) as one message, a result batch (bus.ResultBatchMessage): one
// message, one acknowledgement and one subject per admission, whatever
// the number of policies. Results without a resource uid make no message
// (counted); results of other resources, which one review does not have,
// would go in batches of their own. The batch goes through the
// publisher's buffer, which counts what it drops; the admission answer
// does not wait.
func (s *resultSink) Publish(_ context.Context, evs []bus.ResultEvent) {
	for len(evs) > 0 {
		res := evs[0].Resource
		n := 1
		for n < len(evs) && evs[n].Resource == res {
			n++
		}
		batch := evs[:n]
		if n < len(evs) {
			// Another resource in the same call: gather this one's.
			batch = nil
			var rest []bus.ResultEvent
			for _, ev := range evs {
				if ev.Resource == res {
					batch = append(batch, ev)
				} else {
					rest = append(rest, ev)
				}
			}
			evs = rest
		} else {
			evs = nil
		}
		s.publish(batch)
	}
}

// publish publishes the results of one resource at one version.
func (s *resultSink) publish(evs []bus.ResultEvent) {
	m, err := bus.ResultBatchMessage(evs)
	if err == nil {
		err = s.pub.Load().Publish(m)
		// The publisher counts what it drops (a full buffer, closed).
		// The message is valid by construction (escaped subject tokens,
		// a hex id); were it not, it is counted here.
		if !errors.Is(err, queue.ErrInvalidSubject) && !errors.Is(err, queue.ErrMissingID) {
			return
		}
	}
	for range evs {
		s.skip(err)
	}
}

// skip counts a result that makes no message.
func (s *resultSink) skip(err error) {
	s.unpublishable.Inc()
	s.log.Debug().Err(err).Msg("result not published")
}

func (s *resultSink) Flush(ctx context.Context) error { return s.pub.Load().Flush(ctx) }

// decisionSink publishes the admission log to VERDICT_DECISIONS through
// its own asynchronous publisher: Record never blocks (a full buffer is
// counted as dropped by the publisher's metrics, publisher
// "webhook-decisions"), Flush waits for the buffer at shutdown.
type decisionSink struct {
	pub atomic.Pointer[queue.AsyncPublisher]
	// spool keeps each decision until acknowledged; nil: none.
	spool   *queue.Spool
	replica string
	log     zerolog.Logger
	// unpublishable counts decisions that cannot become a message (a
	// review without a uid, say).
	unpublishable prometheus.Counter
	// unspooled counts decisions the spool could not keep.
	unspooled prometheus.Counter
}

// newDecisionSink returns the sink of replica and registers its counter
// on reg.
func newDecisionSink(pub *queue.AsyncPublisher, spool *queue.Spool, replica string, reg prometheus.Registerer, log zerolog.Logger) (*decisionSink, error) {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "verdict", Subsystem: "webhook", Name: "decisions_unpublishable_total",
		Help: "Admission decisions not recorded in the admission log because they make no valid message (no request uid, say)."})
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	s := &decisionSink{spool: spool, replica: replica, log: log, unpublishable: c}
	if spool != nil {
		s.unspooled = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "verdict", Subsystem: "webhook", Name: "decisions_unspooled_total",
			Help: "Admission decisions published without being kept in the spool (--decision-spool): the spool was full or could not be written."})
		held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "verdict", Subsystem: "webhook", Name: "decision_spool_messages",
			Help: "Admission decisions kept in the spool and not yet acknowledged by the stream."}, func() float64 { n, _ := spool.Stats(); return float64(n) })
		size := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "verdict", Subsystem: "webhook", Name: "decision_spool_bytes",
			Help: "Bytes of the spool's files on disk."}, func() float64 { _, b := spool.Stats(); return float64(b) })
		for _, col := range []prometheus.Collector{s.unspooled, held, size} {
			if err := reg.Register(col); err != nil {
				return nil, err
			}
		}
	}
	s.pub.Store(pub)
	return s, nil
}

var _ webhook.DecisionSink = (*decisionSink)(nil)

// Record publishes d, named with the replica, through the buffer, kept
// in the spool first when there is one.
func (s *decisionSink) Record(d bus.Decision) {
	d.Replica = s.replica
	m, err := bus.DecisionMessage(d)
	if err == nil {
		spooled := false
		if s.spool != nil {
			if serr := s.spool.Append(m); serr != nil {
				s.unspooled.Inc()
				s.log.Debug().Err(serr).Msg("decision not kept in the spool")
			} else {
				spooled = true
			}
		}
		err = s.pub.Load().Publish(m)
		if spooled && err != nil {
			// Not taken (a full buffer): published again from the spool.
			s.spool.GivenUp(m.ID)
		}
		// The publisher counts what it drops (a full buffer, closed).
		if !errors.Is(err, queue.ErrInvalidSubject) && !errors.Is(err, queue.ErrMissingID) {
			return
		}
	}
	s.unpublishable.Inc()
	s.log.Debug().Err(err).Msg("decision not recorded")
}

func (s *decisionSink) Flush(ctx context.Context) error { return s.pub.Load().Flush(ctx) }

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
