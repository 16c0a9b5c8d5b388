package crdgen

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Schema is one node of an OpenAPI v3 schema, as a CustomResourceDefinition
// holds it (the subset Verdict's types need).
type Schema struct {
	Description string
	// Type is object, array, string, boolean, integer or number; empty for
	// an untyped value (then PreserveUnknownFields is set).
	Type   string
	Format string
	// Default is the value the API server fills in when the field is
	// absent; nil for none.
	Default  any
	Nullable bool
	// Items is the schema of an array's elements.
	Items *Schema
	// AdditionalProperties is the schema of a map's values.
	AdditionalProperties *Schema
	Properties           map[string]*Schema
	Required             []string
	// PreserveUnknownFields keeps fields the schema does not describe
	// (x-kubernetes-preserve-unknown-fields).
	PreserveUnknownFields bool
}

// MarshalYAML writes the node's keys in a fixed order (the description
// first, then the type, then the rest) and its properties sorted.
func (s *Schema) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode}
	add := func(key string, v any) error {
		var vn yaml.Node
		if err := vn.Encode(v); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, &vn)
		return nil
	}
	type kv struct {
		key string
		v   any
		set bool
	}
	keys := []kv{
		{"description", s.Description, s.Description != ""},
		{"type", s.Type, s.Type != ""},
		{"format", s.Format, s.Format != ""},
		{"default", s.Default, s.Default != nil},
		{"nullable", true, s.Nullable},
		{"items", s.Items, s.Items != nil},
		{"additionalProperties", s.AdditionalProperties, s.AdditionalProperties != nil},
	}
	for _, k := range keys {
		if !k.set {
			continue
		}
		if err := add(k.key, k.v); err != nil {
			return nil, err
		}
	}
	if len(s.Properties) > 0 {
		props := &yaml.Node{Kind: yaml.MappingNode}
		for _, name := range sortedKeys(s.Properties) {
			var vn yaml.Node
			if err := vn.Encode(s.Properties[name]); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			props.Content = append(props.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: name}, &vn)
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "properties"}, props)
	}
	if len(s.Required) > 0 {
		if err := add("required", s.Required); err != nil {
			return nil, err
		}
	}
	if s.PreserveUnknownFields {
		if err := add("x-kubernetes-preserve-unknown-fields", true); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// FieldKey names a field of a Go struct by its JSON name: the key of a
// default.
type FieldKey struct {
	Type reflect.Type
	JSON string
}

// builder derives schemas from Go types with reflect.
type builder struct {
	docs *Docs
	// defaults are filled in by the API server; see Defaults.
	defaults map[FieldKey]any
	// used records the defaults applied, so that a default naming a field
	// that no longer exists is an error rather than silently dropped.
	used map[FieldKey]bool
	// stack holds the struct types being derived, to refuse recursion (a
	// CRD schema has no references).
	stack []reflect.Type
}

var (
	rawMessageType  = reflect.TypeOf(json.RawMessage{})
	unmarshalerType = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
)

// untyped is the schema of a value the types leave to the engine: any
// JSON value, kept whole, null included.
func untyped(desc string) *Schema {
	return &Schema{Description: desc, Nullable: true, PreserveUnknownFields: true}
}

// schemaOf derives the schema of a value of type t; desc is its
// description. withDefaults and withRequired say whether defaults and
// required fields are written below this node.
func (b *builder) schemaOf(t reflect.Type, desc string, opt walkOptions) (*Schema, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType || t.Kind() == reflect.Interface {
		return untyped(desc), nil
	}
	// A type that decodes itself accepts more than its fields say (the
	// Conditions of a rule are also read from a bare list).
	if t.Kind() != reflect.Interface && reflect.PointerTo(t).Implements(unmarshalerType) {
		if desc == "" {
			desc = b.docs.Type(t)
		}
		return untyped(desc), nil
	}
	switch t.Kind() {
	case reflect.String:
		return &Schema{Description: desc, Type: "string"}, nil
	case reflect.Bool:
		return &Schema{Description: desc, Type: "boolean"}, nil
	case reflect.Int, reflect.Uint:
		return &Schema{Description: desc, Type: "integer"}, nil
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16:
		return &Schema{Description: desc, Type: "integer", Format: "int32"}, nil
	case reflect.Int64, reflect.Uint32, reflect.Uint64:
		return &Schema{Description: desc, Type: "integer", Format: "int64"}, nil
	case reflect.Float32, reflect.Float64:
		return &Schema{Description: desc, Type: "number"}, nil
	case reflect.Slice, reflect.Array:
		items, err := b.schemaOf(t.Elem(), "", opt)
		if err != nil {
			return nil, err
		}
		return &Schema{Description: desc, Type: "array", Items: items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: map keys must be strings", t)
		}
		values, err := b.schemaOf(t.Elem(), "", opt)
		if err != nil {
			return nil, err
		}
		return &Schema{Description: desc, Type: "object", AdditionalProperties: values}, nil
	case reflect.Struct:
		if desc == "" {
			desc = b.docs.Type(t)
		}
		return b.structSchema(t, desc, opt)
	}
	return nil, fmt.Errorf("%s: no schema for kind %s", t, t.Kind())
}

// walkOptions say what is written below a node.
type walkOptions struct {
	defaults bool
	required bool
}

// structSchema derives an object with the struct's fields as properties.
// Every such object keeps unknown fields: a policy written for a newer
// Kyverno than the types know is stored whole.
func (b *builder) structSchema(t reflect.Type, desc string, opt walkOptions) (*Schema, error) {
	for _, seen := range b.stack {
		if seen == t {
			return nil, fmt.Errorf("%s: recursive type (a CRD schema has no references)", t)
		}
	}
	b.stack = append(b.stack, t)
	defer func() { b.stack = b.stack[:len(b.stack)-1] }()

	s := &Schema{Description: desc, Type: "object", Properties: map[string]*Schema{}, PreserveUnknownFields: true}
	if err := b.addFields(s, t, opt); err != nil {
		return nil, err
	}
	sort.Strings(s.Required)
	return s, nil
}

// addFields adds t's fields to s, those of inlined embedded structs
// included, as encoding/json sees them.
func (b *builder) addFields(s *Schema, t reflect.Type, opt walkOptions) error {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, omitempty, skip := jsonName(f)
		if skip {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			if err := b.addFields(s, ft, opt); err != nil {
				return err
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := s.Properties[name]; dup {
			return fmt.Errorf("%s: field %q twice", t, name)
		}
		fs, err := b.schemaOf(f.Type, b.docs.Field(t, f.Name), opt)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
		}
		key := FieldKey{Type: t, JSON: name}
		if def, ok := b.defaults[key]; ok && opt.defaults {
			fs.Default = def
			b.used[key] = true
		}
		s.Properties[name] = fs
		if !omitempty && opt.required {
			s.Required = append(s.Required, name)
		}
	}
	return nil
}

// jsonName reads a field's json tag: its name ("" when the tag gives none),
// omitempty, and whether encoding/json skips it.
func jsonName(f reflect.StructField) (name string, omitempty, skip bool) {
	tag, ok := f.Tag.Lookup("json")
	if !ok {
		return "", false, false
	}
	if tag == "-" {
		return "", false, true
	}
	parts := strings.Split(tag, ",")
	for _, o := range parts[1:] {
		if o == "omitempty" || o == "omitzero" {
			omitempty = true
		}
	}
	return parts[0], omitempty, false
}
