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
