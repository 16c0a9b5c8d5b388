package policy

import (
	"reflect"
	"testing"
)

func TestDownstreamKinds(t *testing.T) {
	g := &Generation{
		APIVersion: "v1", Kind: "ConfigMap",
		CloneList: &CloneList{Kinds: []string{"Secret", "v1/ConfigMap", "networking.k8s.io/v1/NetworkPolicy"}},
		ForEach:   []ForEachGenerate{{APIVersion: "v1", Kind: "ServiceAccount"}, {APIVersion: "v1", Kind: "ConfigMap"}},
	}
	want := []KindRef{
		{APIVersion: "v1", Kind: "ConfigMap"}, {APIVersion: "v1", Kind: "Secret"},
		{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"}, {APIVersion: "v1", Kind: "ServiceAccount"},
	}
	if got := g.DownstreamKinds(); !reflect.DeepEqual(got, want) {
		t.Fatalf("DownstreamKinds = %v, want %v", got, want)
	}
	if (&Generation{Data: map[string]any{}}).GeneratesData() != true || (&Generation{Clone: &CloneFrom{Name: "x"}}).GeneratesData() {
		t.Fatal("GeneratesData")
	}
	if !(&Generation{ForEach: []ForEachGenerate{{Data: map[string]any{}}}}).GeneratesData() {
		t.Fatal("foreach data not seen")
	}
}

func TestGenerateExistingAndMutateExistingSettings(t *testing.T) {
	yes, no := true, false
	gen := func(v *bool) *Rule { return &Rule{Name: "g", Generation: &Generation{GenerateExisting: v}} }
	mut := func(v *bool) *Rule {
		return &Rule{Name: "m", Mutation: &Mutation{Targets: []TargetResource{{}}, MutateExistingOnPolicyUpdate: v}}
	}
	tests := map[string]struct {
		spec Spec
		rule *Rule
		gen  bool
		mut  bool
	}{
		"nothing set":                         {rule: gen(nil)},
		"policy generateExisting":             {spec: Spec{GenerateExisting: true}, rule: gen(nil), gen: true},
		"deprecated generateExistingOnUpdate": {spec: Spec{GenerateExistingOnPolicyUpdate: &yes}, rule: gen(nil), gen: true},
		"rule off wins over policy on":        {spec: Spec{GenerateExisting: true}, rule: gen(&no)},
		"rule on wins over policy off":        {rule: gen(&yes), gen: true},
		"policy mutateExistingOnPolicyUpdate": {spec: Spec{MutateExistingOnPolicyUpdate: true}, rule: mut(nil), mut: true},
		"rule mutateExistingOnPolicyUpdate":   {rule: mut(&yes), mut: true},
		"rule off wins for mutate":            {spec: Spec{MutateExistingOnPolicyUpdate: true}, rule: mut(&no)},
		"not a generate rule":                 {spec: Spec{GenerateExisting: true}, rule: mut(nil)},
		"a mutate rule without targets":       {spec: Spec{MutateExistingOnPolicyUpdate: true}, rule: &Rule{Name: "x", Mutation: &Mutation{}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := &Policy{Spec: tc.spec}
			if got := p.GenerateExisting(tc.rule); got != tc.gen {
				t.Errorf("GenerateExisting = %v, want %v", got, tc.gen)
			}
			if got := p.MutateExistingOnPolicyUpdate(tc.rule); got != tc.mut {
				t.Errorf("MutateExistingOnPolicyUpdate = %v, want %v", got, tc.mut)
			}
		})
	}
}

// A GeneratingPolicy acts in the background as one generate rule named
// after it, with its evaluation's settings; the kinds its status records
// are its downstream kinds, and a policy without a status has none.
func TestGeneratingPolicyBackgroundRule(t *testing.T) {
	obj := map[string]any{
		"apiVersion": "verdict.dev/v1", "kind": KindGeneratingPolicy,
		"metadata": map[string]any{"name": "team-settings"},
		"spec": map[string]any{
			"evaluation": map[string]any{
				"synchronize":                    map[string]any{"enabled": true},
				"generateExisting":               map[string]any{"enabled": true},
				"orphanDownstreamOnPolicyDelete": map[string]any{"enabled": true},
			},
			"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
				"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"namespaces"},
			}}},
			"generate": []any{map[string]any{"expression": "generator.Apply(object.metadata.name, [])"}},
		},
		"status": map[string]any{"downstreamKinds": []any{
			map[string]any{"apiVersion": "v1", "kind": "ConfigMap"},
			map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy"},
		}},
	}
	p, err := FromObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	rules := p.BackgroundRules()
	if len(rules) != 1 || rules[0].Name != "team-settings" || p.Rule("team-settings") == nil || p.Rule("other") != nil {
		t.Fatalf("rules %+v", rules)
	}
	g := rules[0].Generation
	if !g.Synchronize || !g.OrphanDownstreamOnPolicyDelete || !p.GenerateExisting(&rules[0]) || !g.GeneratesData() {
		t.Fatalf("generation %+v", g)
	}
	want := []KindRef{{APIVersion: "v1", Kind: "ConfigMap"}, {APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"}}
	if got := g.DownstreamKinds(); !reflect.DeepEqual(got, want) {
		t.Fatalf("DownstreamKinds = %v, want %v", got, want)
	}
	delete(obj, "status")
	p, err = FromObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.BackgroundRules()[0].Generation.DownstreamKinds(); len(got) != 0 {
		t.Fatalf("a policy without a status has downstream kinds %v", got)
	}
}

// The kinds a GeneratingPolicy's generator recorded: its status's, and
// those of the annotation it writes where a CRD prunes the status field;
// an annotation that does not parse adds none.
func TestRecordedKinds(t *testing.T) {
	cm := KindRef{APIVersion: "v1", Kind: "ConfigMap"}
	np := KindRef{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"}
	tests := map[string]struct {
		status      *GeneratingPolicyStatus
		annotations map[string]string
		want        []KindRef
	}{
		"none":               {},
		"status":             {status: &GeneratingPolicyStatus{DownstreamKinds: []KindRef{cm}}, want: []KindRef{cm}},
		"annotation":         {annotations: map[string]string{AnnotationDownstreamKinds: `[{"apiVersion":"v1","kind":"ConfigMap"}]`}, want: []KindRef{cm}},
		"both, once each":    {status: &GeneratingPolicyStatus{DownstreamKinds: []KindRef{cm}}, annotations: map[string]string{AnnotationDownstreamKinds: `[{"apiVersion":"v1","kind":"ConfigMap"},{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy"}]`}, want: []KindRef{cm, np}},
		"annotation broken":  {status: &GeneratingPolicyStatus{DownstreamKinds: []KindRef{np}}, annotations: map[string]string{AnnotationDownstreamKinds: `{not json`}, want: []KindRef{np}},
		"entries incomplete": {annotations: map[string]string{AnnotationDownstreamKinds: `[{"kind":"ConfigMap"},{"apiVersion":"v1"}]`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := &Policy{GPolStatus: tc.status, Metadata: ObjectMeta{Annotations: tc.annotations}}
			if got := p.RecordedKinds(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("RecordedKinds() = %v, want %v", got, tc.want)
			}
		})
	}
}
