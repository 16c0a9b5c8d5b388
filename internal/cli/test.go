package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// TestOptions configures `verdict test`.
type TestOptions struct {
	Dirs     []string
	FileName string
	// JSON is Output "json" (the --json flag).
	JSON bool
	// Output is the format of what is written: text (the default: a line
	// per failure, then the summary), json, yaml, junit or markdown.
	Output string
	// FailOnly leaves the passed assertions out of a structured output.
	FailOnly bool
	// Detailed lists the passed assertions in the text output too.
	Detailed bool
	// Selector keeps the assertions of some policies, rules and resources
	// (--test-case-selector, Kyverno's form): the others are not counted.
	Selector string
	// AllowPathsOutsideSuite lets test files name paths outside the
	// directory they were found below (absolute, ../ beyond it, or
	// through a symbolic link); off, such a path is an error
	// (ErrPathOutsideSuite).
	AllowPathsOutsideSuite bool
	// SigstoreTrustedRoot is a Sigstore trusted root file for image
	// verification (imageVerifier).
	SigstoreTrustedRoot string
}

// assertion is the verdict on one resource named in one result entry.
type assertion struct {
	Test     string `json:"test"`
	Policy   string `json:"policy"`
	Rule     string `json:"rule"`
	Resource string `json:"resource"`
	Expected string `json:"expected"`
	Actual   string `json:"actual,omitempty"`
	Outcome  string `json:"outcome"` // passed, failed, unsupported, skipped
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
	// Rows is the number of rule results this assertion covers (several
	// resources of one name, or a rule and its autogen rules).
	Rows int `json:"rows,omitempty"`
}

// TestSummary counts assertions.
type TestSummary struct {
	Passed      int `json:"passed"`
	Failed      int `json:"failed"`
	Unsupported int `json:"unsupported"`
	// Skipped counts assertions whose rule results were all left out
	// because the patchedResources file has no document for the resource
	// (and the result does not set failOnMissingResources).
	Skipped int `json:"skipped,omitempty"`
	// Rows counts passed rule results the way the reference CLI does.
	Rows       int         `json:"rows"`
	Errors     []string    `json:"errors,omitempty"`
	Assertions []assertion `json:"assertions,omitempty"`
}

// foundTest is a test file and the root of its suite: the directory
// given on the command line it was found below, or for a file given
// itself, its directory.
type foundTest struct {
	path, root string
	// given is the root as given.
	given string
}

// findTests returns every kyverno-test.yaml below the directories.
func findTests(dirs []string, fileName string) ([]foundTest, error) {
	var out []foundTest
	for _, d := range dirs {
		st, err := os.Stat(d)
		if err != nil {
			return nil, err
		}
		given := d
		if !st.IsDir() {
			given = filepath.Dir(d)
		}
		root, err := filepath.Abs(given)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, foundTest{path: d, root: root, given: given})
			continue
		}
		err = filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !e.IsDir() && e.Name() == fileName {
				out = append(out, foundTest{path: path, root: root, given: given})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out, nil
}

// RunTests judges every test file and writes the report. It returns the
// summary; the caller maps failures to the exit code. Once ctx ends, it
// returns ctx's error without judging further.
func RunTests(ctx context.Context, opts TestOptions, stdout io.Writer) (*TestSummary, error) {
	if opts.FileName == "" {
		opts.FileName = "kyverno-test.yaml"
	}
	format := opts.Output
	switch {
	case format == "" && opts.JSON, format == testOutputJSON:
		format = testOutputJSON
	case format == "":
		format = testOutputText
	case !slices.Contains(testOutputs, format):
		return nil, fmt.Errorf("output format %q: use %s", format, strings.Join(testOutputs, ", "))
	}
	structured := format != testOutputText
	sel, err := parseCaseSelector(opts.Selector)
	if err != nil {
		return nil, err
	}
	files, err := findTests(opts.Dirs, opts.FileName)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no %s found below %s", opts.FileName, strings.Join(opts.Dirs, ", "))
	}
	sum := &TestSummary{}
	for _, f := range files {
		as, err := runTestFile(ctx, f.path, &suiteRoot{dir: f.root, given: f.given, allowOutside: opts.AllowPathsOutsideSuite, trustedRoot: opts.SigstoreTrustedRoot})
		if cerr := ctx.Err(); cerr != nil {
			// Interrupted: the engine cut the evaluations short, and what
			// it says is not the policies' verdict.
			return sum, cerr
		}
		if err != nil {
			sum.Errors = append(sum.Errors, err.Error())
			if !structured {
				fmt.Fprintf(stdout, "ERROR %s: %v\n", f.path, err)
			}
		}
		for _, a := range as {
			if !sel.selects(a) {
				continue
			}
			switch a.Outcome {
			case "passed":
				sum.Passed++
				sum.Rows += a.Rows
				if !structured && opts.Detailed {
					fmt.Fprintf(stdout, "PASS %s: policy %s rule %s resource %s: %s, as expected\n", a.Test, a.Policy, a.Rule, a.Resource, a.Expected)
				}
			case "failed":
				sum.Failed++
				if !structured {
					fmt.Fprintf(stdout, "FAIL %s: policy %s rule %s resource %s: %s\n", a.Test, a.Policy, a.Rule, a.Resource, a.Reason)
				}
			case "unsupported":
				sum.Unsupported++
			case "skipped":
				sum.Skipped++
			}
			if structured && (!opts.FailOnly || a.Outcome == "failed") {
				sum.Assertions = append(sum.Assertions, a)
			}
		}
	}
	if structured {
		return sum, writeTestSummary(stdout, format, sum, len(files))
	}
	fmt.Fprintf(stdout, "\nTest files: %d, errors: %d, unsupported assertions (policy kinds this engine does not evaluate): %d, rule results in passed assertions: %d\n",
		len(files), len(sum.Errors), sum.Unsupported, sum.Rows)
	if sum.Skipped > 0 {
		fmt.Fprintf(stdout, "%d passed, %d failed, %d skipped (resource not in the patchedResources file)\n", sum.Passed, sum.Failed, sum.Skipped)
		return sum, nil
	}
	fmt.Fprintf(stdout, "%d passed, %d failed\n", sum.Passed, sum.Failed)
	return sum, nil
}

// testRun holds one test file's loaded inputs.
type testRun struct {
	t          *testFile
	eng        *engine.Engine
	policies   []*engine.Policy
	byName     map[string]*engine.Policy
	exceptions []*policy.Exception
	// celExceptions are the PolicyExceptions of policies.kyverno.io,
	// compiled into the CEL policies they name once all are read.
	celExceptions []*policy.CELException
	resources     []map[string]any
	// payloads names the resources that are JSON payloads (by index in
	// resources): their file names.
	payloads map[int]string
	// targets are the test's targetResources, the existing resources of
	// mutate-existing rules, which this engine does not evaluate.
	targets []map[string]any
	values  *valuesFile
	user    engine.UserInfo
	// responses by resource index.
	responses [][]engine.Response
	// byOperation holds, for each operation a result names, the responses
	// of an evaluation as that operation, by resource index.
	byOperation map[string][][]engine.Response
	// deleting are the test's DeletingPolicies, by name and key, and
	// deletions what each decides about each resource (by index).
	deleting  map[string]*engine.CleanupPolicy
	deletions map[*engine.CleanupPolicy][]deletion
}

// deletion is what a DeletingPolicy decides about one resource.
type deletion struct {
	d   engine.CleanupDecision
	err error
}

// runTestFile runs every Test document of a test file.
func runTestFile(ctx context.Context, path string, root *suiteRoot) ([]assertion, error) {
	tests, err := readTestFiles(path, root)
	if err != nil {
		return nil, err
	}
	var out []assertion
	var errs []error
	for _, t := range tests {
		as, err := runTest(ctx, path, t)
		out = append(out, as...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

func runTest(ctx context.Context, path string, t *testFile) ([]assertion, error) {
	run := &testRun{t: t, byName: map[string]*engine.Policy{}}
	loadErr := run.load()
	if loadErr != nil {
		// Every assertion fails with the load error.
		var out []assertion
		for _, r := range t.Results {
			for _, name := range r.resourceNames() {
				a := assertion{Test: path, Policy: r.Policy, Rule: r.Rule, Resource: name, Expected: r.expected()}
				a.Outcome, a.Reason = "failed", "test could not be loaded: "+loadErr.Error()
				out = append(out, a)
			}
		}
		return out, fmt.Errorf("%s: %w", path, loadErr)
	}
	run.responses = run.evaluate(ctx, "")
	if err := run.decideDeletions(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, r := range t.Results {
		if op := r.Operation; op != "" && run.byOperation[op] == nil {
			if run.byOperation == nil {
				run.byOperation = map[string][][]engine.Response{}
			}
			run.byOperation[op] = run.evaluate(ctx, op)
		}
	}
	var out []assertion
	for i := range t.Results {
		out = append(out, run.judge(&t.Results[i])...)
	}
	return out, nil
}

func (run *testRun) load() error {
	t := run.t
	for i, r := range t.Results {
		switch r.Operation {
		case "", engine.OpCreate, engine.OpUpdate, engine.OpDelete:
		default:
			return fmt.Errorf("results[%d]: operation %q must be one of CREATE, UPDATE or DELETE", i, r.Operation)
		}
	}
	// The files results are compared with are read when judging: they
	// are checked here, with the other paths.
	for i := range t.Results {
		r := &t.Results[i]
		if pr := r.patched(); pr != "" {
			if _, err := t.suitePath(fmt.Sprintf("results[%d].patchedResource", i), pr); err != nil {
				return err
			}
		}
		if gr := r.GeneratedResource; gr != "" {
			if _, err := t.suitePath(fmt.Sprintf("results[%d].generatedResource", i), gr); err != nil {
				return err
			}
		}
	}
	// Values, context and resources first: the engine's context loader
	// serves what they hold.
	switch {
	case t.Values != nil:
		run.values = t.Values
	case t.Variables != "":
		path, err := t.suitePath("variables", t.Variables)
		if err != nil {
			return err
		}
		v, err := readValues(path)
		if err != nil {
			return fmt.Errorf("variables: %w", err)
		}
		run.values = v
	}
	if len(t.Resources) > 0 {
		paths, err := t.suitePaths("resources", t.Resources)
		if err != nil {
			return err
		}
		rdocs, err := loadDocuments(paths, nil)
		if err != nil {
			return fmt.Errorf("resources: %w", err)
		}
		for _, obj := range rdocs.Others {
			run.resources = append(run.resources, defaultNamespace(obj))
		}
		run.exceptions = append(run.exceptions, rdocs.Exceptions...)
		run.celExceptions = append(run.celExceptions, rdocs.CELExceptions...)
	}
	payloads := t.JSONPayloads
	if t.JSONPayload != "" {
		payloads = append(payloads[:len(payloads):len(payloads)], t.JSONPayload)
	}
	for i, f := range payloads {
		path, err := t.suitePath(fmt.Sprintf("jsonPayloads[%d]", i), f)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("jsonPayloads: %w", err)
		}
		v, err := document.Decode(data)
		if err != nil {
			return fmt.Errorf("jsonPayloads: %s: %w", f, err)
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("jsonPayloads: %s: a payload must be a JSON object", f)
		}
		if run.payloads == nil {
			run.payloads = map[int]string{}
		}
		run.payloads[len(run.resources)] = filepath.Base(f)
		run.resources = append(run.resources, obj)
	}
	if len(t.TargetResources) > 0 {
		paths, err := t.suitePaths("targetResources", t.TargetResources)
		if err != nil {
			return err
		}
		tdocs, err := loadDocuments(paths, nil)
		if err != nil {
			return fmt.Errorf("targetResources: %w", err)
		}
		for _, obj := range tdocs.Others {
			run.targets = append(run.targets, defaultNamespace(obj))
		}
	}
	// The targets of mutate-existing rules are found among the objects
	// the loader serves, as on the reference CLI's fake cluster.
	loader := &fileLoader{objects: append(slices.Clone(run.resources), run.targets...)}
	mocks, err := indexAPICallMocks(t.APICallResponses)
	if err != nil {
		return err
	}
	loader.mocks = mocks
	gctx, err := resolveGlobalContextEntries(t.GlobalContextEntries, t)
	if err != nil {
		return err
	}
	loader.gctx = gctx
	if run.values != nil {
		loader.responses = run.values.APICallResponses
		loader.globals = run.values.GlobalReferences
	}
	if t.Context != "" {
		path, err := t.suitePath("context", t.Context)
		if err != nil {
			return err
		}
		c, err := readContext(path)
		if err != nil {
			return fmt.Errorf("context: %w", err)
		}
		for _, o := range c.Spec.Resources {
			loader.objects = append(loader.objects, defaultNamespace(o))
		}
		if loader.images, err = c.imagesByReference(); err != nil {
			return fmt.Errorf("context: %w", err)
		}
	}
	paramFiles, err := t.suitePaths("paramResources", t.ParamResources)
	if err != nil {
		return err
	}
	if len(paramFiles) > 0 {
		pdocs, err := loadDocuments(paramFiles, nil)
		if err != nil {
			return fmt.Errorf("paramResources: %w", err)
		}
		for _, o := range pdocs.Others {
			loader.objects = append(loader.objects, defaultNamespace(o))
		}
	}
	clusterFiles, err := t.suitePaths("clusterResources", t.ClusterResources)
	if err != nil {
		return err
	}
	for i, f := range clusterFiles {
		var c clusterResourceFile
		if err := decodeFileInto(f, &c); err != nil {
			return fmt.Errorf("clusterResources: %w", err)
		}
		// The CRDs (paths relative to the test, as the reference CLI
		// reads them) say which custom kinds have no namespace.
		cluster := map[string]bool{}
		for j, crd := range c.Spec.CRDs {
			var doc struct {
				Spec struct {
					Scope string `json:"scope"`
					Names struct {
						Kind string `json:"kind"`
					} `json:"names"`
				} `json:"spec"`
			}
			path, err := t.suitePath(fmt.Sprintf("clusterResources[%d] spec.crds[%d]", i, j), crd)
			if err != nil {
				return err
			}
			if err := decodeFileInto(path, &doc); err != nil {
				return fmt.Errorf("clusterResources: %w", err)
			}
			if doc.Spec.Scope == "Cluster" {
				cluster[doc.Spec.Names.Kind] = true
			}
		}
		for _, o := range c.Spec.Resources {
			if !cluster[document.String(o, "kind")] {
				o = defaultNamespace(o)
			}
			loader.objects = append(loader.objects, o)
		}
	}
	for i, r := range t.Results {
		if r.CloneSourceResource == "" {
			continue
		}
		path, err := t.suitePath(fmt.Sprintf("results[%d].cloneSourceResource", i), r.CloneSourceResource)
		if err != nil {
			return err
		}
		cdocs, err := loadDocuments([]string{path}, nil)
		if err != nil {
			return fmt.Errorf("clone source: %w", err)
		}
		for _, o := range cdocs.Others {
			loader.objects = append(loader.objects, defaultNamespace(o))
		}
	}
	var trustedRoot string
	if t.root != nil {
		trustedRoot = t.root.trustedRoot
	}
	verifier, err := imageVerifier(trustedRoot)
	if err != nil {
		return err
	}
	eng, err := engine.New(engine.WithContextLoader(loader), engine.WithResourceLister(loader), verifier)
	if err != nil {
		return err
	}
	run.eng = eng
	policyPaths, err := t.suitePaths("policies", t.Policies)
	if err != nil {
		return err
	}
	pdocs, err := loadDocuments(policyPaths, nil)
	if err != nil {
		return fmt.Errorf("policies: %w", err)
	}
	for _, p := range pdocs.Policies {
		cp, err := run.eng.Compile(p)
		if err != nil {
			return err
		}
		run.policies = append(run.policies, cp)
		run.byName[p.Metadata.Name] = cp
		run.byName[p.Key()] = cp
	}
	engine.OrderForImageEvidence(run.policies)
	for _, p := range pdocs.DeletingPolicies {
		cp, err := run.eng.CompileCleanup(p)
		if err != nil {
			return err
		}
		if run.deleting == nil {
			run.deleting = map[string]*engine.CleanupPolicy{}
		}
		run.deleting[p.Metadata.Name] = cp
		run.deleting[p.Key()] = cp
	}
	run.exceptions = append(run.exceptions, pdocs.Exceptions...)
	run.celExceptions = append(run.celExceptions, pdocs.CELExceptions...)
	if len(t.Exceptions) > 0 {
		paths, err := t.suitePaths("exceptions", t.Exceptions)
		if err != nil {
			return err
		}
		edocs, err := loadDocuments(paths, nil)
		if err != nil {
			return fmt.Errorf("exceptions: %w", err)
		}
		run.exceptions = append(run.exceptions, edocs.Exceptions...)
		run.celExceptions = append(run.celExceptions, edocs.CELExceptions...)
	}
	if len(run.celExceptions) > 0 {
		for i, cp := range run.policies {
			withExc, err := run.eng.WithCELExceptions(cp, run.celExceptions)
			if err != nil {
				return fmt.Errorf("exceptions: %w", err)
			}
			run.policies[i] = withExc
			run.byName[cp.Raw.Metadata.Name] = withExc
			run.byName[cp.Raw.Key()] = withExc
		}
	}
	if t.UserInfo != "" {
		path, err := t.suitePath("userinfo", t.UserInfo)
		if err != nil {
			return err
		}
		u, err := readUserInfo(path)
		if err != nil {
			return fmt.Errorf("userinfo: %w", err)
		}
		run.user = engine.UserInfo{
			Username: u.UserInfo.Username, UID: u.UserInfo.UID, Groups: u.UserInfo.Groups,
			Roles: u.Roles, ClusterRoles: u.ClusterRoles,
		}
	}
	return nil
}

// request builds the request for one policy on one resource, with the
// values the test gives for that pair. A result's operation, when given,
// takes the place of the values' request.operation.
func (run *testRun) request(p *engine.Policy, obj map[string]any, operation string) *engine.Request {
	name := document.String(obj, "metadata", "name")
	vals := run.values.resourceValues(p.Name(), name)
	op := engine.OpCreate
	if v, ok := vals["request.operation"].(string); ok && v != "" {
		op = strings.ToUpper(v)
	}
	if operation != "" {
		op = operation
		vals["request.operation"] = operation
	}
	req := &engine.Request{
		Operation:       op,
		Object:          obj,
		JSON:            run.isPayload(obj),
		UserInfo:        run.user,
		NamespaceLabels: run.values.namespaceLabels(document.String(obj, "metadata", "namespace")),
		NamespaceObject: run.values.namespaceObject(document.String(obj, "metadata", "namespace")),
		Values:          vals,
		RuleValues:      run.values.ruleValues,
		ForEachValues:   run.values.foreachValues,
	}
	switch op {
	case engine.OpDelete:
		req.OldObject, req.Object = withValues(obj, vals, "oldObject"), nil
	case engine.OpUpdate:
		req.Object, req.OldObject = withValues(obj, vals, "object"), withValues(obj, vals, "oldObject")
	default:
		req.Object = withValues(obj, vals, "object")
	}
	if parent, sub, ok := run.values.subresourceOf(obj); ok {
		req.ParentKind, req.SubResource = parent, sub
	}
	return req
}

// withValues returns obj with the values set below request.<field>
// (`request.object.metadata.annotations."a/b": "x"`) written into a copy:
// as in the reference CLI, which puts the values into the context and
// reads the request's objects back from it, so matching sees them too.
func withValues(obj map[string]any, vals map[string]any, field string) map[string]any {
	var out map[string]any
	for name, v := range vals {
		keys := engine.SplitVariableName(name)
		if len(keys) < 3 || keys[0] != "request" || keys[1] != field {
			continue
		}
		if out == nil {
			out = document.DeepCopyMap(obj)
		}
		document.SetPathKeys(out, keys[2:], v)
	}
	if out == nil {
		return obj
	}
	return out
}

// evaluate runs every policy on every resource, as operation when one is
// given, and returns the responses by resource index.
func (run *testRun) evaluate(ctx context.Context, operation string) [][]engine.Response {
	responses := make([][]engine.Response, len(run.resources))
	for i, obj := range run.resources {
		cur := obj
		var out []engine.Response
		for _, p := range run.policies {
			req := run.request(p, cur, operation)
			resp := run.eng.Mutate(ctx, req, p, run.exceptions)
			if len(resp.Rules) > 0 {
				out = append(out, resp)
				if resp.Patched != nil {
					cur = resp.Patched
				}
			}
		}
		// Images are verified and pinned to their digests before the
		// validations, as Kyverno's mutating webhook does.
		for _, p := range run.policies {
			if p.Raw.IVPol != nil {
				// Kyverno's CLI does not pin the images of an
				// ImageValidatingPolicy to their digests.
				continue
			}
			req := run.request(p, cur, operation)
			resp := run.eng.VerifyImages(ctx, req, p, run.exceptions)
			if len(resp.Rules) > 0 {
				out = append(out, resp)
				if resp.Patched != nil {
					cur = resp.Patched
				}
			}
		}
		for _, p := range run.policies {
			req := run.request(p, cur, operation)
			if resp := run.eng.Validate(ctx, req, p, run.exceptions); len(resp.Rules) > 0 {
				out = append(out, resp)
			}
			if resp := run.eng.Generate(ctx, req, p, run.exceptions); len(resp.Rules) > 0 {
				out = append(out, resp)
			}
			if resp := run.eng.MutateExisting(ctx, req, p, run.exceptions); len(resp.Rules) > 0 {
				out = append(out, resp)
			}
		}
		responses[i] = out
	}
	return responses
}

// isPayload reports whether obj is one of the test's JSON payloads.
func (run *testRun) isPayload(obj map[string]any) bool {
	for i := range run.payloads {
		if reflect.ValueOf(run.resources[i]).UnsafePointer() == reflect.ValueOf(obj).UnsafePointer() {
			return true
		}
	}
	return false
}

// refs are the resources a result is about: those it names, or, for a
// test of JSON payloads, every payload when it names none (as the
// reference CLI checks every response then).
func (run *testRun) refs(r *testResult) []string {
	names := r.resourceNames()
	if len(names) > 0 {
		return names
	}
	if len(run.payloads) == 0 {
		// A result that names no resource is about every resource of the
		// test, as the reference CLI checks it.
		seen := map[string]bool{}
		for _, obj := range run.resources {
			ref := document.String(obj, "metadata", "name")
			if ns := document.String(obj, "metadata", "namespace"); ns != "" {
				ref = ns + "/" + ref
			}
			if ref != "" && !seen[ref] {
				seen[ref] = true
				names = append(names, ref)
			}
		}
		return names
	}
	out := make([]string, 0, len(run.payloads))
	for i := range len(run.resources) {
		if name, ok := run.payloads[i]; ok {
			out = append(out, name)
		}
	}
	return out
}

// names reports whether a result's reference names the resource at i: a
// payload by its file name, an object as resourceMatches says.
func (run *testRun) names(i int, ref, namespace string) bool {
	if name, ok := run.payloads[i]; ok {
		return ref == name
	}
	return resourceMatches(ref, namespace, run.resources[i])
}

// resourceMatches reports whether a result's resource reference names obj.
func resourceMatches(ref, namespace string, obj map[string]any) bool {
	name := document.String(obj, "metadata", "name")
	ns := document.String(obj, "metadata", "namespace")
	if namespace != "" && namespace != ns {
		return false
	}
	if ref == name {
		return true
	}
	if i := strings.IndexByte(ref, '/'); i >= 0 {
		return ref[:i] == ns && ref[i+1:] == name
	}
	return false
}

func ruleNameMatches(want, got string) bool {
	return got == want || got == "autogen-"+want || got == "autogen-cronjob-"+want
}
