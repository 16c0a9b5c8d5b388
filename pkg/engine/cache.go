package engine

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"

	"github.com/verdict-dev/verdict/pkg/engine/pss"
)

// evalCache keeps what one request's evaluation computes once and uses for
// every policy: the base variable context, the typed pod for podSecurity
// rules, the images variable; and the meter that bounds the request's
// work. A Request is evaluated by one goroutine at a time, so the cache
// needs no lock.
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
	meter    *meter
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
