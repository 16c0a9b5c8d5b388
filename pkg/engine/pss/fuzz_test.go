package pss

import (
	"encoding/json"
	"testing"
)

// FuzzCheck evaluates arbitrary documents and exclusions: Check must never
// panic, and must either fail with an error or return a consistent result.
func FuzzCheck(f *testing.F) {
	f.Add(`{"spec":{"containers":[{"name":"c","image":"nginx","securityContext":{"privileged":true}}]}}`,
		`[{"controlName":"Privileged Containers","images":["ngi*"]}]`, uint8(1))
	f.Add(`{"metadata":{"annotations":{"container.apparmor.security.beta.kubernetes.io/c":"x"}},"spec":{"securityContext":{"runAsUser":0,"sysctls":[{"name":"a"}]},"volumes":[{"name":"v","hostPath":{"path":"/"}}],"ephemeralContainers":[{"name":"e","ports":[{"hostPort":1}]}]}}`,
		`[{"controlName":"HostPath Volumes","restrictedField":"spec.volumes[*].hostPath","values":["/*"]},{"controlName":"Running as Non-root user"}]`, uint8(2))
	f.Add(`{"spec":{"containers":[{"name":"c","lifecycle":{"preStop":{"tcpSocket":{"host":"h"}}},"securityContext":{"capabilities":{"add":["X"]}}}]}}`,
		`[{"controlName":"Capabilities","images":["*"],"restrictedField":"spec.containers[*].securityContext.capabilities.add","values":["X"]}]`, uint8(0))
	levels := []string{"baseline", "restricted", "privileged"}
	versions := []string{"latest", "v1.0", "v1.18", "v1.24", "v1.30", "v1.35"}
	f.Fuzz(func(t *testing.T, podJSON, excludesJSON string, sel uint8) {
		var doc map[string]any
		if json.Unmarshal([]byte(podJSON), &doc) != nil {
			return
		}
		var excludes []Exclude
		_ = json.Unmarshal([]byte(excludesJSON), &excludes)
		level := levels[int(sel)%len(levels)]
		version := versions[int(sel/3)%len(versions)]
		res, err := Check(level, version, excludes, doc)
		if err != nil {
			return
		}
		if res.Allowed != (len(res.Failed) == 0) {
			t.Fatalf("Allowed=%v with %d failures", res.Allowed, len(res.Failed))
		}
		_ = res.Message("rule", level, version, "Deployment")
	})
}
