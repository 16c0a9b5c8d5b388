package app_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/cli/decisions"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// TestE2EDecisions (issue 34): through the real kube-apiserver, a user's
// denied and admitted Pods are in the admission log once each, with the
// user the API server authenticated, the outcome and the policies'
// findings, as `verdict decisions` reads them; a replica stopped right
// after answering flushes what it decided; while NATS is down the
// answers are the same, and the decisions reach the log once it is back.
func TestE2EDecisions(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	if _, err := e.kube.RbacV1().Roles("team").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.RbacV1().RoleBindings("team").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-pods"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pods"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	groups := []string{"devs", "system:authenticated"}
	controlplane.WaitAuthorized(t, e.kube, "alice", groups, authorizationv1.ResourceAttributes{Namespace: "team", Verb: "create", Resource: "pods"})
	cfg := rest.CopyConfig(e.cp.RESTConfig())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "alice", Groups: groups}
	alice := kubernetes.NewForConfigOrDie(cfg)

	r := e.startReplica(t, "replica-a", "", nil)
	waitEnforced(t, e.kube)

	create := func(name string, privileged bool) (*corev1.Pod, error) {
		return alice.CoreV1().Pods("team").Create(ctx, pod(name, privileged), metav1.CreateOptions{})
	}
	if _, err := create("bad", true); err == nil || !strings.Contains(err.Error(), "Privileged mode is disallowed") {
		t.Fatalf("privileged Pod: %v", err)
	}
	good, err := create("good", false)
	if err != nil {
		t.Fatal(err)
	}
	// Stopped at once: what it decided is flushed before it exits.
	r.stop(t)

	conn, err := bus.Connect(ctx, queue.WithURL(e.nats.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mine := decisions.Filter{Namespace: "team", User: "alice"}
	got := readDecisions(t, conn, mine, 2)
	bad, ok := got["bad"]
	if !ok || bad.Outcome != bus.DecisionDenied || !strings.Contains(bad.Message, "Privileged mode is disallowed") ||
		len(bad.Findings) == 0 || bad.Findings[0].Policy != "disallow-privileged" || bad.Findings[0].Action != bus.ActionDeny {
		t.Fatalf("the denial: %+v", bad)
	}
	admitted, ok := got["good"]
	if !ok || admitted.Outcome != bus.DecisionWarned || admitted.Resource.UID != string(good.UID) ||
		len(admitted.Findings) != 1 || admitted.Findings[0].Policy != "require-team-label" {
		t.Fatalf("the admission: %+v", admitted)
	}
	for _, d := range []bus.Decision{bad, admitted} {
		// The API server presents its client certificate (mutual TLS):
		// the decision is its word.
		if d.User.Username != "alice" || strings.Join(d.User.Groups, ",") != "devs,system:authenticated" || d.Replica != "replica-a" || d.Webhook != "validate-cluster" || !d.Verified {
			t.Fatalf("decision %+v", d)
		}
	}

	// NATS down: the same answers; the decisions wait in the buffer and
	// reach the log when it is back.
	r = e.startReplica(t, "replica-b", "", nil)
	waitEnforced(t, e.kube)
	e.nats.Shutdown()
	e.nats = nil
	if _, err := create("bad-during-outage", true); err == nil || !strings.Contains(err.Error(), "Privileged mode is disallowed") {
		t.Fatalf("privileged Pod while NATS is down: %v", err)
	}
	if _, err := create("good-during-outage", false); err != nil {
		t.Fatalf("compliant Pod while NATS is down: %v", err)
	}
	e.startNATS(t)
	conn2, err := bus.Connect(ctx, queue.WithURL(e.nats.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	got = readDecisions(t, conn2, mine, 4)
	if got["bad-during-outage"].Outcome != bus.DecisionDenied || got["good-during-outage"].Outcome != bus.DecisionWarned {
		t.Fatalf("decisions made while NATS was down: %+v", got)
	}
	r.stop(t)
}

// readDecisions waits until the log holds want decisions of Pods named
// other than probe-*, each once, and returns them by name.
func readDecisions(t *testing.T, conn *queue.Conn, f decisions.Filter, want int) map[string]bus.Decision {
	t.Helper()
	var got map[string]bus.Decision
	var dup string
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("%d decisions logged", want), func() error {
		got, dup = map[string]bus.Decision{}, ""
		err := decisions.Read(t.Context(), conn, f, time.Now().Add(-time.Hour), func(e decisions.Entry) error {
			if e.Err != nil {
				return e.Err
			}
			name := e.Decision.Resource.Name
			if strings.HasPrefix(name, "probe-") {
				return nil
			}
			if _, seen := got[name]; seen {
				dup = name
			}
			got[name] = e.Decision
			return nil
		})
		if err != nil {
			return err
		}
		if len(got) < want {
			return testkit.ErrNotYet
		}
		return nil
	})
	if dup != "" || len(got) != want {
		t.Fatalf("decisions %v (%q logged twice), want %d", got, dup, want)
	}
	return got
}
