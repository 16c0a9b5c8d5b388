package app

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/internal/reports/reportserver"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// denialsRetry is the wait before a failed follow of the admission log
// starts again.
const denialsRetry = 5 * time.Second

// followDenials keeps x, the denials the serving mode serves, up to date
// with the admission log: the denials of x's window, then each new one,
// until ctx ends. A follow that fails (VERDICT_DECISIONS not provisioned
// yet, NATS away) starts again after a wait; what x holds stays served
// meanwhile, and a denial read twice is kept once. A message that is not
// a decision is logged and skipped.
func followDenials(conn func() *queue.Conn, x *reportserver.Denials, log zerolog.Logger) func(context.Context) error {
	return func(ctx context.Context) error {
		for {
			err := conn().Follow(ctx, bus.StreamDecisions, func(m queue.ReplayMsg) error {
				d, err := bus.DecodeDecision(m.Subject, m.Data)
				if err != nil {
					log.Warn().Err(err).Uint64(logkey.StreamSeq, m.Sequence).Msg("admission log message skipped")
					return nil
				}
				x.Add(d, m.Sequence)
				return nil
			}, queue.WithFollowSince(time.Now().Add(-x.Window())), queue.WithFollowFilter(bus.DecisionsFilter("", bus.DecisionDenied)))
			if ctx.Err() != nil {
				return nil
			}
			log.Warn().Err(err).Dur(logkey.Delay, denialsRetry).Msg("admission log not followed; following again")
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(denialsRetry):
			}
		}
	}
}
