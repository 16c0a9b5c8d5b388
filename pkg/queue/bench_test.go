package queue

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/pkg/queue/embedded"

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

func benchServer(b *testing.B) (*embedded.Server, *Conn) {
	b.Helper()
	e := runServer(b)
	ctx := context.Background()
	c, err := Connect(ctx, WithURL(e.ClientURL()), WithTopology(testTopology), WithLogger(zerolog.Nop()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return e, c
}

func plainConn(b *testing.B, e *embedded.Server, opts ...jetstream.JetStreamOpt) (*nats.Conn, jetstream.JetStream) {
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

	// impl=queue publishes one message at a time; impl=queue-batch22
	// hands the publisher 22 at a time, as the webhook does with an
	// admission's results (one per Pod Security policy of the benchmark).
	for _, batch := range []int{1, 22} {
		name := "impl=queue"
		if batch > 1 {
			name += "-batch" + strconv.Itoa(batch)
		}
		b.Run(name, func(b *testing.B) {
			_ = s.Purge(context.Background())
			prefix := "q" + strconv.FormatInt(benchRun.Add(1), 10) + "-"
			p, err := c.NewAsyncPublisher(WithBufferSize(b.N+1), WithMessageDeadline(time.Minute))
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(benchPayload)
			b.ResetTimer()
			start := time.Now()
			ms := make([]Message, 0, batch)
			for i := 0; i < b.N; i++ {
				ms = append(ms, Message{Subject: subjects[i%len(subjects)], ID: prefix + strconv.Itoa(i), Data: data})
				if len(ms) < batch && i < b.N-1 {
					continue
				}
				if err := p.PublishAll(ms); err != nil {
					b.Fatal(err)
				}
				ms = ms[:0]
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
	}

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
		}, WithConcurrency(benchConcurrency), WithPrefetch(500))
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
	if err := c.Provision(context.Background(), testPlan(withConsumers())); err != nil {
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
			p, err := c.Replay(ctx, streamResults, func(ReplayMsg) error { n++; return nil })
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
			cons, err := js.OrderedConsumer(ctx, streamResults, jetstream.OrderedConsumerConfig{
				FilterSubjects: []string{"app.results.>"},
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

// benchConcurrency is the runner's handler count in BenchmarkConsumeAck
// (QUEUE_BENCH_CONCURRENCY overrides it).
var benchConcurrency = func() int {
	if n, err := strconv.Atoi(os.Getenv("QUEUE_BENCH_CONCURRENCY")); err == nil && n > 0 {
		return n
	}
	return 4
}()

// The interleaved benchmarks alternate the two implementations in rounds
// within one benchmark, so both see the same machine load (the machines
// are shared and noisy); they report each rate and their ratio. One op =
// one message through each implementation.
const benchRounds = 10

func BenchmarkInterleavedPublishAsync(b *testing.B) {
	e, c := benchServer(b)
	s := benchStream(b, c, jetstream.StreamConfig{Name: "BENCH_PUB", Subjects: []string{"bench.pub.>"}})
	data := make([]byte, benchPayload)
	subjects := make([]string, 100)
	for i := range subjects {
		subjects[i] = "bench.pub." + strconv.Itoa(i)
	}
	p, err := c.NewAsyncPublisher(WithBufferSize(b.N+1), WithMessageDeadline(time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = p.Close(context.Background()) }()
	var failed atomic.Int64
	_, js := plainConn(b, e, jetstream.WithPublishAsyncMaxPending(4000),
		jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { failed.Add(1) }))
	per := max(1, b.N/benchRounds)
	var tq, tn time.Duration
	run := strconv.FormatInt(benchRun.Add(1), 10)
	b.ResetTimer()
	for round := range benchRounds {
		_ = s.Purge(context.Background())
		prefix := run + "-" + strconv.Itoa(round) + "-"
		start := time.Now()
		for i := range per {
			if err := p.Publish(Message{Subject: subjects[i%len(subjects)], ID: "q" + prefix + strconv.Itoa(i), Data: data}); err != nil {
				b.Fatal(err)
			}
		}
		if err := p.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		tq += time.Since(start)
		start = time.Now()
		for i := range per {
			if _, err := js.PublishAsync(subjects[i%len(subjects)], data, jetstream.WithMsgID("n"+prefix+strconv.Itoa(i))); err != nil {
				b.Fatal(err)
			}
		}
		<-js.PublishAsyncComplete()
		tn += time.Since(start)
	}
	b.StopTimer()
	if st := p.Stats(); failed.Load() != 0 || st.Dropped != 0 {
		b.Fatalf("queue stats %+v, nats failures %d", st, failed.Load())
	}
	reportPair(b, per*benchRounds, tq, tn)
}

func reportPair(b *testing.B, n int, tq, tn time.Duration) {
	q, p := float64(n)/tq.Seconds(), float64(n)/tn.Seconds()
	b.ReportMetric(q, "queue-msgs/s")
	b.ReportMetric(p, "nats-msgs/s")
	b.ReportMetric(q/p, "queue/nats")
}

func BenchmarkInterleavedConsumeAck(b *testing.B) {
	e, c := benchServer(b)
	benchStream(b, c, jetstream.StreamConfig{Name: "BENCH_WORK", Subjects: []string{"bench.work.>"}, Retention: jetstream.WorkQueuePolicy})
	ctx := context.Background()
	data := make([]byte, benchPayload)
	for _, d := range []string{"q", "n"} {
		spec := ConsumerSpec{Stream: "BENCH_WORK", Durable: "bench" + d, FilterSubjects: []string{"bench.work." + d + ".>"}, MaxAckPending: 20000}
		if _, err := c.JetStream().CreateOrUpdateConsumer(ctx, "BENCH_WORK", spec.config(1)); err != nil {
			b.Fatal(err)
		}
	}
	_, js := plainConn(b, e)
	plainCons, err := js.Consumer(ctx, "BENCH_WORK", "benchn")
	if err != nil {
		b.Fatal(err)
	}
	per := max(1, b.N/benchRounds)
	run := strconv.FormatInt(benchRun.Add(1), 10)
	fill := func(d string, round int) {
		p, err := c.NewAsyncPublisher(WithBufferSize(per+1), WithMessageDeadline(time.Minute))
		if err != nil {
			b.Fatal(err)
		}
		for i := range per {
			id := d + run + "-" + strconv.Itoa(round) + "-" + strconv.Itoa(i)
			if err := p.Publish(Message{Subject: "bench.work." + d + "." + strconv.Itoa(i%100), ID: id, Data: data}); err != nil {
				b.Fatal(err)
			}
		}
		if err := p.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
	var tq, tn time.Duration
	b.ResetTimer()
	for round := range benchRounds {
		b.StopTimer()
		fill("q", round)
		fill("n", round)
		b.StartTimer()

		var n atomic.Int64
		done := make(chan struct{})
		r, err := c.NewRunner("BENCH_WORK", "benchq", func(context.Context, *Msg) Outcome {
			if n.Add(1) == int64(per) {
				close(done)
			}
			return Done()
		}, WithConcurrency(benchConcurrency), WithPrefetch(500))
		if err != nil {
			b.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		start := time.Now()
		go func() { errc <- r.Run(rctx) }()
		<-done
		tq += time.Since(start)
		cancel()
		if err := <-errc; err != nil {
			b.Fatal(err)
		}

		var m atomic.Int64
		pdone := make(chan struct{})
		start = time.Now()
		cc, err := plainCons.Consume(func(msg jetstream.Msg) {
			if err := msg.Ack(); err != nil {
				b.Error(err)
			}
			if m.Add(1) == int64(per) {
				close(pdone)
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		<-pdone
		tn += time.Since(start)
		cc.Stop()
	}
	b.StopTimer()
	reportPair(b, per*benchRounds, tq, tn)
}
