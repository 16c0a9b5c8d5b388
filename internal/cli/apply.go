package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// ApplyOptions configures `verdict apply`.
type ApplyOptions struct {
	Policies  []string
	Resources []string
	// Output is table, json or report.
	Output string
	// Detailed prints every result in the table, not only the failures.
	Detailed bool
	// Operation is the admission operation to evaluate under.
	Operation string
}

// applyResult is one rule's result on one resource.
type applyResult struct {
	Policy    string `json:"policy"`
	Rule      string `json:"rule"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Result    string `json:"result"`
	Message   string `json:"message,omitempty"`
	Category  string `json:"category,omitempty"`
	Severity  string `json:"severity,omitempty"`
	Scored    bool   `json:"scored"`
}

// Apply evaluates the policies on the resources and writes the results.
// It returns the counts; the caller maps failures to the exit code.
func Apply(opts ApplyOptions, stdin io.Reader, stdout io.Writer) (engine.Counts, error) {
	var counts engine.Counts
	pdocs, err := loadDocuments(opts.Policies, stdin)
	if err != nil {
		return counts, fmt.Errorf("policies: %w", err)
	}
	if len(pdocs.Policies) == 0 {
		return counts, fmt.Errorf("no ClusterPolicy or Policy found in %s", strings.Join(opts.Policies, ", "))
	}
	resources, err := loadResources(opts.Resources, stdin)
	if err != nil {
		return counts, fmt.Errorf("resources: %w", err)
	}
	eng, err := engine.New()
	if err != nil {
		return counts, err
	}
	set := &engine.Set{Exceptions: pdocs.Exceptions}
	for _, p := range pdocs.Policies {
		cp, err := eng.Compile(p)
		if err != nil {
			return counts, err
		}
		set.Policies = append(set.Policies, cp)
	}
	op := strings.ToUpper(opts.Operation)
	if op == "" {
		op = engine.OpCreate
	}
	results := make([][]applyResult, len(resources))
	parallel(len(resources), func(i int) {
		req := &engine.Request{Operation: op, Object: resources[i]}
		if op == engine.OpDelete {
			req.Object, req.OldObject = nil, resources[i]
		}
		resps, _ := eng.Apply(req, set)
		results[i] = flatten(resps, resources[i])
	})
	var all []applyResult
	for _, rs := range results {
		for _, r := range rs {
			counts.Add(engine.Status(r.Result))
			all = append(all, r)
		}
	}
	switch opts.Output {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"results": all, "summary": summaryMap(counts)}); err != nil {
			return counts, err
		}
	case "report":
		if err := writeReport(stdout, all, counts); err != nil {
			return counts, err
		}
	case "", "table":
		if err := writeTable(stdout, all, opts.Detailed); err != nil {
			return counts, err
		}
	default:
		return counts, fmt.Errorf("unknown output %q: use table, json or report", opts.Output)
	}
	if opts.Output != "json" && opts.Output != "report" {
		fmt.Fprintf(stdout, "pass: %d, fail: %d, warn: %d, error: %d, skip: %d\n", counts.Pass, counts.Fail, counts.Warn, counts.Error, counts.Skip)
	}
	return counts, nil
}

func summaryMap(c engine.Counts) map[string]int {
	return map[string]int{"pass": c.Pass, "fail": c.Fail, "warn": c.Warn, "error": c.Error, "skip": c.Skip}
}

func flatten(resps []engine.Response, obj map[string]any) []applyResult {
	var out []applyResult
	for _, resp := range resps {
		for _, rr := range resp.Rules {
			res := string(rr.Status)
			if rr.Status == engine.StatusFail && !resp.Policy.Scored {
				res = string(engine.StatusWarn)
			}
			out = append(out, applyResult{
				Policy:    resp.Policy.Name(),
				Rule:      rr.Name,
				Kind:      document.String(obj, "kind"),
				Namespace: document.String(obj, "metadata", "namespace"),
				Name:      document.String(obj, "metadata", "name"),
				Result:    res,
				Message:   rr.Message,
				Category:  resp.Policy.Category,
				Severity:  resp.Policy.Severity,
				Scored:    resp.Policy.Scored,
			})
		}
	}
	return out
}

func writeTable(w io.Writer, all []applyResult, detailed bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	wrote := false
	for _, r := range all {
		if !detailed && (r.Result == "pass" || r.Result == "skip") {
			continue
		}
		if !wrote {
			fmt.Fprintln(tw, "POLICY\tRULE\tRESOURCE\tRESULT\tMESSAGE")
			wrote = true
		}
		res := r.Kind + "/" + r.Name
		if r.Namespace != "" {
			res = r.Kind + "/" + r.Namespace + "/" + r.Name
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Policy, r.Rule, res, r.Result, oneLine(r.Message))
	}
	return tw.Flush()
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// writeReport writes a wgpolicyk8s.io/v1alpha2 ClusterPolicyReport holding
// every result.
func writeReport(w io.Writer, all []applyResult, c engine.Counts) error {
	results := make([]any, 0, len(all))
	for _, r := range all {
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
		results = append(results, entry)
	}
	report := map[string]any{
		"apiVersion": "wgpolicyk8s.io/v1alpha2",
		"kind":       "ClusterPolicyReport",
		"metadata":   map[string]any{"name": "verdict-apply"},
		"results":    results,
		"summary":    summaryMap(c),
	}
	b, err := yamlMarshal(report)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// parallel runs fn(0..n-1) on all cores.
func parallel(n int, fn func(i int)) {
	workers := runtime.GOMAXPROCS(0)
	if workers > n {
		workers = n
	}
	if workers <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	next := make(chan int, workers*4)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// loadResources reads resources, decoding the documents of large files in
// parallel.
func loadResources(paths []string, stdin io.Reader) ([]map[string]any, error) {
	files, err := expandPaths(paths)
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	for _, f := range files {
		data, err := readFile(f, stdin)
		if err != nil {
			return nil, err
		}
		chunks := splitDocuments(data)
		decoded := make([][]document.Doc, len(chunks))
		errs := make([]error, len(chunks))
		parallel(len(chunks), func(i int) {
			decoded[i], errs[i] = document.DecodeAll(chunks[i])
		})
		for i := range chunks {
			if errs[i] != nil {
				return nil, fmt.Errorf("%s: %w", f, errs[i])
			}
			for _, d := range decoded[i] {
				kind := document.String(d.Object, "kind")
				if policy.IsPolicyGroup(document.String(d.Object, "apiVersion")) {
					continue
				}
				if kind == "List" {
					items, _ := d.Object["items"].([]any)
					for _, it := range items {
						if m, ok := it.(map[string]any); ok {
							out = append(out, defaultNamespace(m))
						}
					}
					continue
				}
				out = append(out, defaultNamespace(d.Object))
			}
		}
	}
	return out, nil
}

// splitDocuments cuts a YAML stream at its document separators into
// chunks of about 64 KiB, each still a valid stream.
func splitDocuments(data []byte) [][]byte {
	const target = 64 << 10
	var chunks [][]byte
	start := 0
	for i := 0; i < len(data); {
		j := i
		for j < len(data) && data[j] != '\n' {
			j++
		}
		line := data[i:j]
		if i-start >= target && len(line) >= 3 && string(line[:3]) == "---" && (len(line) == 3 || line[3] == ' ' || line[3] == '\r') {
			chunks = append(chunks, data[start:i])
			start = i
		}
		i = j + 1
	}
	if start < len(data) {
		chunks = append(chunks, data[start:])
	}
	return chunks
}

var _ = sort.Strings
