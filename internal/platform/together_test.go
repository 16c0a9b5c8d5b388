package platform

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestTogether: the parts stop together when one returns, with or
// without an error, and when ctx ends; Together returns once all have,
// with the first real error, never the cancellation it caused.
func TestTogether(t *testing.T) {
	boom := errors.New("boom")
	waits := func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}
	tests := map[string]struct {
		parts  []func(context.Context) error
		cancel bool
		want   error
	}{
		"one fails":           {parts: []func(context.Context) error{waits, func(context.Context) error { return boom }}, want: boom},
		"one ends cleanly":    {parts: []func(context.Context) error{waits, func(context.Context) error { return nil }}},
		"ctx ends":            {parts: []func(context.Context) error{waits, waits}, cancel: true},
		"a wrapped cancel":    {parts: []func(context.Context) error{waits, func(ctx context.Context) error { <-ctx.Done(); return errors.Join(errors.New("run"), ctx.Err()) }, func(context.Context) error { return nil }}},
		"canceled on its own": {parts: []func(context.Context) error{waits, func(context.Context) error { return context.Canceled }}, want: context.Canceled},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var running atomic.Int32
			parts := make([]func(context.Context) error, len(tc.parts))
			for i, p := range tc.parts {
				parts[i] = func(ctx context.Context) error {
					running.Add(1)
					defer running.Add(-1)
					return p(ctx)
				}
			}
			if tc.cancel {
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			done := make(chan error, 1)
			go func() { done <- Together(ctx, parts...) }()
			select {
			case err := <-done:
				if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
					t.Fatalf("Together: %v, want %v", err, tc.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the parts did not stop together")
			}
			if n := running.Load(); n != 0 {
				t.Fatalf("%d parts still running after Together returned", n)
			}
		})
	}
}
