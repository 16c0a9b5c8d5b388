#!/usr/bin/env bash
# Builds golangci-lint from its Go module (pinned in
# hack/tools/golangci-lint/go.mod) into a cache folder the repository
# ignores, and prints the path of the binary. Nothing is rebuilt while the
# pin, the Go version and this script are unchanged. The first build takes
# a few minutes on two cores; after that it is a stamp check.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
tools=$repo/hack/tools/golangci-lint
cache=${VERDICT_CACHE:-$repo/.cache}/golangci-lint
module=github.com/golangci/golangci-lint/v2
bin=$cache/bin
mkdir -p "$bin"

stamp_input=$(cat "$tools"/go.mod "$tools"/go.sum "$0"; go version)
stamp=$(printf '%s' "$stamp_input" | sha256sum | cut -d' ' -f1)
if [ -f "$cache/stamp" ] && [ "$(cat "$cache/stamp")" = "$stamp" ] && [ -x "$bin/golangci-lint" ]; then
  echo "$bin/golangci-lint"
  exit 0
fi

export GOFLAGS=-mod=mod
version=$(awk -v m="$module" '$1 == "require" && $2 == m {print $3}' "$tools/go.mod")
log() { echo "golangci-lint: $*" >&2; }
log "building golangci-lint $version from its Go module (a few minutes on two cores, cached after)"
start=$(date +%s)
(cd "$tools" && go build -trimpath -ldflags "-X main.version=${version#v}" -o "$bin/golangci-lint.tmp" "$module/cmd/golangci-lint")
mv "$bin/golangci-lint.tmp" "$bin/golangci-lint"
log "built in $(( $(date +%s) - start ))s: $bin/golangci-lint"
echo "$stamp" > "$cache/stamp"
echo "$bin/golangci-lint"
