package queue

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
)

// A service that must serve whatever NATS is doing connects in the
// background: Connect returns at once with no server, a publisher takes
// messages meanwhile, and everything is stored once a server comes up.
func TestBackgroundConnect(t *testing.T) {
	// A free port with nothing listening on it yet.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	c, err := Connect(ctx, WithURL(url), WithBackgroundConnect(), WithReconnectBackoff(20*time.Millisecond, 200*time.Millisecond),
		WithLogger(testLogger(t)), WithName(t.Name()))
	if err != nil {
		t.Fatalf("Connect with no server: %v", err)
	}
	t.Cleanup(c.Close)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Connect with WithBackgroundConnect took %s", took)
	}
	if c.Connected() {
		t.Fatal("connected with no server")
	}
	// Without it, Connect fails when its context ends.
	sctx, scancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = Connect(sctx, WithURL(url), WithLogger(testLogger(t)))
	scancel()
	if err == nil {
		t.Fatal("Connect without a server succeeded")
	}

	p, err := c.NewAsyncPublisher(WithMessageDeadline(20 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := p.Publish(workMsg(t, workScan, fmt.Sprintf("early-%d", i))); err != nil {
			t.Fatalf("publish before NATS is up: %v", err)
		}
	}

	natstest.Server(t, natstest.WithPort(port))
	testkit.EventuallyTrue(t, 10*time.Second, "the background connection", c.Connected)
	provision(t, c)
	fctx, fcancel := context.WithTimeout(ctx, 20*time.Second)
	defer fcancel()
	if err := p.Flush(fctx); err != nil {
		t.Fatalf("flush: %v (stats %+v)", err, p.Stats())
	}
	if n := streamMsgs(t, c, streamWork); n != 10 {
		t.Fatalf("WORK holds %d messages, want 10", n)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// Connect to a server that is not there fails when the context ends,
// with ErrNotConnected and the reason of the last attempt (the client
// itself forgets it between attempts).
func TestConnectSaysWhy(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + l.Addr().String()
	_ = l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = Connect(ctx, WithURL(url), WithReconnectBackoff(20*time.Millisecond, 50*time.Millisecond), WithLogger(testLogger(t)))
	if !errors.Is(err, ErrNotConnected) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Connect to nothing: %v; want ErrNotConnected, the deadline and the refused connection", err)
	}
}
