package webhook

import (
	"encoding/json"
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/verdict-dev/verdict/internal/testkit/admissiontraffic"
	"github.com/verdict-dev/verdict/pkg/jsonread"
)

// slowReview is decodeReview's encoding/json path: the envelope into the
// typed review, then each object from its raw bytes.
func slowReview(body []byte) (ar admissionv1.AdmissionReview, object, oldObject map[string]any, err error) {
	if err = json.Unmarshal(body, &ar); err != nil {
		return
	}
	if ar.Request == nil {
		return
	}
	if object, err = decodeObject(ar.Request.Object.Raw); err != nil {
		return
	}
	oldObject, err = decodeObject(ar.Request.OldObject.Raw)
	return
}

// sameAsSlow fails unless the fast path, when it takes body, decodes it
// as the encoding/json path does; it reports whether it took it.
func sameAsSlow(t *testing.T, body []byte) bool {
	t.Helper()
	ar, object, oldObject, ok := fastReview(body)
	if !ok {
		return false
	}
	war, wobject, woldObject, err := slowReview(body)
	if err != nil {
		t.Fatalf("%.300s: the fast path took what encoding/json refuses (%v)", body, err)
	}
	if !reflect.DeepEqual(ar, war) || !reflect.DeepEqual(object, wobject) || !reflect.DeepEqual(oldObject, woldObject) {
		t.Fatalf("%.300s:\nfast %+v\n     %v\n     %v\nslow %+v\n     %v\n     %v", body, ar, object, oldObject, war, wobject, woldObject)
	}
	return true
}

// reviewBody is an AdmissionReview as the API server sends it, for obj.
func reviewBody(t testing.TB, op string, obj, old any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
		"request": map[string]any{
			"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "kind": map[string]any{"group": "", "version": "v1", "kind": "Pod"},
			"resource": map[string]any{"group": "", "version": "v1", "resource": "pods"}, "subResource": "",
			"requestKind": map[string]any{"group": "", "version": "v1", "kind": "Pod"}, "requestResource": map[string]any{"group": "", "version": "v1", "resource": "pods"},
			"name": "web", "namespace": "team", "operation": op,
			"userInfo":  map[string]any{"username": "admin", "uid": "014fbff9a07c", "groups": []any{"system:authenticated", "my-admin-group"}, "extra": map[string]any{"some-key": []any{"v1", "v2"}}},
			"object":    obj,
			"oldObject": old,
			"dryRun":    false,
			"options":   map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions", "fieldManager": "kubectl"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFastReview: reviews as the API server sends them (the benchmark's
// 1,000 Pods, creates, updates, deletes, odd strings and numbers) take
// the fast path and decode as encoding/json decodes them; reviews off
// that shape fall back, and decodeReview gives encoding/json's answer.
func TestFastReview(t *testing.T) {
	pods, err := admissiontraffic.ReadPods(benchPods)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("no ../shared/bench: ", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, pod := range pods {
		if !sameAsSlow(t, reviewBody(t, "CREATE", pod, nil)) {
			t.Fatalf("pod %d: not taken by the fast path", i)
		}
	}
	odd := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "a\u2028\"<b>&\\ ✓ \x01", "labels": map[string]any{}},
		"spec": map[string]any{"n": []any{0.0, -1.5, 1e300, 12345678901234567890.0, 1e-300, []any{}, map[string]any{}, nil, true, false}}}
	for _, body := range [][]byte{
		reviewBody(t, "UPDATE", odd, odd),
		reviewBody(t, "DELETE", nil, odd),
		reviewBody(t, "CREATE", map[string]any{}, nil),
		[]byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"operation":"CREATE","userInfo":{},"object":{"a":"\ud83d\ude00 \u00e9 \ud800 \/","b":1E+2,"c":-0.0e-0,"a":2},"dryRun":true,"options":null}}`),
		[]byte(" \n{\"request\":{\"object\": \t{ } }}\r\n"),
		[]byte(`{"request":{"object":{"s":"` + "\xff\xfe" + `"}}}`),
	} {
		if !sameAsSlow(t, body) {
			t.Fatalf("%.200s: not taken by the fast path", body)
		}
	}
	deep := func(n int) []byte {
		return []byte(`{"request":{"object":` + strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) + "}}")
	}
	for _, body := range [][]byte{
		[]byte(`{"Kind":"AdmissionReview"}`),
		[]byte(`{"kind":"AdmissionReview","kind":"AdmissionReview"}`),
		[]byte(`{"kind":"AdmissionReview","response":{}}`),
		[]byte(`{"request":{"uid":null}}`),
		[]byte(`{"request":{"uid":5}}`),
		[]byte(`{"request":{"object":[1]}}`),
		[]byte(`{"request":{"object":{"n":1e999}}}`),
		[]byte(`{"request":{"object":{"n":01}}}`),
		[]byte(`{"request":{"object":{"s":"` + "\x01" + `"}}}`),
		[]byte(`{"request":{"userInfo":{"extra":{"a":["x"],"a":["y"]}}}}`),
		[]byte(`{"request":{}} x`),
		[]byte(`null`),
		deep(jsonread.MaxDepth - 1),
		deep(jsonread.MaxDepth + 5),
	} {
		if sameAsSlow(t, body) {
			t.Fatalf("%.200s: taken by the fast path", body)
		}
	}
	// Nesting up to encoding/json's limit is taken; the review's own two
	// levels count.
	if !sameAsSlow(t, deep(jsonread.MaxDepth-2)) {
		t.Fatal("nesting within the limit: not taken by the fast path")
	}
}

// BenchmarkDecodeReview: one review of a benchmark Pod, through the fast
// path and through encoding/json.
//
//	go test -run '^$' -bench DecodeReview -benchmem ./internal/webhook/
func BenchmarkDecodeReview(b *testing.B) {
	pods, err := admissiontraffic.ReadPods(benchPods)
	if errors.Is(err, fs.ErrNotExist) {
		b.Skip("no ../shared/bench: ", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	body := reviewBody(b, "CREATE", pods[0], nil)
	b.Run("fast", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, _, ok := fastReview(body); !ok {
				b.Fatal("not taken by the fast path")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, _, err := slowReview(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
