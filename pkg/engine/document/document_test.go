package document

import (
	"errors"
	"fmt"
	"io"
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

func TestDecoder(t *testing.T) {
	pod := func(name string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec: {containers: [{name: c, image: nginx}]}\n"
	}
	big := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata: {k: \"" + strings.Repeat("x", 4000) + "\"}\n"
	tests := map[string]struct {
		in   string
		opts []DecoderOption
		// names are the metadata.name of the documents read before the end
		// or the error.
		names []string
		// indexes are their Doc.Index.
		indexes []int
		err     error
		errText string
	}{
		"documents in order": {
			in:    pod("a") + "---\n" + pod("b") + "---\n" + pod("c"),
			names: []string{"a", "b", "c"}, indexes: []int{0, 1, 2},
		},
		"empty documents are counted, not returned": {
			in:    "---\n# only a comment\n---\n" + pod("a") + "---\n---\n" + pod("b"),
			names: []string{"a", "b"}, indexes: []int{1, 3},
		},
		"a document over the limit names its position": {
			in:    pod("a") + "---\n" + big + "---\n" + pod("c"),
			opts:  []DecoderOption{WithMaxDocumentBytes(1024)},
			names: []string{"a"}, indexes: []int{0},
			err: ErrDocumentTooLarge, errText: "document 2: document too large: over 1024 bytes",
		},
		"a document under the limit": {
			in:    big,
			opts:  []DecoderOption{WithMaxDocumentBytes(int64(len(big)))},
			names: []string{"big"}, indexes: []int{0},
		},
		"a syntax error stops the stream": {
			in:    pod("a") + "---\nb: {\n---\n" + pod("c"),
			names: []string{"a"}, indexes: []int{0},
			errText: "document 2",
		},
		"a list is not an object": {
			in:    pod("a") + "---\n- x\n",
			names: []string{"a"}, indexes: []int{0},
			err: ErrNotObject, errText: "document 2 (line 5)",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dec, err := NewDecoder(strings.NewReader(tc.in), tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			var indexes []int
			for {
				d, err := dec.Next()
				if errors.Is(err, io.EOF) {
					if tc.err != nil || tc.errText != "" {
						t.Fatalf("want an error, got the end of the stream")
					}
					break
				}
				if err != nil {
					if tc.err != nil && !errors.Is(err, tc.err) {
						t.Fatalf("err = %v, want %v", err, tc.err)
					}
					if tc.errText == "" || !strings.Contains(err.Error(), tc.errText) {
						t.Fatalf("err = %v, want mention of %q", err, tc.errText)
					}
					if _, again := dec.Next(); again == nil || again.Error() != err.Error() {
						t.Fatalf("after an error Next returned %v", again)
					}
					break
				}
				names = append(names, String(d.Object, "metadata", "name"))
				indexes = append(indexes, d.Index)
			}
			if strings.Join(names, ",") != strings.Join(tc.names, ",") || fmt.Sprint(indexes) != fmt.Sprint(tc.indexes) {
				t.Fatalf("read %v at %v, want %v at %v", names, indexes, tc.names, tc.indexes)
			}
		})
	}
	if _, err := NewDecoder(strings.NewReader(""), WithMaxDocumentBytes(0)); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("limit 0: %v", err)
	}
}

// TestDecoderReadsAsItGoes checks that the first document of a long stream
// is returned having read little more than that document.
func TestDecoderReadsAsItGoes(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 10000; i++ {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%d}\n", i)
	}
	src := &countReader{r: strings.NewReader(b.String())}
	dec, err := NewDecoder(src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dec.Next(); err != nil {
		t.Fatal(err)
	}
	if src.n > readBuffer {
		t.Fatalf("read %d bytes of %d for the first document", src.n, b.Len())
	}
	docs, err := DecodeAll([]byte(b.String()))
	if err != nil || len(docs) != 10000 || String(docs[9999].Object, "metadata", "name") != "cm-9999" {
		t.Fatalf("DecodeAll: %d documents, %v", len(docs), err)
	}
}

type countReader struct {
	r io.Reader
	n int
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// FuzzDecoderLimit checks that a size limit only ever cuts a stream short:
// the limited decoder returns what DecodeAll returns, up to its error. (The
// parser checks encoding a buffer ahead, so reading in smaller pieces may
// return a document or two more before an encoding error.)
func FuzzDecoderLimit(f *testing.F) {
	f.Add([]byte("a: 1\n---\nb: [1, {c: d}]\n---\nc: " + strings.Repeat("x", 200) + "\n"))
	f.Add([]byte("x: &a [*a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		all, allErr := DecodeAll(data)
		dec, err := NewDecoder(strings.NewReader(string(data)), WithMaxDocumentBytes(64))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			d, err := dec.Next()
			if errors.Is(err, io.EOF) {
				if i != len(all) || allErr != nil {
					t.Fatalf("limited decoder ended after %d documents; DecodeAll read %d (%v)", i, len(all), allErr)
				}
				return
			}
			if err != nil {
				return
			}
			if i >= len(all) {
				if allErr == nil {
					t.Fatalf("limited decoder read %d documents; DecodeAll read %d", i+1, len(all))
				}
				return
			}
			if d.Index != all[i].Index || fmt.Sprint(d.Object) != fmt.Sprint(all[i].Object) {
				t.Fatalf("document %d differs from DecodeAll's", i)
			}
		}
	})
}
