// Command loadgen sends AdmissionReviews built from a file of Pods to a
// webhook over TLS and reports throughput and latency percentiles, at
// fixed concurrency levels (closed loop) or at a fixed request rate (open
// loop). Every review has its own request uid and object uid, as the API
// server sends them (so every admitted review publishes its results).
// With --metrics-url (the webhook's /metrics on its probe address) it
// also reports the webhook's CPU time and heap allocations per request,
// from its process_cpu_seconds_total and go_memstats_mallocs_total before
// and after each level; with --nats-pid, nats-server's CPU time per
// request too (from /proc: the server the webhook publishes to, on this
// machine).
//
// `loadgen apiserver` loads the API server instead, as Kyverno's published
// admission benchmark does: Pods created by concurrent clients, a fixed
// number of iterations per level (internal/testkit/podload). It only talks to
// the addresses it is given; every run is bounded in time and in
// requests.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/verdict-dev/verdict/internal/platform/certs"
	"github.com/verdict-dev/verdict/internal/testkit/admissiontraffic"
	"github.com/verdict-dev/verdict/internal/testkit/latency"
	"github.com/verdict-dev/verdict/internal/testkit/procstat"
)

type config struct {
	url         string
	caFile      string
	insecure    bool
	podsFile    string
	concurrency []int
	rate        int
	duration    time.Duration
	warmup      time.Duration
	maxRequests int
	operation   string
	metricsURL  string
	natsPID     int
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) > 0 && args[0] == "certs" {
		return writeCerts(args[1:], out)
	}
	if len(args) > 0 && args[0] == "apiserver" {
		return runAPIServer(ctx, args[1:], out)
	}
	cfg, err := parse(args)
	if err != nil {
		return err
	}
	bodies, err := admissiontraffic.ReadTemplates(cfg.podsFile, cfg.operation, "loadgen")
	if err != nil {
		return err
	}
	client, err := newClient(cfg)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	header := "mode\tconcurrency\trequests\terrors\treq/s\tp50\tp90\tp99\tmax\t"
	if cfg.metricsURL != "" {
		header += "webhook CPU/req\tallocs/req\t"
	}
	if cfg.natsPID > 0 {
		header += "nats CPU/req\t"
	}
	fmt.Fprintln(tw, header)
	levels := cfg.concurrency
	for _, c := range levels {
		if cfg.warmup > 0 {
			_ = measure(ctx, client, cfg, bodies, c, 0, cfg.warmup)
		}
		var before webhookCounters
		if cfg.metricsURL != "" {
			if before, err = readCounters(ctx, cfg.metricsURL); err != nil {
				return err
			}
		}
		var natsBefore procstat.Stat
		if cfg.natsPID > 0 {
			if natsBefore, err = procstat.Read(cfg.natsPID); err != nil {
				return fmt.Errorf("nats-server: %w", err)
			}
		}
		r := measure(ctx, client, cfg, bodies, c, cfg.rate, cfg.duration)
		mode := "closed"
		if cfg.rate > 0 {
			mode = fmt.Sprintf("open %d/s", cfg.rate)
		}
		line := fmt.Sprintf("%s\t%d\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\t", mode, c, r.n, r.errors, r.rps,
			latency.Ms(r.pct(50)), latency.Ms(r.pct(90)), latency.Ms(r.pct(99)), latency.Ms(r.pct(100)))
		if cfg.metricsURL != "" {
			after, err := readCounters(context.WithoutCancel(ctx), cfg.metricsURL)
			if err != nil {
				return err
			}
			// Requests still in flight when the level ended are not
			// counted, and their CPU and allocations are: a slight
			// overestimate.
			sent := float64(max(r.sent, 1))
			line += fmt.Sprintf("%.0fµs\t%.0f\t", (after.cpu-before.cpu)/sent*1e6, (after.mallocs-before.mallocs)/sent)
		}
		if cfg.natsPID > 0 {
			// What the server still does for the level (publishes in
			// the webhook's buffer, acknowledgements) ends within a
			// moment of the last answer.
			time.Sleep(500 * time.Millisecond)
			after, err := procstat.Read(cfg.natsPID)
			if err != nil {
				return fmt.Errorf("nats-server: %w", err)
			}
			line += fmt.Sprintf("%.0fµs\t", float64((after.CPU-natsBefore.CPU).Microseconds())/float64(max(r.sent, 1)))
		}
		fmt.Fprintln(tw, line)
		if r.firstErr != nil {
			fmt.Fprintf(tw, "first error: %v\t\t\t\t\t\t\t\t\t\n", r.firstErr)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return tw.Flush()
}

func parse(args []string) (config, error) {
	var cfg config
	var conc string
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.StringVar(&cfg.url, "url", "https://127.0.0.1:9443/validate", "webhook endpoint")
	fs.StringVar(&cfg.caFile, "ca-file", "", "CA that signed the webhook's certificate")
	fs.BoolVar(&cfg.insecure, "insecure", false, "skip certificate verification")
	fs.StringVar(&cfg.podsFile, "pods", "../shared/bench/pods-1000.yaml", "multi-document YAML of Pods")
	fs.StringVar(&conc, "concurrency", "1,4,16,64", "comma-separated concurrency levels")
	fs.IntVar(&cfg.rate, "rate", 0, "requests per second (open loop); 0 for closed loop")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "measurement time per level")
	fs.DurationVar(&cfg.warmup, "warmup", 2*time.Second, "warm-up time per level, not measured")
	fs.IntVar(&cfg.maxRequests, "max-requests", 1_000_000, "upper bound of requests per level")
	fs.StringVar(&cfg.operation, "operation", "CREATE", "admission operation")
	fs.StringVar(&cfg.metricsURL, "metrics-url", "", "the webhook's /metrics (on its probe address): report its CPU time per request")
	fs.IntVar(&cfg.natsPID, "nats-pid", 0, "pid of the nats-server the webhook publishes to, on this machine: report its CPU time per request")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	var err error
	if cfg.concurrency, err = positiveInts(conc); err != nil {
		return cfg, fmt.Errorf("bad concurrency: %w", err)
	}
	if cfg.duration <= 0 || cfg.duration > 10*time.Minute {
		return cfg, errors.New("duration must be between 0 and 10m")
	}
	return cfg, nil
}

func newClient(cfg config) (*http.Client, error) {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.insecure} //nolint:gosec // opt-in for local runs
	if cfg.caFile != "" {
		pem, err := os.ReadFile(cfg.caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("no certificate in " + cfg.caFile)
		}
		tlsCfg.RootCAs = pool
	}
	tr := &http.Transport{TLSClientConfig: tlsCfg, MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, ForceAttemptHTTP2: false}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}, nil
}

type result struct {
	n, errors int
	sent      int // requests sent, answered or not
	rps       float64
	lat       []time.Duration
	firstErr  error
}

// pct is the p-th percentile of the sorted latencies.
func (r *result) pct(p float64) time.Duration { return latency.Percentile(r.lat, p) }

// measure runs one level: c workers, each sending the next review as soon
// as the previous answer arrives (rate 0), or all together holding rate
// requests per second.
func measure(ctx context.Context, client *http.Client, cfg config, bodies []admissiontraffic.Template, c, rate int, d time.Duration) *result {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var next atomic.Int64
	var mu sync.Mutex
	res := &result{}
	var tick <-chan time.Time
	if rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(rate))
		defer t.Stop()
		tick = t.C
	}
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 4096)
			var errs int
			var firstErr error
			for ctx.Err() == nil {
				if tick != nil {
					select {
					case <-ctx.Done():
						continue
					case <-tick:
					}
				}
				i := next.Add(1)
				if int(i) > cfg.maxRequests {
					break
				}
				body := bodies[int(i)%len(bodies)].WithUIDs(uidCounter.Add(1))
				t0 := time.Now()
				_, err := admissiontraffic.Send(ctx, client, cfg.url, body)
				if ctx.Err() != nil {
					break
				}
				lat = append(lat, time.Since(t0))
				if err != nil {
					errs++
					if firstErr == nil {
						firstErr = err
					}
				}
			}
			mu.Lock()
			res.lat = append(res.lat, lat...)
			res.errors += errs
			if res.firstErr == nil {
				res.firstErr = firstErr
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	sort.Slice(res.lat, func(i, j int) bool { return res.lat[i] < res.lat[j] })
	res.n = len(res.lat)
	res.sent = int(min(next.Load(), int64(cfg.maxRequests)))
	res.rps = float64(res.n) / elapsed.Seconds()
	return res
}

// uidCounter numbers the reviews of a run, warm-up included: no two
// share a uid. It starts at a random point whose low 40 bits are zero,
// so that two runs within JetStream's duplicate window do not give
// their requests the same uids (whose results JetStream would then drop
// as duplicates).
var uidCounter = newUIDCounter()

// newUIDCounter is a counter of a run's uids, from a random start.
func newUIDCounter() *atomic.Uint64 {
	var c atomic.Uint64
	c.Store(rand.Uint64() &^ (1<<40 - 1))
	return &c
}

// webhookCounters are the webhook's process counters the load generator
// reports per request.
type webhookCounters struct {
	cpu     float64 // process_cpu_seconds_total
	mallocs float64 // go_memstats_mallocs_total
}

// readCounters reads the counters from the webhook's Prometheus text
// exposition.
func readCounters(ctx context.Context, url string) (webhookCounters, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return webhookCounters{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return webhookCounters{}, fmt.Errorf("webhook metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return webhookCounters{}, fmt.Errorf("webhook metrics: %w", err)
	}
	var c webhookCounters
	if c.cpu, err = metricValue(body, "process_cpu_seconds_total"); err != nil {
		return webhookCounters{}, err
	}
	if c.mallocs, err = metricValue(body, "go_memstats_mallocs_total"); err != nil {
		return webhookCounters{}, err
	}
	return c, nil
}

// metricValue finds the value of an unlabelled metric in a text
// exposition.
func metricValue(exposition []byte, name string) (float64, error) {
	for line := range strings.Lines(string(exposition)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("webhook metrics: no %s (is --metrics-url the webhook's /metrics?)", name)
}

// writeCerts writes a throw-away CA (ca.crt) and a serving certificate for
// 127.0.0.1 (tls.crt, tls.key) into a directory, for local load runs.
func writeCerts(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("loadgen certs", flag.ContinueOnError)
	dir := fs.String("dir", ".", "where to write ca.crt, tls.crt and tls.key")
	if err := fs.Parse(args); err != nil {
		return err
	}
	now := time.Now()
	ca, err := certs.NewCA("loadgen-ca", now, 24*time.Hour)
	if err != nil {
		return err
	}
	kp, err := certs.NewServing(ca, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, now, 24*time.Hour)
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{"ca.crt": ca.CertPEM, "tls.crt": kp.CertPEM, "tls.key": kp.KeyPEM} {
		if err := os.WriteFile(filepath.Join(*dir, name), data, 0o600); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "wrote ca.crt, tls.crt, tls.key to", *dir)
	return nil
}
