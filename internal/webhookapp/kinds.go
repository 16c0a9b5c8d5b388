package webhookapp

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/restmapper"
)

// clusterKinds maps API resources to their kinds with the API server's
// discovery, cached, and refreshed when a resource is not found (a CRD
// installed since).
func clusterKinds(d discovery.DiscoveryInterface) meta.RESTMapper {
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(d))
}

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
