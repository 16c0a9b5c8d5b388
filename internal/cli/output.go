package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/verdict-dev/verdict/pkg/engine"
)

// resultWriter writes the results of `verdict apply` as they come, in
// input order, then the summary.
type resultWriter interface {
	add(r applyResult) error
	finish(c engine.Counts) error
}

// newResultWriter writes the output named (reportFormat encodes the
// report: yaml or json).
func newResultWriter(output, reportFormat string, detailed bool, w io.Writer) resultWriter {
	switch output {
	case "json":
		return &jsonWriter{w: w}
	case "report":
		if reportFormat == "json" {
			return &reportJSONWriter{w: w}
		}
		return &reportWriter{w: w}
	case "text":
		return &textWriter{w: w}
	default:
		return newTableWriter(w, detailed)
	}
}

// tableWriter keeps the rows it will print (without --detailed, only the
// results that are not pass or skip) as compact text and prints them at
// the end with aligned columns, as text/tabwriter (padding 2) would, then
// the summary line. Nothing is printed before finish.
type tableWriter struct {
	w        io.Writer
	detailed bool
	// rows holds each row's cells, tab-separated, newline-terminated, in
	// chunks that are never reallocated.
	rows   [][]byte
	widths [tableColumns - 1]int
}

// tableColumns are POLICY, RULE, RESOURCE, RESULT and MESSAGE; the last
// one is not padded.
const tableColumns = 5

const tableChunk = 1 << 20

func newTableWriter(w io.Writer, detailed bool) *tableWriter {
	return &tableWriter{w: w, detailed: detailed}
}

func (t *tableWriter) add(r applyResult) error {
	if !t.detailed && (r.Result == string(engine.StatusPass) || r.Result == string(engine.StatusSkip)) {
		return nil
	}
	if len(t.rows) == 0 {
		t.addRow("POLICY", "RULE", "RESOURCE", "RESULT", "MESSAGE")
	}
	res := r.Kind + "/" + r.Name
	if r.Namespace != "" {
		res = r.Kind + "/" + r.Namespace + "/" + r.Name
	}
	t.addRow(r.Policy, r.Rule, res, r.Result, oneLine(r.Message))
	return nil
}

func (t *tableWriter) addRow(cells ...string) {
	n := len(cells)
	for i, c := range cells {
		if strings.ContainsAny(c, "\t\n") {
			c = oneLine(c)
			cells[i] = c
		}
		n += len(c)
		if i < len(t.widths) {
			t.widths[i] = max(t.widths[i], utf8.RuneCountInString(c))
		}
	}
	last := len(t.rows) - 1
	if last < 0 || len(t.rows[last])+n > cap(t.rows[last]) {
		t.rows = append(t.rows, make([]byte, 0, max(tableChunk, n)))
		last++
	}
	b := t.rows[last]
	for i, c := range cells {
		b = append(b, c...)
		if i < len(cells)-1 {
			b = append(b, '\t')
		}
	}
	t.rows[last] = append(b, '\n')
}

func (t *tableWriter) finish(c engine.Counts) error {
	if err := t.flushRows(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(t.w, "pass: %d, fail: %d, warn: %d, error: %d, skip: %d\n", c.Pass, c.Fail, c.Warn, c.Error, c.Skip)
	return err
}

// flushRows writes the rows, aligned, and forgets them.
func (t *tableWriter) flushRows() error {
	const padding = 2
	bw := bufio.NewWriter(t.w)
	var out []byte
	for _, chunk := range t.rows {
		for len(chunk) > 0 {
			end := bytes.IndexByte(chunk, '\n')
			line := chunk[:end]
			chunk = chunk[end+1:]
			out = out[:0]
			for col := range t.widths {
				tab := bytes.IndexByte(line, '\t')
				cell := line[:tab]
				line = line[tab+1:]
				out = append(out, cell...)
				for pad := t.widths[col] + padding - utf8.RuneCount(cell); pad > 0; pad-- {
					out = append(out, ' ')
				}
			}
			out = append(append(out, line...), '\n')
			if _, err := bw.Write(out); err != nil {
				return err
			}
		}
	}
	t.rows = nil
	return bw.Flush()
}

// oneLine folds the white space of s into single spaces, trimmed.
func oneLine(s string) string {
	if isOneLine(s) {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// isOneLine reports whether oneLine would return s unchanged: ASCII, no
// white space but single spaces between words.
func isOneLine(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= utf8.RuneSelf:
			return false
		case c == ' ':
			if i == 0 || i == len(s)-1 || s[i+1] == ' ' {
				return false
			}
		case c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r':
			return false
		}
	}
	return true
}

// jsonWriter writes {"results": [...], "summary": {...}} one result at a
// time, indented as json.Encoder with a two-space indent writes it.
type jsonWriter struct {
	w io.Writer
	n int
}

func (j *jsonWriter) add(r applyResult) error {
	b, err := json.MarshalIndent(r, "    ", "  ")
	if err != nil {
		return err
	}
	sep := ",\n    "
	if j.n == 0 {
		sep = "{\n  \"results\": [\n    "
	}
	j.n++
	if _, err := io.WriteString(j.w, sep); err != nil {
		return err
	}
	_, err = j.w.Write(b)
	return err
}

func (j *jsonWriter) finish(c engine.Counts) error {
	b, err := json.MarshalIndent(summaryMap(c), "  ", "  ")
	if err != nil {
		return err
	}
	head := "\n  ],\n  \"summary\": "
	if j.n == 0 {
		head = "{\n  \"results\": [],\n  \"summary\": "
	}
	_, err = fmt.Fprintf(j.w, "%s%s\n}\n", head, b)
	return err
}

// reportWriter writes a wgpolicyk8s.io/v1alpha2 ClusterPolicyReport holding
// every result, a batch of entries at a time: the YAML a marshaller gives
// for the whole report, whose keys sort results before summary.
type reportWriter struct {
	w       io.Writer
	n       int
	pending []any
}

// reportBatch is how many entries are marshalled at once.
const reportBatch = 512

const reportHead = `apiVersion: wgpolicyk8s.io/v1alpha2
kind: ClusterPolicyReport
metadata:
  name: verdict-apply
`

func (rw *reportWriter) add(r applyResult) error {
	rw.pending = append(rw.pending, reportEntry(r))
	if len(rw.pending) < reportBatch {
		return nil
	}
	return rw.flush()
}

// reportEntry is the report's result of r.
func reportEntry(r applyResult) map[string]any {
	entry := map[string]any{
		"policy":  r.Policy,
		"rule":    r.Rule,
		"result":  r.Result,
		"message": r.Message,
		"scored":  r.Scored,
		"source":  "verdict",
		"resources": []any{map[string]any{
			"kind": r.Kind, "namespace": r.Namespace, "name": r.Name,
		}},
	}
	if r.Category != "" {
		entry["category"] = r.Category
	}
	if r.Severity != "" {
		entry["severity"] = r.Severity
	}
	return entry
}

// flush writes the pending entries. A list at the top level is written as
// under "results:": its items are not indented.
func (rw *reportWriter) flush() error {
	if len(rw.pending) == 0 {
		return nil
	}
	b, err := yamlMarshal(rw.pending)
	if err != nil {
		return err
	}
	if rw.n == 0 {
		if _, err := io.WriteString(rw.w, reportHead+"results:\n"); err != nil {
			return err
		}
	}
	rw.n += len(rw.pending)
	rw.pending = rw.pending[:0]
	_, err = rw.w.Write(b)
	return err
}

func (rw *reportWriter) finish(c engine.Counts) error {
	if err := rw.flush(); err != nil {
		return err
	}
	if rw.n == 0 {
		if _, err := io.WriteString(rw.w, reportHead+"results: []\n"); err != nil {
			return err
		}
	}
	b, err := yamlMarshal(map[string]any{"summary": summaryMap(c)})
	if err != nil {
		return err
	}
	_, err = rw.w.Write(b)
	return err
}

// reportJSONWriter writes the ClusterPolicyReport of reportWriter as
// indented JSON (apply --policy-report --output-format json), at the end.
type reportJSONWriter struct {
	w       io.Writer
	results []any
}

func (rw *reportJSONWriter) add(r applyResult) error {
	rw.results = append(rw.results, reportEntry(r))
	return nil
}

func (rw *reportJSONWriter) finish(c engine.Counts) error {
	results := rw.results
	if results == nil {
		results = []any{}
	}
	b, err := json.MarshalIndent(map[string]any{
		"apiVersion": "wgpolicyk8s.io/v1alpha2",
		"kind":       "ClusterPolicyReport",
		"metadata":   map[string]any{"name": "verdict-apply"},
		"results":    results,
		"summary":    summaryMap(c),
	}, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(rw.w, "%s\n", b)
	return err
}
