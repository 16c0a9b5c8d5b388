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
	"github.com/verdict-dev/verdict/pkg/engine/document"
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
	// Cluster also evaluates the candidates on the cluster's objects of
	// the kinds they select (in Namespace when set; Kube says which
	// cluster): what they would do to each one's next update. Context
	// entries that read the cluster are then answered by it.
	Cluster bool
	Kube    KubeOptions
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
are not served, unless --cluster gives a cluster: then the requests see
their namespace's labels and context entries read the cluster, and the
candidates are also evaluated on its objects of the kinds they select
(what they would do to each one's next update).

A policy in the cluster annotated verdict.dev/candidate: "true" is
evaluated the same way by the reporter, into its status.candidate.`,
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
	fl.BoolVarP(&o.Cluster, "cluster", "c", false, "also evaluate the candidates on the cluster's objects (the kubeconfig's cluster)")
	fl.StringVar(&o.Kube.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (--cluster; default $KUBECONFIG, then ~/.kube/config)")
	fl.StringVar(&o.Kube.Context, "context", "", "kubeconfig context (--cluster; default its current one)")
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
	case !o.Cluster && (o.Kube.Kubeconfig != "" || o.Kube.Context != ""):
		return rep, fmt.Errorf("--kubeconfig and --context say which cluster --cluster reads: give --cluster too")
	}
	pdocs, err := loadPolicies(o.Policies, stdin)
	if err != nil {
		return rep, fmt.Errorf("policies: %w", err)
	}
	var engOpts []engine.Option
	var kc *kubeClients
	var nsCache *namespaceCache
	if o.Cluster {
		if kc, err = o.Kube.clients(); err != nil {
			return rep, err
		}
		nsCache = &namespaceCache{kc: kc}
		cs := &clusterSource{c: kc, page: defaultBatchSize}
		engOpts = append(engOpts, engine.WithContextLoader(cs), engine.WithContextResources(cs), engine.WithResourceLister(cs))
	}
	eng, err := engine.New(engOpts...)
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
		var labels map[string]string
		if nsCache != nil {
			// With a cluster, the namespace's labels are known.
			labels = document.StringMap(nsCache.get(ctx, e.Decision.Resource.Namespace), "metadata", "labels")
		}
		w.Decision(ctx, e.Decision, labels)
		return ctx.Err()
	})
	if err != nil {
		return rep, work.Explain(err, o.NATS.Redacted())
	}
	if o.Cluster {
		objs, err := clusterResources(ctx, kc, clusterScope{Namespace: o.Namespace}, set, nil)
		if err != nil {
			return rep, err
		}
		for _, obj := range objs {
			nsObj := nsCache.get(ctx, document.String(obj, "metadata", "namespace"))
			w.Object(ctx, obj, document.StringMap(nsObj, "metadata", "labels"), nsObj)
			if err := ctx.Err(); err != nil {
				return rep, err
			}
		}
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
		if len(c) == 0 {
			continue // met on the cluster's objects only
		}
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
	if err := writeWhatIfObjects(out, rep); err != nil {
		return err
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

// writeWhatIfObjects writes what the candidates would do to the
// cluster's objects, when they were evaluated (--cluster).
func writeWhatIfObjects(out io.Writer, rep WhatIfReport) error {
	evaluated := rep.Objects > 0
	for _, r := range rep.Rules {
		evaluated = evaluated || len(r.Resources) > 0
	}
	if !evaluated {
		return nil
	}
	fmt.Fprintf(out, "\n%d cluster objects\n\n", rep.Objects)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POLICY\tRULE\tDENY\tWARN\tERROR\tPASS\tSKIP")
	for _, r := range rep.Rules {
		if len(r.Resources) == 0 {
			continue
		}
		c := r.Resources
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\n", r.Policy, r.Rule, c[whatif.Deny], c[whatif.Warn], c[whatif.Error], c[whatif.Pass], c[whatif.Skip])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rep.Rules {
		for _, outcome := range []string{whatif.Deny, whatif.Warn, whatif.Error} {
			exs := r.ResourceExamples[outcome]
			if len(exs) == 0 {
				continue
			}
			fmt.Fprintf(out, "\n%s %s would %s %d of the cluster's objects on their next update:\n", r.Policy, r.Rule, outcome, r.Resources[outcome])
			for _, ex := range exs {
				fmt.Fprintf(out, "  %s\n", objectLine(ex))
			}
		}
	}
	return nil
}

// objectLine is one of the cluster's objects in an example list.
func objectLine(ex whatif.Example) string {
	name := ex.Kind + "/" + ex.Name
	if ex.Namespace != "" {
		name = ex.Namespace + "/" + name
	}
	if ex.Message != "" {
		name += ": " + strings.Join(strings.Fields(ex.Message), " ")
	}
	return name
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
