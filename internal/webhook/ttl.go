package webhook

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/pkg/engine/document"
)

// PathValidateTTL is where the API server sends the writes of objects
// that carry the TTL label (the registrar's ttl.verdict.dev webhook).
const PathValidateTTL = "/validate-ttl"

// LabelTTL is Kyverno's TTL label: the cleaner deletes the object when it
// is due (internal/cleaner's LabelTTL).
const LabelTTL = "cleanup.kyverno.io/ttl"

// DeleteTarget is the object a delete would remove.
type DeleteTarget struct {
	Group, Version, Resource string
	Namespace, Name          string
}

// DeleteAuthorizer says whether a user may delete an object, as the API
// server's authorizer answers (a SubjectAccessReview); reason is the
// authorizer's, when it gives one. An error means it could not answer.
type DeleteAuthorizer interface {
	MayDelete(ctx context.Context, user authenticationv1.UserInfo, target DeleteTarget) (allowed bool, reason string, err error)
}

// WithDeleteAuthorizer turns on the TTL label's guard: a request that
// adds the label, or changes its value, is denied unless its requester
// may delete the object (the cleaner deletes it with its own rights when
// it is due, so the label must not give anyone more). Without one (files
// mode: no cleaner), PathValidateTTL admits everything.
func WithDeleteAuthorizer(a DeleteAuthorizer) Option {
	return func(s *Server) error {
		if a == nil {
			return fmt.Errorf("%w: nil delete authorizer", ErrInvalidOption)
		}
		s.ttlAuth = a
		return nil
	}
}

// Results of a TTL label check, the result label of
// verdict_webhook_ttl_label_checks_total.
const (
	ttlAllowed = "allowed"
	ttlDenied  = "denied"
	ttlError   = "error"
)

// validateTTL is PathValidateTTL's decision: the TTL label may be set,
// or its value changed, only by whoever may delete the object. Removing
// the label or leaving it as it is needs nothing. When the authorizer
// cannot answer, the request is denied: a label no one checked would be
// honoured all the same.
func (s *Server) validateTTL(ctx context.Context, rv *review) (decision, error) {
	ttl, ok := ttlChange(rv)
	if !ok || s.ttlAuth == nil {
		return allow(nil), nil
	}
	r := rv.req.Resource
	target := DeleteTarget{Group: r.Group, Version: r.Version, Resource: r.Resource, Namespace: rv.req.Namespace, Name: rv.req.Name}
	if target.Name == "" {
		target.Name = document.String(rv.object, "metadata", "name")
	}
	user := rv.req.UserInfo
	what := fmt.Sprintf("%s %s", rv.req.Kind.Kind, objectPath(target.Namespace, target.Name))
	allowed, reason, err := s.ttlAuth.MayDelete(ctx, user, target)
	switch {
	case err != nil:
		s.metrics.ttlChecks.WithLabelValues(ttlError).Inc()
		logFrom(ctx).Warn().Err(err).Str(logkey.Kind, rv.req.Kind.Kind).Str(logkey.Namespace, target.Namespace).Str(logkey.Name, target.Name).Msg("ttlLabelNotChecked")
		return deny(fmt.Sprintf("the label %s=%s asks Verdict's cleaner to delete %s; whether %s may delete it could not be checked: %v", LabelTTL, ttl, what, user.Username, err), nil), nil
	case !allowed:
		s.metrics.ttlChecks.WithLabelValues(ttlDenied).Inc()
		msg := fmt.Sprintf("the label %s=%s asks Verdict's cleaner to delete %s, and %s may not delete it", LabelTTL, ttl, what, user.Username)
		if reason != "" {
			msg += " (" + reason + ")"
		}
		return deny(msg, nil), nil
	}
	s.metrics.ttlChecks.WithLabelValues(ttlAllowed).Inc()
	return allow(nil), nil
}

// ttlChange is the TTL label's value when the request sets it: a CREATE
// of an object that carries it, or an UPDATE that adds it or changes its
// value (not a subresource's write: the label is the object's).
func ttlChange(rv *review) (string, bool) {
	op := rv.req.Operation
	if (op != admissionv1.Create && op != admissionv1.Update) || rv.req.SubResource != "" {
		return "", false
	}
	ttl, ok := label(rv.object, LabelTTL)
	if !ok {
		return "", false
	}
	if op == admissionv1.Update {
		if old, had := label(rv.oldObject, LabelTTL); had && old == ttl {
			return "", false
		}
	}
	return ttl, true
}

// label is the value of an object's label.
func label(obj map[string]any, key string) (string, bool) {
	v, ok := document.Get(obj, "metadata", "labels", key)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	return s, ok
}

func objectPath(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
