package cli

import (
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/imageverify"
)

// imageVerifier is the verifier of verifyImages rules in `verdict apply`
// and `verdict test`: registries are reached directly, with the
// credentials of the environment (the Docker configuration, as docker
// login and the cloud helpers write it, DOCKER_CONFIG).
// A run verifies each image once per entry: its passes are kept for the
// run (useCache). trustedRoot, when given, is a Sigstore trusted root
// file (--sigstore-trusted-root).
func imageVerifier(trustedRoot string) (engine.Option, error) {
	opts := []imageverify.Option{imageverify.WithKeychain(authn.DefaultKeychain),
		// The images of a pipeline's input are anyone's: each verification
		// reads at most imageverify.DefaultMaxResponseBytes.
		imageverify.WithTransport(remote.DefaultTransport),
		imageverify.WithCache(imageverify.NewMemoryCache(time.Hour, 10000))}
	if trustedRoot != "" {
		tm, err := imageverify.LoadTrustedRoot(trustedRoot)
		if err != nil {
			return nil, fmt.Errorf("--sigstore-trusted-root: %w", err)
		}
		opts = append(opts, imageverify.WithTrustedRoot(tm))
	}
	v, err := imageverify.New(opts...)
	if err != nil {
		return nil, err
	}
	return engine.WithImageVerifier(v), nil
}

// trustedRootUsage is the help of --sigstore-trusted-root.
const trustedRootUsage = "Sigstore trusted root (trusted_root.json) whose Fulcio CAs, Rekor logs and CT logs verify keyless signatures without roots, transparency log entries without rekor.pubkey and SCTs, offline"
