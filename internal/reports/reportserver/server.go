package reportserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/healthz"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/util/compatibility"

	"github.com/verdict-dev/verdict/internal/reports/reportindex"
)

// Config is how the server serves.
type Config struct {
	// BindAddress and Port are where it listens (Port 0: any free port).
	BindAddress net.IP
	Port        int
	// Cert is its serving certificate, followed as it changes (the
	// reporter's renewed Secret). Without it, CertFile and KeyFile are;
	// without them a self-signed one is made in CertDir (for tests and
	// the demo).
	Cert              dynamiccertificates.CertKeyContentProvider
	CertFile, KeyFile string
	CertDir           string
	// Kubeconfig reaches the kube-apiserver that authenticates and
	// authorizes the requests (delegated, as metrics-server does; empty:
	// in-cluster).
	Kubeconfig string
	// Delete deletes a report (reportindex.Feed.RetractReport): false
	// when there is none. Nil: deletes are refused.
	Delete func(ctx context.Context, uid string) (bool, error)
	// Denials, when set, are served as decisions.verdict.dev
	// AdmissionDenials: the admission log's recent denials.
	Denials *Denials
}

// Server is the aggregated API server.
type Server struct {
	srv  *genericapiserver.GenericAPIServer
	port int
	// stop is closed when Run's context ends: watches end at once, so
	// their clients go on with another replica and shutdown does not
	// wait for them.
	stop chan struct{}
}

// New builds the server on the index; it answers readiness once ready is
// closed (the index has caught up with the stream).
func New(cfg Config, x *reportindex.Index, ready <-chan struct{}) (*Server, error) {
	scheme := runtime.NewScheme()
	addToScheme(scheme)
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	scheme.AddUnversionedTypes(schema.GroupVersion{Group: "", Version: "v1"},
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	codecs := serializer.NewCodecFactory(scheme)

	serving := genericoptions.NewSecureServingOptions().WithLoopback()
	if cfg.BindAddress != nil {
		serving.BindAddress = cfg.BindAddress
	}
	serving.BindPort = cfg.Port
	switch {
	case cfg.Cert != nil:
		serving.ServerCert.GeneratedCert = cfg.Cert
	case cfg.CertFile != "":
		serving.ServerCert.CertKey.CertFile, serving.ServerCert.CertKey.KeyFile = cfg.CertFile, cfg.KeyFile
	default:
		serving.ServerCert.CertDirectory = cfg.CertDir
		if err := serving.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
			return nil, fmt.Errorf("self-signed certificate: %w", err)
		}
	}
	if cfg.Port == 0 {
		ln, port, err := genericoptions.CreateListener("tcp", net.JoinHostPort(serving.BindAddress.String(), "0"), net.ListenConfig{})
		if err != nil {
			return nil, err
		}
		serving.Listener, serving.BindPort = ln, port
	}
	authn := genericoptions.NewDelegatingAuthenticationOptions()
	authn.RemoteKubeConfigFile = cfg.Kubeconfig
	authz := genericoptions.NewDelegatingAuthorizationOptions()
	authz.RemoteKubeConfigFile = cfg.Kubeconfig
	// Probes and metrics need no identity.
	authz.AlwaysAllowPaths = []string{"/healthz", "/readyz", "/livez", "/metrics"}

	gc := genericapiserver.NewRecommendedConfig(codecs)
	gc.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	namer := openapinamer.NewDefinitionNamer(scheme)
	gc.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(definitions, namer)
	gc.OpenAPIV3Config.Info.Title, gc.OpenAPIV3Config.Info.Version = "Verdict reports", GroupVersion.Version
	if err := serving.ApplyTo(&gc.SecureServing, &gc.LoopbackClientConfig); err != nil {
		return nil, fmt.Errorf("serving: %w", err)
	}
	if err := authn.ApplyTo(&gc.Authentication, gc.SecureServing, nil); err != nil {
		return nil, fmt.Errorf("authentication: %w", err)
	}
	if err := authz.ApplyTo(&gc.Authorization); err != nil {
		return nil, fmt.Errorf("authorization: %w", err)
	}
	stop := make(chan struct{})
	srv, err := gc.Complete().New("verdict-reports", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}
	for _, gv := range []schema.GroupVersion{GroupVersion, OpenReports} {
		info := genericapiserver.NewDefaultAPIGroupInfo(gv.Group, scheme, runtime.NewParameterCodec(scheme), codecs)
		storage := map[string]rest.Storage{}
		for _, k := range kinds {
			if k.gv == gv {
				storage[k.plural] = &reports{kind: k, x: x, del: cfg.Delete, stop: stop}
			}
		}
		info.VersionedResourcesStorageMap[gv.Version] = storage
		if err := srv.InstallAPIGroup(&info); err != nil {
			return nil, fmt.Errorf("install %s: %w", gv, err)
		}
	}
	if cfg.Denials != nil {
		info := genericapiserver.NewDefaultAPIGroupInfo(Decisions.Group, scheme, runtime.NewParameterCodec(scheme), codecs)
		info.VersionedResourcesStorageMap[Decisions.Version] = map[string]rest.Storage{"admissiondenials": denials{s: cfg.Denials}}
		if err := srv.InstallAPIGroup(&info); err != nil {
			return nil, fmt.Errorf("install %s: %w", Decisions, err)
		}
	}
	if err := srv.AddReadyzChecks(healthz.NamedCheck("report-index", func(*http.Request) error {
		select {
		case <-ready:
			return nil
		default:
			return errors.New("the report index has not caught up with VERDICT_RESULTS yet")
		}
	})); err != nil {
		return nil, err
	}
	return &Server{srv: srv, port: serving.BindPort, stop: stop}, nil
}

// Port is the port the server listens on.
func (s *Server) Port() int { return s.port }

// Run serves until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	ending := context.AfterFunc(ctx, func() { close(s.stop) })
	defer ending()
	return s.srv.PrepareRun().RunWithContext(ctx)
}
