// Package helm holds Verdict's Helm chart (deploy/helm/verdict) and its
// tests; it has no code of its own. The tests run the helm command line
// built from its Go module (internal/helmbin, hack/helm.sh): lint, render
// with the default and the HA values (golden files under testdata/), the
// HA properties and the RBAC of every service read off the rendered
// objects, the schema's refusals, and, against a real kube-apiserver, a
// server-side dry-run apply of every rendered object and the RBAC checked
// with SubjectAccessReviews.
//
// The chart's crds/ is a copy of deploy/crds (`make chart-crds`); a test
// fails while the two differ.
package helm
