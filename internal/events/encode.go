package events

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// EncodeResultEvent encodes a result as json.Marshal does, byte for byte,
// without reflection: the webhook publishes one per policy per admission.
// FuzzEncodeResultEvent holds the two to the same bytes; an event
// json.Marshal would refuse (a timestamp outside years 0 to 9999, or a
// zone 24 hours or more from UTC) is handed to it for its error.
func EncodeResultEvent(ev ResultEvent) ([]byte, error) {
	_, offset := ev.Timestamp.Zone()
	if y := ev.Timestamp.Year(); y < 0 || y > 9999 || offset <= -24*3600 || offset >= 24*3600 {
		return json.Marshal(ev)
	}
	r, p := ev.Resource, ev.Policy
	size := 256 + len(r.APIVersion) + len(r.Kind) + len(r.Namespace) + len(r.Name) + len(r.UID) + len(r.ResourceVersion) +
		len(p.Key) + len(p.Kind) + len(p.UID) + len(p.ResourceVersion) + len(ev.Category) + len(ev.Severity) + len(ev.RequestUID) + len(ev.Retracted)
	for _, rr := range ev.Rules {
		size += 64 + len(rr.Name) + len(rr.Type) + len(rr.Status) + len(rr.Message) + len(rr.Exception)
	}
	b := make([]byte, 0, size)
	b = append(b, `{"resource":{"apiVersion":`...)
	b = appendJSONString(b, r.APIVersion)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, r.Kind)
	b = appendOptional(b, `,"namespace":`, r.Namespace)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, r.Name)
	b = appendOptional(b, `,"uid":`, r.UID)
	b = appendOptional(b, `,"resourceVersion":`, r.ResourceVersion)
	b = append(b, `},"policy":{"key":`...)
	b = appendJSONString(b, p.Key)
	b = appendOptional(b, `,"kind":`, p.Kind)
	b = appendOptional(b, `,"uid":`, p.UID)
	b = appendOptional(b, `,"resourceVersion":`, p.ResourceVersion)
	b = append(b, `},"rules":`...)
	if ev.Rules == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, rr := range ev.Rules {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"name":`...)
			b = appendJSONString(b, rr.Name)
			b = append(b, `,"type":`...)
			b = appendJSONString(b, string(rr.Type))
			b = append(b, `,"status":`...)
			b = appendJSONString(b, string(rr.Status))
			b = appendOptional(b, `,"message":`, rr.Message)
			b = appendOptional(b, `,"exception":`, rr.Exception)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = appendOptional(b, `,"category":`, ev.Category)
	b = appendOptional(b, `,"severity":`, ev.Severity)
	b = append(b, `,"scored":`...)
	b = strconv.AppendBool(b, ev.Scored)
	b = append(b, `,"timestamp":`...)
	b = append(b, '"')
	b = ev.Timestamp.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = append(b, `,"admission":`...)
	b = strconv.AppendBool(b, ev.Admission)
	b = appendOptional(b, `,"requestUid":`, ev.RequestUID)
	b = appendOptional(b, `,"retracted":`, ev.Retracted)
	return append(b, '}'), nil
}

// appendOptional appends the field when s is not empty (omitempty).
func appendOptional(b []byte, field, s string) []byte {
	if s == "" {
		return b
	}
	return appendJSONString(append(b, field...), s)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s quoted as encoding/json quotes it: HTML
// characters, U+2028 and U+2029 escaped, bytes that are not UTF-8
// replaced by U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
