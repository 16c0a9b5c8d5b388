package app_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/kubeutil"
	reporterapp "github.com/verdict-dev/verdict/internal/reports/app"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/testproc"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// The environment of a reporter child: TestMain runs reporterChild instead
// of the tests when envChild is set. envKillSeed repeats a run of
// TestE2EKillReplicas (its seed is logged).
const (
	envChild           = "VERDICT_REPORTER_CHILD"
	envChildKubeconfig = "VERDICT_REPORTER_CHILD_KUBECONFIG"
	envChildNATS       = "VERDICT_REPORTER_CHILD_NATS"
	envKillSeed        = "VERDICT_REPORTER_KILL_SEED"
)

// Shape of the kill test.
const (
	killReplicas = 3
	// killAckWait is the reporter consumer's AckWait: how long a killed
	// replica's messages wait to be delivered again. It stays above the
	// projector's in-progress interval (5s) so that a message waiting for
	// its flush is not delivered twice.
	killAckWait = 10 * time.Second
)

// reporterChild is the service as cmd/reporter runs it (Config, Run,
// klog routed; the background scan off), in a re-executed test binary: the
// kubeconfig and NATS URL come from the environment, logs go to stderr. It runs until it is
// killed, or exits when its parent (the test) is gone. It returns the exit
// code.
func reporterChild() int {
	cfg := reporterapp.DefaultConfig()
	cfg.Kube.Kubeconfig = os.Getenv(envChildKubeconfig)
	cfg.NATS.URLs = []string{os.Getenv(envChildNATS)}
	cfg.ProbeAddress = ""
	cfg.Scan = false // the projector is under test
	cfg.Kube.QPS, cfg.Kube.Burst, cfg.WriteQPS, cfg.WriteBurst = 2000, 4000, 2000, 2000
	cfg.CoalesceWindow = 100 * time.Millisecond
	cfg.AckWait = killAckWait
	log, err := cfg.Log.Logger(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	kubeutil.RouteKlog(log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// An orphan (the test binary died without its cleanup) stops at once:
	// nothing is left to serve.
	parent := os.Getppid()
	go func() {
		for range time.Tick(200 * time.Millisecond) {
			if os.Getppid() != parent {
				fmt.Fprintln(os.Stderr, "reporter child: parent gone")
				os.Exit(3)
			}
		}
	}()
	if err := reporterapp.Run(ctx, cfg, log); err != nil {
		fmt.Fprintf(os.Stderr, "reporter child: %v\n", err)
		return 1
	}
	return 0
}

// reporterConsumer is the default reporter consumer with AckWait d.
func reporterConsumer(t *testing.T, d time.Duration) queue.ConsumerSpec {
	t.Helper()
	s, ok := bus.DefaultConsumer(bus.ConsumerReporter)
	if !ok {
		t.Fatalf("no consumer %s among the defaults", bus.ConsumerReporter)
	}
	s.AckWait = d
	return s
}

// child is one run of a replica: the test binary re-executed as the
// reporter service, ready once its runner consumes.
type child struct {
	slot int
	*testproc.Proc
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// killStep is one planned kill: once at most remaining results are
// outstanding (pending or unacknowledged), one of the replicas that
// consume (pick, modulo their number) gets SIGKILL and is restarted after
// down.
type killStep struct {
	remaining int
	pick      int
	down      time.Duration
}

// newKillPlan plans 4 to 6 kills between 85% and 10% of total results
// outstanding, in that order.
func newKillPlan(rng *rand.Rand, total int) []killStep {
	plan := make([]killStep, 4+rng.IntN(3))
	for i := range plan {
		plan[i] = killStep{
			remaining: total/10 + rng.IntN(total*3/4),
			pick:      rng.IntN(killReplicas),
			down:      time.Duration(100+rng.IntN(1400)) * time.Millisecond,
		}
	}
	slices.SortFunc(plan, func(a, b killStep) int { return b.remaining - a.remaining })
	return plan
}

// killRecord is one kill that happened.
type killRecord struct {
	at          time.Duration // since the results were published
	slot, pid   int
	uptime      time.Duration
	outstanding int  // results pending or unacknowledged then
	running     int  // replicas running after the kill
	sigkilled   bool // the wait status says SIGKILL
}

// fleet runs the replicas as child processes, kills them as planned and
// restarts them. One supervisor goroutine owns the children; the fields
// it writes are read after done.
type fleet struct {
	t    *testing.T
	e    *reportertest.Env
	dir  string // the children's logs, one file per run
	env  []string
	spec queue.ConsumerSpec
	plan []killStep

	ready chan struct{} // closed once the first replicas all consume
	arm   chan struct{} // closed by the test: the results are published
	stop  chan struct{} // closed by halt
	done  chan struct{} // closed when every child is reaped
	once  sync.Once

	kills          []killRecord
	starts         int
	restored       int // times the consumer's AckWait was not the configured one (must stay 0)
	maxRedelivered int
	errs           []error
}

// startFleet starts the replicas; halt (also a cleanup) kills them all.
func startFleet(t *testing.T, e *reportertest.Env, spec queue.ConsumerSpec, plan []killStep) *fleet {
	t.Helper()
	f := &fleet{
		t: t, e: e, dir: t.TempDir(), spec: spec, plan: plan,
		env: append(os.Environ(), envChild+"=1",
			envChildKubeconfig+"="+reportertest.ControlPlane().KubeconfigPath(), envChildNATS+"="+e.NATS.ClientURL()),
		ready: make(chan struct{}), arm: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go f.supervise()
	t.Cleanup(func() {
		f.halt()
		if t.Failed() {
			f.logTails(20)
		}
	})
	return f
}

// halt kills every replica and waits until they are reaped.
func (f *fleet) halt() {
	f.once.Do(func() { close(f.stop) })
	<-f.done
}

func (f *fleet) spawn(slot int) (*child, error) {
	f.starts++
	p, err := testproc.Start(testproc.Spec{
		Name: fmt.Sprintf("%03d-replica-%d", f.starts, slot), Path: os.Args[0],
		Env: f.env, LogDir: f.dir, Ready: `"runnerStarted"`,
	})
	if err != nil {
		return nil, fmt.Errorf("start replica %d: %w", slot, err)
	}
	return &child{slot: slot, Proc: p}, nil
}

// supervise owns the children until stop: it restarts the killed ones
// after their down time (and any that exit on their own, which is an
// error), checks that the replicas keep the consumer's AckWait, and once
// armed kills a consuming replica at each planned
// moment, keeping at least one running.
func (f *fleet) supervise() {
	defer close(f.done)
	var slots [killReplicas]*child
	var restartAt [killReplicas]time.Time
	defer func() {
		for _, c := range slots {
			if c == nil {
				continue
			}
			if c.Gone() {
				f.errs = append(f.errs, fmt.Errorf("replica %d (pid %d) exited on its own: %v", c.slot, c.Pid(), c.State()))
				continue
			}
			if _, err := c.Kill(); err != nil {
				f.errs = append(f.errs, err)
			}
		}
	}()
	ctx := context.WithoutCancel(f.t.Context())
	arm := f.arm
	var begin time.Time
	next := 0
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		now := time.Now()
		for i, c := range slots {
			if c != nil && c.Gone() {
				f.errs = append(f.errs, fmt.Errorf("replica %d (pid %d) exited on its own after %v: %v", i, c.Pid(), now.Sub(c.Started).Round(time.Millisecond), c.State()))
				slots[i], restartAt[i] = nil, now
			}
			if slots[i] == nil && !now.Before(restartAt[i]) {
				c, err := f.spawn(i)
				if err != nil {
					f.errs = append(f.errs, err)
					restartAt[i] = now.Add(time.Second)
					continue
				}
				slots[i] = c
			}
		}
		if !closed(f.ready) && !slices.ContainsFunc(slots[:], func(c *child) bool { return c == nil || !c.IsReady() }) {
			close(f.ready)
		}

		if ci, err := f.consumer(ctx); err == nil {
			if ci.Config.AckWait != f.spec.AckWait {
				// The replicas provision the consumer with their
				// --ack-wait, which is the test's.
				f.restored++
			}
			f.maxRedelivered = max(f.maxRedelivered, ci.NumRedelivered)
			outstanding := int(ci.NumPending) + ci.NumAckPending
			if !begin.IsZero() && next < len(f.plan) && outstanding <= f.plan[next].remaining {
				var running, consuming []int
				for i, c := range slots {
					if c != nil {
						running = append(running, i)
						if c.IsReady() {
							consuming = append(consuming, i)
						}
					}
				}
				if len(running) >= 2 && len(consuming) > 0 { // else wait for a restart
					step := f.plan[next]
					i := consuming[step.pick%len(consuming)]
					c := slots[i]
					rec := killRecord{at: time.Since(begin), slot: i, pid: c.Pid(), uptime: time.Since(c.Started), outstanding: outstanding, running: len(running) - 1}
					var err error
					if rec.sigkilled, err = c.Kill(); err != nil {
						f.errs = append(f.errs, err)
					}
					f.kills = append(f.kills, rec)
					slots[i], restartAt[i] = nil, time.Now().Add(step.down)
					next++
				}
			}
		}

		select {
		case <-f.stop:
			return
		case <-arm:
			arm, begin = nil, time.Now()
		case <-tick.C:
		}
	}
}

// consumer reads the reporter consumer's state.
func (f *fleet) consumer(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cons, err := f.e.Conn.JetStream().Consumer(ctx, bus.StreamResults, bus.ConsumerReporter)
	if err != nil {
		return nil, err
	}
	return cons.CachedInfo(), nil
}

// logTails logs the end of every child's log.
func (f *fleet) logTails(n int) {
	files, _ := filepath.Glob(filepath.Join(f.dir, "*.log"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		f.t.Logf("%s (last %d lines):\n%s", filepath.Base(p), n, strings.Join(lines[max(0, len(lines)-n):], "\n"))
	}
}

func killSeed(t *testing.T) uint64 {
	if s := os.Getenv(envKillSeed); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q", envKillSeed, s)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// TestE2EKillReplicas: the 10,000 results for 1,000 ConfigMaps of
// internal/reports/reporter's TestE2EScaleReplicasAndReplay
// (reportertest.ScaleMessages) are projected by three replicas of the
// reporter service, each a real process (this test binary re-executed,
// running Run); 4 to 6 times at random moments during the projection a
// consuming replica gets SIGKILL (no drain: what it held is delivered
// again after the AckWait) and is restarted after a random pause, at
// least one replica running at all times. Every result is then
// acknowledged, none is dead-lettered, and every report equals the fold of
// the stream.
func TestE2EKillReplicas(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx := t.Context()
	n := 1000
	spec := reporterConsumer(t, killAckWait)
	if err := bus.Provision(ctx, e.Conn, bus.WithConsumers(spec)); err != nil {
		t.Fatal(err)
	}
	seed := killSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	plan := newKillPlan(rng, n*reportertest.ScalePolicies)
	var steps []string
	for _, s := range plan {
		steps = append(steps, fmt.Sprintf("at %d outstanding pick %d down %v", s.remaining, s.pick, s.down))
	}
	t.Logf("seed %d (%s=%d repeats it); %d kills planned: %s", seed, envKillSeed, seed, len(plan), strings.Join(steps, "; "))

	ns := e.Namespace("kill-").Name
	begin := time.Now()
	cms := e.CreateConfigMaps(ns, n)
	msgs := reportertest.ScaleMessages(t, cms, rand.New(rand.NewPCG(seed, 1)))
	t.Logf("created %d ConfigMaps in %v", n, time.Since(begin).Round(time.Millisecond))

	begin = time.Now()
	f := startFleet(t, e, spec, plan)
	select {
	case <-f.ready:
		t.Logf("%d replicas consuming %v after their start", killReplicas, time.Since(begin).Round(time.Millisecond))
	case <-f.done:
		t.Fatalf("replicas stopped before they consumed: %v", f.errs)
	case <-time.After(time.Minute):
		t.Fatal("replicas not consuming within a minute")
	}

	pub, err := e.Conn.NewAsyncPublisher(queue.WithBufferSize(len(msgs)))
	if err != nil {
		t.Fatal(err)
	}
	begin = time.Now()
	for _, m := range msgs {
		if err := pub.Publish(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	close(f.arm)
	published := time.Since(begin)
	testkit.Eventually(t, 3*time.Minute, "every result acknowledged", e.ConsumerSettled)
	projected := time.Since(begin)
	end, err := f.consumer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.halt()

	for _, err := range f.errs {
		t.Error(err)
	}
	sigkilled := 0
	for _, k := range f.kills {
		t.Logf("kill at %v: replica %d (pid %d, up %v) with %d results outstanding; %d replicas left running; SIGKILL %v",
			k.at.Round(time.Millisecond), k.slot, k.pid, k.uptime.Round(time.Millisecond), k.outstanding, k.running, k.sigkilled)
		if k.sigkilled && k.outstanding > 0 {
			sigkilled++
		}
	}
	t.Logf("published %d messages in %v; projected in %v by %d replica processes (%d started) through %d kills; "+
		"%d deliveries of %d stream messages, at most %d redelivered at once",
		len(msgs), published.Round(time.Millisecond), projected.Round(time.Millisecond), killReplicas, f.starts, len(f.kills),
		end.Delivered.Consumer, end.Delivered.Stream, f.maxRedelivered)
	if f.restored > 0 {
		t.Errorf("the consumer's AckWait differed from the replicas' --ack-wait %v in %d checks", f.spec.AckWait, f.restored)
	}
	if sigkilled < len(plan) {
		t.Errorf("%d replicas killed by SIGKILL during the projection, want %d", sigkilled, len(plan))
	}
	if f.maxRedelivered == 0 {
		t.Error("no result was seen delivered again: the kills left nothing unacknowledged")
	}
	if dead := e.DeadLetters(); len(dead) > 0 {
		t.Errorf("%d dead letters, first %+v", len(dead), dead[0])
	}
	e.CheckReports(ns, cms)
}
