package events

import (
	"encoding/json"
	"time"
	"unicode/utf8"
)

// DecodeResultEvent decodes one VERDICT_RESULTS message as json.Unmarshal
// would, about five times faster: a reporter replica reads every result
// of the stream when it starts. Messages as Verdict writes them (each
// field under its own name, once, no nulls) are read directly; anything
// else (an unknown field, a field named in another case, one given twice,
// a null, a syntax error) is handed to encoding/json, whose answer is
// then the answer. FuzzDecodeResultEvent holds the two to the same result.
func DecodeResultEvent(data []byte) (ResultEvent, error) {
	var ev ResultEvent
	d := fastDecoder{data: data}
	if d.resultEvent(&ev) {
		return ev, nil
	}
	ev = ResultEvent{}
	err := json.Unmarshal(data, &ev)
	return ev, err
}

// fastDecoder reads the common shape of a message; each method reports
// false when the input leaves that shape.
type fastDecoder struct {
	data []byte
	pos  int
}

func (d *fastDecoder) space() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// byte consumes c (after white space).
func (d *fastDecoder) byte(c byte) bool {
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == c {
		d.pos++
		return true
	}
	return false
}

// str reads a string. One with escapes is unquoted by encoding/json (the
// rare case: json.Marshal escapes <, > and &).
func (d *fastDecoder) str() (string, bool) {
	if !d.byte('"') {
		return "", false
	}
	start := d.pos
	ascii, escaped := true, false
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			raw := d.data[start:d.pos]
			d.pos++
			switch {
			case escaped:
				var s string
				if json.Unmarshal(d.data[start-1:d.pos], &s) != nil {
					return "", false
				}
				return s, true
			case !ascii && !utf8.Valid(raw):
				return "", false // encoding/json replaces invalid bytes
			}
			return string(raw), true
		case c == '\\':
			escaped = true
			d.pos += 2
			continue
		case c < 0x20:
			return "", false
		case c >= 0x80:
			ascii = false
		}
		d.pos++
	}
	return "", false
}

func (d *fastDecoder) boolean() (bool, bool) {
	d.space()
	rest := d.data[d.pos:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		d.pos += 4
		return true, true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		d.pos += 5
		return false, true
	}
	return false, false
}

// open starts an object: false when the input has none; empty when it
// is {}.
func (d *fastDecoder) open() (ok, empty bool) {
	if !d.byte('{') {
		return false, false
	}
	return true, d.byte('}')
}

// key reads a member's key and its colon: plain ASCII without escapes
// (Verdict's names), anything else leaves the direct path.
func (d *fastDecoder) key() ([]byte, bool) {
	if !d.byte('"') {
		return nil, false
	}
	start := d.pos
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		if c == '"' {
			k := d.data[start:d.pos]
			d.pos++
			return k, d.byte(':')
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			return nil, false
		}
		d.pos++
	}
	return nil, false
}

// next moves past a member: true when another follows, false at the
// object's end; ok is false when neither follows.
func (d *fastDecoder) next() (more, ok bool) {
	if d.byte(',') {
		return true, true
	}
	return false, d.byte('}')
}

// once marks bit in seen, failing for a key given twice.
func once(seen *uint32, bit uint32) bool {
	if *seen&(1<<bit) != 0 {
		return false
	}
	*seen |= 1 << bit
	return true
}

// The members of each object, by bit: a key given twice leaves the
// direct path (encoding/json merges such objects).
func (d *fastDecoder) resultEvent(ev *ResultEvent) bool {
	ok, empty := d.open()
	if !ok {
		return false
	}
	var seen uint32
	for more := !empty; more; {
		k, ok := d.key()
		if !ok {
			return false
		}
		switch string(k) {
		case "resource":
			ok = once(&seen, 0) && d.resourceRef(&ev.Resource)
		case "policy":
			ok = once(&seen, 1) && d.policyRef(&ev.Policy)
		case "rules":
			ok = once(&seen, 2) && d.rules(&ev.Rules)
		case "category":
			ok = once(&seen, 3) && d.into(&ev.Category)
		case "severity":
			ok = once(&seen, 4) && d.into(&ev.Severity)
		case "scored":
			ok = once(&seen, 5) && d.boolInto(&ev.Scored)
		case "timestamp":
			ok = once(&seen, 6) && d.time(&ev.Timestamp)
		case "admission":
			ok = once(&seen, 7) && d.boolInto(&ev.Admission)
		case "requestUid":
			ok = once(&seen, 8) && d.into(&ev.RequestUID)
		case "retracted":
			ok = once(&seen, 9) && d.into(&ev.Retracted)
		default:
			return false
		}
		if !ok {
			return false
		}
		if more, ok = d.next(); !ok {
			return false
		}
	}
	d.space()
	return d.pos == len(d.data)
}

func (d *fastDecoder) resourceRef(r *ResourceRef) bool {
	ok, empty := d.open()
	if !ok {
		return false
	}
	var seen uint32
	for more := !empty; more; {
		k, ok := d.key()
		if !ok {
			return false
		}
		switch string(k) {
		case "apiVersion":
			ok = once(&seen, 0) && d.into(&r.APIVersion)
		case "kind":
			ok = once(&seen, 1) && d.into(&r.Kind)
		case "namespace":
			ok = once(&seen, 2) && d.into(&r.Namespace)
		case "name":
			ok = once(&seen, 3) && d.into(&r.Name)
		case "uid":
			ok = once(&seen, 4) && d.into(&r.UID)
		case "resourceVersion":
			ok = once(&seen, 5) && d.into(&r.ResourceVersion)
		default:
			return false
		}
		if !ok {
			return false
		}
		if more, ok = d.next(); !ok {
			return false
		}
	}
	return true
}

func (d *fastDecoder) policyRef(p *PolicyRef) bool {
	ok, empty := d.open()
	if !ok {
		return false
	}
	var seen uint32
	for more := !empty; more; {
		k, ok := d.key()
		if !ok {
			return false
		}
		switch string(k) {
		case "key":
			ok = once(&seen, 0) && d.into(&p.Key)
		case "kind":
			ok = once(&seen, 1) && d.into(&p.Kind)
		case "uid":
			ok = once(&seen, 2) && d.into(&p.UID)
		case "resourceVersion":
			ok = once(&seen, 3) && d.into(&p.ResourceVersion)
		default:
			return false
		}
		if !ok {
			return false
		}
		if more, ok = d.next(); !ok {
			return false
		}
	}
	return true
}

// rules reads the rules: a list of objects, or null (no rules).
func (d *fastDecoder) rules(out *[]RuleResult) bool {
	d.space()
	if rest := d.data[d.pos:]; len(rest) >= 4 && string(rest[:4]) == "null" {
		d.pos += 4
		*out = nil
		return true
	}
	if !d.byte('[') {
		return false
	}
	rules := []RuleResult{}
	if !d.byte(']') {
		for {
			rules = append(rules, RuleResult{})
			if !d.rule(&rules[len(rules)-1]) {
				return false
			}
			if d.byte(',') {
				continue
			}
			if !d.byte(']') {
				return false
			}
			break
		}
	}
	*out = rules
	return true
}

func (d *fastDecoder) rule(r *RuleResult) bool {
	ok, empty := d.open()
	if !ok {
		return false
	}
	var seen uint32
	for more := !empty; more; {
		k, ok := d.key()
		if !ok {
			return false
		}
		switch string(k) {
		case "name":
			ok = once(&seen, 0) && d.into(&r.Name)
		case "type":
			ok = once(&seen, 1) && d.into((*string)(&r.Type))
		case "status":
			ok = once(&seen, 2) && d.into((*string)(&r.Status))
		case "message":
			ok = once(&seen, 3) && d.into(&r.Message)
		case "exception":
			ok = once(&seen, 4) && d.into(&r.Exception)
		default:
			return false
		}
		if !ok {
			return false
		}
		if more, ok = d.next(); !ok {
			return false
		}
	}
	return true
}

// into reads a string into s.
func (d *fastDecoder) into(s *string) bool {
	v, ok := d.str()
	*s = v
	return ok
}

// boolInto reads a boolean into b.
func (d *fastDecoder) boolInto(b *bool) bool {
	v, ok := d.boolean()
	*b = v
	return ok
}

// time reads a time as time.Time's UnmarshalJSON does.
func (d *fastDecoder) time(t *time.Time) bool {
	d.space()
	start := d.pos
	if _, ok := d.str(); !ok {
		return false
	}
	return t.UnmarshalJSON(d.data[start:d.pos]) == nil
}
