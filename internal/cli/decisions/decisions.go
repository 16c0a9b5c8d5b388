// Package decisions is `verdict decisions`: the admission log
// (VERDICT_DECISIONS) read from the cluster's NATS, filtered, as a table
// or JSON lines, and followed as it grows.
package decisions

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/cli/work"
	"github.com/verdict-dev/verdict/internal/platform/natsconn"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// Defaults of the flags.
const (
	DefaultSince   = time.Hour
	DefaultLimit   = 500
	DefaultTimeout = 5 * time.Second
)

// Filter selects decisions. Namespace and Outcome become the subject
// filter (the server sends nothing else); the rest is matched here.
type Filter struct {
	// Namespace: one namespace ("" all, bus.ClusterScoped for
	// cluster-scoped resources only).
	Namespace string
	// Kind matches the resource's kind, case-insensitively, or its
	// resource (pods), as kubectl takes either.
	Kind string
	// Policy matches a finding's policy key, or its name alone.
	Policy string
	// User is the requester's username.
	User string
	// Outcome is allowed, warned, denied or patched ("" all).
	Outcome string
	// Operation is CREATE, UPDATE, DELETE or CONNECT ("" all).
	Operation string
}

// subject is the server-side filter.
func (f Filter) subject() string { return bus.DecisionsFilter(f.Namespace, f.Outcome) }

// Match reports whether d passes the filters the subject does not apply.
func (f Filter) Match(d bus.Decision) bool {
	if f.Kind != "" && !strings.EqualFold(f.Kind, d.Resource.Kind) && !strings.EqualFold(f.Kind, d.Resource.Resource) {
		return false
	}
	if f.User != "" && f.User != d.User.Username {
		return false
	}
	if f.Operation != "" && !strings.EqualFold(f.Operation, d.Operation) {
		return false
	}
	if f.Policy != "" && !slices.ContainsFunc(d.Findings, func(x bus.Finding) bool { return policyIs(x.Policy, f.Policy) }) {
		return false
	}
	return true
}

// policyIs reports whether key (name, namespace/name, Kind:name) is the
// policy want names: the whole key or its name.
func policyIs(key, want string) bool {
	if key == want {
		return true
	}
	name := key
	if i := strings.LastIndexAny(name, ":/"); i >= 0 {
		name = name[i+1:]
	}
	return name == want
}

// Entry is a decision read from the stream, or a message that is not
// one (Err, with its sequence).
type Entry struct {
	Sequence uint64
	Decision bus.Decision
	Err      error
}

// Read hands fn the decisions of conn's VERDICT_DECISIONS stored since
// since that pass f, oldest first, and returns when it reached the end
// of the stream. A message that is not a decision is handed over with
// its error.
func Read(ctx context.Context, conn *queue.Conn, f Filter, since time.Time, fn func(Entry) error) error {
	_, err := conn.Replay(ctx, bus.StreamDecisions, func(m queue.ReplayMsg) error {
		return handle(m, f, fn)
	}, queue.WithReplaySince(since), queue.WithReplayFilter(f.subject()))
	return err
}

// Follow is Read that goes on with each decision stored afterwards,
// until ctx ends.
func Follow(ctx context.Context, conn *queue.Conn, f Filter, since time.Time, fn func(Entry) error) error {
	return conn.Follow(ctx, bus.StreamDecisions, func(m queue.ReplayMsg) error {
		return handle(m, f, fn)
	}, queue.WithFollowSince(since), queue.WithFollowFilter(f.subject()))
}

func handle(m queue.ReplayMsg, f Filter, fn func(Entry) error) error {
	d, err := bus.DecodeDecision(m.Subject, m.Data)
	if err != nil {
		return fn(Entry{Sequence: m.Sequence, Err: err})
	}
	if !f.Match(d) {
		return nil
	}
	return fn(Entry{Sequence: m.Sequence, Decision: d})
}

// options are the command's flags.
type options struct {
	nats    natsconn.Config
	timeout time.Duration
	filter  Filter
	cluster bool
	since   time.Duration
	limit   int
	output  string
	follow  bool
}

// New is the `verdict decisions` command; now is its clock.
func New(ctx context.Context, stdout io.Writer, now func() time.Time) *cobra.Command {
	o := &options{nats: natsconn.Default(), timeout: DefaultTimeout}
	cmd := &cobra.Command{
		Use:   "decisions",
		Short: "Show the admission log: what the webhooks allowed, warned, denied and patched",
		Long: `Decisions reads the admission log (VERDICT_DECISIONS) from the cluster's
NATS: one entry per admission request a webhook answered, with the
requester, the outcome, and the policies and rules that denied, warned or
mutated. It takes the NATS flags of the services.

  verdict decisions                              the last hour
  verdict decisions --outcome denied --since 24h what was blocked today
  verdict decisions -n team-a --kind Pod         one namespace's Pods
  verdict decisions --policy disallow-latest-tag one policy's findings
  verdict decisions --follow -o json             new decisions as they come

The table shows the oldest first; with more than --limit, the newest are
shown and stderr says how many were left out. -o json writes one decision
per line (JSON lines), as stored. A message that is not a decision is
reported on stderr with its sequence and never shown as one.

Exit codes:
  0  done
  1  not done: NATS unreachable, JetStream or VERDICT_DECISIONS missing
  2  bad usage`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(ctx, stdout, cmd.ErrOrStderr(), now)
		},
	}
	gofs := flag.NewFlagSet("nats", flag.ContinueOnError)
	natsconn.BindFlags(gofs, &o.nats)
	fl := cmd.Flags()
	fl.AddGoFlagSet(gofs)
	fl.DurationVar(&o.timeout, "timeout", DefaultTimeout, "how long to wait for NATS to answer: the connection, and each request")
	fl.StringVarP(&o.filter.Namespace, "namespace", "n", "", "only this namespace's requests")
	fl.BoolVar(&o.cluster, "cluster-scoped", false, "only requests about cluster-scoped resources")
	fl.StringVar(&o.filter.Kind, "kind", "", "only this kind (Pod) or resource (pods)")
	fl.StringVar(&o.filter.Policy, "policy", "", "only decisions this policy took part in (its name, namespace/name or Kind:name)")
	fl.StringVar(&o.filter.User, "user", "", "only this requester's requests (a username)")
	fl.StringVar(&o.filter.Outcome, "outcome", "", "only this outcome: allowed, warned, denied or patched")
	fl.StringVar(&o.filter.Operation, "operation", "", "only this operation: CREATE, UPDATE, DELETE or CONNECT")
	fl.DurationVar(&o.since, "since", DefaultSince, "how far back to read")
	fl.IntVar(&o.limit, "limit", DefaultLimit, "the most decisions shown (the newest; 0 for all); not with --follow")
	fl.StringVarP(&o.output, "output", "o", "table", "table or json (one decision per line)")
	fl.BoolVarP(&o.follow, "follow", "f", false, "go on with new decisions as they come, until interrupted")
	return cmd
}

// validate checks the flags.
func (o *options) validate() error {
	var errs []error
	switch o.filter.Outcome {
	case "", bus.DecisionAllowed, bus.DecisionWarned, bus.DecisionDenied, bus.DecisionPatched:
	default:
		errs = append(errs, fmt.Errorf("--outcome %q: allowed, warned, denied or patched", o.filter.Outcome))
	}
	if o.output != "table" && o.output != "json" {
		errs = append(errs, fmt.Errorf("--output %q: table or json", o.output))
	}
	if o.since <= 0 {
		errs = append(errs, fmt.Errorf("--since %s: must be positive", o.since))
	}
	if o.limit < 0 {
		errs = append(errs, fmt.Errorf("--limit %d: 0 (all) or more", o.limit))
	}
	if o.cluster {
		if o.filter.Namespace != "" {
			errs = append(errs, errors.New("--cluster-scoped and --namespace: one or the other"))
		}
		o.filter.Namespace = bus.ClusterScoped
	}
	return errors.Join(errs...)
}

func (o *options) run(ctx context.Context, stdout, stderr io.Writer, now func() time.Time) error {
	if err := o.validate(); err != nil {
		return err
	}
	conn, err := work.Connect(ctx, o.nats, o.timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	since := now().Add(-o.since)
	out := newPrinter(o.output, stdout, now)
	bad := 0
	report := func(e Entry) {
		bad++
		fmt.Fprintf(stderr, "message %d of %s is not a decision: %v\n", e.Sequence, bus.StreamDecisions, e.Err)
	}
	if o.follow {
		out.header()
		err := Follow(ctx, conn, o.filter, since, func(e Entry) error {
			if e.Err != nil {
				report(e)
				return nil
			}
			// Each row as it comes (aligned on its own).
			if err := out.print(e.Decision); err != nil {
				return err
			}
			return out.flush()
		})
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return nil // interrupted: the way a follow ends
		}
		return work.Explain(err, o.nats.Redacted())
	}
	// The newest o.limit, oldest first.
	var kept []bus.Decision
	left := 0
	err = Read(ctx, conn, o.filter, since, func(e Entry) error {
		if e.Err != nil {
			report(e)
			return nil
		}
		kept = append(kept, e.Decision)
		if o.limit > 0 && len(kept) > 2*o.limit {
			left += len(kept) - o.limit
			kept = slices.Delete(kept, 0, len(kept)-o.limit)
		}
		return nil
	})
	if err != nil {
		return work.Explain(err, o.nats.Redacted())
	}
	if o.limit > 0 && len(kept) > o.limit {
		left += len(kept) - o.limit
		kept = kept[len(kept)-o.limit:]
	}
	if len(kept) == 0 && o.output == "table" {
		fmt.Fprintf(stderr, "no decisions since %s\n", since.UTC().Format(time.RFC3339))
		return nil
	}
	out.header()
	for _, d := range kept {
		if err := out.print(d); err != nil {
			return err
		}
	}
	if err := out.flush(); err != nil {
		return err
	}
	if left > 0 {
		fmt.Fprintf(stderr, "%d older decisions not shown (--limit %d)\n", left, o.limit)
	}
	return nil
}
