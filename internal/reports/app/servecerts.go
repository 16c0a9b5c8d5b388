package app

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/internal/platform/certs"
	"github.com/verdict-dev/verdict/internal/platform/leader"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
)

// The serving mode's TLS when Verdict keeps it (docs/reporter.md): every
// replica serves the certificate of ServeTLSSecret and follows its
// renewals; the replica holding ServeLeaseName keeps the CA and the
// certificate current (certs.Renewer, as the webhook's leader does for
// the webhook) and the APIServices' caBundle trusting the CA, so the
// kube-apiserver verifies the replicas it proxies to.

var apiServicesGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// waitForCert returns once the Secret's certificate is loaded (the API
// server cannot start without one), saying so while it waits.
func waitForCert(ctx context.Context, src *certs.Reloader, secret string, log zerolog.Logger) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	start := time.Now()
	next := 5 * time.Second
	for !src.Loaded() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if time.Since(start) > next {
			log.Warn().Str(logkey.Secret, secret).Dur(logkey.Waited, time.Since(start).Round(time.Second)).
				Msg("the serving certificate is not there yet: the reports are served once it is (the serving mode's leader writes it)")
			next *= 2
		}
	}
	return nil
}

// runServeLeader campaigns for the serving Lease and, while leading,
// keeps the certificate Secrets and the APIServices' caBundle current.
func runServeLeader(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, cfg Config, log zerolog.Logger) {
	dns := []string{cfg.ServeServiceName + "." + cfg.Namespace + ".svc", cfg.ServeServiceName + "." + cfg.Namespace + ".svc.cluster.local"}
	renewer, err := certs.NewRenewer(kube, certs.Config{
		Namespace: cfg.Namespace, CASecret: cfg.ServeCASecret, TLSSecret: cfg.ServeTLSSecret, DNSNames: dns,
	}, func(ctx context.Context, ca *x509.Certificate) (bool, error) {
		return apiServicesTrust(ctx, dyn, cfg.ServeAPIServices, ca)
	})
	if err != nil {
		log.Error().Err(err).Msg("the serving certificate renewer did not start")
		return
	}
	err = leader.Run(ctx, kube, leader.Config{Namespace: cfg.Namespace, Name: cfg.ServeLeaseName, Identity: cfg.Identity}, func(lctx context.Context) {
		poke := make(chan struct{}, 1)
		// The renewer ends with the term, before the Lease is released.
		renewed := make(chan struct{})
		defer func() { <-renewed }()
		go func() {
			defer close(renewed)
			renewer.Loop(lctx, time.Minute, func(step certs.Step) {
				if step != certs.StepNone {
					select {
					case poke <- struct{}{}:
					default:
					}
				}
			})
		}()
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			bundle, err := certs.Bundle(lctx, kube, cfg.Namespace, cfg.ServeCASecret)
			if err == nil {
				err = syncCABundles(lctx, dyn, cfg.ServeAPIServices, bundle)
			}
			if err != nil && lctx.Err() == nil {
				log.Warn().Err(err).Msg("the APIServices' caBundle is not current yet")
			}
			select {
			case <-lctx.Done():
				return
			case <-poke:
			case <-t.C:
			}
		}
	})
	if err != nil {
		log.Error().Err(err).Msg("leader election stopped")
	}
}

// syncCABundles sets the caBundle of the named APIServices (which the
// chart creates) to bundle where it differs.
func syncCABundles(ctx context.Context, dyn dynamic.Interface, names []string, bundle []byte) error {
	want := base64.StdEncoding.EncodeToString(bundle)
	var errs []error
	for _, name := range names {
		u, err := dyn.Resource(apiServicesGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("APIService %s: %w", name, err))
			continue
		}
		if cur, _, _ := unstructured.NestedString(u.Object, "spec", "caBundle"); cur == want {
			continue
		}
		if err := unstructured.SetNestedField(u.Object, want, "spec", "caBundle"); err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := dyn.Resource(apiServicesGVR).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("APIService %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// apiServicesTrust reports whether every named APIService's caBundle
// holds ca (a missing one does not trust it yet).
func apiServicesTrust(ctx context.Context, dyn dynamic.Interface, names []string, ca *x509.Certificate) (bool, error) {
	for _, name := range names {
		u, err := dyn.Resource(apiServicesGVR).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		cur, _, _ := unstructured.NestedString(u.Object, "spec", "caBundle")
		b, err := base64.StdEncoding.DecodeString(cur)
		if err != nil || !certs.BundleHas(b, ca) {
			return false, nil //nolint:nilerr // an unreadable bundle does not trust it
		}
	}
	return true, nil
}
