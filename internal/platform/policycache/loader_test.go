package policycache_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/verdict-dev/verdict/internal/platform/kubeutil"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/platform/policyhttp"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

func TestLoaderOptions(t *testing.T) {
	kube := &kubernetes.Clientset{}
	tests := map[string]struct {
		kube    kubernetes.Interface
		opts    []policycache.LoaderOption
		invalid bool
	}{
		"defaults":         {kube: kube},
		"bounds":           {kube: kube, opts: []policycache.LoaderOption{policycache.WithTimeout(time.Second), policycache.WithMaxBytes(64)}},
		"no client":        {invalid: true},
		"zero timeout":     {kube: kube, opts: []policycache.LoaderOption{policycache.WithTimeout(0)}, invalid: true},
		"negative timeout": {kube: kube, opts: []policycache.LoaderOption{policycache.WithTimeout(-time.Second)}, invalid: true},
		"zero max bytes":   {kube: kube, opts: []policycache.LoaderOption{policycache.WithMaxBytes(0)}, invalid: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l, err := policycache.NewLoader(tc.kube, tc.opts...)
			if tc.invalid {
				if !errors.Is(err, policycache.ErrInvalidOption) || l != nil {
					t.Fatalf("NewLoader = %v, %v; want an error wrapping ErrInvalidOption", l, err)
				}
				return
			}
			if err != nil || l == nil {
				t.Fatalf("NewLoader = %v, %v", l, err)
			}
		})
	}
}

// TestLoaderBounds checks that the options bound apiCall entries, against
// a stand-in API server.
func TestLoaderBounds(t *testing.T) {
	body := `{"kind":"ConfigMapList","apiVersion":"v1","items":[{"metadata":{"name":"a-config-map-with-a-long-name"}}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		opts    []policycache.LoaderOption
		path    string
		wantErr error
	}{
		"within the limits": {opts: []policycache.LoaderOption{policycache.WithMaxBytes(len(body))}, path: "/api/v1/configmaps"},
		"too large":         {opts: []policycache.LoaderOption{policycache.WithMaxBytes(len(body) - 1)}, path: "/api/v1/configmaps", wantErr: policycache.ErrResponseTooLarge},
		"too slow":          {opts: []policycache.LoaderOption{policycache.WithTimeout(50 * time.Millisecond)}, path: "/slow", wantErr: context.DeadlineExceeded},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l, err := policycache.NewLoader(kube, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = l.APICall(t.Context(), &policy.APICall{URLPath: tc.path})
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("took %s", took)
			}
			if tc.wantErr == nil && err != nil {
				t.Fatalf("APICall: %v", err)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("APICall error = %v, want one wrapping %v", err, tc.wantErr)
			}
		})
	}
}

// TestLoaderServiceCalls: apiCall entries with a service (and so CEL's
// http calls) are refused unless the operator enabled them; enabled, they
// reach the service with their data and headers, and its JSON answer is
// the entry's value; the default blocklist keeps loopback out of reach.
func TestLoaderServiceCalls(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = fmt.Fprintf(w, `{"method": %q, "team": %q, "body": %s}`, r.Method, r.Header.Get("X-Team"), b)
	}))
	defer srv.Close()
	call := &policy.APICall{Method: "POST", Service: &policy.ServiceCall{URL: srv.URL + "/check", Headers: []any{map[string]any{"key": "X-Team", "value": "payments"}}},
		Data: []policy.RequestData{{Key: "image", Value: "nginx"}}}
	kube := &kubernetes.Clientset{}

	off, err := policycache.NewLoader(kube)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := off.APICall(t.Context(), call); !errors.Is(err, policyhttp.ErrDisabled) {
		t.Fatalf("a service call, disabled: %v", err)
	}

	hc, err := policyhttp.New(policyhttp.Config{Enabled: true, Blocklist: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	on, err := policycache.NewLoader(kube, policycache.WithHTTP(hc))
	if err != nil {
		t.Fatal(err)
	}
	got, err := on.APICall(t.Context(), call)
	want := map[string]any{"method": "POST", "team": "payments", "body": map[string]any{"image": "nginx"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("a service call: %v, %v; want %v", got, err, want)
	}

	hc, err = policyhttp.New(policyhttp.Config{Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	guarded, err := policycache.NewLoader(kube, policycache.WithHTTP(hc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := guarded.APICall(t.Context(), call); !errors.Is(err, policyhttp.ErrBlocked) {
		t.Fatalf("a call to loopback under the default blocklist: %v", err)
	}
}

// TestNamespacedPolicyHTTP: a namespaced policy's http.Get is refused
// unless the operator allowed namespaced policies to call; a cluster-wide
// policy's same call goes through.
func TestNamespacedPolicyHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"allowed": true}`))
	}))
	defer srv.Close()
	const vpol = `apiVersion: policies.kyverno.io/v1
kind: KIND
metadata: {name: ask, namespace: team}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  validations:
  - expression: "http.Get('URL/check').allowed"
`
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "team"}}
	for _, tc := range []struct {
		kind            string
		allowNamespaced bool
		wantStatus      engine.Status
		wantMessageHas  string
	}{
		{kind: "ValidatingPolicy", wantStatus: engine.StatusPass},
		{kind: "NamespacedValidatingPolicy", wantStatus: engine.StatusError, wantMessageHas: "namespaced policies may not call services"},
		{kind: "NamespacedValidatingPolicy", allowNamespaced: true, wantStatus: engine.StatusPass},
	} {
		hc, err := policyhttp.New(policyhttp.Config{Enabled: true, Blocklist: []string{}, AllowNamespacedPolicies: tc.allowNamespaced})
		if err != nil {
			t.Fatal(err)
		}
		l, err := policycache.NewLoader(&kubernetes.Clientset{}, policycache.WithHTTP(hc))
		if err != nil {
			t.Fatal(err)
		}
		eng, err := engine.New(engine.WithContextLoader(l))
		if err != nil {
			t.Fatal(err)
		}
		docs, err := policy.Parse([]byte(strings.NewReplacer("KIND", tc.kind, "URL", srv.URL).Replace(vpol)), "test")
		if err != nil {
			t.Fatal(err)
		}
		p, err := eng.Compile(docs.Policies[0])
		if err != nil {
			t.Fatal(err)
		}
		resp := eng.Validate(t.Context(), &engine.Request{Operation: engine.OpCreate, Object: cm}, p, nil)
		if len(resp.Rules) != 1 || resp.Rules[0].Status != tc.wantStatus || !strings.Contains(resp.Rules[0].Message, tc.wantMessageHas) {
			t.Errorf("%s (namespaced allowed: %v): %+v", tc.kind, tc.allowNamespaced, resp.Rules)
		}
	}
}

// TestLoaderProtectsVerdictSecrets: with Verdict's namespace protected,
// no apiCall reaches its Secrets, by name or listed, whatever the policy
// and the service account's rights; a list of every namespace's Secrets
// comes back without Verdict's; other namespaces' Secrets and other
// kinds are called, with their query as written; a watch is no answer.
func TestLoaderProtectsVerdictSecrets(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.URL.RequestURI())
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"SecretList","items":[{"metadata":{"name":"ca","namespace":"verdict"}},{"metadata":{"name":"regcred","namespace":"team"}}]}`))
	}))
	defer srv.Close()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	l, err := policycache.NewLoader(kube, policycache.WithProtectedNamespace("verdict"))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		path string
		// reached is the request the API server gets ("": refused with
		// refusedBy, before any call).
		reached   string
		refusedBy error
		// names are the items of the answer.
		names []string
	}{
		"the CA's Secret":              {path: "/api/v1/namespaces/verdict/secrets/verdict-webhook-ca", refusedBy: kubeutil.ErrProtected},
		"Verdict's Secrets, listed":    {path: "/api/v1/namespaces/verdict/secrets", refusedBy: kubeutil.ErrProtected},
		"climbing into Verdict's":      {path: "/api/v1/namespaces/team/../verdict/secrets/verdict-webhook-ca", refusedBy: kubeutil.ErrProtected},
		"Verdict's Secrets, watched":   {path: "/api/v1/watch/namespaces/verdict/secrets", refusedBy: kubeutil.ErrProtected},
		"a watch":                      {path: "/api/v1/secrets?watch=true", refusedBy: policy.ErrAPICallRefused},
		"every namespace's Secrets":    {path: "/api/v1/secrets", reached: "/api/v1/secrets", names: []string{"regcred"}},
		"another namespace's Secrets":  {path: "/api/v1/namespaces/team/secrets", reached: "/api/v1/namespaces/team/secrets", names: []string{"ca", "regcred"}},
		"Verdict's ConfigMaps":         {path: "/api/v1/namespaces/verdict/configmaps", reached: "/api/v1/namespaces/verdict/configmaps", names: []string{"ca", "regcred"}},
		"a list with a label selector": {path: "/api/v1/namespaces/team/pods?labelSelector=app%3Dweb", reached: "/api/v1/namespaces/team/pods?labelSelector=app%3Dweb", names: []string{"ca", "regcred"}},
		"a group's resource":           {path: "/apis/apps/v1/namespaces/team/deployments", reached: "/apis/apps/v1/namespaces/team/deployments", names: []string{"ca", "regcred"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			seen = nil
			got, err := l.APICall(t.Context(), &policy.APICall{URLPath: tc.path})
			if tc.reached == "" {
				if !errors.Is(err, tc.refusedBy) || !errors.Is(err, policy.ErrRefused) || len(seen) != 0 {
					t.Fatalf("err %v, the API server saw %q: want a refusal (%v) before any call", err, seen, tc.refusedBy)
				}
				return
			}
			if err != nil || len(seen) != 1 || seen[0] != tc.reached {
				t.Fatalf("err %v, the API server saw %q, want %q", err, seen, tc.reached)
			}
			var names []string
			items, _ := got.(map[string]any)["items"].([]any)
			for _, it := range items {
				names = append(names, it.(map[string]any)["metadata"].(map[string]any)["name"].(string))
			}
			if !reflect.DeepEqual(names, tc.names) {
				t.Fatalf("items %v, want %v", names, tc.names)
			}
		})
	}
}
