#!/usr/bin/env python3
"""Interleaved runs of `verdict apply` on the benchmark workload.

Usage: python3 hack/ab-apply.py N BINARY...

Runs every binary N times, alternating, on ../shared/bench (22 Pod
Security policies, 1,000 Pods) and prints, per binary, the median, tenth
percentile and minimum wall time and the median CPU time (user + system).
Alternating keeps a drift in the machine's speed out of the comparison.
"""
import os
import resource
import statistics
import subprocess
import sys
import time

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "bench")
ARGS = ["apply", "-p", os.path.join(BENCH, "pss-classic"), "-r", os.path.join(BENCH, "pods-1000.yaml")]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    n, binaries = int(sys.argv[1]), sys.argv[2:]
    walls = {b: [] for b in binaries}
    cpus = {b: [] for b in binaries}
    for _ in range(n):
        for b in binaries:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run([b] + ARGS, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            walls[b].append((time.perf_counter() - start) * 1000)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus[b].append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
    for b in binaries:
        w = sorted(walls[b])
        print(f"{os.path.basename(b)}: wall median {statistics.median(w):.1f} ms, "
              f"p10 {w[len(w) // 10]:.1f}, min {w[0]:.1f}; cpu median {statistics.median(cpus[b]):.1f} ms (n={n})")


if __name__ == "__main__":
    main()
