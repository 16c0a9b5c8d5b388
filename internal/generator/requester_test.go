package generator

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/apicheck"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// resettable is a RESTMapper that forgets nothing.
type resettable struct{ meta.RESTMapper }

func (resettable) Reset() {}

// TestRequester: which requesters an item is worked with (issue 28,
// finding 2; TestE2EForgedRequester runs it against the API server).
func TestRequester(t *testing.T) {
	stored := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const grace = 30 * time.Second
	alice := engine.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}}
	tests := map[string]struct {
		verified   bool
		op         string
		cause      string
		created    time.Time
		user       engine.UserInfo
		background bool
		want       engine.UserInfo
		refused    bool
		dropped    float64
	}{
		"mutual TLS: kept":                       {verified: true, op: "UPDATE", created: stored.Add(-time.Hour), user: alice, want: alice},
		"a creation: kept":                       {op: "CREATE", created: stored.Add(200 * time.Millisecond), user: alice, want: alice},
		"a creation at the grace's end: kept":    {op: "CREATE", created: stored.Add(-grace), user: alice, want: alice},
		"an old trigger's CREATE: refused":       {op: "CREATE", created: stored.Add(-grace - 2*time.Second), user: alice, refused: true},
		"an UPDATE: refused":                     {op: "UPDATE", created: stored.Add(-time.Second), user: alice, refused: true},
		"an old trigger's CREATE, background":    {op: "CREATE", created: stored.Add(-time.Hour), user: alice, background: true, dropped: 1},
		"an UPDATE, background: dropped":         {op: "UPDATE", created: stored.Add(-time.Hour), user: alice, background: true, dropped: 1},
		"no requester claimed: nothing to check": {op: "UPDATE", created: stored.Add(-time.Hour)},
		"a drift item: not the admission's":      {op: "CREATE", cause: bus.CauseDrift, created: stored.Add(-time.Hour), user: alice, want: alice},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			check, err := apicheck.New(metadatafake.NewSimpleMetadataClient(runtime.NewScheme()), resettable{meta.NewDefaultRESTMapper(nil)}, apicheck.WithGrace(grace))
			if err != nil {
				t.Fatal(err)
			}
			m, err := NewMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			g := &Generator{check: check, m: m, o: options{log: zerolog.Nop()}}
			trigger := &unstructured.Unstructured{Object: map[string]any{}}
			trigger.SetCreationTimestamp(metav1.NewTime(tc.created))
			pol := &engine.Policy{Raw: &policy.Policy{Spec: policy.Spec{Background: &tc.background}}}
			item := bus.WorkItem{Operation: tc.op, Cause: tc.cause, UserInfo: tc.user, RequesterVerified: tc.verified}
			got, res, ok := g.requester(&queue.Msg{Subject: "verdict.work.generate.x", Published: stored}, item, trigger, pol)
			if ok == tc.refused {
				t.Fatalf("ok %v (%+v), want refused %v", ok, res, tc.refused)
			}
			if tc.refused {
				if res.Result(nil) != queue.ResultSkipped || res.Reason() != ReasonRequesterUnverified {
					t.Fatalf("refused as %s %s, want skipped %s", res.Result(nil), res.Reason(), ReasonRequesterUnverified)
				}
				if n := testutil.ToFloat64(m.requesters.WithLabelValues(tc.op, RequesterRefused)); n != 1 {
					t.Fatalf("refusals counted %v", n)
				}
				return
			}
			if got.Username != tc.want.Username || len(got.Groups) != len(tc.want.Groups) {
				t.Fatalf("requester %+v, want %+v", got, tc.want)
			}
			if n := testutil.ToFloat64(m.requesters.WithLabelValues(tc.op, RequesterDropped)); n != tc.dropped {
				t.Fatalf("dropped counted %v, want %v", n, tc.dropped)
			}
		})
	}
}
