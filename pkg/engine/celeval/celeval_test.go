package celeval

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func mustCompile(t testing.TB, expr string, want Result) *Program {
	t.Helper()
	p, err := Compile(expr, want)
	if err != nil {
		t.Fatalf("compile %q: %v", expr, err)
	}
	return p
}

func TestCompileErrors(t *testing.T) {
	tests := map[string]struct {
		expr string
		want Result
		msg  string
	}{
		"syntax":           {expr: "object.spec.(", want: Bool, msg: "Syntax error"},
		"undeclared":       {expr: "objekt.spec == 1", want: Bool, msg: "undeclared reference to 'objekt'"},
		"not a bool":       {expr: "'a' + 'b'", want: Bool, msg: "must evaluate to bool but got string"},
		"not a string":     {expr: "1 + 2", want: String, msg: "must evaluate to string but got int"},
		"unknown function": {expr: "object.spec.frobnicate()", want: Bool, msg: "undeclared reference to 'frobnicate'"},
		"mixed list":       {expr: "[1, 'a'].size() > 0", want: Bool, msg: "expected type 'int' but found 'string'"},
		"bool is not null": {expr: "true", want: StringOrNull, msg: "must evaluate to string or null but got bool"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Compile(tc.expr, tc.want)
			if !errors.Is(err, ErrCompile) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want ErrCompile saying %q", err, tc.msg)
			}
		})
	}
	// What compiles: dyn results are checked when evaluated.
	for _, expr := range []string{"object.spec.replicas > 2", "object.metadata.name", "has(object.spec) && object.spec.?x.orValue(1) == 1"} {
		if _, err := Compile(expr, Bool); err != nil {
			t.Errorf("%q: %v", expr, err)
		}
	}
}

// The Kubernetes libraries and the standard extensions are there.
func TestLibraries(t *testing.T) {
	obj := map[string]any{
		"spec": map[string]any{
			"replicas": 3.0,
			"ratio":    0.5,
			"cpu":      "250m",
			"ip":       "10.0.0.1",
			"url":      "https://example.com:8443/x?y=1",
			"version":  "1.2.3",
			"image":    "registry.example.com/team/app:1.0",
			"list":     []any{3.0, 1.0, 2.0},
			"name":     "my-app",
		},
	}
	for _, expr := range []string{
		// numbers: integral JSON numbers are ints, as the API server decodes them
		"object.spec.replicas == 3",
		"object.spec.replicas + 1 == 4",
		"string(object.spec.replicas) == '3'",
		"object.spec.ratio == 0.5",
		"object.spec.replicas > 2.5",
		// strings (ext.Strings), lists, sets
		"object.spec.image.split(':')[1] == '1.0'",
		"object.spec.image.indexOf('/') == 20",
		"['a', 'b'].join('-') == 'a-b'",
		"object.spec.name.upperAscii() == 'MY-APP'",
		"sets.contains([1, 2, 3], [1, 2])",
		"object.spec.list.max() == 3 && object.spec.list.sum() == 6",
		"!object.spec.list.isSorted()",
		// Kubernetes: quantity, IP, CIDR, URL, format, semver, regex
		"quantity(object.spec.cpu).isLessThan(quantity('1'))",
		"ip(object.spec.ip).family() == 4 && cidr('10.0.0.0/8').containsIP(object.spec.ip)",
		"url(object.spec.url).getPort() == '8443'",
		"format.dns1123Label().validate(object.spec.name).hasValue() == false",
		"semver(object.spec.version).isLessThan(semver('1.10.0'))",
		"object.spec.image.find('[0-9]+\\\\.[0-9]+') == '1.0'",
		// optionals, two-variable comprehensions
		"object.spec.?missing.orValue('none') == 'none'",
		"object.spec.list.all(i, v, v > 0)",
		// JSON numbers are ints in two-variable comprehensions too
		"object.spec.list.all(i, v, type(v) == int) && object.spec.exists(k, v, k == 'replicas' && type(v) == int)",
		"object.spec.name.matches('^my-')",
	} {
		p := mustCompile(t, expr, Bool)
		ok, err := NewEvaluation(context.Background(), Input{Object: obj}, nil, 0).Bool(p)
		if err != nil || !ok {
			t.Errorf("%s: %v, %v", expr, ok, err)
		}
	}
}

func TestEvaluationErrors(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "a"}}}}
	ev := NewEvaluation(context.Background(), Input{Object: obj}, nil, 0)
	// A missing key is an error, worded as the API server words it.
	_, err := ev.Bool(mustCompile(t, "object.spec.containers[0].securityContext.privileged == false", Bool))
	if err == nil || err.Error() != "expression 'object.spec.containers[0].securityContext.privileged == false' resulted in error: no such key: securityContext" {
		t.Fatalf("error %v", err)
	}
	// A dyn expression that is no bool.
	_, err = ev.Bool(mustCompile(t, "object.spec.containers[0].name", Bool))
	if err == nil || !strings.Contains(err.Error(), "not a bool") {
		t.Fatalf("error %v", err)
	}
	// object is null on a DELETE.
	ok, err := NewEvaluation(context.Background(), Input{OldObject: obj}, nil, 0).Bool(mustCompile(t, "object == null && oldObject.spec.containers.size() == 1", Bool))
	if err != nil || !ok {
		t.Fatalf("null object: %v %v", ok, err)
	}
}

// Variables are computed once, when first read, and may read earlier
// ones; an error in one is the error of the expression that reads it.
func TestVariables(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}}}}
	vars := []Variable{
		{Name: "names", Program: mustCompile(t, "object.spec.containers.map(c, c.name)", Any)},
		{Name: "count", Program: mustCompile(t, "size(variables.names)", Any)},
		{Name: "broken", Program: mustCompile(t, "object.spec.nothing", Any)},
	}
	ev := NewEvaluation(context.Background(), Input{Object: obj}, vars, 0)
	ok, err := ev.Bool(mustCompile(t, "variables.count == 2 && variables.names[1] == 'b'", Bool))
	if err != nil || !ok {
		t.Fatalf("%v %v", ok, err)
	}
	before := ev.remaining
	if _, err := ev.Bool(mustCompile(t, "variables.count == 2", Bool)); err != nil {
		t.Fatal(err)
	}
	if spent := before - ev.remaining; spent > 5 {
		t.Errorf("reading a computed variable again cost %d", spent)
	}
	_, err = ev.Bool(mustCompile(t, "variables.broken == 1", Bool))
	if err == nil || !strings.Contains(err.Error(), "no such key: nothing") {
		t.Fatalf("error %v", err)
	}
}

// An expression that would run for ever is stopped by the per-call cost
// limit, quickly, with an error that says so; a policy whose expressions
// together exceed the budget is stopped for good.
func TestCostLimits(t *testing.T) {
	forever := mustCompile(t, "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, a+b+c+d+e+f > 0))))))", Bool)
	start := time.Now()
	_, err := NewEvaluation(context.Background(), Input{}, nil, 0).Bool(forever)
	if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "exceeded the cost limit of one evaluation") {
		t.Fatalf("error %v, want the per-call cost limit", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("stopped after %s", took)
	}
	// A budget smaller than two evaluations: the second one fails, and
	// every one after it, without running.
	cheap := mustCompile(t, "[1,2,3].all(x, x > 0)", Bool)
	probe := NewEvaluation(context.Background(), Input{}, nil, 0)
	if _, err := probe.Bool(cheap); err != nil {
		t.Fatal(err)
	}
	cost := Budget - probe.remaining
	ev := NewEvaluation(context.Background(), Input{}, nil, cost+cost/2)
	if _, err := ev.Bool(cheap); err != nil {
		t.Fatal(err)
	}
	if _, err := ev.Bool(cheap); !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "running out of cost budget") {
		t.Fatalf("second evaluation: %v", err)
	}
	if _, err := ev.Bool(mustCompile(t, "true", Bool)); !errors.Is(err, ErrBudget) {
		t.Fatalf("after the budget: %v", err)
	}
}

// A context that ends stops the evaluation.
func TestContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := NewEvaluation(ctx, Input{}, nil, 0).Bool(mustCompile(t, "true", Bool))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v", err)
	}
}

// Message follows the API server: a trimmed string, or "" (the caller's
// fallback) for an error, a non-string, several lines or too long.
func TestMessage(t *testing.T) {
	obj := map[string]any{"metadata": map[string]any{"name": "web"}}
	ev := NewEvaluation(context.Background(), Input{Object: obj}, nil, 0)
	tests := map[string]string{
		"'  name ' + object.metadata.name + '  '": "name web",
		"object.metadata.missing":                 "",
		"'a\\nb'":                                 "",
		"'" + strings.Repeat("x", 6000) + "'":     "",
		"dyn(1)":                                  "",
	}
	for expr, want := range tests {
		if got := ev.Message(mustCompile(t, expr, String)); got != want {
			t.Errorf("%s: %q, want %q", expr, got, want)
		}
	}
}

// A variable that reads itself (variables is dyn: nothing refuses it at
// compile time) ends in an error, not in a recursion that would take the
// process down.
func TestSelfReferentialVariable(t *testing.T) {
	vars := []Variable{
		{Name: "a", Program: mustCompile(t, "variables.b + 1", Any)},
		{Name: "b", Program: mustCompile(t, "variables.a + 1", Any)},
		{Name: "c", Program: mustCompile(t, "variables.c", Any)},
	}
	ev := NewEvaluation(context.Background(), Input{}, vars, 0)
	for _, expr := range []string{"variables.a == 1", "variables.c == 1"} {
		_, err := ev.Bool(mustCompile(t, expr, Bool))
		if err == nil || !strings.Contains(err.Error(), "refers to itself") {
			t.Errorf("%s: %v", expr, err)
		}
	}
}
