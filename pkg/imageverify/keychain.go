package imageverify

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/verdict-dev/verdict/pkg/engine"
)

// Credentials gives what one request reads of Secrets, as the caller may
// read them (the services: internal/platform): the registry credentials
// of the Secrets an entry's imageRegistryCredentials names and of the
// Pod's imagePullSecrets, and attestors' public keys held in Secrets. An
// error is no verdict: the rule is an error, and failurePolicy decides.
type Credentials interface {
	// Keychain is tried before the verifier's own (WithKeychain); nil
	// when the request names no credentials.
	Keychain(ctx context.Context, req engine.ImageVerifyRequest) (authn.Keychain, error)
	// PublicKey is the PEM public key (its cosign.pub) of the Secret
	// namespace/name an attestor's keys.secret (or a k8s:// key) names.
	PublicKey(ctx context.Context, req engine.ImageVerifyRequest, namespace, name string) (string, error)
}

// WithCredentials reads each request's registry credentials from c.
func WithCredentials(c Credentials) Option {
	return func(v *Verifier) error {
		if c == nil {
			return errors.New("imageverify: nil credentials")
		}
		v.creds = c
		return nil
	}
}

// WithKeychain is the keychain of every registry call (the CLI's:
// authn.DefaultKeychain, the Docker configuration of the environment),
// after the request's credentials. Default: anonymous.
func WithKeychain(kc authn.Keychain) Option {
	return func(v *Verifier) error {
		if kc == nil {
			return errors.New("imageverify: nil keychain")
		}
		v.keychain = kc
		return nil
	}
}

// dockerHub is the registry Docker's configuration names in its historic
// forms, go-containerregistry as index.docker.io.
var dockerHub = map[string]bool{
	"index.docker.io": true, "docker.io": true, "registry-1.docker.io": true,
	"https://index.docker.io/v1/": true, "https://index.docker.io/v1": true,
}

// DockerConfigKeychain is a keychain of Docker configurations as image
// pull Secrets hold them: the JSON of a kubernetes.io/dockerconfigjson
// Secret's .dockerconfigjson ({"auths": {host: {...}}}) or of a
// kubernetes.io/dockercfg Secret's .dockercfg ({host: {...}}), each entry
// with username and password, or auth (base64 of user:password), or a
// token. A registry is given the credentials of the first configuration
// naming its host (with its port), matched as the kubelet does: the
// scheme and a path are ignored, Docker Hub's names are one. An error
// never quotes a configuration: they hold credentials.
func DockerConfigKeychain(configs ...[]byte) (authn.Keychain, error) {
	kc := dockerKeychain{}
	for i, raw := range configs {
		var cfg struct {
			Auths map[string]dockerAuth `json:"auths"`
		}
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return nil, fmt.Errorf("registry credentials %d: not a Docker configuration (JSON)", i)
		}
		entries := cfg.Auths
		if entries == nil {
			// The older .dockercfg form: the hosts at the top.
			if err := json.Unmarshal(raw, &entries); err != nil {
				return nil, fmt.Errorf("registry credentials %d: not a Docker configuration (no auths)", i)
			}
		}
		for host, a := range entries {
			cfg, err := a.config()
			if err != nil {
				return nil, fmt.Errorf("registry credentials %d, registry %s: %w", i, host, err)
			}
			key := registryKey(host)
			if _, ok := kc[key]; !ok {
				kc[key] = cfg
			}
		}
	}
	return kc, nil
}

type dockerAuth struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	Auth          string `json:"auth"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

func (a dockerAuth) config() (authn.AuthConfig, error) {
	cfg := authn.AuthConfig{Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken}
	if a.Auth != "" && cfg.Username == "" && cfg.Password == "" {
		raw, err := base64.StdEncoding.DecodeString(a.Auth)
		if err != nil {
			return authn.AuthConfig{}, errors.New("auth is not base64")
		}
		user, pass, ok := strings.Cut(string(raw), ":")
		if !ok {
			return authn.AuthConfig{}, errors.New("auth is not user:password")
		}
		cfg.Username, cfg.Password = user, pass
	}
	return cfg, nil
}

// registryKey is the host (and port) a configuration's key names.
func registryKey(host string) string {
	if dockerHub[host] {
		return name.DefaultRegistry
	}
	h := host
	if _, rest, ok := strings.Cut(h, "://"); ok {
		h = rest
	}
	h, _, _ = strings.Cut(h, "/")
	if dockerHub[h] {
		return name.DefaultRegistry
	}
	return h
}

// dockerKeychain is the credentials by registry host.
type dockerKeychain map[string]authn.AuthConfig

func (kc dockerKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	key := r.RegistryStr()
	if dockerHub[key] {
		key = name.DefaultRegistry
	}
	if cfg, ok := kc[key]; ok {
		return authn.FromConfig(cfg), nil
	}
	return authn.Anonymous, nil
}
