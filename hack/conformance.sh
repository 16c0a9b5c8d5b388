#!/usr/bin/env bash
# Runs `verdict test` on the classic (no suffix) policy folders of the
# conformance corpus and prints the failures and the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=${CORPUS:-../shared/conformance/kyverno-policies}
dirs=()
for d in "$corpus"/*/; do
  case "$d" in *-cel/|*-vpol/|*-mpol/|*-gpol/) continue ;; esac
  dirs+=("$d")
done
exec bin/verdict test "${dirs[@]}"
