package reporter

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/apicheck"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// recheckWorkers is how many remembered results one projector checks at
// once (each check is a read from the stream and, unless the checker
// remembers the answer, a GET). Few: under a flood the first checks of
// new results, which the consumer waits on, share the API server with
// them (8 made a verified result wait about half a second longer behind
// 5,000 forged ones than 2 did).
const recheckWorkers = 2

// recheckLoop checks the results remembered by hold when they are due,
// until ctx ends (the ones left are counted by abandonRechecks).
func (p *Projector) recheckLoop(ctx context.Context) {
	work := make(chan recheck)
	var wg sync.WaitGroup
	for range recheckWorkers {
		wg.Go(func() {
			for r := range work {
				p.recheck(ctx, r)
			}
		})
	}
	defer func() {
		close(work)
		wg.Wait()
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		r, ok, wait := p.held.next(time.Now())
		if ok {
			select {
			case work <- r:
				continue
			case <-ctx.Done():
				p.again(r)
				return
			}
		}
		if wait < 0 {
			wait = time.Hour
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-p.recheckKick: // Reset needs no drain (Go 1.23 timers)
		case <-ctx.Done():
			return
		}
	}
}

// abandonRechecks counts the results still remembered at shutdown as
// given up (PendingShutdown): they stay in the stream, where the next
// fold of their resource picks them up.
func (p *Projector) abandonRechecks() {
	if n := p.held.forget(); n > 0 {
		p.m.pendingDropped.WithLabelValues(PendingShutdown).Add(float64(n))
		p.log.Info().Int(logkey.Results, n).Str(logkey.Reason, PendingShutdown).Msg("pendingRechecksAbandoned")
	}
	p.gaugePending()
}

// recheck reads a remembered result from the stream and checks it again:
// verified, its resource's report is written (the fold reads the result
// from the stream); rejected, it is deleted and counted as a held one;
// still pending, it is remembered for its final recheck, when the grace
// period is over.
func (p *Projector) recheck(ctx context.Context, r recheck) {
	defer p.gaugePending()
	msg, err := p.conn.MsgAt(ctx, bus.StreamResults, r.seq)
	switch {
	case errors.Is(err, queue.ErrNoMessage):
		return // deleted meanwhile (another replica rejected it, or its resource is gone): decided
	case err != nil:
		p.recheckFailed(r, err)
		return
	}
	evs, err := bus.DecodeResults(msg.Subject, msg.Data)
	if err != nil {
		p.m.undecodable.Inc()
		p.droppedPending(PendingFailed, r.seq)
		return
	}
	ev := evs[0] // one resource at one version (a held message is no copy)
	st, err := p.o.check.Check(ctx, ev.Resource, msg.Published)
	switch {
	case errors.Is(err, apicheck.ErrForbidden):
		p.unreadable(msg.Subject, msg.Sequence, ev, err)
		return
	case err != nil:
		p.recheckFailed(r, err)
		return
	case st == apicheck.Pending:
		r.checked = true
		r.due = msg.Published.Add(p.o.check.Grace() + 100*time.Millisecond)
		p.again(r)
		return
	case st.Rejected():
		if err := p.dropRejected(ctx, msg.Subject, msg.Sequence, ev, st); err != nil {
			p.recheckFailed(r, err)
		}
		return
	}
	e := p.mark(ev.Resource, false)
	<-e.done // the flusher outlives the recheck loop
	if e.err != nil {
		if errors.Is(e.err, ErrRejected) {
			r.failures = p.o.maxDeliver
		}
		p.recheckFailed(r, e.err)
		return
	}
	p.m.recovered.Inc()
	p.log.Debug().Str(logkey.Subject, msg.Subject).Uint64(logkey.StreamSeq, msg.Sequence).Str(logkey.ResourceUID, ev.Resource.UID).Msg("resultRecovered")
}

// recheckFailed remembers r again with backoff, or gives it up
// (PendingFailed) after the projector's attempts.
func (p *Projector) recheckFailed(r recheck, err error) {
	r.failures++
	if r.failures >= p.o.maxDeliver {
		p.m.pendingDropped.WithLabelValues(PendingFailed).Inc()
		p.log.Warn().Err(err).Uint64(logkey.StreamSeq, r.seq).Str(logkey.Reason, PendingFailed).Msg("resultPendingDropped")
		return
	}
	r.due = time.Now().Add(min(p.o.retryMin<<(r.failures-1), p.o.retryMax))
	p.again(r)
}

// again remembers r again (it was taken off the list).
func (p *Projector) again(r recheck) {
	_, dropped := p.held.remember(r)
	p.droppedPending(PendingFull, dropped...)
}
