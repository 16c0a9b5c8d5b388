// Package reporter projects VERDICT_RESULTS into PolicyReports and
// ClusterPolicyReports (wgpolicyk8s.io/v1alpha2): one report per resource,
// named by the resource's UID, the fold of the latest result of every
// policy on that resource.
package reporter
