package imageverify

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	"github.com/sigstore/cosign/v3/pkg/oci"

	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// maxStatementBytes bounds one attestation's in-toto statement, decoded:
// a larger one (an SBOM of a very large image) fails the entry rather
// than the process's memory.
const maxStatementBytes = 8 << 20

// cosignProvenanceV01 is cosign's own "custom" predicate type, whose
// predicate holds its data as a string; Kyverno reads that string as
// JSON when it is.
const cosignProvenanceV01 = "https://cosign.sigstore.dev/attestation/v1"

// attestationFailure is an attestation that did not reach its attestors'
// count: Kyverno's failure message.
type attestationFailure string

func (f attestationFailure) Error() string { return string(f) }

// verifyAttestations checks each attestation of the entry, in order, as
// Kyverno does: for each of its attestor sets, entries are tried until
// the set's count is reached; an entry counts when it signed statements
// of the attestation's type and each of them satisfies the attestation's
// conditions (check, the engine's). It returns the statements of each
// attestation's type from the entry that satisfied it, an
// attestationFailure with Kyverno's message when one fell short, or
// another error when no verdict was reached (a registry unreachable, a
// check the verifier cannot do).
func (v *Verifier) verifyAttestations(ctx context.Context, tg target, iv *policy.ImageVerification, check func(int, map[string]any) (bool, string, error)) ([][]map[string]any, error) {
	out := make([][]map[string]any, len(iv.Attestations))
	for i := range iv.Attestations {
		at := &iv.Attestations[i]
		path := fmt.Sprintf(".attestations[%d]", i)
		typ := at.StatementType()
		if typ == "" {
			return nil, attestationFailure(path + ": missing type")
		}
		if len(at.Attestors) == 0 {
			// Kyverno checks such an attestation with the public Sigstore
			// roots (Fulcio and Rekor), which this verifier does not have.
			return nil, fmt.Errorf("%w: %s has no attestors (the public Sigstore roots)", ErrUnsupported, path)
		}
		for j := range at.Attestors {
			as := &at.Attestors[j]
			entries, required := as.Expanded()
			verified := 0
			var errs []string
			for k := range entries {
				epath := fmt.Sprintf("%s.attestors[%d].entries[%d]", path, j, k)
				statements, sub, err := v.attestEntry(ctx, tg, iv, &entries[k], i, typ, check)
				if err != nil {
					if noVerdict(ctx, err) {
						return nil, fmt.Errorf("%s%s: %w", epath, sub, err)
					}
					errs = append(errs, fmt.Sprintf("%s%s: %s", epath, sub, err))
					continue
				}
				out[i] = statements
				if verified++; verified >= required {
					break
				}
			}
			if verified < required {
				why := strings.Join(errs, "; ")
				if why == "" {
					why = "attestations verification failed"
				}
				return nil, attestationFailure(fmt.Sprintf("image attestations verification failed, verifiedCount: %d, requiredCount: %d, error: %s", verified, required, why))
			}
		}
	}
	return out, nil
}

// attestEntry verifies the image's attestations signed by one attestor
// entry and checks those of type typ: there must be one, and each must
// satisfy the attestation's conditions.
func (v *Verifier) attestEntry(ctx context.Context, tg target, iv *policy.ImageVerification, a *policy.Attestor, index int, typ string, check func(int, map[string]any) (bool, string, error)) ([]map[string]any, string, error) {
	if nested, err := a.NestedSet(); err != nil || nested != nil {
		// Kyverno reads no nested attestor sets in attestations.
		return nil, "", errors.New("nested attestors are not supported in attestations")
	}
	var statements []map[string]any
	var sub string
	if iv.VerificationType() == policy.ImageVerifyNotary {
		var err error
		if statements, err = v.notaryStatements(ctx, tg, a, typ); err != nil {
			return nil, "", err
		}
	} else {
		co, s, err := v.checkOpts(tg, iv, a)
		sub = s
		if err != nil {
			return nil, sub, err
		}
		co.ClaimVerifier = cosign.IntotoSubjectClaimVerifier
		// Cosign v3's bundles first (bundle.go), then the classic tag.
		bundled, found, bundleErr := bundleStatements(ctx, tg, co, typ)
		if bundleErr != nil && noVerdict(ctx, bundleErr) && !errors.Is(bundleErr, ErrUnsupported) {
			return nil, sub, bundleErr
		}
		statements = bundled
		var sigs []oci.Signature
		if len(statements) == 0 && iv.VerificationType() == policy.ImageVerifySigstoreBundle {
			if errors.Is(bundleErr, ErrUnsupported) {
				return nil, sub, bundleErr
			}
			return nil, sub, errors.New("sigstore bundle verification failed: no matching signatures found")
		}
		if len(statements) == 0 {
			sigs, _, err = cosign.VerifyImageAttestations(ctx, tg.ref, co)
		}
		if len(statements) == 0 && err == nil && len(sigs) == 0 && errors.Is(bundleErr, ErrUnsupported) {
			return nil, sub, bundleErr
		}
		if err != nil {
			if found && bundleErr != nil {
				return nil, sub, bundleErr
			}
			if found || strings.Contains(err.Error(), "MANIFEST_UNKNOWN") {
				return nil, sub, errors.New("not found")
			}
			return nil, sub, err
		}
		for _, sig := range sigs {
			st, err := decodeStatement(sig)
			if err != nil {
				return nil, sub, err
			}
			t, _ := st["type"].(string)
			if t == typ {
				statements = append(statements, st)
			}
		}
	}
	if len(statements) == 0 {
		// Kyverno's words, its spelling kept for those who match them.
		return nil, sub, fmt.Errorf("attestions not found for predicate type %s", typ)
	}
	image := tg.ref.String()
	for _, st := range statements {
		if check == nil {
			break
		}
		ok, msg, err := check(index, st)
		if err != nil {
			return nil, sub, fmt.Errorf("failed to check attestations: %w", err)
		}
		if !ok {
			return nil, sub, fmt.Errorf("attestation checks failed for %s and predicate %s: %s", image, typ, msg)
		}
	}
	return statements, sub, nil
}

// decodeStatement decodes the in-toto statement of a verified attestation
// (a DSSE envelope) into a map with its "type" set to its predicate type,
// as Kyverno presents statements to conditions.
func decodeStatement(sig oci.Signature) (map[string]any, error) {
	raw, err := sig.Payload()
	if err != nil {
		return nil, fmt.Errorf("failed to decode payload: %w", err)
	}
	var envelope struct {
		Payload string `json:"payload"`
	}
	if err := json.Unmarshal(raw, &envelope); err != nil {
		return nil, fmt.Errorf("failed to unmarshal JSON payload: %w", err)
	}
	if envelope.Payload == "" {
		return nil, errors.New("missing payload in the attestation's envelope")
	}
	if base64.StdEncoding.DecodedLen(len(envelope.Payload)) > maxStatementBytes {
		return nil, fmt.Errorf("attestation statement larger than %d bytes", maxStatementBytes)
	}
	body, err := base64.StdEncoding.DecodeString(envelope.Payload)
	if err != nil {
		return nil, fmt.Errorf("failed to base64 decode payload: %w", err)
	}
	var st map[string]any
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("failed to decode statement: %w", err)
	}
	if st == nil {
		return nil, errors.New("failed to decode statement: not a JSON object")
	}
	st["type"] = st["predicateType"]
	if st["predicateType"] == cosignProvenanceV01 {
		if p, ok := st["predicate"].(map[string]any); ok {
			if data, ok := p["Data"].(string); ok {
				var m map[string]any
				if json.Unmarshal([]byte(data), &m) == nil && m != nil {
					p["Data"] = m
				}
			}
		}
	}
	return st, nil
}

// notaryStatements are the image's Notary attestations of type typ: its
// OCI 1.1 referrers of that artifactType (through the referrers API or
// the tag schema) whose Notary signature the attestor's certificates
// verify, each read as Kyverno reads it: the referrer's manifest with its
// "type" the artifact type and its "predicate" its one layer's JSON. A
// referrer whose signature does not verify is not an attestation of the
// attestor (anyone who may push to the repository can add one); none
// verified is an error saying why.
func (v *Verifier) notaryStatements(ctx context.Context, tg target, a *policy.Attestor, typ string) ([]map[string]any, error) {
	repo := &notaryRepo{repo: tg.ref.Context(), opts: tg.opts}
	desc, err := repo.Resolve(ctx, tg.ref.Identifier())
	if err != nil {
		return nil, err
	}
	idx, err := remote.Referrers(tg.ref.Context().Digest(desc.Digest.String()), append(tg.opts, remote.WithFilter("artifactType", typ))...)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) > maxNotaryReferrers {
		return nil, fmt.Errorf("failed to fetch referrers: too many referrers found (%d), max limit is %d", len(m.Manifests), maxNotaryReferrers)
	}
	var out []map[string]any
	var errs []error
	for _, d := range m.Manifests {
		if d.ArtifactType != typ {
			continue
		}
		artifact := target{ref: tg.ref.Context().Digest(d.Digest.String()), opts: tg.opts, key: tg.key}
		if _, err := v.verifyNotary(ctx, artifact, a); err != nil {
			if noVerdict(ctx, err) {
				return nil, err
			}
			errs = append(errs, fmt.Errorf("referrer %s: %w", d.Digest, err))
			continue
		}
		st, err := referrerStatement(artifact, d)
		if err != nil {
			if noVerdict(ctx, err) {
				return nil, err
			}
			errs = append(errs, fmt.Errorf("referrer %s: %w", d.Digest, err))
			continue
		}
		out = append(out, st)
	}
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// referrerStatement reads a Notary attestation: the referrer's manifest
// (one layer, at most maxStatementBytes), with "type" its artifact type
// and "predicate" its layer's JSON object.
func referrerStatement(artifact target, d v1.Descriptor) (map[string]any, error) {
	img, err := remote.Image(artifact.ref, artifact.opts...)
	if err != nil {
		return nil, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	if len(m.Layers) != 1 {
		return nil, fmt.Errorf("the attestation has %d layers, want 1", len(m.Layers))
	}
	if m.Layers[0].Size > maxStatementBytes {
		return nil, fmt.Errorf("the attestation's predicate of %d bytes exceeds %d", m.Layers[0].Size, maxStatementBytes)
	}
	layer, err := img.LayerByDigest(m.Layers[0].Digest)
	if err != nil {
		return nil, err
	}
	rc, err := layer.Compressed()
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	body, err := io.ReadAll(io.LimitReader(rc, maxStatementBytes+1))
	if err != nil {
		return nil, err
	}
	var predicate map[string]any
	if err := json.Unmarshal(body, &predicate); err != nil || predicate == nil {
		return nil, errors.New("the attestation's predicate is not a JSON object")
	}
	var st map[string]any
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, err
	}
	if st["type"] == nil {
		st["type"] = d.ArtifactType
	}
	if st["predicate"] == nil {
		st["predicate"] = predicate
	}
	return st, nil
}
