package queue

import (
	"errors"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Sentinel errors. Every error the package returns for one of these causes
// wraps the sentinel, so callers test with errors.Is.
var (
	// ErrInvalidOption: an option was given a value it does not accept.
	ErrInvalidOption = errors.New("queue: invalid option")
	// ErrInvalidToken: a subject token that EncodeToken cannot produce.
	ErrInvalidToken = errors.New("queue: invalid subject token")
	// ErrInvalidSubject: a subject that is not a literal subject, or not of
	// the expected shape.
	ErrInvalidSubject = errors.New("queue: invalid subject")
	// ErrNoTopology: a work-queue call on a Conn made without WithTopology.
	ErrNoTopology = errors.New("queue: the connection has no topology (WithTopology)")
	// ErrInvalidKind: a work kind the topology does not name.
	ErrInvalidKind = errors.New("queue: invalid work kind")
	// ErrMissingID: a message without a Nats-Msg-Id; every message has a
	// deterministic id so that retries collapse.
	ErrMissingID = errors.New("queue: message has no id")
	// ErrBufferFull: the asynchronous publisher's buffer is full; the
	// message was not taken (and is counted as dropped).
	ErrBufferFull = errors.New("queue: publish buffer full")
	// ErrPublisherClosed: the asynchronous publisher no longer takes messages.
	ErrPublisherClosed = errors.New("queue: publisher closed")
	// ErrPublishTimeout: a message was not acknowledged by its deadline.
	ErrPublishTimeout = errors.New("queue: publish not acknowledged before its deadline")
	// ErrPublishRejected: the server refused a message for good (too big, a
	// failed expectation); retrying cannot help.
	ErrPublishRejected = errors.New("queue: publish rejected")
	// ErrStreamFull: the stream is at its size limit (MaxMsgs or MaxBytes,
	// with DiscardNew) and refused the message; it was not stored. Errors
	// wrapping it wrap ErrPublishRejected too.
	ErrStreamFull = errors.New("queue: stream full")
	// ErrNotConnected: the connection to NATS was not established in time.
	ErrNotConnected = errors.New("queue: not connected")
	// ErrProvision: a stream or consumer could not be created or updated.
	ErrProvision = errors.New("queue: provisioning")
	// ErrDeadLetter: a message could not be written to the dead-letter
	// stream (it stays in its stream and is delivered again).
	ErrDeadLetter = errors.New("queue: dead-letter publish failed")
	// ErrNoStream: a stream the call needs does not exist on the server
	// (nothing provisioned it).
	ErrNoStream = errors.New("queue: stream does not exist")
	// ErrNoJetStream: nothing answers JetStream's API (a server without
	// JetStream, or an account without it).
	ErrNoJetStream = errors.New("queue: JetStream not available")
	// ErrNoDeadLetter: no dead letter at that sequence of the dead-letter stream
	// (never was, deleted, re-queued already, or not a dead letter).
	ErrNoDeadLetter = errors.New("queue: no dead letter")
)

// permanent reports whether a publish error cannot be cured by retrying:
// client-side rejections (payload too large, bad subject) and 400-class
// JetStream API errors (message too large, failed expectation). Everything
// else (no responders during an election, timeouts, disconnections, 503s) is
// transient.
func permanent(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, nats.ErrBadSubject) ||
		errors.Is(err, nats.ErrInvalidMsg) || errors.Is(err, nats.ErrConnectionClosed) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code == 400
	}
	return false
}

// jsStoreFailed is the JetStream error code of a message the stream could
// not store (JSStreamStoreFailedF).
const jsStoreFailed jetstream.ErrorCode = 10077

// streamFull reports whether a publish failed because the stream is at its
// limits with DiscardNew. The server answers every store failure with one
// code (10077) and its own error's text as the description; the text of
// the server's sentinels (ErrMaxMsgs, ErrMaxBytes, ErrMaxMsgsPerSubject) is
// the only thing that tells a full stream apart. The texts are written here
// so that a client does not link the server; TestFullStreamTexts compares
// them with the server's sentinels and TestStreamLimits checks the whole
// path against a real server.
func streamFull(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != jsStoreFailed {
		return false
	}
	switch apiErr.Description {
	case textMaxMsgs, textMaxBytes, textMaxMsgsPerSubject:
		return true
	}
	return false
}

// The server's texts of a full stream (see streamFull).
const (
	textMaxMsgs           = "maximum messages exceeded"
	textMaxBytes          = "maximum bytes exceeded"
	textMaxMsgsPerSubject = "maximum messages per subject exceeded"
)

// errTryAgain marks an error the caller wants retried whatever it is (a
// consumer that provisioning has not created yet).
var errTryAgain = errors.New("try again")

// retryable reports whether an API call (provisioning, lookups) may succeed
// when repeated: timeouts, no responders, a lost connection that is being
// re-established, and 503/408 API errors (JetStream not ready, no meta
// leader), and a placement refused because a peer is offline (a cluster
// still forming, or a server restarting: JetStream's "no suitable peers
// for placement, peer offline"). Any other API error is an answer, not an
// outage.
func retryable(err error) bool {
	if err == nil || errors.Is(err, nats.ErrConnectionClosed) {
		return false
	}
	if errors.Is(err, errTryAgain) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code == 503 || apiErr.Code == 408 || peerOffline(apiErr)
	}
	return true
}

// errCodeNoPeers is JetStream's error code of a stream or consumer it
// cannot place on enough peers.
const errCodeNoPeers = 10005

// peerOffline reports a placement refused for a peer that is offline, not
// for a cluster too small for the replicas asked (which is an answer).
func peerOffline(e *jetstream.APIError) bool {
	return e.ErrorCode == errCodeNoPeers && strings.Contains(e.Description, "offline")
}
