package webhook

import (
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/verdict-dev/verdict/pkg/jsonread"
)

// fastReview decodes an AdmissionReview request body in one pass, its
// objects straight into the engine's form, as decodeReview's
// encoding/json path would decode it (the envelope into the typed
// request, each object again from its raw bytes): every request of every
// API write goes through here. It takes reviews as the API server sends
// them: known fields under their own names, of their own types, each
// once. Anything else (an unknown field, a name in another case, a field
// given twice, a null where the API server sends none, a number
// encoding/json refuses, a syntax error) reports false, and decodeReview
// takes its encoding/json path, whose answer is then the answer.
// FuzzDecodeReview holds the two to the same result.
//
// The raw objects (Object.Raw, OldObject.Raw, Options.Raw) are slices of
// body, not copies, and the strings slices of one copy of it: what keeps
// them beyond the request (a cache) must clone them.
func fastReview(body []byte) (ar admissionv1.AdmissionReview, object, oldObject map[string]any, ok bool) {
	// Strings are slices of one copy of the body, which the raw objects
	// keep anyway, rather than one allocation each.
	d := jsonReader{jsonread.Reader{Data: body, Text: string(body)}}
	var seen uint32
	ok = d.Object(func(key []byte) bool {
		switch string(key) {
		case "kind":
			return jsonread.Once(&seen, 0) && d.StringInto(&ar.Kind)
		case "apiVersion":
			return jsonread.Once(&seen, 1) && d.StringInto(&ar.APIVersion)
		case "request":
			if !jsonread.Once(&seen, 2) {
				return false
			}
			ar.Request = &admissionv1.AdmissionRequest{}
			return d.request(ar.Request, &object, &oldObject)
		}
		return false
	})
	if !ok || !d.End() {
		return admissionv1.AdmissionReview{}, nil, nil, false
	}
	return ar, object, oldObject, true
}

// request decodes the AdmissionRequest.
func (d *jsonReader) request(req *admissionv1.AdmissionRequest, object, oldObject *map[string]any) bool {
	var seen uint32
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "uid":
			var s string
			ok := jsonread.Once(&seen, 0) && d.StringInto(&s)
			req.UID = types.UID(s)
			return ok
		case "kind":
			return jsonread.Once(&seen, 1) && d.gvk(&req.Kind)
		case "resource":
			return jsonread.Once(&seen, 2) && d.gvr(&req.Resource)
		case "subResource":
			return jsonread.Once(&seen, 3) && d.StringInto(&req.SubResource)
		case "requestKind":
			if !jsonread.Once(&seen, 4) {
				return false
			}
			if d.Null() {
				return true
			}
			req.RequestKind = &metav1.GroupVersionKind{}
			return d.gvk(req.RequestKind)
		case "requestResource":
			if !jsonread.Once(&seen, 5) {
				return false
			}
			if d.Null() {
				return true
			}
			req.RequestResource = &metav1.GroupVersionResource{}
			return d.gvr(req.RequestResource)
		case "requestSubResource":
			return jsonread.Once(&seen, 6) && d.StringInto(&req.RequestSubResource)
		case "name":
			return jsonread.Once(&seen, 7) && d.StringInto(&req.Name)
		case "namespace":
			return jsonread.Once(&seen, 8) && d.StringInto(&req.Namespace)
		case "operation":
			var s string
			ok := jsonread.Once(&seen, 9) && d.StringInto(&s)
			req.Operation = admissionv1.Operation(s)
			return ok
		case "userInfo":
			return jsonread.Once(&seen, 10) && d.userInfo(&req.UserInfo)
		case "object":
			return jsonread.Once(&seen, 11) && d.rawObject(&req.Object.Raw, object)
		case "oldObject":
			return jsonread.Once(&seen, 12) && d.rawObject(&req.OldObject.Raw, oldObject)
		case "dryRun":
			if !jsonread.Once(&seen, 13) {
				return false
			}
			if d.Null() {
				return true
			}
			var b bool
			if !d.BoolInto(&b) {
				return false
			}
			req.DryRun = &b
			return true
		case "options":
			if !jsonread.Once(&seen, 14) {
				return false
			}
			if d.Null() {
				return true
			}
			start := d.Space()
			d.Depth = 2
			if _, ok := d.Value(); !ok {
				return false
			}
			req.Options.Raw = d.Data[start:d.Pos]
			return true
		}
		return false
	})
}

// rawObject decodes an object (or null) into obj, keeping its bytes.
func (d *jsonReader) rawObject(raw *[]byte, obj *map[string]any) bool {
	if d.Null() {
		return true
	}
	start := d.Space()
	d.Depth = 2 // inside the review and its request, as encoding/json counts
	v, ok := d.Value()
	m, isMap := v.(map[string]any)
	if !ok || !isMap {
		return false // not an object: decodeReview's error
	}
	*raw, *obj = d.Data[start:d.Pos], m
	return true
}

func (d *jsonReader) gvk(g *metav1.GroupVersionKind) bool {
	return d.stringFields([]string{"group", "version", "kind"}, &g.Group, &g.Version, &g.Kind)
}

func (d *jsonReader) gvr(g *metav1.GroupVersionResource) bool {
	return d.stringFields([]string{"group", "version", "resource"}, &g.Group, &g.Version, &g.Resource)
}

// stringFields takes an object of string fields named names, each at
// most once, into dst (in the same order).
func (d *jsonReader) stringFields(names []string, dst ...*string) bool {
	var seen uint32
	return d.Object(func(key []byte) bool {
		for i, n := range names {
			if string(key) == n {
				return jsonread.Once(&seen, uint32(i)) && d.StringInto(dst[i])
			}
		}
		return false
	})
}

func (d *jsonReader) userInfo(u *authenticationv1.UserInfo) bool {
	var seen uint32
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "username":
			return jsonread.Once(&seen, 0) && d.StringInto(&u.Username)
		case "uid":
			return jsonread.Once(&seen, 1) && d.StringInto(&u.UID)
		case "groups":
			return jsonread.Once(&seen, 2) && d.Strings(&u.Groups)
		case "extra":
			if !jsonread.Once(&seen, 3) {
				return false
			}
			u.Extra = map[string]authenticationv1.ExtraValue{}
			return d.Object(func(key []byte) bool {
				if _, dup := u.Extra[string(key)]; dup {
					return false
				}
				var vs []string
				if !d.Strings(&vs) {
					return false
				}
				u.Extra[string(key)] = vs
				return true
			})
		}
		return false
	})
}

// jsonReader is the review's reader: jsonread's, with the review's
// fields.
type jsonReader struct{ jsonread.Reader }
