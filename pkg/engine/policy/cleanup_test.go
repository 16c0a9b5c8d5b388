package policy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine/document"
)

func cleanupObject(t *testing.T, y string) map[string]any {
	t.Helper()
	v, err := document.Decode([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return v.(map[string]any)
}

func TestCleanupPolicyFromObject(t *testing.T) {
	tests := map[string]struct {
		doc string
		// errs are substrings each expected in the error ("path: message").
		errs []string
	}{
		"valid cluster policy": {doc: `
apiVersion: kyverno.io/v2
kind: ClusterCleanupPolicy
metadata: {name: old-pods}
spec:
  schedule: "*/5 * * * *"
  context:
  - name: limit
    variable: {value: 3}
  match: {any: [{resources: {kinds: [Pod], namespaces: [dev-*], selector: {matchLabels: {app: x}}}}]}
  exclude: {any: [{resources: {names: [keep-*]}}]}
  conditions:
    all:
    - key: "{{ target.status.phase }}"
      operator: Equals
      value: Succeeded
  deletionPropagationPolicy: Foreground`},
		"valid namespaced policy with a time zone": {doc: `
apiVersion: verdict.dev/v1
kind: CleanupPolicy
metadata: {name: p, namespace: team}
spec:
  schedule: "CRON_TZ=Europe/Paris 0 3 * * mon-fri"
  match: {all: [{resources: {kinds: [apps/v1/Deployment, v1/ConfigMap]}}]}`},
		"no schedule": {doc: `
kind: ClusterCleanupPolicy
metadata: {name: p}
spec: {match: {any: [{resources: {kinds: [Pod]}}]}}`, errs: []string{"spec.schedule: a cron schedule is required"}},
		"bad cron": {doc: `
kind: ClusterCleanupPolicy
metadata: {name: p}
spec: {schedule: "61 * * * *", match: {any: [{resources: {kinds: [Pod]}}]}}`, errs: []string{"spec.schedule", "minute", "above the maximum 59"}},
		"six fields": {doc: `
kind: ClusterCleanupPolicy
metadata: {name: p}
spec: {schedule: "0 * * * * *", match: {any: [{resources: {kinds: [Pod]}}]}}`, errs: []string{"6 fields, want 5"}},
		"unknown field": {doc: `
kind: ClusterCleanupPolicy
metadata: {name: p}
spec: {schedule: "@hourly", match: {any: [{resources: {kinds: [Pod]}}]}, shedule: x}`, errs: []string{`spec.shedule: unknown field "shedule"`}},
		"legacy inline match": {doc: `
kind: ClusterCleanupPolicy
metadata: {name: p}
spec: {schedule: "@hourly", match: {resources: {kinds: [Pod]}}}`, errs: []string{`spec.match.resources: unknown field "resources"`}},
		"user info": {doc: `
kind: ClusterCleanupPolicy
metadata: {name: p}
spec: {schedule: "@hourly", match: {any: [{resources: {kinds: [Pod]}, roles: [admin]}]}}`, errs: []string{"spec.match.any[0].roles: user info is not allowed"}},
		"no kind": {doc: `
kind: ClusterCleanupPolicy
metadata: {name: p}
spec: {schedule: "@hourly", match: {any: [{resources: {names: [x]}}]}}`, errs: []string{"spec.match: at least one kind is required"}},
		"wildcard kind": {doc: `
kind: ClusterCleanupPolicy
metadata: {name: p}
spec: {schedule: "@hourly", match: {any: [{resources: {kinds: ["*"]}}]}}`, errs: []string{"spec.match.any[0].resources.kinds[0]", "without wildcards"}},
		"subresource": {doc: `
kind: ClusterCleanupPolicy
metadata: {name: p}
spec: {schedule: "@hourly", match: {any: [{resources: {kinds: [Pod/status]}}]}}`, errs: []string{"subresources cannot be cleaned up"}},
		"namespaces in a namespaced policy": {doc: `
kind: CleanupPolicy
metadata: {name: p, namespace: team}
spec: {schedule: "@hourly", match: {any: [{resources: {kinds: [Pod], namespaces: [other]}}]}}`, errs: []string{"spec.match.any[0].resources.namespaces: a namespaced cleanup policy cannot filter namespaces"}},
		"exclude equals match": {doc: `
kind: ClusterCleanupPolicy
metadata: {name: p}
spec:
  schedule: "@hourly"
  match: {any: [{resources: {kinds: [Pod]}}]}
  exclude: {any: [{resources: {kinds: [Pod]}}]}`, errs: []string{"matches an empty set"}},
		"configMap context": {doc: `
kind: ClusterCleanupPolicy
metadata: {name: p}
spec:
  schedule: "@hourly"
  context: [{name: cm, configMap: {name: x, namespace: y}}]
  match: {any: [{resources: {kinds: [Pod]}}]}`, errs: []string{"spec.context[0].configMap: is not allowed"}},
		"bad condition": {doc: `
kind: ClusterCleanupPolicy
metadata: {name: p}
spec:
  schedule: "@hourly"
  match: {any: [{resources: {kinds: [Pod]}}]}
  conditions: {any: [{key: "{{ target.metadata.name[ }}", operator: Equalz, value: x}]}`, errs: []string{"spec.conditions.any[0].operator: unknown operator", "spec.conditions.any[0].key: invalid JMESPath"}},
		"bad propagation": {doc: `
kind: ClusterCleanupPolicy
metadata: {name: p}
spec: {schedule: "@daily", match: {any: [{resources: {kinds: [Pod]}}]}, deletionPropagationPolicy: Later}`, errs: []string{"spec.deletionPropagationPolicy: must be Foreground, Background or Orphan"}},
		"not a cleanup policy": {doc: `
kind: ClusterPolicy
metadata: {name: p}
spec: {schedule: "@daily", match: {any: [{resources: {kinds: [Pod]}}]}}`, errs: []string{"kind: must be ClusterCleanupPolicy or CleanupPolicy"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := CleanupPolicyFromObject(cleanupObject(t, tc.doc))
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if p.Key() == "" {
					t.Fatal("no key")
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want errors %q", tc.errs)
			}
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Errorf("error %v does not wrap ErrInvalidPolicy", err)
			}
			for _, want := range tc.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

func TestParseCronSchedule(t *testing.T) {
	tests := map[string]struct {
		spec string
		want CronSchedule
		err  string
	}{
		"every minute":      {spec: "* * * * *", want: CronSchedule{Fields: []string{"*", "*", "*", "*", "*"}}},
		"steps and ranges":  {spec: " */15 8-18/2 1,15 jan-jun MON-FRI ", want: CronSchedule{Fields: []string{"*/15", "8-18/2", "1,15", "jan-jun", "MON-FRI"}}},
		"question marks":    {spec: "0 0 ? * ?", want: CronSchedule{Fields: []string{"0", "0", "?", "*", "?"}}},
		"value with a step": {spec: "5/10 * * * *", want: CronSchedule{Fields: []string{"5/10", "*", "*", "*", "*"}}},
		"descriptor":        {spec: "@daily", want: CronSchedule{Descriptor: "@daily"}},
		"every":             {spec: "@every 90s", want: CronSchedule{Every: 90 * time.Second}},
		"every rounded":     {spec: "@every 1500ms", want: CronSchedule{Every: time.Second}},
		"every below 1s":    {spec: "@every 10ms", want: CronSchedule{Every: time.Second}},
		"time zone":         {spec: "TZ=UTC 0 3 * * *", want: CronSchedule{TimeZone: "UTC", Fields: []string{"0", "3", "*", "*", "*"}}},
		"cron time zone":    {spec: "CRON_TZ=Europe/Paris @hourly", want: CronSchedule{TimeZone: "Europe/Paris", Descriptor: "@hourly"}},
		"empty":             {spec: " ", err: "required"},
		"four fields":       {spec: "* * * *", err: "4 fields"},
		"bad name":          {spec: "0 0 * foo *", err: "month"},
		"name in minutes":   {spec: "jan * * * *", err: "minute"},
		"zero day":          {spec: "0 0 0 * *", err: "below the minimum 1"},
		"day of week 7":     {spec: "0 0 * * 7", err: "above the maximum 6"},
		"reversed range":    {spec: "30-10 * * * *", err: "starts after it ends"},
		"zero step":         {spec: "*/0 * * * *", err: "step"},
		"two slashes":       {spec: "*/2/3 * * * *", err: "too many slashes"},
		"two hyphens":       {spec: "1-2-3 * * * *", err: "too many hyphens"},
		"negative":          {spec: "-1 * * * *", err: "number"},
		"unknown zone":      {spec: "TZ=Mars/Olympus * * * * *", err: "time zone"},
		"zone only":         {spec: "TZ=UTC", err: "nothing to schedule"},
		"bad descriptor":    {spec: "@sometimes", err: "unknown descriptor"},
		"bad every":         {spec: "@every soon", err: "soon"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseCronSchedule(tc.spec)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one about %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.TimeZone != tc.want.TimeZone || got.Every != tc.want.Every || got.Descriptor != tc.want.Descriptor || strings.Join(got.Fields, " ") != strings.Join(tc.want.Fields, " ") {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
