package patch

import (
	"reflect"
	"strings"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	appsv1beta1 "k8s.io/api/apps/v1beta1"
	appsv1beta2 "k8s.io/api/apps/v1beta2"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	batchv1beta1 "k8s.io/api/batch/v1beta1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Strategic merge needs to know, for each list, whether it merges by key
// and by which keys. Kyverno's merge (kustomize kyaml) takes this from the
// OpenAPI schema of built-in kinds: a list merges when its patch strategy
// includes "merge", by its list-map-keys, else its patch merge key, else as
// a set of scalars ("retainKeys" is not honoured). Lists of unknown kinds (custom resources)
// and unknown fields are replaced. Here the same metadata is read from the
// struct tags of the k8s.io/api Go types.

// listSchema is the schema of one node of a built-in object.
type listSchema struct {
	t        reflect.Type // nil when the node's type is unknown
	strategy string       // patch strategy of the field holding this node
	keys     []string     // merge keys of the field holding this node
}

// associative reports whether the list at this node merges element-wise:
// its patch strategy includes "merge" (e.g. "merge" or "merge,retainKeys").
func (s *listSchema) associative() bool {
	if s == nil {
		return false
	}
	for _, st := range strings.Split(s.strategy, ",") {
		if st == "merge" {
			return true
		}
	}
	return false
}

// multiKeys lists fields whose OpenAPI list-map-keys name more than their
// patch merge key, keyed by Go type name and JSON field name.
var multiKeys = map[string][]string{
	"Container.ports":                   {"containerPort", "protocol"},
	"EphemeralContainerCommon.ports":    {"containerPort", "protocol"},
	"ServiceSpec.ports":                 {"port", "protocol"},
	"PodSpec.topologySpreadConstraints": {"topologyKey", "whenUnsatisfiable"},
}

// field returns the schema of a map field, or nil.
func (s *listSchema) field(name string) *listSchema {
	if s == nil || s.t == nil {
		return nil
	}
	switch s.t.Kind() {
	case reflect.Map:
		return &listSchema{t: derefType(s.t.Elem())}
	case reflect.Struct:
		return structField(s.t, name)
	}
	return nil
}

// elem returns the schema of list elements, or nil.
func (s *listSchema) elem() *listSchema {
	if s == nil || s.t == nil || s.t.Kind() != reflect.Slice {
		return nil
	}
	return &listSchema{t: derefType(s.t.Elem())}
}

func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func structField(t reflect.Type, name string) *listSchema {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		jsonName, opts, _ := strings.Cut(tag, ",")
		if tag == "-" {
			continue
		}
		if f.Anonymous && (jsonName == "" || strings.Contains(opts, "inline")) {
			if ft := derefType(f.Type); ft.Kind() == reflect.Struct {
				if s := structField(ft, name); s != nil {
					return s
				}
			}
			continue
		}
		if jsonName == "" {
			jsonName = f.Name
		}
		if jsonName != name {
			continue
		}
		s := &listSchema{t: derefType(f.Type), strategy: f.Tag.Get("patchStrategy")}
		if keys, ok := multiKeys[t.Name()+"."+name]; ok {
			s.keys = keys
		} else if k := f.Tag.Get("patchMergeKey"); k != "" {
			s.keys = []string{k}
		}
		return s
	}
	return nil
}

var (
	kindsOnce sync.Once
	kinds     map[schema.GroupVersionKind]reflect.Type
)

// schemaForObject returns the schema of a built-in object given its map,
// or nil when apiVersion/kind are missing or unknown.
func schemaForObject(obj any) *listSchema {
	m, ok := obj.(map[string]any)
	if !ok {
		return nil
	}
	apiVersion, _ := m["apiVersion"].(string)
	kind, _ := m["kind"].(string)
	if apiVersion == "" || kind == "" {
		return nil
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil
	}
	kindsOnce.Do(loadKinds)
	t, ok := kinds[gv.WithKind(kind)]
	if !ok {
		return nil
	}
	return &listSchema{t: derefType(t)}
}

func loadKinds() {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		admissionregistrationv1.AddToScheme,
		appsv1.AddToScheme,
		appsv1beta1.AddToScheme,
		appsv1beta2.AddToScheme,
		autoscalingv1.AddToScheme,
		autoscalingv2.AddToScheme,
		batchv1.AddToScheme,
		batchv1beta1.AddToScheme,
		certificatesv1.AddToScheme,
		coordinationv1.AddToScheme,
		corev1.AddToScheme,
		discoveryv1.AddToScheme,
		eventsv1.AddToScheme,
		extensionsv1beta1.AddToScheme,
		networkingv1.AddToScheme,
		nodev1.AddToScheme,
		policyv1.AddToScheme,
		policyv1beta1.AddToScheme,
		rbacv1.AddToScheme,
		schedulingv1.AddToScheme,
		storagev1.AddToScheme,
	} {
		// Registration of the generated API types cannot fail; a group
		// that did would only leave its kinds without a schema.
		_ = add(scheme)
	}
	kinds = make(map[schema.GroupVersionKind]reflect.Type)
	for gvk, t := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		kinds[gvk] = t
	}
}
