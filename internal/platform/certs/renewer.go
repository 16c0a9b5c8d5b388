package certs

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/internal/platform/logkey"
)

// Secret keys.
const (
	KeyCert     = "tls.crt"
	KeyKey      = "tls.key"
	KeyBundle   = "ca-bundle.crt"
	KeyCA       = "ca.crt"
	annIssuedAt = "verdict.dev/issued-at"
)

// ErrInvalidConfig wraps configuration errors.
var ErrInvalidConfig = errors.New("invalid certificate renewer config")

// Config says which Secrets hold the material and how long it lives.
type Config struct {
	Namespace string
	// CASecret holds the CA (tls.crt, tls.key) and the bundle the API
	// server must trust (ca-bundle.crt: the current CA, and the previous
	// one during a rotation).
	CASecret string
	// TLSSecret holds the serving certificate (tls.crt, tls.key, ca.crt).
	TLSSecret string
	DNSNames  []string
	IPs       []net.IP
	// CAValidity and CertValidity are lifetimes; RenewBefore is how long
	// before expiry a new one is made.
	CAValidity   time.Duration
	CertValidity time.Duration
	RenewBefore  time.Duration
	// ReloadGrace is how long replicas get to load a new serving
	// certificate before the previous CA leaves the bundle.
	ReloadGrace time.Duration
	// Now is the clock (time.Now by default).
	Now func() time.Time
}

// WithDefaults fills lifetimes: CA 5 years, certificate 1 year, renewal 30
// days before expiry, 2 minutes of reload grace.
func (c Config) WithDefaults() Config {
	if c.CAValidity == 0 {
		c.CAValidity = 5 * 365 * 24 * time.Hour
	}
	if c.CertValidity == 0 {
		c.CertValidity = 365 * 24 * time.Hour
	}
	if c.RenewBefore == 0 {
		c.RenewBefore = 30 * 24 * time.Hour
	}
	if c.ReloadGrace == 0 {
		c.ReloadGrace = 2 * time.Minute
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate checks the config.
func (c Config) Validate() error {
	switch {
	case c.Namespace == "" || c.CASecret == "" || c.TLSSecret == "":
		return fmt.Errorf("%w: namespace and both secret names are required", ErrInvalidConfig)
	case len(c.DNSNames) == 0 && len(c.IPs) == 0:
		return fmt.Errorf("%w: the serving certificate needs a DNS name or an IP", ErrInvalidConfig)
	case c.RenewBefore >= c.CertValidity || c.RenewBefore >= c.CAValidity:
		return fmt.Errorf("%w: renewal must start before the lifetimes end", ErrInvalidConfig)
	}
	return nil
}

// Renewer keeps the Secrets current. Only the leader runs it.
type Renewer struct {
	client kubernetes.Interface
	cfg    Config
	// trusted reports whether the API server already trusts a CA (its
	// certificate is in the webhook configurations' caBundle).
	trusted func(ctx context.Context, ca *x509.Certificate) (bool, error)
}

// NewRenewer returns a Renewer. trusted tells whether the webhook
// configurations already carry a CA; a new CA signs serving certificates
// only once they do.
func NewRenewer(client kubernetes.Interface, cfg Config, trusted func(ctx context.Context, ca *x509.Certificate) (bool, error)) (*Renewer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Renewer{client: client, cfg: cfg, trusted: trusted}, nil
}

// Step says what a reconcile did.
type Step string

// Steps of a reconcile.
const (
	StepNone       Step = "none"
	StepCreatedCA  Step = "createdCA"
	StepRotatedCA  Step = "rotatedCA"
	StepIssuedCert Step = "issuedCertificate"
	StepWaitTrust  Step = "waitingForTrust"
	StepDroppedOld Step = "droppedPreviousCA"
	StepWaitReload Step = "waitingForReload"
)

// Reconcile moves the material one step towards the wanted state and says
// which step it took. Writes use the resourceVersion read, so two leaders
// cannot both win a step; the loser sees a conflict and retries.
//
// A CA rotation goes: new CA, bundle = new + old (the registrar pushes it
// to the webhook configurations) → once the configurations trust the new
// CA, a serving certificate signed by it → after ReloadGrace, the old CA
// leaves the bundle. Requests keep verifying at every step.
func (r *Renewer) Reconcile(ctx context.Context) (Step, error) {
	now := r.cfg.Now()
	secrets := r.client.CoreV1().Secrets(r.cfg.Namespace)
	caSec, err := secrets.Get(ctx, r.cfg.CASecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		ca, err := NewCA("verdict-webhook-ca", now, r.cfg.CAValidity)
		if err != nil {
			return StepNone, err
		}
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: r.cfg.CASecret, Namespace: r.cfg.Namespace, Labels: managedLabels()},
			Data:       map[string][]byte{KeyCert: ca.CertPEM, KeyKey: ca.KeyPEM, KeyBundle: ca.CertPEM},
		}
		if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return StepNone, fmt.Errorf("create CA secret: %w", err)
		}
		return StepCreatedCA, nil
	}
	if err != nil {
		return StepNone, fmt.Errorf("get CA secret: %w", err)
	}
	ca, err := ParseKeyPair(caSec.Data[KeyCert], caSec.Data[KeyKey])
	if err != nil || now.After(ca.cert.NotAfter.Add(-r.cfg.RenewBefore)) {
		// Unreadable or expiring: rotate, keeping the old CA (if it is
		// still valid) in the bundle.
		next, err := NewCA("verdict-webhook-ca", now, r.cfg.CAValidity)
		if err != nil {
			return StepNone, err
		}
		bundle := []*x509.Certificate{next.cert}
		if old, _ := ParseBundle(caSec.Data[KeyBundle]); len(old) > 0 {
			for _, c := range old {
				if now.Before(c.NotAfter) {
					bundle = append(bundle, c)
				}
			}
		}
		upd := caSec.DeepCopy()
		upd.Data = map[string][]byte{KeyCert: next.CertPEM, KeyKey: next.KeyPEM, KeyBundle: EncodeBundle(bundle...)}
		if _, err := secrets.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return StepNone, fmt.Errorf("rotate CA: %w", err)
		}
		return StepRotatedCA, nil
	}

	tlsSec, err := secrets.Get(ctx, r.cfg.TLSSecret, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return StepNone, fmt.Errorf("get serving secret: %w", err)
	}
	exists := err == nil
	var serving *KeyPair
	if exists {
		serving, _ = ParseKeyPair(tlsSec.Data[KeyCert], tlsSec.Data[KeyKey])
	}
	if serving == nil || !SignedBy(serving.cert, ca.cert) || !r.namesHold(serving.cert) ||
		now.After(serving.cert.NotAfter.Add(-r.cfg.RenewBefore)) {
		// A certificate from a CA the API server does not trust yet would
		// fail requests: wait for the registrar, unless nothing is served
		// yet (first start).
		if serving != nil && r.trusted != nil {
			ok, err := r.trusted(ctx, ca.cert)
			if err != nil {
				return StepNone, err
			}
			if !ok {
				return StepWaitTrust, nil
			}
		}
		kp, err := NewServing(ca, r.cfg.DNSNames, r.cfg.IPs, now, r.cfg.CertValidity)
		if err != nil {
			return StepNone, err
		}
		data := map[string][]byte{KeyCert: kp.CertPEM, KeyKey: kp.KeyPEM, KeyCA: ca.CertPEM}
		ann := map[string]string{annIssuedAt: now.UTC().Format(time.RFC3339)}
		if !exists {
			s := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: r.cfg.TLSSecret, Namespace: r.cfg.Namespace, Labels: managedLabels(), Annotations: ann},
				Type:       corev1.SecretTypeTLS,
				Data:       data,
			}
			if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return StepNone, fmt.Errorf("create serving secret: %w", err)
			}
			return StepIssuedCert, nil
		}
		upd := tlsSec.DeepCopy()
		upd.Data = data
		if upd.Annotations == nil {
			upd.Annotations = map[string]string{}
		}
		upd.Annotations[annIssuedAt] = ann[annIssuedAt]
		if _, err := secrets.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return StepNone, fmt.Errorf("renew serving certificate: %w", err)
		}
		return StepIssuedCert, nil
	}

	// Everything is signed by the current CA: once replicas had time to
	// load it, the previous CA leaves the bundle.
	bundle, _ := ParseBundle(caSec.Data[KeyBundle])
	if len(bundle) > 1 || (len(bundle) == 1 && !bundle[0].Equal(ca.cert)) {
		issued, _ := time.Parse(time.RFC3339, tlsSec.Annotations[annIssuedAt])
		if now.Before(issued.Add(r.cfg.ReloadGrace)) {
			return StepWaitReload, nil
		}
		upd := caSec.DeepCopy()
		upd.Data[KeyBundle] = ca.CertPEM
		if _, err := secrets.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return StepNone, fmt.Errorf("drop previous CA: %w", err)
		}
		return StepDroppedOld, nil
	}
	return StepNone, nil
}

func (r *Renewer) namesHold(c *x509.Certificate) bool {
	for _, n := range r.cfg.DNSNames {
		if !slices.Contains(c.DNSNames, n) {
			return false
		}
	}
	for _, ip := range r.cfg.IPs {
		if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

func managedLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": "verdict"}
}

// Bundle reads the CA bundle the API server must trust.
func Bundle(ctx context.Context, client kubernetes.Interface, namespace, caSecret string) ([]byte, error) {
	s, err := client.CoreV1().Secrets(namespace).Get(ctx, caSecret, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get CA secret: %w", err)
	}
	b := s.Data[KeyBundle]
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: CA secret has no %s", ErrInvalid, KeyBundle)
	}
	return b, nil
}

// Loop reconciles until ctx ends: quickly while a step is in progress,
// every interval otherwise.
func (r *Renewer) Loop(ctx context.Context, interval time.Duration, onStep func(Step)) {
	if interval <= 0 {
		interval = time.Minute
	}
	log := zerolog.Ctx(ctx)
	for ctx.Err() == nil {
		step, err := r.Reconcile(ctx)
		wait := interval
		switch {
		case err != nil:
			log.Warn().Err(err).Msg("certificate reconcile failed")
			wait = 2 * time.Second
		case step != StepNone:
			wait = 200 * time.Millisecond
			if step == StepWaitTrust || step == StepWaitReload {
				wait = time.Second
			}
		}
		if err == nil && step != StepNone && step != StepWaitTrust && step != StepWaitReload {
			log.Info().Str(logkey.Step, string(step)).Msg("certificate material changed")
		}
		if onStep != nil && err == nil {
			onStep(step)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
