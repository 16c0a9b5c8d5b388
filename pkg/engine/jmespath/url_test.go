package jmespath

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

func TestIsExternalURL(t *testing.T) {
	i := newTestInterpreter(t)
	runSearchCases(t, i, map[string]searchCase{
		"public name":          {expr: "is_external_url('https://example.com/path')", want: true},
		"cluster service":      {expr: "is_external_url('http://kubernetes.default.svc')", want: false},
		"localhost name":       {expr: "is_external_url('http://localhost:8080/x')", want: false},
		"loopback ip":          {expr: "is_external_url('http://127.0.0.1')", want: false},
		"private ip":           {expr: "is_external_url('http://10.0.0.1:9000')", want: false},
		"metadata ip":          {expr: "is_external_url('http://169.254.169.254/latest/meta-data')", want: false},
		"ipv6 loopback":        {expr: "is_external_url('http://[::1]:80')", want: false},
		"ipv6 unique local":    {expr: "is_external_url('http://[fd00::1]')", want: false},
		"unspecified":          {expr: "is_external_url('http://0.0.0.0')", want: false},
		"public ip":            {expr: "is_external_url('https://8.8.8.8')", want: true},
		"public ipv6":          {expr: "is_external_url('http://[2001:4860:4860::8888]/')", want: true},
		"any internal address": {expr: "is_external_url('http://mixed.example')", want: false},
		"from document":        {expr: "data.test | is_external_url(@)", data: mustJSON(t, `{"data":{"test":"https://example.com"}}`), want: true},
		"unresolvable":         {expr: "is_external_url('http://unknown.invalid')", wantErr: ErrFunction},
		"no addresses":         {expr: "is_external_url('http://empty.example')", wantErr: ErrFunction},
		"no host":              {expr: "is_external_url('not a url')", wantErr: ErrFunction},
		"parse error":          {expr: "is_external_url('://bad')", wantErr: ErrFunction},
		"not a string":         {expr: "is_external_url(`1`)", wantErr: ErrFunction},
	})
}

// hangingResolver blocks until the lookup is cancelled.
type hangingResolver struct{}

func (hangingResolver) LookupIPAddr(ctx context.Context, _ string) ([]net.IPAddr, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestIsExternalURLTimeout(t *testing.T) {
	i := newTestInterpreter(t, WithResolver(hangingResolver{}), WithLookupTimeout(20*time.Millisecond))
	start := time.Now()
	_, err := i.Search("is_external_url('http://tarpit.example')", nil)
	if !errors.Is(err, ErrFunction) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v, want a function error wrapping context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("lookup took %s, the timeout was not applied", d)
	}
}
