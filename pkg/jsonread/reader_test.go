package jsonread

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzValue: whenever Value takes a whole input, it gives what
// encoding/json decodes into an any; whatever encoding/json refuses, it
// does not take.
func FuzzValue(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,-2.5e3,{},[]],"b":null,"c":true,"d":"\u00e9\ud800 \/","a":2}`,
		`"` + "\xff" + `"`, `1e999`, `01`, `-`, `[1,]`, `{"a" 1}`, ` 0.5 `, `"\u2028"`,
		strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
		strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := Reader{Data: data}
		v, ok := r.Value()
		// With Text, strings are slices of it: the same values.
		rt := Reader{Data: data, Text: string(data)}
		if vt, okt := rt.Value(); okt != ok || rt.Pos != r.Pos || !reflect.DeepEqual(vt, v) {
			t.Fatalf("%q: with Text, got %#v (%v), want %#v (%v)", data, vt, okt, v, ok)
		}
		if !ok || !r.End() {
			return
		}
		var want any
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("%q: taken, encoding/json refuses it: %v", data, err)
		}
		if !reflect.DeepEqual(v, want) {
			t.Fatalf("%q:\ngot  %#v\nwant %#v", data, v, want)
		}
	})
}

// TestValueTakesWhatAPIServersSend: the common shapes take the direct
// path (a Reader that took nothing would pass FuzzValue).
func TestValueTakesWhatAPIServersSend(t *testing.T) {
	for _, s := range []string{`{"metadata":{"name":"a","labels":{}},"spec":{"containers":[{"image":"nginx","ports":[{"containerPort":80}]}]}}`, `[]`, `"é"`, `-0.0e+1`, `null`} {
		r := Reader{Data: []byte(s)}
		if _, ok := r.Value(); !ok || !r.End() {
			t.Errorf("%s: not taken", s)
		}
	}
}

// FuzzUint64Into: whenever Uint64Into takes a whole input, encoding/json
// decodes the same number into a uint64.
func FuzzUint64Into(f *testing.F) {
	for _, s := range []string{`0`, `18446744073709551615`, `18446744073709551616`, `01`, `-1`, `1.0`, `1e3`, ` 42 `, `""`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := Reader{Data: data}
		var n uint64
		if !r.Uint64Into(&n) || !r.End() {
			return
		}
		var want uint64
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("%q: taken as %d, encoding/json refuses it: %v", data, n, err)
		}
		if n != want {
			t.Fatalf("%q: got %d, want %d", data, n, want)
		}
	})
}

func TestUint64IntoTakesSequences(t *testing.T) {
	for s, want := range map[string]uint64{`0`: 0, `7`: 7, ` 1234567890123`: 1234567890123, `18446744073709551615`: 1<<64 - 1} {
		r := Reader{Data: []byte(s)}
		var n uint64
		if !r.Uint64Into(&n) || !r.End() || n != want {
			t.Errorf("%s: got %d, taken %v", s, n, r.End())
		}
	}
}

func TestRaw(t *testing.T) {
	for in, want := range map[string]string{`"VERDICT_RESULTS"`: "VERDICT_RESULTS", ` ""`: "", `"é"`: "é"} {
		r := Reader{Data: []byte(in)}
		if got, ok := r.Raw(); !ok || string(got) != want || !r.End() {
			t.Errorf("%s: got %q, %v", in, got, ok)
		}
	}
	for _, in := range []string{`"a\"b"`, "\"a\x01\"", `"open`, `1`} {
		r := Reader{Data: []byte(in)}
		if got, ok := r.Raw(); ok {
			t.Errorf("%s: taken as %q", in, got)
		}
	}
}
