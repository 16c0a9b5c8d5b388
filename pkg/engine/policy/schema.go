package policy

import (
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// field is a node of the schema derived from the Go types: an object with
// known fields, a list, or anything (untyped values such as patterns).
type field struct {
	any    bool
	fields map[string]*field
	elem   *field
}

// The schemas of the policy kinds: derived from the Go types once, then
// only read.
var (
	policySchema    = newSchema(reflect.TypeOf(Policy{}))
	exceptionSchema = newSchema(reflect.TypeOf(Exception{}))
)

var rawMessage = reflect.TypeOf(json.RawMessage{})

// newSchema derives the schema of t.
func newSchema(t reflect.Type) *field {
	return schemaOf(t, map[reflect.Type]*field{})
}

// schemaOf derives the schema of t; seen holds the struct types already
// derived, so that each is derived once and recursive types end.
func schemaOf(t reflect.Type, seen map[reflect.Type]*field) *field {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessage {
		return &field{any: true}
	}
	switch t.Kind() {
	case reflect.Interface:
		return &field{any: true}
	case reflect.Slice, reflect.Array:
		return &field{elem: schemaOf(t.Elem(), seen)}
	case reflect.Map:
		return &field{any: true}
	case reflect.Struct:
		if f, ok := seen[t]; ok {
			return f
		}
		f := &field{fields: map[string]*field{}}
		seen[t] = f
		addStructFields(t, f, seen)
		return f
	}
	return &field{}
}

func addStructFields(t reflect.Type, f *field, seen map[reflect.Type]*field) {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if sf.Anonymous && name == "" {
			ft := sf.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			addStructFields(ft, f, seen)
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f.fields[name] = schemaOf(sf.Type, seen)
	}
}

// checkUnknownFields reports every key of v that the schema does not know,
// with its path.
func checkUnknownFields(v any, s *field, path string, errs *FieldErrors) {
	if s == nil || s.any {
		return
	}
	switch t := v.(type) {
	case map[string]any:
		if s.fields == nil {
			return
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fs, ok := s.fields[k]
			p := joinPath(path, k)
			if !ok {
				errs.add(p, "unknown field %q", k)
				continue
			}
			checkUnknownFields(t[k], fs, p, errs)
		}
	case []any:
		if s.elem == nil {
			return
		}
		for i, e := range t {
			checkUnknownFields(e, s.elem, path+"["+itoa(i)+"]", errs)
		}
	}
}

func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func itoa(i int) string { return strconv.Itoa(i) }
