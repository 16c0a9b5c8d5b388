package cli

// How `verdict test` judges each expected result against what the
// policies did: the outcome of a resource, a deletion or a mutated or
// generated target, and the difference printed when they disagree.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

func (run *testRun) judge(r *testResult) []assertion {
	var out []assertion
	for _, ref := range run.refs(r) {
		a := assertion{Test: run.t.path, Policy: r.Policy, Rule: r.Rule, Resource: ref, Expected: r.expected()}
		p := run.byName[r.Policy]
		if dp := run.deleting[r.Policy]; p == nil && dp != nil {
			a.Outcome, a.Actual, a.Reason, a.Message = run.judgeDeletion(r, dp, ref, &a.Rows)
			out = append(out, a)
			continue
		}
		if p == nil {
			a.Outcome, a.Reason = "failed", "policy not found in the test's policies"
			out = append(out, a)
			continue
		}
		a.Outcome, a.Actual, a.Reason, a.Message = run.judgeResource(r, p, ref, &a.Rows)
		out = append(out, a)
	}
	return out
}

// judgeResource judges one resource of a result entry. rows counts the
// rule results looked at, which is how the reference CLI counts.
func (run *testRun) judgeResource(r *testResult, p *engine.Policy, ref string, rows *int) (outcome, actual, reason, message string) {
	*rows = 1
	// missing: a rule result was left out because the patchedResources
	// file has no document for the patched resource.
	found, resourceFound, policyApplied, missing := false, false, false, false
	for i := range run.resources {
		if !run.names(i, ref, r.Namespace) {
			continue
		}
		resourceFound = true
		responses := run.responses
		if r.Operation != "" {
			responses = run.byOperation[r.Operation]
		}
		for _, resp := range responses[i] {
			if resp.Policy != p {
				continue
			}
			policyApplied = true
			for _, rr := range resp.Rules {
				// A GeneratingPolicy's result is about its one rule
				// (named after it, or "exception"), whatever the test
				// names, as the reference CLI reads it; so is a
				// Kubernetes admission policy's when the test names no
				// rule.
				if !ruleNameMatches(r.Rule, rr.Name) && p.Raw.GPol == nil && (p.Raw.Native == nil || r.Rule != "") {
					continue
				}
				if rr.Type == engine.TypeMutation && rr.Background {
					// A mutate-existing rule as admission sees it:
					// MutateExisting's response holds what it did.
					continue
				}
				var why string
				pr := r.patched()
				if pr != "" && rr.Type == engine.TypeMutation && !rr.Unsupported {
					var absent bool
					patched := resp.Patched
					// A mutate-existing rule whose trigger is also its
					// target (a MutatingPolicy on the kind it is
					// triggered by): the resource as the rule left it.
					for _, t := range rr.Targets {
						if t.Status == engine.StatusPass && sameObject(t.Resource, run.resources[i]) {
							patched = t.Patched
						}
					}
					why, absent = compareWithFile(run.t.joined(pr), patched)
					switch {
					case absent && r.FailOnMissingResources:
						*rows = 1
						return "failed", "", why + " (failOnMissingResources is set)", rr.Message
					case absent:
						// As the reference CLI does, the rule result is
						// left out, neither passed nor failed.
						missing = true
						continue
					}
				}
				if found {
					*rows++
				}
				found = true
				if rr.Unsupported {
					return "unsupported", "", rr.Message, rr.Message
				}
				got := string(rr.Status)
				if rr.Status == engine.StatusFail && !p.Scored {
					got = string(engine.StatusWarn)
				}
				if pr != "" && rr.Type == engine.TypeMutation {
					if r.expected() == string(engine.StatusFail) {
						// For a mutation, fail asserts that the patched
						// resource is not the one in the file.
						if why == "" && got != string(engine.StatusFail) {
							return "failed", got, "want the patched resource to differ from " + pr + ", but it is equal", rr.Message
						}
						actual, message = string(engine.StatusFail), rr.Message
						continue
					}
					if why != "" {
						return "failed", got, "patched resource differs: " + why, rr.Message
					}
				}
				if got != r.expected() {
					return "failed", got, fmt.Sprintf("want %s, got %s (%s)", r.expected(), got, rr.Message), rr.Message
				}
				if gr := r.GeneratedResource; gr != "" && len(r.GeneratedResources) == 0 {
					if why := compareGenerated(run.t.joined(gr), rr.Generated); why != "" {
						return "failed", got, "generated resource differs: " + why, rr.Message
					}
				}
				if len(r.GeneratedResources) > 0 {
					if why := run.compareGeneratedSet(r.GeneratedResources, rr.Generated); why != "" {
						return "failed", got, "generated resources differ: " + why, rr.Message
					}
				}
				actual, message = got, rr.Message
			}
		}
	}
	if !resourceFound {
		for _, obj := range run.targets {
			if resourceMatches(ref, r.Namespace, obj) {
				return run.judgeTarget(r, p, obj, rows)
			}
		}
		return "failed", "", "resource not found in the test's resources", ""
	}
	if !found && missing {
		return "skipped", "", fmt.Sprintf("no document for the resource in %s (set failOnMissingResources to make this a failure)", r.patched()), ""
	}
	if !found {
		// The named rule did not apply to the resource. Like the
		// reference CLI, count that as an exclusion (a skip) when the
		// policy itself was evaluated on the resource; otherwise only an
		// expected skip holds.
		if r.expected() == string(engine.StatusSkip) || policyApplied || (resourceFound && keepsEmptyResponse(p)) || len(r.resourceNames()) == 0 {
			return "passed", "skip", "", "rule not applied to the resource (excluded)"
		}
		return "failed", "", fmt.Sprintf("want %s, but no rule of the policy applied to the resource", r.expected()), ""
	}
	return "passed", actual, "", message
}

// decideDeletions runs every DeletingPolicy of the test (a tick of it)
// on every resource and JSON payload, with the namespace labels the
// values give.
func (run *testRun) decideDeletions(ctx context.Context) error {
	if len(run.deleting) == 0 {
		return nil
	}
	run.deletions = map[*engine.CleanupPolicy][]deletion{}
	for _, cp := range run.deleting {
		if run.deletions[cp] != nil {
			continue // the same policy by name and by key
		}
		tick, err := run.eng.StartCleanup(ctx, cp)
		if err != nil {
			return err
		}
		out := make([]deletion, len(run.resources))
		for i, obj := range run.resources {
			ns := document.String(obj, "metadata", "namespace")
			out[i].d, out[i].err = tick.Decide(ctx, obj, run.values.namespaceLabels(ns))
		}
		run.deletions[cp] = out
	}
	return nil
}

// judgeDeletion judges a result about a DeletingPolicy as the reference
// CLI words them: pass when the policy would delete the resource (its
// conditions all hold), fail when it is selected but kept, error when a
// condition could not be evaluated. A resource matchConstraints (or a
// namespaced policy's namespace) leave out has no result: only an
// expected skip holds for it.
func (run *testRun) judgeDeletion(r *testResult, cp *engine.CleanupPolicy, ref string, rows *int) (outcome, actual, reason, message string) {
	*rows = 1
	found, selected := false, false
	for i := range run.resources {
		if !run.names(i, ref, r.Namespace) {
			continue
		}
		if found {
			*rows++
		}
		found = true
		dl := run.deletions[cp][i]
		var got string
		switch {
		case dl.err != nil:
			got, message = string(engine.StatusError), dl.err.Error()
		case dl.d.Delete:
			got, message = string(engine.StatusPass), "resource matched"
		case dl.d.Reason == engine.CleanupConditionsNotMet:
			got, message = string(engine.StatusFail), dl.d.Message
		default:
			continue
		}
		selected = true
		if got != r.expected() {
			return "failed", got, fmt.Sprintf("want %s, got %s (%s)", r.expected(), got, message), message
		}
		actual = got
	}
	switch {
	case !found:
		return "failed", "", "resource not found in the test's resources", ""
	case selected:
		return "passed", actual, "", message
	case r.expected() == string(engine.StatusSkip):
		return "passed", "skip", "", "the policy does not select the resource"
	}
	return "failed", "", fmt.Sprintf("want %s, but the policy does not select the resource (matchConstraints or its namespace)", r.expected()), ""
}

// judgeTarget judges a result about one of the test's targetResources:
// what the policy's mutate-existing rule did to it, triggered by any of
// the test's resources, and its patched state against patchedResources.
func (run *testRun) judgeTarget(r *testResult, p *engine.Policy, target map[string]any, rows *int) (outcome, actual, reason, message string) {
	responses := run.responses
	if r.Operation != "" {
		responses = run.byOperation[r.Operation]
	}
	var found *engine.TargetResponse
	for _, byResource := range responses {
		for _, resp := range byResource {
			if resp.Policy != p {
				continue
			}
			for _, rr := range resp.Rules {
				if !ruleNameMatches(r.Rule, rr.Name) {
					continue
				}
				for i := range rr.Targets {
					if sameObject(rr.Targets[i].Resource, target) {
						found = &rr.Targets[i]
					}
				}
			}
		}
	}
	if found == nil {
		if r.expected() == string(engine.StatusSkip) {
			return "passed", "skip", "", "rule not applied to the target"
		}
		return "failed", "", fmt.Sprintf("want %s, but the rule did not reach the target", r.expected()), ""
	}
	got := string(found.Status)
	if pr := r.patched(); pr != "" && found.Status == engine.StatusPass {
		why, absent := compareWithFile(run.t.joined(pr), found.Patched)
		switch {
		case absent && r.FailOnMissingResources:
			return "failed", got, why + " (failOnMissingResources is set)", found.Message
		case absent:
			return "skipped", "", fmt.Sprintf("no document for the target in %s (set failOnMissingResources to make this a failure)", pr), ""
		case why != "" && r.expected() != string(engine.StatusFail):
			return "failed", got, "patched target differs: " + why, found.Message
		case why == "" && r.expected() == string(engine.StatusFail):
			return "failed", got, "want the patched target to differ from " + pr + ", but it is equal", found.Message
		case why != "":
			return "passed", string(engine.StatusFail), "", found.Message
		}
	}
	if got != r.expected() {
		return "failed", got, fmt.Sprintf("want %s, got %s (%s)", r.expected(), got, found.Message), found.Message
	}
	return "passed", got, "", found.Message
}

// compareWithFile compares a resource with the document of the same
// apiVersion, kind, namespace and name in a file. It returns the first
// difference, or absent when the file holds no such document.
func compareWithFile(path string, got map[string]any) (why string, absent bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error(), false
	}
	docs, err := document.DecodeAll(data)
	if err != nil {
		return err.Error(), false
	}
	// The expected file is read as the resources are: namespaced objects
	// without a namespace are in "default".
	for _, d := range docs {
		if want := defaultNamespace(d.Object); sameObject(want, got) &&
			document.String(want, "apiVersion") == document.String(got, "apiVersion") {
			return diff(tidy(want), tidy(got), ""), false
		}
	}
	return fmt.Sprintf("no document for %s %s/%s in %s", document.String(got, "kind"),
		document.String(got, "metadata", "namespace"), document.String(got, "metadata", "name"), path), true
}

func compareGenerated(path string, generated []map[string]any) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	docs, err := document.DecodeAll(data)
	if err != nil {
		return err.Error()
	}
	if len(docs) == 0 {
		return "empty file " + path
	}
	want := docs[0].Object
	var why string
	for _, g := range generated {
		if why = diff(tidy(want), tidy(g), ""); why == "" {
			return ""
		}
	}
	if len(generated) == 0 {
		return "nothing generated"
	}
	return why
}

// compareGeneratedSet says why what a rule generated is not what the
// files hold: each generated resource must equal one document of them,
// as the reference CLI judges generatedResources; "" when all do.
func (run *testRun) compareGeneratedSet(files []string, generated []map[string]any) string {
	var want []any
	for _, f := range files {
		path := run.t.joined(f)
		data, err := os.ReadFile(path)
		if err != nil {
			return err.Error()
		}
		docs, err := document.DecodeAll(data)
		if err != nil {
			return fmt.Sprintf("%s: %v", path, err)
		}
		for _, d := range docs {
			want = append(want, tidy(d.Object))
		}
	}
	if len(generated) == 0 {
		return "nothing generated"
	}
	for _, g := range generated {
		var why string
		for _, w := range want {
			if why = diff(w, tidy(g), ""); why == "" {
				break
			}
		}
		if why != "" {
			return fmt.Sprintf("%s %s matches none of %v (last difference: %s)", document.String(g, "kind"), document.String(g, "metadata", "name"), files, why)
		}
	}
	return ""
}

func sameObject(a, b map[string]any) bool {
	return document.String(a, "kind") == document.String(b, "kind") &&
		document.String(a, "metadata", "name") == document.String(b, "metadata", "name") &&
		document.String(a, "metadata", "namespace") == document.String(b, "metadata", "namespace")
}

// tidy drops nulls, empty objects and empty lists, which serialisers and
// the reference's comparison treat as absent.
func tidy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			te := tidy(e)
			if te == nil {
				continue
			}
			if m, ok := te.(map[string]any); ok && len(m) == 0 {
				continue
			}
			if l, ok := te.([]any); ok && len(l) == 0 {
				continue
			}
			out[k] = te
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = tidy(e)
		}
		return out
	}
	return v
}

// diff returns the first difference between want and got, or "".
func diff(want, got any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: want an object, got %s", orSlash(path), short(got))
		}
		keys := make([]string, 0, len(w)+len(g))
		for k := range w {
			keys = append(keys, k)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			wv, wok := w[k]
			gv, gok := g[k]
			switch {
			case !wok:
				return fmt.Sprintf("%s/%s: unexpected %s", path, k, short(gv))
			case !gok:
				return fmt.Sprintf("%s/%s: missing, want %s", path, k, short(wv))
			}
			if d := diff(wv, gv, path+"/"+k); d != "" {
				return d
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok {
			return fmt.Sprintf("%s: want a list, got %s", orSlash(path), short(got))
		}
		if len(w) != len(g) {
			return fmt.Sprintf("%s: want %d items, got %d", orSlash(path), len(w), len(g))
		}
		for i := range w {
			if d := diff(w[i], g[i], fmt.Sprintf("%s/%d", path, i)); d != "" {
				return d
			}
		}
		return ""
	default:
		if !document.Equal(want, got) {
			return fmt.Sprintf("%s: want %s, got %s", orSlash(path), short(want), short(got))
		}
		return ""
	}
}

func orSlash(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

func short(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(b)
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// keepsEmptyResponse reports whether the reference CLI keeps a CEL
// policy's response on a resource it did not apply to, which its test
// command then counts as an exclusion (a pass): always for an
// ImageValidatingPolicy; for a ValidatingPolicy or a MutatingPolicy
// unless its matchConstraints are one resource rule without names,
// selectors or excludes (kyverno 111e07b, cmd/cli processor's
// hasSelector).
func keepsEmptyResponse(p *engine.Policy) bool {
	var mc *policy.MatchConstraints
	switch {
	case p.Raw.IVPol != nil:
		return true
	case p.Raw.VPol != nil:
		mc = p.Raw.VPol.MatchConstraints
	case p.Raw.MPol != nil:
		mc = p.Raw.MPol.MatchConstraints
	default:
		return false
	}
	if mc == nil {
		return true
	}
	selects := func(s *policy.LabelSelector) bool {
		return s != nil && (len(s.MatchLabels) > 0 || len(s.MatchExpressions) > 0)
	}
	return selects(mc.NamespaceSelector) || selects(mc.ObjectSelector) || len(mc.ExcludeResourceRules) > 0 ||
		len(mc.ResourceRules) != 1 || len(mc.ResourceRules[0].ResourceNames) > 0
}
