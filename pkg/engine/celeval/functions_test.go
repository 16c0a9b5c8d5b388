package celeval

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
)

// pendingFunctions are Kyverno's functions Verdict does not declare yet,
// each with why: TestKyvernoFunctionList fails for any other missing one,
// and for one listed here that has been declared since (keep the list
// true).
var pendingFunctions = map[string]string{}

// TestKyvernoFunctionList: every function Kyverno 1.19 declares
// (testdata/kyverno-functions.txt, with the commits it was read from)
// compiles in Verdict's environment for the same kind of policy, with
// the same number of arguments.
func TestKyvernoFunctionList(t *testing.T) {
	f, err := os.Open("testdata/kyverno-functions.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	envs := map[string]func() (*cel.Env, error){
		"base":      env,
		"image":     imageEnv,
		"generator": func() (*cel.Env, error) { return generatorEnv(false) },
	}
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 4 {
			t.Fatalf("malformed line %q", line)
		}
		envName, kind, name := fields[0], fields[1], fields[2]
		arity, err := strconv.Atoi(fields[3])
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		envOf, ok := envs[envName]
		if !ok {
			t.Fatalf("line %q: no environment %s", line, envName)
		}
		n++
		expr := probe(kind, name, arity)
		key := strings.Join(fields[1:], " ")
		_, cerr := compileIn(envOf, expr, Any)
		why, pending := pendingFunctions[key]
		switch {
		case cerr != nil && !pending:
			t.Errorf("%s: Verdict does not declare it (%s): %v", line, expr, cerr)
		case cerr == nil && pending:
			t.Errorf("%s: declared now; take it out of pendingFunctions (%s)", line, why)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 60 {
		t.Fatalf("read %d functions: not the list", n)
	}
}

// probe is an expression that calls the function with arity arguments
// (the receiver counted for a member), each of type dyn, so that it
// compiles exactly when an overload of that arity exists.
func probe(kind, name string, arity int) string {
	args := func(k int) string {
		a := make([]string, k)
		for i := range a {
			a[i] = "dyn(null)"
		}
		return strings.Join(a, ", ")
	}
	recv, member := strings.CutPrefix(kind, "member:")
	if !member {
		return fmt.Sprintf("%s(%s)", name, args(arity))
	}
	if recv == "imageRef" {
		recv = "parseImageReference('nginx')"
	}
	return fmt.Sprintf("%s.%s(%s)", recv, name, args(arity-1))
}
