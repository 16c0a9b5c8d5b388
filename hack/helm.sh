#!/usr/bin/env bash
# Builds the helm command line from its Go module (helm.sh/helm/v4, pinned in
# hack/tools/helm/go.mod) into a cache folder the repository ignores. Nothing
# is rebuilt while the pin, the Go version and this script are unchanged.
# Prints the path of the helm binary. The first build takes a few minutes on
# two cores; after that it is a stamp check.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${VERDICT_CACHE:-$repo/.cache}/helm
bin=$cache/bin
mkdir -p "$bin"

stamp_input=$(cat "$repo"/hack/tools/helm/go.mod "$repo"/hack/tools/helm/go.sum "$0"; go version)
stamp=$(printf '%s' "$stamp_input" | sha256sum | cut -d' ' -f1)
if [ -f "$cache/stamp" ] && [ "$(cat "$cache/stamp")" = "$stamp" ] && [ -x "$bin/helm" ]; then
  echo "$bin/helm"
  exit 0
fi

export GOFLAGS=-mod=mod
version=$(awk '$1 == "require" && $2 == "helm.sh/helm/v4" {print $3}' "$repo/hack/tools/helm/go.mod")
log() { echo "helm: $*" >&2; }
log "building helm $version from its Go module (a few minutes on two cores, cached after)"
start=$(date +%s)
# helm reports its version from these variables (`helm version`); without
# them it says only the major and minor of its source.
ldflags="-X helm.sh/helm/v4/internal/version.version=$version -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
(cd "$repo/hack/tools/helm" && go build -trimpath -ldflags "$ldflags" -o "$bin/helm.tmp" helm.sh/helm/v4/cmd/helm)
mv "$bin/helm.tmp" "$bin/helm"
log "built in $(( $(date +%s) - start ))s: $bin/helm"
echo "$stamp" > "$cache/stamp"
echo "$bin/helm"
