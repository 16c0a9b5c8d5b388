package app_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	webhookapp "github.com/verdict-dev/verdict/internal/webhook/app"
)

// TestE2ESlowBodyFlood: issue 28, finding 3, through the real
// kube-apiserver. Without mutual TLS (the chart's default), any pod that
// reaches the webhook's Service can open connections that declare a large
// body and send a byte a second; sixteen of them (twice the evaluation
// slots) held every slot before, and Pods were refused. Now Pods created
// meanwhile are decided, correctly, within a second each, and each slow
// connection is answered 408 at the request's deadline.
func TestE2ESlowBodyFlood(t *testing.T) {
	const slots, slow = 8, 16
	e := newEnv(t)
	r := e.startReplica(t, "replica-a", "", func(c *webhookapp.Config) {
		c.Webhook.ClientCAFile = ""
		c.Webhook.MaxConcurrentEvaluations = slots
		c.Webhook.RequestTimeout = 5 * time.Second
	})
	waitEnforced(t, e.kube)

	type cut struct {
		status int
		after  time.Duration
	}
	cuts := make(chan cut, slow)
	var wg sync.WaitGroup
	for range slow {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", r.port), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the attacker's client
			if err != nil {
				t.Errorf("dial: %v", err)
				return
			}
			defer func() { _ = conn.Close() }()
			fmt.Fprintf(conn, "POST /validate HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", 1<<20)
			stop := make(chan struct{})
			go func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(time.Second):
						_, _ = conn.Write([]byte(" "))
					}
				}
			}()
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			close(stop)
			c := cut{after: time.Since(start)}
			if err == nil {
				c.status = resp.StatusCode
				_ = resp.Body.Close()
			}
			cuts <- c
		}()
	}
	time.Sleep(2 * time.Second)

	ctx := t.Context()
	var took []time.Duration
	for i := range 3 {
		start := time.Now()
		_, err := e.kube.CoreV1().Pods("team").Create(ctx, pod(fmt.Sprintf("bad-in-flood-%d", i), true), metav1.CreateOptions{})
		took = append(took, time.Since(start))
		if err == nil || !strings.Contains(err.Error(), "Privileged mode is disallowed") {
			t.Fatalf("privileged pod during the flood: %v", err)
		}
		start = time.Now()
		if _, err := e.kube.CoreV1().Pods("team").Create(ctx, pod(fmt.Sprintf("ok-in-flood-%d", i), false), metav1.CreateOptions{}); err != nil {
			t.Fatalf("compliant pod during the flood: %v", err)
		}
		took = append(took, time.Since(start))
	}
	for i, d := range took {
		if d > time.Second {
			t.Fatalf("pod %d during the flood decided after %s, want under 1s (all: %v)", i, d, took)
		}
	}
	wg.Wait()
	close(cuts)
	var last time.Duration
	for c := range cuts {
		if c.status != http.StatusRequestTimeout || c.after > 6*time.Second {
			t.Fatalf("slow connection: status %d after %s, want 408 by the 5s deadline", c.status, c.after)
		}
		last = max(last, c.after)
	}
	t.Logf("%d slow bodies on %d slots: pods decided through the API server in %v; slow connections answered 408 by %s", slow, slots, took, last.Round(time.Millisecond))
}
