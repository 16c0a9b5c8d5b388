package queue

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// The benchmarks compare pkg/queue with plain nats.go on the same embedded
// server (loopback TCP, file store), in the same run, with 1 KiB messages
// and a Nats-Msg-Id on every message in both. Commands and figures are in
// BENCHMARKS.md.

const benchPayload = 1024

var benchRun atomic.Int64 // keeps message ids unique across runs

func benchServer(b *testing.B) (*Embedded, *Conn) {
	b.Helper()
	e := runServer(b)
	ctx := context.Background()
	c, err := Connect(ctx, WithURL(e.ClientURL()), WithLogger(zerolog.Nop()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return e, c
}

func plainConn(b *testing.B, e *Embedded, opts ...jetstream.JetStreamOpt) (*nats.Conn, jetstream.JetStream) {
	b.Helper()
	nc, err := nats.Connect(e.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := jetstream.New(nc, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return nc, js
}

func benchStream(b *testing.B, c *Conn, cfg jetstream.StreamConfig) jetstream.Stream {
	b.Helper()
	cfg.Storage = jetstream.FileStorage
	cfg.Duplicates = 2 * time.Minute
	s, err := c.JetStream().CreateOrUpdateStream(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func reportRate(b *testing.B, n int, d time.Duration) {
	b.ReportMetric(float64(n)/d.Seconds(), "msgs/s")
}

// BenchmarkPublishAsync: asynchronous publishing, one op = one message
// published and acknowledged (the timer includes the final flush).
func BenchmarkPublishAsync(b *testing.B) {
	e, c := benchServer(b)
	s := benchStream(b, c, jetstream.StreamConfig{Name: "BENCH_PUB", Subjects: []string{"bench.pub.>"}})
	data := make([]byte, benchPayload)
	subjects := make([]string, 100)
	for i := range subjects {
		subjects[i] = "bench.pub." + strconv.Itoa(i)
	}

	b.Run("impl=queue", func(b *testing.B) {
		_ = s.Purge(context.Background())
		prefix := "q" + strconv.FormatInt(benchRun.Add(1), 10) + "-"
		p, err := c.NewAsyncPublisher(WithBufferSize(b.N+1), WithMessageDeadline(time.Minute))
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(benchPayload)
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			if err := p.Publish(Message{Subject: subjects[i%len(subjects)], ID: prefix + strconv.Itoa(i), Data: data}); err != nil {
				b.Fatal(err)
			}
		}
		if err := p.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		if st := p.Stats(); st.Published != uint64(b.N) {
			b.Fatalf("stats %+v, want %d published", st, b.N)
		}
		reportRate(b, b.N, elapsed)
	})

	b.Run("impl=nats", func(b *testing.B) {
		_ = s.Purge(context.Background())
		prefix := "n" + strconv.FormatInt(benchRun.Add(1), 10) + "-"
		var failed atomic.Int64
		_, js := plainConn(b, e, jetstream.WithPublishAsyncMaxPending(4000),
			jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { failed.Add(1) }))
		b.SetBytes(benchPayload)
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			if _, err := js.PublishAsync(subjects[i%len(subjects)], data, jetstream.WithMsgID(prefix+strconv.Itoa(i))); err != nil {
				b.Fatal(err)
			}
		}
		<-js.PublishAsyncComplete()
		elapsed := time.Since(start)
		b.StopTimer()
		if failed.Load() != 0 {
			b.Fatalf("%d publishes failed", failed.Load())
		}
		reportRate(b, b.N, elapsed)
	})
}

// BenchmarkConsumeAck: a durable pull consumer on a work-queue stream, one
// op = one message received, handled (no work) and acknowledged.
func BenchmarkConsumeAck(b *testing.B) {
	e, c := benchServer(b)
	benchStream(b, c, jetstream.StreamConfig{Name: "BENCH_WORK", Subjects: []string{"bench.work.>"}, Retention: jetstream.WorkQueuePolicy})
	data := make([]byte, benchPayload)
	ctx := context.Background()

	prefill := func(b *testing.B) jetstream.Consumer {
		b.Helper()
		_ = c.JetStream().DeleteConsumer(ctx, "BENCH_WORK", "bench")
		p, err := c.NewAsyncPublisher(WithBufferSize(b.N+1), WithMessageDeadline(time.Minute))
		if err != nil {
			b.Fatal(err)
		}
		prefix := "w" + strconv.FormatInt(benchRun.Add(1), 10) + "-"
		for i := 0; i < b.N; i++ {
			if err := p.Publish(Message{Subject: "bench.work." + strconv.Itoa(i%100), ID: prefix + strconv.Itoa(i), Data: data}); err != nil {
				b.Fatal(err)
			}
		}
		if err := p.Close(ctx); err != nil {
			b.Fatal(err)
		}
		spec := ConsumerSpec{Stream: "BENCH_WORK", Durable: "bench", FilterSubjects: []string{"bench.work.>"}, MaxAckPending: 20000}
		cons, err := c.JetStream().CreateOrUpdateConsumer(ctx, "BENCH_WORK", spec.config(1))
		if err != nil {
			b.Fatal(err)
		}
		return cons
	}

	b.Run("impl=queue", func(b *testing.B) {
		b.StopTimer()
		prefill(b)
		var n atomic.Int64
		done := make(chan struct{})
		target := int64(b.N)
		r, err := c.NewRunner("BENCH_WORK", "bench", func(context.Context, *Msg) Outcome {
			if n.Add(1) == target {
				close(done)
			}
			return Done()
		}, WithConcurrency(4), WithPrefetch(500))
		if err != nil {
			b.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		b.SetBytes(benchPayload)
		b.StartTimer()
		start := time.Now()
		go func() { errc <- r.Run(rctx) }()
		<-done
		elapsed := time.Since(start)
		b.StopTimer()
		cancel()
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
		reportRate(b, b.N, elapsed)
	})

	b.Run("impl=nats", func(b *testing.B) {
		b.StopTimer()
		prefill(b)
		_, js := plainConn(b, e)
		cons, err := js.Consumer(ctx, "BENCH_WORK", "bench")
		if err != nil {
			b.Fatal(err)
		}
		var n, ackErrs atomic.Int64
		done := make(chan struct{})
		target := int64(b.N)
		b.SetBytes(benchPayload)
		b.StartTimer()
		start := time.Now()
		cc, err := cons.Consume(func(m jetstream.Msg) {
			if err := m.Ack(); err != nil {
				ackErrs.Add(1)
			}
			if n.Add(1) == target {
				close(done)
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		<-done
		elapsed := time.Since(start)
		b.StopTimer()
		cc.Stop()
		if ackErrs.Load() != 0 {
			b.Fatalf("%d acks failed", ackErrs.Load())
		}
		reportRate(b, b.N, elapsed)
	})
}

// BenchmarkReplay: the last message of each of 100,000 compacted subjects;
// one op = one full replay.
func BenchmarkReplay(b *testing.B) {
	e, c := benchServer(b)
	if err := c.Provision(context.Background(), WithConsumers()); err != nil {
		b.Fatal(err)
	}
	const subjects = 100000
	latest := publishResults(b, c, subjects/10, 10)
	if len(latest) != subjects {
		b.Fatalf("%d subjects", len(latest))
	}
	ctx := context.Background()

	b.Run("impl=queue", func(b *testing.B) {
		b.SetBytes(0)
		var total time.Duration
		for i := 0; i < b.N; i++ {
			start := time.Now()
			n := 0
			p, err := c.Replay(ctx, StreamResults, func(ReplayMsg) error { n++; return nil })
			total += time.Since(start)
			if err != nil || n != subjects || p.Done != subjects {
				b.Fatalf("replayed %d: %v", n, err)
			}
		}
		reportRate(b, b.N*subjects, total)
	})

	b.Run("impl=nats", func(b *testing.B) {
		_, js := plainConn(b, e)
		var total time.Duration
		for i := 0; i < b.N; i++ {
			start := time.Now()
			cons, err := js.OrderedConsumer(ctx, StreamResults, jetstream.OrderedConsumerConfig{
				FilterSubjects: []string{"verdict.results.>"},
				DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
			})
			if err != nil {
				b.Fatal(err)
			}
			it, err := cons.Messages(jetstream.PullMaxMessages(2000))
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for {
				m, err := it.Next()
				if err != nil {
					b.Fatal(err)
				}
				n++
				meta, err := m.Metadata()
				if err != nil {
					b.Fatal(err)
				}
				if meta.NumPending == 0 {
					break
				}
			}
			it.Stop()
			total += time.Since(start)
			if n != subjects {
				b.Fatalf("replayed %d", n)
			}
		}
		reportRate(b, b.N*subjects, total)
	})
}

var _ = fmt.Sprint
