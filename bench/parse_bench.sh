#!/usr/bin/env bash
# Shared by bench/explain.sh and bench/lint.sh: generates N Deployments (~2 KB each, one file
# each) with bench/gen_deployments.py, builds podgrace and the parse_only baseline in release
# mode, and times `podgrace VERB --output json DIR` against a plain parse of the same files with
# the same YAML library: the median of 5 runs of each, the ratio, and VERB's peak resident
# memory. Usage: bash bench/parse_bench.sh VERB (exit 1 from VERB, e.g. lint findings, is fine).
set -euo pipefail
cd "$(dirname "$0")/.."
verb=${1:?usage: bench/parse_bench.sh explain|lint}
n=${N:-10000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 bench/gen_deployments.py "$n" "$dir/manifests"
cargo build --release -q -p podgrace --bin podgrace
cargo build --release -q -p podgrace-core --example parse_only
echo "corpus: $n files, $(du -sb "$dir/manifests" | cut -f1) bytes"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
run() { # prints seconds of one run of "$@" (exit 0 or 1)
  local t0 t1 rc=0
  t0=$(date +%s.%N); "$@" >/dev/null || rc=$?; t1=$(date +%s.%N)
  if [ "$rc" -gt 1 ]; then echo "failed ($rc): $*" >&2; exit 1; fi
  echo "$t1 - $t0" | bc -l
}
parse=$(for _ in 1 2 3 4 5; do run target/release/examples/parse_only "$dir/manifests"; done | median)
timed=$(for _ in 1 2 3 4 5; do run target/release/podgrace "$verb" --output json "$dir/manifests"; done | median)
rss=$( (/usr/bin/time -f %M target/release/podgrace "$verb" --output json "$dir/manifests" 2>&1 >/dev/null || true) | tail -1)
printf 'parse only:                %.3f s\n' "$parse"
printf '%-26s %.3f s (ratio %.2f)\n' "$verb --output json:" "$timed" "$(echo "$timed / $parse" | bc -l)"
printf '%-26s %d MB\n' "$verb peak RSS:" "$((rss / 1024))"
