package reporter

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/verdict-dev/verdict/internal/reports/model"
)

// Errors of the package.
var (
	// ErrInvalidOption is wrapped by the errors of bad options and configs.
	ErrInvalidOption = errors.New("reporter: invalid option")
	// ErrConflict: concurrent writers kept winning until the attempts ran
	// out. Retrying later helps.
	ErrConflict = errors.New("report write conflict")
	// ErrRejected: the API server refused the report as invalid. Retrying
	// the same results will not help.
	ErrRejected = errors.New("report rejected by the API server")
)

// FieldManager is the field manager of every report write.
const FieldManager = "verdict-reporter"

// WriteOutcome says what a write did.
type WriteOutcome string

// Write outcomes.
const (
	// OutcomeCreated: the report did not exist and was created.
	OutcomeCreated WriteOutcome = "created"
	// OutcomeApplied: the report was updated by server-side apply.
	OutcomeApplied WriteOutcome = "applied"
	// OutcomeDeleted: the resource has no results left; its report was
	// deleted.
	OutcomeDeleted WriteOutcome = "deleted"
	// OutcomeUnchanged: the report already holds this fold.
	OutcomeUnchanged WriteOutcome = "unchanged"
	// OutcomeStale: the report holds a newer state (a higher
	// last-sequence); nothing was written.
	OutcomeStale WriteOutcome = "stale"
	// OutcomeAbsent: no results and no report: nothing to do.
	OutcomeAbsent WriteOutcome = "absent"
	// OutcomeGone: the resource's namespace no longer exists.
	OutcomeGone WriteOutcome = "gone"
	// OutcomeForeign: a report of that name exists and is not Verdict's
	// (its managed-by label names another controller, such as Kyverno,
	// which names its reports after the resource's UID too): it is left
	// as it is. A shadow beside Kyverno names its own reports apart
	// (WithNamePrefix).
	OutcomeForeign WriteOutcome = "foreign"
)

// Refold reads the resource's current results again and folds them; the
// writer calls it after a conflict with a concurrent writer.
type Refold func(ctx context.Context) (model.Report, error)

// WriterOption configures NewWriter.
type WriterOption func(*writerOptions) error

type writerOptions struct {
	qps         float64
	burst       int
	maxAttempts int
	retryMin    time.Duration
	retryMax    time.Duration
	metrics     *Metrics
	remember    int
	prefix      string
}

// WithNamePrefix names each report prefix+the resource's UID instead of
// the UID alone: a shadow beside Kyverno, whose reports have the UID for
// name, writes "verdict-<uid>" (model.ShadowReportPrefix).
func WithNamePrefix(prefix string) WriterOption {
	return func(o *writerOptions) error {
		if errs := validation.IsDNS1123Subdomain(prefix + "00000000-0000-0000-0000-000000000000"); prefix != "" && len(errs) > 0 {
			return fmt.Errorf("%w: report name prefix %q: %s", ErrInvalidOption, prefix, strings.Join(errs, "; "))
		}
		o.prefix = prefix
		return nil
	}
}

// WithWriteQPS bounds the API writes (create, apply, delete) of the writer
// with a token bucket: qps per second, bursts of burst. Default 50, 100.
func WithWriteQPS(qps float64, burst int) WriterOption {
	return func(o *writerOptions) error {
		if qps <= 0 || burst < 1 {
			return fmt.Errorf("%w: write QPS %v, burst %d", ErrInvalidOption, qps, burst)
		}
		o.qps, o.burst = qps, burst
		return nil
	}
}

// WithConflictRetries sets how often a write that met a concurrent writer
// is read, folded and tried again (attempts in all), with a backoff from
// minDelay doubling to maxDelay. Default 8 attempts, 10ms to 1s.
func WithConflictRetries(attempts int, minDelay, maxDelay time.Duration) WriterOption {
	return func(o *writerOptions) error {
		if attempts < 1 || minDelay <= 0 || maxDelay < minDelay {
			return fmt.Errorf("%w: conflict retries %d, %s..%s", ErrInvalidOption, attempts, minDelay, maxDelay)
		}
		o.maxAttempts, o.retryMin, o.retryMax = attempts, minDelay, maxDelay
		return nil
	}
}

// WithMemory sets how many reports the writer remembers (the sequence and
// content it last wrote or read), so that a fold it knows to be stale or
// already written needs no read from the API server; 0 turns it off.
// Default 100,000 (about 10 MB). A report deleted behind the writer's back
// (kubectl delete, or the garbage collector after its resource went) is
// then written again only when its resource has a new result, or by a
// replay.
func WithMemory(reports int) WriterOption {
	return func(o *writerOptions) error {
		if reports < 0 {
			return fmt.Errorf("%w: memory %d", ErrInvalidOption, reports)
		}
		o.remember = reports
		return nil
	}
}

// WithMetrics reports to m (default: metrics on a fresh registry).
func WithMetrics(m *Metrics) WriterOption {
	return func(o *writerOptions) error {
		if m == nil {
			return fmt.Errorf("%w: nil metrics", ErrInvalidOption)
		}
		o.metrics = m
		return nil
	}
}

// Writer writes folded reports to the API server: never an older state
// over a newer one, and at most its QPS.
//
// The current report is read first. If its AnnotationLastSequence is
// higher than the fold's, the write is skipped (stale); if it is equal and
// the report already says the same, it is skipped too (unchanged); if it is
// equal and the fold is partial (Report.Partial: results whose objects are
// not found yet were left out), it is skipped too (stale: the report may
// hold the complete fold of the same results), and a partial fold never
// deletes a report.
// Otherwise the fold is server-side applied (field manager
// verdict-reporter, force) with the read resourceVersion, so that a
// concurrent writer in between makes the apply fail with a conflict; the
// writer then reads, folds again (Refold) and retries with backoff. A
// report that does not exist yet is created (not applied: an apply of an
// absent object ignores resourceVersion, so two replicas could both
// "create" it, the older state last), which fails if another replica
// created it first. A fold without results deletes the report, with the
// read resourceVersion as a precondition.
//
// The writer remembers the sequence and content of the reports it wrote or
// read (WithMemory), so a fold it already knows to be stale or written
// costs no request.
type Writer struct {
	dyn     dynamic.Interface
	limiter flowcontrol.RateLimiter
	opts    writerOptions
	m       *Metrics

	mu   sync.Mutex
	seen map[string]seen // by report name
}

// seen is what the writer last knew a report to hold.
type seen struct {
	seq uint64
	sum [sha256.Size]byte // of reportContent; zero when not known
}

// NewWriter returns a writer over dyn.
func NewWriter(dyn dynamic.Interface, opts ...WriterOption) (*Writer, error) {
	if dyn == nil {
		return nil, fmt.Errorf("%w: nil dynamic client", ErrInvalidOption)
	}
	o := writerOptions{qps: 50, burst: 100, maxAttempts: 8, retryMin: 10 * time.Millisecond, retryMax: time.Second, remember: 100_000}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.metrics == nil {
		var err error
		if o.metrics, err = NewMetrics(nil); err != nil {
			return nil, err
		}
	}
	return &Writer{
		dyn:     dyn,
		limiter: flowcontrol.NewTokenBucketRateLimiter(float32(o.qps), o.burst),
		opts:    o,
		m:       o.metrics,
		seen:    map[string]seen{},
	}, nil
}

// recall returns what the writer knows of the report name.
func (w *Writer) recall(name string) (seen, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.seen[name]
	return s, ok
}

// remember notes what the report name holds (forget with ok false).
func (w *Writer) remember(name string, s seen, ok bool) {
	if w.opts.remember == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !ok {
		delete(w.seen, name)
		return
	}
	if _, known := w.seen[name]; !known && len(w.seen) >= w.opts.remember {
		// Full: forget about a tenth, at random (map order).
		drop := max(1, w.opts.remember/10)
		for k := range w.seen {
			delete(w.seen, k)
			if drop--; drop == 0 {
				break
			}
		}
	}
	w.seen[name] = s
}

// contentSum is the checksum of what a report says.
func contentSum(o *unstructured.Unstructured) [sha256.Size]byte {
	data, err := json.Marshal(model.ReportContent(o))
	if err != nil {
		return [sha256.Size]byte{}
	}
	return sha256.Sum256(data)
}

// Metrics are the collectors the writer reports to.
func (w *Writer) Metrics() *Metrics { return w.m }

// errConflict marks an attempt lost to a concurrent writer.
var errConflict = errors.New("concurrent write")

// Write makes the report of rep.Resource equal rep, unless the report
// already holds a newer state. After a conflict it calls refold (when not
// nil) for the current fold and tries again; when the attempts run out it
// fails with ErrConflict. An invalid report fails with ErrRejected.
func (w *Writer) Write(ctx context.Context, rep model.Report, refold Refold) (WriteOutcome, error) {
	start := time.Now()
	defer func() { w.m.writeTime.Observe(time.Since(start).Seconds()) }()
	delay := w.opts.retryMin
	for attempt := 1; ; attempt++ {
		out, err := w.writeOnce(ctx, rep)
		if !errors.Is(err, errConflict) {
			if err == nil {
				w.m.reports.WithLabelValues(string(out)).Inc()
			}
			return out, err
		}
		w.m.conflicts.Inc()
		w.remember(rep.Name(), seen{}, false)
		if attempt >= w.opts.maxAttempts {
			return "", fmt.Errorf("%w: report %s after %d attempts: %w", ErrConflict, rep.Name(), attempt, err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, w.opts.retryMax)
		if refold != nil {
			next, err := refold(ctx)
			if err != nil {
				return "", fmt.Errorf("fold %s again: %w", rep.Name(), err)
			}
			if next.Resource.Name == "" {
				next.Resource = rep.Resource // no results left: delete where it was
			}
			rep = next
		}
	}
}

func (w *Writer) client(namespace string) dynamic.ResourceInterface {
	if namespace == "" {
		return w.dyn.Resource(model.ClusterPolicyReports)
	}
	return w.dyn.Resource(model.PolicyReports).Namespace(namespace)
}

// LastSequence reads AnnotationLastSequence of a report (0 when missing or
// malformed: such a report is older than any fold).
func LastSequence(obj *unstructured.Unstructured) uint64 {
	n, err := strconv.ParseUint(obj.GetAnnotations()[model.AnnotationLastSequence], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

func (w *Writer) writeOnce(ctx context.Context, rep model.Report) (WriteOutcome, error) {
	if rep.Object == nil {
		return w.deleteOnce(ctx, rep)
	}
	name := w.NameOf(rep.Name())
	rep.Object.SetName(name)
	sum := contentSum(rep.Object)
	if known, ok := w.recall(name); ok {
		switch {
		case known.seq > rep.LastSequence:
			return OutcomeStale, nil
		case known.seq == rep.LastSequence && known.sum == sum:
			return OutcomeUnchanged, nil
		case known.seq == rep.LastSequence && rep.Partial:
			return OutcomeStale, nil
		}
	}
	c := w.client(rep.Resource.Namespace)
	cur, err := c.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cur = nil
	case err != nil:
		return "", fmt.Errorf("read report %s: %w", name, err)
	}
	if cur != nil && !model.Ours(cur) {
		return OutcomeForeign, nil
	}
	if cur != nil {
		seq := LastSequence(cur)
		if seq > rep.LastSequence {
			w.remember(name, seen{seq: seq}, true)
			return OutcomeStale, nil
		}
		if seq == rep.LastSequence && model.SameReport(cur, rep.Object) {
			w.remember(name, seen{seq: seq, sum: sum}, true)
			return OutcomeUnchanged, nil
		}
		if seq == rep.LastSequence && rep.Partial {
			// As new, and perhaps folded from more: keep it.
			return OutcomeStale, nil
		}
	}
	if err := w.limiter.Wait(ctx); err != nil {
		return "", err
	}
	if cur == nil {
		_, err := c.Create(ctx, rep.Object, metav1.CreateOptions{FieldManager: FieldManager})
		switch {
		case err == nil:
			w.remember(name, seen{seq: rep.LastSequence, sum: sum}, true)
			return OutcomeCreated, nil
		case apierrors.IsAlreadyExists(err):
			return "", fmt.Errorf("create report %s: %w", name, errConflict)
		case apierrors.IsNotFound(err), apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
			// The namespace is gone or going, and the resource with it.
			return OutcomeGone, nil
		}
		return "", classify("create report "+name, err)
	}
	obj := rep.Object.DeepCopy()
	obj.SetResourceVersion(cur.GetResourceVersion())
	data, err := json.Marshal(obj)
	if err != nil {
		return "", fmt.Errorf("encode report %s: %w", name, err)
	}
	force := true
	_, err = c.Patch(ctx, name, types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	switch {
	case err == nil:
		w.remember(name, seen{seq: rep.LastSequence, sum: sum}, true)
		return OutcomeApplied, nil
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		// Changed or deleted since it was read: read again.
		return "", fmt.Errorf("apply report %s: %w", name, errConflict)
	}
	return "", classify("apply report "+name, err)
}

func (w *Writer) deleteOnce(ctx context.Context, rep model.Report) (WriteOutcome, error) {
	name := w.NameOf(rep.Name())
	if rep.Partial {
		// Results left out may have rules: nothing says the report must go.
		return OutcomeStale, nil
	}
	var cur *unstructured.Unstructured
	var err error
	if rep.Resource.Name == "" && rep.Resource.Namespace == "" {
		// Only the UID is known: find the report.
		cur, err = w.locate(ctx, name)
	} else {
		cur, err = w.client(rep.Resource.Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cur, err = nil, nil
		}
	}
	if err != nil {
		return "", fmt.Errorf("read report %s: %w", name, err)
	}
	if cur == nil {
		return OutcomeAbsent, nil
	}
	if !model.Ours(cur) {
		return OutcomeForeign, nil
	}
	// With results in the stream (none with rules), a report of a later
	// sequence is newer. Without any result at all nothing is newer.
	if rep.LastSequence > 0 && LastSequence(cur) > rep.LastSequence {
		return OutcomeStale, nil
	}
	if err := w.limiter.Wait(ctx); err != nil {
		return "", err
	}
	w.remember(name, seen{}, false)
	rv := cur.GetResourceVersion()
	err = w.client(cur.GetNamespace()).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	switch {
	case err == nil:
		return OutcomeDeleted, nil
	case apierrors.IsNotFound(err):
		return OutcomeAbsent, nil
	case apierrors.IsConflict(err):
		return "", fmt.Errorf("delete report %s: %w", name, errConflict)
	}
	return "", classify("delete report "+name, err)
}

// NameOf is the name of the report of the resource uid.
func (w *Writer) NameOf(uid string) string { return w.opts.prefix + uid }

// UIDOf is the UID of the resource whose report is name; false for a
// name the writer does not give.
func (w *Writer) UIDOf(name string) (string, bool) {
	if !strings.HasPrefix(name, w.opts.prefix) {
		return "", false
	}
	return name[len(w.opts.prefix):], true
}

// locate finds the report called name when its namespace is not known.
func (w *Writer) locate(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	cur, err := w.dyn.Resource(model.ClusterPolicyReports).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return cur, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	list, err := w.dyn.Resource(model.PolicyReports).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[0], nil
}

// classify wraps err, marking refusals that retrying cannot fix.
func classify(what string, err error) error {
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		return fmt.Errorf("%s: %w: %w", what, ErrRejected, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
