package pattern

import (
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine/document"
)

func mustDecode(t testing.TB, s string) any {
	t.Helper()
	v, err := document.Decode([]byte(s))
	if err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return v
}

func TestValidate(t *testing.T) {
	pod := `
metadata:
  name: web
  labels: {app: web, tier: front}
  annotations: {fluxcd.io/automated: "true"}
spec:
  hostNetwork: false
  containers:
  - name: nginx
    image: nginx:1.25
    imagePullPolicy: Always
    resources: {limits: {memory: 512Mi, cpu: 500m}}
    securityContext: {runAsNonRoot: true, runAsUser: 1000}
  - name: sidecar
    image: busybox:latest
    securityContext: {privileged: true}
  volumes:
  - name: data
    hostPath: {path: /var/log}
`
	tests := map[string]struct {
		pattern string
		want    string // "", "fail", "skip"
		path    string
	}{
		"plain value":                   {`{metadata: {labels: {app: web}}}`, "", ""},
		"plain value mismatch":          {`{metadata: {labels: {app: api}}}`, "fail", "/metadata/labels/app/"},
		"missing key fails":             {`{metadata: {labels: {team: "?*"}}}`, "fail", "/metadata/labels/team/"},
		"star requires presence":        {`{metadata: {labels: {team: "*"}}}`, "fail", "/metadata/labels/"},
		"wildcard value":                {`{spec: {containers: [{image: "*:*"}]}}`, "", ""},
		"or operator":                   {`{spec: {containers: [{image: "nginx:*|busybox:*"}]}}`, "", ""},
		"negation value":                {`{spec: {containers: [{image: "!*:latest"}]}}`, "fail", "/spec/containers/1/image/"},
		"quantity less":                 {`{spec: {containers: [{(name): nginx, resources: {limits: {memory: "<=1Gi"}}}]}}`, "", ""},
		"quantity greater fails":        {`{spec: {containers: [{(name): nginx, resources: {limits: {memory: ">1Gi"}}}]}}`, "fail", "/spec/containers/0/resources/limits/memory/"},
		"range":                         {`{spec: {containers: [{(name): nginx, securityContext: {runAsUser: "100-2000"}}]}}`, "", ""},
		"not in range":                  {`{spec: {containers: [{(name): nginx, securityContext: {runAsUser: "100!-2000"}}]}}`, "fail", "/spec/containers/0/securityContext/runAsUser/"},
		"and operator":                  {`{spec: {containers: [{(name): nginx, securityContext: {runAsUser: ">0 & <5000"}}]}}`, "", ""},
		"condition selects elements":    {`{spec: {containers: [{(image): "*:latest", imagePullPolicy: Always}]}}`, "fail", "/spec/containers/1/imagePullPolicy/"},
		"condition holds nowhere skips": {`{spec: {containers: [{(image): "*:edge", imagePullPolicy: Always}]}}`, "skip", ""},
		"top condition skips":           {`{metadata: {(name): other}, spec: {hostNetwork: true}}`, "skip", ""},
		"equality anchor absent ok":     {`{spec: {=(hostPID): false}}`, "", ""},
		"equality anchor present":       {`{spec: {=(hostNetwork): true}}`, "fail", "/spec/hostNetwork/"},
		"negation anchor":               {`{spec: {volumes: [{X(hostPath): "null"}]}}`, "fail", "/spec/volumes/0/hostPath/"},
		"negation anchor absent":        {`{spec: {X(hostIPC): "null"}}`, "", ""},
		"existence anchor":              {`{spec: {^(containers): [{image: "busybox:*"}]}}`, "", ""},
		"existence anchor fails":        {`{spec: {^(containers): [{image: "redis:*"}]}}`, "fail", "/spec/containers/"},
		"global anchor skips":           {`{spec: {containers: [{<(image): "redis:*", name: x}]}}`, "skip", ""},
		"global anchor holds":           {`{spec: {containers: [{<(image): "*", securityContext: {=(privileged): false}}]}}`, "fail", "/spec/containers/1/securityContext/privileged/"},
		"scalar list pattern":           {`{spec: {containers: [{name: "?*"}]}}`, "", ""},
		"bool mismatch":                 {`{spec: {hostNetwork: true}}`, "fail", "/spec/hostNetwork/"},
		"number as string":              {`{spec: {containers: [{(name): nginx, securityContext: {runAsUser: "1000"}}]}}`, "", ""},
		"structure mismatch":            {`{spec: {hostNetwork: {a: b}}}`, "fail", "/spec/hostNetwork/"},
		"wildcard annotation key":       {`{metadata: {=(annotations): {X(fluxcd.io/*): "*?"}}}`, "fail", "/metadata/annotations/fluxcd.io/automated/"},
		"wildcard label key matches":    {`{metadata: {labels: {"ti*": front}}}`, "", ""},
		"missing numeric lt passes":     {`{spec: {priority: "<10"}}`, "", ""},
	}
	res := mustDecode(t, pod)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := Validate(res, mustDecode(t, tc.pattern))
			switch tc.want {
			case "":
				if err != nil {
					t.Fatalf("want pass, got %v (path %s)", err, err.Path)
				}
			case "fail":
				if err == nil || err.Skip() {
					t.Fatalf("want fail, got %v", err)
				}
				if err.Path != tc.path {
					t.Fatalf("path = %q, want %q (%s)", err.Path, tc.path, err.Msg)
				}
			case "skip":
				if err == nil || !err.Skip() {
					t.Fatalf("want skip, got %v", err)
				}
			}
		})
	}
}

// FuzzValidate feeds arbitrary resources and patterns: validation must
// never panic and a pattern always matches a resource equal to itself when
// neither uses operators.
func FuzzValidate(f *testing.F) {
	f.Add(`{a: 1}`, `{a: ">0"}`)
	f.Add(`{spec: {containers: [{name: x, image: y}]}}`, `{spec: {containers: [{(name): "x*", image: "!z"}]}}`)
	f.Add(`[1, 2]`, `[{X(a): null}]`)
	f.Add(`{m: {^(l): [{a: b}]}}`, `{m: {l: [{a: b}]}}`)
	f.Fuzz(func(t *testing.T, res, pat string) {
		r, err := document.Decode([]byte(res))
		if err != nil {
			return
		}
		p, err := document.Decode([]byte(pat))
		if err != nil {
			return
		}
		_ = Validate(r, p)
		for _, v := range []string{"*", "?", "!", "|", "&", ">", "<", "(", ")", "-"} {
			if containsString(r, v) {
				return
			}
		}
		if err := Validate(r, r); err != nil {
			if _, isArr := r.([]any); isArr {
				return // an array pattern uses only its first element
			}
			if hasEmptyArray(r) || hasNestedArrays(r) {
				return
			}
			t.Fatalf("resource %s does not match itself: %v", res, err)
		}
	})
}

func containsString(v any, sub string) bool {
	switch t := v.(type) {
	case string:
		return len(t) == 0 || stringsContains(t, sub)
	case map[string]any:
		for k, e := range t {
			if stringsContains(k, sub) || containsString(e, sub) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if containsString(e, sub) {
				return true
			}
		}
	}
	return false
}

func hasEmptyArray(v any) bool {
	switch t := v.(type) {
	case []any:
		if len(t) == 0 {
			return true
		}
		for _, e := range t {
			if hasEmptyArray(e) {
				return true
			}
		}
	case map[string]any:
		for _, e := range t {
			if hasEmptyArray(e) {
				return true
			}
		}
	}
	return false
}

// hasNestedArrays reports lists whose elements differ in shape: a pattern
// list applies its first element to every resource element.
func hasNestedArrays(v any) bool {
	switch t := v.(type) {
	case []any:
		if len(t) > 1 {
			return true
		}
		for _, e := range t {
			if hasNestedArrays(e) {
				return true
			}
		}
	case map[string]any:
		for _, e := range t {
			if hasNestedArrays(e) {
				return true
			}
		}
	}
	return false
}

func stringsContains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
