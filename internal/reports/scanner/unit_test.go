package scanner

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/fake"

	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/reports/reporter"
	"github.com/verdict-dev/verdict/pkg/queue"
)

func TestReportSubject(t *testing.T) {
	pom := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "uid-1", Namespace: "ns", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "other", UID: types.UID("uid-0")},
		{APIVersion: "v1", Kind: "Pod", Name: "web", UID: types.UID("uid-1")},
	}}}
	w, err := reporter.NewWriter(fake.NewSimpleDynamicClient(runtime.NewScheme()))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := reportSubject(pom, w)
	if got.UID != "uid-1" || got.Kind != "Pod" || got.Name != "web" || got.APIVersion != "v1" || got.Namespace != "ns" {
		t.Errorf("%+v: want the owner whose uid is the report's name", got)
	}
	pom.OwnerReferences = nil
	if got, _ := reportSubject(pom, w); got.UID != "uid-1" || got.Kind != "" {
		t.Errorf("%+v: without an owner only the uid is known", got)
	}

	// A shadow's reports are named verdict-<uid>; Kyverno's <uid> are
	// not its own.
	shadow, err := reporter.NewWriter(fake.NewSimpleDynamicClient(runtime.NewScheme()), reporter.WithNamePrefix(model.ShadowReportPrefix))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := reportSubject(pom, shadow); ok {
		t.Error("a shadow takes a report named after the bare uid for its own")
	}
	pom.Name = "verdict-uid-1"
	if got, ok := reportSubject(pom, shadow); !ok || got.UID != "uid-1" {
		t.Errorf("shadow report %s: %+v %v", pom.Name, got, ok)
	}
}

func TestNewerResourceVersion(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{{"10", "9", true}, {"9", "10", false}, {"5", "5", false}, {"x", "1", false}, {"", "1", false}} {
		if got := newer(c.a, c.b); got != c.want {
			t.Errorf("newer(%q, %q) = %v", c.a, c.b, got)
		}
	}
}

func TestOutcomeLabel(t *testing.T) {
	for o, want := range map[string]string{
		outcomeLabel(queue.Done()):               "done",
		outcomeLabel(queue.RetryAfter(1e9)):      "retry",
		outcomeLabel(queue.Poison("bad item")):   "poison",
		outcomeLabel(queue.Retry().Because(nil)): "retry",
	} {
		if o != want {
			t.Errorf("%q, want %q", o, want)
		}
	}
}

func TestOptionsRejectBadValues(t *testing.T) {
	for name, err := range map[string]error{
		"scan chk": WithChecker(nil)(&options{}),
	} {
		if !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		}
	}
}
