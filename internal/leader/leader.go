// Package leader runs work while this replica holds a Lease (client-go
// leader election). Verdict uses it only for the webhook registrar and the
// certificate renewer; both are safe if two leaders briefly overlap.
package leader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
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
// is released on exit so another replica takes over at once.
func Run(ctx context.Context, client kubernetes.Interface, cfg Config, work func(ctx context.Context)) error {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := zerolog.Ctx(ctx).With().Str(logKeyLease, cfg.Namespace+"/"+cfg.Name).Str(logKeyIdentity, cfg.Identity).Logger()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   cfg.LeaseDuration,
			RenewDeadline:   cfg.RenewDeadline,
			RetryPeriod:     cfg.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            cfg.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					log.Info().Msg("leading")
					work(log.WithContext(lctx))
				},
				OnStoppedLeading: func() {
					log.Info().Msg("stopped leading")
				},
				OnNewLeader: func(id string) {
					if id != cfg.Identity {
						log.Info().Str(logKeyLeader, id).Msg("new leader")
					}
				},
			},
		})
		if err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
		le.Run(ctx)
	}
	return nil
}

const (
	logKeyLease    = "lease"
	logKeyIdentity = "identity"
	logKeyLeader   = "leader"
)
