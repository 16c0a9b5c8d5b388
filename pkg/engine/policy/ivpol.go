package policy

import (
	"fmt"
	"slices"
	"strings"
)

// The image validating CEL policy kinds of policies.kyverno.io.
const (
	KindImageValidatingPolicy           = "ImageValidatingPolicy"
	KindNamespacedImageValidatingPolicy = "NamespacedImageValidatingPolicy"
)

// ImageValidatingPolicySpec is the spec of an ImageValidatingPolicy
// (v1alpha1, v1beta1 and v1 share it): the images of the requests
// matchConstraints select, those matchImageReferences name, checked by
// CEL validations that call verifyImageSignatures,
// verifyAttestationSignatures and extractPayload with the policy's
// attestors and attestations.
type ImageValidatingPolicySpec struct {
	MatchConstraints *MatchConstraints `json:"matchConstraints,omitempty"`
	MatchConditions  []MatchCondition  `json:"matchConditions,omitempty"`
	Variables        []NamedExpression `json:"variables,omitempty"`
	// FailurePolicy is Fail (the default) or Ignore.
	FailurePolicy string `json:"failurePolicy,omitempty"`
	// ValidationActions are Deny (the default), Audit and Warn.
	ValidationActions []string          `json:"validationActions,omitempty"`
	AuditAnnotations  []AuditAnnotation `json:"auditAnnotations,omitempty"`
	// ValidationConfigurations are mutateDigest, verifyDigest and
	// required, each true unless set false.
	ValidationConfigurations ImageValidationConfiguration `json:"validationConfigurations,omitempty"`
	// MatchImageReferences select the images the policy checks, by glob
	// or CEL expression over imageRef; none selects every image.
	MatchImageReferences []MatchImageReference `json:"matchImageReferences,omitempty"`
	// Credentials are how registries are read.
	Credentials *ImageCredentials `json:"credentials,omitempty"`
	// Images are named lists of images, each a CEL expression, that
	// validations read as images.<name> (beside the Pod spec's
	// containers, initContainers and ephemeralContainers).
	Images []NamedExpression `json:"images,omitempty"`
	// Attestors are the trusted authorities, read as attestors.<name>.
	Attestors []ImageAttestor `json:"attestors,omitempty"`
	// Attestations are the metadata to verify, read as
	// attestations.<name>.
	Attestations []ImageAttestation `json:"attestations,omitempty"`
	// Validations are CEL expressions that must be true.
	Validations          []CELExpression          `json:"validations,omitempty"`
	WebhookConfiguration map[string]any           `json:"webhookConfiguration,omitempty"`
	Evaluation           *EvaluationConfiguration `json:"evaluation,omitempty"`
	Autogen              *AutogenConfiguration    `json:"autogen,omitempty"`
}

// ImageValidationConfiguration is an ImageValidatingPolicy's
// validationConfigurations.
type ImageValidationConfiguration struct {
	// MutateDigest pins the images the policy selects to their digests
	// (default true).
	MutateDigest *bool `json:"mutateDigest,omitempty"`
	// VerifyDigest fails an image named without a digest (default true).
	VerifyDigest *bool `json:"verifyDigest,omitempty"`
	// Required fails an image no verification of the request passed
	// (default true).
	Required *bool `json:"required,omitempty"`
}

func isTrue(b *bool) bool { return b == nil || *b }

// MutatesDigest, VerifiesDigest and RequiresVerification read the
// configuration with its defaults (true).
func (c ImageValidationConfiguration) MutatesDigest() bool        { return isTrue(c.MutateDigest) }
func (c ImageValidationConfiguration) VerifiesDigest() bool       { return isTrue(c.VerifyDigest) }
func (c ImageValidationConfiguration) RequiresVerification() bool { return isTrue(c.Required) }

// MatchImageReference selects images by a glob or a CEL expression over
// imageRef.
type MatchImageReference struct {
	Glob       string `json:"glob,omitempty"`
	Expression string `json:"expression,omitempty"`
}

// ImageCredentials are an ImageValidatingPolicy's registry credentials.
type ImageCredentials struct {
	AllowInsecureRegistry bool     `json:"allowInsecureRegistry,omitempty"`
	Providers             []string `json:"providers,omitempty"`
	// Secrets are image pull Secrets of Verdict's namespace (of the
	// policy's own for a namespaced policy).
	Secrets []string `json:"secrets,omitempty"`
}

// ImageAttestor is one trusted authority: cosign or notary.
type ImageAttestor struct {
	Name   string        `json:"name"`
	Cosign *CosignSigner `json:"cosign,omitempty"`
	Notary *NotarySigner `json:"notary,omitempty"`
}

// CosignSigner is a cosign attestor: a key, keyless identities or a
// certificate, with where signatures are and how the logs are checked.
type CosignSigner struct {
	Key         *CosignKey         `json:"key,omitempty"`
	Keyless     *CosignKeyless     `json:"keyless,omitempty"`
	Certificate *CosignCertificate `json:"certificate,omitempty"`
	Source      *CosignSource      `json:"source,omitempty"`
	CTLog       *CosignCTLog       `json:"ctlog,omitempty"`
	TUF         *CosignTUF         `json:"tuf,omitempty"`
	// TrustedRoot is a sigstore trusted root (1.19).
	TrustedRoot *StringOrExpression `json:"trustedRoot,omitempty"`
	// Annotations must each be in the signature's payload.
	Annotations map[string]string `json:"annotations,omitempty"`
}

// CosignKey is a public key: inline, by KMS or from an expression.
type CosignKey struct {
	Data          string `json:"data,omitempty"`
	KMS           string `json:"kms,omitempty"`
	HashAlgorithm string `json:"hashAlgorithm,omitempty"`
	Expression    string `json:"expression,omitempty"`
}

// CosignKeyless are the identities a keyless signature may carry, and
// the roots its certificate chains to.
type CosignKeyless struct {
	Identities []KeylessIdentity `json:"identities,omitempty"`
	Roots      string            `json:"roots,omitempty"`
}

// KeylessIdentity is an issuer and subject, exact or by regular
// expression.
type KeylessIdentity struct {
	Issuer        string `json:"issuer,omitempty"`
	Subject       string `json:"subject,omitempty"`
	IssuerRegExp  string `json:"issuerRegExp,omitempty"`
	SubjectRegExp string `json:"subjectRegExp,omitempty"`
}

// CosignCertificate is a signing certificate and its chain.
type CosignCertificate struct {
	Certificate      *StringOrExpression `json:"cert,omitempty"`
	CertificateChain *StringOrExpression `json:"certChain,omitempty"`
}

// StringOrExpression is a value, or a CEL expression giving it.
type StringOrExpression struct {
	Value      string `json:"value,omitempty"`
	Expression string `json:"expression,omitempty"`
}

// CosignSource is where signatures and attestations are.
type CosignSource struct {
	Repository  string           `json:"repository,omitempty"`
	PullSecrets []map[string]any `json:"PullSecrets,omitempty"`
	TagPrefix   string           `json:"tagPrefix,omitempty"`
}

// CosignCTLog configures the transparency and certificate logs.
type CosignCTLog struct {
	URL                string `json:"url,omitempty"`
	RekorPubKey        string `json:"rekorPubKey,omitempty"`
	CTLogPubKey        string `json:"ctLogPubKey,omitempty"`
	TSACertChain       string `json:"tsaCertChain,omitempty"`
	InsecureIgnoreTlog bool   `json:"insecureIgnoreTlog,omitempty"`
	InsecureIgnoreSCT  bool   `json:"insecureIgnoreSCT,omitempty"`
}

// CosignTUF is where sigstore's trust root comes from.
type CosignTUF struct {
	Root   map[string]any `json:"root,omitempty"`
	Mirror string         `json:"mirror,omitempty"`
}

// NotarySigner is a Notary attestor: the certificates signatures chain
// to, and those of timestamp authorities.
type NotarySigner struct {
	Certs    *StringOrExpression `json:"certs,omitempty"`
	TSACerts *StringOrExpression `json:"tsaCerts,omitempty"`
}

// ImageAttestation is metadata attached to an image: an in-toto
// statement (cosign) or an OCI 1.1 referrer, by type.
type ImageAttestation struct {
	Name     string           `json:"name"`
	InToto   *AttestationType `json:"intoto,omitempty"`
	Referrer *AttestationType `json:"referrer,omitempty"`
}

// AttestationType names a statement's predicate type or a referrer's
// artifact type.
type AttestationType struct {
	Type string `json:"type"`
}

// JSONMode reports whether the policy checks JSON payloads (evaluation
// mode JSON).
func (s *ImageValidatingPolicySpec) JSONMode() bool {
	return s.Evaluation != nil && strings.EqualFold(s.Evaluation.Mode, "JSON")
}

// Actions are the validation actions, Deny when none is given.
func (s *ImageValidatingPolicySpec) Actions() []string {
	if len(s.ValidationActions) == 0 {
		return []string{"Deny"}
	}
	return s.ValidationActions
}

// ImageValidatingPolicyFromObject converts an untyped
// ImageValidatingPolicy or NamespacedImageValidatingPolicy into a Policy
// whose IVPol holds its spec; its Spec carries the failure action
// (Enforce when the actions hold Deny, the default), admission,
// background and the failure policy.
func ImageValidatingPolicyFromObject(obj map[string]any) (*Policy, error) {
	var doc struct {
		APIVersion string                    `json:"apiVersion"`
		Kind       string                    `json:"kind"`
		Metadata   ObjectMeta                `json:"metadata"`
		Spec       ImageValidatingPolicySpec `json:"spec"`
	}
	if err := fromUntyped(obj, &doc); err != nil {
		return nil, err
	}
	p := &Policy{APIVersion: doc.APIVersion, Kind: doc.Kind, Metadata: doc.Metadata, IVPol: &doc.Spec}
	if errs := validateIVPol(p); len(errs) > 0 {
		return nil, fmt.Errorf("%s %s: %w", p.Kind, p.Metadata.Name, errs.ToAggregate())
	}
	s := &doc.Spec
	p.Spec.ValidationFailureAction = Audit
	if slices.Contains(s.Actions(), "Deny") {
		p.Spec.ValidationFailureAction = Enforce
	}
	var admission, background *Toggle
	if e := s.Evaluation; e != nil {
		admission, background = e.Admission, e.Background
	}
	p.setCELSpec(admission, background, s.FailurePolicy, s.WebhookConfiguration)
	return p, nil
}

// validateIVPol finds what makes an ImageValidatingPolicy unusable. CEL
// expressions are compiled (and their errors reported) by the engine.
func validateIVPol(p *Policy) FieldErrors {
	s := p.IVPol
	errs := validateValidating(p, KindNamespacedImageValidatingPolicy, validatingFields{
		json: s.JSONMode(), match: s.MatchConstraints, validations: len(s.Validations),
		actions: s.ValidationActions, failurePolicy: s.FailurePolicy, evaluation: s.Evaluation,
	})
	for i, m := range s.MatchImageReferences {
		if (m.Glob == "") == (m.Expression == "") {
			errs.add(fmt.Sprintf("spec.matchImageReferences[%d]", i), "exactly one of glob and expression is required")
		}
	}
	names := map[string]bool{}
	for i, a := range s.Attestors {
		path := fmt.Sprintf("spec.attestors[%d]", i)
		if a.Name == "" {
			errs.add(path+".name", "an attestor needs a name")
		} else if names[a.Name] {
			errs.add(path+".name", "attestor %q is declared twice", a.Name)
		}
		names[a.Name] = true
		if (a.Cosign == nil) == (a.Notary == nil) {
			errs.add(path, "exactly one of cosign and notary is required")
			continue
		}
		if c := a.Cosign; c != nil {
			n := 0
			for _, set := range []bool{c.Key != nil, c.Keyless != nil, c.Certificate != nil} {
				if set {
					n++
				}
			}
			if n != 1 {
				errs.add(path+".cosign", "exactly one of key, keyless and certificate is required")
			}
			if k := c.Key; k != nil {
				m := 0
				for _, v := range []string{k.Data, k.KMS, k.Expression} {
					if v != "" {
						m++
					}
				}
				if m != 1 {
					errs.add(path+".cosign.key", "exactly one of data, kms and expression is required")
				}
			}
			if k := c.Keyless; k != nil && len(k.Identities) == 0 {
				errs.add(path+".cosign.keyless.identities", "at least one identity is required")
			}
		}
		if n := a.Notary; n != nil && (n.Certs == nil || (n.Certs.Value == "" && n.Certs.Expression == "")) {
			errs.add(path+".notary.certs", "certificates are required")
		}
	}
	atts := map[string]bool{}
	for i, a := range s.Attestations {
		path := fmt.Sprintf("spec.attestations[%d]", i)
		if a.Name == "" {
			errs.add(path+".name", "an attestation needs a name")
		} else if atts[a.Name] {
			errs.add(path+".name", "attestation %q is declared twice", a.Name)
		}
		atts[a.Name] = true
		if (a.InToto == nil) == (a.Referrer == nil) {
			errs.add(path, "exactly one of intoto and referrer is required")
		}
	}
	for i, im := range s.Images {
		if im.Name == "" {
			errs.add(fmt.Sprintf("spec.images[%d].name", i), "an image list needs a name")
		}
	}
	return errs
}
