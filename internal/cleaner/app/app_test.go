package app_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/cleaner"
	cleanerapp "github.com/verdict-dev/verdict/internal/cleaner/app"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	"github.com/verdict-dev/verdict/internal/testkit/testproc"
	"github.com/verdict-dev/verdict/pkg/queue"
)

func TestConfigValidate(t *testing.T) {
	tests := map[string]struct {
		mod  func(*cleanerapp.Config)
		want string
	}{
		"defaults":         {mod: func(*cleanerapp.Config) {}},
		"no nats":          {mod: func(c *cleanerapp.Config) { c.NATS.URLs = nil }, want: "nats-url"},
		"zero concurrency": {mod: func(c *cleanerapp.Config) { c.Worker.Concurrency = 0 }, want: "concurrency 0"},
		"short ack wait":   {mod: func(c *cleanerapp.Config) { c.Worker.AckWait = time.Second }, want: "ack wait"},
		"short ttl":        {mod: func(c *cleanerapp.Config) { c.TTLInterval = time.Millisecond }, want: "ttl interval"},
		"short resync":     {mod: func(c *cleanerapp.Config) { c.Resync = 0 }, want: "schedule resync"},
		"bad log format":   {mod: func(c *cleanerapp.Config) { c.Log.Format = "xml" }, want: "log-format"},
		"several problems": {mod: func(c *cleanerapp.Config) { c.Worker.Attempts, c.TTLInterval = 0, 0 }, want: "attempts 0"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := cleanerapp.DefaultConfig()
			tc.mod(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, cleanerapp.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want cleanerapp.ErrInvalidConfig about %q", err, tc.want)
			}
		})
	}
}

// everyMinute deletes the ConfigMaps labelled tmp=true whose state is
// done in namespaces labelled env=dev, except those named keep-*.
const everyMinute = `apiVersion: verdict.dev/v1
kind: ClusterCleanupPolicy
metadata: {name: every-minute}
spec:
  schedule: "* * * * *"
  match:
    any:
    - resources:
        kinds: [ConfigMap]
        selector: {matchLabels: {tmp: "true"}}
        namespaceSelector: {matchLabels: {env: dev}}
  exclude:
    any:
    - resources: {names: ["keep-*"]}
  conditions:
    all:
    - key: "{{ target.data.state || '' }}"
      operator: Equals
      value: done
`

// fast is a namespaced policy on a two-second interval (a schedule
// Kyverno's cron parser accepts too).
const fast = `apiVersion: verdict.dev/v1
kind: CleanupPolicy
metadata: {name: fast, namespace: scratch}
spec:
  schedule: "@every 2s"
  match: {any: [{resources: {kinds: [ConfigMap], selector: {matchLabels: {fast: "true"}}}}]}
`

// built is the cleaner binary, or why it could not be built.
type built struct {
	bin string
	err error
}

// metric sums, over the replicas' /metrics, the samples whose series
// starts with prefix (0 when absent).
func metric(probes []string, prefix string) float64 {
	var sum float64
	for _, probe := range probes {
		resp, err := http.Get("http://" + probe + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, prefix) {
				continue
			}
			var f float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &f); err == nil {
				sum += f
			}
		}
	}
	return sum
}

// TestE2ECleanup runs three cleaner replicas (cmd/cleaner, built and
// started as three processes) against a real kube-apiserver and
// JetStream, and stops them with SIGTERM at the end (each must exit 0):
//   - a ClusterCleanupPolicy on a one-minute schedule deletes, at its
//     tick, exactly the ConfigMaps it selects (match, namespaceSelector,
//     exclude, conditions on target), once: one replica works the tick,
//     and records a PolicyApplied Event per deletion;
//   - a CleanupPolicy on a two-second schedule deletes in its namespace;
//     once it is deleted its schedule is gone and nothing more is
//     deleted;
//   - a tick whose policy is gone removes its schedule;
//   - a ConfigMap labelled in kube-system, where no webhook checks who
//     set the label, stays (issue 28, finding 12);
//   - a Pod labelled cleanup.kyverno.io/ttl goes when due, one with a
//     longer TTL stays.
func TestE2ECleanup(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real control plane; skipped under -short")
	}
	// The replicas are separate processes, as in a cluster: the binary is
	// built while the control plane starts.
	build := make(chan built, 1)
	dir := t.TempDir()
	go func() {
		bin, err := testproc.Build(t.Context(), "github.com/verdict-dev/verdict/cmd/cleaner", dir)
		build <- built{bin: bin, err: err}
	}()
	cp := controlplane.StartForTest(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	dyn := dynamic.NewForConfigOrDie(cp.RESTConfig())
	for ns, env := range map[string]string{"dev": "dev", "prod": "prod", "scratch": "dev"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"env": env}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// No controller manager: the Pods' namespace needs its service
	// account made by hand.
	if _, err := kube.CoreV1().ServiceAccounts("dev").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	configMap := func(ns, name, state string, labels map[string]string) *corev1.ConfigMap {
		t.Helper()
		cm, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Data:       map[string]string{"state": state},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}
	tmp := map[string]string{"tmp": "true"}
	doomed := []*corev1.ConfigMap{configMap("dev", "tmp-1", "done", tmp), configMap("dev", "tmp-2", "done", tmp)}
	kept := []*corev1.ConfigMap{
		configMap("dev", "tmp-3", "running", tmp), // conditions
		configMap("dev", "keep-1", "done", tmp),   // exclude
		configMap("dev", "plain", "done", nil),    // selector
		configMap("prod", "tmp-4", "done", tmp),   // namespaceSelector
	}
	minute, err := dyn.Resource(cleaner.ClusterCleanupPolicies).Create(ctx, testkit.Unstructured(t, everyMinute), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	nats := natstest.Server(t)
	var (
		probes   []string
		replicas []*testproc.Proc
	)
	b := <-build
	if b.err != nil {
		t.Fatal(b.err)
	}
	for i := range 3 {
		id, probe := fmt.Sprintf("cleaner-%d", i), testkit.FreeAddr(t)
		probes = append(probes, probe)
		// Each replica drains and exits 0 on SIGTERM when the test ends.
		// It is ready once it has listed the stored schedules at
		// start-up: a schedule put before that, whose policy it does not
		// know, it removes then, without a tick.
		replicas = append(replicas, testproc.StartForTest(t, testproc.Spec{Name: id, Path: b.bin, LogDir: dir, Ready: `"cleanupSchedulesListed"`, Args: []string{
			"--kubeconfig=" + cp.KubeconfigPath(), "--nats-url=" + nats.ClientURL(), "--probe-address=" + probe,
			"--ttl-interval=2s", "--identity=" + id, "--retry-min=100ms", "--retry-max=1s", "--shutdown-timeout=5s",
		}}, true))
	}
	conn, err := bus.Connect(ctx, queue.WithURL(nats.ClientURL()), queue.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)

	// The replicas are up once each has listed the stored schedules (the
	// first to start may put the TTL sweep's schedule well before the
	// last has), and the streams hold the TTL sweep's schedule.
	for _, p := range replicas {
		select {
		case <-p.Ready():
		case <-p.Exited():
			t.Fatalf("a cleaner replica exited: %v", p.State())
		case <-time.After(30 * time.Second):
			t.Fatal("a cleaner replica did not list the stored schedules within 30s")
		}
	}
	testkit.Eventually(t, 30*time.Second, "the TTL schedule", func() error {
		_, err := conn.GetSchedule(ctx, bus.WorkCleanup, cleaner.TTLKey)
		return err
	})

	// Each step waits on its own clock; they run side by side.
	t.Run("group", func(t *testing.T) {
		t.Run("one-minute policy", func(t *testing.T) {
			t.Parallel()
			testkit.Eventually(t, 10*time.Second, "the policy's schedule", func() error {
				s, err := conn.GetSchedule(ctx, bus.WorkCleanup, "ClusterCleanupPolicy/every-minute")
				if err != nil {
					return err
				}
				if s.Spec != "0 * * * * *" {
					return fmt.Errorf("spec %q", s.Spec)
				}
				return nil
			})
			ticks := `verdict_cleaner_ticks_total{outcome="processed",policy="every-minute",reason="done",type="policy"}`
			testkit.Eventually(t, 130*time.Second, "the minute's tick", func() error {
				if n := metric(probes, ticks); n < 1 {
					return fmt.Errorf("%v ticks", n)
				}
				return nil
			})
			for _, cm := range doomed {
				if _, err := kube.CoreV1().ConfigMaps(cm.Namespace).Get(ctx, cm.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("%s/%s was not deleted: %v", cm.Namespace, cm.Name, err)
				}
			}
			for _, cm := range kept {
				if got, err := kube.CoreV1().ConfigMaps(cm.Namespace).Get(ctx, cm.Name, metav1.GetOptions{}); err != nil || got.UID != cm.UID {
					t.Errorf("%s/%s was deleted: %v", cm.Namespace, cm.Name, err)
				}
			}
			// Once: one replica worked the tick, each ConfigMap deleted
			// once (a second worker would count notFound).
			time.Sleep(3 * time.Second)
			deleted := `verdict_cleaner_deletions_total{kind="ConfigMap",outcome="deleted",policy="every-minute"}`
			if n, d, nf := metric(probes, ticks), metric(probes, deleted), metric(probes, `verdict_cleaner_deletions_total{kind="ConfigMap",outcome="notFound"`); n != 1 || d != 2 || nf != 0 {
				t.Errorf("%v ticks worked, %v deletions, %v not found; want 1, 2, 0", n, d, nf)
			}
			evs, err := kube.EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=every-minute"})
			if err != nil {
				t.Fatal(err)
			}
			related := map[string]bool{}
			for _, ev := range evs.Items {
				if ev.Type == corev1.EventTypeNormal && ev.Reason == cleaner.EventReasonApplied && ev.Related != nil && ev.Regarding.UID == minute.GetUID() {
					related[ev.Related.Namespace+"/"+ev.Related.Name] = true
				}
			}
			if !related["dev/tmp-1"] || !related["dev/tmp-2"] || len(related) != 2 {
				t.Errorf("PolicyApplied events about %v", related)
			}
			// The run is recorded in the policy's status, as Kyverno does.
			testkit.Eventually(t, 10*time.Second, "status.lastExecutionTime", func() error {
				got, err := dyn.Resource(cleaner.ClusterCleanupPolicies).Get(ctx, "every-minute", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if ts, _, _ := unstructured.NestedString(got.Object, "status", "lastExecutionTime"); ts == "" {
					return fmt.Errorf("status %v", got.Object["status"])
				}
				return nil
			})
			// Deleting the policy removes its schedule.
			if err := dyn.Resource(cleaner.ClusterCleanupPolicies).Delete(ctx, "every-minute", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			testkit.Eventually(t, 10*time.Second, "the schedule removed", func() error {
				if _, err := conn.GetSchedule(ctx, bus.WorkCleanup, "ClusterCleanupPolicy/every-minute"); !errors.Is(err, queue.ErrNoSchedule) {
					return fmt.Errorf("schedule still there: %w", err)
				}
				return nil
			})
		})

		t.Run("deleting a policy stops its ticks", func(t *testing.T) {
			t.Parallel()
			if _, err := dyn.Resource(cleaner.CleanupPolicies).Namespace("scratch").Create(ctx, testkit.Unstructured(t, fast), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			first := configMap("scratch", "fast-1", "", map[string]string{"fast": "true"})
			other := configMap("dev", "fast-elsewhere", "", map[string]string{"fast": "true"})
			testkit.Eventually(t, 20*time.Second, "the fast policy's deletion", func() error {
				if _, err := kube.CoreV1().ConfigMaps("scratch").Get(ctx, first.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("still there: %w", err)
				}
				return nil
			})
			// 60 at once: a tick records an Event per deletion up to 50,
			// then one Event for the rest; together they count every one.
			for i := range 60 {
				configMap("scratch", fmt.Sprintf("fast-bulk-%02d", i), "", map[string]string{"fast": "true"})
			}
			testkit.Eventually(t, 20*time.Second, "the 60 deleted", func() error {
				l, err := kube.CoreV1().ConfigMaps("scratch").List(ctx, metav1.ListOptions{LabelSelector: "fast=true"})
				if err != nil {
					return err
				}
				if len(l.Items) != 0 {
					return fmt.Errorf("%d left", len(l.Items))
				}
				return nil
			})
			testkit.Eventually(t, 10*time.Second, "an Event for each of the 61, some summed up", func() error {
				evs, err := kube.EventsV1().Events("scratch").List(ctx, metav1.ListOptions{})
				if err != nil {
					return err
				}
				one, summed, summaries := 0, 0, 0
				for _, ev := range evs.Items {
					if ev.Regarding.Name != "fast" || ev.Reason != cleaner.EventReasonApplied {
						continue
					}
					var n, limit int
					if _, err := fmt.Sscanf(ev.Note, "successfully cleaned up %d more resources (Events per tick are limited to %d", &n, &limit); err == nil {
						summed += n
						summaries++
						continue
					}
					one++
				}
				if one+summed != 61 || summaries == 0 || one > 50*(summaries+1) {
					return fmt.Errorf("%d per-resource Events and %d in %d summaries, want 61 in all with at least one summary", one, summed, summaries)
				}
				return nil
			})
			if err := dyn.Resource(cleaner.CleanupPolicies).Namespace("scratch").Delete(ctx, "fast", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			testkit.Eventually(t, 10*time.Second, "the schedule removed", func() error {
				if _, err := conn.GetSchedule(ctx, bus.WorkCleanup, "CleanupPolicy/scratch/fast"); !errors.Is(err, queue.ErrNoSchedule) {
					return fmt.Errorf("schedule still there: %w", err)
				}
				return nil
			})
			ticks := `verdict_cleaner_ticks_total{outcome="processed",policy="scratch/fast"`
			time.Sleep(2500 * time.Millisecond) // a tick already fired may still be worked
			before := metric(probes, ticks)
			second := configMap("scratch", "fast-2", "", map[string]string{"fast": "true"})
			time.Sleep(6 * time.Second)
			if after := metric(probes, ticks); after != before {
				t.Errorf("ticks went on after the policy was deleted: %v, then %v", before, after)
			}
			for _, cm := range []*corev1.ConfigMap{second, other} {
				if _, err := kube.CoreV1().ConfigMaps(cm.Namespace).Get(ctx, cm.Name, metav1.GetOptions{}); err != nil {
					t.Errorf("%s/%s: %v", cm.Namespace, cm.Name, err)
				}
			}
		})

		t.Run("a tick whose policy is gone removes its schedule", func(t *testing.T) {
			t.Parallel()
			ghost := queue.Schedule{Kind: bus.WorkCleanup, Key: "ClusterCleanupPolicy/ghost", Spec: "@every 1s",
				Data: []byte(`{"action":"policy","policy":{"kind":"ClusterCleanupPolicy","name":"ghost","uid":"u-ghost","generation":1,"schedule":"@every 1s"}}`)}
			if _, err := conn.PutSchedule(ctx, ghost, nil); err != nil {
				t.Fatal(err)
			}
			testkit.Eventually(t, 15*time.Second, "the ghost's schedule removed by its tick", func() error {
				if _, err := conn.GetSchedule(ctx, bus.WorkCleanup, ghost.Key); !errors.Is(err, queue.ErrNoSchedule) {
					return fmt.Errorf("schedule still there: %w", err)
				}
				return nil
			})
			// The tick removes the schedule, then is counted.
			testkit.Eventually(t, 5*time.Second, "the ghost's tick counted", func() error {
				if n := metric(probes, `verdict_cleaner_ticks_total{outcome="skipped",policy="ghost",reason="policyGone",type="policy"}`); n < 1 {
					return fmt.Errorf("%v policyGone ticks counted", n)
				}
				return nil
			})
		})

		t.Run("TTL label", func(t *testing.T) {
			t.Parallel()
			pod := func(name, ttl string) *corev1.Pod {
				p, err := kube.CoreV1().Pods("dev").Create(ctx, &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{cleaner.LabelTTL: ttl}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}},
				}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			// A label where no webhook checks who set it (kube-system is
			// in no webhook's namespaceSelector): due at once, left alone.
			unguarded, err := kube.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "ttl-unguarded", Labels: map[string]string{cleaner.LabelTTL: "1s"}},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			soon, later := pod("ttl-soon", "6s"), pod("ttl-later", "1h")
			due := soon.CreationTimestamp.Add(6 * time.Second)
			time.Sleep(time.Until(due.Add(-2 * time.Second)))
			if _, err := kube.CoreV1().Pods("dev").Get(ctx, soon.Name, metav1.GetOptions{}); err != nil {
				t.Fatalf("the Pod went before it was due: %v", err)
			}
			testkit.Eventually(t, 20*time.Second, "the due Pod deleted", func() error {
				if _, err := kube.CoreV1().Pods("dev").Get(ctx, soon.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("still there: %w", err)
				}
				return nil
			})
			if time.Now().Before(due) {
				t.Errorf("deleted at %s, due at %s", time.Now(), due)
			}
			if _, err := kube.CoreV1().Pods("dev").Get(ctx, later.Name, metav1.GetOptions{}); err != nil {
				t.Errorf("the Pod with a longer TTL: %v", err)
			}
			if n := metric(probes, `verdict_cleaner_deletions_total{kind="Pod",outcome="deleted",policy="@ttl"}`); n != 1 {
				t.Errorf("%v TTL deletions counted, want 1", n)
			}
			// The sweep that deleted the due Pod saw the ConfigMap due too.
			if _, err := kube.CoreV1().ConfigMaps("kube-system").Get(ctx, unguarded.Name, metav1.GetOptions{}); err != nil {
				t.Errorf("a TTL label no webhook checked was honoured: %v", err)
			}
			if n := metric(probes, `verdict_cleaner_ttl_unguarded_total{kind="ConfigMap"}`); n < 1 {
				t.Errorf("%v unguarded labels counted", n)
			}
		})
	})
}
