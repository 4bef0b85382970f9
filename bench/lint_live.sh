#!/usr/bin/env bash
# `podgrace lint -A` of N Deployments read from the API against `podgrace lint` of the same
# objects read from files (issue 14: within 1.5x). A release-built `podgrace serve` holds N
# Deployments (bench/gen_deployments.py's, ~2 KB each, in 20 namespaces, replicas 0 so that no
# pod runs), created with kubectl apply. Timed, median of 5 runs each, `--output json`:
#   files      `podgrace lint DIR`: the N manifests the objects were applied from (one file each);
#   kubectl    `podgrace lint FILE`: `kubectl get deployments -A -o json` of them (one List);
#   api        `podgrace lint -A`: the same objects from the API (one paginated list per kind,
#              500 a page, with the Services and PodDisruptionBudgets; no node is read, as no
#              pod runs).
# The ratios api/files and api/kubectl are printed. Say the load average beside the numbers.
#   N=1000 bash bench/lint_live.sh
#   BIN=path/to/podgrace bash bench/lint_live.sh   # another build (default: target/release)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-}
if [ -z "$BIN" ]; then
  cargo build --release -q -p podgrace --bin podgrace
  BIN=target/release/podgrace
fi
n=${N:-1000}
dir=$(mktemp -d)
serve_pid=
cleanup() {
  if [ -n "$serve_pid" ]; then
    kill -INT "$serve_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$serve_pid" 2>/dev/null || break; sleep 0.3; done
    kill -INT "$serve_pid" 2>/dev/null || true
    wait "$serve_pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
python3 bench/gen_deployments.py "$n" "$dir/manifests"
# No pod runs: the benchmark is about reading objects, not about n × replicas processes.
sed -i 's/^  replicas: .*/  replicas: 0/' "$dir"/manifests/*.yaml
"$BIN" serve --bind 127.0.0.1:0 --kubeconfig-out "$dir/kubeconfig" >"$dir/serve.out" 2>"$dir/serve.err" &
serve_pid=$!
for _ in $(seq 1 100); do grep -q '^kube-proxy: ' "$dir/serve.out" 2>/dev/null && break; sleep 0.1; done
export KUBECONFIG="$dir/kubeconfig"
for ns in $(grep -h '^  namespace: ' "$dir"/manifests/*.yaml | awk '{print $2}' | sort -u); do
  kubectl create namespace "$ns" >/dev/null
done
kubectl apply -f "$dir/manifests" >/dev/null
kubectl get deployments -A -o json >"$dir/kubectl.json"
have=$(kubectl get deployments -A --no-headers | wc -l)
echo "objects: $have Deployments in the API; files: $n manifests, $(du -sb "$dir/manifests" | cut -f1) bytes; kubectl's List: $(stat -c %s "$dir/kubectl.json") bytes"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
run() { # prints seconds of one run of "$@" (exit 0 or 1)
  local t0 t1 rc=0
  t0=$(date +%s.%N); "$@" >/dev/null || rc=$?; t1=$(date +%s.%N)
  if [ "$rc" -gt 1 ]; then echo "failed ($rc): $*" >&2; exit 1; fi
  echo "$t1 - $t0" | bc -l
}
# The three read the same findings (checked once, by count).
count() { "$BIN" lint --output json "$@" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["findings"]))'; }
echo "findings: files $(count "$dir/manifests" || true), kubectl $(count "$dir/kubectl.json" || true), api $(count -A || true)"
files=$(for _ in 1 2 3 4 5; do run "$BIN" lint --output json "$dir/manifests"; done | median)
# A List above 3 MiB is refused as a manifest (the API server's request limit): not timed then.
if [ "$(stat -c %s "$dir/kubectl.json")" -le 3145728 ]; then
  listed=$(for _ in 1 2 3 4 5; do run "$BIN" lint --output json "$dir/kubectl.json"; done | median)
else
  listed=nan
fi
api=$(for _ in 1 2 3 4 5; do run "$BIN" lint --output json -A; done | median)
printf 'lint DIR (files):          %.3f s\n' "$files"
printf 'lint -A (API):             %.3f s (%.2fx the files)\n' "$api" "$(echo "$api / $files" | bc -l)"
if [ "$listed" != nan ]; then
  printf 'lint FILE (kubectl List):  %.3f s (the API %.2fx the List)\n' "$listed" "$(echo "$api / $listed" | bc -l)"
fi
uptime
