package celeval

import (
	"math"
	"reflect"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// jsonAdapter turns the engine's JSON values into CEL values, lazily (a
// map or list is wrapped, its elements converted when read), as the API
// server hands an unstructured object to CEL, with one difference the
// engine's decoding makes necessary: the engine holds every number as a
// float64, where the API server decodes a JSON number without a fraction
// as an int64. A float64 with an integral value in int64's range is
// therefore CEL's int, so that `object.spec.replicas == 3`,
// `string(port)` and int arithmetic behave as they do in the cluster.
type jsonAdapter struct{}

var adapter = jsonAdapter{}

// int64 bounds as float64: 2^63 is exact; -2^63 too.
const (
	maxInt = float64(1 << 63)
	minInt = -maxInt
)

func (jsonAdapter) NativeToValue(value any) ref.Val {
	switch v := value.(type) {
	case nil:
		return types.NullValue
	case map[string]any:
		return &jsonMap{m: v}
	case []any:
		return &jsonList{l: v}
	case float64:
		if v == math.Trunc(v) && v >= minInt && v < maxInt {
			return types.Int(int64(v))
		}
		return types.Double(v)
	case string:
		return types.String(v)
	case bool:
		return types.Bool(v)
	}
	return types.DefaultTypeAdapter.NativeToValue(value)
}

// toVal is the CEL value of an input map; nil is null.
func toVal(m map[string]any) ref.Val {
	if m == nil {
		return types.NullValue
	}
	return &jsonMap{m: m}
}

// jsonMap and jsonList are cel-go's own wrappers of a map[string]any and
// an []any (types.NewStringInterfaceMap, types.NewDynamicList) with one
// difference: an element is converted once, the first time it is read,
// and the same CEL value is returned on every later read. A wrapper of
// a resource is made once per resource (Prepare) and read by every
// expression of every policy evaluated on it, so a path such as
// object.spec.containers is wrapped once, not once per expression.
// Everything else is cel-go's, method for method: the same traits, the
// same errors, the same Value (the JSON value itself, which cel-go reads
// past an optional), and Fold hands the folder the elements this adapter
// converted (cel-go's hands the raw ones, which a two-variable
// comprehension then converts with the environment's adapter: JSON
// numbers would be doubles there and ints elsewhere). Where cel-go does work that does
// not read elements one by one (ConvertToNative, String, a map's key
// iterator, concatenating two non-empty lists), the wrapper hands the
// call to cel-go's own wrapper of the same value.
//
// Reading fills the cache: a wrapper is not safe for concurrent use.
// It assumes the JSON value does not change while the wrapper is used.
type jsonMap struct {
	jsonAdapter
	m map[string]any
	// The values converted so far: the first few in keys/vals (an
	// expression reads a handful of an object's fields; a slice is
	// cheaper to fill and search than a map), the rest in more.
	keys []string
	vals []ref.Val
	more map[string]ref.Val
}

// cachedFields is how many converted fields a jsonMap keeps in its
// slices before it uses a map.
const cachedFields = 8

var (
	_ traits.Mapper   = (*jsonMap)(nil)
	_ traits.Foldable = (*jsonMap)(nil)
	_ traits.Zeroer   = (*jsonMap)(nil)
	_ traits.Lister   = (*jsonList)(nil)
	_ traits.Foldable = (*jsonList)(nil)
	_ traits.Zeroer   = (*jsonList)(nil)
)

// base is cel-go's wrapper of the same map.
func (m *jsonMap) base() traits.Mapper { return types.NewStringInterfaceMap(adapter, m.m) }

// Find is the value at key, converted once; (nil, false) when key is
// not a string or not in the map.
func (m *jsonMap) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return nil, false
	}
	for i, key := range m.keys {
		if key == string(k) {
			return m.vals[i], true
		}
	}
	if v, ok := m.more[string(k)]; ok {
		return v, true
	}
	raw, ok := m.m[string(k)]
	if !ok {
		return nil, false
	}
	v := adapter.NativeToValue(raw)
	switch {
	case len(m.keys) < cachedFields:
		if m.keys == nil {
			m.keys, m.vals = make([]string, 0, 4), make([]ref.Val, 0, 4)
		}
		m.keys, m.vals = append(m.keys, string(k)), append(m.vals, v)
	default:
		if m.more == nil {
			m.more = map[string]ref.Val{}
		}
		m.more[string(k)] = v
	}
	return v, true
}

func (m *jsonMap) Contains(key ref.Val) ref.Val {
	_, found := m.Find(key)
	return types.Bool(found)
}

func (m *jsonMap) Get(key ref.Val) ref.Val {
	v, found := m.Find(key)
	if !found {
		return types.ValOrErr(v, "no such key: %v", key)
	}
	return v
}

func (m *jsonMap) Iterator() traits.Iterator { return m.base().Iterator() }

// Fold hands f the entries converted by this adapter (cel-go's map hands
// the raw values, which the environment's adapter then converts: a JSON
// number would be a double in a two-variable comprehension and an int
// everywhere else).
func (m *jsonMap) Fold(f traits.Folder) {
	for k := range m.m {
		v, _ := m.Find(types.String(k))
		if !f.FoldEntry(k, v) {
			break
		}
	}
}

func (m *jsonMap) ConvertToNative(typeDesc reflect.Type) (any, error) {
	if reflect.TypeOf(m.m).AssignableTo(typeDesc) {
		return m.m, nil
	}
	if reflect.TypeOf(m).AssignableTo(typeDesc) {
		return m, nil
	}
	return m.base().ConvertToNative(typeDesc)
}

func (m *jsonMap) ConvertToType(typeVal ref.Type) ref.Val {
	switch typeVal {
	case types.MapType:
		return m
	case types.TypeType:
		return types.MapType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", types.MapType, typeVal)
}

// Equal is cel-go's map equality: the same size, and every key of m in
// other with an equal value.
func (m *jsonMap) Equal(other ref.Val) ref.Val {
	otherMap, ok := other.(traits.Mapper)
	if !ok {
		return types.False
	}
	if m.Size() != otherMap.Size() {
		return types.False
	}
	for k := range m.m {
		key := types.String(k)
		thisVal, _ := m.Find(key)
		otherVal, found := otherMap.Find(key)
		if !found {
			return types.False
		}
		if types.Equal(thisVal, otherVal) == types.False {
			return types.False
		}
	}
	return types.True
}

func (m *jsonMap) IsZeroValue() bool { return len(m.m) == 0 }
func (m *jsonMap) Size() ref.Val     { return types.Int(len(m.m)) }
func (m *jsonMap) String() string    { return m.base().(interface{ String() string }).String() }
func (m *jsonMap) Type() ref.Type    { return types.MapType }
func (m *jsonMap) Value() any        { return m.m }

// jsonList is jsonMap's list: see there.
type jsonList struct {
	jsonAdapter
	l    []any
	vals []ref.Val // vals[i] is l[i] converted, nil until read
}

// base is cel-go's wrapper of the same list.
func (l *jsonList) base() traits.Lister { return types.NewDynamicList(adapter, l.l) }

// at is the element at i (in range), converted once.
func (l *jsonList) at(i int) ref.Val {
	if l.vals == nil {
		l.vals = make([]ref.Val, len(l.l))
	}
	v := l.vals[i]
	if v == nil {
		v = adapter.NativeToValue(l.l[i])
		l.vals[i] = v
	}
	return v
}

// Add is cel-go's: an empty list added gives the other one; two
// non-empty lists give cel-go's concatenation.
func (l *jsonList) Add(other ref.Val) ref.Val {
	otherList, ok := other.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	if len(l.l) == 0 {
		return other
	}
	if otherList.Size() == types.IntZero {
		return l
	}
	return l.base().Add(other)
}

func (l *jsonList) Contains(elem ref.Val) ref.Val {
	for i := range l.l {
		if b, ok := elem.Equal(l.at(i)).(types.Bool); ok && b == types.True {
			return types.True
		}
	}
	return types.False
}

func (l *jsonList) ConvertToNative(typeDesc reflect.Type) (any, error) {
	if reflect.TypeOf(l.l).AssignableTo(typeDesc) {
		return l.l, nil
	}
	if reflect.TypeOf(l).AssignableTo(typeDesc) {
		return l, nil
	}
	return l.base().ConvertToNative(typeDesc)
}

func (l *jsonList) ConvertToType(typeVal ref.Type) ref.Val {
	switch typeVal {
	case types.ListType:
		return l
	case types.TypeType:
		return types.ListType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", types.ListType, typeVal)
}

// Equal is cel-go's list equality: the same size and equal elements.
func (l *jsonList) Equal(other ref.Val) ref.Val {
	otherList, ok := other.(traits.Lister)
	if !ok {
		return types.False
	}
	if l.Size() != otherList.Size() {
		return types.False
	}
	for i := range l.l {
		if types.Equal(l.at(i), otherList.Get(types.Int(i))) == types.False {
			return types.False
		}
	}
	return types.True
}

func (l *jsonList) Get(index ref.Val) ref.Val {
	i, err := types.IndexOrError(index)
	if err != nil {
		return types.ValOrErr(index, "%v", err)
	}
	if i < 0 || i >= len(l.l) {
		return types.NewErr("index '%d' out of range in list size '%d'", i, l.Size())
	}
	return l.at(i)
}

// Fold hands f the elements converted by this adapter, as jsonMap's Fold.
func (l *jsonList) Fold(f traits.Folder) {
	for i := range l.l {
		if !f.FoldEntry(i, l.at(i)) {
			break
		}
	}
}

func (l *jsonList) Iterator() traits.Iterator { return &listIterator{list: l} }
func (l *jsonList) IsZeroValue() bool         { return len(l.l) == 0 }
func (l *jsonList) Size() ref.Val             { return types.Int(len(l.l)) }
func (l *jsonList) String() string            { return l.base().(interface{ String() string }).String() }
func (l *jsonList) Type() ref.Type            { return types.ListType }
func (l *jsonList) Value() any                { return l.l }

// listIterator is cel-go's list iterator, over the converted elements.
type listIterator struct {
	list   *jsonList
	cursor int
}

func (it *listIterator) HasNext() ref.Val { return types.Bool(it.cursor < len(it.list.l)) }

func (it *listIterator) Next() ref.Val {
	if it.cursor < len(it.list.l) {
		it.cursor++
		return it.list.at(it.cursor - 1)
	}
	return nil
}

func (*listIterator) ConvertToNative(reflect.Type) (any, error) {
	return nil, errIteratorConversion
}

func (*listIterator) ConvertToType(ref.Type) ref.Val { return types.NewErr("no such overload") }
func (*listIterator) Equal(ref.Val) ref.Val          { return types.NewErr("no such overload") }
func (*listIterator) Type() ref.Type                 { return types.IteratorType }
func (*listIterator) Value() any                     { return nil }
