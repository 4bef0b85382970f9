#!/usr/bin/env bash
# Stop-signal and SIGKILL lateness of podgrace's local kubelet, with coreutils `timeout` as the
# reference, in the same run (crates/podgrace-node/examples/bench_stop.rs; its header says what
# is measured and how). 100 pods of one `sleep 100000` container (PID 1 without a SIGTERM
# handler, so SIGKILLed at its deadline), terminationGracePeriodSeconds 2, preStop sleep 1 s,
# hostNetwork, all deleted at once; then 100 `timeout --kill-after=2s D PROBE` with every
# SIGTERM due at the same instant. Prints p50/p99/max lateness in ms and podgrace's peak RSS.
#
#   bash bench/stop.sh                 # RUNS=3 PODS=100 GRACE=2
#   RUNS=1 bash bench/stop.sh --pod-network   # extra arguments go to bench_stop
#
# Needs root: containers are PID 1 of their own PID namespace only with CAP_SYS_ADMIN. Without
# it `sleep` is a plain host process that dies on SIGTERM, and no SIGKILL is measured.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-3}
pods=${PODS:-100}
grace=${GRACE:-2}
if [ "$(id -u)" -ne 0 ]; then
  echo "bench/stop.sh: not root: containers run as host processes (no PID namespaces), so" >&2
  echo "  'sleep' dies on SIGTERM and no SIGKILL lateness is measured; run it as root" >&2
fi
command -v timeout >/dev/null || { echo "bench/stop.sh: coreutils timeout not found" >&2; exit 1; }
cargo build --release -q -p podgrace-node --example bench_stop
echo "$(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg), $(timeout --version | head -1)"
for i in $(seq 1 "$runs"); do
  echo "--- run $i of $runs"
  target/release/examples/bench_stop --pods "$pods" --grace "$grace" "$@"
done
