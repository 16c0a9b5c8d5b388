package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/cli/decisions"
	"github.com/verdict-dev/verdict/internal/cli/work"
	"github.com/verdict-dev/verdict/internal/platform/natsconn"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
)

// What a candidate's rule would have done to a recorded request.
const (
	whatifDeny     = "deny"
	whatifWarn     = "warn"
	whatifMutate   = "mutate"
	whatifGenerate = "generate"
	whatifError    = "error"
	whatifPass     = "pass"
	whatifSkip     = "skip"
)

// WhatIfOptions are `verdict whatif`'s inputs.
type WhatIfOptions struct {
	Policies []string
	NATS     natsconn.Config
	Timeout  time.Duration
	Since    time.Duration
	// Namespace limits the requests to one namespace ("" all).
	Namespace string
	// Examples is how many requests each rule's outcome lists (0 all).
	Examples int
	Output   string
}

// WhatIfExample is one recorded request and what a rule would have done.
type WhatIfExample struct {
	Time      time.Time `json:"time"`
	Operation string    `json:"operation"`
	Kind      string    `json:"kind"`
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name"`
	User      string    `json:"user"`
	Message   string    `json:"message,omitempty"`
}

// WhatIfRule is what one rule of the candidate would have done to the
// recorded requests: counts by outcome, and examples of each outcome but
// pass and skip.
type WhatIfRule struct {
	Policy   string                     `json:"policy"`
	Rule     string                     `json:"rule"`
	Counts   map[string]int             `json:"counts"`
	Examples map[string][]WhatIfExample `json:"examples,omitempty"`
}

// WhatIfChange compares the candidate with the installed policy of the
// same key on the requests it decided, by the log's findings: requests
// the candidate denies that the installed version let through, and the
// other way round.
type WhatIfChange struct {
	Policy         string `json:"policy"`
	NewlyDenied    int    `json:"newlyDenied"`
	NoLongerDenied int    `json:"noLongerDenied"`
	// DeniedUnrecorded are the installed version's denials whose object
	// the log does not hold (objects are recorded for admitted requests
	// only): what the candidate would do with them is not known.
	DeniedUnrecorded int             `json:"deniedUnrecorded"`
	Newly            []WhatIfExample `json:"newlyDeniedExamples,omitempty"`
	NoLonger         []WhatIfExample `json:"noLongerDeniedExamples,omitempty"`
}

// WhatIfReport is `verdict whatif`'s answer.
type WhatIfReport struct {
	Since time.Time `json:"since"`
	// Requests are the recorded requests evaluated (those with their
	// object); WithoutObject the decisions of the window that carry none.
	Requests      int            `json:"requests"`
	WithoutObject int            `json:"withoutObject"`
	Rules         []WhatIfRule   `json:"rules"`
	Changes       []WhatIfChange `json:"changes"`
}

func newWhatIf(ctx context.Context, stdin io.Reader, stdout io.Writer) *cobra.Command {
	o := WhatIfOptions{NATS: natsconn.Default(), Timeout: work.DefaultWorkTimeout, Since: 24 * time.Hour, Examples: 5, Output: "table"}
	cmd := &cobra.Command{
		Use:   "whatif -p candidate.yaml [--since 24h]",
		Short: "Evaluate a candidate policy against the admission log's recorded requests",
		Long: `Whatif evaluates candidate policies (new ones, or changed versions of
installed ones) against the requests the admission log recorded with their
objects (the webhook's --decision-object-kinds), and prints what each rule
would have done: how many requests it would have denied, warned,
mutated or generated for, with examples. For a candidate whose key is an
installed policy's, it also compares with what the installed version
decided, from the log's findings: the requests it would newly deny, and
those it would no longer deny. Nothing is enforced or written.

The requests are evaluated as they came (operation, requester, object as
stored); the namespace's labels and objects are not in the log, so a
namespaceSelector sees none, and context entries that read the cluster
are not served.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep, err := WhatIf(ctx, o, stdin, time.Now)
			if err != nil {
				return err
			}
			if rep.WithoutObject > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "%d decisions in the window carry no object (the webhook records objects of the kinds of --decision-object-kinds)\n", rep.WithoutObject)
			}
			return writeWhatIf(stdout, o.Output, rep)
		},
	}
	gofs := flag.NewFlagSet("nats", flag.ContinueOnError)
	natsconn.BindFlags(gofs, &o.NATS)
	fl := cmd.Flags()
	fl.AddGoFlagSet(gofs)
	fl.StringSliceVarP(&o.Policies, "policy", "p", nil, "candidate policy files or folders")
	fl.DurationVar(&o.Timeout, "timeout", o.Timeout, "how long to wait for NATS to answer: the connection, and each request")
	fl.DurationVar(&o.Since, "since", o.Since, "how far back the recorded requests go")
	fl.StringVarP(&o.Namespace, "namespace", "n", "", "only this namespace's requests")
	fl.IntVar(&o.Examples, "examples", o.Examples, "requests listed per rule and outcome (0: all)")
	fl.StringVarP(&o.Output, "output", "o", o.Output, "table or json")
	return cmd
}

// WhatIf evaluates o's candidates on the admission log's recorded
// requests since now less o.Since.
func WhatIf(ctx context.Context, o WhatIfOptions, stdin io.Reader, now func() time.Time) (WhatIfReport, error) {
	var rep WhatIfReport
	switch {
	case len(o.Policies) == 0:
		return rep, fmt.Errorf("no candidate policy: -p candidate.yaml")
	case o.Since <= 0:
		return rep, fmt.Errorf("--since %s: must be positive", o.Since)
	case o.Examples < 0:
		return rep, fmt.Errorf("--examples %d: 0 (all) or more", o.Examples)
	case o.Output != "table" && o.Output != "json":
		return rep, fmt.Errorf("--output %q: table or json", o.Output)
	}
	pdocs, err := loadPolicies(o.Policies, stdin)
	if err != nil {
		return rep, fmt.Errorf("policies: %w", err)
	}
	eng, err := engine.New()
	if err != nil {
		return rep, err
	}
	set, err := compileSet(eng, pdocs)
	if err != nil {
		return rep, err
	}
	conn, err := work.Connect(ctx, o.NATS, o.Timeout)
	if err != nil {
		return rep, err
	}
	defer conn.Close()
	rep.Since = now().Add(-o.Since).UTC()
	w := newWhatIfTally(set, o.Examples)
	err = decisions.Read(ctx, conn, decisions.Filter{Namespace: o.Namespace}, rep.Since, func(e decisions.Entry) error {
		if e.Err != nil {
			return nil // not a decision: `verdict decisions` reports it
		}
		d := e.Decision
		if len(d.Object) == 0 {
			rep.WithoutObject++
			w.unrecorded(d)
			return nil
		}
		var obj map[string]any
		if err := json.Unmarshal(d.Object, &obj); err != nil || obj == nil {
			rep.WithoutObject++
			return nil
		}
		rep.Requests++
		req := &engine.Request{
			Operation: d.Operation, Object: obj, Namespace: d.Resource.Namespace, Name: d.Resource.Name, DryRun: d.DryRun,
			UserInfo: engine.UserInfo{Username: d.User.Username, UID: d.User.UID, Groups: d.User.Groups},
		}
		resps, _ := eng.Apply(ctx, req, set)
		w.add(d, obj, resps)
		return ctx.Err()
	})
	if err != nil {
		return rep, work.Explain(err, o.NATS.Redacted())
	}
	rep.Rules, rep.Changes = w.report()
	return rep, nil
}

// whatIfTally gathers the outcomes.
type whatIfTally struct {
	examples int
	rules    map[[2]string]*WhatIfRule
	order    [][2]string
	changes  map[string]*WhatIfChange
	keys     []string
}

func newWhatIfTally(set *engine.Set, examples int) *whatIfTally {
	w := &whatIfTally{examples: examples, rules: map[[2]string]*WhatIfRule{}, changes: map[string]*WhatIfChange{}}
	for _, p := range set.Policies {
		key := bus.PolicyRefOf(p).ResultKey()
		w.changes[key] = &WhatIfChange{Policy: key}
		w.keys = append(w.keys, key)
	}
	return w
}

func (w *whatIfTally) example(list []WhatIfExample, ex WhatIfExample) []WhatIfExample {
	if w.examples > 0 && len(list) >= w.examples {
		return list
	}
	return append(list, ex)
}

// add counts what the candidate's responses say of one recorded request.
func (w *whatIfTally) add(d bus.Decision, obj map[string]any, resps []engine.Response) {
	ex := WhatIfExample{Time: d.Time, Operation: d.Operation, Kind: document.String(obj, "kind"),
		Namespace: document.String(obj, "metadata", "namespace"), Name: document.String(obj, "metadata", "name"), User: d.User.Username}
	for _, resp := range resps {
		key := bus.PolicyRefOf(resp.Policy).ResultKey()
		denies := false
		for _, rr := range resp.Rules {
			outcome := whatIfOutcome(rr)
			if outcome == whatifDeny || (outcome == whatifError && resp.Policy.Raw.Spec.FailurePolicy != "Ignore") {
				denies = true // as the webhook decides (blockingRules)
			}
			id := [2]string{key, rr.Name}
			r, ok := w.rules[id]
			if !ok {
				r = &WhatIfRule{Policy: key, Rule: rr.Name, Counts: map[string]int{}}
				w.rules[id] = r
				w.order = append(w.order, id)
			}
			r.Counts[outcome]++
			if outcome != whatifPass && outcome != whatifSkip {
				if r.Examples == nil {
					r.Examples = map[string][]WhatIfExample{}
				}
				e := ex
				e.Message = rr.Message
				r.Examples[outcome] = w.example(r.Examples[outcome], e)
			}
		}
		c := w.changes[key]
		if c == nil {
			continue
		}
		installed := slices.ContainsFunc(d.Findings, func(f bus.Finding) bool { return f.Policy == key && f.Action == bus.ActionDeny })
		switch {
		case denies && !installed:
			c.NewlyDenied++
			c.Newly = w.example(c.Newly, ex)
		case !denies && installed:
			c.NoLongerDenied++
			c.NoLonger = w.example(c.NoLonger, ex)
		}
	}
	// A candidate that selected nothing of the request may still be
	// no longer denying what its installed version denied.
	for _, key := range w.keys {
		if slices.ContainsFunc(resps, func(r engine.Response) bool { return bus.PolicyRefOf(r.Policy).ResultKey() == key }) {
			continue
		}
		if slices.ContainsFunc(d.Findings, func(f bus.Finding) bool { return f.Policy == key && f.Action == bus.ActionDeny }) {
			c := w.changes[key]
			c.NoLongerDenied++
			c.NoLonger = w.example(c.NoLonger, ex)
		}
	}
}

// unrecorded counts the installed versions' denials of a request whose
// object the log does not hold.
func (w *whatIfTally) unrecorded(d bus.Decision) {
	for _, key := range w.keys {
		if slices.ContainsFunc(d.Findings, func(f bus.Finding) bool { return f.Policy == key && f.Action == bus.ActionDeny }) {
			w.changes[key].DeniedUnrecorded++
		}
	}
}

// whatIfOutcome is what rr would have done at admission: a failed
// Enforce rule denies, another failure warns; an error is an error (it
// denies under failurePolicy Fail); a mutate or generate rule that
// applied mutates or generates.
func whatIfOutcome(rr engine.RuleResponse) string {
	switch rr.Status {
	case engine.StatusFail:
		if rr.Enforce {
			return whatifDeny
		}
		return whatifWarn
	case engine.StatusError:
		return whatifError
	case engine.StatusWarn:
		return whatifWarn
	case engine.StatusPass:
		switch rr.Type {
		case engine.TypeMutation:
			return whatifMutate
		case engine.TypeGeneration:
			return whatifGenerate
		}
		return whatifPass
	}
	return whatifSkip
}

func (w *whatIfTally) report() ([]WhatIfRule, []WhatIfChange) {
	rules := make([]WhatIfRule, 0, len(w.order))
	for _, id := range w.order {
		rules = append(rules, *w.rules[id])
	}
	changes := make([]WhatIfChange, 0, len(w.keys))
	for _, k := range w.keys {
		changes = append(changes, *w.changes[k])
	}
	return rules, changes
}

// writeWhatIf writes the report as a table or as JSON.
func writeWhatIf(out io.Writer, output string, rep WhatIfReport) error {
	if output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(out, "%d recorded requests since %s\n\n", rep.Requests, rep.Since.Format(time.RFC3339))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POLICY\tRULE\tDENY\tWARN\tMUTATE\tGENERATE\tERROR\tPASS\tSKIP")
	for _, r := range rep.Rules {
		c := r.Counts
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", r.Policy, r.Rule,
			c[whatifDeny], c[whatifWarn], c[whatifMutate], c[whatifGenerate], c[whatifError], c[whatifPass], c[whatifSkip])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rep.Rules {
		for _, outcome := range []string{whatifDeny, whatifWarn, whatifError, whatifMutate, whatifGenerate} {
			exs := r.Examples[outcome]
			if len(exs) == 0 {
				continue
			}
			fmt.Fprintf(out, "\n%s %s would %s %d:\n", r.Policy, r.Rule, outcome, r.Counts[outcome])
			for _, ex := range exs {
				fmt.Fprintf(out, "  %s\n", exampleLine(ex, true))
			}
		}
	}
	for _, c := range rep.Changes {
		fmt.Fprintf(out, "\nagainst the installed %s: %d newly denied, %d no longer denied", c.Policy, c.NewlyDenied, c.NoLongerDenied)
		if c.DeniedUnrecorded > 0 {
			fmt.Fprintf(out, " (and %d it denied whose object is not recorded)", c.DeniedUnrecorded)
		}
		fmt.Fprintln(out)
		for _, ex := range c.Newly {
			fmt.Fprintf(out, "  + %s\n", exampleLine(ex, false))
		}
		for _, ex := range c.NoLonger {
			fmt.Fprintf(out, "  - %s\n", exampleLine(ex, false))
		}
	}
	return nil
}

func exampleLine(ex WhatIfExample, message bool) string {
	name := ex.Kind + "/" + ex.Name
	if ex.Namespace != "" {
		name = ex.Namespace + "/" + name
	}
	line := fmt.Sprintf("%s  %s %s by %s", ex.Time.UTC().Format(time.RFC3339), ex.Operation, name, ex.User)
	if message && ex.Message != "" {
		line += ": " + strings.Join(strings.Fields(ex.Message), " ")
	}
	return line
}
