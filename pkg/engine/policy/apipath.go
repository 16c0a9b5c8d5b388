package policy

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
)

// ErrRefused is matched (errors.Is) by every refusal of what a policy
// may read or write: a rule of the platform, not a failure, so no retry,
// default or fallback changes it. ErrOutsideNamespace and
// ErrAPICallRefused match it, and so may a loader's own refusals.
var ErrRefused = errors.New("refused")

// Refusal is an error that matches ErrRefused.
type Refusal string

func (e Refusal) Error() string { return string(e) }

// Is reports whether target is ErrRefused.
func (e Refusal) Is(target error) bool { return target == ErrRefused }

// ErrOutsideNamespace wraps every refusal of a namespaced policy's read or
// write that names another namespace, a cluster-scoped resource, or a
// source a namespace may not use (DESIGN.md, invariant 11).
var ErrOutsideNamespace error = Refusal("outside the policy's namespace")

// ErrAPICallRefused wraps the refusal of an apiCall that no policy may
// make: a path that is not the API server's, or a POST to anything but a
// review (whose object the API server answers and never stores).
var ErrAPICallRefused error = Refusal("apiCall refused")

// APIPath is an API server path taken apart: /api/<version>/... for the
// core group, /apis/<group>/<version>/... for the others.
type APIPath struct {
	// Clean is the path as the API server resolves it: unescaped once and
	// cleaned of `.`, `..` and doubled slashes, with the query (if any)
	// kept as written.
	Clean string
	// Group and Version are empty for a path outside /api and /apis
	// (/version, /openapi/v3, ...).
	Group, Version string
	// Watch is set for the legacy /watch/ prefix.
	Watch bool
	// Namespace is the segment after `namespaces/`, "" for a
	// cluster-wide path.
	Namespace string
	// Resource is the resource (plural) the path reads: "namespaces" for
	// a path naming a Namespace itself.
	Resource string
	// Name and Subresource follow the resource, when the path has them.
	Name, Subresource string
}

// ParseAPIPath takes an apiCall's urlPath apart as the API server would
// route it. A URL with a scheme or a host, or a relative path, is an
// error wrapping ErrAPICallRefused.
func ParseAPIPath(urlPath string) (APIPath, error) {
	u, err := url.Parse(urlPath)
	if err != nil {
		return APIPath{}, fmt.Errorf("%w: urlPath %q: %w", ErrAPICallRefused, urlPath, err)
	}
	if u.Scheme != "" || u.Host != "" || u.Opaque != "" || u.User != nil || !strings.HasPrefix(u.Path, "/") {
		return APIPath{}, fmt.Errorf("%w: urlPath %q must be a path of the API server, starting with /", ErrAPICallRefused, urlPath)
	}
	// u.Path is unescaped once, as the API server unescapes it before
	// routing; Clean resolves what a `..` would climb out of.
	p := APIPath{Clean: path.Clean(u.Path)}
	if u.RawQuery != "" {
		p.Clean += "?" + u.RawQuery
	}
	segs := strings.Split(strings.TrimPrefix(path.Clean(u.Path), "/"), "/")
	switch {
	case len(segs) >= 2 && segs[0] == "api":
		p.Version, segs = segs[1], segs[2:]
	case len(segs) >= 3 && segs[0] == "apis":
		p.Group, p.Version, segs = segs[1], segs[2], segs[3:]
	default:
		return p, nil
	}
	if len(segs) > 0 && segs[0] == "watch" {
		p.Watch, segs = true, segs[1:]
	}
	if len(segs) >= 2 && segs[0] == "namespaces" {
		p.Namespace = segs[1]
		if len(segs) == 2 {
			// The Namespace object itself.
			p.Resource, p.Name = "namespaces", segs[1]
			return p, nil
		}
		segs = segs[2:]
	}
	if len(segs) > 0 {
		p.Resource = segs[0]
	}
	if len(segs) > 1 {
		p.Name = segs[1]
	}
	if len(segs) > 2 {
		p.Subresource = strings.Join(segs[2:], "/")
	}
	return p, nil
}

// reviewResources are the resources an apiCall may POST to: reviews,
// which the API server evaluates and answers without storing anything.
var reviewResources = map[string]map[string]bool{
	"authorization.k8s.io": {
		"subjectaccessreviews": true, "selfsubjectaccessreviews": true,
		"selfsubjectrulesreviews": true, "localsubjectaccessreviews": true,
	},
	"authentication.k8s.io": {"tokenreviews": true, "selfsubjectreviews": true},
}

// ConfineAPICall checks an apiCall's method and path (after variable
// substitution) and returns the path to call, cleaned as the API server
// resolves it. Every policy may GET, and POST only to a review
// (SubjectAccessReview and its kin, TokenReview). A namespaced policy's
// call (namespace, the policy's, not "") must name that namespace: a
// resource in it or the Namespace object itself, never a cluster-wide
// path, a watch, or another namespace; of the reviews it may POST only a
// LocalSubjectAccessReview in its namespace.
func ConfineAPICall(namespace, method, urlPath string) (string, error) {
	p, err := ParseAPIPath(urlPath)
	if err != nil {
		return "", err
	}
	post := false
	switch strings.ToUpper(method) {
	case "", "GET":
	case "POST":
		post = true
	default:
		return "", fmt.Errorf("%w: method %q: only GET and POST", ErrAPICallRefused, method)
	}
	if post && (p.Name != "" || p.Watch || !reviewResources[p.Group][p.Resource]) {
		return "", fmt.Errorf("%w: POST %s: an apiCall may POST only a review (SubjectAccessReview, LocalSubjectAccessReview, SelfSubjectAccessReview, SelfSubjectRulesReview, TokenReview, SelfSubjectReview)", ErrAPICallRefused, p.Clean)
	}
	if namespace == "" {
		return p.Clean, nil
	}
	switch {
	case p.Version == "":
		return "", fmt.Errorf("%w: urlPath %s is not a resource path of namespace %s", ErrOutsideNamespace, p.Clean, namespace)
	case p.Watch:
		return "", fmt.Errorf("%w: urlPath %s: a namespaced policy may not watch", ErrOutsideNamespace, p.Clean)
	case p.Namespace == "":
		return "", fmt.Errorf("%w: urlPath %s does not name namespace %s (a namespaced policy reads only its own namespace)", ErrOutsideNamespace, p.Clean, namespace)
	case p.Namespace != namespace:
		return "", fmt.Errorf("%w: urlPath %s names namespace %s; a namespaced policy reads only its own namespace, %s", ErrOutsideNamespace, p.Clean, p.Namespace, namespace)
	case post && p.Resource != "localsubjectaccessreviews":
		return "", fmt.Errorf("%w: POST %s: a namespaced policy may POST only a LocalSubjectAccessReview in its namespace", ErrOutsideNamespace, p.Clean)
	}
	return p.Clean, nil
}

// ConfineNamespace is the namespace a read or write of a namespaced
// policy (in namespace, not "") goes to: its own for "" (as Kyverno
// defaults a namespaced policy's configMap entry), an error wrapping
// ErrOutsideNamespace for any other. For a cluster-wide policy
// (namespace "") it is ns as given. what names the field or call for the
// error.
func ConfineNamespace(namespace, ns, what string) (string, error) {
	switch {
	case namespace == "" || ns == namespace:
		return ns, nil
	case ns == "":
		return namespace, nil
	}
	return "", fmt.Errorf("%w: %s names namespace %s; a namespaced policy reads and writes only its own namespace, %s", ErrOutsideNamespace, what, ns, namespace)
}
