package cleaner

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/queue"
)

func TestDueTime(t *testing.T) {
	created := time.Date(2026, 7, 18, 12, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		ttl  string
		want time.Time
		err  bool
	}{
		"go duration":  {ttl: "2h30m", want: created.Add(150 * time.Minute)},
		"seconds":      {ttl: "10s", want: created.Add(10 * time.Second)},
		"days":         {ttl: "1d", want: created.Add(24 * time.Hour)},
		"weeks":        {ttl: "2w", want: created.Add(14 * 24 * time.Hour)},
		"long unit":    {ttl: "3days", want: created.Add(72 * time.Hour)},
		"time":         {ttl: "2026-07-19T120000Z", want: time.Date(2026, 7, 19, 12, 0, 0, 0, time.UTC)},
		"date":         {ttl: "2026-07-19", want: time.Date(2026, 7, 19, 0, 0, 0, 0, time.UTC)},
		"garbage":      {ttl: "soon", err: true},
		"empty":        {ttl: "", err: true},
		"RFC 3339 too": {ttl: "2026-07-19T12:00:00Z", err: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := DueTime(tc.ttl, created)
			if tc.err {
				if err == nil {
					t.Fatalf("%q read as %s", tc.ttl, got)
				}
				return
			}
			if err != nil || !got.Equal(tc.want) {
				t.Fatalf("%q: %s, %v; want %s", tc.ttl, got, err, tc.want)
			}
		})
	}
}

func TestServerSpec(t *testing.T) {
	tests := map[string]struct {
		schedule, spec, tz, err string
	}{
		"five fields":         {schedule: "*/5 * * * *", spec: "0 */5 * * * *"},
		"names":               {schedule: "30 2 * jan mon-fri", spec: "0 30 2 * jan mon-fri"},
		"descriptor":          {schedule: "@hourly", spec: "@hourly"},
		"zone and fields":     {schedule: "CRON_TZ=Europe/Paris 0 3 * * *", spec: "0 0 3 * * *", tz: "Europe/Paris"},
		"zone and descriptor": {schedule: "TZ=UTC @daily", spec: "@daily", tz: "UTC"},
		"interval":            {schedule: "@every 90s", spec: "@every 1m30s"},
		"interval with zone":  {schedule: "TZ=UTC @every 1h", spec: "@every 1h0m0s"},
		"invalid":             {schedule: "* * *", err: "3 fields"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spec, tz, err := ServerSpec(tc.schedule)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one about %q", err, tc.err)
				}
				return
			}
			if err != nil || spec != tc.spec || tz != tc.tz {
				t.Fatalf("%q: spec %q zone %q, %v; want %q %q", tc.schedule, spec, tz, err, tc.spec, tc.tz)
			}
		})
	}
}

func TestPolicySchedule(t *testing.T) {
	v, err := document.Decode([]byte(`
apiVersion: verdict.dev/v1
kind: CleanupPolicy
metadata: {name: tmp, namespace: team, uid: u-1, generation: 3}
spec:
  schedule: "0 * * * *"
  match: {any: [{resources: {kinds: [ConfigMap]}}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.CleanupPolicyFromObject(v.(map[string]any))
	if err != nil {
		t.Fatal(err)
	}
	s, err := PolicySchedule(p)
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind != bus.WorkCleanup || s.Key != "CleanupPolicy/team/tmp" || s.Spec != "0 0 * * * *" || s.TimeZone != "" {
		t.Fatalf("schedule %+v", s)
	}
	tick, err := DecodeTick(s.Data)
	if err != nil {
		t.Fatal(err)
	}
	want := PolicyRef{Kind: policy.KindCleanupPolicy, Namespace: "team", Name: "tmp", UID: "u-1", Generation: 3, Schedule: "0 * * * *"}
	if tick.Action != TickPolicy || tick.Policy == nil || *tick.Policy != want {
		t.Fatalf("tick %+v", tick)
	}
	if ref := policyOfSchedule(s); ref == nil || *ref != want || ref.GVR(policycache.VerdictAPI) != CleanupPolicies || ref.GVR(policycache.KyvernoAPI).String() != "kyverno.io/v2, Resource=cleanuppolicies" || ref.String() != "team/tmp" {
		t.Fatalf("policy of the schedule %+v", ref)
	}
	ttl, _ := json.Marshal(Tick{Action: TickTTL})
	if policyOfSchedule(queue.Schedule{Data: ttl}) != nil {
		t.Fatal("the TTL schedule names a policy")
	}
}

func TestDecodeTick(t *testing.T) {
	for body, want := range map[string]string{
		`{"action":"ttl"}`: "",
		`{"action":"policy","policy":{"kind":"ClusterCleanupPolicy","name":"p","uid":"u"}}`: "",
		`not json`:            "decode tick",
		`{"action":"sweep"}`:  "unknown action",
		`{"action":"policy"}`: "names no cleanup policy",
		`{"action":"policy","policy":{"kind":"CleanupPolicy","name":"p"}}`: "names no cleanup policy",
		`{"action":"policy","policy":{"kind":"ClusterPolicy","name":"p"}}`: "names no cleanup policy",
	} {
		_, err := DecodeTick([]byte(body))
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: error %v, want %q", body, err, want)
		}
	}
}

func TestDeletionOutcome(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for err, want := range map[error]string{
		apierrors.NewNotFound(gr, "a"):                    DeletionNotFound,
		apierrors.NewConflict(gr, "a", errors.New("uid")): DeletionReplaced,
		apierrors.NewForbidden(gr, "a", errors.New("no")): DeletionFailed,
		apierrors.NewServiceUnavailable("down"):           DeletionFailed,
	} {
		if got := deletionOutcome(err); got != want {
			t.Errorf("%v: %s, want %s", err, got, want)
		}
	}
	if deletionOutcome(nil) != DeletionDeleted {
		t.Error("no error is not deleted")
	}
	if !permanent(apierrors.NewForbidden(gr, "a", errors.New("no"))) || permanent(apierrors.NewServiceUnavailable("down")) {
		t.Error("permanent")
	}
	if p := propagationOf(map[string]string{AnnotationPropagationPolicy: "Orphan"}); p == nil || *p != "Orphan" {
		t.Errorf("propagation %v", p)
	}
	if p := propagationOf(map[string]string{AnnotationPropagationPolicy: "Later"}); p != nil {
		t.Errorf("unknown propagation %v", *p)
	}
}
