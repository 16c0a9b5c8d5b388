package app

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/internal/webhook"
)

// accessReviews asks the API server's authorizer, with a
// SubjectAccessReview, whether a user may delete an object (the TTL
// label's guard). The webhook's service account needs create on
// subjectaccessreviews (the chart grants it).
type accessReviews struct{ kube kubernetes.Interface }

var _ webhook.DeleteAuthorizer = accessReviews{}

func (a accessReviews) MayDelete(ctx context.Context, user authenticationv1.UserInfo, t webhook.DeleteTarget) (bool, string, error) {
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: "delete", Group: t.Group, Version: t.Version, Resource: t.Resource,
			Namespace: t.Namespace, Name: t.Name,
		},
	}}
	got, err := a.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("subject access review: %w", err)
	}
	return got.Status.Allowed && !got.Status.Denied, got.Status.Reason, nil
}
