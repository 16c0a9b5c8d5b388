// Package imageverify verifies container images for the engine's
// verifyImages rules (engine.ImageVerifier): signatures made with cosign,
// checked with sigstore's cosign library against the rule's attestors,
// fetched from registries with go-containerregistry.
//
// What it verifies so far: Cosign signatures (the classic .sig form, and
// cosign v3's Sigstore bundles attached as OCI 1.1 referrers: bundle.go) by
// attestor sets of public keys (publicKeys, one entry per PEM key),
// certificates (cert, certChain) and keyless identities (roots, issuer,
// subject and their regular expressions), nested attestor sets, and each
// set's count; in-toto attestations (the .att form or bundles, DSSE
// envelopes) by
// type, signed by each attestation's attestor sets, whose statements the
// engine checks against the attestation's conditions
// (ImageVerifyRequest.CheckStatement); Notary signatures (notation-go,
// JWS and COSE envelopes as OCI 1.1 referrers) by certificates, and Notary
// attestations (referrers of the attestation's artifact type, each
// signed with Notary).
// Transparency-log and SCT checks are done only when the policy switches
// them off (rekor.ignoreTlog, ctlog.ignoreSCT): a policy that asks for
// them gets an error until the log clients are built. KMS keys are
// answered with an error naming what is missing, never with a pass.
package imageverify

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	"github.com/sigstore/cosign/v3/pkg/oci"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	sigtuf "github.com/sigstore/sigstore/pkg/tuf"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// ErrUnsupported: the entry asks for something this verifier does not do
// yet. It is engine.ErrImageVerificationUnsupported: the engine answers it
// as a rule error marked Unsupported, never as a pass.
var ErrUnsupported = engine.ErrImageVerificationUnsupported

// Verifier is an engine.ImageVerifier. It is safe for concurrent use.
type Verifier struct {
	remote []remote.Option
	sem    chan struct{}
	cache  Cache
	// flight makes concurrent verifications of one key one.
	flight   singleflight.Group
	observer Observer
	creds    Credentials
	keychain authn.Keychain
	// transport, when set (WithTransport), carries every registry call
	// and counts each verification's response bytes.
	transport        http.RoundTripper
	maxResponseBytes int64
	// trusted is the operator's Sigstore trusted root (WithTrustedRoot).
	trusted root.TrustedMaterial
}

// target is the image one request verifies, and the registry options of
// that request (its context, the verifier's options, its credentials).
type target struct {
	ref  name.Reference
	opts []remote.Option
	// key reads the public key (cosign.pub) of the Secret namespace/name
	// for the request; nil without Credentials.
	key func(namespace, name string) (string, error)
	// trusted is the verifier's trusted root, nil without one.
	trusted root.TrustedMaterial
}

// target makes req's target: image parsed (ok false, with Kyverno's
// failure message, when it does not parse), options with the request's
// credentials before the verifier's keychain. An error reading the
// credentials is no verdict.
func (v *Verifier) target(ctx context.Context, req engine.ImageVerifyRequest) (target, error) {
	image := req.Image.Ref.String()
	ref, err := name.ParseReference(image)
	if err != nil {
		return target{}, err
	}
	if v.transport != nil {
		ctx = withBudget(ctx, v.maxResponseBytes)
	}
	opts := append([]remote.Option{remote.WithContext(ctx)}, v.remote...)
	if v.transport != nil {
		opts = append(opts, remote.WithTransport(v.transport))
	}
	var kcs []authn.Keychain
	if v.creds != nil {
		kc, err := v.creds.Keychain(ctx, req)
		if err != nil {
			return target{}, fmt.Errorf("%w: %w", errCredentials, err)
		}
		if kc != nil {
			kcs = append(kcs, kc)
		}
	}
	if v.keychain != nil {
		kcs = append(kcs, v.keychain)
	}
	if len(kcs) > 0 {
		opts = append(opts, remote.WithAuthFromKeychain(authn.NewMultiKeychain(kcs...)))
	}
	tg := target{ref: ref, opts: opts, trusted: v.trusted}
	if v.creds != nil {
		tg.key = func(namespace, name string) (string, error) {
			k, err := v.creds.PublicKey(ctx, req, namespace, name)
			if err != nil {
				return "", fmt.Errorf("%w: %w", errKeySecret, err)
			}
			return k, nil
		}
	}
	return tg, nil
}

// errCredentials: the request's registry credentials could not be read.
var errCredentials = errors.New("failed to read registry credentials")

// errKeySecret: the Secret holding an attestor's key could not be read.
var errKeySecret = errors.New("failed to read the key's Secret")

// noVerdict reports whether err says that no verdict was reached (a
// registry unreachable, a Secret unreadable, a check this verifier does
// not make, the deadline), rather than that the image failed.
func noVerdict(ctx context.Context, err error) bool {
	var netErr *net.OpError
	return errors.As(err, &netErr) || errors.Is(err, ErrUnsupported) || errors.Is(err, errCredentials) ||
		errors.Is(err, errKeySecret) || errors.Is(err, ErrResponseBudget) || ctx.Err() != nil
}

// Option configures New.
type Option func(*Verifier) error

// WithRemoteOptions are go-containerregistry options for every registry
// call (a transport that dials through the blocklist, a keychain, an
// insecure registry's settings).
func WithRemoteOptions(opts ...remote.Option) Option {
	return func(v *Verifier) error {
		v.remote = append(v.remote, opts...)
		return nil
	}
}

// WithMaxConcurrent bounds the verifications under way at once (each
// pulls manifests and signatures from a registry). Default 8.
func WithMaxConcurrent(n int) Option {
	return func(v *Verifier) error {
		if n < 1 {
			return fmt.Errorf("imageverify: max concurrent %d: must be positive", n)
		}
		v.sem = make(chan struct{}, n)
		return nil
	}
}

// New makes a verifier.
func New(opts ...Option) (*Verifier, error) {
	v := &Verifier{sem: make(chan struct{}, 8), observer: noObserver{}, maxResponseBytes: DefaultMaxResponseBytes}
	for _, o := range opts {
		if err := o(v); err != nil {
			return nil, err
		}
	}
	return v, nil
}

var _ engine.ImageVerifier = (*Verifier)(nil)

// Verify checks req.Image against every attestor set of the entry, in
// order, with Kyverno's messages: a set that does not reach its count
// fails the image with "failed to verify image <image>: <path>: <why>";
// a registry that cannot be reached is an error.
//
// With a cache (WithCache) and the entry's useCache, a pass kept for the
// same key is the result (Cached, with the digest that was verified),
// and verifications of one key under way at once are made once. A pass
// of an image named by tag is kept for the image pinned to the digest
// verified as well.
func (v *Verifier) Verify(ctx context.Context, req engine.ImageVerifyRequest) (res engine.ImageVerifyResult, err error) {
	start := time.Now()
	defer func() {
		v.observer.Verified(outcomeOf(res, err), res.Cached, time.Since(start))
	}()
	if v.cache == nil || !req.Cacheable() {
		return v.verify(ctx, req)
	}
	key, err := CacheKey(req)
	if err != nil {
		return v.verify(ctx, req)
	}
	digest, ok, err := v.cache.Get(ctx, key)
	v.observer.CacheLookup(err == nil && ok)
	if err == nil && ok {
		return engine.ImageVerifyResult{Verified: true, Digest: digest, Cached: true, Message: "verified from cache"}, nil
	}
	ch := v.flight.DoChan(key, func() (any, error) {
		// Shared by the callers waiting: it ends at the first caller's
		// deadline, not when that caller gives up.
		fctx := context.WithoutCancel(ctx)
		if d, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			fctx, cancel = context.WithDeadline(fctx, d)
			defer cancel()
		}
		res, err := v.verify(fctx, req)
		if err == nil && res.Verified {
			_ = v.cache.Put(fctx, key, res.Digest)
			if req.Image.Ref.Digest == "" && res.Digest != "" {
				// The image by tag was verified as this digest: the same
				// image pinned to it (what mutateDigest makes of it, and
				// what the validating webhook and the scans then see) is
				// verified too.
				pinned := req
				pinned.Image.Ref.Digest = res.Digest
				if pkey, err := CacheKey(pinned); err == nil {
					_ = v.cache.Put(fctx, pkey, res.Digest)
				}
			}
		}
		return res, err
	})
	select {
	case r := <-ch:
		res, _ := r.Val.(engine.ImageVerifyResult)
		return res, r.Err
	case <-ctx.Done():
		return engine.ImageVerifyResult{}, fmt.Errorf("failed to verify image %s: %w", req.Image.Ref.String(), ctx.Err())
	}
}

// verify verifies req against the registry. A panic in the libraries it
// calls is an error of this verification: it runs in a goroutine of its
// own (singleflight), where a panic would end the process.
func (v *Verifier) verify(ctx context.Context, req engine.ImageVerifyRequest) (res engine.ImageVerifyResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = engine.ImageVerifyResult{}, fmt.Errorf("failed to verify image %s: internal error: %v", req.Image.Ref.String(), r)
		}
	}()
	iv := req.Verification
	if iv == nil {
		return engine.ImageVerifyResult{}, fmt.Errorf("imageverify: no verification entry")
	}
	switch t := iv.VerificationType(); {
	case t != policy.ImageVerifyCosign && t != policy.ImageVerifyNotary && t != policy.ImageVerifySigstoreBundle:
		return engine.ImageVerifyResult{}, fmt.Errorf("%w: type %s", ErrUnsupported, t)
	}
	image := req.Image.Ref.String()
	tg, err := v.target(ctx, req)
	switch {
	case errors.Is(err, errCredentials):
		return engine.ImageVerifyResult{}, fmt.Errorf("failed to verify image %s: %w", image, err)
	case err != nil:
		return engine.ImageVerifyResult{Message: fmt.Sprintf("failed to verify image %s: %s", image, err)}, nil
	}
	select {
	case v.sem <- struct{}{}:
		defer func() { <-v.sem }()
	case <-ctx.Done():
		return engine.ImageVerifyResult{}, ctx.Err()
	}
	var digest string
	for i := range iv.Attestors {
		d, err := v.verifySet(ctx, tg, iv, &iv.Attestors[i], fmt.Sprintf(".attestors[%d]", i))
		if err != nil {
			if noVerdict(ctx, err) {
				return engine.ImageVerifyResult{}, fmt.Errorf("failed to verify image %s: %w", image, err)
			}
			return engine.ImageVerifyResult{Message: fmt.Sprintf("failed to verify image %s: %s", image, err)}, nil
		}
		digest = d
	}
	if len(iv.Attestations) == 0 {
		return engine.ImageVerifyResult{Verified: true, Digest: digest, Message: "verified image signatures for " + image}, nil
	}
	statements, err := v.verifyAttestations(ctx, tg, iv, req.CheckStatement)
	var failure attestationFailure
	switch {
	case errors.As(err, &failure):
		return engine.ImageVerifyResult{Message: failure.Error()}, nil
	case err != nil:
		return engine.ImageVerifyResult{}, fmt.Errorf("failed to verify image %s: %w", image, err)
	}
	return engine.ImageVerifyResult{Verified: true, Digest: digest, Statements: statements, Message: "verified image attestations for " + image}, nil
}

// ResolveDigest returns the digest the registry gives for req.Image (a
// HEAD request for its manifest, falling back to a GET where the registry
// answers HEAD without one).
func (v *Verifier) ResolveDigest(ctx context.Context, req engine.ImageVerifyRequest) (string, error) {
	image := req.Image.Ref.String()
	tg, err := v.target(ctx, req)
	if err != nil {
		return "", fmt.Errorf("failed to resolve the digest of %s: %w", image, err)
	}
	select {
	case v.sem <- struct{}{}:
		defer func() { <-v.sem }()
	case <-ctx.Done():
		return "", ctx.Err()
	}
	desc, err := remote.Head(tg.ref, tg.opts...)
	if err != nil || desc.Digest.Hex == "" {
		got, gerr := remote.Get(tg.ref, tg.opts...)
		if gerr != nil {
			return "", fmt.Errorf("failed to resolve the digest of %s: %w", image, gerr)
		}
		return got.Digest.String(), nil
	}
	return desc.Digest.String(), nil
}

// verifySet verifies the entries of one attestor set (static keys split,
// one entry per key) until its count is reached, and returns the digest
// the signatures name, or every entry's error joined.
func (v *Verifier) verifySet(ctx context.Context, tg target, iv *policy.ImageVerification, as *policy.AttestorSet, path string) (string, error) {
	entries, required := as.Expanded()
	var errs []string
	verified := 0
	for i := range entries {
		a := &entries[i]
		at := fmt.Sprintf("%s.entries[%d]", path, i)
		var digest string
		var err error
		if nested, nerr := a.NestedSet(); nerr != nil {
			err = fmt.Errorf("failed to unmarshal nested attestor %s: %w", at, nerr)
		} else if nested != nil {
			digest, err = v.verifySet(ctx, tg, iv, nested, at+".attestor")
		} else {
			var sub string
			digest, sub, err = v.verifyEntry(ctx, tg, iv, a)
			if err != nil {
				err = fmt.Errorf("%s%s: %w", at, sub, err)
			}
		}
		if err != nil {
			if noVerdict(ctx, err) {
				return "", err
			}
			errs = append(errs, err.Error())
			continue
		}
		if verified++; verified >= required {
			return digest, nil
		}
	}
	return "", errors.New(strings.Join(errs, "; "))
}

// checkOpts are cosign's options for one attestor entry: the registry
// client, annotations, the signature repository and the entry's keys,
// certificates or keyless identity. sub is the entry's sub-path (.keys,
// .certificates, .keyless) for messages.
func (v *Verifier) checkOpts(tg target, iv *policy.ImageVerification, a *policy.Attestor) (co *cosign.CheckOpts, sub string, err error) {
	co = &cosign.CheckOpts{
		ClaimVerifier:      cosign.SimpleClaimVerifier,
		RegistryClientOpts: []ociremote.Option{ociremote.WithRemoteOptions(tg.opts...)},
		Annotations:        map[string]any{},
	}
	for k, val := range iv.Annotations {
		co.Annotations[k] = val
	}
	for k, val := range a.Annotations {
		co.Annotations[k] = val
	}
	repo := iv.Repository
	if a.Repository != "" {
		repo = a.Repository
	}
	if repo != "" {
		r, err := name.NewRepository(repo)
		if err != nil {
			return nil, "", fmt.Errorf("failed to parse signature repository %s: %w", repo, err)
		}
		co.RegistryClientOpts = append(co.RegistryClientOpts, ociremote.WithTargetRepository(r))
	}
	switch {
	case a.Keys != nil:
		sub, err = ".keys", keyOptions(tg, co, a)
	case a.Certificates != nil:
		sub, err = ".certificates", certOptions(tg, co, a)
	case a.Keyless != nil:
		sub, err = ".keyless", keylessOptions(tg, co, a.Keyless)
	default:
		return nil, "", errors.New("keys, certificates, keyless, or a nested attestor is required")
	}
	return co, sub, err
}

// verifyEntry verifies the image's signatures by one attestor entry with
// cosign and returns the digest the verified signature names, and the
// entry's sub-path for messages.
func (v *Verifier) verifyEntry(ctx context.Context, tg target, iv *policy.ImageVerification, a *policy.Attestor) (string, string, error) {
	if iv.VerificationType() == policy.ImageVerifyNotary {
		// Kyverno names no sub-path for Notary entries.
		d, err := v.verifyNotary(ctx, tg, a)
		return d, "", err
	}
	co, sub, err := v.checkOpts(tg, iv, a)
	if err != nil {
		return "", sub, err
	}
	// Cosign v3's bundles first (bundle.go), then the classic tag;
	// type SigstoreBundle reads bundles only.
	digest, found, bundleErr := verifyBundleSignatures(ctx, tg, co)
	if found && bundleErr == nil {
		return digest, sub, nil
	}
	if iv.VerificationType() == policy.ImageVerifySigstoreBundle {
		if bundleErr != nil && noVerdict(ctx, bundleErr) {
			return "", sub, bundleErr
		}
		return "", sub, errors.New("sigstore bundle verification failed: no matching signatures found")
	}
	if bundleErr != nil && noVerdict(ctx, bundleErr) && !errors.Is(bundleErr, ErrUnsupported) {
		return "", sub, bundleErr
	}
	sigs, _, err := cosign.VerifyImageSignatures(ctx, tg.ref, co)
	if err != nil {
		if found && errors.Is(bundleErr, ErrUnsupported) {
			// The classic signatures do not verify; the bundles could
			// not be checked: unsupported, never a failure or a pass.
			return "", sub, bundleErr
		}
		if found {
			return "", sub, bundleError(bundleErr, err)
		}
		return "", sub, err
	}
	digest, err = signedDigest(sigs)
	return digest, sub, err
}

// signedDigest is the manifest digest the first verified signature's
// simple-signing payload names.
func signedDigest(sigs []oci.Signature) (string, error) {
	for _, s := range sigs {
		p, err := s.Payload()
		if err != nil {
			return "", fmt.Errorf("failed to get payload: %w", err)
		}
		var sci payload.SimpleContainerImage
		if err := json.Unmarshal(p, &sci); err != nil {
			return "", fmt.Errorf("error decoding the payload: %w", err)
		}
		if d := sci.Critical.Image.DockerManifestDigest; d != "" {
			return d, nil
		}
	}
	return "", errors.New("failed to extract image digest from signature payload")
}

var hashes = map[string]crypto.Hash{"": crypto.SHA256, "sha224": crypto.SHA224, "sha256": crypto.SHA256, "sha384": crypto.SHA384, "sha512": crypto.SHA512}

// keyOptions: a public key (PEM, or read from a Secret: keys.secret or
// a k8s://<namespace>/<name> reference), with the entry's
// transparency-log and SCT settings.
func keyOptions(tg target, co *cosign.CheckOpts, a *policy.Attestor) error {
	k := a.Keys
	pemKey := k.PublicKeys
	var ns, secret string
	switch {
	case k.Secret != nil:
		ns, secret = k.Secret.Namespace, k.Secret.Name
	case strings.HasPrefix(pemKey, "k8s://"):
		ns, secret, _ = strings.Cut(strings.TrimPrefix(pemKey, "k8s://"), "/")
	case pemKey == "":
		return fmt.Errorf("%w: keys from a KMS", ErrUnsupported)
	}
	if secret != "" {
		if tg.key == nil {
			return fmt.Errorf("%w: keys from a Secret (%s/%s) need the cluster", ErrUnsupported, ns, secret)
		}
		var err error
		if pemKey, err = tg.key(ns, secret); err != nil {
			return err
		}
	}
	alg := k.SignatureAlgorithm
	if alg == "" {
		alg = a.SignatureAlgorithm
	}
	h, ok := hashes[alg]
	if !ok {
		return fmt.Errorf("invalid signature algorithm provided %s", alg)
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey([]byte(pemKey))
	if err != nil {
		return fmt.Errorf("failed to load public key from PEM: pem to public key: %w", err)
	}
	if co.SigVerifier, err = signature.LoadVerifier(pub, h); err != nil {
		return fmt.Errorf("failed to load public key from PEM: %w", err)
	}
	// Keys: Kyverno's default is to check the transparency log.
	return logOptions(tg, co, k.Rekor, true, k.CTLog != nil && !k.CTLog.IgnoreSCT)
}

// certOptions: a certificate, and a chain to check it against.
func certOptions(tg target, co *cosign.CheckOpts, a *policy.Attestor) error {
	c := a.Certificates
	if c.Certificate != "" {
		cert, err := loadCert(c.Certificate)
		if err != nil {
			return fmt.Errorf("failed to load certificate from %s: %w", c.Certificate, err)
		}
		if c.CertificateChain == "" {
			h := hashes[a.SignatureAlgorithm]
			if co.SigVerifier, err = signature.LoadVerifier(cert.PublicKey, h); err != nil {
				return fmt.Errorf("failed to load signature from certificate: %w", err)
			}
		} else {
			chain, err := cryptoutils.LoadCertificatesFromPEM(strings.NewReader(c.CertificateChain))
			if err != nil {
				return fmt.Errorf("failed to load certificate chain: %w", err)
			}
			if len(chain) > maxChain {
				return fmt.Errorf("certificate chain too long (%d), maximum allowed is %d", len(chain), maxChain)
			}
			if co.SigVerifier, err = cosign.ValidateAndUnpackCertWithChain(cert, chain, co); err != nil {
				return fmt.Errorf("failed to load validate certificate chain: %w", err)
			}
		}
	} else {
		pool, err := certPool(c.CertificateChain)
		if err != nil {
			return fmt.Errorf("failed to load certificates: %w", err)
		}
		co.RootCerts = pool
	}
	return logOptions(tg, co, c.Rekor, false, c.CTLog != nil && !c.CTLog.IgnoreSCT)
}

// keylessOptions: roots (without them, the Fulcio CAs of the operator's
// trusted root; with neither, unsupported), and the identity.
func keylessOptions(tg target, co *cosign.CheckOpts, k *policy.KeylessAttestor) error {
	switch {
	case k.Roots != "":
		pool, err := certPool(k.Roots)
		if err != nil {
			return fmt.Errorf("failed to load Root certificates: %w", err)
		}
		co.RootCerts = pool
	case tg.trusted != nil:
		co.TrustedMaterial = tg.trusted
	default:
		return fmt.Errorf("%w: keyless without roots needs the public Sigstore roots: give the verifier a trusted root (--sigstore-trusted-root) or the policy roots", ErrUnsupported)
	}
	if k.Subject != "" || k.Issuer != "" || k.SubjectRegExp != "" || k.IssuerRegExp != "" {
		for _, re := range []string{k.SubjectRegExp, k.IssuerRegExp} {
			if _, err := regexp.Compile(re); err != nil {
				return fmt.Errorf("invalid regular expression %q: %w", re, err)
			}
		}
		co.Identities = []cosign.Identity{{Subject: k.Subject, SubjectRegExp: k.SubjectRegExp, Issuer: k.Issuer, IssuerRegExp: k.IssuerRegExp}}
	}
	if len(k.AdditionalExtensions) > 0 {
		return fmt.Errorf("%w: keyless additionalExtensions", ErrUnsupported)
	}
	return logOptions(tg, co, k.Rekor, true, k.CTLog == nil || !k.CTLog.IgnoreSCT)
}

// logOptions sets what is checked of the transparency and CT logs (the
// transparency log unless rekor says to ignore it, where tlog is the
// attestor's default; SCTs where sct); a check this verifier cannot do
// is an error, never skipped. roots are a keyless attestor's own.
//
// The transparency log is checked offline: each signature must carry
// its log entry (the bundle cosign stores when it uploads a signature),
// whose signed entry timestamp the log's key verifies and whose body
// must be that signature by that signer. The log is never queried, so a
// signature without its entry fails. The log's key is the policy's
// (rekor.pubkey), else the logs of the operator's trusted root
// (trustedroot.go); with neither, the check is unsupported. SCTs are
// checked with the trusted root's CT logs, and are unsupported without
// one.
func logOptions(tg target, co *cosign.CheckOpts, rekor *policy.Rekor, tlog, sct bool) error {
	if rekor != nil {
		tlog = !rekor.IgnoreTlog
	}
	co.IgnoreTlog, co.IgnoreSCT = !tlog, !sct
	ownLog := tlog && rekor != nil && rekor.RekorPubKey != ""
	if (tlog && !ownLog || sct) && tg.trusted == nil {
		if sct {
			return fmt.Errorf("%w: certificate transparency (SCT) checks need the CT logs' keys: give the verifier a trusted root (--sigstore-trusted-root), or set ctlog.ignoreSCT", ErrUnsupported)
		}
		return fmt.Errorf("%w: transparency log checks against the public Rekor need its keys: give the verifier a trusted root (--sigstore-trusted-root), set rekor.pubkey to your log's key, or rekor.ignoreTlog", ErrUnsupported)
	}
	if co.TrustedMaterial != nil {
		// Keyless without roots: the trusted root, with the policy's
		// own log in place of the root's.
		tm := overlay{TrustedMaterial: co.TrustedMaterial}
		if ownLog {
			logs, err := logOf(rekor.RekorPubKey)
			if err != nil {
				return err
			}
			tm.logs = logs
		}
		co.TrustedMaterial, co.Offline = tm, tlog
		return nil
	}
	// Keys, certificates, keyless with roots: cosign's key sets, the
	// policy's log or the trusted root's logs.
	if tlog {
		keys := cosign.NewTrustedTransparencyLogPubKeys()
		if ownLog {
			if err := keys.AddTransparencyLogPubKey([]byte(rekor.RekorPubKey), sigtuf.Active); err != nil {
				return fmt.Errorf("failed to load the rekor public key: %w", err)
			}
		} else {
			addLogKeys(&keys, tg.trusted.RekorLogs())
		}
		co.RekorPubKeys, co.Offline = &keys, true
	}
	if sct {
		keys := cosign.NewTrustedTransparencyLogPubKeys()
		addLogKeys(&keys, tg.trusted.CTLogs())
		co.CTLogPubKeys = &keys
	}
	return nil
}

// addLogKeys adds the keys of logs to a cosign key set, by log ID.
func addLogKeys(keys *cosign.TrustedTransparencyLogPubKeys, logs map[string]*root.TransparencyLog) {
	for id, l := range logs {
		status := sigtuf.Active
		if !l.ValidityPeriodEnd.IsZero() && time.Now().After(l.ValidityPeriodEnd) {
			status = sigtuf.Expired
		}
		keys.Keys[id] = cosign.TransparencyLogPubKey{PubKey: l.PublicKey, Status: status}
	}
}

// maxChain bounds a certificate chain (leaf, intermediates, root).
const maxChain = 12

func loadCert(s string) (*x509.Certificate, error) {
	raw := []byte(s)
	if dec, err := base64.StdEncoding.DecodeString(s); err == nil {
		raw = dec
	}
	certs, err := cryptoutils.UnmarshalCertificatesFromPEM(raw)
	if err != nil {
		return nil, fmt.Errorf("failed to unmarshal certificate from PEM format: %w", err)
	}
	if len(certs) == 0 {
		return nil, errors.New("no certs found in pem file")
	}
	return certs[0], nil
}

func certPool(s string) (*x509.CertPool, error) {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM([]byte(s)) {
		return nil, errors.New("error creating root cert pool")
	}
	return p, nil
}
