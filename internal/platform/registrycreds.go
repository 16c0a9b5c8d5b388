package platform

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/imageverify"
)

// registryCredentials reads the registry credentials of a verifyImages
// request from the API server (imageverify.Credentials), within what
// the operator allows, so that a policy never lends a tenant Verdict's
// own Secrets:
//   - an entry's imageRegistryCredentials.secrets: a name is in the
//     policy's namespace for a namespaced Policy (which may name no
//     other), in Verdict's namespace for a cluster policy (or
//     namespace/name); in Verdict's namespace only the Secrets the
//     operator lists (--registry-credential-secrets) are read, elsewhere
//     only with --registry-namespace-credentials;
//   - the Pod's imagePullSecrets, in the Pod's namespace, with
//     --registry-namespace-credentials (what the kubelet would pull
//     with); one that is missing or unreadable is left out, as the
//     registry then answers;
//   - an attestor's keys.secret (its cosign.pub), under the rules of the
//     entry's Secrets.
//
// A keychain gives a registry only the credentials its Secret names it
// for (imageverify.DockerConfigKeychain), so a Pod naming an image of
// another registry sends that registry nothing of its pull Secrets.
type registryCredentials struct {
	kube       kubernetes.Interface
	namespace  string          // Verdict's
	allowed    map[string]bool // the Secrets of Verdict's namespace that may be read
	namespaces bool            // whether Secrets of other namespaces may be read

	mu    sync.Mutex
	cache map[string]cachedSecret // by namespace/name
	now   func() time.Time
}

// A Secret read is kept this long, so that admissions of one image do not
// each read it; at most credentialCacheEntries are kept.
const (
	credentialCacheTTL     = 30 * time.Second
	credentialCacheEntries = 1024
)

type cachedSecret struct {
	kind    corev1.SecretType
	data    map[string][]byte
	expires time.Time
}

// Credentials reads the registry credentials of requests through kube,
// Verdict's namespace being namespace (nil without kube). With nothing
// allowed, a policy naming Secrets gets an error saying which flag would
// allow them, never an anonymous pull in their place.
func (r Registries) Credentials(kube kubernetes.Interface, namespace string) imageverify.Credentials {
	if kube == nil {
		return nil
	}
	allowed := make(map[string]bool, len(r.CredentialSecrets))
	for _, s := range r.CredentialSecrets {
		allowed[s] = true
	}
	return &registryCredentials{kube: kube, namespace: namespace, allowed: allowed, namespaces: r.NamespaceCredentials,
		cache: map[string]cachedSecret{}, now: time.Now}
}

// Keychain is the keychain of req's Secrets, nil when it names none.
func (c *registryCredentials) Keychain(ctx context.Context, req engine.ImageVerifyRequest) (authn.Keychain, error) {
	var configs [][]byte
	if iv := req.Verification; iv != nil && iv.ImageRegistryCredentials != nil {
		for _, s := range iv.ImageRegistryCredentials.Secrets {
			ns, name, err := c.locate(req, s)
			if err != nil {
				return nil, err
			}
			cfg, err := c.secret(ctx, ns, name)
			if err != nil {
				return nil, err
			}
			configs = append(configs, cfg)
		}
	}
	if c.namespaces && req.Namespace != "" && req.Namespace != c.namespace {
		for _, name := range req.Image.PullSecrets {
			cfg, err := c.secret(ctx, req.Namespace, name)
			if err != nil {
				continue
			}
			if _, err := imageverify.DockerConfigKeychain(cfg); err != nil {
				continue // a malformed pull Secret: the kubelet could not use it either
			}
			configs = append(configs, cfg)
		}
	}
	if len(configs) == 0 {
		return nil, nil
	}
	return imageverify.DockerConfigKeychain(configs...)
}

// locate is where an imageRegistryCredentials Secret is, if the request's
// policy may read it there.
func (c *registryCredentials) locate(req engine.ImageVerifyRequest, s string) (string, string, error) {
	ns, name, qualified := strings.Cut(s, "/")
	if !qualified {
		ns, name = req.PolicyNamespace, s
		if ns == "" {
			ns = c.namespace
		}
	}
	switch {
	case name == "" || ns == "":
		return "", "", fmt.Errorf("imageRegistryCredentials: %q names no Secret", s)
	case req.PolicyNamespace != "" && ns != req.PolicyNamespace:
		return "", "", fmt.Errorf("imageRegistryCredentials: Secret %s/%s: a Policy of namespace %s may only name Secrets of its namespace", ns, name, req.PolicyNamespace)
	case ns == c.namespace && !c.allowed[name]:
		return "", "", fmt.Errorf("imageRegistryCredentials: Secret %s/%s is not one of the registry credentials the operator allows in Verdict's namespace (--registry-credential-secrets)", ns, name)
	case ns != c.namespace && !c.namespaces:
		return "", "", fmt.Errorf("imageRegistryCredentials: Secret %s/%s: registry credentials outside Verdict's namespace are off (--registry-namespace-credentials)", ns, name)
	}
	return ns, name, nil
}

// PublicKey is the cosign.pub of the Secret namespace/name that an
// attestor's keys.secret names, read under the rules of
// imageRegistryCredentials: a namespaced Policy's in its own namespace,
// Verdict's namespace's only those the operator lists.
func (c *registryCredentials) PublicKey(ctx context.Context, req engine.ImageVerifyRequest, namespace, name string) (string, error) {
	ref := name
	if namespace != "" {
		ref = namespace + "/" + name
	}
	ns, name, err := c.locate(req, ref)
	if err != nil {
		return "", err
	}
	s, err := c.read(ctx, ns, name)
	if err != nil {
		return "", err
	}
	key := s.data["cosign.pub"]
	if len(key) == 0 {
		return "", fmt.Errorf("keys.secret: Secret %s/%s holds no cosign.pub", ns, name)
	}
	return string(key), nil
}

// secret reads the Docker configuration of the image pull Secret ns/name.
func (c *registryCredentials) secret(ctx context.Context, ns, name string) ([]byte, error) {
	s, err := c.read(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	key := ns + "/" + name
	var cfg []byte
	switch s.kind {
	case corev1.SecretTypeDockerConfigJson:
		cfg = s.data[corev1.DockerConfigJsonKey]
	case corev1.SecretTypeDockercfg:
		cfg = s.data[corev1.DockerConfigKey]
	default:
		return nil, fmt.Errorf("imageRegistryCredentials: Secret %s is of type %s, not %s", key, s.kind, corev1.SecretTypeDockerConfigJson)
	}
	if len(cfg) == 0 {
		return nil, fmt.Errorf("imageRegistryCredentials: Secret %s holds no Docker configuration", key)
	}
	return cfg, nil
}

// read reads the Secret ns/name, or takes it from the cache.
func (c *registryCredentials) read(ctx context.Context, ns, name string) (cachedSecret, error) {
	key := ns + "/" + name
	now := c.now()
	c.mu.Lock()
	if e, ok := c.cache[key]; ok && now.Before(e.expires) {
		c.mu.Unlock()
		return e, nil
	}
	c.mu.Unlock()
	s, err := c.kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return cachedSecret{}, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	e := cachedSecret{kind: s.Type, data: s.Data, expires: now.Add(credentialCacheTTL)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.cache) >= credentialCacheEntries {
		for k, old := range c.cache {
			if !now.Before(old.expires) || len(c.cache) >= credentialCacheEntries {
				delete(c.cache, k)
			}
		}
	}
	c.cache[key] = e
	return e, nil
}
