package jmespath

import (
	"testing"
)

// BenchmarkCompiledQuery measures a typical policy query, compiled once.
func BenchmarkCompiledQuery(b *testing.B) {
	i := newTestInterpreter(b)
	doc := mustJSON(b, admissionReview)
	q, err := i.Compile("request.object.spec.containers[].image")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := q.Search(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSearchCached measures Interpreter.Search when the expression is
// already in the cache.
func BenchmarkSearchCached(b *testing.B) {
	i := newTestInterpreter(b)
	doc := mustJSON(b, admissionReview)
	const expr = "request.object.spec.containers[].image"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := i.Search(expr, doc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompile measures parsing, with the cache disabled.
func BenchmarkCompile(b *testing.B) {
	i := newTestInterpreter(b, WithCacheSize(0))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := i.Compile("request.object.spec.containers[?name=='nginx'].image | [0]"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCustomFunction measures a query calling Kyverno functions.
func BenchmarkCustomFunction(b *testing.B) {
	i := newTestInterpreter(b)
	doc := mustJSON(b, admissionReview)
	q, err := i.Compile("sum(request.object.spec.containers[].resources.requests.memory)")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := q.Search(doc); err != nil {
			b.Fatal(err)
		}
	}
}
