package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/verdict-dev/verdict/internal/testkit/latency"
	"github.com/verdict-dev/verdict/internal/testkit/podload"
)

// apiserverConfig is `loadgen apiserver`'s configuration.
type apiserverConfig struct {
	kubeconfig string
	namespace  string
	clients    []int
	iterations []int
	mode       podload.Mode
	timeout    time.Duration
}

// runAPIServer creates Pods through the API server as Kyverno's k6
// benchmark does (podload), one level after the other, and prints each
// level's latencies: `loadgen apiserver --kubeconfig ... --clients
// 10,50,200,500 --iterations 1000,5000,10000,10000` is Kyverno's matrix
// (docs/perf-testing/v1.18.1/matrix.json).
func runAPIServer(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := parseAPIServer(args)
	if err != nil {
		return err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.kubeconfig)
	if err != nil {
		return err
	}
	rc.WarningHandler = rest.NoWarnings{}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	if err := podload.EnsureNamespace(ctx, kube, cfg.namespace); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "clients\titerations\terrors\titerations/s\tavg\tp95\tp99\tmax\tCREATE avg\tCREATE p99\t")
	for i, c := range cfg.clients {
		res, err := podload.Run(ctx, podload.Config{REST: rc, Namespace: cfg.namespace, Clients: c, Iterations: cfg.iterations[i], Mode: cfg.mode, Timeout: cfg.timeout})
		if err != nil {
			return err
		}
		it, cr := latency.Summarize(res.Iterations), latency.Summarize(res.Creates)
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", c, cfg.iterations[i], res.Errors, res.Rate(),
			latency.Ms(it.Avg), latency.Ms(it.P95), latency.Ms(it.P99), latency.Ms(it.Max), latency.Ms(cr.Avg), latency.Ms(cr.P99))
		if res.FirstErr != nil {
			fmt.Fprintf(tw, "first error: %v\t\t\t\t\t\t\t\t\t\t\n", res.FirstErr)
		}
	}
	return tw.Flush()
}

func parseAPIServer(args []string) (apiserverConfig, error) {
	cfg := apiserverConfig{}
	var clients, iterations, mode string
	fs := flag.NewFlagSet("loadgen apiserver", flag.ContinueOnError)
	fs.StringVar(&cfg.kubeconfig, "kubeconfig", clientcmd.NewDefaultClientConfigLoadingRules().GetDefaultFilename(), "kubeconfig of the loading user")
	fs.StringVar(&cfg.namespace, "namespace", "testns", "namespace of the Pods (created with its default ServiceAccount when missing)")
	fs.StringVar(&clients, "clients", "10,50,200,500", "comma-separated levels of concurrent clients (k6's VUs)")
	fs.StringVar(&iterations, "iterations", "1000,5000,10000,10000", "comma-separated Pods to create at each level, shared among its clients")
	fs.StringVar(&mode, "mode", string(podload.ModeK6), "k6 (discovery then CREATE, as Kyverno's k6 script), fresh (a new connection per CREATE) or reuse (CREATEs on shared connections)")
	fs.DurationVar(&cfg.timeout, "timeout", 30*time.Second, "bound of one iteration")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	var err error
	if cfg.mode, err = podload.ParseMode(mode); err != nil {
		return cfg, err
	}
	if cfg.clients, err = positiveInts(clients); err != nil {
		return cfg, fmt.Errorf("--clients: %w", err)
	}
	if cfg.iterations, err = positiveInts(iterations); err != nil {
		return cfg, fmt.Errorf("--iterations: %w", err)
	}
	if len(cfg.clients) != len(cfg.iterations) {
		return cfg, fmt.Errorf("%d levels of --clients, %d of --iterations: one count per level", len(cfg.clients), len(cfg.iterations))
	}
	if cfg.kubeconfig == "" {
		return cfg, errors.New("--kubeconfig is required")
	}
	return cfg, nil
}

func positiveInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}
