package queue

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds the package's prometheus collectors. One Metrics is
// registered once on a registerer and shared by every connection, publisher
// and runner that uses it (labels tell them apart). Connect creates one on a
// fresh registry unless WithMetrics gives one, so tests never collide.
type Metrics struct {
	connEvents *prometheus.CounterVec

	published   *prometheus.CounterVec
	duplicates  *prometheus.CounterVec
	retried     *prometheus.CounterVec
	dropped     *prometheus.CounterVec
	pending     *prometheus.GaugeVec
	syncPublish *prometheus.HistogramVec

	handled       *prometheus.CounterVec
	handleTime    *prometheus.HistogramVec
	inFlight      *prometheus.GaugeVec
	ackErrors     *prometheus.CounterVec
	deadLettered  *prometheus.CounterVec
	deadErrors    *prometheus.CounterVec
	backlog       *prometheus.GaugeVec
	oldestPending *prometheus.GaugeVec

	replayed *prometheus.CounterVec
}

// Label values of the metrics.
const (
	labelPublisher = "publisher"
	labelConsumer  = "consumer"
	labelReason    = "reason"
	labelOutcome   = "outcome"
	labelOp        = "op"
	labelEvent     = "event"
	labelStream    = "stream"
	labelResult    = "result"
)

// NewMetrics creates the collectors and registers them on reg. A nil reg
// means a fresh prometheus.NewRegistry(). Registering twice on the same
// registerer fails: create one Metrics per registry and share it.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	const ns, sub = "verdict", "queue"
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}, labels)
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}, labels)
	}
	hist := func(name, help string, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: name, Help: help,
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, labels)
	}
	m := &Metrics{
		connEvents: counter("connection_events_total", "Connection state changes (disconnected, reconnected, closed, error).", labelEvent),

		published:   counter("published_total", "Messages acknowledged by JetStream as newly stored.", labelPublisher),
		duplicates:  counter("publish_duplicates_total", "Messages acknowledged as duplicates of an earlier publish with the same id.", labelPublisher),
		retried:     counter("publish_retries_total", "Publish attempts repeated after a transient failure.", labelPublisher),
		dropped:     counter("publish_dropped_total", "Messages given up, by reason: full (the publisher's buffer), expired (deadline passed), rejected (by the server), streamFull (the stream at its limits), closed (shut down).", labelPublisher, labelReason),
		pending:     gauge("publish_pending", "Messages taken by an asynchronous publisher and not yet acknowledged or dropped.", labelPublisher),
		syncPublish: hist("publish_sync_seconds", "Synchronous publish latency, retries included.", labelResult),

		handled:       counter("handled_total", "Messages handled by a runner, by outcome (done, retry, poison, panic, expired, lost).", labelConsumer, labelOutcome),
		handleTime:    hist("handle_seconds", "Handler run time.", labelConsumer),
		inFlight:      gauge("in_flight", "Messages being handled now.", labelConsumer),
		ackErrors:     counter("ack_errors_total", "Acknowledgements (ack, nak, term, in-progress) that failed; the message is delivered again after AckWait.", labelConsumer, labelOp),
		deadLettered:  counter("dead_lettered_total", "Messages moved to the dead-letter stream.", labelConsumer),
		deadErrors:    counter("dead_letter_errors_total", "Dead-letter publishes that failed; the message stays and is retried.", labelConsumer),
		backlog:       gauge("backlog", "Messages of a durable consumer not yet done (waiting or in flight), as a runner last read them; every replica reports its consumer: take the max.", labelConsumer),
		oldestPending: gauge("oldest_pending_age_seconds", "Age of the oldest message of a durable consumer not yet done (0 when none).", labelConsumer),

		replayed: counter("replayed_total", "Messages read by replay.", labelStream),
	}
	for _, c := range []prometheus.Collector{
		m.connEvents, m.published, m.duplicates, m.retried, m.dropped, m.pending, m.syncPublish,
		m.handled, m.handleTime, m.inFlight, m.ackErrors, m.deadLettered, m.deadErrors, m.backlog, m.oldestPending, m.replayed,
	} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("%w: metrics already registered on this registerer: share one Metrics", ErrInvalidOption)
			}
			return nil, fmt.Errorf("register queue metrics: %w", err)
		}
	}
	return m, nil
}
