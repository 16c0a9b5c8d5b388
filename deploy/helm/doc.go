// Package helm holds Verdict's Helm chart (deploy/helm/verdict) and its
// tests; it has no code of its own. The tests run the helm command line
// built from its Go module (internal/testkit/helmbin, hack/helm.sh): lint, render
// with the default and the HA values (golden files under testdata/), the
// HA properties and the RBAC of every service read off the rendered
// objects, the schema's refusals, and, against a real kube-apiserver, a
// server-side dry-run apply of every rendered object and the RBAC checked
// with SubjectAccessReviews.
//
// TestE2ETopology (make topology) runs the chart's HA topology as
// processes: every Deployment's replicas are its service's binary with
// the container's rendered args and env, each authenticating as its
// ServiceAccount, next to a three-server JetStream on loopback; a scenario
// enforces, audits, generates and cleans up while replicas and the stream
// leader are killed.
//
// The chart's crds/ is a copy of deploy/crds (`make chart-crds`); a test
// fails while the two differ.
package helm
