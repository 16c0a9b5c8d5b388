package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"slices"
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
	Policies []string
	// Resources are files or folders of resources; with Cluster, the
	// names of the cluster's resources to evaluate (all when empty).
	Resources []string
	// Exceptions are files of PolicyExceptions (both shapes) to apply
	// besides those among the policies (Kyverno's --exception).
	Exceptions []string
	// ExceptionsInResources applies the PolicyExceptions found among the
	// resource files too (Kyverno's --exceptions-with-resources).
	ExceptionsInResources bool
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
	// Output is table, json, report (a ClusterPolicyReport) or text (the
	// Kyverno CLI's default output).
	Output string
	// ReportFormat encodes the report output: yaml (the default) or json.
	ReportFormat string
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

	// Cluster evaluates the policies on the cluster's resources of the
	// kinds they select (Kube says which cluster), in Namespace when it
	// is set; ClusterWide reads the cluster-scoped kinds. Context
	// entries, resource reads, namespace selectors and mutate-existing
	// targets are then answered by the cluster.
	Cluster     bool
	Kube        KubeOptions
	Namespace   string
	ClusterWide bool
	// BatchSize is how many objects a list request asks for (100 when 0).
	BatchSize int64
	// AllowNoResources accepts resource files that hold no resource
	// (Kyverno's --warn-no-pass, whose exit code says so).
	AllowNoResources bool

	// TargetResources are files of the resources mutate-existing rules
	// patch and generate rules clone; ParamResources the params of
	// Kubernetes admission policies; ContextFile a Kyverno CLI context
	// file (kind Context): objects context entries and CEL reads find,
	// image data. All stand in for a cluster.
	TargetResources []string
	ParamResources  []string
	ContextFile     string
	// CRDs are files of CustomResourceDefinitions: the custom kinds they
	// define as cluster-scoped get no default namespace.
	CRDs []string

	// MutatedOutput writes the resources mutations changed, and the
	// resources generate rules would create, to a file (a name ending in
	// .yaml or .yml) or a folder (one file per resource), as Kyverno's
	// apply -o does.
	MutatedOutput string
	// Mutated, when set (and MutatedOutput is not), receives them as a
	// YAML stream (Kyverno's --stdin).
	Mutated io.Writer
}

// Validate reports every problem of the options, wrapped in
// ErrInvalidOptions.
func (o *ApplyOptions) Validate() error {
	var errs []error
	switch {
	case len(o.Policies) == 0:
		errs = append(errs, errors.New("policies (as arguments or with --policy) are required"))
	case len(o.Resources) == 0 && !o.Cluster:
		errs = append(errs, errors.New("resources are required: --resource (-r) files, or --cluster"))
	}
	switch o.Output {
	case "", "table", "json", "report", "text":
	default:
		errs = append(errs, fmt.Errorf("unknown output %q: use table, json, report or text", o.Output))
	}
	switch o.ReportFormat {
	case "", "yaml", "json":
	default:
		errs = append(errs, fmt.Errorf("unknown report format %q: use yaml or json", o.ReportFormat))
	}
	switch strings.ToUpper(o.Operation) {
	case "", engine.OpCreate, engine.OpUpdate, engine.OpDelete:
	default:
		errs = append(errs, fmt.Errorf("unknown operation %q: use CREATE, UPDATE or DELETE", o.Operation))
	}
	if o.MaxDocumentBytes < 0 {
		errs = append(errs, fmt.Errorf("--max-document-bytes must be positive, not %d", o.MaxDocumentBytes))
	}
	if o.BatchSize < 0 {
		errs = append(errs, fmt.Errorf("--batch-size must be positive, not %d", o.BatchSize))
	}
	if !o.Cluster {
		if o.Namespace != "" {
			errs = append(errs, errors.New("--namespace selects the cluster's resources: give --cluster too"))
		}
		if o.ClusterWide {
			errs = append(errs, errors.New("--cluster-wide-resources selects the cluster's resources: give --cluster too"))
		}
	} else {
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"--target-resource", len(o.TargetResources) > 0},
			{"--parameter-resource", len(o.ParamResources) > 0},
			{"--context-file", o.ContextFile != ""},
			{"--exceptions-with-resources", o.ExceptionsInResources},
		} {
			if f.set {
				errs = append(errs, fmt.Errorf("%s stands in for a cluster: with --cluster, the cluster's objects are read", f.name))
			}
		}
	}
	for _, p := range slices.Concat(o.Policies, o.Resources, o.Exceptions, o.TargetResources, o.ParamResources) {
		if isURL(p) {
			errs = append(errs, fmt.Errorf("%s: verdict reads files and folders, not URLs: download the file (curl -LO <url>) or clone the repository (git clone --branch <branch> <url>) and give its path", p))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, errors.Join(errs...))
	}
	return nil
}

// isURL says whether a path is a URL (Kyverno's CLI reads policies from
// Git repositories and files from HTTP).
func isURL(p string) bool {
	return strings.HasPrefix(p, "https://") || strings.HasPrefix(p, "http://")
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

	// What the Kyverno CLI's text output says of the result besides: the
	// rule's type, whether the rule failed (Result may say warn), and
	// whether --audit-warn made the failure a warning.
	ruleType    engine.RuleType
	failed      bool
	auditWarned bool
}

// resourcePath names a resource as the Kyverno CLI's text output does:
// namespace/Kind/name ("" for a cluster-scoped resource's namespace).
func (r applyResult) resourcePath() string {
	return r.Namespace + "/" + r.Kind + "/" + r.Name
}

// mutation is what one policy's mutate and generate rules did to one
// resource: the resource after its mutations (nil when none applied),
// the mutate-existing targets it patched, the resources it would
// generate.
type mutation struct {
	policy    string
	object    map[string]any
	targets   []map[string]any
	generated []map[string]any
}

// Apply evaluates the policies on the resources and writes the results.
// It returns the counts; the caller maps failures and errors to the exit
// code.
//
// Resources are streamed: their files are read one document at a time
// (each at most MaxDocumentBytes), evaluated on all cores, and their
// results written in input order, so that memory does not grow with the
// input. The table keeps only the rows it prints; json and report write
// each result as it comes. With Cluster, the resources of the kinds the
// policies select are listed first (page by page, as Kyverno's apply
// lists them), then evaluated the same way.
//
// Once ctx ends, evaluations stop and Apply returns ctx's error without
// writing further results.
func Apply(ctx context.Context, opts ApplyOptions, stdin io.Reader, stdout io.Writer) (engine.Counts, error) {
	var counts engine.Counts
	if err := opts.Validate(); err != nil {
		return counts, err
	}
	var resourceExceptions *policy.Documents
	if opts.ExceptionsInResources {
		// The exceptions among the resources are read before the
		// resources are streamed; the standard input, read twice, is
		// kept.
		var data io.Reader
		if slices.Contains(opts.Resources, "-") {
			b, err := io.ReadAll(stdin)
			if err != nil {
				return counts, err
			}
			data, stdin = bytes.NewReader(b), bytes.NewReader(b)
		}
		docs, err := loadDocuments(opts.Resources, data)
		if err != nil {
			return counts, fmt.Errorf("resources: %w", err)
		}
		resourceExceptions = docs
	}
	pdocs, err := loadPolicies(opts.Policies, stdin)
	if err != nil {
		return counts, fmt.Errorf("policies: %w", err)
	}
	if err := loadExceptions(pdocs, opts.Exceptions, stdin); err != nil {
		return counts, fmt.Errorf("exceptions: %w", err)
	}
	if resourceExceptions != nil {
		pdocs.Exceptions = append(pdocs.Exceptions, resourceExceptions.Exceptions...)
		pdocs.CELExceptions = append(pdocs.CELExceptions, resourceExceptions.CELExceptions...)
	}
	verifier, err := imageVerifier(opts.SigstoreTrustedRoot)
	if err != nil {
		return counts, err
	}
	engOpts := []engine.Option{verifier}
	var kc *kubeClients
	var nsCache *namespaceCache
	hasTargets := false
	if opts.Cluster {
		if kc, err = opts.Kube.clients(); err != nil {
			return counts, err
		}
		cs := &clusterSource{c: kc, page: opts.BatchSize}
		engOpts = append(engOpts, engine.WithContextLoader(cs), engine.WithContextResources(cs), engine.WithResourceLister(cs))
		nsCache = &namespaceCache{kc: kc}
		hasTargets = true
	} else {
		loader, err := standIns(opts)
		if err != nil {
			return counts, err
		}
		if loader != nil {
			engOpts = append(engOpts, engine.WithContextLoader(loader), engine.WithResourceLister(loader))
			hasTargets = len(opts.TargetResources) > 0
		}
	}
	eng, err := engine.New(engOpts...)
	if err != nil {
		return counts, err
	}
	set, err := compileSet(eng, pdocs)
	if err != nil {
		return counts, err
	}
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
	clusterKinds, err := crdClusterKinds(opts.CRDs)
	if err != nil {
		return counts, err
	}
	src := resourceSource{paths: opts.Resources, stdin: stdin, maxDocumentBytes: opts.MaxDocumentBytes, clusterKinds: clusterKinds}
	if src.maxDocumentBytes == 0 {
		src.maxDocumentBytes = DefaultMaxDocumentBytes
	}
	produce := src.pieces
	if opts.Cluster {
		scope := clusterScope{Namespace: opts.Namespace, ClusterWide: opts.ClusterWide, Names: opts.Resources, BatchSize: opts.BatchSize}
		objs, err := clusterResources(ctx, kc, scope, set, deleting)
		if err != nil {
			return counts, err
		}
		produce = objectPieces(objs)
	} else if err := src.check(); err != nil {
		return counts, fmt.Errorf("resources: %w", err)
	}
	sink, err := newMutatedSink(opts.MutatedOutput, opts.Mutated)
	if err != nil {
		return counts, err
	}
	bw := bufio.NewWriterSize(stdout, 64<<10)
	out := newResultWriter(opts.Output, opts.ReportFormat, opts.Detailed, bw)
	if tw, ok := out.(*textWriter); ok {
		tw.setRun(set, deleting, len(pdocs.Exceptions)+len(pdocs.CELExceptions))
	}
	evaluate := func(obj map[string]any) evaluated {
		req := &engine.Request{Operation: op, Object: obj, UserInfo: user}
		if vals != nil {
			vals.onRequest(req, obj)
		}
		if nsCache != nil && req.NamespaceLabels == nil {
			if nsObj := nsCache.get(ctx, document.String(obj, "metadata", "namespace")); nsObj != nil {
				req.NamespaceObject, req.NamespaceLabels = nsObj, document.StringMap(nsObj, "metadata", "labels")
			}
		}
		if op == engine.OpDelete {
			req.Object, req.OldObject = nil, req.Object
		}
		resps, final := eng.Apply(ctx, req, set)
		if hasTargets {
			resps = withMutateExisting(ctx, eng, req, set, resps)
		}
		e := evaluated{results: append(flatten(resps, obj, opts.AuditWarn), decideDeletions(ctx, eng, deleting, obj)...)}
		e.mutations, e.final = mutationsOf(resps, final)
		return e
	}
	// Documents are parsed and evaluated on every core; their results are
	// written in the order the documents were read.
	work := func(p resourcePiece) pieceResult {
		if p.end {
			return pieceResult{piece: p}
		}
		objs, err := p.resources()
		r := pieceResult{piece: p, err: err, evaluated: make([]evaluated, 0, len(objs))}
		for _, obj := range objs {
			r.evaluated = append(r.evaluated, evaluate(obj))
		}
		return r
	}
	found := make([]int, max(len(opts.Resources), 1))
	resources := 0
	err = inOrder(produce, work, func(r pieceResult) error {
		if err := ctx.Err(); err != nil {
			// Interrupted: the engine cut the evaluations short, and what
			// it says is not the policies' verdict.
			return err
		}
		switch {
		case r.err != nil:
			return r.err
		case r.piece.end:
			if found[r.piece.input] == 0 && !opts.Cluster && !opts.AllowNoResources {
				return src.noResources(r.piece.input)
			}
			return nil
		}
		found[r.piece.input] += len(r.evaluated)
		resources += len(r.evaluated)
		for _, e := range r.evaluated {
			if err := writeEvaluated(e, out, sink, &counts); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return counts, err
	}
	if tw, ok := out.(*textWriter); ok {
		tw.resources = resources
	}
	if err := out.finish(counts); err != nil {
		return counts, err
	}
	if err := sink.close(); err != nil {
		return counts, err
	}
	return counts, bw.Flush()
}

// evaluated is what the policies said of one resource.
type evaluated struct {
	results   []applyResult
	mutations []mutation
	// final is the resource after every mutation, nil when none applied.
	final map[string]any
}

// pieceResult is what the policies said of the resources of one piece.
type pieceResult struct {
	piece     resourcePiece
	evaluated []evaluated
	err       error
}

// writeEvaluated writes one resource's results and counts them; the
// resource as mutated goes to the sink of mutated resources when there
// is one, else into the text output's blocks.
func writeEvaluated(e evaluated, out resultWriter, sink *mutatedSink, counts *engine.Counts) error {
	for _, r := range e.results {
		counts.Add(engine.Status(r.Result))
		if err := out.add(r); err != nil {
			return err
		}
	}
	if sink != nil {
		return sink.write(e)
	}
	if mw, ok := out.(mutationWriter); ok && len(e.results) > 0 {
		for _, m := range e.mutations {
			if err := mw.addMutation(e.results[0].resourcePath(), m); err != nil {
				return err
			}
		}
	}
	return nil
}

// withMutateExisting runs the mutate-existing rules on their targets,
// when something holds targets (--target-resource files, the cluster):
// their responses replace the admission's, which leave them to the
// background.
func withMutateExisting(ctx context.Context, eng *engine.Engine, req *engine.Request, set *engine.Set, resps []engine.Response) []engine.Response {
	for _, p := range set.Policies {
		if !mutatesExisting(p) {
			continue
		}
		resp := eng.MutateExisting(ctx, req, p, set.Exceptions)
		if len(resp.Rules) == 0 {
			continue
		}
		for i := range resps {
			if resps[i].Policy != p {
				continue
			}
			resps[i].Rules = slices.DeleteFunc(slices.Clone(resps[i].Rules), func(rr engine.RuleResponse) bool {
				return rr.Type == engine.TypeMutation && rr.Background
			})
		}
		resps = append(resps, resp)
	}
	return slices.DeleteFunc(resps, func(r engine.Response) bool { return len(r.Rules) == 0 })
}

func mutatesExisting(p *engine.Policy) bool {
	for _, r := range p.Rules {
		if r.Mutation != nil && r.MutatesExisting() {
			return true
		}
	}
	return false
}

// mutationsOf lists what each policy's mutate and generate rules did,
// and the final resource when a mutation applied.
func mutationsOf(resps []engine.Response, final map[string]any) ([]mutation, map[string]any) {
	var out []mutation
	applied := false
	for _, resp := range resps {
		m := mutation{policy: resp.Policy.Name()}
		for _, rr := range resp.Rules {
			if rr.Status != engine.StatusPass {
				continue
			}
			switch rr.Type {
			case engine.TypeMutation:
				for _, t := range rr.Targets {
					if t.Status == engine.StatusPass && t.Patched != nil {
						m.targets = append(m.targets, t.Patched)
					}
				}
				if len(rr.Targets) == 0 && !rr.Background {
					m.object = resp.Patched
				}
			case engine.TypeGeneration:
				m.generated = append(m.generated, rr.Generated...)
			}
		}
		if m.object != nil || len(m.targets) > 0 || len(m.generated) > 0 {
			applied = applied || m.object != nil
			out = append(out, m)
		}
	}
	if !applied {
		final = nil
	}
	return out, final
}

// objectPieces hands objects already read (the cluster's) to apply's
// pipeline, a few at a time, then the end of its one input.
func objectPieces(objs []map[string]any) func(emit func(resourcePiece) error) error {
	const perPiece = 16
	return func(emit func(resourcePiece) error) error {
		for len(objs) > 0 {
			n := min(perPiece, len(objs))
			if err := emit(resourcePiece{objs: objs[:n:n]}); err != nil {
				return err
			}
			objs = objs[n:]
		}
		return emit(resourcePiece{end: true})
	}
}

// standIns is what stands in for a cluster without one: the target
// resources, params and context file's objects, the context file's image
// data; nil when none is given.
func standIns(opts ApplyOptions) (*fileLoader, error) {
	if len(opts.TargetResources)+len(opts.ParamResources) == 0 && opts.ContextFile == "" {
		return nil, nil
	}
	loader := &fileLoader{}
	for _, f := range []struct {
		name  string
		paths []string
	}{{"target resources", opts.TargetResources}, {"parameter resources", opts.ParamResources}} {
		if len(f.paths) == 0 {
			continue
		}
		docs, err := loadDocuments(f.paths, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		for _, o := range docs.Others {
			loader.objects = append(loader.objects, defaultNamespace(o))
		}
	}
	if opts.ContextFile != "" {
		c, err := readContext(opts.ContextFile)
		if err != nil {
			return nil, fmt.Errorf("context file: %w", err)
		}
		for _, o := range c.Spec.Resources {
			loader.objects = append(loader.objects, defaultNamespace(o))
		}
		if loader.images, err = c.imagesByReference(); err != nil {
			return nil, fmt.Errorf("context file: %w", err)
		}
	}
	return loader, nil
}

// crdClusterKinds reads CustomResourceDefinitions and returns the kinds
// they define as cluster-scoped.
func crdClusterKinds(paths []string) (map[string]bool, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	docs, err := loadDocuments(paths, nil)
	if err != nil {
		return nil, fmt.Errorf("CRDs: %w", err)
	}
	out := map[string]bool{}
	for _, o := range docs.Others {
		if document.String(o, "kind") != "CustomResourceDefinition" {
			continue
		}
		if document.String(o, "spec", "scope") == "Cluster" {
			out[document.String(o, "spec", "names", "kind")] = true
		}
	}
	return out, nil
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
// compileSet compiles the policies of pdocs, with their exceptions, into
// the set the engine evaluates, in the order image evidence needs.
func compileSet(eng *engine.Engine, pdocs *policy.Documents) (*engine.Set, error) {
	var err error
	set := &engine.Set{Exceptions: pdocs.Exceptions}
	if set.Policies, err = mapInOrder(pdocs.Policies, eng.Compile); err != nil {
		return nil, err
	}
	for i, cp := range set.Policies {
		if set.Policies[i], err = eng.WithCELExceptions(cp, pdocs.CELExceptions); err != nil {
			return nil, fmt.Errorf("exceptions: %w", err)
		}
	}
	engine.OrderForImageEvidence(set.Policies)
	return set, nil
}

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
			failed := rr.Status == engine.StatusFail
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

				ruleType:    rr.Type,
				failed:      failed,
				auditWarned: failed && auditWarn && !rr.Enforce,
			})
		}
	}
	return out
}
