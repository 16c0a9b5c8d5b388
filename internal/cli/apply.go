package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"strings"
	"sync"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// DefaultMaxDocumentBytes is the default limit on one resource document
// read by `verdict apply`, the webhook's default request body limit.
const DefaultMaxDocumentBytes = 8 << 20

var (
	// ErrNoResources is wrapped by the error of a --resource path that
	// yields no resource: an empty file, a folder without manifests, a
	// file of policies.
	ErrNoResources = errors.New("no resources")
	// ErrNoPolicies is wrapped by the error of a --policy path that yields
	// no policy or exception, or of a run with no policy to apply.
	ErrNoPolicies = errors.New("no policies")
	// ErrInvalidOptions is wrapped by ApplyOptions.Validate's error.
	ErrInvalidOptions = errors.New("invalid options")
)

// ApplyOptions configures `verdict apply`.
type ApplyOptions struct {
	Policies  []string
	Resources []string
	// Exceptions are files of PolicyExceptions (both shapes) to apply
	// besides those among the policies (Kyverno's --exception).
	Exceptions []string
	// ValuesFile is a Kyverno CLI values file (kind Values): global,
	// per-policy-and-resource and per-rule values, namespace labels and
	// objects, subresources.
	ValuesFile string
	// Set are global values, "name=value", over the values file's.
	Set []string
	// AuditWarn reports the failures of rules in Audit mode (a
	// ClusterPolicy's validationFailureAction, a ValidatingPolicy's
	// validationActions without Deny) as warnings (Kyverno's --audit-warn).
	AuditWarn bool
	// UserInfo is a Kyverno CLI user info file: the requester (its
	// username, groups, roles and cluster roles) of every request.
	UserInfo string
	// Output is table, json or report.
	Output string
	// Detailed prints every result in the table, not only the failures.
	Detailed bool
	// Operation is the admission operation to evaluate under.
	Operation string
	// MaxDocumentBytes limits each resource document read; 0 is
	// DefaultMaxDocumentBytes.
	MaxDocumentBytes int64
	// SigstoreTrustedRoot is a Sigstore trusted root file for image
	// verification (imageVerifier).
	SigstoreTrustedRoot string
}

// Validate reports every problem of the options, wrapped in
// ErrInvalidOptions.
func (o *ApplyOptions) Validate() error {
	var errs []error
	if len(o.Policies) == 0 || len(o.Resources) == 0 {
		errs = append(errs, errors.New("policies (as arguments or with --policy/-p) and --resource (-r) are required"))
	}
	switch o.Output {
	case "", "table", "json", "report":
	default:
		errs = append(errs, fmt.Errorf("unknown output %q: use table, json or report", o.Output))
	}
	switch strings.ToUpper(o.Operation) {
	case "", engine.OpCreate, engine.OpUpdate, engine.OpDelete:
	default:
		errs = append(errs, fmt.Errorf("unknown operation %q: use CREATE, UPDATE or DELETE", o.Operation))
	}
	if o.MaxDocumentBytes < 0 {
		errs = append(errs, fmt.Errorf("--max-document-bytes must be positive, not %d", o.MaxDocumentBytes))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, errors.Join(errs...))
	}
	return nil
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
// It returns the counts; the caller maps failures and errors to the exit
// code.
//
// Resources are streamed: their files are read one document at a time
// (each at most MaxDocumentBytes), evaluated on all cores, and their
// results written in input order, so that memory does not grow with the
// input. The table keeps only the rows it prints; json and report write
// each result as it comes.
//
// Once ctx ends, evaluations stop and Apply returns ctx's error without
// writing further results.
func Apply(ctx context.Context, opts ApplyOptions, stdin io.Reader, stdout io.Writer) (engine.Counts, error) {
	var counts engine.Counts
	if err := opts.Validate(); err != nil {
		return counts, err
	}
	pdocs, err := loadPolicies(opts.Policies, stdin)
	if err != nil {
		return counts, fmt.Errorf("policies: %w", err)
	}
	if err := loadExceptions(pdocs, opts.Exceptions, stdin); err != nil {
		return counts, fmt.Errorf("exceptions: %w", err)
	}
	verifier, err := imageVerifier(opts.SigstoreTrustedRoot)
	if err != nil {
		return counts, err
	}
	eng, err := engine.New(verifier)
	if err != nil {
		return counts, err
	}
	set := &engine.Set{Exceptions: pdocs.Exceptions}
	if set.Policies, err = mapInOrder(pdocs.Policies, eng.Compile); err != nil {
		return counts, err
	}
	for i, cp := range set.Policies {
		if set.Policies[i], err = eng.WithCELExceptions(cp, pdocs.CELExceptions); err != nil {
			return counts, fmt.Errorf("exceptions: %w", err)
		}
	}
	engine.OrderForImageEvidence(set.Policies)
	deleting, err := mapInOrder(pdocs.DeletingPolicies, eng.CompileCleanup)
	if err != nil {
		return counts, err
	}
	op := strings.ToUpper(opts.Operation)
	if op == "" {
		op = engine.OpCreate
	}
	vals, user, err := applyInputs(opts)
	if err != nil {
		return counts, err
	}
	src := resourceSource{paths: opts.Resources, stdin: stdin, maxDocumentBytes: opts.MaxDocumentBytes}
	if src.maxDocumentBytes == 0 {
		src.maxDocumentBytes = DefaultMaxDocumentBytes
	}
	if err := src.check(); err != nil {
		return counts, fmt.Errorf("resources: %w", err)
	}
	bw := bufio.NewWriterSize(stdout, 64<<10)
	out := newResultWriter(opts.Output, opts.Detailed, bw)
	evaluate := func(obj map[string]any) []applyResult {
		req := &engine.Request{Operation: op, Object: obj, UserInfo: user}
		if vals != nil {
			vals.onRequest(req, obj)
		}
		if op == engine.OpDelete {
			req.Object, req.OldObject = nil, req.Object
		}
		resps, _ := eng.Apply(ctx, req, set)
		return append(flatten(resps, obj, opts.AuditWarn), decideDeletions(ctx, eng, deleting, obj)...)
	}
	// Documents are parsed and evaluated on every core; their results are
	// written in the order the documents were read.
	type evaluated struct {
		piece     resourcePiece
		resources int
		results   []applyResult
		err       error
	}
	work := func(p resourcePiece) evaluated {
		if p.end {
			return evaluated{piece: p}
		}
		objs, err := p.resources()
		e := evaluated{piece: p, resources: len(objs), err: err}
		for _, obj := range objs {
			e.results = append(e.results, evaluate(obj)...)
		}
		return e
	}
	found := make([]int, len(opts.Resources))
	err = inOrder(src.pieces, work, func(e evaluated) error {
		if err := ctx.Err(); err != nil {
			// Interrupted: the engine cut the evaluations short, and what
			// it says is not the policies' verdict.
			return err
		}
		switch {
		case e.err != nil:
			return e.err
		case e.piece.end:
			if found[e.piece.input] == 0 {
				return src.noResources(e.piece.input)
			}
			return nil
		}
		found[e.piece.input] += e.resources
		for _, r := range e.results {
			counts.Add(engine.Status(r.Result))
			if err := out.add(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return counts, err
	}
	if err := out.finish(counts); err != nil {
		return counts, err
	}
	return counts, bw.Flush()
}

// decideDeletions is what each DeletingPolicy, on a tick, decides about
// obj, in the words of `verdict test` (and the reference CLI): pass when
// it would delete it (every condition holds), fail when it selects it
// but a condition is false, error when one cannot be evaluated; nothing
// when it does not select it.
func decideDeletions(ctx context.Context, eng *engine.Engine, deleting []*engine.CleanupPolicy, obj map[string]any) []applyResult {
	var out []applyResult
	for _, cp := range deleting {
		r := applyResult{
			Policy: cp.Raw.Key(), Kind: document.String(obj, "kind"),
			Namespace: document.String(obj, "metadata", "namespace"), Name: document.String(obj, "metadata", "name"), Scored: true,
		}
		tick, err := eng.StartCleanup(ctx, cp)
		var d engine.CleanupDecision
		if err == nil {
			d, err = tick.Decide(ctx, obj, nil)
		}
		switch {
		case err != nil:
			r.Result, r.Message = string(engine.StatusError), err.Error()
		case d.Delete:
			r.Result, r.Message = string(engine.StatusPass), "resource matched: it would be deleted"
		case d.Reason == engine.CleanupConditionsNotMet:
			r.Result, r.Message = string(engine.StatusFail), d.Message
		default:
			continue
		}
		out = append(out, r)
	}
	return out
}

// loadPolicies reads the policies and exceptions of every --policy path;
// a path that holds none is an error, as is a run without any policy.
func loadPolicies(paths []string, stdin io.Reader) (*policy.Documents, error) {
	all := &policy.Documents{}
	for _, p := range paths {
		docs, err := loadDocuments([]string{p}, stdin)
		if err != nil {
			return nil, err
		}
		if len(docs.Policies)+len(docs.DeletingPolicies)+len(docs.Exceptions)+len(docs.CELExceptions)+len(docs.Bindings) == 0 {
			return nil, fmt.Errorf("%w in %s: it holds no ClusterPolicy, Policy, CEL policy (ValidatingPolicy, MutatingPolicy, GeneratingPolicy, DeletingPolicy, ImageValidatingPolicy), Kubernetes admission policy or PolicyException", ErrNoPolicies, p)
		}
		all.Merge(docs)
	}
	all.Bind()
	if len(all.Policies)+len(all.DeletingPolicies) == 0 {
		return nil, fmt.Errorf("%w to apply in %s: no ClusterPolicy or Policy the engine evaluates", ErrNoPolicies, strings.Join(paths, ", "))
	}
	return all, nil
}

// applyInputs reads apply's values (the values file, then --set over its
// global values) and requester.
func applyInputs(opts ApplyOptions) (*valuesFile, engine.UserInfo, error) {
	var vals *valuesFile
	var user engine.UserInfo
	if opts.ValuesFile != "" {
		v, err := readValues(opts.ValuesFile)
		if err != nil {
			return nil, user, fmt.Errorf("values file: %w", err)
		}
		vals = v
	}
	for _, kv := range opts.Set {
		name, value, ok := strings.Cut(kv, "=")
		if name = strings.TrimSpace(name); !ok || name == "" {
			return nil, user, fmt.Errorf("%w: --set %q: use name=value", ErrInvalidOptions, kv)
		}
		if vals == nil {
			vals = &valuesFile{}
		}
		if vals.GlobalValues == nil {
			vals.GlobalValues = map[string]any{}
		}
		vals.GlobalValues[name] = value
	}
	if opts.UserInfo != "" {
		u, err := readUserInfo(opts.UserInfo)
		if err != nil {
			return nil, user, fmt.Errorf("userinfo: %w", err)
		}
		user = engine.UserInfo{Username: u.UserInfo.Username, UID: u.UserInfo.UID, Groups: u.UserInfo.Groups, Roles: u.Roles, ClusterRoles: u.ClusterRoles}
	}
	return vals, user, nil
}

// onRequest gives an apply request the values for its object: the
// global values (request.object.* ones written into the object, as the
// test runner does), each policy's values for the resource and each
// rule's (per rule: apply evaluates every policy in one request), the
// namespace's labels and object, and the subresource the values file
// says the object's kind is a request on.
func (v *valuesFile) onRequest(req *engine.Request, obj map[string]any) {
	name := document.String(obj, "metadata", "name")
	ns := document.String(obj, "metadata", "namespace")
	global := v.resourceValues("", name)
	if op, ok := global["request.operation"].(string); ok && op != "" && req.Operation == engine.OpCreate {
		req.Operation = strings.ToUpper(op)
	}
	field := "object"
	if req.Operation == engine.OpDelete {
		field = "oldObject"
	}
	req.Object = withValues(obj, global, field)
	req.Values = global
	req.RuleValues = func(policyName, ruleName string) map[string]any {
		out := v.resourceValues(policyName, name)
		for k := range global {
			if _, own := out[k]; own && reflect.DeepEqual(out[k], global[k]) {
				delete(out, k) // a global value: Values holds it, below the rule's context
			}
		}
		for k, val := range v.ruleValues(policyName, ruleName) {
			out[k] = val
		}
		return out
	}
	req.ForEachValues = v.foreachValues
	req.NamespaceLabels, req.NamespaceObject = v.namespaceLabels(ns), v.namespaceObject(ns)
	if parent, sub, ok := v.subresourceOf(obj); ok {
		req.ParentKind, req.SubResource = parent, sub
	}
}

// loadExceptions adds the PolicyExceptions of the files to docs; a file
// that holds anything else, or none, is an error.
func loadExceptions(docs *policy.Documents, paths []string, stdin io.Reader) error {
	for _, p := range paths {
		d, err := loadDocuments([]string{p}, stdin)
		if err != nil {
			return err
		}
		if n := len(d.Policies) + len(d.DeletingPolicies) + len(d.Bindings); n > 0 || len(d.Exceptions)+len(d.CELExceptions) == 0 {
			return fmt.Errorf("%s: an exception file holds PolicyExceptions only (policies go in the policy paths)", p)
		}
		docs.Exceptions = append(docs.Exceptions, d.Exceptions...)
		docs.CELExceptions = append(docs.CELExceptions, d.CELExceptions...)
	}
	return nil
}

// inOrder runs work on every item produce hands it, on all cores, and
// hands the outputs to consume in the order produce gave the items. At
// most a few items per core are in flight. It stops at the first error of
// produce or consume; once consume failed, produce's emit returns
// errStopped.
func inOrder[I, O any](produce func(emit func(I) error) error, work func(I) O, consume func(O) error) error {
	workers := runtime.GOMAXPROCS(0)
	type job struct {
		in   I
		done chan O
	}
	jobs := make(chan job, workers)
	order := make(chan chan O, 4*workers)
	stop := make(chan struct{})
	var produceErr error
	go func() {
		defer close(order)
		defer close(jobs)
		produceErr = produce(func(in I) error {
			// The job goes to the workers before its place in the order:
			// every output the consumer waits for is then being computed.
			j := job{in: in, done: make(chan O, 1)}
			select {
			case jobs <- j:
			case <-stop:
				return errStopped
			}
			select {
			case order <- j.done:
			case <-stop:
				return errStopped
			}
			return nil
		})
	}()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				j.done <- work(j.in)
			}
		}()
	}
	var consumeErr error
	for done := range order {
		out := <-done
		if consumeErr == nil {
			consumeErr = consume(out)
			if consumeErr != nil {
				close(stop)
			}
		}
	}
	wg.Wait()
	if consumeErr != nil {
		return consumeErr
	}
	return produceErr
}

// mapInOrder applies f to every item on all cores (as inOrder does) and
// returns the outputs in the order of the items, or the error of the
// first item that failed.
func mapInOrder[I, O any](items []I, f func(I) (O, error)) ([]O, error) {
	type result struct {
		out O
		err error
	}
	outs := make([]O, 0, len(items))
	err := inOrder(func(emit func(I) error) error {
		for _, it := range items {
			if err := emit(it); err != nil {
				return err
			}
		}
		return nil
	}, func(it I) result {
		out, err := f(it)
		return result{out, err}
	}, func(r result) error {
		if r.err != nil {
			return r.err
		}
		outs = append(outs, r.out)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return outs, nil
}

// errStopped ends the reading of resources once the results can no longer
// be written.
var errStopped = errors.New("stopped")

func summaryMap(c engine.Counts) map[string]int {
	return map[string]int{"pass": c.Pass, "fail": c.Fail, "warn": c.Warn, "error": c.Error, "skip": c.Skip}
}

func flatten(resps []engine.Response, obj map[string]any, auditWarn bool) []applyResult {
	n := 0
	for _, resp := range resps {
		n += len(resp.Rules)
	}
	out := make([]applyResult, 0, n)
	kind := document.String(obj, "kind")
	namespace := document.String(obj, "metadata", "namespace")
	name := document.String(obj, "metadata", "name")
	for _, resp := range resps {
		for _, rr := range resp.Rules {
			res := string(rr.Status)
			if rr.Status == engine.StatusFail && (!resp.Policy.Scored || auditWarn && !rr.Enforce) {
				res = string(engine.StatusWarn)
			}
			out = append(out, applyResult{
				Policy:    resp.Policy.Name(),
				Rule:      rr.Name,
				Kind:      kind,
				Namespace: namespace,
				Name:      name,
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
