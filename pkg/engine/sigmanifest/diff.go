package sigmanifest

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
)

// Difference is a field where the resource differs from its signed
// manifest, as k8s-manifest-sigstore reports it: the dotted key (a list's
// elements by index), the manifest's value (before) and the resource's
// (after); nil where one has no such field.
type Difference struct {
	Key    string `json:"key"`
	Before any    `json:"before"`
	After  any    `json:"after"`
}

// String is the differences as JSON, for messages.
func String(diffs []Difference) string {
	b, err := json.Marshal(map[string]any{"items": diffs})
	if err != nil {
		return ""
	}
	return string(b)
}

// Find is the manifest of obj among manifests: the one of its API group,
// kind and name (the one of its namespace too when several are), or nil.
func Find(manifests []map[string]any, obj map[string]any) map[string]any {
	group := func(m map[string]any) string {
		g, _, found := strings.Cut(document.String(m, "apiVersion"), "/")
		if !found {
			return ""
		}
		return g
	}
	kind, name, ns, g := document.String(obj, "kind"), document.String(obj, "metadata", "name"), document.String(obj, "metadata", "namespace"), group(obj)
	var matched []map[string]any
	for _, m := range manifests {
		if document.String(m, "kind") == kind && document.String(m, "metadata", "name") == name && group(m) == g {
			matched = append(matched, m)
		}
	}
	if len(matched) == 0 {
		return nil
	}
	for _, m := range matched {
		if document.String(m, "metadata", "namespace") == ns {
			return m
		}
	}
	return matched[0]
}

// Diff lists the fields where obj differs from manifest, by key, but for
// those ignored (patterns over dotted keys, "*" matching any run of
// characters; a pattern ignores every key it is a prefix of) and a
// namespace the manifest does not set. A field null on one side and
// absent on the other is no difference; a list's elements are compared by
// index, so a list reordered differs.
func Diff(manifest, obj map[string]any, ignored []string) []Difference {
	before, after := ravel(manifest), ravel(obj)
	var diffs []Difference
	for k, b := range before {
		a, ok := after[k]
		if !ok {
			if b != nil { // null and absent are one
				diffs = append(diffs, Difference{Key: k, Before: b})
			}
		} else if !sameValue(a, b) {
			diffs = append(diffs, Difference{Key: k, Before: b, After: a})
		}
	}
	for k, a := range after {
		if _, ok := before[k]; !ok && a != nil {
			diffs = append(diffs, Difference{Key: k, After: a})
		}
	}
	out := diffs[:0]
	for _, d := range diffs {
		if d.Key == "metadata.namespace" && d.Before == nil {
			continue
		}
		if ignoredKey(d.Key, ignored) {
			continue
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func ignoredKey(key string, patterns []string) bool {
	for _, p := range patterns {
		if wildcard.Match(p+"*", key) {
			return true
		}
	}
	return false
}

// ravel flattens v into its leaves by dotted key; empty maps and lists
// have none.
func ravel(v any) map[string]any {
	out := map[string]any{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		join := func(k string) string {
			if prefix == "" {
				return k
			}
			return prefix + "." + k
		}
		switch t := v.(type) {
		case map[string]any:
			for k, e := range t {
				walk(join(k), e)
			}
		case []any:
			for i, e := range t {
				walk(join(strconv.Itoa(i)), e)
			}
		default:
			out[prefix] = v
		}
	}
	walk("", v)
	return out
}

// sameValue compares two leaves, numbers by value.
func sameValue(a, b any) bool {
	fa, aok := document.Number(a)
	fb, bok := document.Number(b)
	if aok && bok {
		return fa == fb
	}
	return document.Equal(a, b)
}
