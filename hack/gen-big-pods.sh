#!/usr/bin/env bash
# Writes a large multi-document YAML file of Pods to stdout, for measuring
# the memory of `verdict apply` on big inputs (the file is not committed):
#
#   ./hack/gen-big-pods.sh 50 > /tmp/big.yaml     # about 50 MB, 50,000 Pods
#   /usr/bin/time -v bin/verdict apply -p ../shared/bench/pss-classic -r /tmp/big.yaml
#
# It repeats the 1,000 Pods of the benchmark workload N times (default 50),
# giving each copy's Pods distinct names.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-50}
src=${PODS:-../shared/bench/pods-1000.yaml}
for ((i = 0; i < n; i++)); do
  sed "s/^  name: pod-\([0-9]*\)$/  name: pod-${i}-\1/" "$src"
  printf '\n'
done
