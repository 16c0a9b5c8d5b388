// Package patch applies Kyverno mutate patches to resources: strategic
// merge overlays with anchors (patchStrategicMerge) and RFC 6902 JSON
// patches (patchesJson6902).
//
// Documents are JSON-compatible values: map[string]any, []any, string,
// float64, bool and nil. Inputs are never modified; results share no
// memory with them. Variables must already be substituted.
//
// Outcome, as Kyverno reports a mutate rule:
//   - an error (wrapping ErrInvalidPatch or ErrApply): rule status "error";
//   - Result.Skipped: rule status "skip". Kyverno skips a rule whenever the
//     patch leaves the resource unchanged, which includes conditional or
//     global anchors that do not hold; SkipReason tells which;
//   - otherwise Result.Changed is true: rule status "pass".
package patch

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"sigs.k8s.io/yaml"
)

var (
	// ErrInvalidPatch reports a patch that cannot be read: malformed JSON
	// or YAML, an overlay that is not a map, an unknown "$patch" directive.
	ErrInvalidPatch = errors.New("invalid patch")
	// ErrApply reports a patch that does not fit the resource: a JSON patch
	// path that does not exist or a failed "test", an overlay value whose
	// kind (map, list, scalar) differs from the resource's, an overlay
	// deleting the whole resource.
	ErrApply = errors.New("patch does not apply")
)

// Skip reasons reported in Result.SkipReason.
const (
	// ReasonNoChange: the patch left the resource as it was.
	ReasonNoChange = "no patches applied"
)

// Result is the outcome of applying a patch.
type Result struct {
	// Object is the patched resource (a copy of the input when skipped).
	Object map[string]any
	// Changed reports whether Object differs from the input.
	Changed bool
	// Skipped reports that the rule is to be reported as skipped: the
	// patch changed nothing, possibly because its anchors did not hold.
	Skipped bool
	// SkipReason explains a skip: ReasonNoChange, or the anchor mismatch
	// ("conditional anchor mismatch: ..." / "global anchor mismatch: ...").
	SkipReason string
}

// StrategicMerge applies a Kyverno patchStrategicMerge overlay, which may
// contain anchors, to resource.
//
// Anchors: "+(key)" sets key only where the resource lacks it. "(key)"
// and "<(key)" are conditions on the resource value (Kyverno pattern
// syntax: wildcards, operators, ranges, quantities, durations, nested
// "=()", "X()" and "^()" anchors). A failed "(key)" in a map, or a
// "<(key)" that holds nowhere, drops the whole overlay: the result is
// Skipped with the mismatch as SkipReason. On list elements "(key)"
// selects the resource elements (bound by their "name") to patch.
//
// Merge, as kustomize kyaml does it for Kyverno: maps merge recursively
// and null deletes a key; lists of built-in kinds whose patch strategy is
// "merge" (containers, env, volumes, ports...) merge element-wise by merge
// key, the overlay's elements first and then the resource's others, lists
// of scalars with that strategy merge as sets; all other lists, including
// every list of custom resources, are replaced. "$patch: delete|replace|
// merge" directives are honoured on maps and, as a lone list element, on
// merged lists. The walk also drops null fields of the resource, which
// Kyverno does too and which can change a resource even when the overlay
// was dropped.
func StrategicMerge(resource map[string]any, overlay any) (Result, error) {
	return StrategicMergeMetered(resource, overlay, nil)
}

// StrategicMergeMetered is StrategicMerge with its work charged to m (nil
// for none; see Meter): checking the overlay's conditional and global
// anchors against the resource, and merging, each value of the resource
// (nodeWork). Once m refuses, it returns m's error, wrapped, and no
// result.
func StrategicMergeMetered(resource map[string]any, overlay any, meter Meter) (Result, error) {
	om, ok := overlay.(map[string]any)
	if !ok {
		return Result{}, fmt.Errorf("%w: overlay must be a map, got %T", ErrInvalidPatch, overlay)
	}
	patchMap := deepCopy(om).(map[string]any)
	skipReason := ""
	b := &budget{m: meter}
	err := preprocessOverlay(patchMap, resource, b)
	if b.flush() {
		// The meter refused: what the anchors said does not count.
		err = b.err
	}
	if err != nil {
		s, isSkip := asSkip(err)
		if !isSkip {
			return Result{}, fmt.Errorf("preprocess overlay: %w", err)
		}
		skipReason = s.Error()
		patchMap = map[string]any{}
	}

	m := &merger{b: b}
	merged, keep, err := m.mergeValue(slot{resource, true}, slot{patchMap, true}, nil)
	if err != nil {
		return Result{}, err
	}
	if b.flush() {
		return Result{}, b.err
	}
	out, _ := merged.(map[string]any)
	if !keep || out == nil {
		return Result{}, fmt.Errorf("%w: the overlay deletes the whole resource", ErrApply)
	}
	return newResult(resource, deepCopy(out).(map[string]any), skipReason), nil
}

// JSON6902 applies RFC 6902 operations, given as JSON or YAML text as in
// patchesJson6902, to resource. Like Kyverno it supports negative list
// indices, creates missing parents on "add", and ignores "remove" of a path
// that does not exist; other missing paths and failed "test" operations
// are errors (ErrApply).
func JSON6902(resource map[string]any, patch string) (Result, error) {
	return JSON6902Metered(resource, patch, nil)
}

// jsonByteWork is the work, in the units of Meter, of one byte of the
// resource's JSON in JSON6902: encoding it, applying the operations to it
// and decoding the result take about 200 ns a byte (33 ms for a Pod of
// 5,000 containers, 164 KB).
const jsonByteWork = 256

// JSON6902Metered is JSON6902 with its work charged to m (nil for none;
// see Meter), by the size of the resource's JSON before the operations
// are applied: once m refuses, it returns m's error and no result.
func JSON6902Metered(resource map[string]any, patch string, meter Meter) (Result, error) {
	raw := []byte(patch)
	if strings.TrimSpace(patch) == "" {
		return Result{}, fmt.Errorf("%w: empty JSON patch", ErrInvalidPatch)
	}
	if patch[0] != '[' {
		converted, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return Result{}, fmt.Errorf("%w: convert YAML to JSON: %w", ErrInvalidPatch, err)
		}
		raw = converted
	}
	ops, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		return Result{}, fmt.Errorf("%w: decode JSON patch: %w", ErrInvalidPatch, err)
	}
	doc, err := json.Marshal(resource)
	if err != nil {
		return Result{}, fmt.Errorf("%w: encode resource: %w", ErrApply, err)
	}
	if meter != nil {
		if err := meter.ChargeWork(int64(len(doc)) * jsonByteWork); err != nil {
			return Result{}, err
		}
	}
	opts := jsonpatch.NewApplyOptions()
	opts.SupportNegativeIndices = true
	opts.AllowMissingPathOnRemove = true
	opts.EnsurePathExistsOnAdd = true
	patched, err := ops.ApplyWithOptions(doc, opts)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrApply, err)
	}
	var out map[string]any
	if err := json.Unmarshal(patched, &out); err != nil {
		return Result{}, fmt.Errorf("%w: decode patched resource: %w", ErrApply, err)
	}
	if out == nil {
		out = map[string]any{}
	}
	return newResult(resource, out, ""), nil
}

func newResult(before, after map[string]any, skipReason string) Result {
	r := Result{Object: after, Changed: !reflect.DeepEqual(before, after)}
	if !r.Changed {
		r.Skipped = true
		r.SkipReason = skipReason
		if r.SkipReason == "" {
			r.SkipReason = ReasonNoChange
		}
	}
	return r
}
