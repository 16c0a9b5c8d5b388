package app

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/kubernetes/scheme"
)

// builtinKinds maps the API resources Kubernetes itself serves to their
// kinds, for files mode, where there is no API server to ask.
func builtinKinds() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if gvk.Version == "__internal" {
			continue
		}
		m.Add(gvk, meta.RESTScopeNamespace)
	}
	return m
}
