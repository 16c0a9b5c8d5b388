package cli

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
)

// CompareOptions configures `verdict compare`.
type CompareOptions struct {
	Kube KubeOptions
	// Namespace keeps the results of that namespace's resources only
	// (no cluster-scoped resource's).
	Namespace string
	// Policies keep the results of the policies they name: a name, or
	// namespace/name for a namespaced policy, with * and ?.
	Policies []string
	// Output is table or json.
	Output string
	// All lists the results that agree too.
	All bool
}

// Validate reports every problem of the options, wrapped in
// ErrInvalidOptions.
func (o *CompareOptions) Validate() error {
	switch o.Output {
	case "", "table", "json":
		return nil
	default:
		return fmt.Errorf("%w: unknown output %q: use table or json", ErrInvalidOptions, o.Output)
	}
}

// The report kinds compare reads, in both groups Kyverno writes.
var compareReportKinds = []struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}{
	{schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}, true},
	{schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "clusterpolicyreports"}, false},
	{schema.GroupVersionResource{Group: "openreports.io", Version: "v1alpha1", Resource: "reports"}, true},
	{schema.GroupVersionResource{Group: "openreports.io", Version: "v1alpha1", Resource: "clusterreports"}, false},
}

// Who wrote a report: its app.kubernetes.io/managed-by label.
const (
	labelManagedBy = "app.kubernetes.io/managed-by"
	byKyverno      = "kyverno"
	byVerdict      = "verdict"
)

// kyvernoSources are the sources of the results Kyverno writes, and the
// kind of policy each stands for ("" for ClusterPolicy and Policy).
var kyvernoSources = map[string]string{
	"kyverno":                      "",
	"KyvernoValidatingPolicy":      "ValidatingPolicy",
	"KyvernoImageValidatingPolicy": "ImageValidatingPolicy",
	"KyvernoMutatingPolicy":        "MutatingPolicy",
	"KyvernoGeneratingPolicy":      "GeneratingPolicy",
	"ValidatingAdmissionPolicy":    "ValidatingAdmissionPolicy",
	"MutatingAdmissionPolicy":      "MutatingAdmissionPolicy",
}

// compareKey is what a result is about, once both sides' ways of
// writing it are made the same.
type compareKey struct {
	resource   string // the subject's UID (kind/namespace/name without one)
	policyKind string // "" for ClusterPolicy and Policy
	policy     string // name, or namespace/name
	rule       string // "" for a policy of one result (the CEL kinds)
}

// CompareResource is the resource a compared result is about.
type CompareResource struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	UID        string `json:"uid,omitempty"`
}

func (r CompareResource) String() string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

// CompareRow is one policy, rule and resource and what each side
// reports of it: its result ("" when that side reports none; results
// joined by "," when a side reports several).
type CompareRow struct {
	Policy         string          `json:"policy"`
	PolicyKind     string          `json:"policyKind,omitempty"`
	Rule           string          `json:"rule"`
	Resource       CompareResource `json:"resource"`
	Kyverno        string          `json:"kyverno"`
	Verdict        string          `json:"verdict"`
	KyvernoMessage string          `json:"kyvernoMessage,omitempty"`
	VerdictMessage string          `json:"verdictMessage,omitempty"`
	Agree          bool            `json:"agree"`
}

// policyName is the policy as the table names it: Kind:name for the
// kinds other than ClusterPolicy and Policy.
func (r CompareRow) policyName() string {
	if r.PolicyKind == "" {
		return r.Policy
	}
	return r.PolicyKind + ":" + r.Policy
}

// CompareCounts counts the compared results of a policy, or of all.
type CompareCounts struct {
	Policy      string `json:"policy,omitempty"`
	Agree       int    `json:"agree"`
	Disagree    int    `json:"disagree"`
	KyvernoOnly int    `json:"kyvernoOnly"`
	VerdictOnly int    `json:"verdictOnly"`
}

func (c *CompareCounts) add(r CompareRow) {
	switch {
	case r.Agree:
		c.Agree++
	case r.Verdict == "":
		c.KyvernoOnly++
	case r.Kyverno == "":
		c.VerdictOnly++
	default:
		c.Disagree++
	}
}

// Differ says whether any result differs or is missing on one side.
func (c CompareCounts) Differ() bool { return c.Disagree+c.KyvernoOnly+c.VerdictOnly > 0 }

// Comparison is what compare found.
type Comparison struct {
	// Rows are the results that differ (all of them with All), sorted by
	// policy, rule and resource.
	Rows     []CompareRow    `json:"results"`
	Policies []CompareCounts `json:"policies"`
	Summary  CompareCounts   `json:"summary"`
	// Reports counts the reports read from each side.
	Reports map[string]int `json:"reports"`
}

// sideResults are one side's results of one key.
type sideResults struct {
	results  []string
	messages []string
}

func (s *sideResults) add(result, message string) {
	if !slices.Contains(s.results, result) {
		s.results = append(s.results, result)
		slices.Sort(s.results)
	}
	if message != "" && !slices.Contains(s.messages, message) {
		s.messages = append(s.messages, message)
	}
}

type comparePair struct {
	resource         CompareResource
	policy, kind     string
	rule             string
	kyverno, verdict sideResults
}

// Compare reads Kyverno's and Verdict's reports from the cluster and
// sets their results side by side.
//
// Kyverno's reports are those labelled app.kubernetes.io/managed-by:
// kyverno, their results those of Kyverno's sources (kyverno for
// ClusterPolicies and Policies, KyvernoValidatingPolicy and its kin for
// the CEL kinds, ValidatingAdmissionPolicy and MutatingAdmissionPolicy);
// Verdict's are labelled managed-by: verdict, their results of source
// verdict, the kind of a policy other than a ClusterPolicy or Policy in
// their policyKind property. Both groups are read: wgpolicyk8s.io
// v1alpha2 and, when the cluster serves it, openreports.io v1alpha1. A
// result is about the resource its report's scope (or the result's own
// resources) names by UID, never by the report's name, which differs
// (Verdict's shadow names its reports verdict-<uid>). The rule names of
// a CEL or Kubernetes admission policy's one result are not compared
// (Kyverno leaves a ValidatingPolicy's empty, Verdict names it after the
// policy), nor messages, properties and timestamps.
func Compare(ctx context.Context, opts CompareOptions) (*Comparison, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	kc, err := opts.Kube.clients()
	if err != nil {
		return nil, err
	}
	return compareWith(ctx, kc, opts)
}

func compareWith(ctx context.Context, kc *kubeClients, opts CompareOptions) (*Comparison, error) {
	pairs := map[compareKey]*comparePair{}
	out := &Comparison{Reports: map[string]int{byKyverno: 0, byVerdict: 0}}
	anyServed := false
	for _, rk := range compareReportKinds {
		served, err := kc.disc.served(ctx, rk.gvr.GroupVersion().String())
		if err != nil {
			return nil, err
		}
		if !served || (!rk.namespaced && opts.Namespace != "") {
			anyServed = anyServed || served
			continue
		}
		anyServed = true
		ri := kc.dyn.Resource(rk.gvr)
		list := metav1.ListOptions{LabelSelector: labelManagedBy + " in (" + byKyverno + "," + byVerdict + ")"}
		var err2 error
		if rk.namespaced && opts.Namespace != "" {
			err2 = listPages(ctx, ri.Namespace(opts.Namespace), list, defaultBatchSize, func(o map[string]any) error {
				out.Reports[document.String(o, "metadata", "labels", labelManagedBy)]++
				return foldReport(o, opts.Policies, pairs)
			})
		} else {
			err2 = listPages(ctx, ri, list, defaultBatchSize, func(o map[string]any) error {
				out.Reports[document.String(o, "metadata", "labels", labelManagedBy)]++
				return foldReport(o, opts.Policies, pairs)
			})
		}
		if err2 != nil {
			return nil, fmt.Errorf("list %s: %w", rk.gvr, err2)
		}
	}
	if !anyServed {
		return nil, fmt.Errorf("%w: the cluster serves no policy reports (wgpolicyk8s.io/v1alpha2 or openreports.io/v1alpha1)", ErrNotInCluster)
	}
	byPolicy := map[string]*CompareCounts{}
	for _, p := range pairs {
		row := CompareRow{
			Policy: p.policy, PolicyKind: p.kind, Rule: p.rule, Resource: p.resource,
			Kyverno: strings.Join(p.kyverno.results, ","), Verdict: strings.Join(p.verdict.results, ","),
			KyvernoMessage: strings.Join(p.kyverno.messages, "; "), VerdictMessage: strings.Join(p.verdict.messages, "; "),
		}
		row.Agree = row.Kyverno == row.Verdict
		name := row.policyName()
		c := byPolicy[name]
		if c == nil {
			c = &CompareCounts{Policy: name}
			byPolicy[name] = c
		}
		c.add(row)
		out.Summary.add(row)
		if !row.Agree || opts.All {
			out.Rows = append(out.Rows, row)
		}
	}
	slices.SortFunc(out.Rows, func(a, b CompareRow) int {
		return cmp.Or(cmp.Compare(a.policyName(), b.policyName()), cmp.Compare(a.Rule, b.Rule),
			cmp.Compare(a.Resource.String(), b.Resource.String()), cmp.Compare(a.Resource.UID, b.Resource.UID))
	})
	out.Rows = slices.Clip(out.Rows)
	if out.Rows == nil {
		out.Rows = []CompareRow{}
	}
	out.Policies = []CompareCounts{}
	for _, c := range byPolicy {
		out.Policies = append(out.Policies, *c)
	}
	slices.SortFunc(out.Policies, func(a, b CompareCounts) int { return cmp.Compare(a.Policy, b.Policy) })
	return out, nil
}

// foldReport adds the results of one report to pairs.
func foldReport(report map[string]any, policies []string, pairs map[compareKey]*comparePair) error {
	side := document.String(report, "metadata", "labels", labelManagedBy)
	scope := document.Map(report, "scope")
	results, _ := report["results"].([]any)
	for _, item := range results {
		r, ok := item.(map[string]any)
		if !ok {
			continue
		}
		source := document.String(r, "source")
		var kind string
		switch side {
		case byKyverno:
			k, known := kyvernoSources[source]
			if !known {
				continue
			}
			kind = k
		case byVerdict:
			if source != byVerdict {
				continue
			}
			kind = strings.TrimPrefix(document.String(r, "properties", "policyKind"), "Namespaced")
		default:
			continue
		}
		policyKey := document.String(r, "policy")
		if len(policies) > 0 && !matchesPolicy(policies, policyKey) {
			continue
		}
		subject := scope
		if subjects, _ := r["resources"].([]any); len(subjects) > 0 {
			if s, ok := subjects[0].(map[string]any); ok {
				subject = s
			}
		}
		res := CompareResource{
			APIVersion: document.String(subject, "apiVersion"), Kind: document.String(subject, "kind"),
			Namespace: document.String(subject, "namespace"), Name: document.String(subject, "name"), UID: document.String(subject, "uid"),
		}
		if res.Kind == "" && res.Name == "" && res.UID == "" {
			continue // a result about nothing named
		}
		rule := document.String(r, "rule")
		if kind != "" {
			rule = ""
		}
		id := res.UID
		if id == "" {
			id = res.String()
		}
		key := compareKey{resource: id, policyKind: kind, policy: policyKey, rule: rule}
		p := pairs[key]
		if p == nil {
			p = &comparePair{resource: res, policy: policyKey, kind: kind, rule: rule}
			pairs[key] = p
		}
		if p.resource.APIVersion == "" {
			p.resource.APIVersion = res.APIVersion
		}
		result := document.String(r, "result")
		if result == "" {
			result = document.String(r, "status") // reports older than v1alpha2's result
		}
		switch side {
		case byKyverno:
			p.kyverno.add(result, document.String(r, "message"))
		case byVerdict:
			p.verdict.add(result, document.String(r, "message"))
		}
	}
	return nil
}

// matchesPolicy says whether a filter names the policy: its name or its
// namespace/name, with * and ?.
func matchesPolicy(filters []string, key string) bool {
	_, name, _ := strings.Cut(key, "/")
	if name == "" {
		name = key
	}
	for _, f := range filters {
		if wildcard.Match(f, key) || wildcard.Match(f, name) {
			return true
		}
	}
	return false
}

// writeComparison writes the comparison as a table (the rows, then the
// counts by policy, then the total) or as JSON.
func writeComparison(w io.Writer, c *Comparison, output string) error {
	if output == "json" {
		b, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	bw := bufio.NewWriter(w)
	if len(c.Rows) > 0 {
		t := newTableWriter(bw, true)
		t.addRow("POLICY", "RULE", "RESOURCE", "KYVERNO", "VERDICT")
		for _, r := range c.Rows {
			t.addRow(r.policyName(), orDash(r.Rule), r.Resource.String(), orDash(r.Kyverno), orDash(r.Verdict))
		}
		if err := t.flushRows(); err != nil {
			return err
		}
		fmt.Fprintln(bw)
	}
	if len(c.Policies) > 0 {
		t := newTableWriter(bw, true)
		t.addRow("POLICY", "AGREE", "DISAGREE", "KYVERNO ONLY", "VERDICT ONLY")
		for _, p := range c.Policies {
			t.addRow(p.Policy, fmt.Sprint(p.Agree), fmt.Sprint(p.Disagree), fmt.Sprint(p.KyvernoOnly), fmt.Sprint(p.VerdictOnly))
		}
		if err := t.flushRows(); err != nil {
			return err
		}
	}
	s := c.Summary
	fmt.Fprintf(bw, "agree: %d, disagree: %d, kyverno only: %d, verdict only: %d (reports read: kyverno %d, verdict %d)\n",
		s.Agree, s.Disagree, s.KyvernoOnly, s.VerdictOnly, c.Reports[byKyverno], c.Reports[byVerdict])
	return bw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newCompare(ctx context.Context, stdout io.Writer) *cobra.Command {
	opts := CompareOptions{}
	cmd := &cobra.Command{
		Use:   "compare",
		Short: "List where Verdict's results and Kyverno's PolicyReports disagree, per policy, rule and resource",
		Long: `Compare reads the policy reports of the cluster (wgpolicyk8s.io/v1alpha2,
and openreports.io/v1alpha1 where it is served): Kyverno's (labelled
app.kubernetes.io/managed-by=kyverno) and those of a Verdict running
beside it in shadow mode (managed-by=verdict). It matches their results
by resource (the UID the report is about), policy and rule, and lists
those that differ: a different result, or a result only one side
reports. Then it counts, per policy, the results that agree, disagree,
or are only in Kyverno's or only in Verdict's reports.

The rule of a CEL policy (ValidatingPolicy and its kin) or of a
Kubernetes admission policy is not compared: each has one result per
resource, which Kyverno and Verdict name differently. Messages are
shown in the JSON output, not compared.

Exit codes:
  0  every result agrees (or there are none)
  1  a result differs, or only one side reports it
  2  bad input, or the cluster cannot be read`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := Compare(ctx, opts)
			if err != nil {
				return err
			}
			for side, n := range map[string]int{"Kyverno": c.Reports[byKyverno], "Verdict": c.Reports[byVerdict]} {
				if n == 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "no report of %s's was found (label %s=%s)\n", side, labelManagedBy, strings.ToLower(side))
				}
			}
			if err := writeComparison(stdout, c, opts.Output); err != nil {
				return err
			}
			if c.Summary.Differ() {
				return errFailures
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Kube.Kubeconfig, "kubeconfig", "", "the kubeconfig file ($KUBECONFIG, then ~/.kube/config, by default)")
	f.StringVar(&opts.Kube.Context, "context", "", "the kubeconfig context (its current context by default)")
	f.StringVarP(&opts.Namespace, "namespace", "n", "", "compare the results of this namespace's resources only")
	f.StringSliceVar(&opts.Policies, "policy", nil, "compare the results of these policies only: name or namespace/name, * and ? allowed")
	f.StringVarP(&opts.Output, "output", "o", "table", "output: table or json")
	f.BoolVar(&opts.All, "all", false, "list the results that agree too")
	return cmd
}
