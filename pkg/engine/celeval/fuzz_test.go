package celeval

import (
	"context"
	"errors"
	"testing"
	"time"
)

// FuzzExpression: any text either fails to compile with ErrCompile or
// compiles into a program whose evaluation ends, bounded by the cost
// limits, with a value or an error: never a panic, never a stall.
//
//	go test -fuzz FuzzExpression ./pkg/engine/celeval
func FuzzExpression(f *testing.F) {
	for _, seed := range []string{
		"object.spec.containers.all(c, c.?securityContext.?privileged.orValue(false) == false)",
		"variables.names.exists(n, n.startsWith('a'))",
		"[1,2,3].map(x, [1,2,3].map(y, x * y))",
		"object.metadata.name.matches('^[a-z]+$') && size(object.spec.containers) < 10",
		"quantity('1Gi').isGreaterThan(quantity('512Mi'))",
		"request.operation == 'CREATE' ? object.spec.replicas > 1 : true",
		"'abc'.split('').all(c, c != '')",
		"has(object.spec) && object.spec.?x.orValue([]).size() == 0",
		// Kyverno's libraries: generators and decoders bounded.
		"random('[a-z]{3}(x|y)*') != '' && size(gzip.decompress(gzip.compress('aaaa'))) == 4",
		"json.unmarshal(json.marshal(object)).metadata.name == yaml.parse('a: b').a",
		"listObjToMap(object.spec.containers, object.spec.containers, 'name', 'image').size() == 1",
		"sha256(object.metadata.name) != md5(object.metadata.name) && math.round(2.55, 1) > 2.0",
	} {
		f.Add(seed)
	}
	obj := map[string]any{
		"metadata": map[string]any{"name": "web", "labels": map[string]any{"app": "web"}},
		"spec":     map[string]any{"replicas": 2.0, "containers": []any{map[string]any{"name": "a", "image": "nginx:1"}}},
	}
	vars := []Variable{{Name: "names", Program: mustCompile(f, "object.spec.containers.map(c, c.name)", Any)}}
	f.Fuzz(func(t *testing.T, expr string) {
		p, err := Compile(expr, Any)
		if err != nil {
			if !errors.Is(err, ErrCompile) {
				t.Fatalf("compile error without ErrCompile: %v", err)
			}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		ev := NewEvaluation(ctx, Input{Object: obj, Request: map[string]any{"operation": "CREATE"}}, vars, 0)
		_, _ = ev.Eval(p)
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("%q evaluated for %s", expr, took)
		}
	})
}
