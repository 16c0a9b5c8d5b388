package celeval

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// recorder is a Context that records generator.Apply's calls.
type recorder struct {
	fakeContext
	calls []string
	err   error
}

func (r *recorder) Generate(namespace string, own bool, objects []map[string]any) error {
	r.calls = append(r.calls, fmt.Sprintf("%s %v %v", namespace, own, objects))
	return r.err
}

func TestGeneratorApply(t *testing.T) {
	in := Input{Object: map[string]any{"metadata": map[string]any{"name": "ns1"}}}
	run := func(expr string, namespaced bool, c Context) (bool, error) {
		t.Helper()
		p, err := CompileGenerating(expr, Bool, namespaced)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		in.Context = c
		return NewEvaluation(context.Background(), in, nil, 0).Bool(p)
	}
	rec := &recorder{}
	ok, err := run(`generator.Apply(object.metadata.name, [{"kind": dyn("ConfigMap"), "data": dyn({"n": 1})}]) && generator.apply("", [])`, false, rec)
	if err != nil || !ok {
		t.Fatalf("%v %v", ok, err)
	}
	if got := strings.Join(rec.calls, "; "); got != "ns1 false [map[data:map[n:1] kind:ConfigMap]];  false []" {
		t.Fatalf("calls %q", got)
	}

	// The namespaced form names no namespace: the policy's own.
	rec = &recorder{}
	if ok, err := run(`generator.apply([{"kind": "ConfigMap"}])`, true, rec); err != nil || !ok || len(rec.calls) != 1 || !strings.HasPrefix(rec.calls[0], " true ") {
		t.Fatalf("namespaced: %v %v %q", ok, err, rec.calls)
	}
	// Each kind of policy has only its own form.
	if _, err := CompileGenerating(`generator.apply([{"kind": "ConfigMap"}])`, Bool, false); !errors.Is(err, ErrCompile) {
		t.Fatalf("a cluster-wide policy compiled the namespaced form: %v", err)
	}
	if _, err := CompileGenerating(`generator.apply("x", [])`, Bool, true); !errors.Is(err, ErrCompile) {
		t.Fatalf("a namespaced policy compiled the cluster-wide form: %v", err)
	}
	// Other policy kinds have no generator.
	if _, err := Compile(`generator.apply("x", [])`, Bool); !errors.Is(err, ErrCompile) {
		t.Fatalf("the base environment has the generator: %v", err)
	}

	// The Context's error is the expression's; a Context that cannot
	// generate makes the call an error.
	if _, err := run(`generator.apply("x", [{}])`, false, &recorder{err: errors.New("denied")}); err == nil || !strings.Contains(err.Error(), "failed to generate resources: denied") {
		t.Fatalf("error %v", err)
	}
	if _, err := run(`generator.apply("x", [{}])`, false, &fakeContext{}); !errors.Is(err, ErrNoContext) {
		t.Fatalf("no generator: %v", err)
	}
}

func TestTemplateValues(t *testing.T) {
	ev := NewEvaluation(context.Background(), Input{Object: map[string]any{"n": float64(2), "m": map[string]any{"a": "b"}}}, nil, 0)
	for expr, want := range map[string]string{`"s"`: "s", `true`: "true", `3`: "3", `3u`: "3", `2.5`: "2.5", `object.n`: "2"} {
		p, err := Compile(expr, Any)
		if err != nil {
			t.Fatal(err)
		}
		if s, scalar, _, err := ev.Text(p); err != nil || !scalar || s != want {
			t.Errorf("%s: %q %v %v, want %q", expr, s, scalar, err, want)
		}
	}
	p, _ := Compile(`object.m`, Any)
	if _, scalar, typeName, err := ev.Text(p); err != nil || scalar || typeName != "map" {
		t.Errorf("a map is no scalar: %v %q %v", scalar, typeName, err)
	}
	if v, err := ev.JSON(p); err != nil || fmt.Sprint(v) != "map[a:b]" {
		t.Errorf("JSON %v %v", v, err)
	}
	p, _ = Compile(`null`, Any)
	if v, err := ev.JSON(p); err != nil || v != nil {
		t.Errorf("JSON of null %v %v", v, err)
	}
}
