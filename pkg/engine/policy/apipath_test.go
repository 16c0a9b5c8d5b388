package policy

import (
	"errors"
	"testing"
)

// TestConfineAPICall: a namespaced policy's apiCall reaches its own
// namespace only, however the path is spelled (escapes, `..`, doubled
// slashes, the legacy watch prefix, a URL with a host); every policy may
// POST only reviews. The path passed on is the one checked.
func TestConfineAPICall(t *testing.T) {
	tests := map[string]struct {
		namespace, method, path string
		want                    string
		err                     error
	}{
		"own namespace":                       {namespace: "team-a", path: "/api/v1/namespaces/team-a/configmaps/db", want: "/api/v1/namespaces/team-a/configmaps/db"},
		"own namespace, a group":              {namespace: "team-a", path: "/apis/apps/v1/namespaces/team-a/deployments", want: "/apis/apps/v1/namespaces/team-a/deployments"},
		"own Namespace object":                {namespace: "team-a", path: "/api/v1/namespaces/team-a", want: "/api/v1/namespaces/team-a"},
		"query kept":                          {namespace: "team-a", path: "/api/v1/namespaces/team-a/pods?labelSelector=app%3Dweb", want: "/api/v1/namespaces/team-a/pods?labelSelector=app%3Dweb"},
		"doubled slashes cleaned":             {namespace: "team-a", path: "/api/v1//namespaces/team-a//pods/", want: "/api/v1/namespaces/team-a/pods"},
		"another namespace":                   {namespace: "team-a", path: "/api/v1/namespaces/team-b/configmaps/db", err: ErrOutsideNamespace},
		"climbing out":                        {namespace: "team-a", path: "/api/v1/namespaces/team-a/../verdict/secrets/verdict-webhook-ca", err: ErrOutsideNamespace},
		"climbing out, escaped dots":          {namespace: "team-a", path: "/api/v1/namespaces/team-a/%2e%2e/verdict/secrets", err: ErrOutsideNamespace},
		"climbing out, escaped slash":         {namespace: "team-a", path: "/api/v1/namespaces/team-a%2f..%2fverdict/secrets", err: ErrOutsideNamespace},
		"climbing above the root":             {namespace: "team-a", path: "/../../api/v1/secrets", err: ErrOutsideNamespace},
		"cluster-wide list":                   {namespace: "team-a", path: "/api/v1/secrets", err: ErrOutsideNamespace},
		"cluster-scoped kind":                 {namespace: "team-a", path: "/apis/rbac.authorization.k8s.io/v1/clusterroles", err: ErrOutsideNamespace},
		"another Namespace object":            {namespace: "team-a", path: "/api/v1/namespaces/kube-system", err: ErrOutsideNamespace},
		"every Namespace":                     {namespace: "team-a", path: "/api/v1/namespaces", err: ErrOutsideNamespace},
		"watch of its own namespace":          {namespace: "team-a", path: "/api/v1/watch/namespaces/team-a/pods", err: ErrOutsideNamespace},
		"not a resource path":                 {namespace: "team-a", path: "/version", err: ErrOutsideNamespace},
		"a URL with a host":                   {namespace: "team-a", path: "https://10.0.0.1/api/v1/namespaces/team-a/pods", err: ErrAPICallRefused},
		"a scheme-relative URL":               {namespace: "team-a", path: "//10.0.0.1/api/v1/namespaces/team-a/pods", err: ErrAPICallRefused},
		"a relative path":                     {namespace: "team-a", path: "api/v1/namespaces/team-a/pods", err: ErrAPICallRefused},
		"POST creating in its namespace":      {namespace: "team-a", method: "POST", path: "/api/v1/namespaces/team-a/resourcequotas", err: ErrAPICallRefused},
		"POST a local review":                 {namespace: "team-a", method: "post", path: "/apis/authorization.k8s.io/v1/namespaces/team-a/localsubjectaccessreviews", want: "/apis/authorization.k8s.io/v1/namespaces/team-a/localsubjectaccessreviews"},
		"POST a cluster review":               {namespace: "team-a", method: "POST", path: "/apis/authorization.k8s.io/v1/subjectaccessreviews", err: ErrOutsideNamespace},
		"DELETE":                              {namespace: "team-a", method: "DELETE", path: "/api/v1/namespaces/team-a/pods/x", err: ErrAPICallRefused},
		"cluster policy, any namespace":       {path: "/api/v1/namespaces/team-b/configmaps/db", want: "/api/v1/namespaces/team-b/configmaps/db"},
		"cluster policy, cluster-wide":        {path: "/api/v1/namespaces", want: "/api/v1/namespaces"},
		"cluster policy, POST a review":       {method: "POST", path: "/apis/authorization.k8s.io/v1/subjectaccessreviews", want: "/apis/authorization.k8s.io/v1/subjectaccessreviews"},
		"cluster policy, POST a token review": {method: "POST", path: "/apis/authentication.k8s.io/v1/tokenreviews", want: "/apis/authentication.k8s.io/v1/tokenreviews"},
		"cluster policy, POST creating":       {method: "POST", path: "/api/v1/namespaces/kube-system/resourcequotas", err: ErrAPICallRefused},
		"cluster policy, POST a subresource":  {method: "POST", path: "/api/v1/namespaces/team-a/serviceaccounts/default/token", err: ErrAPICallRefused},
		"cluster policy, POST an eviction":    {method: "POST", path: "/api/v1/namespaces/team-a/pods/web/eviction", err: ErrAPICallRefused},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ConfineAPICall(tc.namespace, tc.method, tc.path)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("got %q, %v; want an error wrapping %v", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
