package webhook

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
// body, not copies.
func fastReview(body []byte) (ar admissionv1.AdmissionReview, object, oldObject map[string]any, ok bool) {
	d := jsonReader{data: body}
	seen := 0
	ok = d.object(func(key string) bool {
		switch key {
		case "kind":
			return d.once(&seen, 1) && d.stringInto(&ar.Kind)
		case "apiVersion":
			return d.once(&seen, 2) && d.stringInto(&ar.APIVersion)
		case "request":
			if !d.once(&seen, 4) {
				return false
			}
			ar.Request = &admissionv1.AdmissionRequest{}
			return d.request(ar.Request, &object, &oldObject)
		}
		return false
	})
	if !ok || !d.end() {
		return admissionv1.AdmissionReview{}, nil, nil, false
	}
	return ar, object, oldObject, true
}

// request decodes the AdmissionRequest.
func (d *jsonReader) request(req *admissionv1.AdmissionRequest, object, oldObject *map[string]any) bool {
	seen := 0
	return d.object(func(key string) bool {
		switch key {
		case "uid":
			var s string
			ok := d.once(&seen, 1<<0) && d.stringInto(&s)
			req.UID = types.UID(s)
			return ok
		case "kind":
			return d.once(&seen, 1<<1) && d.gvk(&req.Kind)
		case "resource":
			return d.once(&seen, 1<<2) && d.gvr(&req.Resource)
		case "subResource":
			return d.once(&seen, 1<<3) && d.stringInto(&req.SubResource)
		case "requestKind":
			if !d.once(&seen, 1<<4) {
				return false
			}
			if d.null() {
				return true
			}
			req.RequestKind = &metav1.GroupVersionKind{}
			return d.gvk(req.RequestKind)
		case "requestResource":
			if !d.once(&seen, 1<<5) {
				return false
			}
			if d.null() {
				return true
			}
			req.RequestResource = &metav1.GroupVersionResource{}
			return d.gvr(req.RequestResource)
		case "requestSubResource":
			return d.once(&seen, 1<<6) && d.stringInto(&req.RequestSubResource)
		case "name":
			return d.once(&seen, 1<<7) && d.stringInto(&req.Name)
		case "namespace":
			return d.once(&seen, 1<<8) && d.stringInto(&req.Namespace)
		case "operation":
			var s string
			ok := d.once(&seen, 1<<9) && d.stringInto(&s)
			req.Operation = admissionv1.Operation(s)
			return ok
		case "userInfo":
			return d.once(&seen, 1<<10) && d.userInfo(&req.UserInfo)
		case "object":
			return d.once(&seen, 1<<11) && d.rawObject(&req.Object.Raw, object)
		case "oldObject":
			return d.once(&seen, 1<<12) && d.rawObject(&req.OldObject.Raw, oldObject)
		case "dryRun":
			if !d.once(&seen, 1<<13) {
				return false
			}
			if d.null() {
				return true
			}
			var b bool
			if !d.boolInto(&b) {
				return false
			}
			req.DryRun = &b
			return true
		case "options":
			if !d.once(&seen, 1<<14) {
				return false
			}
			if d.null() {
				return true
			}
			start := d.skipSpace()
			d.depth = 2
			if _, ok := d.value(); !ok {
				return false
			}
			req.Options.Raw = d.data[start:d.pos]
			return true
		}
		return false
	})
}

// rawObject decodes an object (or null) into obj, keeping its bytes.
func (d *jsonReader) rawObject(raw *[]byte, obj *map[string]any) bool {
	if d.null() {
		return true
	}
	start := d.skipSpace()
	d.depth = 2 // inside the review and its request, as encoding/json counts
	v, ok := d.value()
	m, isMap := v.(map[string]any)
	if !ok || !isMap {
		return false // not an object: decodeReview's error
	}
	*raw, *obj = d.data[start:d.pos], m
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
	seen := 0
	return d.object(func(key string) bool {
		for i, n := range names {
			if key == n {
				return d.once(&seen, 1<<i) && d.stringInto(dst[i])
			}
		}
		return false
	})
}

func (d *jsonReader) userInfo(u *authenticationv1.UserInfo) bool {
	seen := 0
	return d.object(func(key string) bool {
		switch key {
		case "username":
			return d.once(&seen, 1) && d.stringInto(&u.Username)
		case "uid":
			return d.once(&seen, 2) && d.stringInto(&u.UID)
		case "groups":
			return d.once(&seen, 4) && d.strings(&u.Groups)
		case "extra":
			if !d.once(&seen, 8) {
				return false
			}
			u.Extra = map[string]authenticationv1.ExtraValue{}
			return d.object(func(key string) bool {
				if _, dup := u.Extra[key]; dup {
					return false
				}
				var vs []string
				if !d.strings(&vs) {
					return false
				}
				u.Extra[key] = vs
				return true
			})
		}
		return false
	})
}

// jsonReader reads JSON as encoding/json does; each method reports false
// when the input leaves the shape it takes (the caller then hands the
// whole input to encoding/json).
type jsonReader struct {
	data  []byte
	pos   int
	depth int
}

// maxJSONDepth is encoding/json's nesting limit: deeper input is its
// error to give.
const maxJSONDepth = 10000

func (d *jsonReader) skipSpace() int {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return d.pos
		}
	}
	return d.pos
}

// consume takes c (after white space).
func (d *jsonReader) consume(c byte) bool {
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == c {
		d.pos++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (d *jsonReader) end() bool { return d.skipSpace() == len(d.data) }

// once marks a field seen, refusing one seen before.
func (d *jsonReader) once(seen *int, bit int) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// literal takes a literal (true, false, null).
func (d *jsonReader) literal(lit string) bool {
	d.skipSpace()
	if len(d.data)-d.pos >= len(lit) && string(d.data[d.pos:d.pos+len(lit)]) == lit {
		d.pos += len(lit)
		return true
	}
	return false
}

// null takes a null if one is next.
func (d *jsonReader) null() bool { return d.literal("null") }

func (d *jsonReader) boolInto(b *bool) bool {
	switch {
	case d.literal("true"):
		*b = true
	case d.literal("false"):
		*b = false
	default:
		return false
	}
	return true
}

func (d *jsonReader) stringInto(s *string) bool {
	v, ok := d.str()
	*s = v
	return ok
}

// strings takes an array of strings.
func (d *jsonReader) strings(out *[]string) bool {
	if !d.consume('[') {
		return false
	}
	vs := []string{}
	if d.consume(']') {
		*out = vs
		return true
	}
	for {
		s, ok := d.str()
		if !ok {
			return false
		}
		vs = append(vs, s)
		if d.consume(']') {
			*out = vs
			return true
		}
		if !d.consume(',') {
			return false
		}
	}
}

// str takes a string. One with escapes or bytes that are not UTF-8 is
// unquoted by encoding/json.
func (d *jsonReader) str() (string, bool) {
	if !d.consume('"') {
		return "", false
	}
	start := d.pos
	plain := true
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			s := d.data[start:d.pos]
			d.pos++
			if plain {
				return string(s), true
			}
			var out string
			if err := json.Unmarshal(d.data[start-1:d.pos], &out); err != nil {
				return "", false
			}
			return out, true
		case c == '\\':
			plain = false
			d.pos += 2
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(d.data[d.pos:])
			if r == utf8.RuneError && size == 1 {
				plain = false
			}
			d.pos += size
		default:
			d.pos++
		}
	}
	return "", false
}

// object takes an object, handing each key to field, which takes the
// value.
func (d *jsonReader) object(field func(key string) bool) bool {
	if !d.consume('{') {
		return false
	}
	if d.consume('}') {
		return true
	}
	for {
		key, ok := d.str()
		if !ok || !d.consume(':') || !field(key) {
			return false
		}
		if d.consume('}') {
			return true
		}
		if !d.consume(',') {
			return false
		}
	}
}

// value takes any value, as encoding/json decodes it into an any: maps,
// slices, strings, float64 numbers, bools and nil.
func (d *jsonReader) value() (any, bool) {
	d.skipSpace()
	if d.pos >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		if d.depth++; d.depth > maxJSONDepth {
			return nil, false
		}
		d.pos++
		m := map[string]any{}
		if d.consume('}') {
			d.depth--
			return m, true
		}
		for {
			key, ok := d.str()
			if !ok || !d.consume(':') {
				return nil, false
			}
			v, ok := d.value()
			if !ok {
				return nil, false
			}
			m[key] = v
			if d.consume('}') {
				d.depth--
				return m, true
			}
			if !d.consume(',') {
				return nil, false
			}
		}
	case c == '[':
		if d.depth++; d.depth > maxJSONDepth {
			return nil, false
		}
		d.pos++
		vs := []any{}
		if d.consume(']') {
			d.depth--
			return vs, true
		}
		for {
			v, ok := d.value()
			if !ok {
				return nil, false
			}
			vs = append(vs, v)
			if d.consume(']') {
				d.depth--
				return vs, true
			}
			if !d.consume(',') {
				return nil, false
			}
		}
	case c == '"':
		return d.str()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	return nil, false
}

// number takes a number as JSON writes them, into a float64.
func (d *jsonReader) number() (any, bool) {
	start := d.pos
	if d.data[d.pos] == '-' {
		d.pos++
	}
	digits := func() int {
		n := 0
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			d.pos++
			n++
		}
		return n
	}
	if d.pos < len(d.data) && d.data[d.pos] == '0' {
		d.pos++
	} else if digits() == 0 {
		return nil, false
	}
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		d.pos++
		if digits() == 0 {
			return nil, false
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	f, err := strconv.ParseFloat(string(d.data[start:d.pos]), 64)
	if err != nil {
		return nil, false // out of range: encoding/json's error
	}
	return f, true
}
