package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestStopErrors(t *testing.T) {
	tests := map[string]struct {
		err  error
		is   []error
		text string
	}{
		"deadline": {
			err:  contextError(context.DeadlineExceeded, 12345),
			is:   []error{ErrDeadline, context.DeadlineExceeded},
			text: "evaluation stopped: request deadline exceeded after 12345 steps",
		},
		"canceled": {
			err:  contextError(context.Canceled, 7),
			is:   []error{ErrCanceled, context.Canceled},
			text: "evaluation stopped: request canceled after 7 steps",
		},
		"limit": {
			err:  limitError("foreach list %s has %d elements, more than the limit of %d", "request.object.data", 20000, 10000),
			is:   []error{ErrLimitExceeded},
			text: "evaluation stopped: limit exceeded: foreach list request.object.data has 20000 elements, more than the limit of 10000",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, target := range tc.is {
				if !errors.Is(tc.err, target) {
					t.Errorf("%v does not wrap %v", tc.err, target)
				}
			}
			if got := tc.err.Error(); got != tc.text || !strings.HasPrefix(got, StoppedPrefix) {
				t.Errorf("text = %q, want %q", got, tc.text)
			}
		})
	}
}
