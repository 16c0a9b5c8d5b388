// Package queue is Verdict's access to NATS JetStream: connections
// (external or embedded), stream and consumer provisioning, subject-safe
// keys, deduplicating publishers, a consumer runner with dead-lettering,
// and replay of compacted subjects.
package queue

import (
	_ "github.com/cenkalti/backoff/v4"
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go/jetstream"
	_ "github.com/prometheus/client_golang/prometheus"
)
