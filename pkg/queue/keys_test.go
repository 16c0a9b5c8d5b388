package queue

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEncodeToken(t *testing.T) {
	tests := map[string]struct {
		in, want string
	}{
		"plain name":        {"nginx", "nginx"},
		"uid":               {"7c9e6679-7425-40de-944b-e07fc1f90ae7", "7c9e6679-7425-40de-944b-e07fc1f90ae7"},
		"dotted name":       {"kube-proxy.v1.2", "kube-proxy~v1~2"},
		"namespaced policy": {"team-a/require-labels", "team-a%2Frequire-labels"},
		"rule key":          {"ns/pol/check.labels", "ns%2Fpol%2Fcheck~labels"},
		"empty":             {"", "%"},
		"wildcards":         {"*.>", "%2A~%3E"},
		"whitespace":        {"a b\tc\n", "a%20b%09c%0A"},
		"escape chars":      {"~%", "%7E%25"},
		"utf8":              {"é", "%C3%A9"},
		"underscore":        {"a_b-C", "a_b-C"},
		"nul":               {"\x00", "%00"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := EncodeToken(tc.in)
			if got != tc.want {
				t.Fatalf("EncodeToken(%q) = %q, want %q", tc.in, got, tc.want)
			}
			back, err := DecodeToken(got)
			if err != nil || back != tc.in {
				t.Fatalf("DecodeToken(%q) = %q, %v; want %q", got, back, err, tc.in)
			}
		})
	}
}

func TestDecodeTokenRejects(t *testing.T) {
	tests := map[string]string{
		"empty":           "",
		"short escape":    "ab%4",
		"lone percent":    "a%",
		"lower hex":       "%2f",
		"needless escape": "%41",
		"escaped dot":     "%2E",
		"dot":             "a.b",
		"star":            "*",
		"gt":              ">",
		"space":           "a b",
		"bad hex":         "%G1",
	}
	for name, tok := range tests {
		t.Run(name, func(t *testing.T) {
			if got, err := DecodeToken(tok); !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("DecodeToken(%q) = %q, %v; want ErrInvalidToken", tok, got, err)
			}
		})
	}
}

func TestMsgID(t *testing.T) {
	a, b := MsgID("ab", "c"), MsgID("a", "bc")
	if a == b {
		t.Fatal("MsgID does not separate parts")
	}
	if x1, x2 := MsgID("x", "y"), MsgID("x", "y"); x1 != x2 || len(a) != 32 {
		t.Fatalf("MsgID not deterministic or wrong length: %q", a)
	}
	// Ids are compared across versions (a rolling upgrade publishes the
	// same result from old and new replicas): pinned.
	if got := MsgID("result", "uid-1", "7", "policy-uid", "3", "request-uid"); got != "16495b2f0623c3089e6ae667b7430c09" {
		t.Fatalf("MsgID changed: %s", got)
	}
	// Parts of every length, past the stack buffer too.
	rng := rand.New(rand.NewPCG(3, 3))
	for range 200 {
		parts := make([]string, rng.IntN(8))
		for i := range parts {
			parts[i] = strings.Repeat("é", rng.IntN(200))
		}
		h := sha256.New()
		for _, p := range parts {
			h.Write(binary.AppendUvarint(nil, uint64(len(p))))
			h.Write([]byte(p))
		}
		if want := hex.EncodeToString(h.Sum(nil)[:16]); MsgID(parts...) != want {
			t.Fatalf("MsgID(%d parts) = %s, want %s", len(parts), MsgID(parts...), want)
		}
	}
}

func TestValidSubject(t *testing.T) {
	tests := map[string]bool{
		"app.work.scan.a": true, "": false, "a..b": false, ".a": false, "a.": false,
		"a.*.b": false, "a.>": false, "a b": false, "a.b\t": false, "a.b*c": true,
	}
	for s, want := range tests {
		if got := validSubject(s); got != want {
			t.Errorf("validSubject(%q) = %v, want %v", s, got, want)
		}
	}
}

func FuzzTokenRoundTrip(f *testing.F) {
	for _, s := range []string{"", "a.b", "ns/name", "%", "~", "*", ">", " ", "é", "\x00\xff", "%2E", "a~b"} {
		f.Add(s)
	}
	f.Add(strings.Repeat("\xff.", 400)) // a token past MaxSubjectLen
	f.Fuzz(func(t *testing.T, s string) {
		tok := EncodeToken(s)
		if tok == "" || strings.ContainsAny(tok, ".*> \t\r\n") || !utf8.ValidString(tok) {
			t.Fatalf("EncodeToken(%q) = %q: not a safe token", s, tok)
		}
		for i := 0; i < len(tok); i++ {
			if tok[i] < 0x21 || tok[i] > 0x7e {
				t.Fatalf("EncodeToken(%q) = %q: byte %#x", s, tok, tok[i])
			}
		}
		// A token is one literal subject token; how long a subject it makes
		// is bounded where keys become subjects (keyToken), so the check of
		// a whole subject is made on the bounded form when the token is long.
		subject := "app.results." + tok + ".x"
		if len(subject) > MaxSubjectLen {
			subject = "app.results." + keyToken(s) + ".x"
		}
		if !validSubject(subject) {
			t.Fatalf("token %q does not make a valid subject (%q)", tok, subject)
		}
		back, err := DecodeToken(tok)
		if err != nil || back != s {
			t.Fatalf("round trip %q -> %q -> %q, %v", s, tok, back, err)
		}
		// Decoding arbitrary input: whatever decodes must encode back to
		// the same token (one subject per key).
		if dec, err := DecodeToken(s); err == nil && EncodeToken(dec) != s {
			t.Fatalf("DecodeToken(%q) = %q, which encodes to %q", s, dec, EncodeToken(dec))
		}
	})
}

// FuzzAppendEncodedToken holds AppendEncodedToken to EncodeToken, and
// AppendResultSubject to resultSubject.
func FuzzAppendEncodedToken(f *testing.F) {
	f.Add("ns/p.x", "uid-1")
	f.Add("", "%~ \xff")
	f.Fuzz(func(t *testing.T, a, b string) {
		if got := string(AppendEncodedToken([]byte("x"), a)); got != "x"+EncodeToken(a) {
			t.Fatalf("AppendEncodedToken(%q) = %q, want x%q", a, got, EncodeToken(a))
		}
		if got := string(AppendMsgID([]byte("y"), a, b)); got != "y"+MsgID(a, b) {
			t.Fatalf("AppendMsgID = %q, want y%q", got, MsgID(a, b))
		}
	})
}
