package document

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// referenceDecodeAll is how the decoder worked before it cut the stream at
// its markers: the YAML parser reads the whole stream, one document after
// another. The split decoder must agree with it.
func referenceDecodeAll(data []byte) ([]Doc, error) {
	yd := yaml.NewDecoder(bytes.NewReader(data))
	var docs []Doc
	for i := 0; ; i++ {
		var n yaml.Node
		err := yd.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return docs, err
		}
		v, err := (&decoder{budget: budgetFor(len(data))}).fromNode(&n, 0)
		if err != nil {
			return docs, err
		}
		if v == nil {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return docs, ErrNotObject
		}
		docs = append(docs, Doc{Object: m, Index: i, Line: n.Line})
	}
}

// sameDecoding reports how the split decoder and the reference disagree on
// data, or "" when they agree: the same documents (value, index and line)
// and an error on the same streams. Where both fail, the documents both
// returned must agree: the parser reads a token ahead, so the reference
// can fail on the start of a document before it returns the one before,
// and the split decoder parses a document whole before returning it.
func sameDecoding(data []byte) string {
	want, wantErr := referenceDecodeAll(data)
	got, gotErr := DecodeAll(data)
	if (wantErr == nil) != (gotErr == nil) {
		return fmt.Sprintf("error: reference %v, split %v", wantErr, gotErr)
	}
	if wantErr != nil {
		n := min(len(got), len(want))
		got, want = got[:n], want[:n]
	}
	if len(got) != len(want) {
		return fmt.Sprintf("%d documents, reference %d (errors %v / %v)", len(got), len(want), gotErr, wantErr)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Index != w.Index || g.Line != w.Line {
			return fmt.Sprintf("document %d at index %d line %d, reference index %d line %d", i, g.Index, g.Line, w.Index, w.Line)
		}
		if fmt.Sprint(g.Object) != fmt.Sprint(w.Object) {
			return fmt.Sprintf("document %d: %v, reference %v", i, g.Object, w.Object)
		}
	}
	return ""
}

// TestSplitAgreesOnCorpus decodes every manifest of the conformance corpus
// and the benchmark workloads both ways.
func TestSplitAgreesOnCorpus(t *testing.T) {
	const corpus = "../../../../shared/conformance"
	if _, err := os.Stat(corpus); err != nil {
		t.Skipf("conformance corpus not found at %s: %v", corpus, err)
	}
	roots := []string{corpus, "../../../../shared/bench", "../../../deploy", "../../../internal/cli/testdata"}
	files := 0
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !isManifest(path) {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files++
			if diff := sameDecoding(data); diff != "" {
				t.Errorf("%s: %s", path, diff)
			}
			return nil
		})
		if errors.Is(err, fs.ErrNotExist) {
			t.Logf("%s not found", root)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 100 {
		t.Fatalf("only %d manifests compared", files)
	}
	t.Logf("%d manifests decode the same both ways", files)
}

func isManifest(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// splitCases are streams whose markers, comments, directives and scalars
// sit where a splitter could go wrong.
var splitCases = []string{
	"",
	"# only a comment\n",
	"a: 1\n",
	"---\na: 1\n",
	"# lead\n---\na: 1\n",
	"%YAML 1.2\n---\na: 1\n",
	"%YAML 1.1\n%TAG ! tag:example.com,2000:\n---\na: !x 1\n",
	"a: 1\n---\n",
	"a: 1\n---\n---\nb: 2\n",
	"a: 1\n...\nb: 2\n",
	"a: 1\n...\n---\nb: 2\n",
	"a: 1\n...\n# c\n...\nb: 2\n",
	"...\na: 1\n",
	"--- {a: 1}\n--- {b: 2}\n",
	"--- |\n  text\n",
	"--- >\n  folded\n---\nb: 1\n",
	"a: |\n  x\n  ---\n  y\nb: 2\n",
	"a: 'x\n---\ny'\n",
	"a: \"x\n...\ny\"\n",
	"a: x\n  ---\n",
	"a:\n- 1\n---\n- 2\n",
	"----\na: 1\n",
	"---x: 1\n",
	"--- # comment\na: 1\n",
	"---\r\na: 1\r\n---\r\nb: 2\r\n",
	"\xef\xbb\xbfa: 1\n---\nb: 2\n",
	"a: &x {b: 1}\nc: *x\n---\nd: 1\n",
	"a: 1\n---\nb: {\n---\nc: 1\n",
	"a: 1\n---\n\tb: 1\n",
	"{\"a\": 1,\n\"b\": [1, 2]}\n",
	"a: 1\n---\n? [x]\n: y\n",
	"a: 1\n--- \nb: 2\n--- \n",
	"a: 1\n---", "a: 1\n...", "---", "...",
	"a: 1\n---\n%not a directive\n",
	"a: >-\n\n  x\n---\nb: 1\n",
	"a: b\n# c\n---\n# d\n",
	// A lone CR is a line break of its own, to the parser as to the split.
	"0: \r---", "a: 1\r---\rb: 2\r", "a: 1\r\n---\rb: 2\r\n", "a: |\r  x\r---\rb: 1",
	"a: 1\r\r---\r\rb: {\r", "a: 1\r...\rb: 2\r", "\r", "a: 1\r",
	// The parser skips a "..." after a document's end.
	"0: \n...\n...", "a: 1\n...\n...\n---\nb: 2\n", "a: 1\n...\n# c\n...\n\n---\nb: {\n",
	"a: 1\r\n...\r\n... # c\r\n---\r\nb: 2\r\n", "a: 1\n...\n...\nb: 2\n",
	"0: \n...\n... 00", "0: \n...\n...\t# c\n", "0: \n...\n... #\xf3",
}

func TestSplitAgrees(t *testing.T) {
	for _, in := range splitCases {
		if diff := sameDecoding([]byte(in)); diff != "" {
			t.Errorf("%q: %s", in, diff)
		}
	}
}

// FuzzSplitAgrees looks for a stream the split decoder reads differently
// from the parser reading it whole.
func FuzzSplitAgrees(f *testing.F) {
	for _, in := range splitCases {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if diff := sameDecoding(data); diff != "" {
			t.Fatalf("%q: %s", data, diff)
		}
	})
}

// blockAgrees reports how decodeBlock and the general parser disagree on
// one document, or "" when they agree or decodeBlock declines it.
func blockAgrees(data []byte) string {
	m, line, empty, ok := decodeBlock(data)
	if !ok {
		return ""
	}
	yd := yaml.NewDecoder(bytes.NewReader(data))
	var n yaml.Node
	err := yd.Decode(&n)
	if empty {
		if errors.Is(err, io.EOF) {
			return ""
		}
		if err != nil {
			return fmt.Sprintf("block: empty; parser: %v", err)
		}
		v, verr := (&decoder{budget: budgetFor(len(data))}).fromNode(&n, 0)
		if verr != nil || v != nil {
			return fmt.Sprintf("block: empty; parser: %v %v", v, verr)
		}
		return ""
	}
	if err != nil {
		return fmt.Sprintf("block: %v; parser: %v", m, err)
	}
	var extra yaml.Node
	if err := yd.Decode(&extra); !errors.Is(err, io.EOF) {
		return fmt.Sprintf("block: %v; parser: a second document (%v)", m, err)
	}
	v, err := (&decoder{budget: budgetFor(len(data))}).fromNode(&n, 0)
	if err != nil {
		return fmt.Sprintf("block: %v; parser: %v", m, err)
	}
	if fmt.Sprintf("%#v", any(m)) != fmt.Sprintf("%#v", v) {
		return fmt.Sprintf("block: %#v; parser: %#v", m, v)
	}
	if line != n.Line {
		return fmt.Sprintf("block: line %d; parser: line %d", line, n.Line)
	}
	return ""
}

var blockCases = []string{
	"a: 1\n",
	"---\na: 1\n",
	"# c\n\n---\n# d\na: 1\n",
	"--- # c\na: b\n",
	"a:\n  b: c\n  d:\n  - 1\n  - x\n",
	"a:\n- b: 1\n  c: 2\n- - x\n  - y\n-\n- # c\n  z: 1\n",
	"a: 'it''s'\nb: \"q\"\nc: '' \nd: ''''\n",
	"a: b # comment\nc: d#e\n",
	"a: {}\nb: []\nc: {} # x\n",
	"a: ~\nb: null\nc: Null\nd: NULL\ne:\nf: true\ng: False\nh: yes\ni: no\nj: on\n",
	"a: 1\n",
	"a: -1\n",
	"a: +1\n",
	"a: 0x1F\n",
	"a: 0o17\n",
	"a: 017\n",
	"a: 1.5\n",
	"a: 1e3\n",
	"a: .5\n",
	"a: -.inf\n",
	"a: .NaN\n",
	"a: 1.\n",
	"a: 100m\n",
	"a: 256Mi\n",
	"a: 1_000\n",
	"a: 2001-12-14\n",
	"a: 18446744073709551615\n",
	"a: 99999999999999999999\n",
	"a: 0b101\n",
	"a: -0b1\n",
	"a: 1e400\n",
	"a: +.5\n",
	"a: -\n",
	"a: -a\n",
	"a: 1:2\n",
	"a: -1e3\n",
	"a: 0.1e-2\n",
	"a: 1E+2\n",
	"a: +12\n",
	"a: 00\n",
	"a: -0\n",
	"a: 0x\n",
	"a: 1__0\n",
	"a: 0b+1\n",
	"a: .inf.\n",
	"a: 1.2.3\n",
	"a: 0xG\n",
	"a: 0x1g\n",
	"a: 1.5Gi\n",
	"a: +5d\n",
	"a: 1e5m\n",
	"a: -0x1F\n",
	"a: http://x/y\nb: x:y\nc: 'a: b'\n\"k\": v\n'k2': v\n",
	"a: b: c\n",
	"a: b:\n",
	"a: b\n  c\n",
	"a:\n  b\n",
	"a: 1\na: 2\n",
	"<<: {a: 1}\n",
	"a: &x 1\nb: *x\n",
	"a: !t 1\n",
	"a: |\n  x\n",
	"a: [1, 2]\n",
	"- a\n- b\n",
	"a\n",
	"  a: 1\n  b: 2\n",
	"a:\n    b: 1\n  c: 2\n",
	"a:\n  - 1\n   - 2\n",
	"key with spaces: v\nk  : v2\n",
	"? a\n: b\n",
	"a: \"x\\ny\"\n",
	"a: 'x\n  y'\n",
	"a: 1\n...\n",
	"a: ' '\nb: ''\n",
}

func TestBlockAgrees(t *testing.T) {
	declined := 0
	for _, in := range blockCases {
		if _, _, _, ok := decodeBlock([]byte(in)); !ok {
			declined++
		}
		if diff := blockAgrees([]byte(in)); diff != "" {
			t.Errorf("%q: %s", in, diff)
		}
	}
	t.Logf("%d of %d cases left to the general parser", declined, len(blockCases))
}

// TestBlockReadsManifests checks that the common shape of a manifest is
// read by decodeBlock, not left to the general parser.
func TestBlockReadsManifests(t *testing.T) {
	data, err := os.ReadFile("../../../../shared/bench/pods-1000.yaml")
	if err != nil {
		t.Skipf("bench workload not found: %v", err)
	}
	dec, err := NewDecoder(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		c, err := dec.NextChunk()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, ok := decodeBlock(c.Data); !ok {
			t.Fatalf("document %d (line %d) left to the general parser:\n%s", c.Index+1, c.Line, c.Data)
		}
		n++
	}
	if n != 1000 {
		t.Fatalf("%d documents", n)
	}
}

// FuzzBlockAgrees looks for a document decodeBlock reads differently from
// the general parser.
func FuzzBlockAgrees(f *testing.F) {
	for _, in := range blockCases {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if diff := blockAgrees(data); diff != "" {
			t.Fatalf("%q: %s", data, diff)
		}
	})
}

// BenchmarkDecodePods decodes the 1,000 Pods of the benchmark workload
// (1 MB of YAML): one op is the whole stream.
func BenchmarkDecodePods(b *testing.B) {
	data, err := os.ReadFile("../../../../shared/bench/pods-1000.yaml")
	if err != nil {
		b.Skipf("bench workload not found: %v", err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		docs, err := DecodeAll(data)
		if err != nil || len(docs) != 1000 {
			b.Fatalf("%d documents, %v", len(docs), err)
		}
	}
}

// BenchmarkDecodePodsGeneral is BenchmarkDecodePods through the general
// parser alone (the reference decoder), for comparison.
func BenchmarkDecodePodsGeneral(b *testing.B) {
	data, err := os.ReadFile("../../../../shared/bench/pods-1000.yaml")
	if err != nil {
		b.Skipf("bench workload not found: %v", err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		docs, err := referenceDecodeAll(data)
		if err != nil || len(docs) != 1000 {
			b.Fatalf("%d documents, %v", len(docs), err)
		}
	}
}
