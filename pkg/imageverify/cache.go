package imageverify

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine"
)

// Cache keeps successful verifications, so that an image is verified
// against its registry once per policy version and entry, not once per
// admission, replica and scan. Only passes are kept (a failure is tried
// again, so that an image signed a moment later is admitted); the value
// is the digest the signatures named, which mutateDigest pins: an image
// named by tag is pinned to the digest that was verified, even if the
// tag moved since. A Cache must be safe for concurrent use; its entries
// expire after a time of its own choosing.
type Cache interface {
	// Get returns the digest of a verification kept under key.
	Get(ctx context.Context, key string) (digest string, ok bool, err error)
	// Put keeps a verification.
	Put(ctx context.Context, key, digest string) error
}

// WithCache makes the verifier keep its passes in c, for the entries
// whose useCache is true (the default). Errors of the cache are not the
// verification's: a Get that fails is a miss, a Put that fails is
// dropped, each counted by the cache's owner.
func WithCache(c Cache) Option {
	return func(v *Verifier) error {
		v.cache = c
		return nil
	}
}

// CacheKey is the key of a verification: a hash of the image as the
// resource names it, the policy (key and version), the rule, the entry's
// index and the entry itself (its attestors, attestations and settings),
// so that any change to what is checked is a new key.
func CacheKey(req engine.ImageVerifyRequest) (string, error) {
	entry, err := json.Marshal(req.Verification)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	var n [8]byte
	for _, part := range []string{req.Image.Ref.String(), req.Policy, req.PolicyVersion, req.Rule, string(entry)} {
		// Lengths first: no two tuples hash the same bytes.
		binary.LittleEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	binary.LittleEndian.PutUint64(n[:], uint64(req.Index))
	h.Write(n[:])
	return hex.EncodeToString(h.Sum(nil)), nil
}

// MemoryCache is a Cache in the process's memory, bounded in entries and
// time: for the CLI, files mode, and in front of a shared cache.
type MemoryCache struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu      sync.Mutex
	entries map[string]memoryEntry
}

type memoryEntry struct {
	digest  string
	expires time.Time
}

// NewMemoryCache keeps up to maxEntries verifications for ttl each.
func NewMemoryCache(ttl time.Duration, maxEntries int) *MemoryCache {
	return &MemoryCache{ttl: ttl, max: max(maxEntries, 1), now: time.Now, entries: map[string]memoryEntry{}}
}

// Get implements Cache.
func (c *MemoryCache) Get(_ context.Context, key string) (string, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return "", false, nil
	}
	if !c.now().Before(e.expires) {
		delete(c.entries, key)
		return "", false, nil
	}
	return e.digest, true, nil
}

// Put implements Cache. When full, expired entries go first, then the
// one closest to expiry.
func (c *MemoryCache) Put(_ context.Context, key, digest string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.max {
		var oldest string
		var at time.Time
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
				continue
			}
			if oldest == "" || e.expires.Before(at) {
				oldest, at = k, e.expires
			}
		}
		if len(c.entries) >= c.max {
			delete(c.entries, oldest)
		}
	}
	c.entries[key] = memoryEntry{digest: digest, expires: now.Add(c.ttl)}
	return nil
}

// Len is the number of entries kept, expired ones included until they
// are met.
func (c *MemoryCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Layered is a cache in front of another: a replica's memory in front of
// the cache its peers share. Get asks near, then far (a hit there is kept
// near too); Put keeps near at once and far in the background, so that a
// slow far cache (JetStream away) never delays the admission that
// verified.
func Layered(near, far Cache) Cache { return layered{near: near, far: far} }

type layered struct{ near, far Cache }

func (l layered) Get(ctx context.Context, key string) (string, bool, error) {
	if d, ok, err := l.near.Get(ctx, key); err == nil && ok {
		return d, true, nil
	}
	d, ok, err := l.far.Get(ctx, key)
	if err != nil || !ok {
		return "", false, err
	}
	_ = l.near.Put(ctx, key, d)
	return d, true, nil
}

func (l layered) Put(ctx context.Context, key, digest string) error {
	go func() { _ = l.far.Put(context.WithoutCancel(ctx), key, digest) }()
	return l.near.Put(ctx, key, digest)
}
