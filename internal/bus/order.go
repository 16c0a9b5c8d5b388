package bus

import (
	"cmp"
	"strconv"
)

// CompareResults orders two results of the same policy (key) on the same
// resource (uid), older first: it is negative when a is older than b,
// positive when a is newer, and zero when the order cannot tell them apart
// (the reporter then takes the later stream sequence). VERDICT_RESULTS
// keeps a short history per subject and messages may arrive in any order
// (a publish retried after backoff, a slow replica), so every reader keeps
// the newest by this order, never the last to arrive.
//
// It compares, in turn:
//
//  1. The policy's resourceVersion: an evaluation by a later version of the
//     policy is newer, whatever state of the resource it saw (the other
//     came from a replica whose policy cache lagged). The versions of one
//     key are comparable: one key is one kind of policy (a ClusterPolicy's
//     key has no '/', a Policy's has), Kubernetes documents the
//     resourceVersions of one resource as comparable integers (1.35), and
//     a policy deleted and created again under its name has a later one.
//  2. A policyDeleted retraction is newer than anything else of the same
//     policy version: it is final, a late result of a deleted policy must
//     not bring it back.
//  3. The resource's resourceVersion: an evaluation of a later state of the
//     resource is newer. The admission of a CREATE has none: it saw the
//     first state.
//  4. The evaluation time (the webhook's or the scanner's clock).
//
// A resourceVersion that is not an unsigned integer (none, or an
// aggregated API's opaque one) counts as 0: the next key decides. Each key
// is a total preorder, so the order is one too: the newest of a set does
// not depend on the order the set was read in.
func CompareResults(a, b ResultEvent) int {
	if c := cmp.Compare(version(a.Policy.ResourceVersion), version(b.Policy.ResourceVersion)); c != 0 {
		return c
	}
	if c := cmp.Compare(final(a), final(b)); c != 0 {
		return c
	}
	if c := cmp.Compare(version(a.Resource.ResourceVersion), version(b.Resource.ResourceVersion)); c != 0 {
		return c
	}
	return a.Timestamp.Compare(b.Timestamp)
}

// version reads a resourceVersion as an integer; 0 when it is not one.
func version(rv string) uint64 {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// final is 1 for a policyDeleted retraction, 0 otherwise.
func final(ev ResultEvent) int {
	if ev.Retracted == RetractedPolicyDeleted {
		return 1
	}
	return 0
}
