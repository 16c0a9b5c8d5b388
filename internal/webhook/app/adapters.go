package app

import (
	"context"
	"crypto/tls"

	"github.com/verdict-dev/verdict/internal/platform/certs"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/webhook"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// policySource serves the webhook from the policy cache.
type policySource struct{ c *policycache.Cache }

func (p policySource) Set(ctx context.Context) (*engine.Set, error) { return p.c.Set(ctx) }

func (p policySource) Invalid() []webhook.PolicyError {
	var out []webhook.PolicyError
	for _, pr := range p.c.Problems() {
		out = append(out, webhook.PolicyError{Source: "cluster", Kind: pr.Kind, Key: pr.Key, Err: pr.Err})
	}
	return out
}

// secretCerts serves the certificate of the TLS Secret.
type secretCerts struct{ s *certs.SecretSource }

func (c secretCerts) GetCertificate(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.s.GetCertificate(h)
}

func (c secretCerts) Certificate() *tls.Certificate {
	cert, err := c.s.GetCertificate(nil)
	if err != nil {
		return nil
	}
	return cert
}

// Run does nothing: the Secret's informer keeps the certificate current.
func (c secretCerts) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
