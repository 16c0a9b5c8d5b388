#!/usr/bin/env bash
# Builds the local control plane (etcd, kube-apiserver, kube-controller-manager)
# from their Go modules at the versions pinned in hack/tools/*/go.mod, into a
# cache folder the repository ignores. Nothing is rebuilt while the pins, the
# Go version and this script are unchanged. Prints the bin directory.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${VERDICT_CACHE:-$repo/.cache}/controlplane
bin=$cache/bin
mkdir -p "$bin"

k8s_version=v1.36.3
stamp_input=$(cat "$repo"/hack/tools/controlplane/go.mod "$repo"/hack/tools/controlplane/go.sum \
  "$repo"/hack/tools/etcd/go.mod "$repo"/hack/tools/etcd/go.sum "$0"; go version)
stamp=$(printf '%s' "$stamp_input" | sha256sum | cut -d' ' -f1)
if [ -f "$cache/stamp" ] && [ "$(cat "$cache/stamp")" = "$stamp" ] &&
   [ -x "$bin/etcd" ] && [ -x "$bin/kube-apiserver" ] && [ -x "$bin/kube-controller-manager" ]; then
  echo "$bin"
  exit 0
fi

export GOFLAGS=-mod=mod
log() { echo "controlplane: $*" >&2; }

log "building etcd (about a minute)"
(cd "$repo/hack/tools/etcd" && go build -trimpath -o "$bin/etcd" go.etcd.io/etcd/server/v3)

major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}
ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
for cmd in kube-apiserver kube-controller-manager; do
  log "building $cmd $k8s_version (several minutes on two cores, cached after)"
  (cd "$repo/hack/tools/controlplane" && go build -trimpath -ldflags "$ldflags" -o "$bin/$cmd" "k8s.io/kubernetes/cmd/$cmd")
done
echo "$stamp" > "$cache/stamp"
echo "$bin"
