#!/usr/bin/env bash
# Kyverno's published admission benchmark (kyverno/kyverno
# docs/perf-testing/v1.18.1), reproduced against the local control plane:
# Pods created through a real kube-apiserver by 10, 50, 200 and 500
# concurrent clients, with no webhook (the baseline, first and last), then
# with Verdict's webhook (built from cmd/webhook, as processes, results
# published to a nats-server process), one replica and three behind a
# Service stand-in, enforcing Kyverno's 16 ValidatingPolicies (vpol-pss)
# and the 22 Pod Security ClusterPolicies of ../shared/bench/pss-classic
# (cpol-pss). It runs TestAPIServerBenchmark (internal/webhook/app) and
# prints its tables: latency (avg, p95, p99, max; p99 over the baseline)
# and each process's CPU seconds and peak memory. About 6 minutes on two
# cores; everything stops when the script ends.
#   QUICK=1: 50 and 200 clients, one replica (about 2 minutes);
#   CLIENTS=10,50 ITERATIONS=500,1500: other levels (one count each);
#   MODE=k6 (default; what Kyverno's k6 script sends), fresh (a new
#   connection per CREATE), reuse (CREATEs on shared connections);
#   LOADER=kubeadm (default; the loader in kubeadm:cluster-admins, as
#   kind's admin kubeconfig is: API Priority and Fairness applies) or
#   masters (system:masters: exempt);
#   OUT=file: keep the Markdown tables there;
#   WEBHOOK_BIN=path: run that webhook binary instead of one built from
#   the tree (to compare builds in one session);
#   PROFILE=dir: a 5 s CPU profile of kube-apiserver from each run there
#   (go tool pprof -top dir/vpol-pss-1r-50.pprof).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
out=${OUT:-$(mktemp)}
VERDICT_CONTROLPLANE_BIN=$(./hack/controlplane.sh)
export VERDICT_CONTROLPLANE_BIN
export VERDICT_APISERVER_BENCH=full VERDICT_APISERVER_BENCH_OUT=$out
[ -n "${QUICK:-}" ] && VERDICT_APISERVER_BENCH=quick
[ -n "${CLIENTS:-}" ] && export VERDICT_APISERVER_BENCH_CLIENTS=$CLIENTS
[ -n "${ITERATIONS:-}" ] && export VERDICT_APISERVER_BENCH_ITERATIONS=$ITERATIONS
[ -n "${MODE:-}" ] && export VERDICT_APISERVER_BENCH_MODE=$MODE
[ -n "${LOADER:-}" ] && export VERDICT_APISERVER_BENCH_USER=$LOADER
[ -n "${PROFILE:-}" ] && export VERDICT_APISERVER_BENCH_PROFILE=$PROFILE
[ -n "${WEBHOOK_BIN:-}" ] && export VERDICT_APISERVER_BENCH_WEBHOOK=$WEBHOOK_BIN
status=0
# One line per run as it ends; the whole log only when the test fails.
log=$(mktemp)
go test ./internal/webhook/app -run '^TestAPIServerBenchmark$' -count=1 -v -timeout 40m >"$log" 2>&1 || status=$?
grep -E '^    apiserver_bench_test.go:[0-9]+: [a-z]' "$log" | sed 's/^    apiserver_bench_test.go:[0-9]*: //' || true
if [ "$status" -ne 0 ]; then
  cat "$log"
fi
echo
cat "$out"
rm -f "$log"
[ -z "${OUT:-}" ] && rm -f "$out"
exit "$status"
