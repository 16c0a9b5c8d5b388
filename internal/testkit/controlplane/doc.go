// Package controlplane runs a real, local Kubernetes control plane for
// end-to-end tests and `make demo`: etcd, kube-apiserver and, on request,
// kube-controller-manager, built from their Go modules by
// hack/controlplane.sh and started as child processes on loopback.
//
// Start generates a throw-away PKI (cluster CA, apiserver serving
// certificate, admin client certificate in system:masters, service-account
// signing key), starts etcd with a temporary data directory, starts
// kube-apiserver with client-certificate authentication and Node,RBAC
// authorization, waits for /readyz, writes an admin kubeconfig and installs
// Verdict's CRDs (deploy/crds), waiting until they are Established.
//
// Tests use StartForTest, which stops everything in t.Cleanup. Child
// processes run in their own process group and, on Linux, are killed by the
// kernel if the test binary dies (parent-death signal), so a panic, a
// timeout or Ctrl-C leaves no etcd or apiserver behind.
//
// Binaries are found, in order: WithBinDir, the VERDICT_CONTROLPLANE_BIN
// environment variable, or by running hack/controlplane.sh from the
// repository (cached; a cold build takes about ten minutes on two cores, so
// run a cold first build with `go test -timeout 30m`, or run the script
// first). Set VERDICT_CONTROLPLANE_KEEP=1 to keep the temporary directory
// (certificates, kubeconfig, logs) after Stop.
package controlplane
