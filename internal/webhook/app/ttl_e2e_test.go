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

	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
)

const ttlLabel = "cleanup.kyverno.io/ttl"

// TestE2ETTLLabelNeedsDelete is issue 28's finding 12: the cleaner
// deletes what carries the TTL label with its own rights, so the label
// may be set only by whoever may delete the object. bob may write
// ConfigMaps in team but not delete them: his label is denied, on a
// create and on an update, with a message that says why; carol may
// delete them: hers is admitted, and bob may still change her labelled
// ConfigMap as long as he leaves the label as it is.
func TestE2ETTLLabelNeedsDelete(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	r := e.startReplica(t, "replica-a", "", nil)
	waitEnforced(t, e.kube)

	writer := []string{"get", "list", "create", "update", "patch"}
	users := map[string][]string{"bob": writer, "carol": append(writer, "delete")}
	as := map[string]kubernetes.Interface{}
	for user, verbs := range users {
		if _, err := e.kube.RbacV1().Roles("team").Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "cm-" + user},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: verbs}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.kube.RbacV1().RoleBindings("team").Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "cm-" + user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cm-" + user},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		controlplane.WaitAuthorized(t, e.kube, user, []string{"system:authenticated"}, authorizationv1.ResourceAttributes{Namespace: "team", Verb: "create", Resource: "configmaps"})
		cfg := rest.CopyConfig(e.cp.RESTConfig())
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
		as[user] = kubernetes.NewForConfigOrDie(cfg)
	}
	labelled := func(name, ttl string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, Labels: map[string]string{ttlLabel: ttl}}}
	}
	denied := func(err error) bool { return err != nil && strings.Contains(err.Error(), "may not delete") }

	// bob creates a ConfigMap with the label: denied (the webhook of the
	// label is registered with the policies' webhooks).
	var err error
	for i := 0; i < 50; i++ {
		if _, err = as["bob"].CoreV1().ConfigMaps("team").Create(ctx, labelled(fmt.Sprintf("bob-%d", i), "1s"), metav1.CreateOptions{}); denied(err) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !denied(err) {
		t.Fatalf("bob, who may not delete ConfigMaps, created one with %s: %v", ttlLabel, err)
	}

	// bob adds the label to a ConfigMap of his: denied.
	mine, err := as["bob"].CoreV1().ConfigMaps("team").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "bobs"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mine.Labels = map[string]string{ttlLabel: "1s"}
	if _, err := as["bob"].CoreV1().ConfigMaps("team").Update(ctx, mine, metav1.UpdateOptions{}); !denied(err) {
		t.Errorf("bob labelled his ConfigMap with %s: %v", ttlLabel, err)
	}

	// carol may delete: her label stands, on a create and an update.
	hers, err := as["carol"].CoreV1().ConfigMaps("team").Create(ctx, labelled("carols", "1h"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("carol, who may delete ConfigMaps, could not create one with %s: %v", ttlLabel, err)
	}
	hers.Labels[ttlLabel] = "2h"
	if hers, err = as["carol"].CoreV1().ConfigMaps("team").Update(ctx, hers, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("carol could not change her %s: %v", ttlLabel, err)
	}

	// bob changes carol's ConfigMap and leaves the label: admitted; he
	// changes the label: denied.
	hers.Data = map[string]string{"by": "bob"}
	if hers, err = as["bob"].CoreV1().ConfigMaps("team").Update(ctx, hers, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("bob could not change data of a labelled ConfigMap: %v", err)
	}
	hers.Labels[ttlLabel] = "1s"
	if _, err := as["bob"].CoreV1().ConfigMaps("team").Update(ctx, hers, metav1.UpdateOptions{}); !denied(err) {
		t.Errorf("bob shortened carol's %s: %v", ttlLabel, err)
	}

	// Each denial is counted.
	if m := scrape(t, r.probe); !metricAbove(m, `verdict_webhook_ttl_label_checks_total{result="denied"}`, 2) {
		t.Errorf("denials not counted:\n%s", grep(m, "ttl_label"))
	}
}

// grep is the lines of s that contain sub.
func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
