#!/usr/bin/env bash
# Load test of the webhook: the 22 Pod Security policies of
# ../shared/bench/pss-classic, results published to a real JetStream
# (nats-server built from the module this repository depends on), and
# AdmissionReviews built from ../shared/bench/pods-1000.yaml sent over TLS
# on loopback by cmd/loadgen. Everything stops when the script ends.
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
go build -o bin/webhook ./services/webhook
go build -o bin/loadgen ./cmd/loadgen
go build -o bin/nats-server github.com/nats-io/nats-server/v2

bin/loadgen certs -dir "$work" >/dev/null
bin/nats-server -a 127.0.0.1 -p 14222 -js -sd "$work/js" >"$work/nats.log" 2>&1 &
pids+=($!)
bin/webhook --mode files --address 127.0.0.1:19443 --policies "$bench/pss-classic" \
  --tls-cert-file "$work/tls.crt" --tls-private-key-file "$work/tls.key" \
  --nats-url nats://127.0.0.1:14222 --log-level warn >"$work/webhook.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  curl -sfk https://127.0.0.1:19443/readyz >/dev/null 2>&1 && break
  sleep 0.1
done

echo "# closed loop: each worker sends the next review when the answer arrives"
bin/loadgen --url https://127.0.0.1:19443/validate --ca-file "$work/ca.crt" --pods "$bench/pods-1000.yaml" \
  --concurrency "${CONCURRENCY:-1,4,16,64}" --duration "${DURATION:-10s}" --warmup 2s
echo
echo "# open loop at ${RATE:-1000} requests/s"
bin/loadgen --url https://127.0.0.1:19443/validate --ca-file "$work/ca.crt" --pods "$bench/pods-1000.yaml" \
  --concurrency 64 --rate "${RATE:-1000}" --duration "${DURATION:-10s}" --warmup 2s
