package pattern

import (
	"slices"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
)

// nodeKind is the shape of a pattern value.
type nodeKind uint8

const (
	scalarNode  nodeKind = iota // string, number, bool or null
	objectNode                  // map[string]any
	arrayNode                   // []any
	unknownNode                 // any other type: never matches
)

// node is one value of a compiled pattern. The walk reads everything it
// needs from the node: an object's keys come parsed (anchor kind and plain
// key) and sorted in the order the walk visits them, so a validation does
// no parsing, sorting or map lookup in the pattern.
type node struct {
	kind nodeKind
	// raw is the pattern value as written; the walk reads it for scalars.
	raw any
	// fields are an object's keys in walk order: the anchored ones first
	// (see fieldOrder), then the plain ones.
	fields []field
	// items are an array's elements.
	items []*node
	// anchored reports whether any key at or below this value is anchored.
	anchored bool
	// meta is set on an object whose metadata.labels or
	// metadata.annotations have wildcard keys, which are expanded against
	// each resource.
	meta *metaWildcards
}

// field is one key of a pattern object.
type field struct {
	// key is the key as written, with its anchor; name is the key without
	// it, the key looked up in the resource.
	key, name string
	anchor    AnchorKind
	// star is set for a plain key whose value is "*": the resource key must
	// be present and not null.
	star bool
	// wild is set when name holds wildcard characters.
	wild  bool
	value *node
}

// metaWildcards locates, in an object, the labels and annotations objects
// under metadata that have wildcard keys.
type metaWildcards struct {
	// meta is the index of the metadata field in the object's fields.
	meta int
	// sub lists the indexes of those objects in the metadata node's fields,
	// with the resource field each is expanded against.
	sub []metaField
}

type metaField struct {
	index int
	name  string // "labels" or "annotations"
}

// compileNode compiles one pattern value and everything below it.
func compileNode(v any) *node {
	switch t := v.(type) {
	case map[string]any:
		n := &node{kind: objectNode, raw: v, fields: make([]field, 0, len(t))}
		for k, e := range t {
			kind, name := ParseAnchor(k)
			child := compileNode(e)
			s, isString := e.(string)
			n.fields = append(n.fields, field{
				key:    k,
				name:   name,
				anchor: kind,
				star:   kind == NoAnchor && isString && s == "*",
				wild:   wildcard.Contains(name),
				value:  child,
			})
			n.anchored = n.anchored || kind != NoAnchor || child.anchored
		}
		sortFields(n.fields)
		n.meta = findMetaWildcards(n.fields)
		return n
	case []any:
		n := &node{kind: arrayNode, raw: v, items: make([]*node, len(t))}
		for i, e := range t {
			n.items[i] = compileNode(e)
			n.anchored = n.anchored || n.items[i].anchored
		}
		return n
	case string, float64, int64, int, bool, nil:
		return &node{kind: scalarNode, raw: v}
	}
	return &node{kind: unknownNode, raw: v}
}

// sortFields puts an object's keys in walk order: anchors first (globals,
// then conditions, then the rest, each sorted by the key as written), then
// plain keys, those whose values hold anchors first, so that conditions
// decide before an unrelated mismatch fails.
func sortFields(fields []field) {
	if len(fields) > 1 {
		slices.SortFunc(fields, fieldOrder)
	}
}

func fieldOrder(a, b field) int {
	ga, gb := fieldGroup(a), fieldGroup(b)
	if ga != gb {
		return ga - gb
	}
	return strings.Compare(a.key, b.key)
}

// fieldGroup ranks a key for fieldOrder: global anchors, conditional
// anchors, other anchors, plain keys holding anchors, other plain keys.
func fieldGroup(f field) int {
	switch f.anchor {
	case Global:
		return 0
	case Condition:
		return 1
	case NoAnchor:
		if f.value.anchored {
			return 3
		}
		return 4
	}
	return 2
}

// findMetaWildcards finds the metadata object among fields (whatever its
// anchor; the plain key first) and, under it, the labels and annotations
// objects with wildcard keys. It returns nil when there are none.
func findMetaWildcards(fields []field) *metaWildcards {
	mi := objectField(fields, "metadata")
	if mi < 0 {
		return nil
	}
	meta := fields[mi].value
	var m *metaWildcards
	for _, name := range [...]string{"labels", "annotations"} {
		fi := objectField(meta.fields, name)
		if fi < 0 || !hasWildField(meta.fields[fi].value.fields) {
			continue
		}
		if m == nil {
			m = &metaWildcards{meta: mi}
		}
		m.sub = append(m.sub, metaField{index: fi, name: name})
	}
	return m
}

// objectField returns the index of the object field called name: the plain
// key if its value is an object, else the first anchored one; -1 if none.
func objectField(fields []field, name string) int {
	found := -1
	for i, f := range fields {
		if f.name != name || f.value.kind != objectNode {
			continue
		}
		if f.key == name {
			return i
		}
		if found < 0 && f.anchor != NoAnchor {
			found = i
		}
	}
	return found
}

func hasWildField(fields []field) bool {
	for _, f := range fields {
		if f.wild {
			return true
		}
	}
	return false
}

// expandMeta returns the object node n with the wildcard keys of its
// metadata labels and annotations replaced by the resource keys they
// match, as ExpandMetadataWildcards does for a raw pattern. It returns n
// itself when no wildcard key matches: the expansion would change nothing.
func (n *node) expandMeta(res map[string]any) *node {
	rm, _ := res["metadata"].(map[string]any)
	if len(rm) == 0 {
		return n
	}
	meta := n.fields[n.meta.meta].value
	var newMeta *node
	for _, s := range n.meta.sub {
		rf, _ := rm[s.name].(map[string]any)
		expanded := expandFields(meta.fields[s.index].value, rf)
		if expanded == nil {
			continue
		}
		if newMeta == nil {
			newMeta = meta.withFields()
		}
		newMeta.fields[s.index].value = expanded
	}
	if newMeta == nil {
		return n
	}
	out := n.withFields()
	out.fields[n.meta.meta].value = newMeta
	return out
}

// expandCost is the work of expandMeta on res: each wildcard key matched
// against each key of the resource's labels or annotations, and the
// expanded fields kept unique.
func (n *node) expandCost(res map[string]any) int64 {
	rm, _ := res["metadata"].(map[string]any)
	if len(rm) == 0 {
		return 0
	}
	meta := n.fields[n.meta.meta].value
	var cost int64
	for _, s := range n.meta.sub {
		rf, _ := rm[s.name].(map[string]any)
		if len(rf) == 0 {
			continue
		}
		keyBytes := 0
		for rk := range rf {
			keyBytes += len(rk)
		}
		f := meta.fields[s.index].value
		for _, fd := range f.fields {
			if fd.wild {
				// Cost is linear in the value's length: a + b*n.
				a := wildcard.Cost(fd.name, 0)
				cost += a*int64(len(rf)) + (wildcard.Cost(fd.name, 1)-a)*int64(keyBytes)
			}
		}
		cost += int64(len(rf)) * int64(len(f.fields)+len(rf))
	}
	return cost
}

// withFields returns a copy of the object node n with its own fields.
func (n *node) withFields() *node {
	c := *n
	c.fields = slices.Clone(n.fields)
	return &c
}

// expandFields returns the object node f with each wildcard key replaced by
// the keys of rf it matches (a wildcard key matching none stays), or nil
// when no wildcard key matches any.
func expandFields(f *node, rf map[string]any) *node {
	if len(rf) == 0 || !wildMatches(f.fields, rf) {
		return nil
	}
	fields := make([]field, 0, len(f.fields)+len(rf))
	for _, fd := range f.fields {
		if !fd.wild {
			fields = appendField(fields, fd)
			continue
		}
		matched := false
		for rk := range rf {
			if wildcard.Match(fd.name, rk) {
				// The key is parsed again, as the walk would: a
				// resource key may itself read as an anchor.
				e := fd
				e.key = FormatAnchor(fd.anchor, rk)
				e.anchor, e.name = ParseAnchor(e.key)
				e.wild = wildcard.Contains(e.name)
				s, isString := fd.value.raw.(string)
				e.star = e.anchor == NoAnchor && fd.value.kind == scalarNode && isString && s == "*"
				fields = appendField(fields, e)
				matched = true
			}
		}
		if !matched {
			fields = appendField(fields, fd)
		}
	}
	sortFields(fields)
	out := &node{kind: objectNode, fields: fields}
	for _, fd := range fields {
		out.anchored = out.anchored || fd.anchor != NoAnchor || fd.value.anchored
	}
	out.meta = findMetaWildcards(fields)
	return out
}

func wildMatches(fields []field, rf map[string]any) bool {
	for _, fd := range fields {
		if !fd.wild {
			continue
		}
		for rk := range rf {
			if wildcard.Match(fd.name, rk) {
				return true
			}
		}
	}
	return false
}

// appendField adds fd unless a field with the same key is there already:
// the expansion is a map from keys to values.
func appendField(fields []field, fd field) []field {
	for _, e := range fields {
		if e.key == fd.key {
			return fields
		}
	}
	return append(fields, fd)
}
