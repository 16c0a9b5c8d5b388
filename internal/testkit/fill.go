// Package testkit holds what Verdict's tests share.
package testkit

import (
	"fmt"
	"reflect"
	"time"
)

// Fill sets every exported field reachable from ptr, a pointer, to a
// value that is not its type's zero: strings "s1", "s2", ..., numbers 1,
// 2, ..., true, a fixed time, a slice of one element, a map of one entry,
// pointers to filled values. A test that compares a hand-written encoder
// with encoding/json on a filled value fails when the mirrored struct
// gains a field the encoder does not write. Recursive types are filled
// to a depth of four.
func Fill(ptr any) {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		panic(fmt.Sprintf("testkit.Fill: %T is not a non-nil pointer", ptr))
	}
	n := 0
	fill(v.Elem(), &n, 0)
}

var timeType = reflect.TypeFor[time.Time]()

func fill(v reflect.Value, n *int, depth int) {
	if depth > 4 || !v.CanSet() {
		return
	}
	*n++
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(*n) * time.Second)))
		return
	case v.Type().ConvertibleTo(timeType) && v.Kind() == reflect.Struct:
		// metav1.Time and kin: a time underneath.
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(*n) * time.Second)).Convert(v.Type()))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), n, depth+1)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), n, depth+1)
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i), n, depth+1)
		}
	case reflect.Map:
		m := reflect.MakeMapWithSize(v.Type(), 1)
		k := reflect.New(v.Type().Key()).Elem()
		e := reflect.New(v.Type().Elem()).Elem()
		fill(k, n, depth+1)
		fill(e, n, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n, depth)
			}
		}
	case reflect.Interface:
		if v.NumMethod() == 0 {
			v.Set(reflect.ValueOf(fmt.Sprintf("s%d", *n)))
		}
	}
}
