package admissionfilter

import (
	"errors"
	"strings"
	"testing"
)

func TestParseResource(t *testing.T) {
	cases := map[string]struct {
		in   string
		want Resource
		err  bool
	}{
		"core":              {in: "nodes", want: Resource{Resource: "nodes"}},
		"grouped":           {in: "leases.coordination.k8s.io", want: Resource{Group: "coordination.k8s.io", Resource: "leases"}},
		"subresource":       {in: "pods/binding", want: Resource{Resource: "pods", Subresource: "binding"}},
		"grouped sub":       {in: "widgets.example.com/status", want: Resource{Group: "example.com", Resource: "widgets", Subresource: "status"}},
		"spaces":            {in: "  nodes ", want: Resource{Resource: "nodes"}},
		"empty":             {in: "", err: true},
		"kind not resource": {in: "Lease", err: true},
		"two subresources":  {in: "pods/a/b", err: true},
		"empty group part":  {in: "leases..k8s.io", err: true},
		"wildcard":          {in: "*", err: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseResource(tc.in)
			if tc.err {
				if !errors.Is(err, ErrInvalidResource) {
					t.Fatalf("ParseResource(%q) = %v, %v; want ErrInvalidResource", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseResource(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
			if back, _ := ParseResource(got.String()); back != got {
				t.Fatalf("String() %q does not read back", got.String())
			}
		})
	}
}

func TestSkips(t *testing.T) {
	f := New([]string{"verdict", "nats"}, []Resource{{Group: "example.com", Resource: "widgets", Subresource: "status"}})
	cases := map[string]struct {
		group, resource, sub, ns string
		want                     bool
	}{
		"node":                   {resource: "nodes", want: true},
		"node status":            {resource: "nodes", sub: "status", want: true},
		"lease anywhere":         {group: "coordination.k8s.io", resource: "leases", ns: "default", want: true},
		"core event":             {resource: "events", ns: "default", want: true},
		"events.k8s.io event":    {group: "events.k8s.io", resource: "events", ns: "default", want: true},
		"token review":           {group: "authentication.k8s.io", resource: "tokenreviews", want: true},
		"subject access review":  {group: "authorization.k8s.io", resource: "subjectaccessreviews", want: true},
		"pod binding":            {resource: "pods", sub: "binding", ns: "default", want: true},
		"policy report":          {group: "wgpolicyk8s.io", resource: "policyreports", ns: "default", want: true},
		"pod":                    {resource: "pods", ns: "default"},
		"pod exec":               {resource: "pods", sub: "exec", ns: "default"},
		"pod in kube-system":     {resource: "pods", ns: "kube-system", want: true},
		"kube-node-lease":        {resource: "configmaps", ns: "kube-node-lease", want: true},
		"kube-public":            {resource: "configmaps", ns: "kube-public", want: true},
		"own namespace":          {resource: "secrets", ns: "verdict", want: true},
		"nats namespace":         {resource: "pods", ns: "nats", want: true},
		"the Namespace itself":   {resource: "namespaces", ns: "kube-system", want: true},
		"another namespace":      {resource: "namespaces", ns: "team-a"},
		"extra subresource":      {group: "example.com", resource: "widgets", sub: "status", ns: "default", want: true},
		"extra, other":           {group: "example.com", resource: "widgets", ns: "default"},
		"cluster-scoped, no ns":  {group: "rbac.authorization.k8s.io", resource: "clusterroles"},
		"prefix is not the name": {resource: "pods", ns: "kube-systemx"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := f.Skips(tc.group, tc.resource, tc.sub, tc.ns); got != tc.want {
				t.Fatalf("Skips(%q, %q, %q, %q) = %v, want %v", tc.group, tc.resource, tc.sub, tc.ns, got, tc.want)
			}
		})
	}
	if got := (Filter{}).Skips("", "nodes", "", "kube-system"); got {
		t.Fatal("the zero Filter excludes something")
	}
}

func TestExpression(t *testing.T) {
	f := New(nil, nil)
	e := f.Expression()
	for _, want := range []string{
		`(request.resource.group == "coordination.k8s.io" && request.resource.resource == "leases")`,
		`(request.resource.group == "" && request.resource.resource == "pods" && has(request.subResource) && request.subResource == "binding")`,
		`(request.resource.group == "" && request.resource.resource == "nodes")`,
	} {
		if !strings.Contains(e, want) {
			t.Errorf("expression lacks %s", want)
		}
	}
	if !strings.HasPrefix(e, "!(") || New(nil, nil).Expression() != e {
		t.Fatalf("expression not negated or not deterministic: %s", e)
	}
}

// TestReaches: a webhook rule reaches an excluded resource when its
// groups and resources, with Kubernetes' wildcard and subresource forms,
// could select a request for it; only then does the webhook need the
// match condition.
func TestReaches(t *testing.T) {
	f := New(nil, []Resource{{Group: "example.com", Resource: "widgets", Subresource: "status"}})
	tests := []struct {
		groups, resources []string
		want              bool
	}{
		{[]string{""}, []string{"pods"}, false},
		{[]string{""}, []string{"pods", "pods/ephemeralcontainers"}, false},
		{[]string{""}, []string{"pods/*"}, true}, // pods/binding
		{[]string{""}, []string{"pods/binding"}, true},
		{[]string{""}, []string{"*/binding"}, true},
		{[]string{""}, []string{"pods/status"}, false},
		{[]string{""}, []string{"configmaps", "secrets"}, false},
		{[]string{""}, []string{"nodes"}, true},
		{[]string{""}, []string{"nodes/status"}, true}, // nodes covers its subresources
		{[]string{""}, []string{"*"}, true},
		{[]string{"apps"}, []string{"*"}, false},
		{[]string{"apps", "batch"}, []string{"deployments", "jobs", "*/scale"}, false},
		{[]string{"*"}, []string{"deployments"}, false},
		{[]string{"*"}, []string{"leases"}, true},
		{[]string{"coordination.k8s.io"}, []string{"leases"}, true},
		{[]string{"events.k8s.io"}, []string{"*/*"}, true},
		{[]string{"example.com"}, []string{"widgets"}, false}, // only widgets/status is excluded
		{[]string{"example.com"}, []string{"widgets/status"}, true},
		{[]string{"example.com"}, []string{"widgets/*"}, true},
		{[]string{"example.com"}, []string{"*/scale"}, false},
		{[]string{"verdict.dev"}, []string{"clusterpolicies", "policies"}, false},
	}
	for _, tc := range tests {
		if got := f.Reaches(tc.groups, tc.resources); got != tc.want {
			t.Errorf("Reaches(%v, %v) = %v, want %v", tc.groups, tc.resources, got, tc.want)
		}
	}
	if (Filter{}).Reaches([]string{"*"}, []string{"*/*"}) {
		t.Error("the zero filter excludes nothing, so nothing reaches it")
	}
}
