package queue

// The package's metrics go through the small interfaces below, not a
// metrics library: a program that links the queue and serves no metrics
// (the pipeline CLI) links none. Package queueprom
// (pkg/queue/queueprom) implements them with prometheus collectors.

// Counter is a metric that only goes up.
type Counter interface {
	Inc()
	Add(float64)
}

// Gauge is a metric that is set, or goes up and down.
type Gauge interface {
	Set(float64)
	Inc()
	Dec()
}

// Observer records observations, such as durations, in a distribution.
type Observer interface {
	Observe(float64)
}

// CounterVec is a family of counters with the labels of its MetricSpec:
// WithLabelValues returns the one with the given values, in the spec's
// order of labels.
type CounterVec interface {
	WithLabelValues(values ...string) Counter
}

// GaugeVec is a family of gauges (see CounterVec).
type GaugeVec interface {
	WithLabelValues(values ...string) Gauge
}

// ObserverVec is a family of observers (see CounterVec).
type ObserverVec interface {
	WithLabelValues(values ...string) Observer
}

// MetricSpec describes one metric of the package: the one definition of
// its name, help, labels and (for a histogram) buckets, which a
// MetricsFactory turns into a metric.
type MetricSpec struct {
	// Name is the full name, such as verdict_queue_published_total.
	Name string
	// Help says what the metric counts.
	Help string
	// Labels are the label names, in the order WithLabelValues takes
	// their values.
	Labels []string
	// Buckets are the upper bounds of a histogram's buckets (empty for
	// counters and gauges).
	Buckets []float64
}

// MetricsFactory makes the metrics of MetricSpecs. A factory is asked once
// for each metric of the package, by MetricsFrom.
type MetricsFactory interface {
	CounterVec(MetricSpec) CounterVec
	GaugeVec(MetricSpec) GaugeVec
	HistogramVec(MetricSpec) ObserverVec
}

// Metrics holds the package's metrics. One Metrics is shared by every
// connection, publisher and runner that uses it (labels tell them apart):
// make it once (queueprom.NewMetrics on the registry a service serves) and
// give it to each Connect with WithMetrics. A Conn without WithMetrics
// records nothing.
type Metrics struct {
	connEvents CounterVec

	published   CounterVec
	duplicates  CounterVec
	retried     CounterVec
	dropped     CounterVec
	pending     GaugeVec
	syncPublish ObserverVec

	handled       CounterVec
	workItems     CounterVec
	handleTime    ObserverVec
	inFlight      GaugeVec
	ackErrors     CounterVec
	deadLettered  CounterVec
	deadErrors    CounterVec
	backlog       GaugeVec
	oldestPending GaugeVec

	replayed CounterVec

	reprovisions CounterVec
}

// Label names of the metrics.
const (
	labelPublisher = "publisher"
	labelConsumer  = "consumer"
	labelReason    = "reason"
	labelOutcome   = "outcome"
	labelOp        = "op"
	labelEvent     = "event"
	labelStream    = "stream"
	labelResult    = "result"
	labelCause     = "cause"
	labelKind      = "kind"
)

// metricPrefix starts the name of every metric of the package.
const metricPrefix = "verdict_queue_"

// latencyBuckets are the buckets of the package's histograms, in seconds.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// MetricsFrom makes the package's metrics (verdict_queue_*) with f, each
// defined here once. A nil f makes metrics that record nothing.
func MetricsFrom(f MetricsFactory) *Metrics {
	if f == nil {
		f = nopFactory{}
	}
	spec := func(name, help string, labels ...string) MetricSpec {
		return MetricSpec{Name: metricPrefix + name, Help: help, Labels: labels}
	}
	counter := func(name, help string, labels ...string) CounterVec {
		return f.CounterVec(spec(name, help, labels...))
	}
	gauge := func(name, help string, labels ...string) GaugeVec {
		return f.GaugeVec(spec(name, help, labels...))
	}
	hist := func(name, help string, labels ...string) ObserverVec {
		s := spec(name, help, labels...)
		s.Buckets = latencyBuckets
		return f.HistogramVec(s)
	}
	return &Metrics{
		connEvents: counter("connection_events_total", "Connection state changes (disconnected, reconnected, closed, error).", labelEvent),

		published:   counter("published_total", "Messages acknowledged by JetStream as newly stored.", labelPublisher),
		duplicates:  counter("publish_duplicates_total", "Messages acknowledged as duplicates of an earlier publish with the same id.", labelPublisher),
		retried:     counter("publish_retries_total", "Publish attempts repeated after a transient failure.", labelPublisher),
		dropped:     counter("publish_dropped_total", "Messages given up, by reason: full (the publisher's buffer), expired (deadline passed), rejected (by the server), streamFull (the stream at its limits), closed (shut down).", labelPublisher, labelReason),
		pending:     gauge("publish_pending", "Messages taken by an asynchronous publisher and not yet acknowledged or dropped.", labelPublisher),
		syncPublish: hist("publish_sync_seconds", "Synchronous publish latency, retries included.", labelResult),

		handled:       counter("handled_total", "Messages handled by a runner, by outcome (done, retry, poison, panic, expired, lost).", labelConsumer, labelOutcome),
		workItems:     counter("work_items_total", "Messages handled by a runner, by work kind (empty off the topology's work stream), outcome (processed, skipped, retried, deadLettered: poison or a retry on the last attempt) and the reason the handler named.", labelConsumer, labelKind, labelOutcome, labelReason),
		handleTime:    hist("handle_seconds", "Handler run time.", labelConsumer),
		inFlight:      gauge("in_flight", "Messages being handled now.", labelConsumer),
		ackErrors:     counter("ack_errors_total", "Acknowledgements (ack, nak, term, in-progress) that failed; the message is delivered again after AckWait.", labelConsumer, labelOp),
		deadLettered:  counter("dead_lettered_total", "Messages moved to the dead-letter stream.", labelConsumer),
		deadErrors:    counter("dead_letter_errors_total", "Dead-letter publishes that failed; the message stays and is retried.", labelConsumer),
		backlog:       gauge("backlog", "Messages of a durable consumer not yet done (waiting or in flight), as a runner last read them; every replica reports its consumer: take the max.", labelConsumer),
		oldestPending: gauge("oldest_pending_age_seconds", "Age of the oldest message of a durable consumer not yet done (0 when none).", labelConsumer),

		replayed: counter("replayed_total", "Messages read by replay.", labelStream),

		reprovisions: counter("reprovisions_total", "Streams and consumers provisioned again because a publish or a runner found one missing (cause streamMissing or consumerMissing), by result (ok, error).", labelCause, labelResult),
	}
}

// nopFactory makes metrics that record nothing: the default of a Conn
// without WithMetrics.
type nopFactory struct{}

func (nopFactory) CounterVec(MetricSpec) CounterVec    { return nopCounterVec{} }
func (nopFactory) GaugeVec(MetricSpec) GaugeVec        { return nopGaugeVec{} }
func (nopFactory) HistogramVec(MetricSpec) ObserverVec { return nopObserverVec{} }

// nopMetric is a Counter, a Gauge and an Observer that records nothing.
type nopMetric struct{}

func (nopMetric) Inc()            {}
func (nopMetric) Dec()            {}
func (nopMetric) Add(float64)     {}
func (nopMetric) Set(float64)     {}
func (nopMetric) Observe(float64) {}

type (
	nopCounterVec  struct{}
	nopGaugeVec    struct{}
	nopObserverVec struct{}
)

func (nopCounterVec) WithLabelValues(...string) Counter   { return nopMetric{} }
func (nopGaugeVec) WithLabelValues(...string) Gauge       { return nopMetric{} }
func (nopObserverVec) WithLabelValues(...string) Observer { return nopMetric{} }
