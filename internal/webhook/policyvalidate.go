package webhook

import (
	"context"
	"encoding/json"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// validatePolicy admits a ClusterPolicy, Policy, PolicyException,
// ClusterCleanupPolicy, CleanupPolicy, or CEL policy (ValidatingPolicy,
// MutatingPolicy and their namespaced kinds) of the kyverno.io or
// verdict.dev groups only
// when the engine can load and compile it (CEL expressions included); the denial names the path of every bad field. Deletes and
// objects of other kinds are admitted.
func (s *Server) validatePolicy(ctx context.Context, rv *review) (decision, error) {
	if rv.req.Operation == admissionv1.Delete || rv.object == nil {
		return allow(nil), nil
	}
	obj := rv.object
	if !policy.IsPolicyGroup(document.String(obj, "apiVersion")) {
		return allow(nil), nil
	}
	switch kind := document.String(obj, "kind"); kind {
	case policy.KindClusterPolicy, policy.KindPolicy:
		p, err := policy.PolicyFromObject(obj)
		if err != nil {
			logFrom(ctx).Info().Err(err).Msg("invalid policy rejected")
			return denyInvalid(err.Error(), policyCauses(obj)), nil
		}
		if _, err := s.engine.Compile(p); err != nil {
			logFrom(ctx).Info().Err(err).Msg("policy does not compile, rejected")
			return denyInvalid(err.Error(), policyCauses(obj)), nil
		}
	case policy.KindValidatingPolicy, policy.KindNamespacedValidatingPolicy, policy.KindMutatingPolicy, policy.KindNamespacedMutatingPolicy,
		policy.KindGeneratingPolicy, policy.KindNamespacedGeneratingPolicy, policy.KindImageValidatingPolicy, policy.KindNamespacedImageValidatingPolicy:
		p, err := policy.FromObject(obj)
		if err == nil {
			_, err = s.engine.Compile(p)
		}
		if err != nil {
			logFrom(ctx).Info().Err(err).Str(logkey.Kind, kind).Msg("invalid CEL policy rejected")
			return denyInvalid(err.Error(), nil), nil
		}
		return allow(nil), nil
	case policy.KindClusterCleanupPolicy, policy.KindCleanupPolicy, policy.KindDeletingPolicy, policy.KindNamespacedDeletingPolicy:
		p, err := policy.CleanupPolicyFromObject(obj)
		if err == nil {
			_, err = s.engine.CompileCleanup(p)
		}
		if err != nil {
			logFrom(ctx).Info().Err(err).Msg("invalid cleanup policy rejected")
			return denyInvalid(err.Error(), cleanupCauses(obj)), nil
		}
	case policy.KindPolicyException:
		if policy.IsCELException(obj) {
			e, err := policy.CELExceptionFromObject(obj)
			if err == nil {
				err = s.engine.CheckCELException(e)
			}
			if err != nil {
				logFrom(ctx).Info().Err(err).Msg("invalid policy exception rejected")
				return denyInvalid(err.Error(), nil), nil
			}
			break
		}
		if _, err := policy.ExceptionFromObject(obj); err != nil {
			logFrom(ctx).Info().Err(err).Msg("invalid policy exception rejected")
			return denyInvalid(err.Error(), nil), nil
		}
	}
	return allow(nil), nil
}

// policyCauses lists the field errors policy.Validate finds, as status
// causes; the message carries every problem, unknown fields included.
func policyCauses(obj map[string]any) []metav1.StatusCause {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil
	}
	var p policy.Policy
	if err := json.Unmarshal(b, &p); err != nil {
		return nil
	}
	var causes []metav1.StatusCause
	for _, fe := range policy.Validate(&p) {
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: fe.Path, Message: fe.Msg})
	}
	return causes
}

// cleanupCauses lists the field errors policy.ValidateCleanup finds, as
// status causes.
func cleanupCauses(obj map[string]any) []metav1.StatusCause {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil
	}
	var p policy.CleanupPolicy
	if err := json.Unmarshal(b, &p); err != nil {
		return nil
	}
	var causes []metav1.StatusCause
	for _, fe := range policy.ValidateCleanup(&p) {
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: fe.Path, Message: fe.Msg})
	}
	return causes
}

// denyInvalid denies with 422 Invalid, the API server's code for an
// invalid object, and the field causes.
func denyInvalid(msg string, causes []metav1.StatusCause) decision {
	d := deny(msg, nil)
	d.resp.Result.Reason = metav1.StatusReasonInvalid
	d.resp.Result.Code = 422
	if len(causes) > 0 {
		d.resp.Result.Details = &metav1.StatusDetails{Causes: causes}
	}
	return d
}
