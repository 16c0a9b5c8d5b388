#!/usr/bin/env bash
# Fails when a tracked file over LIMIT bytes (1 MB) is not test data: a
# binary or a generated dump committed by mistake makes every clone pay for
# it forever. Test data (any path with a testdata/ folder) may be larger;
# list another exception in hack/large-files-allowed.txt, one path a line,
# with the reason in a comment above it.
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT=${LIMIT:-1000000}
allowed=hack/large-files-allowed.txt
bad=0
while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue
  size=$(stat -c %s "$f")
  [ "$size" -gt "$LIMIT" ] || continue
  case "/$f" in */testdata/*) continue ;; esac
  if [ -f "$allowed" ] && grep -qxF "$f" "$allowed"; then
    continue
  fi
  echo "large-files: $f is $size bytes, over $LIMIT, and not test data (binaries go to bin/; see $0)" >&2
  bad=1
done < <(git ls-files -z)
exit $bad
