package queue

import (
	"encoding/json"
	"sync/atomic"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/verdict-dev/verdict/pkg/jsonread"
)

// pubAckReply is JetStream's answer to a publish: the stored message's
// stream and sequence, or an API error.
type pubAckReply struct {
	Stream    string              `json:"stream"`
	Sequence  uint64              `json:"seq"`
	Duplicate bool                `json:"duplicate"`
	Error     *jetstream.APIError `json:"error"`
}

// decodePubAck reads an acknowledgement. The server's usual answer
// ({"stream":…,"seq":…} and perhaps "duplicate" and "domain") is read
// directly, as the asynchronous publisher reads one per message; anything
// else, errors included, is encoding/json's to read (FuzzDecodePubAck
// holds the two to the same answer).
func decodePubAck(data []byte) (pubAckReply, error) {
	var a pubAckReply
	if fastPubAck(data, &a) {
		return a, nil
	}
	return slowPubAck(data)
}

// slowPubAck is encoding/json's reading (apart, so that the fast path's
// reply stays on the stack).
func slowPubAck(data []byte) (pubAckReply, error) {
	a := new(pubAckReply)
	if err := json.Unmarshal(data, a); err != nil {
		return pubAckReply{}, err
	}
	return *a, nil
}

func fastPubAck(data []byte, a *pubAckReply) bool {
	r := jsonread.Reader{Data: data}
	var seen uint32
	var domain string
	ok := r.Object(func(key []byte) bool {
		switch string(key) {
		case "stream":
			raw, ok := r.Raw()
			if !ok || !jsonread.Once(&seen, 0) {
				return false
			}
			a.Stream, ok = streamName(raw)
			return ok
		case "seq":
			return jsonread.Once(&seen, 1) && r.Uint64Into(&a.Sequence)
		case "duplicate":
			return jsonread.Once(&seen, 2) && r.BoolInto(&a.Duplicate)
		case "domain":
			return r.StringInto(&domain)
		}
		return false
	})
	return ok && r.End()
}

// lastStream is the stream name of the last acknowledgement: the
// publisher's acks name the same stream again and again, so the name is
// not allocated each time.
var lastStream atomic.Pointer[string]

// streamName is raw as a string (plain ASCII only: anything else is
// encoding/json's to read).
func streamName(raw []byte) (string, bool) {
	for _, c := range raw {
		if c >= utf8.RuneSelf {
			return "", false
		}
	}
	if p := lastStream.Load(); p != nil && *p == string(raw) {
		return *p, true
	}
	s := string(raw)
	lastStream.Store(&s)
	return s, true
}
