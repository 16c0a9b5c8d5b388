package scanner

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/kubeutil"
	"github.com/verdict-dev/verdict/internal/platform/kyvernometrics"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/reports/reporter"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// errKindForbidden is wrapped by list's error when the reporter may not
// list the kind.
var errKindForbidden = errors.New("the reporter may not list the kind")

// scanPolicy evaluates one policy on every resource it selects. A kind
// the reporter may not list is skipped and said so (scanKindForbidden,
// verdict_scanner_skipped_total{reason="forbidden"}).
func (s *Scanner) scanPolicy(ctx context.Context, m *queue.Msg, item bus.ScanItem) queue.Outcome {
	p, set, out, ok := s.lookup(ctx, m, item.Policy, item.Bindings)
	if !ok {
		return out
	}
	if !scanned(p) {
		s.m.skipped.WithLabelValues("background off").Inc()
		return queue.Done()
	}
	log := logFrom(ctx).With().Str(logkey.Policy, p.Raw.Key()).Str(logkey.Reason, item.Reason).Logger()
	existing, err := s.policyResults(ctx, bus.PolicyRefOf(p).ResultKey())
	if err != nil {
		return s.retry(ctx, "resultsUnreadable", err)
	}
	kinds, wildcard, err := s.kindsOf(ctx, p)
	if err != nil {
		return s.retry(ctx, "discoveryFailed", err)
	}
	if wildcard {
		s.m.skipped.WithLabelValues("kind wildcard").Inc()
		log.Debug().Msg("kindWildcardNotScanned")
	}
	sc := &scan{s: s, p: p, set: set, ref: bus.PolicyRefOf(p), existing: existing, seen: map[string]struct{}{},
		listed: map[schema.GroupKind]bool{}, nsLabels: map[string]map[string]string{}, now: s.o.now().UTC(), msg: m}
	for _, k := range kinds {
		err := sc.list(ctx, k)
		switch {
		case errors.Is(err, errKindForbidden):
			// The reporter may not list the kind (the chart grants no
			// Secrets unless reporter.rbac.readSecrets): retrying will
			// not help, and the other kinds are still scanned. Its stored
			// results are left as they are (sweep: undecided).
			s.m.skipped.WithLabelValues(skippedForbidden).Inc()
			log.Warn().Err(err).Str(logkey.Kind, k.GVR.String()).Msg("scanKindForbidden")
		case err != nil:
			return s.retry(ctx, "scanListFailed", err)
		}
	}
	if err := sc.sweep(ctx); err != nil {
		return s.retry(ctx, "scanSweepFailed", err)
	}
	log.Info().Int(logkey.Examined, sc.evaluated).Int(logkey.Published, sc.published).Int(logkey.Unchanged, sc.unchanged).
		Int(logkey.Retracted, sc.retracted).Int(logkey.Pruned, sc.purged).Msg("policyScanned")
	return queue.Done()
}

// policyResults reads the stored results of a policy (every message of
// each subject's history, its entries in batches, its verified copies),
// by resource uid, unchecked: newestVerified picks the current one of a
// resource.
func (s *Scanner) policyResults(ctx context.Context, key string) (map[string][]model.Result, error) {
	return reporter.ReadPolicy(ctx, s.conn, s.rm, key)
}

// newestVerified is the current result among rs (the stored results of one
// policy on one resource): the newest (CompareResults) of those the checker
// verifies, as a report shows it. ok is false when none is verified.
func (s *Scanner) newestVerified(ctx context.Context, rs []model.Result) (model.Result, bool, error) {
	if len(rs) == 0 {
		return model.Result{}, false, nil
	}
	c, err := reporter.CheckResults(ctx, s.o.check, rs)
	if err != nil || len(c.Verified) == 0 {
		return model.Result{}, false, err
	}
	return model.Newest(c.Verified), true, nil
}

// kindsOf lists the cluster's listable kinds the policy's validate and
// verifyImages rules name, and whether a kind wildcard selects others (not listed).
func (s *Scanner) kindsOf(ctx context.Context, p *engine.Policy) ([]kubeutil.Kind, bool, error) {
	all, err := s.kinds.List(ctx)
	if err != nil {
		return nil, false, err
	}
	var out []kubeutil.Kind
	wildcard := false
	for _, k := range all {
		if p.Raw.Namespaced() && !k.Namespaced {
			continue
		}
		switch p.ChecksKind(k.GVK.Group, k.GVK.Version, k.GVK.Kind) {
		case engine.KindNamed:
			out = append(out, k)
		case engine.KindByWildcard:
			wildcard = true
		case engine.KindNotSelected:
		}
	}
	return out, wildcard, nil
}

// scan is one policy scan in progress.
type scan struct {
	s        *Scanner
	p        *engine.Policy
	set      *engine.Set
	ref      bus.PolicyRef
	existing map[string][]model.Result // the policy's stored results by resource uid, unchecked
	seen     map[string]struct{}
	listed   map[schema.GroupKind]bool
	nsLabels map[string]map[string]string
	now      time.Time
	msg      *queue.Msg

	evaluated, published, unchanged, retracted, purged int
}

// list evaluates every resource of one kind, page by page.
func (sc *scan) list(ctx context.Context, k kubeutil.Kind) error {
	err := sc.s.listKind(ctx, sc.msg, sc.p, k.GVR, func(obj *unstructured.Unstructured) error { return sc.evaluate(ctx, obj) })
	if err != nil {
		return err
	}
	sc.listed[k.GVK.GroupKind()] = true
	return nil
}

// listKind hands every object of one kind p selects (in p's namespace
// for a namespaced policy) to fn, page by page, telling the item's
// consumer after each page that the work goes on. A kind no longer
// served lists nothing; one the reporter may not list is
// errKindForbidden.
func (s *Scanner) listKind(ctx context.Context, m *queue.Msg, p *engine.Policy, gvr schema.GroupVersionResource, fn func(*unstructured.Unstructured) error) error {
	ri := s.dyn.Resource(gvr)
	var client dynamic.ResourceInterface = ri
	if p.Raw.Namespaced() {
		client = ri.Namespace(p.Raw.Metadata.Namespace)
	}
	opts := metav1.ListOptions{Limit: s.o.pageSize}
	for {
		page, err := client.List(ctx, opts)
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err):
			return nil // no longer served
		case apierrors.IsForbidden(err):
			return fmt.Errorf("%w: list %s: %w", errKindForbidden, gvr, err)
		case err != nil:
			return fmt.Errorf("list %s: %w", gvr, err)
		}
		for i := range page.Items {
			if err := fn(&page.Items[i]); err != nil {
				return err
			}
		}
		_ = m.InProgress()
		if opts.Continue = page.GetContinue(); opts.Continue == "" {
			return nil
		}
	}
}

// evaluate runs the policy on one resource and publishes what changed.
func (sc *scan) evaluate(ctx context.Context, obj *unstructured.Unstructured) error {
	uid := string(obj.GetUID())
	if _, dup := sc.seen[uid]; dup || uid == "" {
		return nil // served by two groups: evaluated once
	}
	sc.seen[uid] = struct{}{}
	sc.evaluated++
	sc.s.m.evaluated.Inc()
	ns := obj.GetNamespace()
	labels, ok := sc.nsLabels[ns]
	if !ok {
		var err error
		if labels, err = sc.s.policies.NamespaceLabels(ctx, ns); err != nil {
			return fmt.Errorf("labels of namespace %s: %w", ns, err)
		}
		sc.nsLabels[ns] = labels
	}
	req := &engine.Request{Object: obj.Object, NamespaceLabels: labels}
	resp := sc.s.eng.Check(ctx, req, sc.p, sc.set.Exceptions)
	if err := ctx.Err(); err != nil {
		// The scan is stopping: the engine cut the evaluation short, and
		// what it says is not the policy's verdict on the resource.
		return err
	}
	if k := sc.s.o.kyverno; k != nil {
		// As Kyverno's scans: each resource evaluated as a CREATE.
		k.Results(kyvernometrics.Evaluation{Cause: kyvernometrics.BackgroundScan, Operation: engine.OpCreate,
			Kind: obj.GetKind(), Namespace: ns}, resp)
	}
	ref := bus.ResourceRef{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: ns, Name: obj.GetName(),
		UID: uid, ResourceVersion: obj.GetResourceVersion()}
	// The object is listed: results naming it as it is need no lookup.
	sc.s.o.check.Observe(ref)
	cur, had, err := sc.s.newestVerified(ctx, sc.existing[uid])
	if err != nil {
		return err
	}
	if len(resp.Rules) == 0 {
		if had && len(cur.Event.Rules) > 0 {
			// By this version of the policy (so it is newer than what
			// it retracts, and than late results of older versions).
			return sc.retract(ctx, sc.ref, ref, bus.RetractedNotSelected)
		}
		return nil
	}
	ev := bus.NewResult(ref, sc.p, resp, sc.now)
	if had && bus.SameOutcome(cur.Event, ev) {
		sc.unchanged++
		sc.s.m.results.WithLabelValues("unchanged").Inc()
		return nil
	}
	if err := sc.s.publishResult(ctx, ev); err != nil {
		return err
	}
	sc.published++
	sc.s.m.results.WithLabelValues("published").Inc()
	return nil
}

// retract supersedes an earlier result with a retraction by policy.
func (sc *scan) retract(ctx context.Context, policy bus.PolicyRef, res bus.ResourceRef, reason string) error {
	err := sc.s.publishResult(ctx, retraction(policy, res, reason, sc.now))
	if err == nil {
		sc.retracted++
		sc.s.m.results.WithLabelValues("retracted").Inc()
	}
	return err
}

// retraction is a result without rules that says why the policy's earlier
// results on res no longer hold. policy is the version that decided it:
// the current one for notSelected, the deleted one for policyDeleted (a
// policyDeleted retraction is newer than every result of its version, see
// events.CompareResults).
func retraction(policy bus.PolicyRef, res bus.ResourceRef, reason string, at time.Time) bus.ResultEvent {
	return bus.ResultEvent{Resource: res, Policy: policy, Timestamp: at, Retracted: reason}
}

// sweep settles the policy's results of resources the scan did not
// evaluate: those the policy no longer selects are retracted, those whose
// resource is gone are purged.
func (sc *scan) sweep(ctx context.Context) error {
	for uid, rs := range sc.existing {
		if _, ok := sc.seen[uid]; ok {
			continue
		}
		c, err := reporter.CheckResults(ctx, sc.s.o.check, rs)
		switch {
		case err != nil:
			return err
		case c.Undecided():
			continue // a result waits for its object (the projector's business), or its kind may not be read
		case len(c.Verified) == 0:
			// None of them names an existing object: the resource is
			// gone, or the results were forged. If its kind was listed
			// (served: not an API that is down), purge the uid's results
			// (all policies) unless one of them is verified.
			res := model.Newest(rs).Event.Resource
			if gv, err := schema.ParseGroupVersion(res.APIVersion); err == nil && sc.listed[schema.GroupKind{Group: gv.Group, Kind: res.Kind}] {
				if err := sc.purgeIfGone(ctx, uid); err != nil {
					return err
				}
			}
			continue
		}
		r := model.Newest(c.Verified)
		ev := r.Event
		if len(ev.Rules) == 0 {
			continue
		}
		if ev.Policy.UID != sc.ref.UID {
			if err := sc.retract(ctx, ev.Policy, ev.Resource, bus.RetractedPolicyDeleted); err != nil {
				return err
			}
			continue
		}
		gv, err := schema.ParseGroupVersion(ev.Resource.APIVersion)
		if err != nil {
			continue
		}
		switch sc.p.ChecksKind(gv.Group, gv.Version, ev.Resource.Kind) {
		case engine.KindNotSelected:
			if err := sc.retract(ctx, sc.ref, ev.Resource, bus.RetractedNotSelected); err != nil {
				return err
			}
			continue
		case engine.KindByWildcard, engine.KindNamed:
		}
		if !sc.listed[schema.GroupKind{Group: gv.Group, Kind: ev.Resource.Kind}] {
			continue // not listed: nothing known
		}
		// Listed, and not there: gone, unless created since. (The
		// checker may remember it; this looks.)
		exists, err := sc.s.exists(ctx, ev.Resource)
		if err != nil {
			return err
		}
		if exists {
			continue
		}
		if err := sc.s.purge(ctx, ev.Resource); err != nil {
			return err
		}
		sc.purged++
	}
	return nil
}

// purgeIfGone purges the results of uid (every policy's) and its report
// when none of them is verified or pending: the resource is gone, or never
// existed. A forged result that names a real uid does not purge the real
// results: they are verified.
func (sc *scan) purgeIfGone(ctx context.Context, uid string) error {
	cur, err := reporter.ReadResults(ctx, sc.s.conn, sc.s.rm, sc.s.o.check, []string{uid})
	if err != nil {
		return err
	}
	if _, undecided := cur.Pending[uid]; undecided || len(cur.Verified[uid]) > 0 {
		return nil
	}
	// The report, if any, is found by its name (the uid), not where the
	// rejected results say.
	if err := sc.s.purge(ctx, bus.ResourceRef{UID: uid}); err != nil {
		return err
	}
	sc.purged++
	return nil
}
