package queue

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// tokenSafe marks the bytes that EncodeToken keeps as they are.
var tokenSafe = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	t['-'], t['_'] = true, true
	return t
}()

const upperHex = "0123456789ABCDEF"

// EncodeToken turns any string (a Kubernetes name, a uid, a policy key such
// as "namespace/name") into one NATS subject token, reversibly:
//
//   - ASCII letters, digits, '-' and '_' stay as they are;
//   - '.' becomes '~' (Kubernetes names are full of dots, so they stay readable);
//   - every other byte becomes '%' and two upper-case hex digits ("/" is "%2F",
//     "~" is "%7E", "%" is "%25", a space is "%20", UTF-8 is escaped bytewise);
//   - the empty string becomes a lone "%", which no other input produces.
//
// The result is never empty and never contains '.', '*', '>', whitespace or
// control bytes, so it is always a single literal token. DecodeToken reverses
// it and rejects every token EncodeToken would not produce, so a key has
// exactly one subject.
func EncodeToken(s string) string {
	if s == "" {
		return "%"
	}
	clean := true
	for i := 0; i < len(s); i++ {
		if !tokenSafe[s[i]] {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	return string(AppendEncodedToken(make([]byte, 0, len(s)+8), s))
}

// AppendEncodedToken appends EncodeToken(s) to b.
func AppendEncodedToken(b []byte, s string) []byte {
	if s == "" {
		return append(b, '%')
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case tokenSafe[c]:
			b = append(b, c)
		case c == '.':
			b = append(b, '~')
		default:
			b = append(b, '%', upperHex[c>>4], upperHex[c&0x0f])
		}
	}
	return b
}

// DecodeToken reverses EncodeToken. It fails with ErrInvalidToken for a
// token EncodeToken cannot produce (a bad escape, lower-case hex, an escaped
// byte that needs no escape, a byte outside the alphabet).
func DecodeToken(tok string) (string, error) {
	if tok == "%" {
		return "", nil
	}
	if tok == "" {
		return "", fmt.Errorf("%w: empty token", ErrInvalidToken)
	}
	clean := true
	for i := 0; i < len(tok); i++ {
		if !tokenSafe[tok[i]] {
			clean = false
			break
		}
	}
	if clean {
		return tok, nil
	}
	b := make([]byte, 0, len(tok))
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case tokenSafe[c]:
			b = append(b, c)
		case c == '~':
			b = append(b, '.')
		case c == '%':
			if i+2 >= len(tok) {
				return "", fmt.Errorf("%w: %q: short escape at %d", ErrInvalidToken, tok, i)
			}
			hi, lo := unhex(tok[i+1]), unhex(tok[i+2])
			if hi < 0 || lo < 0 {
				return "", fmt.Errorf("%w: %q: bad escape at %d", ErrInvalidToken, tok, i)
			}
			v := byte(hi<<4 | lo)
			if tokenSafe[v] || v == '.' {
				return "", fmt.Errorf("%w: %q: needless escape at %d", ErrInvalidToken, tok, i)
			}
			b = append(b, v)
			i += 2
		default:
			return "", fmt.Errorf("%w: %q: byte %q at %d", ErrInvalidToken, tok, c, i)
		}
	}
	return string(b), nil
}

// unhex decodes one upper-case hex digit, or returns -1.
func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// MaxSubjectLen bounds every subject a message is published to. A
// subject goes on a protocol line (PUB or HPUB, with the reply subject
// and the sizes) that nats-server refuses past its max_control_line, 4 KiB
// by default, by dropping the client; nats.go then closes the connection
// for good. Message.Validate refuses a longer subject before it is sent
// (ErrInvalidSubject).
const MaxSubjectLen = 1024

// maxKeyTokenLen bounds the encoded key of a work subject or a schedule
// target: WorkSubject and ScheduleTarget shorten a longer key (keyToken).
const maxKeyTokenLen = 512

// keyToken is EncodeToken(key), or for a key whose token would be longer
// than maxKeyTokenLen, the token of a shortened key: the key's first bytes
// (as many as fit escaped) and "#" followed by the hex SHA-256 of the whole
// key. Two keys share a token only if they share a hash; the subject still
// names the policy and rule a key starts with. ParseWorkSubject gives the
// shortened key back.
func keyToken(key string) string {
	tok := EncodeToken(key)
	if len(tok) <= maxKeyTokenLen {
		return tok
	}
	sum := sha256.Sum256([]byte(key))
	suffix := "#" + hex.EncodeToString(sum[:])
	room := maxKeyTokenLen - 3*len(suffix) // '#' is escaped: 3 bytes
	var prefix []byte
	for i := 0; i < len(key); i++ {
		n := 3
		if tokenSafe[key[i]] || key[i] == '.' {
			n = 1
		}
		if room -= n; room < 0 {
			break
		}
		prefix = append(prefix, key[i])
	}
	return EncodeToken(string(prefix) + suffix)
}

// MsgID is a deterministic Nats-Msg-Id for a message made from parts (for
// example resource uid, resourceVersion, policy uid, policy resourceVersion,
// rule): the hex SHA-256 of the length-prefixed parts, cut to 128 bits.
// Length prefixes keep ("ab","c") and ("a","bc") apart.
func MsgID(parts ...string) string {
	var out [msgIDLen]byte
	return string(AppendMsgID(out[:0], parts...))
}

// msgIDLen is the length of every MsgID.
const msgIDLen = 32

// AppendMsgID appends MsgID(parts...) to b.
func AppendMsgID(b []byte, parts ...string) []byte {
	// The parts, each after its length as a uvarint, hashed at once from
	// a buffer on the stack when they fit (a result's id is about 150
	// bytes); the bytes hashed, and so the ids, are the same either way.
	var stack [512]byte
	buf := stack[:0]
	for _, p := range parts {
		buf = binary.AppendUvarint(buf, uint64(len(p)))
		buf = append(buf, p...)
	}
	sum := sha256.Sum256(buf)
	return hex.AppendEncode(b, sum[:msgIDLen/2])
}

// validSubject reports whether s is a literal subject a message can be
// published to: non-empty tokens, no wildcards, no whitespace, at most
// MaxSubjectLen bytes.
func validSubject(s string) bool {
	if s == "" || len(s) > MaxSubjectLen {
		return false
	}
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			tok := s[start:i]
			if tok == "" || tok == "*" || tok == ">" {
				return false
			}
			start = i + 1
			continue
		}
		switch s[i] {
		case ' ', '\t', '\r', '\n', '\f', 0:
			return false
		}
	}
	return true
}
