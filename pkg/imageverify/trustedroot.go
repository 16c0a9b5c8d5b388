package imageverify

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// A Sigstore trusted root (trusted_root.json) names the certificate
// authorities (Fulcio), transparency logs (Rekor), certificate
// transparency logs and timestamp authorities a verifier trusts: what
// Kyverno reads from Sigstore's TUF repository for the public instance.
// Verdict does not reach TUF; an operator gives the trusted root instead
// (WithTrustedRoot: `--sigstore-trusted-root`, the file a TUF client or
// `cosign trusted-root create` writes, refreshed as the operator's
// process refreshes it). With one, the checks that need the public
// instance's keys are made offline: keyless identities without roots
// chain to its Fulcio CAs, a signature's log entry verifies with its
// Rekor logs, a certificate's SCTs with its CT logs.

// WithTrustedRoot makes the verifier trust tm where a policy names no
// key, roots or log key of its own (see trustedroot.go).
func WithTrustedRoot(tm root.TrustedMaterial) Option {
	return func(v *Verifier) error {
		if tm == nil {
			return errors.New("imageverify: nil trusted root")
		}
		v.trusted = tm
		return nil
	}
}

// LoadTrustedRoot reads a trusted root (trusted_root.json) from path.
func LoadTrustedRoot(path string) (root.TrustedMaterial, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the Sigstore trusted root: %w", err)
	}
	tr, err := root.NewTrustedRootFromJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("the Sigstore trusted root %s: %w", path, err)
	}
	return tr, nil
}

// overlay is trusted material with a policy's own transparency log
// (rekor.pubkey) in place of the trusted root's: the log the policy
// names is never widened to the public instance's. (A policy's own
// keyless roots do not use the trusted root's CAs at all: logOptions.)
type overlay struct {
	root.TrustedMaterial
	logs map[string]*root.TransparencyLog
}

func (o overlay) RekorLogs() map[string]*root.TransparencyLog {
	if o.logs != nil {
		return o.logs
	}
	return o.TrustedMaterial.RekorLogs()
}

// logOf is a transparency log of its PEM public key, as Rekor names it
// (the log ID is the SHA-256 of the key's DER).
func logOf(pemKey string) (map[string]*root.TransparencyLog, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey([]byte(pemKey))
	if err != nil {
		return nil, fmt.Errorf("failed to load the rekor public key: %w", err)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("failed to load the rekor public key: %w", err)
	}
	sum := sha256.Sum256(der)
	id := hex.EncodeToString(sum[:])
	return map[string]*root.TransparencyLog{id: {ID: sum[:], HashFunc: crypto.SHA256, PublicKey: pub, SignatureHashFunc: crypto.SHA256}}, nil
}
