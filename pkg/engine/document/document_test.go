package document

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeAll(t *testing.T) {
	docs, err := DecodeAll([]byte(`---
# comment only: skipped
---
apiVersion: v1
kind: Pod
metadata:
  name: a
  labels: &l {app: web}
spec:
  replicas: 3
  ratio: 0.5
  big: 0x10
  on: yes
  empty:
  quoted: "007"
---
kind: Merged
base: &b {x: 1, y: 2}
over:
  <<: *b
  y: 3
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 {
		t.Fatalf("%d documents, want 2", len(docs))
	}
	pod := docs[0].Object
	if docs[0].Index != 1 || docs[0].Line < 3 {
		t.Fatalf("position %d line %d", docs[0].Index, docs[0].Line)
	}
	spec := Map(pod, "spec")
	for k, want := range map[string]any{"replicas": float64(3), "ratio": 0.5, "big": float64(16), "on": "yes", "empty": nil, "quoted": "007"} {
		if got := spec[k]; got != want {
			t.Errorf("spec.%s = %#v, want %#v", k, got, want)
		}
	}
	over := Map(docs[1].Object, "over")
	if over["x"] != float64(1) || over["y"] != float64(3) {
		t.Errorf("merge keys: %v", over)
	}
}

func TestDecodeAllErrors(t *testing.T) {
	tests := map[string]struct {
		in   string
		want string
	}{
		"not an object": {in: "- a\n- b\n", want: "document 1"},
		"syntax":        {in: "a: [\n", want: "document 1"},
		"second bad":    {in: "a: 1\n---\nb: {\n", want: "document 2"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeAll([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want mention of %q", err, tc.want)
			}
		})
	}
	if _, err := DecodeAll([]byte("[1]")); !errors.Is(err, ErrNotObject) {
		t.Fatalf("want ErrNotObject, got %v", err)
	}
}

func TestDeepCopyAndPaths(t *testing.T) {
	m := map[string]any{"a": map[string]any{"b": []any{map[string]any{"c": "d"}}}}
	cp := DeepCopyMap(m)
	cp["a"].(map[string]any)["b"].([]any)[0].(map[string]any)["c"] = "changed"
	if String(m["a"].(map[string]any)["b"].([]any)[0].(map[string]any), "c") != "d" {
		t.Fatal("deep copy shares memory")
	}
	SetPath(m, "x.y.z", "v")
	if String(m, "x", "y", "z") != "v" {
		t.Fatalf("SetPath: %v", m)
	}
	if !Equal(map[string]any{"n": float64(1)}, map[string]any{"n": float64(1)}) {
		t.Fatal("Equal")
	}
}

func FuzzDecodeAll(f *testing.F) {
	f.Add([]byte("a: 1\n---\nb: [1, {c: d}]\n"))
	f.Add([]byte("x: &a [*a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = DecodeAll(data)
	})
}

func TestAliasBomb(t *testing.T) {
	bomb := `a: &a ["x","x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g,*g]
`
	if _, err := DecodeAll([]byte(bomb)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("want ErrTooLarge, got %v", err)
	}
}
