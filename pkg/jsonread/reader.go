// Package jsonread reads JSON as encoding/json reads it, for decoders
// with a direct path for the shape Verdict's own hot inputs take (a
// result message, an AdmissionReview): each method reports false when the
// input leaves the shape it takes, and the decoder then hands the whole
// input to encoding/json, whose answer is the answer. A direct path is
// held to encoding/json's answer by its own fuzz test
// (events.FuzzDecodeResultEvent, webhook.FuzzDecodeReview).
package jsonread

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// Reader reads Data from Pos.
type Reader struct {
	Data []byte
	// Text, when set, is Data as a string (string(Data), made once): the
	// strings read without escapes are then slices of it instead of
	// copies, which saves an allocation per key and string value. They
	// keep all of Text alive, so set it only when what is read lives no
	// longer than the input would (the objects of one admission review);
	// a long-lived cache keyed by them must clone its keys.
	Text string
	Pos  int
	// Depth is the nesting Value counts, as encoding/json does (set it
	// to the depth of the value about to be read).
	Depth int
}

// MaxDepth is encoding/json's nesting limit: deeper input is its error to
// give.
const MaxDepth = 10000

// Space skips white space and returns the position reached.
func (r *Reader) Space() int {
	for r.Pos < len(r.Data) {
		switch r.Data[r.Pos] {
		case ' ', '\t', '\n', '\r':
			r.Pos++
		default:
			return r.Pos
		}
	}
	return r.Pos
}

// Byte takes c (after white space).
func (r *Reader) Byte(c byte) bool {
	r.Space()
	if r.Pos < len(r.Data) && r.Data[r.Pos] == c {
		r.Pos++
		return true
	}
	return false
}

// End reports whether only white space is left.
func (r *Reader) End() bool { return r.Space() == len(r.Data) }

// Literal takes a literal (true, false, null).
func (r *Reader) Literal(lit string) bool {
	r.Space()
	if len(r.Data)-r.Pos >= len(lit) && string(r.Data[r.Pos:r.Pos+len(lit)]) == lit {
		r.Pos += len(lit)
		return true
	}
	return false
}

// Null takes a null if one is next.
func (r *Reader) Null() bool { return r.Literal("null") }

// Bool takes true or false.
func (r *Reader) Bool() (v, ok bool) {
	switch {
	case r.Literal("true"):
		return true, true
	case r.Literal("false"):
		return false, true
	}
	return false, false
}

// BoolInto takes a boolean into b.
func (r *Reader) BoolInto(b *bool) bool {
	v, ok := r.Bool()
	*b = v
	return ok
}

// Uint64Into takes a whole number without sign, fraction or exponent into
// n; anything else, and a number past a uint64, leaves the direct path.
func (r *Reader) Uint64Into(n *uint64) bool {
	r.Space()
	start := r.Pos
	var v uint64
	for r.Pos < len(r.Data) && r.Data[r.Pos] >= '0' && r.Data[r.Pos] <= '9' {
		d := uint64(r.Data[r.Pos] - '0')
		if v > (math.MaxUint64-d)/10 {
			return false
		}
		v = v*10 + d
		r.Pos++
	}
	if digits := r.Pos - start; digits == 0 || digits > 1 && r.Data[start] == '0' {
		return false
	}
	if r.Pos < len(r.Data) {
		switch r.Data[r.Pos] {
		case '.', 'e', 'E':
			return false
		}
	}
	*n = v
	return true
}

// StringInto takes a string into s.
func (r *Reader) StringInto(s *string) bool {
	v, ok := r.Str()
	*s = v
	return ok
}

// Str takes a string. One with escapes or bytes that are not UTF-8 is
// unquoted by encoding/json.
func (r *Reader) Str() (string, bool) {
	if !r.Byte('"') {
		return "", false
	}
	start := r.Pos
	plain := true
	for r.Pos < len(r.Data) {
		c := r.Data[r.Pos]
		switch {
		case c == '"':
			s := r.Data[start:r.Pos]
			r.Pos++
			if plain {
				if len(r.Text) == len(r.Data) && r.Text != "" {
					return r.Text[start : r.Pos-1], true
				}
				return string(s), true
			}
			var out string
			if err := json.Unmarshal(r.Data[start-1:r.Pos], &out); err != nil {
				return "", false
			}
			return out, true
		case c == '\\':
			plain = false
			r.Pos += 2
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			rn, size := utf8.DecodeRune(r.Data[r.Pos:])
			if rn == utf8.RuneError && size == 1 {
				plain = false
			}
			r.Pos += size
		default:
			r.Pos++
		}
	}
	return "", false
}

// Raw takes a string without escapes, returned as a slice of Data (no
// copy, no check of its UTF-8): for a value only looked at, never kept.
// One with escapes leaves the direct path.
func (r *Reader) Raw() ([]byte, bool) {
	if !r.Byte('"') {
		return nil, false
	}
	start := r.Pos
	for r.Pos < len(r.Data) {
		switch c := r.Data[r.Pos]; {
		case c == '"':
			r.Pos++
			return r.Data[start : r.Pos-1], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
		r.Pos++
	}
	return nil, false
}

// Key takes a member's key and its colon: plain ASCII without escapes
// (the names of known fields); anything else leaves the direct path. The
// key is a slice of Data: switch on string(key), which does not allocate.
func (r *Reader) Key() ([]byte, bool) {
	if !r.Byte('"') {
		return nil, false
	}
	start := r.Pos
	for r.Pos < len(r.Data) {
		c := r.Data[r.Pos]
		if c == '"' {
			k := r.Data[start:r.Pos]
			r.Pos++
			return k, r.Byte(':')
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			return nil, false
		}
		r.Pos++
	}
	return nil, false
}

// Object takes an object of known fields, handing each key (Key) to
// field, which takes the value.
func (r *Reader) Object(field func(key []byte) bool) bool {
	if !r.Byte('{') {
		return false
	}
	if r.Byte('}') {
		return true
	}
	for {
		key, ok := r.Key()
		if !ok || !field(key) {
			return false
		}
		if r.Byte('}') {
			return true
		}
		if !r.Byte(',') {
			return false
		}
	}
}

// Once marks bit in seen, refusing a key given twice (encoding/json
// merges such objects).
func Once(seen *uint32, bit uint32) bool {
	if *seen&(1<<bit) != 0 {
		return false
	}
	*seen |= 1 << bit
	return true
}

// Strings takes an array of strings (empty, not nil, for []).
func (r *Reader) Strings(out *[]string) bool {
	if !r.Byte('[') {
		return false
	}
	vs := []string{}
	if r.Byte(']') {
		*out = vs
		return true
	}
	for {
		s, ok := r.Str()
		if !ok {
			return false
		}
		vs = append(vs, s)
		if r.Byte(']') {
			*out = vs
			return true
		}
		if !r.Byte(',') {
			return false
		}
	}
}

// Value takes any value, as encoding/json decodes it into an any: maps,
// slices, strings, float64 numbers, bools and nil.
func (r *Reader) Value() (any, bool) {
	r.Space()
	if r.Pos >= len(r.Data) {
		return nil, false
	}
	switch c := r.Data[r.Pos]; {
	case c == '{':
		if r.Depth++; r.Depth > MaxDepth {
			return nil, false
		}
		r.Pos++
		m := map[string]any{}
		if r.Byte('}') {
			r.Depth--
			return m, true
		}
		for {
			key, ok := r.Str()
			if !ok || !r.Byte(':') {
				return nil, false
			}
			v, ok := r.Value()
			if !ok {
				return nil, false
			}
			m[key] = v
			if r.Byte('}') {
				r.Depth--
				return m, true
			}
			if !r.Byte(',') {
				return nil, false
			}
		}
	case c == '[':
		if r.Depth++; r.Depth > MaxDepth {
			return nil, false
		}
		r.Pos++
		vs := []any{}
		if r.Byte(']') {
			r.Depth--
			return vs, true
		}
		for {
			v, ok := r.Value()
			if !ok {
				return nil, false
			}
			vs = append(vs, v)
			if r.Byte(']') {
				r.Depth--
				return vs, true
			}
			if !r.Byte(',') {
				return nil, false
			}
		}
	case c == '"':
		return r.Str()
	case c == 't':
		return true, r.Literal("true")
	case c == 'f':
		return false, r.Literal("false")
	case c == 'n':
		return nil, r.Literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return r.number()
	}
	return nil, false
}

// number takes a number as JSON writes them, into a float64.
func (r *Reader) number() (any, bool) {
	start := r.Pos
	if r.Data[r.Pos] == '-' {
		r.Pos++
	}
	digits := func() int {
		n := 0
		for r.Pos < len(r.Data) && r.Data[r.Pos] >= '0' && r.Data[r.Pos] <= '9' {
			r.Pos++
			n++
		}
		return n
	}
	if r.Pos < len(r.Data) && r.Data[r.Pos] == '0' {
		r.Pos++
	} else if digits() == 0 {
		return nil, false
	}
	if r.Pos < len(r.Data) && r.Data[r.Pos] == '.' {
		r.Pos++
		if digits() == 0 {
			return nil, false
		}
	}
	if r.Pos < len(r.Data) && (r.Data[r.Pos] == 'e' || r.Data[r.Pos] == 'E') {
		r.Pos++
		if r.Pos < len(r.Data) && (r.Data[r.Pos] == '+' || r.Data[r.Pos] == '-') {
			r.Pos++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	f, err := strconv.ParseFloat(string(r.Data[start:r.Pos]), 64)
	if err != nil {
		return nil, false // out of range: encoding/json's error
	}
	return f, true
}
