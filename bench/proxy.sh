#!/usr/bin/env bash
# Benchmarks of the drill layer (crates/podgrace-drill), all on loopback, same machine, same run:
#  1. the service proxy (HTTP/1.1, kube-proxy-style pinning) against nginx as a reverse proxy
#     (upstream keep-alive), both in front of the same upstream (podgrace demo-app) and both driven
#     by wrk: requests/s and p99 latency;
#  2. the load generator's maximum rate against wrk's on the same target (the demo app): wrk is
#     closed-loop; the generator is open-loop, scheduled at 1.2 × wrk's rate, and its maximum is
#     the requests it completes within the scheduled window per second;
#  3. the load generator's achieved rate at 1k, 5k, 10k and 20k requests/s (target: within 1%).
# Installs wrk and nginx-light with apt-get if missing. Knobs: SECS (default 10), CONNS (64),
# PARTS (default 123: which of the three parts to run).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${SECS:-10}
conns=${CONNS:-64}
parts=${PARTS:-123}
if ! command -v wrk >/dev/null || ! command -v nginx >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends wrk nginx-light >/dev/null
fi
cargo build --release -q -p podgrace --bin podgrace
cargo build --release -q -p podgrace-drill --example bench_proxy --example bench_load

up=127.0.0.1:18181; ours=127.0.0.1:18182; ngx=127.0.0.1:18183
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$dir/nginx.pid" ] && kill "$(cat "$dir/nginx.pid")" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null && return 0; sleep 0.05; done; echo "no listener on $1" >&2; return 1; }

target/release/podgrace demo-app --listen "$up" 2>/dev/null & pids+=($!)
target/release/examples/bench_proxy "$ours" http1 "$up" 2>/dev/null & pids+=($!)
cat >"$dir/nginx.conf" <<CONF
worker_processes auto;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $dir; proxy_temp_path $dir; fastcgi_temp_path $dir;
  uwsgi_temp_path $dir; scgi_temp_path $dir;
  upstream demo { server $up; keepalive 128; }
  server {
    listen $ngx;
    location / { proxy_pass http://demo; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
CONF
nginx -c "$dir/nginx.conf"
wait_port "$up"; wait_port "$ours"; wait_port "$ngx"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# wrk's "Requests/sec" and its 99% latency in ms.
wrk_run() {
  local out rps p99
  out=$(wrk -t2 -c"$conns" -d"${secs}s" --latency "http://$1/")
  rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v*=1000}; print v}' <<<"$out")
  echo "$rps $p99"
}
wrk http://$up/ -d1s -c8 -t1 >/dev/null   # warm up
if [[ $parts == *1* ]]; then
echo "== 1. proxy vs nginx (wrk -t2 -c$conns -d${secs}s, median of 3), upstream: podgrace demo-app"
# Three rounds, alternating, on a machine that may be shared: the median of each.
: >"$dir/ngx"; : >"$dir/ours"
for _ in 1 2 3; do wrk_run "$ngx" >>"$dir/ngx"; wrk_run "$ours" >>"$dir/ours"; done
ngx_rps=$(cut -d' ' -f1 "$dir/ngx" | median); ngx_p99=$(cut -d' ' -f2 "$dir/ngx" | median)
our_rps=$(cut -d' ' -f1 "$dir/ours" | median); our_p99=$(cut -d' ' -f2 "$dir/ours" | median)
echo "rounds (requests/s p99_ms): nginx: $(tr '\n' ';' <"$dir/ngx") podgrace: $(tr '\n' ';' <"$dir/ours")"
printf '%-22s %12s %10s\n' "" "requests/s" "p99 ms"
printf '%-22s %12.0f %10.2f\n' "nginx (reverse proxy)" "$ngx_rps" "$ngx_p99" "podgrace proxy" "$our_rps" "$our_p99"
printf 'ratio: %.2fx requests/s, %.2fx p99 (targets: >= 1.0x, <= 1.0x)\n' \
  "$(echo "$our_rps / $ngx_rps" | bc -l)" "$(echo "$our_p99 / $ngx_p99" | bc -l)"

fi
if [[ $parts == *2* ]]; then
echo "== 2. load generator max rate vs wrk, on the demo app (-c$conns, ${secs}s, median of 3)"
: >"$dir/wrk"; : >"$dir/gen"
for _ in 1 2 3; do
  read -r wrk_rps _ < <(wrk_run "$up")
  sched=$(echo "$wrk_rps * 1.2" | bc -l)
  read -r _ _ gen_max _ _ _ < <(target/release/examples/bench_load "$up" "$sched" "$secs" "$conns")
  echo "$wrk_rps" >>"$dir/wrk"; echo "$gen_max" >>"$dir/gen"
done
wrk_rps=$(median <"$dir/wrk"); gen_max=$(median <"$dir/gen")
echo "rounds (requests/s): wrk: $(tr '\n' ';' <"$dir/wrk") podgrace load: $(tr '\n' ';' <"$dir/gen")"
printf 'median: wrk %.0f requests/s; podgrace load %.0f requests/s; ratio %.2fx (target: >= 0.8x)\n' \
  "$wrk_rps" "$gen_max" "$(echo "$gen_max / $wrk_rps" | bc -l)"
fi
if [[ $parts == *3* ]]; then
echo "== 3. achieved rate (podgrace load -> demo app, ${secs}s, $conns connections)"
printf '%8s %12s %9s %9s %9s %8s\n' target achieved error p50_ms p99_ms failed
for r in 1000 5000 10000 20000; do
  read -r t a _ p50 p99 f < <(target/release/examples/bench_load "$up" "$r" "$secs" "$conns")
  printf '%8d %12.1f %8.2f%% %9.3f %9.3f %8d\n' "$t" "$a" "$(echo "($a - $t) / $t * 100" | bc -l)" "$p50" "$p99" "$f"
done
fi
