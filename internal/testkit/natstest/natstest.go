// Package natstest starts the embedded nats-server of the queue's and the
// services' tests: one server with JetStream on, its store in the test's
// temporary folder, or a cluster of them, each stopped when the test
// ends. It imports only pkg/queue/embedded, so pkg/queue's own tests
// (package queue) use it too without an import cycle.
package natstest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/verdict-dev/verdict/pkg/queue/embedded"
)

// startTimeout bounds the start of a server and the election of a
// cluster's meta leader.
const startTimeout = 60 * time.Second

// Option changes the configuration of the server Server starts.
type Option func(*embedded.Config)

// WithNKeyUsers lets in only the users with these public NKeys (NKeyUser;
// clients authenticate with the seed file: queue.WithNKeyFile).
func WithNKeyUsers(public ...string) Option {
	return func(c *embedded.Config) { c.NKeyUsers = append(c.NKeyUsers, public...) }
}

// InProcessOnly opens no port: clients connect in process
// (queue.WithEmbedded), as in the single-process demo.
func InProcessOnly() Option {
	return func(c *embedded.Config) { c.InProcessOnly = true }
}

// WithPort listens for clients on port (testkit.FreePort) rather than on
// one the server picks: for a client configured before the server
// starts, or a server started again on the same URL.
func WithPort(port int) Option {
	return func(c *embedded.Config) { c.Port = port }
}

// WithStoreDir keeps JetStream's store in dir rather than in a temporary
// folder of its own: for a server stopped and started again on the same
// store.
func WithStoreDir(dir string) Option {
	return func(c *embedded.Config) { c.StoreDir = dir }
}

// Server starts an embedded nats-server with JetStream on loopback, on a
// free port, its store in t.TempDir(), and shuts it down when the test
// ends. It fails t if the server does not start.
func Server(t testing.TB, opts ...Option) *embedded.Server {
	t.Helper()
	cfg := embedded.Config{}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.StoreDir == "" {
		cfg.StoreDir = t.TempDir()
	}
	s, err := start(t, cfg)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return s
}

// Restart shuts s down if it still runs and starts it again on the same
// port and store, shut down when the test ends. It returns the error
// rather than failing t, so that a test may restart the server from a
// goroutine of its own while it publishes.
func Restart(t testing.TB, s *embedded.Server) (*embedded.Server, error) {
	s.Shutdown()
	return start(t, s.Config())
}

func start(t testing.TB, cfg embedded.Config) (*embedded.Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	s, err := embedded.Run(ctx, cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(s.Shutdown)
	return s, nil
}

// Cluster starts n embedded servers clustered on loopback (named
// verdict-0 to verdict-<n-1>, stores under t.TempDir()) and waits until
// JetStream has a meta leader: for tests of replicated streams and of a
// server that stops. Those still running are shut down when the test
// ends. It fails t if the cluster does not form.
func Cluster(t testing.TB, n int) []*embedded.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	servers, err := embedded.RunCluster(ctx, n, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("natstest: cluster of %d: %v", n, err)
	}
	t.Cleanup(func() {
		for _, s := range servers {
			if s.Server().Running() {
				s.Shutdown()
			}
		}
	})
	return servers
}

// URLs are the client URLs of servers, for a client of the whole cluster.
func URLs(servers []*embedded.Server) []string {
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = s.ClientURL()
	}
	return urls
}

// NKeyUser makes a new NKey user: the file of its seed, in a temporary
// folder of the test (a client's or a service's NKey file), and its
// public key (WithNKeyUsers).
func NKeyUser(t testing.TB) (seedFile, public string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	if public, err = kp.PublicKey(); err != nil {
		t.Fatal(err)
	}
	seedFile = filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return seedFile, public
}
