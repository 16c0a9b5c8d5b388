package testkit

import (
	"reflect"
	"testing"
	"time"
)

type inner struct {
	S string
	P *int
}

type sample struct {
	S  string
	I  int64
	U  uint8
	F  float64
	B  bool
	T  time.Time
	L  []inner
	M  map[string]int
	P  *inner
	A  [2]string
	X  any
	In inner
	un string
}

// TestFillLeavesNoZeroField: every exported field, nested ones included,
// is set.
func TestFillLeavesNoZeroField(t *testing.T) {
	var s sample
	Fill(&s)
	var check func(path string, v reflect.Value)
	check = func(path string, v reflect.Value) {
		if v.IsZero() {
			t.Errorf("%s is zero", path)
			return
		}
		switch v.Kind() {
		case reflect.Struct:
			if v.Type() == timeType {
				return
			}
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					check(path+"."+v.Type().Field(i).Name, v.Field(i))
				}
			}
		case reflect.Pointer:
			check(path+".*", v.Elem())
		case reflect.Slice:
			check(path+"[0]", v.Index(0))
		}
	}
	check("sample", reflect.ValueOf(s))
	if s.un != "" {
		t.Error("an unexported field was set")
	}
}
