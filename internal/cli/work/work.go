package work

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/natsconn"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// DefaultWorkTimeout bounds reaching NATS and each JetStream request of
// `verdict work`.
const DefaultWorkTimeout = 5 * time.Second

// workOptions are the flags every `verdict work` command shares: how to
// reach NATS (the services' flags, natsconn) and how long to wait for it.
type workOptions struct {
	NATS    natsconn.Config
	Timeout time.Duration
}

const workExitCodes = `
Exit codes:
  0  done
  1  not done: NATS unreachable, JetStream or a stream missing, a step
     that failed (the message says which), a purge not confirmed
  2  bad usage: flags, sequence numbers that name no dead letter, a purge
     without --yes when stdin is not a terminal`

func New(ctx context.Context, stdin io.Reader, stdout io.Writer) *cobra.Command {
	o := &workOptions{NATS: natsconn.Default(), Timeout: DefaultWorkTimeout}
	cmd := &cobra.Command{
		Use:   "work",
		Short: "See and steer the work queue: pending and dead-lettered work",
		Long: `The work commands show and steer Verdict's work queue in the cluster's
NATS: the items waiting in VERDICT_WORK (generate, mutate, cleanup, scan)
and those that failed their attempts or were poison, in VERDICT_DEAD with
their reason. They take the NATS flags of the services.

  verdict work list                   pending work, oldest first
  verdict work list --dead            dead letters, with reason and attempts
  verdict work retry <seq>...         re-queue dead letters once the cause is fixed
  verdict work retry --all --kind generate
  verdict work purge --dead           remove dead letters (asks first)
  verdict work purge --kind scan      remove the pending work of a kind (asks first)
` + workExitCodes,
		Args: cobra.NoArgs,
	}
	gofs := flag.NewFlagSet("nats", flag.ContinueOnError)
	natsconn.BindFlags(gofs, &o.NATS)
	pf := cmd.PersistentFlags()
	pf.AddGoFlagSet(gofs)
	pf.DurationVar(&o.Timeout, "timeout", DefaultWorkTimeout, "how long to wait for NATS to answer: the connection, and each request")
	cmd.AddCommand(newWorkList(ctx, o, stdout), newWorkRetry(ctx, o, stdout), newWorkPurge(ctx, o, stdin, stdout))
	return cmd
}

func newWorkList(ctx context.Context, o *workOptions, stdout io.Writer) *cobra.Command {
	var (
		dead   bool
		kind   string
		limit  int
		output string
	)
	cmd := &cobra.Command{
		Use:   "list [--dead] [--kind generate|mutate|cleanup|scan]",
		Short: "List pending work, or dead letters with --dead",
		Long: `List shows the pending items of VERDICT_WORK, oldest first: sequence,
kind, key, age, state, and the policy, rule, trigger and origin the item
names. STATE is waiting (no worker has taken it yet) or delivered (a
worker has it now, or it waits for a retry after a failed attempt; the
server does not say how many attempts were made). An item no consumer
selects shows "-": no worker will take it.

With --dead it shows the dead letters of VERDICT_DEAD instead: sequence
(what "verdict work retry" takes), when, attempts, the consumer that gave
up, the origin subject and the reason.

With more items than --limit, the oldest are shown and stderr says so.
-o json writes {"stream", "items", "more"} for scripts.
` + workExitCodes,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := parseKind(kind)
			if err != nil {
				return err
			}
			if output != "table" && output != "json" {
				return fmt.Errorf("output %q: table or json", output)
			}
			if limit < 0 {
				return fmt.Errorf("--limit %d: 0 (all) or more", limit)
			}
			c, err := o.connect(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			opts := []queue.ListOption{queue.WithListLimit(limit)}
			if k != "" {
				opts = append(opts, queue.WithListKind(k))
			}
			var more bool
			if dead {
				var entries []queue.DeadEntry
				if entries, more, err = c.ListDead(ctx, opts...); err != nil {
					return o.explain(err)
				}
				err = writeDead(stdout, output, time.Now(), entries, more)
			} else {
				var items []queue.PendingWork
				if items, more, err = c.ListWork(ctx, opts...); err != nil {
					return o.explain(err)
				}
				err = writePending(stdout, output, time.Now(), items, more)
			}
			if err != nil {
				return failed(err)
			}
			if more {
				fmt.Fprintf(cmd.ErrOrStderr(), "more than %d: the oldest %d are shown (--limit 0 lists all)\n", limit, limit)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&dead, "dead", false, "list the dead letters of VERDICT_DEAD instead of pending work")
	f.StringVar(&kind, "kind", "", "only work of this kind: generate, mutate, cleanup or scan")
	f.IntVar(&limit, "limit", 100, "list at most this many, the oldest first (0: all)")
	f.StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

func newWorkRetry(ctx context.Context, o *workOptions, stdout io.Writer) *cobra.Command {
	var (
		all  bool
		kind string
	)
	cmd := &cobra.Command{
		Use:   "retry <dead-letter-seq>... | --all [--kind generate|mutate|cleanup|scan]",
		Short: "Re-queue dead letters to where they came from",
		Long: `Retry publishes each dead letter's original payload again to its
original subject (a fresh message id, so the stream's duplicate window
does not swallow it; its headers kept, the dead-letter ones dropped, and
Verdict-Requeued set to the dead letter's sequence), and only once
JetStream has stored it deletes the dead letter. Fix the cause first: an
item that fails again goes back to VERDICT_DEAD after its attempts.

The sequences are the SEQ column of "verdict work list --dead". They are
all checked before anything is re-queued: one that names no dead letter
changes nothing. --all re-queues every dead letter (of --kind).
` + workExitCodes,
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := parseKind(kind)
			if err != nil {
				return err
			}
			switch {
			case all && len(args) > 0:
				return errors.New("give dead-letter sequences or --all, not both")
			case !all && len(args) == 0:
				return errors.New("give the sequences of the dead letters to re-queue (verdict work list --dead shows them), or --all")
			case !all && k != "":
				return errors.New("--kind goes with --all")
			}
			seqs, err := parseSeqs(args)
			if err != nil {
				return err
			}
			c, err := o.connect(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			if all {
				if seqs, err = allDead(ctx, c, k, cmd.ErrOrStderr()); err != nil {
					return o.explain(err)
				}
			} else if err := checkDead(ctx, c, seqs); err != nil {
				return o.explain(err)
			}
			return requeue(ctx, c, seqs, all, stdout, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&all, "all", false, "re-queue every dead letter (of --kind)")
	f.StringVar(&kind, "kind", "", "with --all: only dead letters of this kind of work")
	return cmd
}

// allDead lists the sequences of every dead letter (of kind), leaving out
// the messages of VERDICT_DEAD that are not dead letters (said on errOut).
func allDead(ctx context.Context, c *queue.Conn, kind queue.WorkKind, errOut io.Writer) ([]uint64, error) {
	var opts []queue.ListOption
	if kind != "" {
		opts = append(opts, queue.WithListKind(kind))
	}
	entries, _, err := c.ListDead(ctx, opts...)
	if err != nil {
		return nil, err
	}
	seqs := make([]uint64, 0, len(entries))
	for _, e := range entries {
		if e.Invalid != nil {
			fmt.Fprintf(errOut, "%s sequence %d left alone: %v\n", bus.StreamDead, e.Sequence, e.Invalid)
			continue
		}
		seqs = append(seqs, e.Sequence)
	}
	return seqs, nil
}

// checkDead fails, naming every bad one, unless each sequence is a dead
// letter.
func checkDead(ctx context.Context, c *queue.Conn, seqs []uint64) error {
	var bad []error
	for _, seq := range seqs {
		e, err := c.DeadAt(ctx, seq)
		switch {
		case errors.Is(err, queue.ErrNoDeadLetter):
			bad = append(bad, fmt.Errorf("no dead letter at sequence %d", seq))
		case err != nil:
			return err
		case e.Invalid != nil:
			bad = append(bad, fmt.Errorf("sequence %d is not a dead letter: %w", seq, e.Invalid))
		}
	}
	if len(bad) > 0 {
		return usageError{fmt.Errorf("nothing re-queued: %w (verdict work list --dead shows the dead letters)", errors.Join(bad...))}
	}
	return nil
}

// requeue re-queues each dead letter, saying where it went, and fails if
// any could not be. With all, a dead letter gone since it was listed
// (re-queued by someone else) is no failure.
func requeue(ctx context.Context, c *queue.Conn, seqs []uint64, all bool, stdout, errOut io.Writer) error {
	done, bad := 0, 0
	for _, seq := range seqs {
		res, err := c.Requeue(ctx, seq)
		switch {
		case err == nil:
			done++
			dup := ""
			if res.Duplicate {
				dup = ", already there from an earlier retry"
			}
			fmt.Fprintf(stdout, "re-queued dead letter %d to %s (%s sequence %d%s)\n", seq, res.Subject, res.Stream, res.Sequence, dup)
		case all && errors.Is(err, queue.ErrNoDeadLetter):
			fmt.Fprintf(errOut, "dead letter %d: gone since it was listed\n", seq)
		default:
			bad++
			if res.Subject != "" { // published, the delete failed
				done++
			}
			fmt.Fprintf(errOut, "dead letter %d: %v\n", seq, explainStream(err, ""))
		}
	}
	fmt.Fprintf(stdout, "%d re-queued\n", done)
	if bad > 0 {
		return failed(fmt.Errorf("%d of %d dead letters not re-queued (or not deleted): see above", bad, len(seqs)))
	}
	return nil
}

func newWorkPurge(ctx context.Context, o *workOptions, stdin io.Reader, stdout io.Writer) *cobra.Command {
	var (
		dead bool
		kind string
		yes  bool
	)
	cmd := &cobra.Command{
		Use:   "purge --dead [--kind K] | --kind K",
		Short: "Remove dead letters, or the pending work of a kind",
		Long: `Purge removes the dead letters of VERDICT_DEAD (all, or those of --kind),
or with --kind alone the pending work of that kind from VERDICT_WORK
(waiting or with a worker: a worker that has one finishes it). It cannot
be undone: it asks for confirmation on a terminal, and refuses without
--yes when stdin is not one.
` + workExitCodes,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := parseKind(kind)
			if err != nil {
				return err
			}
			var what string
			switch {
			case dead && k == "":
				what = "every dead letter in " + bus.StreamDead
			case dead:
				what = "the dead letters of " + string(k) + " work in " + bus.StreamDead
			case k != "":
				what = "the pending " + string(k) + " work in " + bus.StreamWork
			default:
				return errors.New("say what to purge: --dead for dead letters, --kind for the pending work of a kind")
			}
			if !yes && !isTerminal(stdin) {
				return fmt.Errorf("refusing to purge %s without --yes: stdin is not a terminal to confirm on", what)
			}
			c, err := o.connect(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			if !yes {
				fmt.Fprintf(cmd.ErrOrStderr(), "Purge %s on %s? This cannot be undone. [y/N] ", what, o.NATS.Redacted())
				if !confirmed(stdin) {
					return failed(errors.New("not confirmed: nothing purged"))
				}
			}
			var n uint64
			if dead {
				n, err = c.PurgeDead(ctx, k)
			} else {
				n, err = c.PurgeWork(ctx, k)
			}
			if err != nil {
				return o.explain(err)
			}
			fmt.Fprintf(stdout, "%d purged\n", n)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&dead, "dead", false, "purge dead letters (VERDICT_DEAD)")
	f.StringVar(&kind, "kind", "", "only this kind of work: generate, mutate, cleanup or scan (without --dead: purge its pending work)")
	f.BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

// connect reaches NATS within the timeout.
func (o *workOptions) connect(ctx context.Context) (*queue.Conn, error) {
	return Connect(ctx, o.NATS, o.Timeout)
}

// Connect connects a command of the CLI to NATS with the services' flags
// (cfg), waiting at most timeout for it and for each JetStream request.
// An unreachable server is a FailedError; bad flags are not.
func Connect(ctx context.Context, cfg natsconn.Config, timeout time.Duration) (*queue.Conn, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("--timeout %s: must be positive", timeout)
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	opts := append(cfg.ConnOptions("verdict-cli", zerolog.Nop()),
		queue.WithAPITimeout(timeout), queue.WithReconnectBackoff(50*time.Millisecond, time.Second))
	c, err := bus.Connect(cctx, opts...)
	switch {
	case err == nil:
		return c, nil
	case errors.Is(err, queue.ErrInvalidOption):
		return nil, err // an unreadable key file, a bad combination: the user's to fix
	case ctx.Err() != nil:
		return nil, failed(ctx.Err())
	}
	return nil, failed(fmt.Errorf("cannot reach NATS at %s within %s (--nats-url, --timeout): %w", cfg.Redacted(), timeout, err))
}

// Explain is a FailedError that says which stream is missing, or that
// JetStream is, on the server at.
func Explain(err error, at string) error { return failed(explainStream(err, at)) }

// explain turns the queue's errors into what an operator can act on; all
// of them mean the command could not do its work.
func (o *workOptions) explain(err error) error {
	var usage usageError
	if errors.As(err, &usage) {
		return err
	}
	return failed(explainStream(err, o.NATS.Redacted()))
}

// explainStream says which stream is missing, or that JetStream is; at is
// the server, if known.
func explainStream(err error, at string) error {
	if at != "" {
		at = " on " + at
	}
	var missing *queue.NoStreamError
	switch {
	case errors.As(err, &missing):
		return fmt.Errorf("%s does not exist%s: is Verdict installed against this NATS? (%w)", missing.Stream, at, err)
	case errors.Is(err, queue.ErrNoJetStream):
		return fmt.Errorf("JetStream does not answer%s: is it enabled on the server and for this account? (%w)", at, err)
	}
	return err
}

// parseKind checks a --kind value ("" is none).
func parseKind(s string) (queue.WorkKind, error) {
	k := queue.WorkKind(s)
	if s != "" && !bus.ValidKind(k) {
		return "", fmt.Errorf("--kind %q: generate, mutate, cleanup or scan", s)
	}
	return k, nil
}

// parseSeqs reads dead-letter sequences, naming every bad one.
func parseSeqs(args []string) ([]uint64, error) {
	var bad []string
	seqs := make([]uint64, 0, len(args))
	seen := map[uint64]bool{}
	for _, a := range args {
		n, err := strconv.ParseUint(a, 10, 64)
		if err != nil || n == 0 {
			bad = append(bad, strconv.Quote(a))
			continue
		}
		if !seen[n] {
			seen[n] = true
			seqs = append(seqs, n)
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("bad dead-letter sequence %s: want positive whole numbers, the SEQ column of verdict work list --dead", strings.Join(bad, ", "))
	}
	return seqs, nil
}

// isTerminal reports whether r is a terminal (a character device) to ask
// on. A reader that is not a file (a pipe, a string in a test) is not.
func isTerminal(r io.Reader) bool {
	f, ok := r.(interface{ Stat() (os.FileInfo, error) })
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// confirmed reads one answer line: y or yes (any case) confirms, anything
// else, or nothing, does not.
func confirmed(r io.Reader) bool {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && line == "" {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// FailedError marks an error of a command that could not do its work, as
// opposed to bad usage: it exits ExitFailed.
type FailedError struct{ Err error }

func (e FailedError) Error() string { return e.Err.Error() }
func (e FailedError) Unwrap() error { return e.Err }

func failed(err error) error { return FailedError{err} }

// usageError marks bad input found only once connected (a sequence that
// names no dead letter): it exits ExitUsage.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }
