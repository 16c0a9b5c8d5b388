package bus

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/jsonread"
)

func sampleEvent() ResultEvent {
	return ResultEvent{
		Resource:   ResourceRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "team", Name: "web", UID: "6f1c0e4a-3b2d", ResourceVersion: "4711"},
		Policy:     PolicyRef{Key: "team/require-labels", Kind: "", UID: "pu-1", ResourceVersion: "12"},
		Rules:      []RuleResult{{Name: "check", Type: engine.TypeValidation, Status: engine.StatusFail, Message: "label <team> & \"owner\" required: ü ✓", Exception: "ns/exc"}, {Name: "second", Status: engine.StatusPass, Properties: map[string]string{"owner": "team-a", "reason": "ü ✓"}}},
		Category:   "Best Practices",
		Severity:   "medium",
		Scored:     true,
		Timestamp:  time.Date(2026, 11, 23, 9, 30, 0, 123456789, time.FixedZone("x", 3600)),
		Admission:  true,
		RequestUID: "req-1",
	}
}

// TestDecodeResultEvent: what Verdict publishes decodes as encoding/json
// decodes it, through the direct path.
func TestDecodeResultEvent(t *testing.T) {
	for _, ev := range []ResultEvent{sampleEvent(), {Resource: ResourceRef{UID: "u"}, Retracted: RetractedPolicyDeleted, Rules: []RuleResult{}}, {}} {
		data, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var want ResultEvent
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		d := fastDecoder{jsonread.Reader{Data: data}}
		var direct ResultEvent
		if !d.resultEvent(&direct) {
			t.Fatalf("%s: not taken by the direct path", data)
		}
		got, err := DecodeResultEvent(data)
		if err != nil || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(direct, want) {
			t.Fatalf("%s:\ngot  %+v (%v)\nwant %+v", data, got, err, want)
		}
	}
}

// FuzzDecodeResultEvent holds DecodeResultEvent to encoding/json's
// answer for any input: the same event, or an error when it errs.
func FuzzDecodeResultEvent(f *testing.F) {
	data, _ := json.Marshal(sampleEvent())
	f.Add(data)
	f.Add([]byte(`{"resource":{"uid":"u"},"rules":[],"retracted":"notSelected","scored":false,"admission":false,"timestamp":"0001-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"Resource":{"UID":"u"},"rules":null}`))
	f.Add([]byte(`{"resource":{"uid":"a"},"resource":{"name":"b"}}`))
	f.Add([]byte(`{"rules":[{"name":"a","status":"pass"}],"rules":[{"message":"m"}]}`))
	f.Add([]byte(`{"policy":{"key":"k\u00e9y\ud800"},"extra":[1,2,{"x":null}]}`))
	f.Add([]byte(` null `))
	f.Add([]byte(`{"scored":"yes"}`))
	f.Add([]byte(`{"timestamp":"2026-13-01T00:00:00Z"}`))
	f.Add([]byte(`{"rules":[{"name":"a","properties":{"k":"v","k":"w"}},{"properties":null},{"properties":{}},{"properties":{"n":1}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var want ResultEvent
		werr := json.Unmarshal(data, &want)
		got, err := DecodeResultEvent(data)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: error %v, encoding/json's %v", data, err, werr)
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\ngot  %+v\nwant %+v", data, got, want)
		}
	})
}

func BenchmarkDecodeResultEvent(b *testing.B) {
	data, _ := json.Marshal(sampleEvent())
	b.Run("direct", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for range b.N {
			if _, err := DecodeResultEvent(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for range b.N {
			var ev ResultEvent
			if err := json.Unmarshal(data, &ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}
