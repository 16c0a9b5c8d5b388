package queue

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
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
