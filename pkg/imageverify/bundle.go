package imageverify

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sigstore/cosign/v3/pkg/cosign"
	ctypes "github.com/sigstore/cosign/v3/pkg/types"
)

// Cosign v3 signs in the new bundle format by default: a signature is an
// in-toto statement of predicate type https://sigstore.dev/cosign/sign/v1
// and an attestation any other statement, each in a DSSE envelope inside
// a Sigstore bundle (v0.3) attached to the image as an OCI 1.1 referrer,
// instead of the classic .sig and .att tags. As Kyverno does, the
// verifier looks for bundles first and verifies them with sigstore-go
// (through cosign) when the image has any, and reads the classic tags
// when it has none or none of its bundles verifies.

// bundleStatements verifies the image's Sigstore bundles with co and
// returns the in-toto statements of type typ among those that verified
// (decoded as decodeStatement decodes them); found is false when the
// image has no bundle at all.
func bundleStatements(ctx context.Context, tg target, co *cosign.CheckOpts, typ string) (statements []map[string]any, found bool, err error) {
	bundles, _, err := cosign.GetBundles(ctx, tg.ref, co.RegistryClientOpts)
	var none *cosign.ErrNoMatchingAttestations
	switch {
	case errors.As(err, &none):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	case len(bundles) == 0:
		return nil, false, nil
	}
	if co.SigVerifier == nil {
		// Keyless and certificate chains: sigstore-go verifies them
		// against a trusted root (Fulcio's CAs), which is not built
		// from a policy's roots yet.
		return nil, true, fmt.Errorf("%w: keyless and certificate-chain verification of Sigstore bundles", ErrUnsupported)
	}
	if !co.IgnoreTlog {
		return nil, true, fmt.Errorf("%w: transparency log checks of Sigstore bundles; set rekor.ignoreTlog", ErrUnsupported)
	}
	bco := *co
	bco.NewBundleFormat = true
	bco.ClaimVerifier = cosign.IntotoSubjectClaimVerifier
	sigs, _, err := cosign.VerifyImageAttestations(ctx, tg.ref, &bco)
	if err != nil {
		return nil, true, err
	}
	for _, sig := range sigs {
		st, err := decodeStatement(sig)
		if err != nil {
			return nil, true, err
		}
		if t, _ := st["type"].(string); t == typ {
			statements = append(statements, st)
		}
	}
	return statements, true, nil
}

// verifyBundleSignatures verifies the image's cosign v3 signatures: the
// bundles of the signing predicate type that co's attestor signed. It
// returns the digest they sign; found is false when the image has no
// bundle.
func verifyBundleSignatures(ctx context.Context, tg target, co *cosign.CheckOpts) (digest string, found bool, err error) {
	statements, found, err := bundleStatements(ctx, tg, co, ctypes.CosignSignPredicateType)
	if !found || err != nil {
		return "", found, err
	}
	if len(statements) == 0 {
		return "", true, errors.New("no matching signatures: the image's bundles hold no signature")
	}
	return statementDigest(statements[0]), true, nil
}

// statementDigest is the sha256 digest a statement's first subject
// names, as sha256:<hex>.
func statementDigest(st map[string]any) string {
	subjects, _ := st["subject"].([]any)
	for _, s := range subjects {
		m, _ := s.(map[string]any)
		d, _ := m["digest"].(map[string]any)
		if hex, ok := d["sha256"].(string); ok && hex != "" {
			return "sha256:" + hex
		}
	}
	return ""
}

// bundleError words a failure of both forms: the bundles' and the
// classic tags'.
func bundleError(bundleErr, classicErr error) error {
	if classicErr == nil {
		return bundleErr
	}
	msg := classicErr.Error()
	if strings.Contains(msg, "no signatures found") || strings.Contains(msg, "MANIFEST_UNKNOWN") || strings.Contains(msg, "not found") {
		return fmt.Errorf("no matching signatures: %w", bundleErr)
	}
	return fmt.Errorf("%w; classic signatures: %w", bundleErr, classicErr)
}
