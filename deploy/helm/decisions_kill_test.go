package helm_test

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit/testproc"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// TestE2EDecisionsSurviveKill (issue 34): the chart's webhook replicas as
// processes, with the chart's spool (an emptyDir, here a folder of each
// replica kept across its restart). JetStream is gone (its three servers
// killed), Pods are admitted meanwhile (NATS never changes an answer),
// and every webhook replica is killed with SIGKILL with the decisions in
// its buffer. JetStream comes back, the replicas start again, and the log
// holds each Pod's decision once.
func TestE2EDecisionsSurviveKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the chart's topology on a real control plane; skipped under -short")
	}
	env := startChartTopology(t, []string{"webhook"})
	ctx, kube := t.Context(), env.kube
	createPolicy(t, env.dyn, policycache.ClusterPolicies, "", topoAudit)
	topoEventually(t, 60*time.Second, "the Pods' webhook registered", func() error {
		val, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, c := range val.Items {
			for _, w := range c.Webhooks {
				for _, r := range w.Rules {
					if slices.Contains(r.Resources, "pods") {
						return nil
					}
				}
			}
		}
		return fmt.Errorf("no webhook for Pods")
	})

	// JetStream gone (its three servers killed): the replicas hold the
	// decisions, which no socket takes.
	for _, n := range env.nats {
		n.Kill()
	}
	const pods = 12
	for i := range pods {
		if _, err := kube.CoreV1().Pods(topoNamespace).Create(ctx, topoPod(fmt.Sprintf("kept-%d", i), false), metav1.CreateOptions{}); err != nil {
			t.Fatalf("Pod %d with JetStream away: %v", i, err)
		}
	}
	for _, r := range env.topo.replicas["webhook"] {
		if sigkilled, err := r.proc.Kill(); err != nil || !sigkilled {
			t.Fatalf("kill %s: SIGKILL %v, %v", r.name, sigkilled, err)
		}
	}
	testproc.RestartAll(ctx, env.nats)
	for _, r := range env.topo.replicas["webhook"] {
		env.topo.restart(r)
	}

	conn, err := bus.Connect(ctx, queue.WithURL(env.urls...), queue.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	defer func() {
		if !t.Failed() {
			return
		}
		for _, r := range env.topo.replicas["webhook"] {
			resp, err := http.Get(strings.Replace(r.ready, "/readyz", "/metrics", 1))
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, "webhook-decisions") || strings.Contains(line, "spool") {
					t.Logf("%s: %s", r.name, line)
				}
			}
		}
	}()
	var seen map[string]int
	topoEventually(t, 90*time.Second, "each Pod's decision in the log", func() error {
		// Read message by message (direct gets): what the stream stores.
		st, err := conn.JetStream().Stream(ctx, bus.StreamDecisions)
		if err != nil {
			return err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		seen = map[string]int{}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			m, err := st.GetMsg(ctx, seq)
			if err != nil {
				continue // deleted
			}
			d, err := bus.DecodeDecision(m.Subject, m.Data)
			if err != nil {
				return err
			}
			if d.Operation == "CREATE" && d.Resource.Kind == "Pod" && d.Resource.Namespace == topoNamespace && !d.DryRun {
				seen[d.Resource.Name]++
			}
		}
		for i := range pods {
			if seen[fmt.Sprintf("kept-%d", i)] == 0 {
				return fmt.Errorf("decisions of %v", slices.Sorted(maps.Keys(seen)))
			}
		}
		return nil
	})
	for name, n := range seen {
		if n != 1 {
			t.Errorf("%s: %d decisions, want one", name, n)
		}
	}
}
