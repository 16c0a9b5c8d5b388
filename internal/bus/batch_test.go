package bus

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine"
)

// admissionBatch is one admission's results: n policies on sampleEvent's
// resource, at one time.
func admissionBatch(n int) []ResultEvent {
	evs := make([]ResultEvent, n)
	for i := range evs {
		evs[i] = sampleEvent()
		evs[i].Policy.Key = "policy-" + strconv.Itoa(i)
		evs[i].Policy.UID = "pu-" + strconv.Itoa(i)
	}
	return evs
}

// TestResultBatchMessage: an admission's results travel as one message on
// the resource's batch subject, which every reader decodes back into the
// same results; its id is the same for the same evaluation (two replicas,
// a retry: their clocks differ) and differs when anything evaluated
// differs.
func TestResultBatchMessage(t *testing.T) {
	evs := admissionBatch(22)
	m, err := ResultBatchMessage(evs)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "verdict.results.6f1c0e4a-3b2d.@batch" {
		t.Fatalf("subject %q", m.Subject)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(ResultBatch{Results: evs})
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) != string(want) {
		t.Fatalf("data\n%s\nwant json.Marshal's\n%s", m.Data, want)
	}
	back, err := DecodeResultBatch(m.Data, true)
	if err != nil {
		t.Fatal(err)
	}
	var wantBack ResultBatch
	if err := json.Unmarshal(want, &wantBack); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, wantBack.Results) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", back, wantBack.Results)
	}

	same := func(mod func([]ResultEvent)) bool {
		t.Helper()
		other := admissionBatch(22)
		mod(other)
		o, err := ResultBatchMessage(other)
		if err != nil {
			t.Fatal(err)
		}
		return o.ID == m.ID
	}
	if !same(func(evs []ResultEvent) {
		for i := range evs {
			evs[i].Timestamp = evs[i].Timestamp.Add(time.Second)
		}
	}) {
		t.Error("the same evaluation at another time (a second replica) has another id: both would be stored")
	}
	for name, mod := range map[string]func([]ResultEvent){
		"another resource version": func(evs []ResultEvent) {
			for i := range evs {
				evs[i].Resource.ResourceVersion = "4712"
			}
		},
		"another request":        func(evs []ResultEvent) { evs[0].RequestUID = "req-2" },
		"a policy's new version": func(evs []ResultEvent) { evs[7].Policy.ResourceVersion = "13" },
		"one policy fewer":       func(evs []ResultEvent) { evs[21].Policy.Key = "policy-other" },
	} {
		if same(mod) {
			t.Errorf("%s: the same id, so JetStream would drop it as a duplicate", name)
		}
	}

	// Policies from files have no uid and no version: the outcome of
	// their rules stands for the version.
	files := admissionBatch(2)
	for i := range files {
		files[i].Policy.UID, files[i].Policy.ResourceVersion = "", ""
	}
	a, err := ResultBatchMessage(files)
	if err != nil {
		t.Fatal(err)
	}
	files[1].Rules[0].Status = engine.StatusPass
	b, err := ResultBatchMessage(files)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == b.ID {
		t.Error("files mode: another outcome of a policy without a version has the same id")
	}
}

// TestResultBatchRefused: what is not one admission's results on one
// resource makes no batch, and reads back as none.
func TestResultBatchRefused(t *testing.T) {
	tests := map[string]struct {
		mod  func([]ResultEvent) []ResultEvent
		want error
	}{
		"no results":    {mod: func([]ResultEvent) []ResultEvent { return nil }, want: ErrInvalidBatch},
		"no uid":        {mod: func(evs []ResultEvent) []ResultEvent { evs[0].Resource.UID = ""; evs[1].Resource.UID = ""; return evs }, want: ErrIncomplete},
		"two resources": {mod: func(evs []ResultEvent) []ResultEvent { evs[1].Resource.UID = "other"; return evs }, want: ErrInvalidBatch},
		"two versions":  {mod: func(evs []ResultEvent) []ResultEvent { evs[1].Resource.ResourceVersion = "1"; return evs }, want: ErrInvalidBatch},
		"a policy twice": {mod: func(evs []ResultEvent) []ResultEvent {
			evs[1].Policy.Key = evs[0].Policy.Key
			return evs
		}, want: ErrInvalidBatch},
		"no policy key": {mod: func(evs []ResultEvent) []ResultEvent { evs[1].Policy.Key = ""; return evs }, want: ErrIncomplete},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			evs := tc.mod(admissionBatch(2))
			if _, err := ResultBatchMessage(evs); !errors.Is(err, tc.want) {
				t.Fatalf("ResultBatchMessage: %v, want %v", err, tc.want)
			}
			data, err := json.Marshal(ResultBatch{Results: evs})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := DecodeResultBatch(data, true); err == nil && !errors.Is(tc.want, ErrIncomplete) {
				t.Fatalf("DecodeResultBatch read %s", data)
			}
		})
	}
	// A verified copy holds the newest result of each policy, which may
	// have seen other versions of the resource.
	evs := admissionBatch(2)
	evs[1].Resource.ResourceVersion = "1"
	m, err := VerifiedBatchMessage(evs, "id")
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "verdict.verified.6f1c0e4a-3b2d.@batch" {
		t.Fatalf("subject %q", m.Subject)
	}
	if _, err := DecodeResultBatch(m.Data, false); err != nil {
		t.Fatalf("a verified copy of two versions: %v", err)
	}
}

// FuzzDecodeResultBatch holds DecodeResultBatch to encoding/json's answer
// and the batch's checks for any input: the same results, or an error
// when either refuses.
func FuzzDecodeResultBatch(f *testing.F) {
	data, _ := json.Marshal(ResultBatch{Results: admissionBatch(3)})
	f.Add(data, true)
	f.Add([]byte(`{"results":[{"resource":{"uid":"u"},"policy":{"key":"a"}},{"resource":{"uid":"u","resourceVersion":"2"},"policy":{"key":"b"}}]}`), false)
	f.Add([]byte(`{"results":[{"resource":{"uid":"u"},"policy":{"key":"a"}},{"resource":{"uid":"u","resourceVersion":"2"},"policy":{"key":"b"}}]}`), true)
	f.Add([]byte(`{"results":[{"resource":{"uid":"u"},"policy":{"key":"a"}},{"resource":{"uid":"u"},"policy":{"key":"a"}}]}`), true)
	f.Add([]byte(`{"results":[],"results":null}`), true)
	f.Add([]byte(`{"Results":[{"resource":{"uid":"u"},"policy":{"key":"a"}}]}`), true)
	f.Add([]byte(`{"results":[{"resource":{"uid":"u"},"policy":{"key":"a","kind":"ValidatingPolicy"}},{"resource":{"uid":"u"},"policy":{"key":"a"}}],"x":1}`), true)
	f.Add([]byte(`null`), false)
	f.Fuzz(func(t *testing.T, data []byte, sameVersion bool) {
		var want ResultBatch
		werr := json.Unmarshal(data, &want)
		if werr == nil {
			werr = checkBatch(want.Results, sameVersion)
		}
		got, err := DecodeResultBatch(data, sameVersion)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: error %v, want %v", data, err, werr)
		}
		if werr == nil && !reflect.DeepEqual(got, want.Results) {
			t.Fatalf("%q:\ngot  %+v\nwant %+v", data, got, want.Results)
		}
	})
}

// FuzzEncodeResultBatch holds EncodeResultBatch to json.Marshal's bytes.
func FuzzEncodeResultBatch(f *testing.F) {
	f.Add("uid-1", "7", "p", "msg", int64(0), 3)
	f.Add("a.b~c%", "\xff", "ns/p", "ü ✓ <&>", int64(1), 1)
	f.Fuzz(func(t *testing.T, uid, rv, key, msg string, skew int64, n int) {
		n = 1 + (n&0xff)%8
		evs := admissionBatch(n)
		for i := range evs {
			evs[i].Resource.UID, evs[i].Resource.ResourceVersion = uid, rv
			evs[i].Policy.Key = key + strconv.Itoa(i)
			evs[i].Rules[0].Message = msg
			if i%2 == 1 {
				evs[i].Timestamp = evs[i].Timestamp.Add(time.Duration(skew))
			}
		}
		got, err := EncodeResultBatch(evs)
		want, werr := json.Marshal(ResultBatch{Results: evs})
		if (err == nil) != (werr == nil) || string(got) != string(want) {
			t.Fatalf("EncodeResultBatch = %s, %v\nwant %s, %v", got, err, want, werr)
		}
	})
}

// BenchmarkResultBatch: an admission's 22 results (one per Pod Security
// policy of the benchmark) as 22 messages (ResultMessage, the shape
// before issue 33) and as one batch, made and read back.
//
//	go test -run '^$' -bench ResultBatch -benchmem ./internal/bus/
func BenchmarkResultBatch(b *testing.B) {
	evs := admissionBatch(22)
	b.Run("op=publish/shape=each", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, ev := range evs {
				if _, err := ResultMessage(ev); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("op=publish/shape=batch", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ResultBatchMessage(evs); err != nil {
				b.Fatal(err)
			}
		}
	})
	each := make([][]byte, len(evs))
	for i, ev := range evs {
		m, err := ResultMessage(ev)
		if err != nil {
			b.Fatal(err)
		}
		each[i] = m.Data
	}
	batch, err := ResultBatchMessage(evs)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("op=read/shape=each", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, data := range each {
				if _, err := DecodeResultEvent(data); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("op=read/shape=batch", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeResultBatch(batch.Data, true); err != nil {
				b.Fatal(err)
			}
		}
	})
}
