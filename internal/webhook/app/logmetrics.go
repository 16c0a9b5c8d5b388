package app

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdict-dev/verdict/internal/bus"
)

// Bounds of the admission log's stream metrics: the stream's state is
// read at scrape time at most every logStateEvery, waiting at most
// logStateTimeout for NATS (a scrape is never held up longer; the last
// state read is shown meanwhile).
const (
	logStateEvery   = 10 * time.Second
	logStateTimeout = time.Second
)

// logState reads VERDICT_DECISIONS' state for the metrics of what the log
// holds and what its limits let go.
type logState struct {
	js *jetStream
	mu sync.Mutex
	at time.Time
	st jetstream.StreamState
}

// registerLogMetrics registers, on reg, the admission log's stream
// metrics: what VERDICT_DECISIONS holds (messages, bytes, the age of the
// oldest) and how many decisions its limits (age, size) removed. Every
// replica exports the same values: aggregate them with max, not sum.
func registerLogMetrics(ctx context.Context, reg prometheus.Registerer, js *jetStream) error {
	l := &logState{js: js}
	opts := func(name, help string) prometheus.GaugeOpts {
		return prometheus.GaugeOpts{Namespace: "verdict", Subsystem: "decisions", Name: name, Help: help}
	}
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(opts("stored_messages", "Decisions VERDICT_DECISIONS, the admission log, holds (read from the stream at most every 10s)."),
			func() float64 { return float64(l.state(ctx).Msgs) }),
		prometheus.NewGaugeFunc(opts("stored_bytes", "Bytes VERDICT_DECISIONS holds, against its --decisions-max-bytes."),
			func() float64 { return float64(l.state(ctx).Bytes) }),
		prometheus.NewGaugeFunc(opts("oldest_age_seconds", "Age of the oldest decision VERDICT_DECISIONS holds: how far back the log goes."),
			func() float64 {
				st := l.state(ctx)
				if st.Msgs == 0 || st.FirstTime.IsZero() {
					return 0
				}
				return time.Since(st.FirstTime).Seconds()
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "verdict", Subsystem: "decisions", Name: "removed_total",
			Help: "Decisions VERDICT_DECISIONS' limits (--decisions-max-age, --decisions-max-bytes) removed, the oldest first: all it ever stored less what it holds."},
			func() float64 {
				st := l.state(ctx)
				return float64(st.LastSeq - min(st.Msgs, st.LastSeq))
			}),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// state returns the stream's state, read again (within ctx, the
// service's) when the last read is older than logStateEvery.
func (l *logState) state(ctx context.Context) jetstream.StreamState {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.at) < logStateEvery {
		return l.st
	}
	l.at = time.Now()
	ctx, cancel := context.WithTimeout(ctx, logStateTimeout)
	defer cancel()
	s, err := l.js.conn().JetStream().Stream(ctx, bus.StreamDecisions)
	if err != nil {
		return l.st
	}
	info, err := s.Info(ctx)
	if err != nil {
		return l.st
	}
	l.st = info.State
	return l.st
}
