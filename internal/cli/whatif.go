package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/verdict-dev/verdict/internal/cli/decisions"
	"github.com/verdict-dev/verdict/internal/cli/work"
	"github.com/verdict-dev/verdict/internal/platform/natsconn"
	"github.com/verdict-dev/verdict/internal/platform/whatif"
	"github.com/verdict-dev/verdict/pkg/engine"
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

// WhatIfReport is `verdict whatif`'s answer.
type WhatIfReport = whatif.Report

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
	since := now().Add(-o.Since).UTC()
	w := whatif.NewTally(eng, set, since, o.Examples, nil)
	err = decisions.Read(ctx, conn, decisions.Filter{Namespace: o.Namespace}, since, func(e decisions.Entry) error {
		if e.Err != nil {
			return nil // not a decision: `verdict decisions` reports it
		}
		w.Decision(ctx, e.Decision, nil)
		return ctx.Err()
	})
	if err != nil {
		return rep, work.Explain(err, o.NATS.Redacted())
	}
	return w.Report(), nil
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
			c[whatif.Deny], c[whatif.Warn], c[whatif.Mutate], c[whatif.Generate], c[whatif.Error], c[whatif.Pass], c[whatif.Skip])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rep.Rules {
		for _, outcome := range []string{whatif.Deny, whatif.Warn, whatif.Error, whatif.Mutate, whatif.Generate} {
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

func exampleLine(ex whatif.Example, message bool) string {
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
