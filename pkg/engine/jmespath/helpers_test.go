package jmespath

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"reflect"
	"testing"
	"time"
)

// fixedNow is the clock of test interpreters.
var fixedNow = time.Date(2023, time.January, 12, 17, 37, 56, 0, time.FixedZone("EST", -5*3600))

// fakeResolver answers from a static table.
type fakeResolver map[string][]string

func (f fakeResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	ips, ok := f[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]net.IPAddr, 0, len(ips))
	for _, ip := range ips {
		out = append(out, net.IPAddr{IP: net.ParseIP(ip)})
	}
	return out, nil
}

var testResolver = fakeResolver{
	"example.com":            {"93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"},
	"kubernetes.default.svc": {"10.96.0.1"},
	"localhost":              {"127.0.0.1", "::1"},
	"mixed.example":          {"93.184.215.14", "192.168.1.10"},
	"empty.example":          {},
}

func newTestInterpreter(t testing.TB, opts ...Option) *Interpreter {
	t.Helper()
	base := []Option{
		WithClock(func() time.Time { return fixedNow }),
		WithResolver(testResolver),
	}
	i, err := New(append(base, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return i
}

// mustJSON decodes a JSON document into the engine's data convention.
func mustJSON(t testing.TB, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("invalid test JSON %q: %v", s, err)
	}
	return v
}

// searchCase is one row of a table test: expr evaluated against data must
// give want, or fail with an error wrapping wantErr.
type searchCase struct {
	expr    string
	data    any
	want    any
	wantErr error
}

func runSearchCases(t *testing.T, i *Interpreter, tests map[string]searchCase) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := i.Search(tc.expr, tc.data)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Search(%q) error = %v, want one wrapping %v (result %#v)", tc.expr, err, tc.wantErr, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Search(%q) unexpected error: %v", tc.expr, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Search(%q) = %#v, want %#v", tc.expr, got, tc.want)
			}
			assertJSONCompatible(t, got)
		})
	}
}

// assertJSONCompatible fails unless v only uses the engine's data types.
func assertJSONCompatible(t testing.TB, v any) {
	t.Helper()
	if err := checkJSONCompatible(v); err != nil {
		t.Fatalf("result %#v is not JSON-compatible: %v", v, err)
	}
}

func checkJSONCompatible(v any) error {
	switch t := v.(type) {
	case nil, string, float64, bool:
		return nil
	case []any:
		for _, e := range t {
			if err := checkJSONCompatible(e); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		for _, e := range t {
			if err := checkJSONCompatible(e); err != nil {
				return err
			}
		}
		return nil
	default:
		return fmt.Errorf("unexpected type %T", v)
	}
}
