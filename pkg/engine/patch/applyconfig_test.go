package patch

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// The embedded schema is what hack/smdschema writes from the client-go
// go.mod requires: after an upgrade, go generate ./pkg/engine/patch.
func TestBuiltinSchemaCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go run")
	}
	out, err := exec.Command("go", "run", "../../../hack/smdschema").Output()
	if err != nil {
		t.Fatalf("go run hack/smdschema: %v", err)
	}
	have, err := os.ReadFile("builtin-schema.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, have) {
		t.Fatal("builtin-schema.yaml is not what hack/smdschema writes: run go generate ./pkg/engine/patch")
	}
}

const applyPod = `
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: app
    image: nginx
    ports:
    - containerPort: 80
  - name: log
    image: busybox
    args: [tail, -f]
  tolerations:
  - key: a
    operator: Exists
`

func TestApplyConfiguration(t *testing.T) {
	cases := []struct {
		name, config, want string
		err                error
	}{{
		name:   "maps merge",
		config: `{metadata: {labels: {team: a}, annotations: {x: "1"}}}`,
		want:   `{metadata: {name: web, labels: {app: web, team: a}, annotations: {x: "1"}}}`,
	}, {
		// containers are a list map keyed by name: the sidecar is
		// added, the named container merged, the other kept (in the
		// order structured merge gives, the API server's).
		name:   "associative list",
		config: `{spec: {containers: [{name: sidecar, image: envoy}, {name: app, imagePullPolicy: Always}]}}`,
		want: `{spec: {containers: [
		  {name: sidecar, image: envoy},
		  {name: app, image: nginx, imagePullPolicy: Always, ports: [{containerPort: 80}]},
		  {name: log, image: busybox, args: [tail, -f]}]}}`,
	}, {
		// ports are keyed by containerPort and protocol.
		name:   "compound keys",
		config: `{spec: {containers: [{name: app, ports: [{containerPort: 443}]}]}}`,
		want:   `{spec: {containers: [{name: app, ports: [{containerPort: 80}, {containerPort: 443}]}, {name: log}]}}`,
	}, {
		name:   "atomic list refused",
		config: `{spec: {containers: [{name: log, args: [sleep]}], tolerations: [{key: b}]}}`,
		err:    ErrAtomic,
	}, {
		name:   "not the schema",
		config: `{spec: {containers: "none"}}`,
		err:    ErrInvalidPatch,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := docMap(t, applyPod)
			before := toYAML(in)
			res, err := ApplyConfiguration(in, docMap(t, tc.config), false)
			if toYAML(in) != before {
				t.Fatal("the input was modified")
			}
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				if errors.Is(tc.err, ErrAtomic) && !strings.Contains(err.Error(), ".spec.tolerations") {
					t.Errorf("the error does not name the atomic list: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !res.Changed {
				t.Fatal("not changed")
			}
			assertSubset(t, docMap(t, tc.want), res.Object)
		})
	}
}

// assertSubset checks that every field of want is in got, lists element
// for element and of the same length.
func assertSubset(t *testing.T, want, got any) {
	t.Helper()
	if !subset(want, got) {
		t.Fatalf("got\n%s\nwant (at least)\n%s", toYAML(got), toYAML(want))
	}
}

func subset(want, got any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !subset(v, g[k]) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !subset(w[i], g[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(want, got)
}

// A resource from a newer API server holds fields the schema does not
// declare: it still merges, and keeps them; a configuration must fit the
// schema.
func TestApplyConfigurationUndeclaredFields(t *testing.T) {
	in := docMap(t, applyPod)
	in["spec"].(map[string]any)["futureField"] = map[string]any{"a": []any{"x"}}
	res, err := ApplyConfiguration(in, docMap(t, `{metadata: {labels: {team: a}}}`), false)
	if err != nil {
		t.Fatal(err)
	}
	assertSubset(t, docMap(t, `{metadata: {labels: {app: web, team: a}}, spec: {futureField: {a: [x]}}}`), res.Object)
	if _, err := ApplyConfiguration(docMap(t, applyPod), docMap(t, `{spec: {futureField: 1}}`), false); !errors.Is(err, ErrInvalidPatch) {
		t.Fatalf("a configuration with an undeclared field: err = %v", err)
	}
}

// A custom resource has no built-in schema: its maps merge, its lists
// are replaced.
func TestApplyConfigurationCustomResource(t *testing.T) {
	in := docMap(t, `{apiVersion: example.com/v1, kind: Widget, metadata: {name: w}, spec: {sizes: [1, 2], opts: {a: 1}}}`)
	res, err := ApplyConfiguration(in, docMap(t, `{spec: {sizes: [3], opts: {b: 2}}}`), false)
	if err != nil {
		t.Fatal(err)
	}
	assertSubset(t, docMap(t, `{apiVersion: example.com/v1, kind: Widget, spec: {sizes: [3], opts: {a: 1, b: 2}}}`), res.Object)
}

func TestApplyConfigurationNoChange(t *testing.T) {
	res, err := ApplyConfiguration(docMap(t, applyPod), docMap(t, `{metadata: {labels: {app: web}}}`), false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Changed || !res.Skipped {
		t.Fatalf("changed = %v, skipped = %v: the configuration holds what the resource has", res.Changed, res.Skipped)
	}
}

func TestApplyOperations(t *testing.T) {
	pod := docMap(t, applyPod)
	cases := []struct {
		name, ops, want string
		err             error
		unchanged       bool
	}{
		{name: "append", ops: `[{"op":"add","path":"/spec/tolerations/-","value":{"key":"b"}}]`, want: `{spec: {tolerations: [{key: a, operator: Exists}, {key: b}]}}`},
		{name: "replace", ops: `[{"op":"replace","path":"/spec/containers/0/image","value":"nginx:1.27"}]`, want: `{spec: {containers: [{image: "nginx:1.27"}, {}]}}`},
		{name: "missing parent", ops: `[{"op":"add","path":"/spec/nodeSelector/zone","value":"a"}]`, err: ErrApply},
		{name: "remove missing", ops: `[{"op":"remove","path":"/metadata/annotations"}]`, err: ErrApply},
		{name: "failed test", ops: `[{"op":"test","path":"/metadata/name","value":"other"},{"op":"remove","path":"/spec"}]`, unchanged: true},
		{name: "malformed", ops: `{"op":"add"}`, err: ErrInvalidPatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ops, ok := opsOf(t, []byte(tc.ops))
			var res Result
			var err error
			if ok {
				res, err = ApplyOperations(pod, ops)
			} else {
				err = ErrInvalidPatch
			}
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.unchanged {
				if res.Changed {
					t.Fatalf("changed:\n%s", toYAML(res.Object))
				}
				return
			}
			assertSubset(t, docMap(t, tc.want), res.Object)
		})
	}
}

func BenchmarkApplyConfiguration(b *testing.B) {
	pod := docMap(b, applyPod)
	cfg := docMap(b, `{metadata: {annotations: {x: "1"}}, spec: {containers: [{name: app, imagePullPolicy: Always}]}}`)
	if _, err := ApplyConfiguration(pod, cfg, false); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ApplyConfiguration(pod, cfg, false); err != nil {
			b.Fatal(err)
		}
	}
}
