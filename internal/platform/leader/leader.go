// Package leader runs work while this replica holds a Lease (client-go
// leader election). Verdict uses it only for the webhook registrar and the
// certificate renewer; both are safe if two leaders briefly overlap.
package leader

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/verdict-dev/verdict/internal/platform/logkey"
)

// ErrInvalidConfig wraps configuration errors.
var ErrInvalidConfig = errors.New("invalid leader election config")

// Config names the Lease and its timing.
type Config struct {
	Namespace string
	Name      string
	// Identity is this replica's name (the pod name).
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// WithDefaults fills the timing with client-go's usual values.
func (c Config) WithDefaults() Config {
	if c.LeaseDuration == 0 {
		c.LeaseDuration = 15 * time.Second
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = 10 * time.Second
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = 2 * time.Second
	}
	return c
}

// Validate checks the config.
func (c Config) Validate() error {
	switch {
	case c.Namespace == "" || c.Name == "" || c.Identity == "":
		return fmt.Errorf("%w: namespace, name and identity are required", ErrInvalidConfig)
	case c.RenewDeadline >= c.LeaseDuration:
		return fmt.Errorf("%w: renew deadline %s must be shorter than the lease %s", ErrInvalidConfig, c.RenewDeadline, c.LeaseDuration)
	case c.RetryPeriod >= c.RenewDeadline:
		return fmt.Errorf("%w: retry period %s must be shorter than the renew deadline %s", ErrInvalidConfig, c.RetryPeriod, c.RenewDeadline)
	}
	return nil
}

// Run calls work with a context that lives while this replica leads, and
// campaigns again whenever leadership is lost, until ctx ends. The Lease
// is released on exit so another replica takes over at once, not when the
// lease runs out. Run returns only once the Lease is released and work
// has returned: a process that waits for Run exits neither before the
// release (the next leader would wait the whole lease) nor while work
// still writes.
func Run(ctx context.Context, client kubernetes.Interface, cfg Config, work func(ctx context.Context)) error {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := zerolog.Ctx(ctx).With().Str(logkey.Lease, cfg.Namespace+"/"+cfg.Name).Str(logkey.Identity, cfg.Identity).Logger()
	lock := &heldLock{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}}
	for ctx.Err() == nil {
		// client-go starts work on a goroutine of its own once the Lease
		// is taken, and its Run may return before that goroutine ends (or
		// even starts): done closes when work returns, and is waited for
		// whenever this term took the Lease.
		done := make(chan struct{})
		lock.held.Store(false)
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:          lock,
			LeaseDuration: cfg.LeaseDuration,
			RenewDeadline: cfg.RenewDeadline,
			RetryPeriod:   cfg.RetryPeriod,
			// Released below, once work has returned: client-go's own
			// release comes before, while work may still be writing.
			ReleaseOnCancel: false,
			Name:            cfg.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					defer close(done)
					log.Info().Msg("leading")
					work(log.WithContext(lctx))
				},
				OnStoppedLeading: func() {
					log.Info().Msg("stopped leading")
				},
				OnNewLeader: func(id string) {
					if id != cfg.Identity {
						log.Info().Str(logkey.Leader, id).Msg("new leader")
					}
				},
			},
		})
		if err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
		le.Run(ctx)
		if lock.held.Load() {
			<-done
			if ctx.Err() != nil {
				release(ctx, lock, cfg.RenewDeadline, log)
			}
		}
	}
	return nil
}

// release gives the Lease up, if this replica still holds it, as
// client-go's ReleaseOnCancel does: a record with no holder that expires
// in a second, so the next candidate takes it at its next retry.
func release(ctx context.Context, lock *heldLock, timeout time.Duration, log zerolog.Logger) {
	// ctx has ended (that is why the Lease goes): the release has its own
	// bound.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	old, _, err := lock.Get(ctx)
	if err != nil {
		log.Warn().Err(err).Msg("lease not released: the next leader waits for it to expire")
		return
	}
	if old.HolderIdentity != lock.Identity() {
		return
	}
	now := metav1.Now()
	rec := resourcelock.LeaderElectionRecord{LeaderTransitions: old.LeaderTransitions, LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now}
	if err := lock.Interface.Update(ctx, rec); err != nil {
		log.Warn().Err(err).Msg("lease not released: the next leader waits for it to expire")
		return
	}
	log.Info().Msg("lease released")
}

// heldLock records whether this replica took the Lease in a term: a
// write of the record naming it as holder succeeded. client-go starts the
// work exactly when its first such write succeeds.
type heldLock struct {
	resourcelock.Interface
	held atomic.Bool
}

func (l *heldLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, r)
	l.record(r, err)
	return err
}

func (l *heldLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, r)
	l.record(r, err)
	return err
}

func (l *heldLock) record(r resourcelock.LeaderElectionRecord, err error) {
	if err == nil && r.HolderIdentity == l.Identity() {
		l.held.Store(true)
	}
}
