package queue

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// The texts streamFull compares are the server's own.
func TestFullStreamTexts(t *testing.T) {
	for got, want := range map[string]error{
		textMaxMsgs:           server.ErrMaxMsgs,
		textMaxBytes:          server.ErrMaxBytes,
		textMaxMsgsPerSubject: server.ErrMaxMsgsPerSubject,
	} {
		if got != want.Error() {
			t.Errorf("text %q, server says %q", got, want.Error())
		}
	}
}

// TestRetryable: provisioning waits out what passes (JetStream not ready,
// a peer offline while a cluster forms) and fails at once on an answer
// (a cluster too small for the replicas asked, a refused configuration).
func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&jetstream.APIError{Code: 503, Description: "JetStream system temporarily unavailable"}, true},
		{&jetstream.APIError{Code: 400, ErrorCode: 10005, Description: "no suitable peers for placement, peer offline"}, true},
		{&jetstream.APIError{Code: 400, ErrorCode: 10005, Description: "no suitable peers for placement, insufficient resources"}, false},
		{&jetstream.APIError{Code: 400, ErrorCode: 10058, Description: "stream name already in use with a different configuration"}, false},
		{nil, false},
	} {
		if got := retryable(tc.err); got != tc.want {
			t.Errorf("retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
