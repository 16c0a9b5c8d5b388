package cleaner

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/verdict-dev/verdict/internal/platform/logkey"
)

// Event reasons and actions, as Kyverno's cleanup controller records
// them.
const (
	EventReasonApplied = "PolicyApplied"
	EventReasonError   = "PolicyError"
	EventActionCleaned = "Resource Cleaned Up"
	EventActionNone    = "None"
)

// maxNote bounds an Event's note (the API server refuses more than 1 kB).
const maxNote = 1000

// recordEvent records an events.k8s.io/v1 Event about the policy: Normal
// (PolicyApplied) when resource was deleted, Warning (PolicyError) with
// err otherwise; resource, when given, is the related object. Best
// effort: a failure is logged.
func (c *Cleaner) recordEvent(ctx context.Context, ref PolicyRef, resource *unstructured.Unstructured, err error) {
	ev := c.newEvent(ref)
	what := ""
	if resource != nil {
		ev.Related = &corev1.ObjectReference{
			APIVersion: resource.GetAPIVersion(), Kind: resource.GetKind(),
			Namespace: resource.GetNamespace(), Name: resource.GetName(), UID: resource.GetUID(),
		}
		what = fmt.Sprintf("%s/%s/%s", resource.GetKind(), resource.GetNamespace(), resource.GetName())
	}
	switch {
	case err != nil && resource != nil:
		ev.Type, ev.Reason, ev.Action = corev1.EventTypeWarning, EventReasonError, EventActionNone
		ev.Note = fmt.Sprintf("failed to clean up the target resource %s: %v", what, err)
	case err != nil:
		ev.Type, ev.Reason, ev.Action = corev1.EventTypeWarning, EventReasonError, EventActionNone
		ev.Note = err.Error()
	default:
		ev.Note = "successfully cleaned up the target resource " + what
	}
	c.createEvent(ctx, ref, ev)
}

// recordSummary records an Event about the policy with note: Normal
// (PolicyApplied) or, for failures, Warning (PolicyError).
func (c *Cleaner) recordSummary(ctx context.Context, ref PolicyRef, note string, failed bool) {
	ev := c.newEvent(ref)
	ev.Note = note
	if failed {
		ev.Type, ev.Reason, ev.Action = corev1.EventTypeWarning, EventReasonError, EventActionNone
	}
	c.createEvent(ctx, ref, ev)
}

// newEvent is a Normal PolicyApplied Event about the policy, now.
func (c *Cleaner) newEvent(ref PolicyRef) *eventsv1.Event {
	ns := ref.Namespace
	if ns == "" {
		// Events about cluster-scoped objects live in "default".
		ns = metav1.NamespaceDefault
	}
	now := c.o.now()
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()), Namespace: ns},
		EventTime:  metav1.NewMicroTime(now),
		Regarding: corev1.ObjectReference{
			APIVersion: ref.GVR(c.o.api).GroupVersion().String(), Kind: ref.Kind,
			Namespace: ref.Namespace, Name: ref.Name, UID: types.UID(ref.UID),
		},
		ReportingController: Component,
		ReportingInstance:   c.o.identity,
		Type:                corev1.EventTypeNormal,
		Reason:              EventReasonApplied,
		Action:              EventActionCleaned,
	}
}

// createEvent writes ev in its namespace, its note cut to what the API
// server takes. Best effort: a failure is logged.
func (c *Cleaner) createEvent(ctx context.Context, ref PolicyRef, ev *eventsv1.Event) {
	ns := ev.Namespace
	if len(ev.Note) > maxNote {
		ev.Note = ev.Note[:maxNote]
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, cerr := c.kube.EventsV1().Events(ns).Create(ectx, ev, metav1.CreateOptions{}); cerr != nil {
		c.o.log.Warn().Err(cerr).Str(logkey.Policy, ref.String()).Msg("eventNotRecorded")
	}
}
