package platform

import (
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

func TestWorkerConfig(t *testing.T) {
	tests := map[string]struct {
		mod  func(*WorkerConfig)
		want string
	}{
		"defaults":         {mod: func(*WorkerConfig) {}},
		"zero concurrency": {mod: func(c *WorkerConfig) { c.Concurrency = 0 }, want: "concurrency 0"},
		"huge concurrency": {mod: func(c *WorkerConfig) { c.Concurrency = 501 }, want: "concurrency 501"},
		"short ack wait":   {mod: func(c *WorkerConfig) { c.AckWait = time.Second }, want: "ack wait"},
		"no attempts":      {mod: func(c *WorkerConfig) { c.Attempts = 0 }, want: "attempts 0"},
		"retries reversed": {mod: func(c *WorkerConfig) { c.RetryMin, c.RetryMax = time.Minute, time.Second }, want: "retry delays"},
		"no shutdown":      {mod: func(c *WorkerConfig) { c.ShutdownTimeout = 0 }, want: "shutdown timeout"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := DefaultWorkerConfig()
			tc.mod(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrInvalidConfig about %q", err, tc.want)
			}
		})
	}
	c := DefaultWorkerConfig()
	fs := flag.NewFlagSet("w", flag.ContinueOnError)
	BindWorkerFlags(fs, &c)
	if err := fs.Parse([]string{"--concurrency=3", "--ack-wait=9s", "--attempts=2", "--retry-min=2s", "--retry-max=4s", "--shutdown-timeout=7s"}); err != nil {
		t.Fatal(err)
	}
	want := WorkerConfig{Concurrency: 3, AckWait: 9 * time.Second, Attempts: 2, RetryMin: 2 * time.Second, RetryMax: 4 * time.Second, ShutdownTimeout: 7 * time.Second}
	if c != want {
		t.Fatalf("flags %+v, want %+v", c, want)
	}
}
