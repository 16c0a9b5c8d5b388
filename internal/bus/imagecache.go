package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/verdict-dev/verdict/pkg/queue"
)

// BucketImageVerifications is the key-value bucket of successful image
// verifications every webhook replica and the reporter's scans share
// (imageverify.Cache): an image is verified against its registry once per
// policy version and entry, not once per replica. Stored as the stream
// KV_VERDICT_IMAGE_VERIFICATIONS.
const BucketImageVerifications = "VERDICT_IMAGE_VERIFICATIONS"

// Bounds of one call to the shared cache: a slow or absent JetStream
// costs an admission at most this, and is then a miss.
const (
	imageCacheGetTimeout = 250 * time.Millisecond
	imageCachePutTimeout = time.Second
)

// ImageCache is the shared cache of image verifications in
// BucketImageVerifications: keys are imageverify.CacheKey's, values the
// digest verified; entries expire with the bucket's TTL. Every call is
// bounded (a fraction of a second), and an unreachable JetStream is a
// miss, never a delay of the admission nor a failure of it. It is safe
// for concurrent use.
type ImageCache struct {
	conn func() *queue.Conn
	cfg  jetstream.KeyValueConfig

	mu sync.Mutex
	// kv is the bucket, opened (created if missing) on the connection
	// kvOf; opened again on another connection.
	kv   jetstream.KeyValue
	kvOf *queue.Conn
}

// NewImageCache is the shared cache on the connection conn returns (the
// current one: a service replaces a connection closed for good), its
// entries kept for ttl, the bucket replicated replicas times and bounded
// to maxBytes.
func NewImageCache(conn func() *queue.Conn, ttl time.Duration, replicas int, maxBytes int64) *ImageCache {
	return &ImageCache{conn: conn, cfg: jetstream.KeyValueConfig{
		Bucket:      BucketImageVerifications,
		Description: "Successful image verifications (imageverify.CacheKey: image, policy version, rule, entry) and the digest verified, shared by the webhook replicas and the reporter's scans.",
		History:     1,
		TTL:         ttl,
		MaxBytes:    maxBytes,
		Replicas:    max(replicas, 1),
	}}
}

// bucket opens the bucket on the current connection, creating or
// updating it when missing.
func (c *ImageCache) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	conn := c.conn()
	if conn == nil {
		return nil, errors.New("no NATS connection")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kv != nil && c.kvOf == conn {
		return c.kv, nil
	}
	js := conn.JetStream()
	kv, err := js.KeyValue(ctx, c.cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateOrUpdateKeyValue(ctx, c.cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", c.cfg.Bucket, err)
	}
	c.kv, c.kvOf = kv, conn
	return kv, nil
}

// Get implements imageverify.Cache.
func (c *ImageCache) Get(ctx context.Context, key string) (string, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, imageCacheGetTimeout)
	defer cancel()
	kv, err := c.bucket(ctx)
	if err != nil {
		return "", false, err
	}
	e, err := kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return string(e.Value()), true, nil
}

// Put implements imageverify.Cache.
func (c *ImageCache) Put(ctx context.Context, key, digest string) error {
	ctx, cancel := context.WithTimeout(ctx, imageCachePutTimeout)
	defer cancel()
	kv, err := c.bucket(ctx)
	if err != nil {
		return err
	}
	_, err = kv.Put(ctx, key, []byte(digest))
	return err
}
