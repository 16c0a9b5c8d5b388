package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/verdict-dev/verdict/internal/testkit"
)

// A server takes clients on its URL; restarted, on the same URL with the
// same store; with NKey users, only them.
func TestServer(t *testing.T) {
	port := testkit.FreePort(t)
	s := Server(t, WithPort(port))
	if s.Config().Port != port || s.ClientURL() == "" {
		t.Fatalf("port %d, URL %q; want port %d", s.Config().Port, s.ClientURL(), port)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	js := jetStream(t, s.ClientURL())
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "KEPT", Subjects: []string{"kept"}}); err != nil {
		t.Fatal(err)
	}
	s2, err := Restart(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if s2.ClientURL() != s.ClientURL() {
		t.Fatalf("restarted on %s, was %s", s2.ClientURL(), s.ClientURL())
	}
	if _, err := jetStream(t, s2.ClientURL()).Stream(ctx, "KEPT"); err != nil {
		t.Fatalf("the stream after the restart: %v", err)
	}

	if u := Server(t, InProcessOnly()).ClientURL(); u != "" {
		t.Fatalf("in-process server has URL %q", u)
	}

	seedFile, public := NKeyUser(t)
	locked := Server(t, WithNKeyUsers(public))
	if nc, err := nats.Connect(locked.ClientURL(), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("an anonymous client connected to a server with NKey users")
	}
	auth, err := nats.NkeyOptionFromSeed(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(locked.ClientURL(), auth, nats.NoReconnect())
	if err != nil {
		t.Fatalf("the NKey user: %v", err)
	}
	nc.Close()
}

// A cluster elects a meta leader: a stream at three replicas is created
// through any member.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	servers := Cluster(t, 3)
	urls := URLs(servers)
	if len(urls) != 3 {
		t.Fatalf("%d URLs", len(urls))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	js := jetStream(t, urls[2])
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
}

func jetStream(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
