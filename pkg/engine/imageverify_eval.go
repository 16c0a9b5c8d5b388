package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/patch"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// This file evaluates classic verifyImages rules through the engine's
// ImageVerifier. Kyverno runs such a rule twice: its mutating webhook
// verifies the images and pins them to their digests, and records what it
// verified in an annotation of the object; its validating webhook then
// checks verifyDigest and required against that annotation. The engine
// runs both halves in one call, and takes required from the verification
// of that call, never from an annotation the requester could have
// written: the validating webhook verifies again (a cache hit when the
// mutating webhook verified the image), so that what it admits was
// verified by Verdict.

// ErrImageVerificationUnsupported is wrapped by a verifier's error for an
// entry that asks for what it cannot check (a signature format, a
// transparency log). The rule is then an error marked Unsupported: never
// a pass, so that admission fails closed (failurePolicy decides), while
// the CLI counts it as unsupported.
var ErrImageVerificationUnsupported = errors.New("image verification not supported")

// imageStatus is what the verification half found for one image, by the
// image's pointer: what required reads.
type imageStatus uint8

const (
	imageUnverified imageStatus = iota
	imagePassed
	imageSkipped
)

// imageCheck is one response of the rule's halves, with the failure
// action of the entry that gave it.
type imageCheck struct {
	status  Status
	message string
	enforce bool
	// unsupported is set when the verifier cannot check the entry.
	unsupported bool
}

// errNoImageVerifier: the rule needs a registry and the engine has no
// verifier.
var errNoImageVerifier = errors.New("no image verifier")

// verifyImages evaluates the rule's verifyImages entries on the images of
// the resource (the rule's imageExtractors for its kind, or the Pod
// spec's containers). Per entry and image, as Kyverno: an image that
// skipImageReferences names is skipped; with attestors or attestations
// the image is verified; mutateDigest pins a verified or skipped image
// named by tag to its digest. Then the validation half: verifyDigest
// fails an image still named without a digest, required one that the
// entries did not verify or skip. The rule's response is the first
// error, else the first failure, else a pass (the verification messages),
// else a skip; a rule none of whose entries selects an image has none.
// The patched resource is run.obj.
func (run *ruleRun) verifyImages(rr RuleResponse) RuleResponse {
	r := run.rule
	if r.cel != nil && r.cel.ivpol != nil {
		return run.mutateIVPolDigests(rr)
	}
	if run.req.Operation == OpDelete {
		// Nothing is admitted: there is no image to check.
		rr.Status = statusNone
		return rr
	}
	extractors, err := ParseImageExtractors(r.ImageExtractors)
	if err != nil {
		return run.errorf(rr, "%v", err)
	}
	images, err := ResourceImages(run.obj, extractors, run.imageSearch)
	if err != nil {
		return run.errorf(rr, "failed to extract images: %v", err)
	}
	// Each image is checked against each entry: charged to the
	// evaluation's work budget, as a rule's other steps are.
	if err := run.step(int64(len(images) * max(1, len(r.VerifyImages)))); err != nil {
		return run.errorf(rr, "%v", err)
	}
	entries := make([]*policy.ImageVerification, len(r.VerifyImages))
	for i := range r.VerifyImages {
		if entries[i], err = run.imageEntry(&r.VerifyImages[i]); err != nil {
			return run.errorf(rr, "failed to substitute variables: %v", err)
		}
	}
	// The images the rule checks: those one of its entries names.
	var selected []Image
	for _, img := range images {
		for _, iv := range entries {
			if MatchImageReferences(iv.ImageReferences, img.Ref.String()) {
				selected = append(selected, img)
				break
			}
		}
	}
	if len(selected) == 0 {
		rr.Status = statusNone
		return rr
	}
	statuses := make(map[string]imageStatus, len(selected))
	var checks []imageCheck
	obj := run.obj
	pinned := map[string]bool{}
	for i, iv := range entries {
		enforce := run.enforce
		if iv.FailureAction != "" {
			enforce = strings.EqualFold(iv.FailureAction, policy.Enforce)
		}
		for _, img := range selected {
			c, st, digest, err := run.verifyImage(i, iv, img)
			if errors.Is(err, errNoImageVerifier) {
				return run.imagesUnsupported(rr)
			}
			if len(iv.Attestors) > 0 || len(iv.Attestations) > 0 {
				// The last entry's word, as Kyverno records it.
				statuses[img.Pointer] = st
			}
			if c != nil {
				c.enforce = enforce
				checks = append(checks, *c)
			}
			if !iv.MutatesDigest() || img.Ref.Digest != "" || pinned[img.Pointer] ||
				!MatchImageReferences(iv.ImageReferences, img.Ref.String()) ||
				(c != nil && (c.status == StatusFail || c.status == StatusError)) {
				continue
			}
			if digest == "" {
				digest, err = run.resolveDigest(i, iv, img)
				if errors.Is(err, errNoImageVerifier) {
					return run.imagesUnsupported(rr)
				}
				if err != nil {
					checks = append(checks, imageCheck{status: StatusError, message: "failed to update digest: " + err.Error(), enforce: enforce})
					continue
				}
			}
			var ok bool
			if obj, ok, err = run.pinImage(obj, img, digest); err != nil {
				return run.errorf(rr, "failed to apply digest patch: %v", err)
			}
			if !ok {
				continue
			}
			pinned[img.Pointer] = true
			if c == nil {
				checks = append(checks, imageCheck{status: StatusPass, message: "mutated image digest", enforce: enforce})
			}
		}
	}
	validation, validated := run.validateImages(entries, obj, extractors, statuses)
	run.obj = obj
	return foldImageChecks(rr, checks, validation, validated)
}

// verifyImage is the verification half for one image and entry: its
// response (nil when the entry has no attestors or attestations, as
// Kyverno gives none), the status required reads, and the digest the
// verifier resolved.
func (run *ruleRun) verifyImage(i int, iv *policy.ImageVerification, img Image) (*imageCheck, imageStatus, string, error) {
	if len(iv.Attestors) == 0 && len(iv.Attestations) == 0 {
		return nil, imageUnverified, "", nil
	}
	ref := img.Ref.String()
	if !MatchImageReferences(iv.ImageReferences, ref) || MatchImageReferences(iv.SkipImageReferences, ref) {
		return &imageCheck{status: StatusSkip, message: ImageSkipMessage(ref, run.policy.Name(), run.rule.Name)}, imageSkipped, "", nil
	}
	if run.e.imageVerifier == nil {
		return nil, imageUnverified, "", errNoImageVerifier
	}
	req := run.imageRequest(i, iv, img)
	for a := range iv.Attestations {
		if len(iv.Attestations[a].Conditions) > 0 {
			req.CheckStatement = run.statementChecker(iv)
			break
		}
	}
	res, err := run.e.imageVerifier.Verify(run.callCtx(), req)
	switch {
	case errors.Is(err, ErrImageVerificationUnsupported):
		return &imageCheck{status: StatusError, message: err.Error(), unsupported: true}, imageUnverified, "", nil
	case err != nil:
		return &imageCheck{status: StatusError, message: err.Error()}, imageUnverified, "", nil
	case !res.Verified:
		return &imageCheck{status: StatusFail, message: res.Message}, imageUnverified, "", nil
	}
	msg := res.Message
	if res.Cached {
		msg = "verified from cache"
	}
	if len(iv.Attestations) > 0 && iv.Validation != nil && iv.Validation.Deny != nil {
		c := run.imageDeny(iv, res.Statements)
		if c.status != StatusPass {
			return &c, imageUnverified, "", nil
		}
		msg = c.message
	}
	return &imageCheck{status: StatusPass, message: msg}, imagePassed, res.Digest, nil
}

// statementChecker evaluates an attestation's conditions on one verified
// statement (ImageVerifyRequest.CheckStatement): the statement's
// predicate merged into the rule's context, and under the attestation's
// name, for the time of the check.
func (run *ruleRun) statementChecker(iv *policy.ImageVerification) func(int, map[string]any) (bool, string, error) {
	return func(a int, statement map[string]any) (bool, string, error) {
		if a < 0 || a >= len(iv.Attestations) {
			return false, "", fmt.Errorf("no attestation %d", a)
		}
		at := &iv.Attestations[a]
		predicate, ok := statement["predicate"].(map[string]any)
		if !ok {
			return false, "", errors.New("failed to extract predicate from statement")
		}
		saved := run.ctx
		defer func() { run.ctx = saved }()
		run.ctx = saved.clone()
		for k, v := range predicate {
			run.ctx.put(k, v)
		}
		if at.Name != "" {
			run.ctx.put(at.Name, predicate)
		}
		for i := range at.Conditions {
			ok, msg, err := run.conditions(&at.Conditions[i])
			if err != nil {
				return false, "", err
			}
			if !ok {
				return false, msg, nil
			}
		}
		return true, "", nil
	}
}

// imageDeny checks an entry's validate.deny once its attestations
// verified, with each named attestation's first statement's predicate
// under its name, as Kyverno's verifyImages validation does.
func (run *ruleRun) imageDeny(iv *policy.ImageVerification, statements [][]map[string]any) imageCheck {
	saved := run.ctx
	defer func() { run.ctx = saved }()
	run.ctx = saved.clone()
	for a := range iv.Attestations {
		name := iv.Attestations[a].Name
		if name == "" || a >= len(statements) || len(statements[a]) == 0 {
			continue
		}
		if p, ok := statements[a][0]["predicate"].(map[string]any); ok {
			run.ctx.put(name, p)
		}
	}
	v := iv.Validation
	denied, _, err := run.conditions(v.Deny.Conditions)
	if v.Deny.Conditions.IsEmpty() {
		denied = true
	}
	if err != nil {
		// A failure, as Kyverno answers it.
		return imageCheck{status: StatusFail, message: fmt.Sprintf("validation in verifyImages failed: failed to check deny conditions: %v", err)}
	}
	if !denied {
		return imageCheck{status: StatusPass, message: fmt.Sprintf("verifyImages validation is passed in %s rule", run.rule.Name)}
	}
	m := fmt.Sprintf("validation error: imageVerify %s failed", v.Message)
	if v.Message != "" {
		if m, err = run.message(v.Message); err != nil {
			m = v.Message
		}
	}
	return imageCheck{status: StatusFail, message: "validation in verifyImages failed: " + m}
}

// resolveDigest asks the verifier for the digest of an image it did not
// verify (an entry without attestors, or a skipped image).
func (run *ruleRun) resolveDigest(i int, iv *policy.ImageVerification, img Image) (string, error) {
	if run.e.imageVerifier == nil {
		return "", errNoImageVerifier
	}
	return run.e.imageVerifier.ResolveDigest(run.callCtx(), run.imageRequest(i, iv, img))
}

func (run *ruleRun) imageRequest(i int, iv *policy.ImageVerification, img Image) ImageVerifyRequest {
	return ImageVerifyRequest{
		Image:           img,
		Verification:    iv,
		Namespace:       run.resourceNamespace(),
		Policy:          run.policy.Raw.Key(),
		PolicyNamespace: policyNamespace(run.policy),
		PolicyVersion:   policySpecVersion(&run.policy.Raw.Metadata),
		Rule:            run.rule.Name,
		Index:           i,
	}
}

// validateImages is the validation half (Kyverno's validating webhook):
// on the patched resource, for each entry with verifyDigest or required,
// every image its imageReferences name must carry a digest, and have been
// verified or skipped by the verification half. ok is false when no
// entry checks either.
func (run *ruleRun) validateImages(entries []*policy.ImageVerification, obj map[string]any, extractors map[string][]ImageExtractor, statuses map[string]imageStatus) (imageCheck, bool) {
	checks := false
	enforce := run.enforce
	for _, iv := range entries {
		if iv.VerifiesDigest() || iv.IsRequired() {
			checks = true
			if iv.FailureAction != "" {
				enforce = strings.EqualFold(iv.FailureAction, policy.Enforce)
			}
		}
	}
	if !checks {
		return imageCheck{}, false
	}
	images, err := ResourceImages(obj, extractors, run.imageSearch)
	if err != nil {
		return imageCheck{status: StatusError, message: "failed to extract images: " + err.Error(), enforce: enforce}, true
	}
	var passed, skipped []string
	for _, iv := range entries {
		entryEnforce := run.enforce
		if iv.FailureAction != "" {
			entryEnforce = strings.EqualFold(iv.FailureAction, policy.Enforce)
		}
		for _, img := range images {
			ref := img.Ref.String()
			if !MatchImageReferences(iv.ImageReferences, ref) {
				continue
			}
			if iv.VerifiesDigest() && img.Ref.Digest == "" {
				return imageCheck{status: StatusFail, message: fmt.Sprintf(MsgMissingDigest, ref), enforce: entryEnforce}, true
			}
			if !iv.IsRequired() {
				continue
			}
			switch statuses[img.Pointer] {
			case imagePassed:
				passed = append(passed, ref)
			case imageSkipped:
				skipped = append(skipped, ref)
			default:
				return imageCheck{status: StatusFail, message: fmt.Sprintf(MsgUnverifiedImage, ref), enforce: entryEnforce}, true
			}
		}
	}
	switch {
	case len(passed) == 0 && len(skipped) > 0:
		return imageCheck{status: StatusSkip, message: strings.Join(append([]string{"image skipped, skipped images:"}, skipped...), " "), enforce: enforce}, true
	case len(skipped) > 0:
		return imageCheck{status: StatusPass, message: strings.Join(append([]string{"image verified, skipped images:"}, skipped...), " "), enforce: enforce}, true
	}
	return imageCheck{status: StatusPass, message: "image verified", enforce: enforce}, true
}

// foldImageChecks makes the rule's one response of its checks (the
// verification half's, then the validation half's when it ran): the first
// error, else the first failure, else a pass with the verification's
// messages (the validation's when the verification passed none), else a
// skip.
func foldImageChecks(rr RuleResponse, verified []imageCheck, validation imageCheck, validated bool) RuleResponse {
	checks := verified
	if validated {
		checks = append(checks[:len(checks):len(checks)], validation)
	}
	if len(checks) == 0 {
		rr.Status = statusNone
		return rr
	}
	for _, want := range []Status{StatusError, StatusFail} {
		for _, c := range checks {
			if c.status == want {
				rr.Status, rr.Message, rr.Enforce, rr.Unsupported = c.status, c.message, c.enforce, c.unsupported
				return rr
			}
		}
	}
	var pass, skip []string
	for _, c := range verified {
		switch c.status {
		case StatusPass:
			pass = append(pass, c.message)
		case StatusSkip:
			skip = append(skip, c.message)
		}
	}
	for _, c := range checks {
		rr.Enforce = rr.Enforce || c.enforce
	}
	switch {
	case len(pass) > 0:
		rr.Status, rr.Message = StatusPass, strings.Join(pass, "; ")
	case validated && validation.status == StatusPass:
		rr.Status, rr.Message = StatusPass, validation.message
	case len(skip) > 0:
		rr.Status, rr.Message = StatusSkip, strings.Join(skip, "; ")
	default:
		rr.Status, rr.Message = StatusSkip, validation.message
	}
	return rr
}

// imagesUnsupported answers a rule that needs a registry when the engine
// has no verifier: an error marked Unsupported, never a pass.
func (run *ruleRun) imagesUnsupported(rr RuleResponse) RuleResponse {
	rr.Status, rr.Unsupported = StatusError, true
	rr.Message = "verifyImages needs a registry, and this engine has no image verifier"
	return rr
}

// imageEntry is the entry in its current form (Converted) with the rule's
// variables substituted, except in the attestations' conditions and
// validate (deny and its message), which are evaluated on the verified
// statements.
func (run *ruleRun) imageEntry(iv *policy.ImageVerification) (*policy.ImageVerification, error) {
	c := iv.Converted()
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(raw, []byte("{{")) {
		return c, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if atts, ok := m["attestations"].([]any); ok {
		for _, a := range atts {
			if am, ok := a.(map[string]any); ok {
				delete(am, "conditions")
			}
		}
	}
	delete(m, "validate")
	sub, err := run.e.substitute(run.ctx, m, substStrict, run.req.Operation)
	if err != nil {
		return nil, err
	}
	raw, err = json.Marshal(sub)
	if err != nil {
		return nil, err
	}
	var out policy.ImageVerification
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	for i := range out.Attestations {
		if i < len(c.Attestations) {
			out.Attestations[i].Conditions = c.Attestations[i].Conditions
		}
	}
	out.Validation = c.Validation
	return &out, nil
}

// policyNamespace is a namespaced policy's namespace, "" for a cluster
// policy.
func policyNamespace(p *Policy) string {
	if p.Raw.Namespaced() {
		return p.Raw.Metadata.Namespace
	}
	return ""
}

// policySpecVersion names the version of a policy's spec: its uid and
// generation, which a status write does not change (its resourceVersion
// does), or the resourceVersion where there is no generation (a policy
// from a file).
func policySpecVersion(m *policy.ObjectMeta) string {
	if m.Generation > 0 {
		return m.UID + "/" + strconv.FormatInt(m.Generation, 10)
	}
	return m.ResourceVersion
}

// imageSearch evaluates a custom image extractor's jmesPath.
func (run *ruleRun) imageSearch(expr string, data any) (any, error) {
	v, _, err := run.applyJMESPath(data, expr, nil)
	return v, err
}

// pinImage pins img of obj to digest (DigestPatch); pinned is false for
// an image that already names a digest, left as it is.
func (run *ruleRun) pinImage(obj map[string]any, img Image, digest string) (out map[string]any, pinned bool, err error) {
	op, ok := DigestPatch(img, digest)
	if !ok {
		return obj, false, nil
	}
	out, err = run.patchImage(obj, op)
	return out, err == nil, err
}

// patchImage applies a mutateDigest patch operation to obj, charged to
// the request's budget.
func (run *ruleRun) patchImage(obj map[string]any, op map[string]any) (map[string]any, error) {
	raw, err := json.Marshal([]any{op})
	if err != nil {
		return nil, err
	}
	res, err := patch.JSON6902Metered(obj, string(raw), run.meter())
	if err != nil {
		return nil, err
	}
	return res.Object, nil
}
