package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/verdict-dev/verdict/pkg/engine/celeval"
	"github.com/verdict-dev/verdict/pkg/engine/imageref"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
)

// An ImageValidatingPolicy compiles into an engine Policy with two rules
// per variant (the policy itself and its autogen variants for Pod
// controllers), each without a name, as Kyverno reports them:
//
//   - a validate rule (the validating webhook's, the background scan's):
//     match conditions and CEL exceptions, the images its extractors
//     find and matchImageReferences select, verifyDigest, the CEL
//     validations with the verification functions, and required;
//   - when mutateDigest is on, a verifyImages rule (the mutating
//     webhook's) that pins the selected images of the Pod spec to their
//     digests, through the engine's ImageVerifier. Check leaves it out.
//
// Verifications go through the ImageVerifier as classic verifyImages
// entries, one per attestor: one verification path, one cache, one set
// of bounds and metrics for both kinds of policy.

// ivpolRule is what the two rules of an ImageValidatingPolicy share.
type ivpolRule struct {
	spec *policy.ImageValidatingPolicySpec
	// globs and exprs are matchImageReferences; none selects every
	// image.
	globs []string
	exprs []*celeval.Program
	// images are the custom image lists (spec.images).
	images []namedProgram
	// keyExprs, by attestor name, are the expressions of its key,
	// certificate, chain and notary certificates.
	keyExprs map[string][]attestorExpr
	// attestations by name.
	attestations map[string]policy.ImageAttestation
	// payloads: an expression reads extractPayload, so attestation
	// verifications keep their statements and are not cached.
	payloads bool
	// digestOnly marks the verifyImages rule (mutateDigest).
	digestOnly bool
	// verifies: an expression calls a verification function.
	verifies bool
}

// attestorExpr is one expression of an attestor, and where its value
// goes.
type attestorExpr struct {
	prog *celeval.Program
	set  func(a *policy.ImageAttestor, v string)
}

// compileIVPol compiles an ImageValidatingPolicy.
func (e *Engine) compileIVPol(p *policy.Policy) (*Policy, error) {
	cp := &Policy{Raw: p, Scored: true}
	if ann := p.Metadata.Annotations; ann != nil {
		cp.Scored = ann[AnnotationScored] != "false"
		cp.Category = ann[AnnotationCategory]
		cp.Severity = ann[AnnotationSeverity]
	}
	specs := []*policy.ImageValidatingPolicySpec{p.IVPol}
	if !p.IVPol.JSONMode() {
		variants, err := ivpolAutogen(p.IVPol)
		if err != nil {
			return nil, fmt.Errorf("%s %s: autogen: %w", p.Kind, p.Key(), err)
		}
		specs = append(specs, variants...)
	}
	for i, s := range specs {
		rules, err := newIVPolRules(s)
		if err != nil {
			if i > 0 {
				return nil, fmt.Errorf("%s %s: autogen: %w", p.Kind, p.Key(), err)
			}
			return nil, fmt.Errorf("%s %s: %w", p.Kind, p.Key(), err)
		}
		for _, r := range rules {
			r.Autogen = i > 0
			cp.Rules = append(cp.Rules, r)
		}
	}
	return cp, nil
}

// newIVPolRules compiles one variant's spec into its rules.
func newIVPolRules(s *policy.ImageValidatingPolicySpec) ([]*Rule, error) {
	var errs []error
	compile := func(path, expr string, want celeval.Result) *celeval.Program {
		p, err := celeval.CompileImage(expr, want)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
		}
		return p
	}
	iv := &ivpolRule{spec: s, keyExprs: map[string][]attestorExpr{}, attestations: map[string]policy.ImageAttestation{}}
	for i, m := range s.MatchImageReferences {
		if m.Glob != "" {
			iv.globs = append(iv.globs, m.Glob)
			continue
		}
		p, err := celeval.CompileImageReference(m.Expression)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.matchImageReferences[%d].expression: %w", i, err))
		}
		iv.exprs = append(iv.exprs, p)
	}
	for i, im := range s.Images {
		iv.images = append(iv.images, namedProgram{name: im.Name, prog: compile(fmt.Sprintf("spec.images[%d].expression", i), im.Expression, celeval.Any)})
	}
	for i := range s.Attestors {
		a := &s.Attestors[i]
		path := fmt.Sprintf("spec.attestors[%d]", i)
		add := func(field, expr string, set func(*policy.ImageAttestor, string)) {
			if expr != "" {
				iv.keyExprs[a.Name] = append(iv.keyExprs[a.Name], attestorExpr{prog: compile(path+field, expr, celeval.String), set: set})
			}
		}
		if c := a.Cosign; c != nil {
			if c.Key != nil {
				add(".cosign.key.expression", c.Key.Expression, func(a *policy.ImageAttestor, v string) { a.Cosign.Key.Data = v })
			}
			if ct := c.Certificate; ct != nil {
				if ct.Certificate != nil {
					add(".cosign.certificate.cert.expression", ct.Certificate.Expression, func(a *policy.ImageAttestor, v string) { a.Cosign.Certificate.Certificate.Value = v })
				}
				if ct.CertificateChain != nil {
					add(".cosign.certificate.certChain.expression", ct.CertificateChain.Expression, func(a *policy.ImageAttestor, v string) { a.Cosign.Certificate.CertificateChain.Value = v })
				}
			}
		}
		if n := a.Notary; n != nil {
			if n.Certs != nil {
				add(".notary.certs.expression", n.Certs.Expression, func(a *policy.ImageAttestor, v string) { a.Notary.Certs.Value = v })
			}
			if n.TSACerts != nil {
				add(".notary.tsaCerts.expression", n.TSACerts.Expression, func(a *policy.ImageAttestor, v string) { a.Notary.TSACerts.Value = v })
			}
		}
	}
	for _, a := range s.Attestations {
		iv.attestations[a.Name] = a
	}
	cr := &celRule{vpol: true, ignoreMatchErrors: s.FailurePolicy == "Ignore"}
	for i, c := range s.MatchConditions {
		cr.preconditions = append(cr.preconditions, compile(fmt.Sprintf("spec.matchConditions[%d].expression", i), c.Expression, celeval.Bool))
	}
	for i, v := range s.Variables {
		cr.variables = append(cr.variables, celeval.Variable{Name: v.Name, Program: compile(fmt.Sprintf("spec.variables[%d].expression", i), v.Expression, celeval.Any)})
		iv.payloads = iv.payloads || strings.Contains(v.Expression, "extractPayload")
	}
	for i, v := range s.Validations {
		c := celCheck{expr: compile(fmt.Sprintf("spec.validations[%d].expression", i), v.Expression, celeval.Bool), message: v.Message}
		if v.MessageExpression != "" {
			c.messageExpr = compile(fmt.Sprintf("spec.validations[%d].messageExpression", i), v.MessageExpression, celeval.String)
		}
		cr.validations = append(cr.validations, c)
		iv.payloads = iv.payloads || strings.Contains(v.Expression, "extractPayload") || strings.Contains(v.MessageExpression, "extractPayload")
	}
	for _, x := range append(append([]policy.NamedExpression(nil), s.Variables...), s.Images...) {
		iv.verifies = iv.verifies || callsVerification(x.Expression)
	}
	for _, v := range s.Validations {
		iv.verifies = iv.verifies || callsVerification(v.Expression)
	}
	for i, a := range s.AuditAnnotations {
		cr.audit = append(cr.audit, namedProgram{name: a.Key, prog: compile(fmt.Sprintf("spec.auditAnnotations[%d].valueExpression", i), a.ValueExpression, celeval.StringOrNull)})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	cr.ivpol = iv
	match := &celMatch{json: true}
	if !s.JSONMode() {
		mc := s.MatchConstraints
		match = &celMatch{rules: mc.ResourceRules, exclude: mc.ExcludeResourceRules, namespaceSel: mc.NamespaceSelector, objectSel: mc.ObjectSelector}
	}
	validate := &Rule{
		Rule:        policy.Rule{Validation: &policy.Validation{CEL: &policy.CEL{}}},
		passMessage: "success",
		cel:         cr,
		celMatch:    match,
	}
	validate.pssPassMessage = validate.passMessage
	rules := []*Rule{validate}
	if !s.JSONMode() && s.ValidationConfigurations.MutatesDigest() {
		dcr := *cr
		div := *iv
		div.digestOnly = true
		dcr.ivpol = &div
		rules = append(rules, &Rule{
			// One entry stands for the policy's digest mutation: ruleType
			// reads the rule as a verifyImages rule.
			Rule:     policy.Rule{VerifyImages: []policy.ImageVerification{{}}},
			cel:      &dcr,
			celMatch: match,
		})
	}
	return rules, nil
}

// callsVerification reports whether an expression calls a verification
// function (read from its text: a call the expression never reaches
// still counts).
func callsVerification(expr string) bool {
	return strings.Contains(expr, "verifyImageSignatures") || strings.Contains(expr, "verifyAttestationSignatures")
}

// OrderForImageEvidence orders policies for the evaluation of one
// request so that required sees every verification it may: the
// ImageValidatingPolicies whose expressions verify nothing (the
// catch-all policies that only require) after every other policy, the
// order otherwise kept. Kyverno settles required once all the request's
// policies ran; on one request, in this order, the two agree.
func OrderForImageEvidence(policies []*Policy) {
	slices.SortStableFunc(policies, func(a, b *Policy) int {
		return cmp.Compare(a.onlyRequires(), b.onlyRequires())
	})
}

// onlyRequires: 1 for an ImageValidatingPolicy that verifies no image
// and requires verified images, 0 otherwise.
func (p *Policy) onlyRequires() int {
	for _, r := range p.Rules {
		if c := r.cel; c != nil && c.ivpol != nil && !c.ivpol.digestOnly {
			if !c.ivpol.verifies && c.ivpol.spec.ValidationConfigurations.RequiresVerification() {
				return 1
			}
			return 0
		}
	}
	return 0
}

// ivpolAutogen returns the autogen variants of an ImageValidatingPolicy
// on Pods, as vpolAutogen does for a ValidatingPolicy.
func ivpolAutogen(s *policy.ImageValidatingPolicySpec) ([]*policy.ImageValidatingPolicySpec, error) {
	var out []*policy.ImageValidatingPolicySpec
	for _, av := range podAutogen(s.MatchConstraints, s.Autogen) {
		b, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		var v policy.ImageValidatingPolicySpec
		if err := json.Unmarshal(rewritePodTemplate(b, av.cronJob), &v); err != nil {
			return nil, err
		}
		v.MatchConstraints = av.match
		out = append(out, &v)
	}
	return out, nil
}

// selectsImage reports whether matchImageReferences select image (as
// the resource writes it).
func (iv *ivpolRule) selectsImage(ctx context.Context, image string) (bool, error) {
	if len(iv.globs) == 0 && len(iv.exprs) == 0 {
		return true, nil
	}
	for _, g := range iv.globs {
		if wildcard.Match(g, image) {
			return true, nil
		}
	}
	for _, p := range iv.exprs {
		ok, err := celeval.MatchImageReference(ctx, p, image)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// podImageLists are the Pod spec's container lists, as an
// ImageValidatingPolicy names them.
var podImageLists = []string{"containers", "initContainers", "ephemeralContainers"}

// resourceImages are the images of the object by list: the Pod spec's
// lists (of the Pod, of a controller's template, of a CronJob's job
// template) and the policy's own lists.
func (run *ruleRun) ivpolImages(iv *ivpolRule, ev *celeval.Evaluation, obj map[string]any) (map[string][]string, error) {
	out := map[string][]string{}
	if obj != nil && !run.req.JSON {
		kind, _ := obj["kind"].(string)
		if exs, ok := builtinExtractors[kind]; ok {
			for _, list := range podImageLists {
				out[list] = []string{}
			}
			for _, ex := range exs {
				spec := obj
				for _, f := range ex.fields[:len(ex.fields)-2] {
					spec, _ = spec[f].(map[string]any)
				}
				containers, _ := spec[ex.name].([]any)
				for _, c := range containers {
					if m, ok := c.(map[string]any); ok {
						if img, ok := m["image"].(string); ok {
							out[ex.name] = append(out[ex.name], img)
						}
					}
				}
			}
		}
	}
	for _, im := range iv.images {
		v, err := ev.JSON(im.prog)
		if err != nil {
			return nil, err
		}
		list, ok := v.([]any)
		if !ok && v != nil {
			return nil, fmt.Errorf("images %s: the expression gave a %T, not a list of strings", im.name, v)
		}
		imgs := make([]string, 0, len(list))
		for _, x := range list {
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("images %s: the expression gave a %T in its list, not a string", im.name, x)
			}
			imgs = append(imgs, s)
		}
		out[im.name] = imgs
	}
	return out, nil
}

// validateIVPol evaluates an ImageValidatingPolicy's validate rule as
// Kyverno's image verification engine does: exceptions and match
// conditions as a ValidatingPolicy's; then the images its lists hold and
// matchImageReferences select; verifyDigest fails the first image named
// without a digest ("image <image> does not have a digest"); the
// validations run with the images, attestors and attestations, the first
// that is not true failing the policy with its message; then required
// fails an image no verification of the request passed.
func (run *ruleRun) validateIVPol(rr RuleResponse, cr *celRule, ev *celeval.Evaluation) RuleResponse {
	iv := cr.ivpol
	if len(cr.exceptions) > 0 && run.applyCELExceptions(&rr, cr, ev) {
		return rr
	}
	if skip, failed := run.celMatchConditions(&rr, cr, ev); skip || failed {
		return rr
	}
	ctx := run.callCtx()
	lists, err := run.ivpolImages(iv, ev, run.obj)
	if err != nil {
		rr.Status, rr.Message = StatusError, "error: "+celeval.Cause(err).Error()
		return rr
	}
	selected := make(map[string][]string, len(lists))
	var images []string
	// In the lists' order by name: the first image a check fails names
	// the same image at every evaluation.
	for _, list := range slices.Sorted(maps.Keys(lists)) {
		imgs := lists[list]
		selected[list] = []string{}
		for _, img := range imgs {
			ok, err := iv.selectsImage(ctx, img)
			if err != nil {
				rr.Status, rr.Message = StatusError, "error: "+err.Error()
				return rr
			}
			if ok {
				selected[list] = append(selected[list], img)
				images = append(images, img)
			}
		}
	}
	if err := run.step(int64(len(images) * max(1, len(iv.spec.Attestors)))); err != nil {
		return run.errorf(rr, "%v", err)
	}
	if iv.spec.ValidationConfigurations.VerifiesDigest() {
		for _, img := range images {
			ref, err := name.ParseReference(img)
			if err != nil {
				rr.Status, rr.Message = StatusError, fmt.Sprintf("error: failed to parse image reference %s: %v", img, err)
				return rr
			}
			if _, ok := ref.(name.Digest); !ok {
				rr.Status, rr.Message = StatusFail, fmt.Sprintf("image %s does not have a digest", img)
				return rr
			}
		}
	}
	attestors, err := run.ivpolAttestors(iv, ev)
	if err != nil {
		rr.Status, rr.Message = StatusError, "error: "+err.Error()
		return rr
	}
	names := make(map[string]string, len(iv.attestations))
	for n := range iv.attestations {
		names[n] = n
	}
	funcs := &ivpolFuncs{run: run, iv: iv, payloads: map[[2]string]map[string]any{}}
	ev.SetImages(selected, attestors, names, funcs)
	out := run.celValidations(rr, cr, ev)
	if out.Status != StatusPass || !iv.spec.ValidationConfigurations.RequiresVerification() {
		return out
	}
	evidence := run.req.scratch().imageEvidence
	for _, img := range images {
		switch evidence[img] {
		case imageEvidenceVerified:
		case imageEvidenceFailed:
			out.Status, out.Message = StatusFail, fmt.Sprintf("image %s failed signature or attestation verification", img)
			return out
		default:
			out.Status, out.Message = StatusFail, fmt.Sprintf("image %s is not verified: no policy performed a signature or attestation check on it", img)
			return out
		}
	}
	return out
}

// celMatchConditions evaluates the match conditions of a CEL policy as
// Kyverno's engine does: skip when one is false (or ends in an error
// under failurePolicy Ignore), failed (rr set: an error) when one ends
// in an error.
func (run *ruleRun) celMatchConditions(rr *RuleResponse, cr *celRule, ev *celeval.Evaluation) (skip, failed bool) {
	var matchErrs []string
	for _, p := range cr.preconditions {
		ok, err := ev.Bool(p)
		switch {
		case err != nil:
			matchErrs = append(matchErrs, celeval.Cause(err).Error())
		case !ok:
			rr.Status, rr.Message = StatusSkip, "skip"
			return true, false
		}
	}
	if len(matchErrs) > 0 {
		if cr.ignoreMatchErrors {
			rr.Status, rr.Message = StatusSkip, "skip"
			return true, false
		}
		rr.Name, rr.Status, rr.Message = "evaluation", StatusError, "failed to load context: "+strings.Join(matchErrs, "; ")
		return false, true
	}
	return false, false
}

// ivpolAttestors are the policy's attestors as its expressions read
// them (attestors.<name>): JSON values, their expressions evaluated.
func (run *ruleRun) ivpolAttestors(iv *ivpolRule, ev *celeval.Evaluation) (map[string]any, error) {
	out := make(map[string]any, len(iv.spec.Attestors))
	for i := range iv.spec.Attestors {
		a := iv.spec.Attestors[i]
		if exprs := iv.keyExprs[a.Name]; len(exprs) > 0 {
			// A deep copy: the policy's own stays as written.
			b, err := json.Marshal(a)
			if err != nil {
				return nil, err
			}
			a = policy.ImageAttestor{}
			if err := json.Unmarshal(b, &a); err != nil {
				return nil, err
			}
			for _, x := range exprs {
				v, err := ev.Eval(x.prog)
				if err != nil {
					return nil, fmt.Errorf("failed to evaluate attestor %s: %w", a.Name, celeval.Cause(err))
				}
				s, ok := v.Value().(string)
				if !ok {
					return nil, fmt.Errorf("attestor %s: the expression gave a %s, not a string", a.Name, v.Type().TypeName())
				}
				x.set(&a, s)
			}
		}
		b, err := json.Marshal(a)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		out[a.Name] = m
	}
	return out, nil
}

// imageEvidence is what the verifications of a request found for an
// image, which required reads: shared by every ImageValidatingPolicy
// evaluated on the request (Kyverno's catch-all model: one policy may
// verify what another requires).
type imageEvidence uint8

const (
	imageEvidenceNone imageEvidence = iota
	imageEvidenceFailed
	imageEvidenceVerified
)

func (run *ruleRun) recordEvidence(image string, verified bool) {
	c := run.req.scratch()
	if c.imageEvidence == nil {
		c.imageEvidence = map[string]imageEvidence{}
	}
	switch {
	case verified:
		c.imageEvidence[image] = imageEvidenceVerified
	case c.imageEvidence[image] == imageEvidenceNone:
		c.imageEvidence[image] = imageEvidenceFailed
	}
}

// ivpolFuncs serves the verification functions of one evaluation of an
// ImageValidatingPolicy through the engine's ImageVerifier.
type ivpolFuncs struct {
	run *ruleRun
	iv  *ivpolRule
	// payloads are the verified statements, by image and attestation.
	payloads map[[2]string]map[string]any
}

// VerifySignatures implements celeval.ImageFunctions.
func (f *ivpolFuncs) VerifySignatures(ctx context.Context, image string, attestors []any) (int, error) {
	return f.verify(ctx, image, "", attestors)
}

// VerifyAttestations implements celeval.ImageFunctions.
func (f *ivpolFuncs) VerifyAttestations(ctx context.Context, image, attestation string, attestors []any) (int, error) {
	if _, ok := f.iv.attestations[attestation]; !ok {
		return 0, fmt.Errorf("attestation not found in policy: %s", attestation)
	}
	return f.verify(ctx, image, attestation, attestors)
}

// verify counts the attestors that verify the image's signatures (or
// its attestation, when one is named): each attestor a classic
// verifyImages entry for the verifier.
func (f *ivpolFuncs) verify(ctx context.Context, image, attestation string, attestors []any) (int, error) {
	if ok, err := f.iv.selectsImage(ctx, image); err != nil || !ok {
		return 0, err
	}
	if f.run.e.imageVerifier == nil {
		return 0, fmt.Errorf("%w: no image verifier", ErrImageVerificationUnsupported)
	}
	ref, err := imageref.Parse(image, "docker.io", true)
	if err != nil {
		return 0, fmt.Errorf("failed to parse image reference %s: %w", image, err)
	}
	count := 0
	for i, raw := range attestors {
		var a policy.ImageAttestor
		b, err := json.Marshal(raw)
		if err == nil {
			err = json.Unmarshal(b, &a)
		}
		if err != nil {
			return 0, fmt.Errorf("attestor %d: %w", i, err)
		}
		entry, err := f.entry(&a, attestation)
		if err != nil {
			return 0, err
		}
		req := f.run.imageRequest(0, entry, Image{Field: "ivpol", Name: image, Image: image, Ref: ref})
		req.Rule = "ivpol/" + a.Name + "/" + attestation
		res, err := f.run.e.imageVerifier.Verify(ctx, req)
		if err != nil {
			return 0, err
		}
		if !res.Verified {
			continue
		}
		count++
		if attestation != "" && len(res.Statements) > 0 && len(res.Statements[0]) > 0 {
			if _, kept := f.payloads[[2]string{image, attestation}]; !kept {
				f.payloads[[2]string{image, attestation}] = res.Statements[0][0]
			}
		}
	}
	if len(attestors) > 0 {
		f.run.recordEvidence(image, count > 0)
	}
	return count, nil
}

// entry is the classic verifyImages entry that checks one attestor (for
// an attestation when one is named).
func (f *ivpolFuncs) entry(a *policy.ImageAttestor, attestation string) (*policy.ImageVerification, error) {
	useCache := !f.keepsStatements(attestation)
	iv := &policy.ImageVerification{ImageReferences: []string{"*"}, UseCache: &useCache}
	if c := f.iv.spec.Credentials; c != nil {
		iv.ImageRegistryCredentials = &policy.ImageRegistryCredentials{AllowInsecureRegistry: c.AllowInsecureRegistry, Providers: c.Providers, Secrets: c.Secrets}
	}
	var set policy.AttestorSet
	switch {
	case a.Cosign != nil:
		iv.Type = "Cosign"
		c := a.Cosign
		if c.TUF != nil || c.TrustedRoot != nil {
			return nil, fmt.Errorf("%w: attestor %s: tuf and trustedRoot", ErrImageVerificationUnsupported, a.Name)
		}
		if c.Source != nil {
			if c.Source.TagPrefix != "" {
				return nil, fmt.Errorf("%w: attestor %s: source.tagPrefix", ErrImageVerificationUnsupported, a.Name)
			}
			iv.Repository = c.Source.Repository
		}
		var rekor *policy.Rekor
		var ctlog *policy.CTLog
		if l := c.CTLog; l != nil {
			rekor = &policy.Rekor{URL: l.URL, RekorPubKey: l.RekorPubKey, IgnoreTlog: l.InsecureIgnoreTlog}
			// A key or a certificate with the transparency log ignored
			// uses no Sigstore infrastructure at all, SCTs included, as
			// Kyverno verifies it.
			noInfra := l.InsecureIgnoreTlog && c.Keyless == nil
			ctlog = &policy.CTLog{IgnoreSCT: l.InsecureIgnoreSCT || noInfra, CTLogPubKey: l.CTLogPubKey, TSACertChain: l.TSACertChain}
		}
		switch {
		case c.Key != nil:
			set.Entries = []policy.Attestor{{Keys: &policy.StaticKeyAttestor{PublicKeys: c.Key.Data, KMS: c.Key.KMS, Rekor: rekor, CTLog: ctlog}, SignatureAlgorithm: c.Key.HashAlgorithm, Annotations: c.Annotations}}
		case c.Certificate != nil:
			ca := &policy.CertificateAttestor{Rekor: rekor, CTLog: ctlog}
			if c.Certificate.Certificate != nil {
				ca.Certificate = c.Certificate.Certificate.Value
			}
			if c.Certificate.CertificateChain != nil {
				ca.CertificateChain = c.Certificate.CertificateChain.Value
			}
			set.Entries = []policy.Attestor{{Certificates: ca, Annotations: c.Annotations}}
		case c.Keyless != nil:
			// Any one identity verifies the signature.
			one := 1
			set.Count = &one
			for _, id := range c.Keyless.Identities {
				set.Entries = append(set.Entries, policy.Attestor{Keyless: &policy.KeylessAttestor{
					Rekor: rekor, CTLog: ctlog, Issuer: id.Issuer, Subject: id.Subject, IssuerRegExp: id.IssuerRegExp, SubjectRegExp: id.SubjectRegExp, Roots: c.Keyless.Roots,
				}, Annotations: c.Annotations})
			}
		default:
			return nil, fmt.Errorf("attestor %s: cosign needs a key, keyless identities or a certificate", a.Name)
		}
	case a.Notary != nil:
		iv.Type = "Notary"
		ca := &policy.CertificateAttestor{}
		if a.Notary.Certs != nil {
			ca.Certificate = a.Notary.Certs.Value
		}
		if a.Notary.TSACerts != nil && a.Notary.TSACerts.Value != "" {
			return nil, fmt.Errorf("%w: attestor %s: notary tsaCerts", ErrImageVerificationUnsupported, a.Name)
		}
		set.Entries = []policy.Attestor{{Certificates: ca}}
	default:
		return nil, fmt.Errorf("attestor %s: neither cosign nor notary", a.Name)
	}
	if attestation == "" {
		iv.Attestors = []policy.AttestorSet{set}
		return iv, nil
	}
	att := f.iv.attestations[attestation]
	switch {
	case att.InToto != nil && iv.Type == "Notary":
		return nil, errors.New("notary verifier only supports oci 1.1 referrers as attestations")
	case att.Referrer != nil && iv.Type == "Cosign":
		return nil, fmt.Errorf("%w: attestation %s: cosign verifies in-toto attestations; a referrer needs a notary attestor", ErrImageVerificationUnsupported, attestation)
	case att.InToto != nil:
		iv.Attestations = []policy.Attestation{{Name: attestation, Type: att.InToto.Type, Attestors: []policy.AttestorSet{set}}}
	case att.Referrer != nil:
		iv.Attestations = []policy.Attestation{{Name: attestation, Type: att.Referrer.Type, Attestors: []policy.AttestorSet{set}}}
	}
	return iv, nil
}

// keepsStatements reports whether a verification of this attestation must keep
// its statements (the policy reads payloads), and so is not cached.
func (f *ivpolFuncs) keepsStatements(attestation string) bool {
	return attestation != "" && f.iv.payloads
}

// Payload implements celeval.ImageFunctions: the statement of an in-toto
// attestation, the content of a referrer, once verified in this
// evaluation.
func (f *ivpolFuncs) Payload(_ context.Context, image, attestation string) (any, error) {
	att, ok := f.iv.attestations[attestation]
	if !ok {
		return nil, fmt.Errorf("attestation not found in policy: %s", attestation)
	}
	st, ok := f.payloads[[2]string{image, attestation}]
	if !ok {
		if att.InToto != nil {
			return nil, errors.New("failed to get payload: intoto attestation payload cannot be fetch before verifying intoto attestation")
		}
		return nil, fmt.Errorf("failed to get payload: the referrer %s of %s is read once verifyAttestationSignatures verified it", attestation, image)
	}
	if att.Referrer != nil {
		return st["predicate"], nil
	}
	out := make(map[string]any, len(st))
	for k, v := range st {
		if k != "type" {
			out[k] = v
		}
	}
	return out, nil
}

// ImageData implements celeval.ImageFunctions.
func (f *ivpolFuncs) ImageData(ctx context.Context, image string) (any, error) {
	return f.run.e.loader.ImageData(ctx, image)
}

// mutateIVPolDigests is an ImageValidatingPolicy's verifyImages rule:
// when its exceptions and match conditions let it apply, each image of
// the Pod spec that matchImageReferences select and that names no digest
// is pinned to the digest its registry gives. An image whose digest
// cannot be resolved is an error (the others are still pinned).
func (run *ruleRun) mutateIVPolDigests(rr RuleResponse) RuleResponse {
	rr.Status = statusNone
	if run.req.Operation == OpDelete {
		return rr
	}
	cr := run.rule.cel
	ev := run.celInput().NewEvaluation(run.callCtx(), cr.variables, 0)
	if len(cr.exceptions) > 0 {
		probe := rr
		if run.applyCELExceptions(&probe, cr, ev) {
			if probe.Status == StatusError {
				return probe
			}
			return rr
		}
	}
	if skip, failed := run.celMatchConditions(&rr, cr, ev); skip || failed {
		if skip {
			rr.Status = statusNone
		}
		return rr
	}
	images, err := ResourceImages(run.obj, nil, nil)
	if err != nil {
		return run.errorf(rr, "failed to extract images: %v", err)
	}
	if err := run.step(int64(len(images))); err != nil {
		return run.errorf(rr, "%v", err)
	}
	if run.e.imageVerifier == nil {
		return run.imagesUnsupported(rr)
	}
	ctx := run.callCtx()
	obj := run.obj
	var failures []string
	for _, img := range images {
		if img.Ref.Digest != "" {
			continue
		}
		ok, err := cr.ivpol.selectsImage(ctx, img.Ref.String())
		if err != nil {
			return run.errorf(rr, "%v", err)
		}
		if !ok {
			continue
		}
		iv := &policy.ImageVerification{ImageReferences: []string{"*"}}
		if c := cr.ivpol.spec.Credentials; c != nil {
			iv.ImageRegistryCredentials = &policy.ImageRegistryCredentials{AllowInsecureRegistry: c.AllowInsecureRegistry, Providers: c.Providers, Secrets: c.Secrets}
		}
		req := run.imageRequest(0, iv, img)
		req.Rule = "ivpol/mutateDigest"
		digest, err := run.e.imageVerifier.ResolveDigest(ctx, req)
		if err != nil {
			failures = append(failures, fmt.Sprintf("failed to resolve digest for image %s: %v", img.Image, err))
			continue
		}
		if obj, _, err = run.pinImage(obj, img, digest); err != nil {
			return run.errorf(rr, "failed to apply digest patch: %v", err)
		}
	}
	run.obj = obj
	if len(failures) > 0 {
		rr.Status, rr.Message = StatusError, strings.Join(failures, "; ")
	}
	return rr
}
