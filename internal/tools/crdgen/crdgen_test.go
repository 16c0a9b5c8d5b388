package crdgen

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

func generate(t *testing.T) map[string][]byte {
	t.Helper()
	docs, err := LoadDocs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	files, err := Generate(docs)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// openAPI returns the openAPIV3Schema of a generated manifest.
func openAPI(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var crd map[string]any
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	v := crd["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)
	return v["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
}

// node follows a path of property names ("[]" for an array's items).
func node(t *testing.T, s map[string]any, path string) map[string]any {
	t.Helper()
	for _, p := range strings.Split(path, ".") {
		var next any
		if p == "[]" {
			next = s["items"]
		} else if props, ok := s["properties"].(map[string]any); ok {
			next = props[p]
		}
		n, ok := next.(map[string]any)
		if !ok {
			t.Fatalf("%s: no %q", path, p)
		}
		s = n
	}
	return s
}

// structural checks the rules the API server holds a v1 CRD's schema to
// (apiextensions-apiserver pkg/apiserver/schema: a structural schema),
// those this generator could break: every node has a type unless it
// preserves unknown fields; arrays have items; properties and
// additionalProperties exclude each other; only the root's metadata is
// special and it is a bare object; required names exist; a default is of
// its node's type.
func structural(path string, s map[string]any, errs *[]string) {
	fail := func(format string, args ...any) { *errs = append(*errs, path+": "+fmt.Sprintf(format, args...)) }
	typ, _ := s["type"].(string)
	preserve := s["x-kubernetes-preserve-unknown-fields"] == true
	if typ == "" && !preserve {
		fail("no type and unknown fields not preserved")
	}
	for k := range s {
		switch k {
		case "description", "type", "format", "default", "nullable", "items", "properties",
			"additionalProperties", "required", "x-kubernetes-preserve-unknown-fields":
		default:
			fail("unexpected key %q", k)
		}
	}
	props, _ := s["properties"].(map[string]any)
	if props != nil && s["additionalProperties"] != nil {
		fail("properties and additionalProperties")
	}
	if (props != nil || s["additionalProperties"] != nil) && typ != "object" {
		fail("properties on type %q", typ)
	}
	if typ == "array" {
		items, ok := s["items"].(map[string]any)
		if !ok {
			fail("array without items")
		} else {
			structural(path+"[]", items, errs)
		}
	}
	if ap, ok := s["additionalProperties"].(map[string]any); ok {
		structural(path+"{}", ap, errs)
	}
	req, _ := s["required"].([]any)
	for _, r := range req {
		if _, ok := props[r.(string)]; !ok {
			fail("required %v is no property", r)
		}
	}
	if def, ok := s["default"]; ok {
		switch def.(type) {
		case bool:
			if typ != "boolean" {
				fail("default %v on %s", def, typ)
			}
		case string:
			if typ != "string" {
				fail("default %v on %s", def, typ)
			}
		default:
			fail("default %v of %T", def, def)
		}
	}
	for name, p := range props {
		ps := p.(map[string]any)
		if path == "" && name == "metadata" {
			if len(ps) != 1 || ps["type"] != "object" {
				fail("metadata must be a bare object, not %v", ps)
			}
			continue
		}
		structural(path+"."+name, ps, errs)
	}
}

func TestStructural(t *testing.T) {
	for name, raw := range generate(t) {
		t.Run(name, func(t *testing.T) {
			var errs []string
			structural("", openAPI(t, raw), &errs)
			for _, e := range errs {
				t.Error(e)
			}
		})
	}
}

// Every object derived from a struct keeps unknown fields; untyped values
// have no type.
func TestPreserveUnknownFields(t *testing.T) {
	s := openAPI(t, generate(t)["clusterpolicies.yaml"])
	for _, path := range []string{
		"spec", "spec.rules.[]", "spec.rules.[].match", "spec.rules.[].match.any.[]",
		"spec.rules.[].match.any.[].resources", "spec.rules.[].validate",
		"spec.rules.[].validate.foreach.[]", "spec.rules.[].mutate", "spec.rules.[].generate",
		"spec.rules.[].context.[].apiCall", "status", "status.rulecount",
	} {
		n := node(t, s, path)
		if n["type"] != "object" || n["x-kubernetes-preserve-unknown-fields"] != true {
			t.Errorf("%s: type %v, preserve %v; want an object that keeps unknown fields", path, n["type"], n["x-kubernetes-preserve-unknown-fields"])
		}
	}
	for _, path := range []string{
		"spec.rules.[].validate.pattern", "spec.rules.[].validate.anyPattern.[]",
		"spec.rules.[].validate.deny.conditions", "spec.rules.[].preconditions",
		"spec.rules.[].mutate.patchStrategicMerge", "spec.rules.[].validate.foreach.[].foreach",
		"spec.rules.[].verifyImages.[].attestors.[].entries.[].attestor",
		"spec.rules.[].verifyImages.[].attestations.[].conditions.[]", "spec.webhookConfiguration",
	} {
		n := node(t, s, path)
		if _, typed := n["type"]; typed || n["x-kubernetes-preserve-unknown-fields"] != true || n["nullable"] != true {
			t.Errorf("%s: %v; want untyped, nullable, unknown fields kept", path, n)
		}
	}
}

func TestDefaultsAndDescriptions(t *testing.T) {
	files := generate(t)
	s := openAPI(t, files["clusterpolicies.yaml"])
	defaults := map[string]any{
		"spec.admission":                                              true,
		"spec.background":                                             true,
		"spec.emitWarning":                                            false,
		"spec.validationFailureAction":                                "Audit",
		"spec.rules.[].skipBackgroundRequests":                        true,
		"spec.rules.[].validate.allowExistingViolations":              true,
		"spec.rules.[].context.[].apiCall.method":                     "GET",
		"spec.rules.[].verifyImages.[].mutateDigest":                  true,
		"spec.rules.[].verifyImages.[].verifyDigest":                  true,
		"spec.rules.[].verifyImages.[].required":                      true,
		"spec.rules.[].verifyImages.[].useCache":                      true,
		"spec.rules.[].validate.foreach.[].context.[].apiCall.method": "GET",
		"spec.failurePolicy":                                          nil,
		"spec.applyRules":                                             nil,
		"status.autogen.rules.[].skipBackgroundRequests":              nil,
		"status.autogen.rules.[].context.[].apiCall.method":           nil,
	}
	for path, want := range defaults {
		if got := node(t, s, path)["default"]; got != want {
			t.Errorf("%s: default %v, want %v", path, got, want)
		}
	}
	if d, _ := s["description"].(string); !strings.HasPrefix(d, "ClusterPolicy ") {
		t.Errorf("root description %q", d)
	}
	for _, path := range []string{"spec", "status", "spec.rules.[]", "spec.rules.[].validate",
		"spec.rules.[].match", "spec.rules.[].preconditions", "status.conditions.[].type"} {
		if d, _ := node(t, s, path)["description"].(string); d == "" {
			t.Errorf("%s: no description", path)
		}
	}
	// A field's own doc, else its type's.
	if d := node(t, s, "spec.rules.[].validate")["description"]; d != "Validation makes this a validate rule." {
		t.Errorf("validate's description %q, want the doc of Rule.Validation", d)
	}
	if d := node(t, s, "spec.rules.[].context.[].apiCall")["description"]; d != "APICall fetches data from the Kubernetes API or a service." {
		t.Errorf("apiCall's description %q, want the doc of policy.APICall", d)
	}
	// Status is Verdict's own and may be written in part: nothing required.
	if r := node(t, s, "status.rulecount")["required"]; r != nil {
		t.Errorf("status.rulecount required %v", r)
	}
	if r := node(t, s, "spec.rules.[]")["required"]; fmt.Sprint(r) != "[match name]" {
		t.Errorf("rules required %v, want [match name]", r)
	}
	ex := openAPI(t, files["policyexceptions.yaml"])
	// The kind carries both of Kyverno's shapes (exceptions and match,
	// or policyRefs): the schema requires neither, the policy webhook
	// checks each.
	if r := node(t, ex, "spec")["required"]; r != nil {
		t.Errorf("exception spec required %v, want nothing", r)
	}
	if _, ok := ex["properties"].(map[string]any)["status"]; ok {
		t.Error("PolicyException has a status")
	}
}

// The mapping of Go types, on small types of its own.
type (
	inner struct {
		// A is documented.
		A string `json:"a"`
	}
	self struct {
		Next *self `json:"next,omitempty"`
	}
	decodes struct{ X int }
	shapes  struct {
		inner   `json:",inline"`
		Named   inner             `json:"named,omitempty"`
		Ptr     *int32            `json:"ptr,omitempty"`
		Big     int64             `json:"big"`
		Num     float64           `json:"num,omitempty"`
		Labels  map[string]string `json:"labels,omitempty"`
		Lists   map[string][]any  `json:"lists,omitempty"`
		Raw     json.RawMessage   `json:"raw,omitempty"`
		Any     any               `json:"any,omitempty"`
		Decodes *decodes          `json:"decodes,omitempty"`
		Skipped string            `json:"-"`
		private string
		NoTag   bool
	}
)

func (d *decodes) UnmarshalJSON([]byte) error { return nil }

func TestTypes(t *testing.T) {
	b := &builder{used: map[FieldKey]bool{}}
	s, err := b.schemaOf(reflect.TypeOf(shapes{}), "", walkOptions{required: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = shapes{}.private
	raw, err := json.Marshal(s.Properties)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]*Schema{
		"a":       {Type: "string"},
		"named":   {Type: "object", Properties: map[string]*Schema{"a": {Type: "string"}}, Required: []string{"a"}, PreserveUnknownFields: true},
		"ptr":     {Type: "integer", Format: "int32"},
		"big":     {Type: "integer", Format: "int64"},
		"num":     {Type: "number"},
		"labels":  {Type: "object", AdditionalProperties: &Schema{Type: "string"}},
		"lists":   {Type: "object", AdditionalProperties: &Schema{Type: "array", Items: untyped("")}},
		"raw":     untyped(""),
		"any":     untyped(""),
		"decodes": untyped(""),
		"NoTag":   {Type: "boolean"},
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			if got := s.Properties[name]; !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
	if len(s.Properties) != len(tests) {
		t.Errorf("properties %s, want %d", raw, len(tests))
	}
	if fmt.Sprint(s.Required) != "[NoTag a big]" {
		t.Errorf("required %v", s.Required)
	}
	if _, err := b.schemaOf(reflect.TypeOf(self{}), "", walkOptions{}); err == nil {
		t.Error("recursive type: no error")
	}
}

func TestDocs(t *testing.T) {
	docs, err := LoadDocs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if d := docs.Type(reflect.TypeOf(policy.Status{})); !strings.HasPrefix(d, "Status is what Verdict reports") {
		t.Errorf("Status doc %q", d)
	}
	if d := docs.Field(reflect.TypeOf(policy.StatusCondition{}), "Type"); d != "Type of the condition: Ready." {
		t.Errorf("StatusCondition.Type doc %q", d)
	}
	if d := docs.Type(reflect.TypeOf(inner{})); d != "" {
		t.Errorf("doc of another package's type %q", d)
	}
}

func TestUnusedDefault(t *testing.T) {
	defaults := map[FieldKey]any{{reflect.TypeOf(policy.Spec{}), "noSuchField"}: true}
	if _, err := generateWith(nil, defaults); !errors.Is(err, ErrUnusedDefault) {
		t.Errorf("err %v, want ErrUnusedDefault", err)
	}
}
