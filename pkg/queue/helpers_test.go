package queue

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	"github.com/verdict-dev/verdict/pkg/queue/embedded"

	"github.com/rs/zerolog"
)

// testLogger writes warnings and errors to the test log (all levels with
// QUEUE_TEST_DEBUG=1).
func testLogger(t testing.TB) zerolog.Logger {
	lvl := zerolog.WarnLevel
	if os.Getenv("QUEUE_TEST_DEBUG") != "" {
		lvl = zerolog.DebugLevel
	}
	return zerolog.New(zerolog.NewTestWriter(t)).Level(lvl).With().Timestamp().Logger()
}

// runServer starts an embedded server on a free port with a temporary
// store: natstest.Server, under the name this package's tests call.
func runServer(t testing.TB) *embedded.Server {
	t.Helper()
	return natstest.Server(t)
}

// connect connects to the given URLs with fast reconnects.
func connect(t testing.TB, urls ...string) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, WithURL(urls...), WithTopology(testTopology), WithReconnectBackoff(20*time.Millisecond, 250*time.Millisecond),
		WithLogger(testLogger(t)), WithName(t.Name()))
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// testConsumers are defaultConsumers with a short AckWait.
func testConsumers(ackWait time.Duration) []ConsumerSpec {
	specs := defaultConsumers()
	for i := range specs {
		specs[i].AckWait = ackWait
	}
	return specs
}

func provision(t testing.TB, c *Conn, opts ...planOption) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts = append([]planOption{withConsumers(testConsumers(time.Second)...)}, opts...)
	if err := c.Provision(ctx, testPlan(opts...)); err != nil {
		t.Fatalf("Provision: %v", err)
	}
}

func streamMsgs(t testing.TB, c *Conn, stream string) uint64 {
	t.Helper()
	s, err := c.JetStream().Stream(context.Background(), stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatalf("stream info %s: %v", stream, err)
	}
	return info.State.Msgs
}

// deadLetters reads every message of the dead-letter stream.
func deadLetters(t testing.TB, c *Conn) []DeadLetter {
	t.Helper()
	ctx := context.Background()
	s, err := c.JetStream().Stream(ctx, streamDead)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []DeadLetter
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		raw, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		d, err := ParseDeadLetter(raw.Header, raw.Data)
		if err != nil {
			t.Fatalf("dead letter %d: %v", seq, err)
		}
		out = append(out, d)
	}
	return out
}

func workMsg(t testing.TB, kind WorkKind, key string) Message {
	t.Helper()
	subj, err := workSubject(kind, key)
	if err != nil {
		t.Fatal(err)
	}
	return Message{Subject: subj, ID: MsgID(string(kind), key), Data: []byte(key)}
}
