package patch

import (
	"fmt"
	"strconv"
	"strings"
)

// The merge below follows kustomize kyaml's merge2 walk, which Kyverno
// applies with new list items placed before existing ones:
//
//   - maps merge key by key; a null in the patch deletes the key;
//   - "$patch: delete" on a map deletes it, "$patch: replace" replaces it,
//     "$patch: merge" is the default; other values are an error; in an
//     associative list an element holding only "$patch" applies the
//     directive to the whole list;
//   - associative lists (see listSchema) merge element-wise by key: the
//     result lists the patch's elements in patch order, then the resource
//     elements the patch did not name; elements that merge to nothing
//     (deleted or empty) are dropped; lists of scalars merge as sets;
//   - other lists, and scalars, are replaced by the patch value;
//   - a map, list or scalar meeting a different kind is an error.
//
// The walk visits the whole resource, not only what the patch touches, and
// like kyaml it drops null-valued keys it meets there, folds duplicate keys
// of associative lists, and drops their empty elements.

// slot is one source value of the walk: absent, or present (maybe null).
type slot struct {
	v  any
	ok bool
}

func (s slot) null() bool { return !s.ok || s.v == nil }

type nodeKind int

const (
	kindNone nodeKind = iota
	kindMap
	kindList
	kindScalar
)

func kindOf(v any) nodeKind {
	switch v.(type) {
	case nil:
		return kindNone
	case map[string]any:
		return kindMap
	case []any:
		return kindList
	default:
		return kindScalar
	}
}

func (k nodeKind) String() string {
	switch k {
	case kindMap:
		return "map"
	case kindList:
		return "list"
	case kindScalar:
		return "scalar"
	}
	return "null"
}

// merger walks a destination (the resource) and an origin (the patch).
type merger struct {
	path []string
	// b is charged with the pairing of list elements the index cannot
	// pair (see mergeKeyed); nil charges nothing.
	b *budget
}

// mergeValue merges origin into dest at the current path. keep is false
// when the result is to be removed from its parent. Each value it visits
// is charged to the merger's budget (nodeWork).
func (m *merger) mergeValue(dest, origin slot, sch *listSchema) (any, bool, error) {
	if m.b.work(nodeWork) {
		return nil, false, m.b.err
	}
	if sch == nil {
		if sch = schemaForObject(dest.v); sch == nil {
			sch = schemaForObject(origin.v)
		}
	}
	kind := kindNone
	if !dest.null() {
		kind = kindOf(dest.v)
	} else if !origin.null() {
		kind = kindOf(origin.v)
	}
	if !origin.null() && kindOf(origin.v) != kind {
		return nil, false, fmt.Errorf("%w: patch has a %s where the resource has a %s at %s",
			ErrApply, kindOf(origin.v), kind, m.where())
	}
	switch kind {
	case kindMap:
		return m.mergeMap(dest, origin, sch)
	case kindList:
		return m.mergeList(dest, origin, sch)
	case kindScalar:
		if origin.ok {
			return origin.v, origin.v != nil, nil
		}
		return dest.v, true, nil
	default:
		return nil, false, nil
	}
}

const directiveKey = "$patch"

// directive extracts a "$patch" directive from a patch map, returning it
// and the map without it. Unknown directives are kept in the map and
// reported with an empty directive and ok false.
func directive(m map[string]any) (string, map[string]any, bool) {
	raw, present := m[directiveKey]
	if !present {
		return "merge", m, true
	}
	d, _ := raw.(string)
	switch d {
	case "delete", "replace", "merge":
		out := shallowCopy(m)
		delete(out, directiveKey)
		return d, out, true
	}
	return "", m, false
}

func (m *merger) mergeMap(dest, origin slot, sch *listSchema) (any, bool, error) {
	var base map[string]any
	var patch map[string]any
	if om, ok := origin.v.(map[string]any); ok {
		patch = om
	}
	switch {
	case dest.null():
		d, stripped, _ := directive(patch)
		if d == "delete" {
			return nil, false, nil
		}
		patch = stripped
		base = patch
	case origin.ok && origin.v == nil:
		return nil, false, nil
	case patch != nil:
		d, stripped, ok := directive(patch)
		if !ok {
			return nil, false, fmt.Errorf("%w: unknown %s directive %v at %s", ErrInvalidPatch, directiveKey, patch[directiveKey], m.where())
		}
		patch = stripped
		switch d {
		case "delete":
			return nil, false, nil
		case "replace":
			base = patch
		default:
			base = dest.v.(map[string]any)
		}
	default:
		base = dest.v.(map[string]any)
	}

	keys := make(map[string]struct{}, len(base)+len(patch))
	for k := range base {
		keys[k] = struct{}{}
	}
	for k := range patch {
		keys[k] = struct{}{}
	}
	out := make(map[string]any, len(keys))
	for _, k := range sortedKeys(toAnyMap(keys)) {
		bv, bok := base[k]
		pv, pok := patch[k]
		m.path = append(m.path, k)
		v, keep, err := m.mergeValue(slot{bv, bok}, slot{pv, pok}, sch.field(k))
		m.path = m.path[:len(m.path)-1]
		if err != nil {
			return nil, false, err
		}
		if keep {
			out[k] = v
		}
	}
	return out, true, nil
}

// listDirective finds a list-level directive: an element that is a map
// holding only "$patch". It returns the directive ("merge" when there is
// none) and the list without such elements.
func listDirective(l []any) (string, []any, error) {
	var d string
	found := false
	for _, item := range l {
		if im, ok := item.(map[string]any); ok {
			if v, ok := im[directiveKey]; ok {
				if len(im) > 1 {
					return "merge", l, nil
				}
				d, _ = v.(string)
				found = true
				break
			}
		}
	}
	if !found {
		return "merge", l, nil
	}
	switch d {
	case "delete", "replace", "merge":
	default:
		return "", l, fmt.Errorf("unknown %s directive %q", directiveKey, d)
	}
	out := make([]any, 0, len(l))
	for _, item := range l {
		if im, ok := item.(map[string]any); ok && len(im) == 1 && im[directiveKey] == d {
			continue
		}
		out = append(out, item)
	}
	return d, out, nil
}

func toAnyMap(s map[string]struct{}) map[string]any {
	out := make(map[string]any, len(s))
	for k := range s {
		out[k] = nil
	}
	return out
}

func (m *merger) mergeList(dest, origin slot, sch *listSchema) (any, bool, error) {
	if !sch.associative() {
		if origin.ok {
			return origin.v, origin.v != nil, nil
		}
		return dest.v, true, nil
	}
	var base, patch []any
	if ol, ok := origin.v.([]any); ok {
		patch = ol
	}
	switch {
	case dest.null():
		base = patch
	case origin.ok && origin.v == nil:
		return nil, false, nil
	case patch != nil:
		d, stripped, err := listDirective(patch)
		if err != nil {
			return nil, false, fmt.Errorf("%w: %w at %s", ErrInvalidPatch, err, m.where())
		}
		patch = stripped
		switch d {
		case "delete":
			return nil, false, nil
		case "replace":
			base = patch
		default:
			base = dest.v.([]any)
		}
	default:
		base = dest.v.([]any)
	}
	if len(sch.keys) == 0 {
		return m.mergeScalarSet(base, patch, sch.elem())
	}
	return m.mergeKeyed(base, patch, sch.keys, sch.elem())
}

// mergeScalarSet merges lists of scalars (e.g. finalizers) as sets: patch
// values first, then the resource's other values. Each value is paired
// with the first of its text in either list, through an index.
func (m *merger) mergeScalarSet(base, patch []any, elem *listSchema) (any, bool, error) {
	out := make([]any, 0, len(base)+len(patch))
	baseIndex, patchIndex := newFirstIndex(len(base)), newFirstIndex(len(patch))
	for _, item := range base {
		t, _ := scalarText(item)
		baseIndex.add(t, item)
	}
	for _, item := range patch {
		t, _ := scalarText(item)
		patchIndex.add(t, item)
	}
	seen := make(map[string]bool)
	for _, src := range [][]any{patch, base} {
		for _, item := range src {
			id, _ := scalarText(item)
			if seen[id] {
				continue
			}
			seen[id] = true
			v, keep, err := m.mergeValue(baseIndex.find(id), patchIndex.find(id), elem)
			if err != nil {
				return nil, false, err
			}
			if keep {
				out = append(out, v)
			}
		}
	}
	return out, true, nil
}

// firstIndex finds the first element of a list with a given id: by a
// scan while the list is short, through a map once it is not.
type firstIndex struct {
	ids   []string
	items []any
	byID  map[string]int
}

// indexScan is the length up to which a firstIndex scans.
const indexScan = 8

func newFirstIndex(n int) *firstIndex {
	x := &firstIndex{ids: make([]string, 0, n), items: make([]any, 0, n)}
	if n > indexScan {
		x.byID = make(map[string]int, n)
	}
	return x
}

// add appends an element; the first with an id is the one found.
func (x *firstIndex) add(id string, item any) {
	if x.byID != nil {
		if _, dup := x.byID[id]; !dup {
			x.byID[id] = len(x.items)
		}
	}
	x.ids = append(x.ids, id)
	x.items = append(x.items, item)
}

// find returns the first element added with id, or no slot.
func (x *firstIndex) find(id string) slot {
	if x.byID != nil {
		if i, ok := x.byID[id]; ok {
			return slot{x.items[i], true}
		}
		return slot{}
	}
	for i, known := range x.ids {
		if known == id {
			return slot{x.items[i], true}
		}
	}
	return slot{}
}

// mergeKeyed merges lists of maps by their merge keys. Patch elements come
// first in patch order, then unnamed resource elements. Patch elements
// without any key cannot be placed and are dropped; resource elements
// without one are kept at the end.
//
// When every element naming itself carries all the keys, elements are
// the same exactly when their key values are, and are paired through an
// index (mergeComplete); otherwise two elements are the same when they
// agree on the keys both carry, which pairs each with every other: that
// work is charged to the merger's budget.
func (m *merger) mergeKeyed(base, patch []any, keys []string, elem *listSchema) (any, bool, error) {
	if out, ok, err := m.mergeComplete(base, patch, keys, elem); ok {
		return out, true, err
	}
	return m.mergeJoined(base, patch, keys, elem)
}

// mergeJoined is mergeKeyed for any lists: each element is compared with
// those before it, charged to the merger's budget.
func (m *merger) mergeJoined(base, patch []any, keys []string, elem *listSchema) (any, bool, error) {
	var ids []ident
	add := func(id ident) bool {
		if m.b.work(int64(len(ids)+1) * joinWork) {
			return false
		}
		for i, known := range ids {
			if merged, ok := known.join(id); ok {
				ids[i] = merged
				return true
			}
		}
		ids = append(ids, id)
		return true
	}
	var unkeyed []any
	for _, item := range patch {
		if id, ok := keyValues(item, keys); ok && !add(id) {
			return nil, false, m.b.err
		}
	}
	for _, item := range base {
		if id, ok := keyValues(item, keys); !ok {
			unkeyed = append(unkeyed, item)
		} else if !add(id) {
			return nil, false, m.b.err
		}
	}

	out := make([]any, 0, len(ids)+len(unkeyed))
	for _, id := range ids {
		if m.b.work(int64(len(base)+len(patch)+1) * joinWork) {
			return nil, false, m.b.err
		}
		b := findKeyed(base, keys, id)
		p := findKeyed(patch, keys, id)
		m.path = append(m.path, id.String())
		v, keep, err := m.mergeValue(b, p, elem)
		m.path = m.path[:len(m.path)-1]
		if err != nil {
			return nil, false, err
		}
		if !keep {
			continue
		}
		if vm, ok := v.(map[string]any); ok {
			if len(vm) == 0 {
				continue
			}
			setMissingKeys(vm, keys, b, p)
		}
		out = append(out, v)
	}
	for _, item := range unkeyed {
		v, keep, err := m.mergeValue(slot{item, true}, slot{}, elem)
		if err != nil {
			return nil, false, err
		}
		if keep {
			out = append(out, v)
		}
	}
	return out, true, nil
}

// nodeWork is the work, in the units of Meter (about a nanosecond each),
// of one value of the resource in a strategic merge: its merge (a map's
// keys gathered and sorted), its copy into the result and the
// comparisons of the result with the resource, about 2 µs (25 ms for a
// Pod of 5,000 containers). A foreach patching each element of a long
// list walks the whole resource for each: this is what bounds it.
const nodeWork = 2048

// joinWork is the work, in the units of Meter (about a nanosecond each),
// of comparing the merge keys of two elements: a few small allocations,
// about 200 ns.
const joinWork = 256

// mergeComplete is mergeKeyed for lists whose elements each carry all
// the keys or none: it pairs them through an index of their key values,
// in time linear in the lists. ok is false, and nothing is merged, when
// some element carries only some of the keys.
func (m *merger) mergeComplete(base, patch []any, keys []string, elem *listSchema) (any, bool, error) {
	baseIndex, patchIndex := newFirstIndex(len(base)), newFirstIndex(len(patch))
	var order []string
	var names []ident
	known := make(map[string]bool, len(base)+len(patch))
	var unkeyed []any
	for _, src := range [...]struct {
		list  []any
		index *firstIndex
		base  bool
	}{{patch, patchIndex, false}, {base, baseIndex, true}} {
		for _, item := range src.list {
			id, found := keyValues(item, keys)
			n := 0
			for _, has := range id.has {
				if has {
					n++
				}
			}
			switch {
			case !found:
				if src.base {
					unkeyed = append(unkeyed, item)
				}
				continue
			case n < len(keys):
				return nil, false, nil
			}
			key := id.key()
			src.index.add(key, item)
			if !known[key] {
				known[key] = true
				order = append(order, key)
				names = append(names, id)
			}
		}
	}
	out := make([]any, 0, len(order)+len(unkeyed))
	for i, key := range order {
		b, p := baseIndex.find(key), patchIndex.find(key)
		m.path = append(m.path, names[i].String())
		v, keep, err := m.mergeValue(b, p, elem)
		m.path = m.path[:len(m.path)-1]
		if err != nil {
			return nil, true, err
		}
		if !keep {
			continue
		}
		if vm, ok := v.(map[string]any); ok {
			if len(vm) == 0 {
				continue
			}
			setMissingKeys(vm, keys, b, p)
		}
		out = append(out, v)
	}
	for _, item := range unkeyed {
		v, keep, err := m.mergeValue(slot{item, true}, slot{}, elem)
		if err != nil {
			return nil, true, err
		}
		if keep {
			out = append(out, v)
		}
	}
	return out, true, nil
}

// ident is the tuple of merge key values naming a list element; has marks
// the keys the element carries.
type ident struct {
	vals []string
	has  []bool
}

func (id ident) String() string {
	parts := make([]string, len(id.vals))
	for i, v := range id.vals {
		if id.has[i] {
			parts[i] = v
		}
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// join reports whether two tuples name the same element: they agree on
// every key both carry, and both carry at least one. The result merges
// their keys.
func (id ident) join(other ident) (ident, bool) {
	out := ident{vals: make([]string, len(id.vals)), has: make([]bool, len(id.has))}
	common := false
	for i := range id.vals {
		switch {
		case id.has[i] && other.has[i]:
			if id.vals[i] != other.vals[i] {
				return ident{}, false
			}
			common = true
			out.vals[i], out.has[i] = id.vals[i], true
		case id.has[i]:
			out.vals[i], out.has[i] = id.vals[i], true
		case other.has[i]:
			out.vals[i], out.has[i] = other.vals[i], true
		}
	}
	return out, common
}

// key is the tuple as one string, each value after its length, so that
// two complete tuples are the same exactly when their keys are.
func (id ident) key() string {
	if len(id.vals) == 1 {
		return id.vals[0]
	}
	var b strings.Builder
	for _, v := range id.vals {
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return b.String()
}

// keyValues returns the merge key values of an element, as scalar text;
// ok is false when the element carries none of the keys.
func keyValues(item any, keys []string) (ident, bool) {
	im, isMap := item.(map[string]any)
	if !isMap {
		return ident{}, false
	}
	id := ident{vals: make([]string, len(keys)), has: make([]bool, len(keys))}
	found := false
	for i, k := range keys {
		v, present := im[k]
		if !present || v == nil {
			continue
		}
		if t, ok := scalarText(v); ok {
			id.vals[i], id.has[i] = t, true
			found = true
		}
	}
	return id, found
}

func findKeyed(list []any, keys []string, id ident) slot {
	for _, item := range list {
		if iid, ok := keyValues(item, keys); ok {
			if _, same := id.join(iid); same {
				return slot{item, true}
			}
		}
	}
	return slot{}
}

// setMissingKeys restores merge keys the merged element lost, taking the
// value from the patch or resource element that named it.
func setMissingKeys(v map[string]any, keys []string, sources ...slot) {
	for _, k := range keys {
		if _, ok := v[k]; ok {
			continue
		}
		for _, s := range sources {
			if sm, ok := s.v.(map[string]any); ok {
				if kv, ok := sm[k]; ok && kv != nil {
					v[k] = kv
					break
				}
			}
		}
	}
}

func (m *merger) where() string {
	if len(m.path) == 0 {
		return "/"
	}
	return "/" + strings.Join(m.path, "/")
}
