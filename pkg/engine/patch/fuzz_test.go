package patch

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func FuzzStrategicMerge(f *testing.F) {
	seeds := [][2]string{
		{`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"a:latest"}]}}`,
			`{"spec":{"containers":[{"(name)":"*","imagePullPolicy":"Always"}]}}`},
		{`{"apiVersion":"v1","kind":"Pod","spec":{"volumes":[{"name":"v","emptyDir":{}}]}}`,
			`{"metadata":{"annotations":{"+(a)":"b"}},"spec":{"volumes":[{"<(emptyDir)":{}}]}}`},
		{`{"apiVersion":"apps/v1","kind":"Deployment","spec":{"template":{"spec":{"containers":[{"name":"a","ports":[{"containerPort":80}]}]}}}}`,
			`{"spec":{"template":{"spec":{"containers":[{"name":"a","ports":[{"containerPort":80,"protocol":"TCP"},{"$patch":"replace"}]}]}}}}`},
		{`{"kind":"Widget","spec":{"a":[1,2],"b":{"c":null}}}`, `{"spec":{"a":null,"b":{"$patch":"delete"},"(x)":">1-3"}}`},
		{`{"apiVersion":"v1","kind":"Pod","metadata":{"finalizers":["a"]}}`, `{"metadata":{"finalizers":["b",{"x":1},null]}}`},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, resourceJSON, overlayJSON string) {
		var resource map[string]any
		if err := json.Unmarshal([]byte(resourceJSON), &resource); err != nil || resource == nil {
			return
		}
		var overlay any
		if err := json.Unmarshal([]byte(overlayJSON), &overlay); err != nil {
			return
		}
		resourceBefore, overlayBefore := deepCopy(resource), deepCopy(overlay)
		res, err := StrategicMerge(resource, overlay)
		if !reflect.DeepEqual(any(resource), resourceBefore) || !reflect.DeepEqual(overlay, overlayBefore) {
			t.Fatalf("inputs were modified")
		}
		if err == nil && res.Object == nil {
			t.Fatalf("nil object without error")
		}
		if err == nil && res.Skipped == res.Changed {
			t.Fatalf("skipped=%v changed=%v", res.Skipped, res.Changed)
		}
		// Metered, the patch is the same, and a meter that refuses
		// stops it with its error.
		metered, merr := StrategicMergeMetered(resource, overlay, &countingMeter{limit: 1 << 40})
		if (merr == nil) != (err == nil) || !reflect.DeepEqual(metered, res) {
			t.Fatalf("metered: %+v, %v; want %+v, %v", metered, merr, res, err)
		}
		if _, merr := StrategicMergeMetered(resource, overlay, &countingMeter{}); merr != nil && !errors.Is(merr, errRefused) && (err == nil || merr.Error() != err.Error()) {
			t.Fatalf("refused: %v, want errRefused or %v", merr, err)
		}
	})
}

func FuzzJSON6902(f *testing.F) {
	f.Add(`{"metadata":{"labels":{"a":"b"}},"spec":{"l":[1,2]}}`, `[{"op":"add","path":"/spec/l/-","value":3}]`)
	f.Add(`{"a":{}}`, "- op: remove\n  path: /a/b\n- op: add\n  path: /x/y~1z\n  value: 1\n")
	f.Fuzz(func(t *testing.T, resourceJSON, patch string) {
		var resource map[string]any
		if err := json.Unmarshal([]byte(resourceJSON), &resource); err != nil || resource == nil {
			return
		}
		before := deepCopy(resource)
		res, err := JSON6902(resource, patch)
		if !reflect.DeepEqual(any(resource), before) {
			t.Fatalf("input was modified")
		}
		if err == nil && res.Object == nil {
			t.Fatalf("nil object without error")
		}
	})
}
