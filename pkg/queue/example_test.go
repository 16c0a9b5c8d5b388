package queue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/verdict-dev/verdict/pkg/queue"
	"github.com/verdict-dev/verdict/pkg/queue/embedded"
)

// An application's work queue: it names its streams once (a Topology),
// provisions them, publishes work with deterministic ids, and runs a
// handler whose outcome the runner carries out: done work is acknowledged,
// a poison message goes to the dead-letter stream with its reason, where
// an operator lists it.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "queue-example")
	if err != nil {
		panic(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	srv, err := embedded.Run(ctx, embedded.Config{StoreDir: dir, InProcessOnly: true})
	if err != nil {
		panic(err)
	}
	defer srv.Shutdown()

	topo := queue.Topology{
		Root:       "shop.",
		WorkStream: "SHOP_WORK", WorkPrefix: "shop.work.",
		DeadStream: "SHOP_DEAD", DeadPrefix: "shop.dead.",
		Kinds: []queue.WorkKind{"email"},
	}
	conn, err := queue.Connect(ctx, queue.WithEmbedded(srv), queue.WithTopology(topo))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	err = conn.Provision(ctx, queue.Plan{
		Streams: []jetstream.StreamConfig{
			{Name: topo.WorkStream, Subjects: []string{topo.WorkPrefix + ">"}, Retention: jetstream.WorkQueuePolicy},
			{Name: topo.DeadStream, Subjects: []string{topo.DeadPrefix + ">"}},
		},
		Consumers: []queue.ConsumerSpec{{Stream: topo.WorkStream, Durable: "mailer", FilterSubjects: []string{topo.WorkFilter("email")}}},
	})
	if err != nil {
		panic(err)
	}

	for _, to := range []string{"alice@example.com", "nobody"} {
		subject, err := topo.WorkSubject("email", to)
		if err != nil {
			panic(err)
		}
		// The id makes a retried publish of the same work one message.
		if _, err := conn.PublishSync(ctx, queue.Message{Subject: subject, ID: queue.MsgID("email", to), Data: []byte(to)}); err != nil {
			panic(err)
		}
	}

	handled := make(chan string, 2)
	runner, err := conn.NewRunner(topo.WorkStream, "mailer", func(_ context.Context, m *queue.Msg) queue.Outcome {
		defer func() { handled <- string(m.Data) }()
		if string(m.Data) == "nobody" {
			return queue.Poison("no such address") // retrying cannot help
		}
		return queue.Done()
	}, queue.WithConcurrency(1))
	if err != nil {
		panic(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- runner.Run(rctx) }()
	fmt.Println("handled", <-handled)
	fmt.Println("handled", <-handled)

	var dead []queue.DeadEntry
	for len(dead) == 0 && ctx.Err() == nil {
		if dead, _, err = conn.ListDead(ctx); err != nil {
			panic(err)
		}
		time.Sleep(10 * time.Millisecond) // the dead letter is written after the handler returns
	}
	for _, d := range dead {
		fmt.Printf("dead: %s %q: %s\n", d.Kind, d.Key, d.Reason)
	}
	stop()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		panic(err)
	}
	// Output:
	// handled alice@example.com
	// handled nobody
	// dead: email "nobody": poison: no such address
}
