package cli

import (
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
// run (useCache).
func imageVerifier() (engine.Option, error) {
	v, err := imageverify.New(imageverify.WithKeychain(authn.DefaultKeychain),
		// The images of a pipeline's input are anyone's: each verification
		// reads at most imageverify.DefaultMaxResponseBytes.
		imageverify.WithTransport(remote.DefaultTransport),
		imageverify.WithCache(imageverify.NewMemoryCache(time.Hour, 10000)))
	if err != nil {
		return nil, err
	}
	return engine.WithImageVerifier(v), nil
}
