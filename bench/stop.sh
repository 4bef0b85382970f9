#!/usr/bin/env bash
# Stop-signal, SIGKILL and forwarding lateness seen from outside, podgrace against tini,
# dumb-init and coreutils `timeout -k`, interleaved in the same run
# (crates/podgrace-node/examples/bench_lateness.rs; its header says what is measured and how).
#
# The workload is crates/podgrace-node/examples/lateness_probe.rs: PID 1 of each pod (or the
# child of each init), it stamps SIGTERM on arrival and never exits by itself; the harness sees
# its death when the socket it holds closes. For each N and each round, in turn:
#   node      N pods in one process (podgrace's node library), grace 2 s, all deleted at once
#   node+pre  the same with grace 3 s and a preStop sleep of 1 s
#   run       N `podgrace run` processes, SIGTERM to all at once (the delete), grace 2 s
#   tini, dumb-init, timeout   the probe under `tini -s`, `dumb-init`, `timeout -k2s 1d`,
#             SIGTERM to all at once
#
#   bash bench/stop.sh                     # RUNS=3 COUNTS="1 100 1000"
#   RUNS=1 COUNTS=100 RUNNERS="node timeout" bash bench/stop.sh
#
# Needs root (containers are PID 1 of their own PID namespace only with CAP_SYS_ADMIN) and
# Debian's tini and dumb-init. PODGRACE=path skips the release build of the podgrace binary.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-3}
counts=${COUNTS:-1 100 1000}
runners=${RUNNERS:-node node+pre run tini dumb-init timeout}
if [ "$(id -u)" -ne 0 ]; then
  echo "bench/stop.sh: not root: containers run as host processes (no PID namespaces); run it as root" >&2
  exit 1
fi
for tool in tini dumb-init timeout; do
  command -v "$tool" >/dev/null || { echo "bench/stop.sh: $tool not found (apt-get install $tool)" >&2; exit 1; }
done
cargo build --release -q -p podgrace-node --example bench_lateness --example lateness_probe
podgrace=${PODGRACE:-}
if [ -z "$podgrace" ]; then
  cargo build --release -q -p podgrace --bin podgrace
  podgrace=target/release/podgrace
fi
bench=target/release/examples/bench_lateness
# 1,000 `podgrace run` processes and 2,000 probes and inits: more than the default limits.
ulimit -n 65536 2>/dev/null || true
echo "$(nproc) cores; $(tini --version 2>&1 | head -1); dumb-init $(dumb-init --version 2>&1 | head -1); $(timeout --version | head -1)"
for n in $counts; do
  for i in $(seq 1 "$runs"); do
    for r in $runners; do
      echo "--- N=$n round $i of $runs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
      case $r in
        node) $bench --runner node --pods "$n" --grace 2 ;;
        node+pre) $bench --runner node --pods "$n" --grace 3 --pre-stop 1 ;;
        run) $bench --runner run --pods "$n" --grace 2 --podgrace "$podgrace" ;;
        *) $bench --runner "$r" --pods "$n" --grace 2 ;;
      esac || echo "FAILED: $r at N=$n (exit $?)"
    done
  done
done
