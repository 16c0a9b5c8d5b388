package testproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/verdict-dev/verdict/internal/testkit"
)

// NATSModule is the main package of nats-server, built from the version
// go.mod requires (the one pkg/queue/embedded links), so a process
// cluster runs the same server as the embedded one.
const NATSModule = "github.com/nats-io/nats-server/v2"

// NATSServer is one nats-server process of a cluster started by
// StartNATSCluster: a real process, so a test can SIGKILL it (what
// embedded.Server's Shutdown cannot do) and start it again on the same
// ports and store.
type NATSServer struct {
	// Name is the server's name (verdict-<i>), as JetStream's stream
	// info names a leader.
	Name string
	// ClientURL is nats://127.0.0.1:<port>.
	ClientURL string
	// Proc is the running process (the latest, after Restart).
	Proc *Proc

	t        testing.TB
	spec     Spec
	restarts int
}

// StartNATSCluster starts n nats-server processes (bin, built from
// NATSModule) clustered on loopback, JetStream on file storage under
// dir/<name>, and waits until JetStream answers through every server (a
// meta leader is elected). The processes are killed when the test ends.
func StartNATSCluster(t testing.TB, bin string, n int, dir string) []*NATSServer {
	t.Helper()
	client := make([]string, n)
	routes := make([]string, n)
	for i := range n {
		client[i] = testkit.FreeAddr(t)
		routes[i] = "nats://" + testkit.FreeAddr(t)
	}
	servers := make([]*NATSServer, n)
	for i := range n {
		name := "verdict-" + strconv.Itoa(i)
		host, port, _ := net.SplitHostPort(client[i])
		s := &NATSServer{Name: name, ClientURL: "nats://" + client[i], t: t}
		s.spec = Spec{
			Name: "nats-" + name,
			Path: bin,
			Args: []string{
				"--name", name, "--addr", host, "--port", port,
				"--jetstream", "--store_dir", filepath.Join(dir, name),
				"--cluster_name", "verdict", "--cluster", routes[i], "--routes", strings.Join(routes, ","),
			},
			LogDir: dir,
			Ready:  "Server is ready",
		}
		s.Proc = StartForTest(t, s.spec, false)
		servers[i] = s
	}
	for _, s := range servers {
		s.waitReady()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, s := range servers {
		if err := s.waitJetStream(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return servers
}

// Kill ends the server with SIGKILL.
func (s *NATSServer) Kill() {
	s.t.Helper()
	if sigkilled, err := s.Proc.Kill(); err != nil || !sigkilled {
		s.t.Fatalf("kill %s: SIGKILL %v, %v", s.Name, sigkilled, err)
	}
}

// Restart starts the server again with the same ports and store (its
// log in a new file) and waits until JetStream answers through it.
func (s *NATSServer) Restart(ctx context.Context) {
	s.t.Helper()
	s.restarts++
	spec := s.spec
	spec.Name = fmt.Sprintf("%s-restart-%d", s.spec.Name, s.restarts)
	s.Proc = StartForTest(s.t, spec, false)
	s.waitReady()
	if err := s.waitJetStream(ctx); err != nil {
		s.t.Fatal(err)
	}
}

// RestartAll starts every server of a cluster that lost them all again
// (each must be gone), with its ports and store, and waits until
// JetStream answers through each: one alone could not, with no quorum to
// elect a leader.
func RestartAll(ctx context.Context, servers []*NATSServer) {
	for _, s := range servers {
		s.restarts++
		spec := s.spec
		spec.Name = fmt.Sprintf("%s-restart-%d", s.spec.Name, s.restarts)
		s.Proc = StartForTest(s.t, spec, false)
	}
	for _, s := range servers {
		s.waitReady()
	}
	for _, s := range servers {
		if err := s.waitJetStream(ctx); err != nil {
			s.t.Fatal(err)
		}
	}
}

func (s *NATSServer) waitReady() {
	s.t.Helper()
	select {
	case <-s.Proc.Ready():
	case <-s.Proc.Exited():
		s.t.Fatalf("%s exited: %v\n%s", s.Name, s.Proc.State(), s.Proc.Tail(30))
	case <-time.After(30 * time.Second):
		s.t.Fatalf("%s not ready after 30s\n%s", s.Name, s.Proc.Tail(30))
	}
}

// waitJetStream waits until a client of this server alone gets an answer
// from JetStream's API: the server is routed to the cluster and knows its
// meta leader.
func (s *NATSServer) waitJetStream(ctx context.Context) error {
	var last error
	for {
		last = func() error {
			nc, err := nats.Connect(s.ClientURL, nats.NoReconnect(), nats.Timeout(time.Second))
			if err != nil {
				return err
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			actx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err = js.AccountInfo(actx)
			return err
		}()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: JetStream not answering: %w (%w)", s.Name, last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// StreamLeader is the server leading stream (found through js, a client
// of the cluster), waiting up to a minute while the stream has no leader.
func StreamLeader(ctx context.Context, js jetstream.JetStream, servers []*NATSServer, stream string) (*NATSServer, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		info, err := streamInfo(ctx, js, stream)
		if err == nil {
			if info.Cluster != nil && info.Cluster.Leader != "" {
				for _, s := range servers {
					if s.Name == info.Cluster.Leader {
						return s, nil
					}
				}
				return nil, fmt.Errorf("%s is led by %q, not a server of this cluster", stream, info.Cluster.Leader)
			}
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(fmt.Errorf("no leader for %s", stream), err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// StreamCurrent waits until every replica of stream is current (no
// replica lagging or offline): after a restart, the restarted server has
// caught up.
func StreamCurrent(ctx context.Context, js jetstream.JetStream, stream string, replicas int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		info, err := streamInfo(ctx, js, stream)
		if err == nil {
			if info.Cluster != nil && info.Cluster.Leader != "" && len(info.Cluster.Replicas) == replicas-1 {
				current := true
				for _, r := range info.Cluster.Replicas {
					if !r.Current || r.Offline {
						current = false
					}
				}
				if current {
					return nil
				}
				err = fmt.Errorf("replicas %+v", info.Cluster.Replicas)
			}
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("%s not current on all %d servers", stream, replicas), err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// streamInfo asks for the stream's info with a short timeout of its own:
// while the stream has no leader, nobody answers.
func streamInfo(ctx context.Context, js jetstream.JetStream, stream string) (*jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	return st.CachedInfo(), nil
}
