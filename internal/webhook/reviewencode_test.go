package webhook

import (
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/verdict-dev/verdict/internal/testkit"
)

func marshalReview(t testing.TB, resp *admissionv1.AdmissionResponse) string {
	t.Helper()
	out, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionAPIVersion, Kind: admissionKind},
		Response: resp,
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// FuzzEncodeReview: the answer the webhook writes is byte for byte
// json.Marshal's, for every shape it gives (allowed, denied with a
// status, patched, with warnings) and for the ones it hands over.
func FuzzEncodeReview(f *testing.F) {
	f.Add("705ab4f5-6393-11e8-b7cc-42010a800002", true, "", "", "", int32(0), []byte(nil), "", "", uint8(0))
	f.Add("u", false, "Failure", "\n\nresource Pod/ns/x was blocked <&> \u2028", "Forbidden", int32(403), []byte(nil), "w1", "w2\xff", uint8(1))
	f.Add("", true, "", "", "", int32(0), []byte(`[{"op":"add","path":"/a","value":1}]`), "", "", uint8(2))
	f.Add("u", false, "", "m", "", int32(-1), []byte{0xff, 0}, "", "", uint8(3))
	f.Fuzz(func(t *testing.T, uid string, allowed bool, status, message, reason string, code int32, patch []byte, w1, w2 string, shape uint8) {
		resp := &admissionv1.AdmissionResponse{UID: types.UID(uid), Allowed: allowed, Patch: patch}
		if shape&1 != 0 || status != "" || message != "" {
			resp.Result = &metav1.Status{Status: status, Message: message, Reason: metav1.StatusReason(reason), Code: code}
		}
		if shape&2 != 0 {
			pt := admissionv1.PatchTypeJSONPatch
			resp.PatchType = &pt
		}
		if w1 != "" || w2 != "" {
			resp.Warnings = []string{w1, w2}
		}
		switch shape >> 2 & 3 {
		case 1:
			resp.AuditAnnotations = map[string]string{"b": w1, "a": w2}
		case 2:
			if resp.Result != nil {
				resp.Result.Details = &metav1.StatusDetails{Name: w1}
			}
		case 3:
			if resp.Result != nil {
				resp.Result.Kind = "Status"
			}
		}
		got, err := encodeReview(resp)
		if err != nil {
			t.Fatal(err)
		}
		if want := marshalReview(t, resp); string(got) != want {
			t.Fatalf("%+v:\ngot  %s\nwant %s", resp, got, want)
		}
	})
}

// TestEncodeReviewAnswers: the webhook's own answers, as the API server
// reads them.
func TestEncodeReviewAnswers(t *testing.T) {
	pt := admissionv1.PatchTypeJSONPatch
	for _, d := range []decision{
		allow(nil), allow([]string{"policy p.r: careful"}),
		deny("\n\nresource Pod/team/web-1 was blocked due to the following policies \n\np:\n  r: 'no: \"x\" <y>'\n", []string{strings.Repeat("w", 300)}),
		{resp: &admissionv1.AdmissionResponse{Allowed: true, Patch: []byte(`[{"op":"add","path":"/metadata/labels/a","value":"b"}]`), PatchType: &pt}},
	} {
		d.resp.UID = "0df28fbd-5f5f-11e8-b7cc-42010a800002"
		got, err := encodeReview(d.resp)
		if err != nil {
			t.Fatal(err)
		}
		if want := marshalReview(t, d.resp); string(got) != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
}

// BenchmarkEncodeReview: a denial with warnings, written directly and by
// json.Marshal.
//
//	go test -run '^$' -bench EncodeReview -benchmem ./internal/webhook/
func BenchmarkEncodeReview(b *testing.B) {
	d := deny("\n\nresource Pod/team/web-1 was blocked due to the following policies \n\ndisallow-privileged-containers:\n  privileged-containers: 'validation error: Privileged mode is disallowed. The fields\n    spec.containers[*].securityContext.privileged must be unset'\n",
		[]string{"policy restrict-seccomp.check-seccomp: validation error: Use of custom Seccomp profiles is disallowed."})
	d.resp.UID = "0df28fbd-5f5f-11e8-b7cc-42010a800002"
	b.Run("impl=direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeReview(d.resp); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = marshalReview(b, d.resp)
		}
	})
}

// TestEncodeReviewWritesEveryField: a response with every field of
// AdmissionResponse and its Status set (testkit.Fill), except those that
// send it to json.Marshal (audit annotations, the status's type and list
// metadata and details), is written as json.Marshal writes it. It fails
// when a Kubernetes release adds a field the hand-written encoder does
// not write.
func TestEncodeReviewWritesEveryField(t *testing.T) {
	var resp admissionv1.AdmissionResponse
	testkit.Fill(&resp)
	resp.AuditAnnotations = nil
	resp.Result.TypeMeta, resp.Result.ListMeta, resp.Result.Details = metav1.TypeMeta{}, metav1.ListMeta{}, nil
	pt := admissionv1.PatchTypeJSONPatch
	resp.PatchType = &pt
	got, err := encodeReview(&resp)
	if err != nil {
		t.Fatal(err)
	}
	if want := marshalReview(t, &resp); string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
