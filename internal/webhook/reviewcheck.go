package webhook

import (
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/verdict-dev/verdict/pkg/engine/document"
)

// A review's identifiers become subjects, message ids and the fields of
// durable work items: they are checked as the API server makes them before
// anything else reads them (DESIGN.md invariant 12). An AdmissionReview the
// API server sends always passes; whatever fails was forged or broken.

// Limits on identifiers, as the API server makes them.
const (
	// maxUIDLen bounds request and object uids: the API server's are
	// UUIDs (36 bytes); 128 leaves room for another server's format.
	maxUIDLen = 128
	// maxNamespaceLen is a DNS-1123 label's length.
	maxNamespaceLen = 63
	// maxNameLen bounds names. Most kinds' names are DNS-1123 subdomains
	// (253 bytes); RBAC's are any path segment, which the API does not
	// bound, and none in practice comes near 1 KiB.
	maxNameLen = 1024
	// maxResourceVersionLen bounds resource versions (etcd's are decimal
	// revisions, 20 digits at most).
	maxResourceVersionLen = 64
)

// Limits on userInfo, above what an API server's authenticators send
// (service accounts' names are under 340 bytes, OIDC providers cap the
// groups of a token at a few hundred): a work item carries it, and
// VERDICT_WORK's limits must count items, not one review's invention.
const (
	maxUserStringLen = 1024
	maxUserGroups    = 1024
	maxUserExtraKeys = 64
	maxUserExtraVals = 256
	maxUserInfoBytes = 64 << 10
)

// Causes of a refused review, as errors (wrapped by the ErrBadRequest the
// review is answered with) and as the reason label of
// verdict_webhook_refused_reviews_total.
var (
	// errBadIdentifier: a uid, name, namespace or resourceVersion that the
	// API server cannot have sent, or two that disagree.
	errBadIdentifier = errors.New("invalid identifier")
	// errUserInfoTooLarge: userInfo beyond what an API server sends.
	errUserInfoTooLarge = errors.New("userInfo too large")
)

// Reasons of verdict_webhook_refused_reviews_total.
const (
	refusedIdentifier = "identifier"
	refusedUserInfo   = "userInfo"
)

// refusedReason is the metric reason of a review refused by checkReview,
// or "" for any other error.
func refusedReason(err error) string {
	switch {
	case errors.Is(err, errBadIdentifier):
		return refusedIdentifier
	case errors.Is(err, errUserInfoTooLarge):
		return refusedUserInfo
	}
	return ""
}

// badIdentifier is the 400 of an identifier that fails its check.
func badIdentifier(format string, args ...any) error {
	return httpError(ErrBadRequest, errBadIdentifier, format, args...)
}

// checkReview checks the identifiers and the userInfo of a decoded review:
// each as the API server makes it, and the objects' against the
// request's.
func (rv *review) checkReview() error {
	req := rv.req
	if err := checkUID("request.uid", string(req.UID), false); err != nil {
		return err
	}
	if req.Namespace != "" && !isDNSLabel(req.Namespace) {
		return badIdentifier("request.namespace %s is not a DNS-1123 label of at most %d characters", quoted(req.Namespace), maxNamespaceLen)
	}
	if err := checkName("request.name", req.Name); err != nil {
		return err
	}
	for _, o := range []struct {
		field string
		obj   map[string]any
	}{{"request.object", rv.object}, {"request.oldObject", rv.oldObject}} {
		if o.obj == nil {
			continue
		}
		if err := rv.checkObject(o.field, o.obj); err != nil {
			return err
		}
	}
	if rv.object != nil && rv.oldObject != nil && rv.req.SubResource == "" {
		a, b := document.String(rv.object, "metadata", "uid"), document.String(rv.oldObject, "metadata", "uid")
		if a != "" && b != "" && a != b {
			return badIdentifier("request.object has uid %s, request.oldObject %s", quoted(a), quoted(b))
		}
	}
	return checkUserInfo(&req.UserInfo)
}

// checkObject checks one object's metadata: its identifiers, and (for
// the request's own object, not a subresource's) that it is the object
// the request names.
func (rv *review) checkObject(field string, obj map[string]any) error {
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		return nil
	}
	for _, k := range []string{"uid", "name", "namespace", "resourceVersion"} {
		if v, ok := meta[k]; ok && v != nil {
			if _, isString := v.(string); !isString {
				return badIdentifier("%s.metadata.%s is not a string", field, k)
			}
		}
	}
	uid, name := document.String(meta, "uid"), document.String(meta, "name")
	ns, rvn := document.String(meta, "namespace"), document.String(meta, "resourceVersion")
	if err := checkUID(field+".metadata.uid", uid, true); err != nil {
		return err
	}
	if err := checkName(field+".metadata.name", name); err != nil {
		return err
	}
	if ns != "" && !isDNSLabel(ns) {
		return badIdentifier("%s.metadata.namespace %s is not a DNS-1123 label of at most %d characters", field, quoted(ns), maxNamespaceLen)
	}
	if len(rvn) > maxResourceVersionLen || !printable(rvn) {
		return badIdentifier("%s.metadata.resourceVersion is longer than %d bytes or not printable ASCII", field, maxResourceVersionLen)
	}
	if rv.req.SubResource != "" {
		return nil // a subresource's object is another kind's (Scale, PodExecOptions)
	}
	if name != "" && rv.req.Name != "" && name != rv.req.Name {
		return badIdentifier("%s is named %s, request.name says %s", field, quoted(name), quoted(rv.req.Name))
	}
	if field == "request.object" && rv.req.Operation == admissionv1.Create && rvn != "" {
		// The API server refuses to store an object with one; its
		// resource version is given when it is stored, after admission.
		return badIdentifier("request.object of a CREATE has resourceVersion %s", quoted(rvn))
	}
	return nil
}

// checkUID checks a uid: printable, without what would need escaping in
// a subject, at most maxUIDLen bytes; empty only where allowed.
func checkUID(field, uid string, emptyOK bool) error {
	if uid == "" {
		if emptyOK {
			return nil
		}
		return badIdentifier("%s is empty", field)
	}
	if len(uid) > maxUIDLen {
		return badIdentifier("%s is %d bytes long, more than the %d of any uid the API server makes", field, len(uid), maxUIDLen)
	}
	for i := 0; i < len(uid); i++ {
		if !uidByte[uid[i]] {
			return badIdentifier("%s %s has byte %q at %d: a uid is letters, digits, '-', '_', '.' and ':'", field, quoted(uid), uid[i], i)
		}
	}
	return nil
}

// checkName checks a name as every kind's rule does at least (a path
// segment: not "." or "..", no '/' or '%'), and its length.
func checkName(field, name string) error {
	if name == "" {
		return nil
	}
	if len(name) > maxNameLen {
		return badIdentifier("%s is %d bytes long, more than %d", field, len(name), maxNameLen)
	}
	if name == "." || name == ".." {
		return badIdentifier("%s may not be %q", field, name)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c == '/' || c == '%' || c < 0x20 || c == 0x7f {
			return badIdentifier("%s %s has byte %q at %d", field, quoted(name), c, i)
		}
	}
	return nil
}

// checkUserInfo bounds userInfo to what an API server sends.
func checkUserInfo(u *authenticationv1.UserInfo) error {
	tooLarge := func(format string, args ...any) error {
		return httpError(ErrBadRequest, errUserInfoTooLarge, "request.userInfo: "+format, args...)
	}
	total := len(u.Username) + len(u.UID)
	if len(u.Username) > maxUserStringLen || len(u.UID) > maxUserStringLen {
		return tooLarge("username and uid are limited to %d bytes each", maxUserStringLen)
	}
	if len(u.Groups) > maxUserGroups {
		return tooLarge("%d groups, more than %d", len(u.Groups), maxUserGroups)
	}
	for _, g := range u.Groups {
		if len(g) > maxUserStringLen {
			return tooLarge("a group of %d bytes, more than %d", len(g), maxUserStringLen)
		}
		total += len(g)
	}
	if len(u.Extra) > maxUserExtraKeys {
		return tooLarge("%d extra keys, more than %d", len(u.Extra), maxUserExtraKeys)
	}
	for k, vs := range u.Extra {
		if len(k) > maxUserStringLen || len(vs) > maxUserExtraVals {
			return tooLarge("extra key of %d bytes with %d values: at most %d bytes and %d values", len(k), len(vs), maxUserStringLen, maxUserExtraVals)
		}
		total += len(k)
		for _, v := range vs {
			if len(v) > maxUserStringLen {
				return tooLarge("an extra value of %d bytes, more than %d", len(v), maxUserStringLen)
			}
			total += len(v)
		}
	}
	if total > maxUserInfoBytes {
		return tooLarge("%d bytes in all, more than %d", total, maxUserInfoBytes)
	}
	return nil
}

// uidByte marks the bytes a uid may have.
var uidByte = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	t['-'], t['_'], t['.'], t[':'] = true, true, true, true
	return t
}()

// isDNSLabel reports whether s is a DNS-1123 label (what a namespace's
// name is): at most 63 lower-case letters, digits and '-', starting and
// ending with a letter or digit.
func isDNSLabel(s string) bool {
	if s == "" || len(s) > maxNamespaceLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
		if !alnum && (c != '-' || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}

// printable reports whether s is printable ASCII.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// quoted is s quoted for a message, cut to 64 bytes: the caller sent the
// rest, and an error message must not echo a megabyte back.
func quoted(s string) string {
	return fmt.Sprintf("%q", truncate(s, 64))
}
