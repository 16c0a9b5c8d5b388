package app

import (
	"context"

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
