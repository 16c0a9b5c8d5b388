package bus

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// TestEncodeResultEvent: the direct encoding is json.Marshal's, byte for
// byte, for events with every field, none, empty rules, and strings that
// need escaping; a timestamp json.Marshal refuses is refused too.
func TestEncodeResultEvent(t *testing.T) {
	odd := sampleEvent()
	odd.Rules[0].Message = "ctl \x00\x01\x1f \b\f\n\r\t quote \" back \\ html <a href='x'>&amp;</a> sep \u2028\u2029 bad \xff\xfe\xc3 ok é ✓ 😀"
	odd.Resource.Name = "\u007f\u0080"
	for _, ev := range []ResultEvent{sampleEvent(), odd, {Resource: ResourceRef{UID: "u"}, Retracted: RetractedPolicyDeleted, Rules: []RuleResult{}}, {}} {
		want, werr := json.Marshal(ev)
		got, err := EncodeResultEvent(ev)
		if werr != nil || err != nil || !bytes.Equal(got, want) {
			t.Fatalf("got  %s (%v)\nwant %s (%v)", got, err, want, werr)
		}
	}
	for _, off := range []int{86399, -86399, -1, 59, 3601} {
		ev := sampleEvent()
		ev.Timestamp = time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("z", off))
		want, _ := json.Marshal(ev)
		if got, err := EncodeResultEvent(ev); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("zone %+d s: got %s (%v)\nwant %s", off, got, err, want)
		}
	}
	for _, at := range []time.Time{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("z", 86400))} {
		bad := sampleEvent()
		bad.Timestamp = at
		if _, err := EncodeResultEvent(bad); err == nil {
			t.Fatalf("%v encoded; json.Marshal refuses it", at)
		}
	}
}

// FuzzEncodeResultEvent holds EncodeResultEvent to json.Marshal's bytes
// for any strings and times.
func FuzzEncodeResultEvent(f *testing.F) {
	f.Add("label <team> & \"owner\" required: ü ✓", "ns/p", "web", int64(1_700_000_000_123_456_789), true)
	f.Add("\xff\u2028\x00", "", "", int64(0), false)
	f.Fuzz(func(t *testing.T, msg, key, name string, nanos int64, scored bool) {
		ev := ResultEvent{
			Resource: ResourceRef{APIVersion: "v1", Kind: "Pod", Namespace: name, Name: name, UID: key, ResourceVersion: msg},
			Policy:   PolicyRef{Key: key, Kind: name, UID: msg},
			Rules: []RuleResult{
				{Name: name, Type: engine.TypeValidation, Status: engine.Status(key), Message: msg, Exception: name},
				{Name: key, Status: engine.StatusPass, Properties: map[string]string{name: msg, key: name, "z": ""}},
			},
			Category:  msg,
			Scored:    scored,
			Timestamp: time.Unix(0, nanos).In(time.FixedZone("z", int(nanos%50000))),
			Admission: !scored,
			Retracted: key,
		}
		want, werr := json.Marshal(ev)
		got, err := EncodeResultEvent(ev)
		if (werr == nil) != (err == nil) || !bytes.Equal(got, want) {
			t.Fatalf("got  %s (%v)\nwant %s (%v)", got, err, want, werr)
		}
	})
}

// BenchmarkEncodeResultEvent: the direct encoding against json.Marshal.
//
//	go test -run '^$' -bench EncodeResultEvent -benchmem ./internal/bus/
func BenchmarkEncodeResultEvent(b *testing.B) {
	ev := sampleEvent()
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := EncodeResultEvent(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkResultMessage: a result as the message the webhook publishes
// (payload, subject, message id), one per policy and admission.
//
//	go test -run '^$' -bench ResultMessage -benchmem ./internal/bus/
func BenchmarkResultMessage(b *testing.B) {
	ev := sampleEvent()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ResultMessage(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEncodeResultEventWritesEveryField: an event with every field set
// (testkit.Fill), nested ones included, is written as json.Marshal
// writes it. It fails when ResultEvent, ResourceRef, PolicyRef or
// RuleResult gains a field the hand-written encoder does not write.
func TestEncodeResultEventWritesEveryField(t *testing.T) {
	var ev ResultEvent
	testkit.Fill(&ev)
	want, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	got, err := EncodeResultEvent(ev)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("got  %s (%v)\nwant %s", got, err, want)
	}
}
