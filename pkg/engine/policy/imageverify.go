package policy

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strings"
)

// Types of image verification (ImageVerification.Type).
const (
	ImageVerifyCosign         = "Cosign"
	ImageVerifySigstoreBundle = "SigstoreBundle"
	ImageVerifyNotary         = "Notary"
)

// Signature algorithms a static key attestor accepts ("" is the verifier's
// default, sha256).
var signatureAlgorithms = map[string]bool{"": true, "sha224": true, "sha256": true, "sha384": true, "sha512": true}

// ImageVerification is one entry of a verifyImages rule (Kyverno's v1
// ImageVerification): which images it checks, the signatures and
// attestations they must carry, and what it does with a verified image.
//
// The deprecated fields (image, key, roots, subject, issuer, and
// annotations at this level) are kept as written, so that the policy
// prints back unchanged; Converted gives the entry in the current form,
// which is what evaluation reads.
type ImageVerification struct {
	// FailureAction is Audit or Enforce; it overrides the policy's
	// validationFailureAction for this entry.
	FailureAction string `json:"failureAction,omitempty"`
	// Type is the signature format: Cosign (the default), SigstoreBundle
	// or Notary.
	Type string `json:"type,omitempty"`
	// Image is deprecated: use imageReferences.
	Image string `json:"image,omitempty"`
	// ImageReferences are image reference patterns (wildcards `*` and `?`)
	// matched against each image in its normalised form (registry, path,
	// and tag or digest: docker.io/nginx:latest); one must match for the
	// entry to check the image.
	ImageReferences []string `json:"imageReferences,omitempty"`
	// SkipImageReferences are image reference patterns of images the
	// entry skips.
	SkipImageReferences []string `json:"skipImageReferences,omitempty"`
	// Key is deprecated: use attestors with keys.
	Key string `json:"key,omitempty"`
	// Roots is deprecated: use attestors with keyless.
	Roots string `json:"roots,omitempty"`
	// Subject is deprecated: use attestors with keyless.
	Subject string `json:"subject,omitempty"`
	// Issuer is deprecated: use attestors with keyless.
	Issuer string `json:"issuer,omitempty"`
	// AdditionalExtensions is deprecated.
	AdditionalExtensions map[string]string `json:"additionalExtensions,omitempty"`
	// Attestors are the sets of authorities whose signatures the image
	// must carry; every set must be satisfied.
	Attestors []AttestorSet `json:"attestors,omitempty"`
	// Attestations are signed in-toto statements the image must carry,
	// with conditions on their predicates.
	Attestations []Attestation `json:"attestations,omitempty"`
	// Annotations is deprecated: use annotations per attestor.
	Annotations map[string]string `json:"annotations,omitempty"`
	// Repository is an alternate OCI repository holding the image's
	// signatures and attestations.
	Repository string `json:"repository,omitempty"`
	// CosignOCI11 enables cosign's experimental OCI 1.1 behaviour.
	CosignOCI11 bool `json:"cosignOCI11,omitempty"`
	// MutateDigest replaces the tag of each verified image by its digest
	// (default true; must be false under Audit).
	MutateDigest *bool `json:"mutateDigest,omitempty"`
	// VerifyDigest requires each checked image to be referenced by
	// digest (default true).
	VerifyDigest *bool `json:"verifyDigest,omitempty"`
	// Validation holds deny conditions over the attestations and the
	// rule's context, checked after the attestations.
	Validation *ValidateImageVerification `json:"validate,omitempty"`
	// Required requires each checked image to have passed verification
	// (default true).
	Required *bool `json:"required,omitempty"`
	// ImageRegistryCredentials are the credentials used with the
	// registries.
	ImageRegistryCredentials *ImageRegistryCredentials `json:"imageRegistryCredentials,omitempty"`
	// UseCache allows verification results of this entry to be cached
	// (default true).
	UseCache *bool `json:"useCache,omitempty"`
}

// VerificationType is Type with its default, Cosign.
func (iv *ImageVerification) VerificationType() string {
	if iv.Type == "" {
		return ImageVerifyCosign
	}
	return iv.Type
}

// MutatesDigest reports mutateDigest (absent is true).
func (iv *ImageVerification) MutatesDigest() bool { return iv.MutateDigest == nil || *iv.MutateDigest }

// VerifiesDigest reports verifyDigest (absent is true).
func (iv *ImageVerification) VerifiesDigest() bool { return iv.VerifyDigest == nil || *iv.VerifyDigest }

// IsRequired reports required (absent is true).
func (iv *ImageVerification) IsRequired() bool { return iv.Required == nil || *iv.Required }

// UsesCache reports useCache (absent is true).
func (iv *ImageVerification) UsesCache() bool { return iv.UseCache == nil || *iv.UseCache }

// AttestorSet is a set of attestors of which Count (all, when absent or 0)
// must verify.
type AttestorSet struct {
	// Count is how many entries must verify: absent, all of them; 1, any
	// one; N (at most the number of entries), at least N.
	Count *int `json:"count,omitempty"`
	// Entries are the attestors: static keys, certificates, keyless
	// identities, or a nested attestor set.
	Entries []Attestor `json:"entries,omitempty"`
}

// RequiredCount is the number of entries that must verify.
func (as *AttestorSet) RequiredCount() int {
	if as.Count == nil || *as.Count == 0 {
		return len(as.Entries)
	}
	return *as.Count
}

// Expanded is the set with its static-key entries holding several PEM
// keys split into one entry per key, as Kyverno counts them, and the
// count its entries must reach: Count, or every entry when it is absent
// or 0.
func (as *AttestorSet) Expanded() ([]Attestor, int) {
	var out []Attestor
	for _, e := range as.Entries {
		keys := []string(nil)
		if e.Keys != nil && e.Keys.PublicKeys != "" {
			keys = splitPEM(e.Keys.PublicKeys)
		}
		if len(keys) < 2 {
			out = append(out, e)
			continue
		}
		for _, k := range keys {
			c := e
			ka := *e.Keys
			ka.PublicKeys = k
			c.Keys = &ka
			out = append(out, c)
		}
	}
	if as.Count == nil || *as.Count == 0 {
		return out, len(out)
	}
	return out, *as.Count
}

// splitPEM returns each PEM block of s re-encoded.
func splitPEM(s string) []string {
	var out []string
	rest := []byte(s)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return out
		}
		out = append(out, string(pem.EncodeToMemory(b)))
	}
}

// Attestor is one authority: exactly one of keys, certificates, keyless
// and attestor (a nested set).
type Attestor struct {
	// Keys are public keys the signature must verify with.
	Keys *StaticKeyAttestor `json:"keys,omitempty"`
	// Certificates are a certificate and its chain the signature must
	// verify with.
	Certificates *CertificateAttestor `json:"certificates,omitempty"`
	// Keyless are the identity attributes of a Sigstore keyless
	// signature.
	Keyless *KeylessAttestor `json:"keyless,omitempty"`
	// Attestor is a nested attestor set (an AttestorSet, read with
	// NestedSet), for complex combinations of authorities.
	Attestor json.RawMessage `json:"attestor,omitempty"`
	// Annotations must each be present with the same value in the
	// signature's payload.
	Annotations map[string]string `json:"annotations,omitempty"`
	// Repository is an alternate OCI repository for this attestor's
	// signatures and attestations.
	Repository string `json:"repository,omitempty"`
	// SignatureAlgorithm is the hash of public-key signatures: sha224,
	// sha256 (the default), sha384 or sha512.
	SignatureAlgorithm string `json:"signatureAlgorithm,omitempty"`
}

// NestedSet decodes the nested attestor set (nil when there is none).
func (a *Attestor) NestedSet() (*AttestorSet, error) {
	if len(a.Attestor) == 0 {
		return nil, nil
	}
	var as AttestorSet
	if err := json.Unmarshal(a.Attestor, &as); err != nil {
		return nil, fmt.Errorf("failed to unmarshal attestor set %s: %w", a.Attestor, err)
	}
	return &as, nil
}

// StaticKeyAttestor verifies signatures with public keys.
type StaticKeyAttestor struct {
	// PublicKeys are PEM public keys (each one an entry of the set, for
	// the count), or a k8s://<namespace>/<secret> reference.
	PublicKeys string `json:"publicKeys,omitempty"`
	// SignatureAlgorithm is deprecated: use the attestor's.
	SignatureAlgorithm string `json:"signatureAlgorithm,omitempty"`
	// KMS is the URI of a key in a key management system.
	KMS string `json:"kms,omitempty"`
	// Secret names a Secret whose cosign.pub holds the public key.
	Secret *SecretReference `json:"secret,omitempty"`
	// Rekor configures the transparency log (absent: the public Rekor).
	Rekor *Rekor `json:"rekor,omitempty"`
	// CTLog configures the Signed Certificate Timestamp checks.
	CTLog *CTLog `json:"ctlog,omitempty"`
}

// SecretReference names a Secret.
type SecretReference struct {
	// Name of the Secret; it must hold a key cosign.pub.
	Name string `json:"name"`
	// Namespace of the Secret.
	Namespace string `json:"namespace"`
}

// CertificateAttestor verifies signatures with a certificate.
type CertificateAttestor struct {
	// Certificate is a PEM certificate.
	Certificate string `json:"cert,omitempty"`
	// CertificateChain is the PEM chain that verifies it.
	CertificateChain string `json:"certChain,omitempty"`
	// Rekor configures the transparency log (absent: the public Rekor).
	Rekor *Rekor `json:"rekor,omitempty"`
	// CTLog configures the Signed Certificate Timestamp checks.
	CTLog *CTLog `json:"ctlog,omitempty"`
}

// KeylessAttestor verifies Sigstore keyless signatures by the identity of
// their certificate.
type KeylessAttestor struct {
	// Rekor configures the transparency log (absent: the public Rekor).
	Rekor *Rekor `json:"rekor,omitempty"`
	// CTLog configures the Signed Certificate Timestamp checks.
	CTLog *CTLog `json:"ctlog,omitempty"`
	// Issuer is the OIDC issuer of the signing certificate.
	Issuer string `json:"issuer,omitempty"`
	// IssuerRegExp is a regular expression the issuer must match.
	IssuerRegExp string `json:"issuerRegExp,omitempty"`
	// Subject is the identity of the signer (an email address, a URI).
	Subject string `json:"subject,omitempty"`
	// SubjectRegExp is a regular expression the subject must match.
	SubjectRegExp string `json:"subjectRegExp,omitempty"`
	// Roots are PEM root certificates (absent: Sigstore's roots).
	Roots string `json:"roots,omitempty"`
	// AdditionalExtensions are certificate extensions the signing
	// certificate must carry.
	AdditionalExtensions map[string]string `json:"additionalExtensions,omitempty"`
}

// Rekor configures the transparency log.
type Rekor struct {
	// URL is the log's address (Kyverno's default is
	// https://rekor.sigstore.dev).
	URL string `json:"url,omitempty"`
	// RekorPubKey is the PEM public key of a custom log.
	RekorPubKey string `json:"pubkey,omitempty"`
	// IgnoreTlog skips the transparency log checks.
	IgnoreTlog bool `json:"ignoreTlog,omitempty"`
}

// CTLog configures the Signed Certificate Timestamp checks.
type CTLog struct {
	// IgnoreSCT skips the SCT check.
	IgnoreSCT bool `json:"ignoreSCT,omitempty"`
	// CTLogPubKey is the PEM public key that SCTs verify with.
	CTLogPubKey string `json:"pubkey,omitempty"`
	// TSACertChain is the PEM chain of an RFC 3161 timestamp authority.
	TSACertChain string `json:"tsaCertChain,omitempty"`
}

// Attestation is a signed in-toto statement the image must carry.
type Attestation struct {
	// Name is the variable under which the statement's predicate is
	// available to the entry's validate conditions.
	Name string `json:"name,omitempty"`
	// PredicateType is deprecated: use type.
	PredicateType string `json:"predicateType,omitempty"`
	// Type is the statement's predicate type.
	Type string `json:"type,omitempty"`
	// Attestors must have signed the statement (absent: any signature).
	Attestors []AttestorSet `json:"attestors,omitempty"`
	// Conditions must hold on each statement's predicate.
	Conditions []Conditions `json:"conditions,omitempty"`
}

// StatementType is Type, or the deprecated PredicateType when Type is
// empty.
func (a *Attestation) StatementType() string {
	if a.Type == "" {
		return a.PredicateType
	}
	return a.Type
}

// ImageRegistryCredentials are the credentials used with registries.
type ImageRegistryCredentials struct {
	// AllowInsecureRegistry allows registries without TLS.
	AllowInsecureRegistry bool `json:"allowInsecureRegistry,omitempty"`
	// Providers are the cloud credential helpers to use: default,
	// google, azure, amazon, github.
	Providers []string `json:"providers,omitempty"`
	// Secrets are image pull Secrets: a name (in Verdict's namespace) or
	// namespace/name. The resource's imagePullSecrets are used too.
	Secrets []string `json:"secrets,omitempty"`
}

// ValidateImageVerification holds deny conditions over the attestations
// and the context.
type ValidateImageVerification struct {
	// Message is shown when the conditions deny.
	Message string `json:"message,omitempty"`
	// Deny fails the entry when its conditions hold.
	Deny *Deny `json:"deny,omitempty"`
}

// Converted returns the entry in its current form, as Kyverno converts
// the deprecated fields: image is appended to imageReferences; key (a
// static key attestor) or else issuer, subject and roots (a keyless
// attestor), with the entry's annotations, become one attestor set,
// added to every attestation when there are attestations and to the
// attestors otherwise. The result has no image, key, issuer, subject or
// roots, so converting it again changes nothing. An entry with none of
// image, key and issuer is returned as it is (not a copy).
//
// Kyverno 111e07b builds the set for the attestations and then puts the
// original attestations back, dropping it (a key given with attestations
// is not used for them); Verdict keeps it, so that the key given is the
// one the attestations verify with.
func (iv *ImageVerification) Converted() *ImageVerification {
	if iv.Image == "" && iv.Key == "" && iv.Issuer == "" {
		return iv
	}
	cp := *iv
	cp.Image, cp.Key, cp.Issuer, cp.Subject, cp.Roots = "", "", "", "", ""
	cp.ImageReferences = append([]string(nil), iv.ImageReferences...)
	if iv.Image != "" {
		cp.ImageReferences = append(cp.ImageReferences, iv.Image)
	}
	if len(iv.Annotations) == 0 && iv.Key == "" && iv.Issuer == "" {
		return &cp
	}
	a := Attestor{Annotations: iv.Annotations}
	switch {
	case iv.Key != "":
		a.Keys = &StaticKeyAttestor{PublicKeys: iv.Key}
	case iv.Issuer != "":
		a.Keyless = &KeylessAttestor{Issuer: iv.Issuer, Subject: iv.Subject, Roots: iv.Roots}
	}
	set := AttestorSet{Entries: []Attestor{a}}
	if len(iv.Attestations) == 0 {
		cp.Attestors = append(append([]AttestorSet(nil), iv.Attestors...), set)
		return &cp
	}
	cp.Attestations = make([]Attestation, len(iv.Attestations))
	for i, at := range iv.Attestations {
		at.Attestors = append(append([]AttestorSet(nil), at.Attestors...), set)
		cp.Attestations[i] = at
	}
	return &cp
}

// isEnforce reports whether a failure action is Enforce (in either of the
// spellings Kyverno accepts).
func isEnforce(action string) bool { return action == Enforce || action == "enforce" }

// checkVerifyImages checks a rule's verifyImages entries as Kyverno does
// (ImageVerification.Validate, with Kyverno's messages): specAction is the
// policy's validationFailureAction, which an entry's failureAction
// overrides for the mutateDigest check.
func (ck checker) checkVerifyImages(r *Rule, specAction, path string, errs *FieldErrors) {
	for i := range r.VerifyImages {
		iv := &r.VerifyImages[i]
		ip := fmt.Sprintf("%s.verifyImages[%d]", path, i)
		audit := !isEnforce(specAction)
		if iv.FailureAction != "" {
			audit = !isEnforce(iv.FailureAction)
			checkAction(iv.FailureAction, ip+".failureAction", errs)
		}
		switch iv.Type {
		case "", ImageVerifyCosign, ImageVerifySigstoreBundle, ImageVerifyNotary:
		default:
			errs.add(ip+".type", "must be Cosign, SigstoreBundle or Notary, not %q", iv.Type)
		}
		if audit && iv.MutatesDigest() {
			errs.add(ip+".mutateDigest", "%s", "mutateDigest must be set to false for ‘Audit’ failure action")
		}
		c := iv.Converted()
		if len(c.ImageReferences) == 0 {
			errs.add(ip, "%s", "An image reference is required")
		}
		for _, ref := range c.ImageReferences {
			if strings.Contains(ref, "{{") {
				errs.add(ip+".imageReferences", "rule %q should not have variables in image reference section", r.Name)
				break
			}
		}
		for j := range iv.Attestations {
			for k := range iv.Attestations[j].Conditions {
				ck.checkConditions(&iv.Attestations[j].Conditions[k], fmt.Sprintf("%s.attestations[%d].conditions[%d]", ip, j, k), errs)
			}
		}
		if v := iv.Validation; v != nil && v.Deny != nil {
			ck.checkConditions(v.Deny.Conditions, ip+".validate.deny.conditions", errs)
		}
		for j := range c.Attestations {
			for k := range c.Attestations[j].Attestors {
				checkAttestorSet(&c.Attestations[j].Attestors[k], fmt.Sprintf("%s.attestations[%d].attestors[%d]", ip, j, k), errs)
			}
		}
		for j := range c.Attestors {
			checkAttestorSet(&c.Attestors[j], fmt.Sprintf("%s.attestors[%d]", ip, j), errs)
		}
		if iv.Type == ImageVerifyNotary {
			// Kyverno looks at the attestors as written, not converted.
			for _, set := range iv.Attestors {
				for _, a := range set.Entries {
					if a.Keyless != nil {
						errs.add(ip+".attestors", "%s", "Keyless field is not allowed for type notary")
					}
					if a.Keys != nil {
						errs.add(ip+".attestors", "%s", "Keys field is not allowed for type notary")
					}
				}
			}
		}
	}
	checkExtractorsDigest(r, path, errs)
}

// checkExtractorsDigest refuses, as Kyverno does, a rule that mutates
// digests of images found by an image extractor with a jmesPath (the
// image written is not the image extracted).
func checkExtractorsDigest(r *Rule, path string, errs *FieldErrors) {
	mutates := false
	for i := range r.VerifyImages {
		mutates = mutates || r.VerifyImages[i].MutatesDigest()
	}
	if !mutates {
		return
	}
	for _, list := range r.ImageExtractors {
		for _, e := range list {
			if m, ok := e.(map[string]any); ok && m["jmesPath"] != nil && m["jmesPath"] != "" {
				errs.add(path+".imageExtractors", "%s", "jmespath may not be used in an image extractor when mutating digests with verify images")
				return
			}
		}
	}
}

func checkAttestorSet(as *AttestorSet, path string, errs *FieldErrors) {
	if as.Count != nil && *as.Count > len(as.Entries) {
		errs.add(path, "%s", "Count cannot exceed length of entries")
	}
	if len(as.Entries) == 0 {
		errs.add(path, "%s", "An entry is required")
	}
	for i := range as.Entries {
		checkAttestor(&as.Entries[i], fmt.Sprintf("%s.entries[%d]", path, i), errs)
	}
}

func checkAttestor(a *Attestor, path string, errs *FieldErrors) {
	n := 0
	for _, set := range []bool{a.Keys != nil, a.Certificates != nil, a.Keyless != nil, len(a.Attestor) > 0} {
		if set {
			n++
		}
	}
	if n != 1 {
		errs.add(path, "%s", "keys, certificates, keyless, or a nested attestor is required")
	}
	if k := a.Keys; k != nil {
		if k.PublicKeys == "" && k.KMS == "" && k.Secret == nil {
			errs.add(path+".keys", "%s", "A public key, kms key or secret is required")
		}
		if k.PublicKeys != "" && !signatureAlgorithms[k.SignatureAlgorithm] {
			errs.add(path+".keys", "%s", "Invalid signature algorithm provided")
		}
	}
	if c := a.Certificates; c != nil && c.Certificate == "" && c.CertificateChain == "" {
		errs.add(path+".certificates", "%s", "cert or certChain required")
	}
	if k := a.Keyless; k != nil {
		if k.Rekor == nil && k.Roots == "" {
			errs.add(path+".keyless", "%s", "Either Rekor URL or roots are required")
		}
		if k.Rekor != nil && k.Rekor.URL == "" {
			errs.add(path+".keyless", "%s", "An URL is required")
		}
	}
	if len(a.Attestor) > 0 {
		nested, err := a.NestedSet()
		if err != nil {
			errs.add(path+".attestor", "%s", err.Error())
			return
		}
		checkAttestorSet(nested, path+".attestor", errs)
	}
}
