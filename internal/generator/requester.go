package generator

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// creationSlack is added to the grace period when a trigger's creation
// is compared with the time its item was stored: creationTimestamp has
// whole seconds.
const creationSlack = time.Second

// requester is the requester the item's rule is evaluated with. An
// admission item claims one (WorkItem.UserInfo), which only the API
// server can vouch for: with mutual TLS the webhook's caller proved to be
// the API server (RequesterVerified) and the claim stands. Without it,
// anyone who reaches the webhook may have written it, with the real uid of
// a real object, so the claim stands only where the API vouches for the
// moment of the request:
//
//   - a CREATE whose trigger was created within the grace period before
//     the item was stored: the real review of a creation is published
//     before the object is stored (its uid is known to no one else
//     before), and the item's id is one per trigger uid and rule
//     (events.WorkMessage), so a forged review for the same uid is a
//     duplicate of the real one while it can still pass this check;
//   - nothing else: an UPDATE's review names a resourceVersion anyone
//     who can read the object knows, and a CREATE for an older trigger is
//     no creation.
//
// An item whose claim does not stand is worked without a requester, as a
// background scan or generateExisting works the rule, when the policy
// runs in the background (Kyverno's promise that its rules read nothing
// only an admission request has), and is skipped (requesterUnverified)
// when it does not (background: false, the policies that read
// request.userInfo). Both are counted.
func (g *Generator) requester(m *queue.Msg, item bus.WorkItem, trigger *unstructured.Unstructured, pol *engine.Policy) (engine.UserInfo, queue.Outcome, bool) {
	ui := item.UserInfo
	if item.RequesterVerified || (item.Cause != "" && item.Cause != bus.CauseAdmission) || noRequester(ui) {
		return ui, queue.Outcome{}, true
	}
	var why string
	switch created := trigger.GetCreationTimestamp().Time; {
	case item.Operation != engine.OpCreate:
		why = fmt.Sprintf("an %s review names a version of the trigger anyone who reads it knows", item.Operation)
	case created.IsZero() || m.Published.Sub(created) > g.check.Grace()+creationSlack:
		why = fmt.Sprintf("the trigger was created at %s, more than the grace period (%s) before the item was stored at %s: the item is not its creation's",
			created.UTC().Format(time.RFC3339), g.check.Grace(), m.Published.UTC().Format(time.RFC3339))
	default:
		return ui, queue.Outcome{}, true
	}
	op := item.Operation
	if op != engine.OpCreate && op != engine.OpUpdate {
		op = "other"
	}
	detail := "the webhook's caller presented no client certificate (mutual TLS off), and " + why
	if !pol.Raw.Spec.BackgroundEnabled() {
		g.m.requesters.WithLabelValues(op, RequesterRefused).Inc()
		return engine.UserInfo{}, queue.Skip(ReasonRequesterUnverified, "the requester is not acted on: "+detail), false
	}
	g.m.requesters.WithLabelValues(op, RequesterDropped).Inc()
	g.o.log.Info().Str(logkey.Subject, m.Subject).Str(logkey.Detail, detail).Msg("requesterDropped")
	return engine.UserInfo{}, queue.Outcome{}, true
}

// noRequester reports whether ui claims nobody.
func noRequester(ui engine.UserInfo) bool {
	return ui.Username == "" && ui.UID == "" && len(ui.Groups) == 0 && len(ui.Extra) == 0 &&
		len(ui.Roles) == 0 && len(ui.ClusterRoles) == 0
}
