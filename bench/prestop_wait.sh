#!/usr/bin/env bash
# CPU and memory of `podgrace prestop-wait` while it waits (issue 16: under 1% of a core,
# RSS under 2 MB). Each case runs in a fresh network and PID namespace (unshare), as in a pod:
# `podgrace demo-app` on 127.0.0.1:8080, a python3 client opening RATE new connections per
# second to it (Connection: close), and prestop-wait under /usr/bin/time for its whole --max
# (the load never lets it become quiet; the idle case has --quiet longer than --max): CPU, its
# VmRSS halfway through the wait, and its max RSS (VmHWM, start-up included). With
# --port and a second listener (8081) in the namespace, every sample with passive opens reads
# /proc/net/tcp{,6}: the expensive case.
#
#   bash bench/prestop_wait.sh              # SECS=20; PODGRACE=path/to/podgrace
#
# Needs root (namespaces). Uses the static release binary if built (cargo build-static), else
# target/release/podgrace.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${SECS:-20}; export SECS=$secs
bin=${PODGRACE:-}
if [ -z "$bin" ]; then
  bin=target/x86_64-unknown-linux-gnu/release/podgrace
  [ -x "$bin" ] || { cargo build --release -q -p podgrace; bin=target/release/podgrace; }
fi
bin=$(realpath "$bin")
load=$(mktemp)
cat > "$load" <<'PY'
import socket, sys, time
rate = float(sys.argv[1]); period = 1.0 / rate; nxt = time.monotonic()
while True:
    try:
        s = socket.create_connection(("127.0.0.1", 8080), timeout=2)
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        while s.recv(4096):
            pass
        s.close()
    except OSError:
        pass
    nxt += period
    time.sleep(max(0.0, nxt - time.monotonic()))
PY
# --endpoints against an API server that refuses connections: the watch retries with back-off.
KCFG=$(mktemp); export KCFG
printf 'apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u, namespace: default}}]\ncurrent-context: c\n' > "$KCFG"
echo "$(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg); $bin ($(stat -c %s "$bin") bytes)"
run() { # NAME RATE ARGS...
  local name=$1 rate=$2; shift 2
  local out; out=$(mktemp)
  OUT=$out unshare --net --pid --fork --mount-proc bash -c '
    ip link set lo up
    "$0" demo-app --listen 127.0.0.1:8080 >/dev/null 2>&1 &
    if [ -n "${SECOND:-}" ]; then "$0" demo-app --listen 127.0.0.1:8081 >/dev/null 2>&1 & fi
    while ! (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null; do sleep 0.05; done
    opens() { awk "/^Tcp:/ { if (++n == 2) print \$7 }" /proc/net/snmp; }
    if [ "$1" != 0 ]; then
      python3 "$2" "$1" &
      # Start measuring once the load runs (python3 can take a while to start on a busy host).
      start=$(opens)
      while [ $(( $(opens) - start )) -lt 20 ]; do sleep 0.05; done
    fi
    sleep 1
    shift 2
    KUBECONFIG=$KCFG POD_NAME=bench /usr/bin/time -o "$OUT" -f "%e %U %S %M" "$0" prestop-wait "$@" >/dev/null &
    timer=$!
    # VmRSS while it waits: halfway through --max (the hook is the time process'"'"'s child).
    sleep "$(( SECS / 2 ))"
    pw=$(pgrep -P "$timer" | head -1)
    awk "/^VmRSS:/ { print \$2 }" "/proc/$pw/status" > "$OUT.wait" 2>/dev/null || echo 0 > "$OUT.wait"
    wait "$timer" || true
  ' "$bin" "$rate" "$load" "$@" >/dev/null 2>&1 </dev/null
  read -r wall user sys rss < <(tail -1 "$out")
  waiting=$(cat "$out.wait" 2>/dev/null || echo 0)
  awk -v n="$name" -v w="$wall" -v u="$user" -v s="$sys" -v r="$rss" -v q="$waiting" \
    'BEGIN { printf "%-44s %6.1f s  CPU %5.2f s = %5.2f%% of a core  RSS while waiting %5d kB  max RSS %5d kB\n", n, w, u + s, 100 * (u + s) / w, q, r }'
  rm -f "$out" "$out.wait"
}
for round in 1 2 3; do
  echo "--- round $round"
  run "idle (no connection)" 0 --quiet 1000s --max "${secs}s"
  run "200 new connections/s" 200 --quiet 1s --max "${secs}s"
  run "200 new connections/s, --port 8080" 200 --quiet 1s --max "${secs}s" --port 8080
  SECOND=1 run "200/s, --port 8080, a listener on 8081 too" 200 --quiet 1s --max "${secs}s" --port 8080
  SECOND=1 run "1000/s, --port 8080, a listener on 8081 too" 1000 --quiet 1s --max "${secs}s" --port 8080
  run "idle, --endpoints (API refusing connections)" 0 --quiet 1s --max "${secs}s" --endpoints
done
rm -f "$load" "$KCFG"
