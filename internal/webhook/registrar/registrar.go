package registrar

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// PolicySource gives the installed policies and says when they change.
type PolicySource interface {
	// Policies returns the current compiled policies.
	Policies() []*engine.Policy
	// Changed is signalled (without blocking) after each change.
	Changed() <-chan struct{}
}

// CandidateSource is a PolicySource that also gives the candidate
// policies (policy.AnnotationCandidate): the registrar then sends the
// requests they select to the validating webhook, failing open, so that
// the admission log records them (Options.Candidates).
type CandidateSource interface {
	Candidates() []*engine.Policy
}

// Registrar writes the webhook configurations.
type Registrar struct {
	client   kubernetes.Interface
	resolver Resolver
	source   PolicySource
	opts     Options
	// Refresher, when the resolver has one, is called before each
	// reconcile so that new CRDs are found.
	refresh func() error
	// caBundle, when set, gives the current CA bundle (it changes during
	// a CA rotation); otherwise Options.CABundle is used.
	caBundle func() ([]byte, error)
	// after, when set, is called after each reconcile of Loop with its
	// error (the policy status writer runs there).
	after func(ctx context.Context, err error)
	// replicas, when set, says which paths every replica serves: the
	// configurations point at the earlier release's while one runs it.
	replicas *Replicas
}

// WithReplicas makes each reconcile point the webhooks at the paths the
// lowest replica serves (Options.LegacyPaths while one runs a release
// before WebhookAPI 2), and Loop reconcile when a replica comes or goes.
func (r *Registrar) WithReplicas(replicas *Replicas) *Registrar {
	r.replicas = replicas
	return r
}

// WithAfterReconcile makes Loop call f after each reconcile, with the
// reconcile's error (nil when the configurations are current).
func (r *Registrar) WithAfterReconcile(f func(ctx context.Context, err error)) *Registrar {
	r.after = f
	return r
}

// WithCABundle makes the registrar read the CA bundle at each reconcile.
func (r *Registrar) WithCABundle(f func() ([]byte, error)) *Registrar {
	r.caBundle = f
	return r
}

// New returns a Registrar.
func New(client kubernetes.Interface, resolver Resolver, source PolicySource, opts Options) *Registrar {
	opts.defaults()
	r := &Registrar{client: client, resolver: resolver, source: source, opts: opts}
	if d, ok := resolver.(*DiscoveryResolver); ok {
		r.refresh = d.Refresh
	}
	return r
}

// Result says what a reconcile changed.
type Result struct {
	MutatingChanged, ValidatingChanged bool
	// Legacy names a replica that serves only the earlier release's
	// paths, which the configurations then point at (Options.LegacyPaths).
	Legacy string
}

// Reconcile makes the two configurations equal to what the policies need.
// It creates what is missing and updates what differs, comparing first and
// writing with the read resourceVersion, so a concurrent writer causes a
// conflict (retried on the next round), never a lost update; nothing is
// ever deleted and recreated.
func (r *Registrar) Reconcile(ctx context.Context) (Result, error) {
	var res Result
	if r.refresh != nil {
		if err := r.refresh(); err != nil {
			return res, fmt.Errorf("refresh discovery: %w", err)
		}
	}
	opts := r.opts
	if r.caBundle != nil {
		b, err := r.caBundle()
		if err != nil {
			return res, fmt.Errorf("read CA bundle: %w", err)
		}
		opts.CABundle = b
	}
	if r.replicas != nil {
		level, pod, err := r.replicas.Lowest(ctx)
		if err != nil {
			return res, err
		}
		if level < WebhookAPI {
			opts.LegacyPaths = true
			res.Legacy = pod
		}
	}
	if cs, ok := r.source.(CandidateSource); ok {
		opts.Candidates = cs.Candidates()
	}
	mut, val, err := Build(r.source.Policies(), r.resolver, opts)
	if err != nil {
		return res, fmt.Errorf("build configurations: %w", err)
	}
	res.MutatingChanged, err = r.applyMutating(ctx, mut)
	if err != nil {
		return res, err
	}
	res.ValidatingChanged, err = r.applyValidating(ctx, val)
	return res, err
}

func (r *Registrar) applyMutating(ctx context.Context, want *admissionregistrationv1.MutatingWebhookConfiguration) (bool, error) {
	api := r.client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	have, err := api.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = api.Create(ctx, want, metav1.CreateOptions{FieldManager: fieldManager})
		if apierrors.IsAlreadyExists(err) {
			return false, nil // another leader was faster; next round compares
		}
		return err == nil, wrap("create", want.Name, err)
	}
	if err != nil {
		return false, wrap("get", want.Name, err)
	}
	if equality.Semantic.DeepEqual(have.Webhooks, want.Webhooks) && labelsHold(have.Labels, want.Labels) {
		return false, nil
	}
	upd := have.DeepCopy()
	upd.Webhooks = want.Webhooks
	upd.Labels = mergeLabels(upd.Labels, want.Labels)
	_, err = api.Update(ctx, upd, metav1.UpdateOptions{FieldManager: fieldManager})
	return err == nil, wrap("update", want.Name, err)
}

func (r *Registrar) applyValidating(ctx context.Context, want *admissionregistrationv1.ValidatingWebhookConfiguration) (bool, error) {
	api := r.client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	have, err := api.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = api.Create(ctx, want, metav1.CreateOptions{FieldManager: fieldManager})
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return err == nil, wrap("create", want.Name, err)
	}
	if err != nil {
		return false, wrap("get", want.Name, err)
	}
	if equality.Semantic.DeepEqual(have.Webhooks, want.Webhooks) && labelsHold(have.Labels, want.Labels) {
		return false, nil
	}
	upd := have.DeepCopy()
	upd.Webhooks = want.Webhooks
	upd.Labels = mergeLabels(upd.Labels, want.Labels)
	_, err = api.Update(ctx, upd, metav1.UpdateOptions{FieldManager: fieldManager})
	return err == nil, wrap("update", want.Name, err)
}

const fieldManager = "verdict-registrar"

func wrap(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s webhook configuration %s: %w", op, name, err)
}

// labelsHold reports whether every label the registrar sets is present.
// A value someone else gave one of them is kept: the Helm chart owns the
// two configurations (so that uninstall deletes them) and helm labels them
// app.kubernetes.io/managed-by=Helm; insisting on the registrar's value
// would make every helm upgrade (server-side apply) conflict with the
// registrar over that label.
func labelsHold(have, want map[string]string) bool {
	for k := range want {
		if _, ok := have[k]; !ok {
			return false
		}
	}
	return true
}

// mergeLabels adds the registrar's labels that are missing, keeping the
// values already there (see labelsHold).
func mergeLabels(have, want map[string]string) map[string]string {
	out := make(map[string]string, len(have)+len(want))
	for k, v := range want {
		out[k] = v
	}
	for k, v := range have {
		out[k] = v
	}
	return out
}

// Loop reconciles until ctx ends: at once, whenever the policies change,
// whenever a configuration is edited or deleted (poke is signalled by the
// caller's watch), and every resync period. Errors are logged and retried
// with a capped backoff.
func (r *Registrar) Loop(ctx context.Context, poke <-chan struct{}, resync time.Duration) error {
	log := zerolog.Ctx(ctx)
	if resync <= 0 {
		resync = 30 * time.Second
	}
	ticker := time.NewTicker(resync)
	defer ticker.Stop()
	backoff := 500 * time.Millisecond
	var replicasChanged <-chan struct{}
	if r.replicas != nil {
		replicasChanged = r.replicas.Changed()
	}
	legacy := ""
	for {
		res, err := r.Reconcile(ctx)
		if r.after != nil && !errors.Is(err, context.Canceled) {
			r.after(ctx, err)
		}
		wait := resync
		switch {
		case errors.Is(err, context.Canceled):
			return nil
		case err != nil:
			log.Warn().Err(err).Dur(logkey.Delay, backoff).Msg("webhook configuration reconcile failed")
			wait = backoff
			backoff = min(backoff*2, 30*time.Second)
		default:
			backoff = 500 * time.Millisecond
			switch {
			case res.Legacy != "" && legacy == "":
				log.Warn().Str(logkey.Replica, res.Legacy).Msg("a webhook replica runs an earlier release: the webhooks point at the paths it serves (every policy evaluated in the shared webhooks, no TTL label check) until it is replaced")
			case res.Legacy == "" && legacy != "":
				log.Info().Msg("every webhook replica serves this release's paths: the webhooks point at them")
			}
			legacy = res.Legacy
			if res.MutatingChanged || res.ValidatingChanged {
				log.Info().Bool(logkey.MutatingChanged, res.MutatingChanged).Bool(logkey.ValidatingChanged, res.ValidatingChanged).Msg("webhook configurations updated")
			}
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-r.source.Changed():
		case <-poke:
		case <-replicasChanged:
		case <-ticker.C:
		case <-timer.C:
		}
		timer.Stop()
	}
}
