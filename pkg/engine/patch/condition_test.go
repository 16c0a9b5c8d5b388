package patch

import "testing"

func TestMatchPattern(t *testing.T) {
	const pod = `
metadata:
  labels: {app: web, app.kubernetes.io/name: web}
spec:
  hostNetwork: false
  securityContext: {runAsNonRoot: true}
  containers:
  - {name: a, image: "a:1", ports: [{containerPort: 80}]}
  - {name: b, image: "b:latest"}
`
	tests := map[string]struct {
		pattern  string
		match    bool
		skipKind bool // mismatch raised by a conditional or global anchor
	}{
		"plain keys":                    {`{spec: {hostNetwork: false}}`, true, false},
		"plain key mismatch":            {`{spec: {hostNetwork: true}}`, false, false},
		"star requires key":             {`{spec: {dnsPolicy: "*"}}`, false, false},
		"equality anchor absent":        {`{spec: {=(dnsPolicy): None}}`, true, false},
		"equality anchor present":       {`{spec: {=(hostNetwork): true}}`, false, false},
		"negation anchor absent":        {`{spec: {X(hostPID): "*"}}`, true, false},
		"negation anchor present":       {`{spec: {X(hostNetwork): "*"}}`, false, false},
		"existence anchor":              {`{spec: {^(containers): [{image: "*:latest"}]}}`, true, false},
		"existence anchor none":         {`{spec: {^(containers): [{image: "*:2"}]}}`, false, false},
		"all list elements must match":  {`{spec: {containers: [{image: "*:latest"}]}}`, false, false},
		"conditional element filter":    {`{spec: {containers: [{(name): b, image: "*:latest"}]}}`, true, false},
		"conditional element none":      {`{spec: {containers: [{(name): c, image: "*:latest"}]}}`, false, true},
		"conditional key missing":       {`{spec: {(dnsPolicy): None}}`, false, true},
		"global anchor absent":          {`{spec: {<(dnsPolicy): None}}`, true, false},
		"global anchor mismatch":        {`{spec: {<(hostNetwork): true}}`, false, true},
		"scalar list pattern":           {`{spec: {containers: [{ports: [{containerPort: ">10"}]}]}}`, false, false},
		"label wildcard key":            {`{metadata: {labels: {"app.kubernetes.io/*": web}}}`, true, false},
		"label wildcard key mismatch":   {`{metadata: {labels: {"app.kubernetes.io/*": db}}}`, false, false},
		"nested map":                    {`{spec: {securityContext: {runAsNonRoot: true}}}`, true, false},
		"map against scalar":            {`{spec: {hostNetwork: {a: b}}}`, false, false},
		"empty list pattern":            {`{spec: {containers: []}}`, false, false},
		"scalar pattern over list":      {`{spec: {containers: "*"}}`, true, false},
		"conditional then plain inside": {`{spec: {containers: [{(name): a, ports: [{containerPort: 80}]}]}}`, true, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := matchPattern(doc(t, pod), doc(t, tc.pattern), nil)
			if (err == nil) != tc.match {
				t.Fatalf("match = %v (%v), want %v", err == nil, err, tc.match)
			}
			if err != nil && err.skips() != tc.skipKind {
				t.Errorf("skip kind = %v, want %v (%v)", err.skips(), tc.skipKind, err)
			}
		})
	}
}
