// Package queue is Verdict's access to NATS JetStream.
package queue
