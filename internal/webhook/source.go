package webhook

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/rs/zerolog"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/internal/platform/manifests"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// PolicySource supplies the policies the webhook evaluates.
type PolicySource interface {
	// Set returns the current compiled policies and exceptions. It is
	// called for every request, concurrently; the set must not be
	// modified by the caller or afterwards by the source (a source swaps
	// in a new set instead). An error (for example caches not synced yet)
	// is answered with a 500, which the API server resolves with the
	// webhook's failurePolicy.
	Set(ctx context.Context) (*engine.Set, error)
	// Invalid lists the policies and exceptions that could not be loaded
	// or compiled: they are left out of the set, logged and counted, never
	// fatal.
	Invalid() []PolicyError
}

// PolicyError is a policy or exception left out of the set, and why.
type PolicyError struct {
	// Source is the file, or the object, it came from.
	Source string
	Kind   string
	// Key is "name" or "namespace/name"; empty when the document has no
	// name.
	Key string
	Err error
}

func (e PolicyError) Error() string {
	return fmt.Sprintf("%s %s (%s): %v", e.Kind, e.Key, e.Source, e.Err)
}

func (e PolicyError) Unwrap() error { return e.Err }

// StaticSource is a fixed set of policies, compiled once: for tests and
// for the service's file-based mode.
type StaticSource struct {
	set     *engine.Set
	invalid []PolicyError
}

// NewStaticSource compiles the policies in order. A policy that does not
// compile is logged, listed by Invalid and left out.
func NewStaticSource(eng *engine.Engine, policies []*policy.Policy, exceptions []*policy.Exception, log zerolog.Logger) *StaticSource {
	s := &StaticSource{set: &engine.Set{Exceptions: exceptions}}
	for _, p := range policies {
		cp, err := eng.Compile(p)
		if err != nil {
			s.addInvalid(log, PolicyError{Source: "compile", Kind: p.Kind, Key: p.Key(), Err: err})
			continue
		}
		s.set.Policies = append(s.set.Policies, cp)
	}
	return s
}

// LoadStaticSource reads ClusterPolicies, Policies, ValidatingPolicies
// (and their namespaced kind) and PolicyExceptions from files and directories (walked recursively for .yaml, .yml and
// .json, in name order). A document that is not a valid policy is logged,
// listed by Invalid and left out; a path that cannot be read is an error.
//
// admit says how far each PolicyException reaches, as the cluster's
// --policy-exceptions and --exception-namespaces say it
// (policycache.ExceptionConfig.Admit); an exception it refuses is left
// out with its reason. With a nil admit, each exempts resources in its
// own namespace only. An exception that reaches only its own namespace
// and names none is left out: it would exempt nothing.
func LoadStaticSource(eng *engine.Engine, paths []string, log zerolog.Logger, admit ExceptionAdmission) (*StaticSource, error) {
	files, err := manifestFiles(paths)
	if err != nil {
		return nil, err
	}
	var (
		policies   []*policy.Policy
		exceptions []*policy.Exception
		invalid    []PolicyError
	)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read policies: %w", err)
		}
		docs, err := document.DecodeAll(data)
		if err != nil {
			invalid = append(invalid, PolicyError{Source: f, Kind: "file", Err: err})
			continue
		}
		for _, d := range docs {
			obj := d.Object
			if !policy.IsPolicyGroup(document.String(obj, "apiVersion")) {
				continue
			}
			kind := document.String(obj, "kind")
			src := fmt.Sprintf("%s#%d", f, d.Index+1)
			key := objectKey(obj)
			switch kind {
			case policy.KindClusterPolicy, policy.KindPolicy:
				p, err := policy.PolicyFromObject(obj)
				if err != nil {
					invalid = append(invalid, PolicyError{Source: src, Kind: kind, Key: key, Err: err})
					continue
				}
				policies = append(policies, p)
			case policy.KindValidatingPolicy, policy.KindNamespacedValidatingPolicy, policy.KindMutatingPolicy, policy.KindNamespacedMutatingPolicy,
				policy.KindGeneratingPolicy, policy.KindNamespacedGeneratingPolicy, policy.KindImageValidatingPolicy, policy.KindNamespacedImageValidatingPolicy:
				p, err := policy.FromObject(obj)
				if err != nil {
					invalid = append(invalid, PolicyError{Source: src, Kind: kind, Key: key, Err: err})
					continue
				}
				policies = append(policies, p)
			case policy.KindPolicyException:
				e, err := policy.ExceptionFromObject(obj)
				if err == nil {
					e.ClusterWide, err = admitException(admit, e.Metadata.Namespace)
				}
				if err != nil {
					invalid = append(invalid, PolicyError{Source: src, Kind: kind, Key: key, Err: err})
					continue
				}
				exceptions = append(exceptions, e)
			}
		}
	}
	s := NewStaticSource(eng, policies, exceptions, log)
	for _, e := range invalid {
		s.addInvalid(log, e)
	}
	log.Info().Int(logkey.Count, len(s.set.Policies)).Msg("policies loaded")
	return s, nil
}

func (s *StaticSource) addInvalid(log zerolog.Logger, e PolicyError) {
	log.Error().Err(e.Err).Str(logkey.Kind, e.Kind).Str(logkey.Policy, e.Key).Str(logkey.File, e.Source).Msg("policy left out")
	s.invalid = append(s.invalid, e)
}

// Set returns the fixed set.
func (s *StaticSource) Set(context.Context) (*engine.Set, error) { return s.set, nil }

// Invalid returns the policies left out.
func (s *StaticSource) Invalid() []PolicyError { return s.invalid }

func objectKey(obj map[string]any) string {
	name := document.String(obj, "metadata", "name")
	if ns := document.String(obj, "metadata", "namespace"); ns != "" {
		return ns + "/" + name
	}
	return name
}

// manifestFiles expands files and directories into manifest files.
func manifestFiles(paths []string) ([]string, error) {
	files, err := manifests.Expand(paths)
	if err != nil {
		return nil, fmt.Errorf("policies: %w", err)
	}
	return files, nil
}

// NamespaceLister supplies namespace labels, for namespaceSelector.
type NamespaceLister interface {
	// NamespaceLabels returns the labels of a namespace. A namespace the
	// lister does not know has no labels (nil, nil); an error is answered
	// with a 500.
	NamespaceLabels(ctx context.Context, name string) (map[string]string, error)
}

// NamespaceObjects is implemented by a NamespaceLister that also holds
// the Namespace objects (the policy cache's watch): CEL expressions read
// the request's as namespaceObject. Without it they see its name and
// labels.
type NamespaceObjects interface {
	NamespaceObject(ctx context.Context, name string) (map[string]any, error)
}

// RoleResolver gives the RBAC roles ("namespace:name") and cluster roles
// a request's user holds (internal/webhook/roles reads them off the cluster's
// bindings), for match and exclude blocks that name them.
type RoleResolver interface {
	Roles(user authenticationv1.UserInfo, namespace string) (roles, clusterRoles []string)
}

// KindResolver gives the kind of an API resource (pods → v1 Pod), for
// requests on a subresource: policies select pods/exec as Pod/exec, by the
// kind of the resource the subresource belongs to. A meta.RESTMapper is
// one.
type KindResolver interface {
	KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error)
}

// StaticNamespaces is a fixed NamespaceLister: namespace name → labels.
type StaticNamespaces map[string]map[string]string

// NamespaceLabels returns the namespace's labels.
func (s StaticNamespaces) NamespaceLabels(_ context.Context, name string) (map[string]string, error) {
	return s[name], nil
}

// ExceptionAdmission decides how far a PolicyException in namespace
// reaches: every namespace (clusterWide), its own, or, with an error, not
// at all (policycache.ExceptionConfig.Admit).
type ExceptionAdmission func(namespace string) (clusterWide bool, err error)

// ErrExceptionWithoutNamespace is wrapped by the reason an exception
// file's PolicyException is left out when it reaches only its own
// namespace and names none.
var ErrExceptionWithoutNamespace = errors.New("a PolicyException read from a file exempts resources in its own namespace only, and names none")

func admitException(admit ExceptionAdmission, ns string) (bool, error) {
	clusterWide := false
	if admit != nil {
		var err error
		if clusterWide, err = admit(ns); err != nil {
			return false, err
		}
	}
	if !clusterWide && ns == "" {
		return false, fmt.Errorf("%w: set metadata.namespace, or list its namespace in --exception-namespaces to reach every namespace", ErrExceptionWithoutNamespace)
	}
	return clusterWide, nil
}
