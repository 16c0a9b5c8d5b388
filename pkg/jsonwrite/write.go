// Package jsonwrite writes JSON byte for byte as encoding/json writes it,
// for the encoders of Verdict's hot outputs (a result event, an
// AdmissionReview answer) that write without reflection. Each encoder is
// held to encoding/json's bytes by its own fuzz test
// (events.FuzzEncodeResultEvent, webhook.FuzzEncodeReview).
package jsonwrite

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// plain marks the bytes written as they are: ASCII from space on, but for
// the quote, the backslash and the HTML characters.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// String appends s quoted as encoding/json quotes it: HTML characters,
// U+2028 and U+2029 escaped, bytes that are not UTF-8 replaced by U+FFFD.
func String(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Runs of plain bytes first, a table lookup each.
		for i < len(s) && plain[s[i]] {
			i++
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
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

// OptionalString appends field (its key, colon included, and any comma
// before it) and s when s is not empty, as encoding/json writes an
// omitempty string.
func OptionalString(b []byte, field, s string) []byte {
	if s == "" {
		return b
	}
	return String(append(b, field...), s)
}
