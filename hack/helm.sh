#!/usr/bin/env bash
# Builds the helm command line from its Go module into a cache folder the
# repository ignores, and prints the path of the binary:
#   hack/helm.sh     helm v4 (helm.sh/helm/v4, pinned in hack/tools/helm/go.mod)
#   hack/helm.sh 3   helm v3 (helm.sh/helm/v3, pinned in hack/tools/helm3/go.mod):
#                    the chart must also lint and render under v3
# Nothing is rebuilt while the pin, the Go version and this script are
# unchanged. The first build takes a few minutes on two cores; after that it
# is a stamp check.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
major=${1:-4}
case "$major" in
  4) tools=$repo/hack/tools/helm; cache=${VERDICT_CACHE:-$repo/.cache}/helm ;;
  3) tools=$repo/hack/tools/helm3; cache=${VERDICT_CACHE:-$repo/.cache}/helm3 ;;
  *) echo "helm.sh: no helm v$major here (3 or 4)" >&2; exit 2 ;;
esac
module=helm.sh/helm/v$major
bin=$cache/bin
mkdir -p "$bin"

stamp_input=$(cat "$tools"/go.mod "$tools"/go.sum "$0"; go version)
stamp=$(printf '%s' "$stamp_input" | sha256sum | cut -d' ' -f1)
if [ -f "$cache/stamp" ] && [ "$(cat "$cache/stamp")" = "$stamp" ] && [ -x "$bin/helm" ]; then
  echo "$bin/helm"
  exit 0
fi

export GOFLAGS=-mod=mod
version=$(awk -v m="$module" '$1 == "require" && $2 == m {print $3}' "$tools/go.mod")
log() { echo "helm: $*" >&2; }
log "building helm $version from its Go module (a few minutes on two cores, cached after)"
start=$(date +%s)
# helm reports its version from these variables (`helm version`); without
# them it says only the major and minor of its source.
ldflags="-X $module/internal/version.version=$version -X $module/internal/version.gitTreeState=clean"
(cd "$tools" && go build -trimpath -ldflags "$ldflags" -o "$bin/helm.tmp" "$module/cmd/helm")
mv "$bin/helm.tmp" "$bin/helm"
log "built in $(( $(date +%s) - start ))s: $bin/helm"
echo "$stamp" > "$cache/stamp"
echo "$bin/helm"
