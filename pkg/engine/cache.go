package engine

import (
	"github.com/verdict-dev/verdict/pkg/engine/celeval"
	"reflect"

	corev1 "k8s.io/api/core/v1"

	"github.com/verdict-dev/verdict/pkg/engine/pss"
)

// evalCache keeps what one request's evaluation computes once and uses for
// every policy: the base variable context, the typed pod for podSecurity
// rules, the images variable; and the work the request has spent. A
// Request is evaluated by one goroutine at a time, so the cache needs no
// lock. It holds no context: each call brings its own.
type evalCache struct {
	base     *evalContext
	baseObj  uintptr
	pod      *corev1.Pod
	podMemo  *pss.Memo
	podObj   uintptr
	podErr   error
	images   map[string]any
	imageObj uintptr
	match    *matchInput
	matchObj uintptr
	budget   *budget
	// meter is the meter of the request's calls (meterFor).
	meter *meter
	// celIn is what CEL expressions see of the request, built from the
	// object at celObj; it keeps the CEL values expressions have read.
	celIn  *celeval.Prepared
	celObj uintptr
	// imageEvidence is what the request's image verifications found, by
	// image, for required (ivpol.go).
	imageEvidence map[string]imageEvidence
}

func (r *Request) scratch() *evalCache {
	if r.cache == nil {
		r.cache = &evalCache{}
	}
	return r.cache
}

// identity is the address of a map, to tell whether a cached value was
// computed from the same object.
func identity(m map[string]any) uintptr {
	if m == nil {
		return 0
	}
	return uintptr(reflect.ValueOf(m).UnsafePointer())
}
