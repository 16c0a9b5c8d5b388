package webhook

import (
	"encoding/base64"
	"encoding/json"
	"strconv"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/verdict-dev/verdict/pkg/jsonwrite"
)

// encodeReview writes the AdmissionReview carrying resp as json.Marshal
// writes it, byte for byte, without reflection for the answers the
// webhook gives (allowed or denied, a patch, warnings); a status with
// more than its status, message, reason and code, or audit annotations,
// are json.Marshal's to write. FuzzEncodeReview holds the two to the same
// bytes.
func encodeReview(resp *admissionv1.AdmissionResponse) ([]byte, error) {
	st := resp.Result
	if len(resp.AuditAnnotations) > 0 || st != nil && (st.TypeMeta != (metav1.TypeMeta{}) || st.ListMeta != (metav1.ListMeta{}) || st.Details != nil) {
		return json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: admissionAPIVersion, Kind: admissionKind},
			Response: resp,
		})
	}
	n := 160 + len(resp.UID) + base64.StdEncoding.EncodedLen(len(resp.Patch))
	if st != nil {
		n += len(st.Message) + len(st.Message)/8 + len(st.Status) + len(st.Reason)
	}
	for _, w := range resp.Warnings {
		n += len(w) + 3
	}
	b := make([]byte, 0, n)
	b = append(b, `{"kind":"`+admissionKind+`","apiVersion":"`+admissionAPIVersion+`","response":{"uid":`...)
	b = jsonwrite.String(b, string(resp.UID))
	b = append(b, `,"allowed":`...)
	b = strconv.AppendBool(b, resp.Allowed)
	if st != nil {
		b = append(b, `,"status":{"metadata":{}`...)
		b = jsonwrite.OptionalString(b, `,"status":`, st.Status)
		b = jsonwrite.OptionalString(b, `,"message":`, st.Message)
		b = jsonwrite.OptionalString(b, `,"reason":`, string(st.Reason))
		if st.Code != 0 {
			b = strconv.AppendInt(append(b, `,"code":`...), int64(st.Code), 10)
		}
		b = append(b, '}')
	}
	if len(resp.Patch) > 0 {
		b = append(b, `,"patch":"`...)
		b = base64.StdEncoding.AppendEncode(b, resp.Patch)
		b = append(b, '"')
	}
	if resp.PatchType != nil {
		b = jsonwrite.String(append(b, `,"patchType":`...), string(*resp.PatchType))
	}
	if len(resp.Warnings) > 0 {
		b = append(b, `,"warnings":[`...)
		for i, w := range resp.Warnings {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonwrite.String(b, w)
		}
		b = append(b, ']')
	}
	return append(b, "}}"...), nil
}
