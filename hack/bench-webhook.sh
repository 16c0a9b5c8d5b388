#!/usr/bin/env bash
# Load test of the webhook: the 22 Pod Security policies of
# ../shared/bench/pss-classic, results published to a real JetStream
# (nats-server built from the module this repository depends on), and
# AdmissionReviews built from ../shared/bench/pods-1000.yaml sent over TLS
# on loopback by cmd/loadgen, which reports the webhook's CPU time and
# allocations per request from its /metrics and nats-server's CPU time per
# request from /proc. Everything stops when the script ends.
#   DURATION=10s per level; CONCURRENCY=1,4,16,64 closed-loop levels;
#   RATE="1000 2000" open-loop rates; RATES_ONLY=1 skips the closed loop;
#   PROFILE=/tmp/webhook writes a CPU profile of each open-loop level
#   (/tmp/webhook.<rate>.pprof) through the webhook's --pprof;
#   WEBHOOK_BIN=path runs that binary instead of building one (to compare
#   builds in one session); LOG_LEVEL=info logs as a default install does
#   (a line per denied request; the default here, warn, logs none).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bench=${BENCH_DIR:-$repo/../shared/bench}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

cd "$repo"
webhook=${WEBHOOK_BIN:-bin/webhook}
[ -z "${WEBHOOK_BIN:-}" ] && go build -o bin/webhook ./cmd/webhook
go build -o bin/loadgen ./cmd/loadgen
go build -o bin/nats-server github.com/nats-io/nats-server/v2

bin/loadgen certs -dir "$work" >/dev/null
bin/nats-server -a 127.0.0.1 -p 14222 -m 18222 -js -sd "$work/js" ${NATS_PROFILE:+--profile 16060} >"$work/nats.log" 2>&1 &
nats_pid=$!
pids+=($nats_pid)
pprof=()
[ -n "${PROFILE:-}" ] && pprof=(--pprof)
# loadgen stands for the API server, which in production presents its
# client certificate (never limited); without mutual TLS here, the
# publish limits of unverified callers are turned off so that every
# result is published, as in the figures of BENCHMARKS.md.
"$webhook" --mode files --address 127.0.0.1:19443 --probe-address 127.0.0.1:18080 "${pprof[@]}" \
  --policies "$bench/pss-classic" \
  --tls-cert-file "$work/tls.crt" --tls-private-key-file "$work/tls.key" \
  --nats-url nats://127.0.0.1:14222 --log-level "${LOG_LEVEL:-warn}" \
  --unverified-results-per-second 0 --unverified-work-per-second 0 ${WEBHOOK_ARGS:-} >"$work/webhook.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  curl -sf http://127.0.0.1:18080/readyz >/dev/null 2>&1 && break
  sleep 0.1
done
load=(bin/loadgen --url https://127.0.0.1:19443/validate --ca-file "$work/ca.crt" --pods "$bench/pods-1000.yaml"
  --metrics-url http://127.0.0.1:18080/metrics --nats-pid "$nats_pid" --duration "${DURATION:-10s}" --warmup 2s)

if [ -z "${RATES_ONLY:-}" ]; then
  echo "# closed loop: each worker sends the next review when the answer arrives"
  "${load[@]}" --concurrency "${CONCURRENCY:-1,4,16,64}"
  echo
fi
for rate in ${RATE:-1000}; do
  echo "# open loop at $rate requests/s"
  if [ -n "${PROFILE:-}" ]; then
    # A CPU profile of the webhook over the measured part of the level.
    (sleep 2.5; curl -sf -o "$PROFILE.$rate.pprof" "http://127.0.0.1:18080/debug/pprof/profile?seconds=${PROFILE_SECONDS:-8}") &
    pids+=($!)
  fi
  "${load[@]}" --concurrency 64 --rate "$rate"
  echo
done
echo "# streams"
curl -sf "http://127.0.0.1:18222/jsz?streams=true" | python3 -c '
import json, sys
for acc in json.load(sys.stdin).get("account_details", []):
    for s in acc.get("stream_detail", []):
        st = s["state"]
        if st["messages"]:
            print("%-20s %9d messages %12d bytes %7.0f bytes/message" % (s["name"], st["messages"], st["bytes"], st["bytes"] / st["messages"]))
' || true
