package cleaner

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/validation/strfmt"

	"github.com/verdict-dev/verdict/internal/platform/admissionfilter"
	"github.com/verdict-dev/verdict/internal/platform/kubeutil"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// Kyverno's TTL label and annotation.
const (
	// LabelTTL holds when a resource is due: a duration after its
	// creation ("2h30m", "1d", "3w") or a date ("2026-07-19") or time
	// ("2026-07-19T120000Z", UTC).
	LabelTTL = "cleanup.kyverno.io/ttl"
	// AnnotationPropagationPolicy is the deletion propagation of a
	// TTL-labelled resource: Foreground, Background or Orphan.
	AnnotationPropagationPolicy = "cleanup.kyverno.io/propagation-policy"
)

// The layouts of a TTL label that is a point in time (label values allow
// no colons).
const (
	ttlTimeLayout = "2006-01-02T150405Z"
	ttlDateLayout = "2006-01-02"
)

// DueTime is when a resource created at created with the TTL label value
// ttl is due, as Kyverno's TTL controller reads the label: a duration
// (Go's, or with the units the OpenAPI duration format accepts: d for
// days, w for weeks, and their long names) counts from the creation; a
// time or a date is absolute, in UTC.
func DueTime(ttl string, created time.Time) (time.Time, error) {
	if d, err := strfmt.ParseDuration(ttl); err == nil {
		return created.Add(d), nil
	}
	if t, err := time.Parse(ttlTimeLayout, ttl); err == nil {
		return t, nil
	}
	if t, err := time.Parse(ttlDateLayout, ttl); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%s %q: neither a duration, a time (%s) nor a date (%s)", LabelTTL, ttl, ttlTimeLayout, ttlDateLayout)
}

// propagationOf reads a TTL-labelled resource's propagation annotation
// (none, or an unknown value: the API server's default).
func propagationOf(annotations map[string]string) *metav1.DeletionPropagation {
	var p metav1.DeletionPropagation
	switch annotations[AnnotationPropagationPolicy] {
	case "Foreground":
		p = metav1.DeletePropagationForeground
	case "Background":
		p = metav1.DeletePropagationBackground
	case "Orphan":
		p = metav1.DeletePropagationOrphan
	default:
		return nil
	}
	return &p
}

// ttlGuarded reports whether a labelled resource of kind t is one the
// TTL label's webhook receives (internal/webhook/registrar ttl.go), so that its
// label was set by whoever may delete it: not in a namespace, nor of a
// resource, the webhooks' filter excludes (a Namespace counts as in
// itself, as a namespaceSelector sees it).
func ttlGuarded(f admissionfilter.Filter, t kubeutil.Kind, namespace, name string) bool {
	if t.GVR.Group == "" && t.GVR.Resource == "namespaces" {
		namespace = name
	}
	return !f.Skips(t.GVR.Group, t.GVR.Resource, "", namespace)
}

// sweepTTL is a TTL tick: every served kind that can be listed and
// deleted is listed, metadata only, with the TTL label as selector, and
// each resource that is due is deleted with a UID precondition, where
// the TTL label's webhook checked that whoever set the label may delete
// the resource (ttlGuarded; elsewhere it is counted and left alone). A kind
// that cannot be listed is counted and left for the next tick: the sweep
// is repeated every TTL interval, so it is not retried.
func (c *Cleaner) sweepTTL(ctx context.Context) queue.Outcome {
	targets, err := c.deletableKinds(ctx)
	if err != nil {
		return queue.Retry().For(ReasonAPIError).Because(err)
	}
	now := c.o.now()
	failed := 0
	for _, t := range targets {
		opts := metav1.ListOptions{LabelSelector: LabelTTL, Limit: listPageSize}
		for {
			list, err := c.meta.Resource(t.GVR).List(ctx, opts)
			if err != nil {
				if !apierrors.IsForbidden(err) && !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) {
					failed++
				}
				c.o.log.Debug().Err(err).Str(logkey.Kind, t.GVK.Kind).Msg("ttlListFailed")
				break
			}
			for i := range list.Items {
				item := &list.Items[i]
				if item.DeletionTimestamp != nil {
					continue
				}
				if !ttlGuarded(c.o.ttlFilter, t, item.Namespace, item.Name) {
					c.m.ttlUnguarded.WithLabelValues(t.GVK.Kind).Inc()
					continue
				}
				due, err := DueTime(item.Labels[LabelTTL], item.CreationTimestamp.Time)
				if err != nil {
					c.m.ttlInvalid.Inc()
					c.o.log.Debug().Err(err).Str(logkey.Kind, t.GVK.Kind).Str(logkey.Resource, path(item.Namespace, item.Name)).Msg("ttlLabelInvalid")
					continue
				}
				if now.Before(due) {
					continue
				}
				uid := item.UID
				err = c.meta.Resource(t.GVR).Namespace(item.Namespace).Delete(ctx, item.Name, metav1.DeleteOptions{
					Preconditions:     &metav1.Preconditions{UID: &uid},
					PropagationPolicy: propagationOf(item.Annotations),
				})
				out := deletionOutcome(err)
				c.m.deletions.WithLabelValues(PolicyTTL, t.GVK.Kind, out).Inc()
				if out == DeletionFailed {
					failed++
					c.o.log.Warn().Err(err).Str(logkey.Kind, t.GVK.Kind).Str(logkey.Resource, path(item.Namespace, item.Name)).Msg("ttlDeleteFailed")
				} else {
					c.o.log.Debug().Str(logkey.Kind, t.GVK.Kind).Str(logkey.Resource, path(item.Namespace, item.Name)).Str(logkey.Outcome, out).Msg("ttlDeleted")
				}
			}
			if opts.Continue = list.Continue; opts.Continue == "" {
				break
			}
		}
	}
	if failed > 0 {
		// Done anyway: the next sweep tries again.
		return queue.Done().For(ReasonPartial).Detailed(fmt.Sprintf("%d failures, left for the next sweep", failed))
	}
	return queue.Done().For(ReasonDone)
}
