package patch

import "testing"

func TestMatchValue(t *testing.T) {
	tests := map[string]struct {
		value   any
		pattern any
		want    bool
	}{
		"exact string":              {"nginx", "nginx", true},
		"star":                      {"nginx:latest", "*:latest", true},
		"star mismatch":             {"nginx:1.2", "*:latest", false},
		"star matches empty":        {"", "*", true},
		"question needs one char":   {"", "?*", false},
		"question one char":         {"a", "?", true},
		"question two chars":        {"ab", "?", false},
		"empty pattern":             {"", "", true},
		"alternatives":              {"b", "a | b", true},
		"alternatives none":         {"c", "a|b", false},
		"conjunction":               {"abc", "a* & *c", true},
		"conjunction fails":         {"abd", "a* & *c", false},
		"not equal":                 {"nginx", "!redis", true},
		"not equal wildcard":        {"redis:1", "!redis*", false},
		"number greater":            {float64(3), ">1", true},
		"number not greater":        {float64(1), ">1", false},
		"number text greater equal": {"2", ">=2", true},
		"less equal":                {float64(2.5), "<=2.5", true},
		"less":                      {float64(4), "<4", false},
		"quantity greater":          {"2Gi", ">1Gi", true},
		"quantity mixed units":      {"1024Mi", "=1Gi", false}, // "=" is not an operator: string compare
		"quantity equal":            {"1024Mi", "1Gi", true},
		"quantity less":             {"500m", "<1", true},
		"duration":                  {"90s", ">1m", true},
		"duration equal":            {"60m", "1h", true},
		"in range":                  {float64(5), "1-10", true},
		"out of range":              {float64(11), "1-10", false},
		"not in range":              {float64(11), "1!-10", true},
		"not in range inside":       {float64(5), "1!-10", false},
		"range with units":          {"2Gi", "1Gi-4Gi", true},
		"null as zero":              {nil, "<1", true},
		"null string pattern":       {nil, "?*", false},
		"bool pattern":              {true, true, true},
		"bool pattern mismatch":     {"true", true, false},
		"bool as string pattern":    {true, "true", true},
		"number pattern":            {float64(3), float64(3), true},
		"number pattern from text":  {"3", float64(3), true},
		"number pattern mismatch":   {float64(3.5), float64(3), false},
		"nil pattern zero":          {float64(0), nil, true},
		"nil pattern empty string":  {"", nil, true},
		"nil pattern value":         {"x", nil, false},
		"map pattern":               {map[string]any{}, map[string]any{"a": "b"}, true},
		"map pattern scalar":        {"x", map[string]any{}, false},
		"list pattern":              {[]any{}, []any{}, false},
		"number equal wildcard":     {float64(3), "3", true},
		"string operators":          {"abc", ">abc", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := matchValue(tc.value, tc.pattern); got != tc.want {
				t.Errorf("matchValue(%#v, %#v) = %v, want %v", tc.value, tc.pattern, got, tc.want)
			}
		})
	}
}

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
			err := matchPattern(doc(t, pod), doc(t, tc.pattern))
			if (err == nil) != tc.match {
				t.Fatalf("match = %v (%v), want %v", err == nil, err, tc.match)
			}
			if err != nil && err.skips() != tc.skipKind {
				t.Errorf("skip kind = %v, want %v (%v)", err.skips(), tc.skipKind, err)
			}
		})
	}
}

func TestParseAnchor(t *testing.T) {
	tests := map[string]struct {
		in   string
		ok   bool
		kind anchorKind
		key  string
	}{
		"condition":      {"(name)", true, anchorCondition, "name"},
		"global":         {"<(name)", true, anchorGlobal, "name"},
		"add":            {"+(a.b/c)", true, anchorAddIfNotPresent, "a.b/c"},
		"equality":       {"=(x)", true, anchorEquality, "x"},
		"negation":       {"X(x)", true, anchorNegation, "x"},
		"existence":      {"^(x)", true, anchorExistence, "x"},
		"plain":          {"name", false, 0, ""},
		"empty key":      {"()", false, 0, ""},
		"empty modified": {"+()", false, 0, ""},
		"no paren":       {"+x)", false, 0, ""},
		"unknown":        {"Y(x)", false, 0, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a, ok := parseAnchor(tc.in)
			if ok != tc.ok || a.kind != tc.kind || a.key != tc.key {
				t.Fatalf("parseAnchor(%q) = %+v, %v", tc.in, a, ok)
			}
			if ok && a.String() != tc.in {
				t.Errorf("String() = %q, want %q", a.String(), tc.in)
			}
		})
	}
}
