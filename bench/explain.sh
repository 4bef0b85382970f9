#!/usr/bin/env bash
# Benchmark of `podgrace explain --output json` over 10,000 generated Deployments (~2 KB each),
# against a plain parse of the same files with the same YAML library (the parse_only example).
# Prints the median of 5 runs of each, the ratio, and explain's peak resident memory.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-10000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 bench/gen_deployments.py "$n" "$dir/manifests"
cargo build --release -q -p podgrace --bin podgrace
cargo build --release -q -p podgrace-core --example parse_only
echo "corpus: $n files, $(du -sb "$dir/manifests" | cut -f1) bytes"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
run() { # prints seconds of one run of "$@"
  local t0 t1
  t0=$(date +%s.%N); "$@" >/dev/null; t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}
parse=$(for _ in 1 2 3 4 5; do run target/release/examples/parse_only "$dir/manifests"; done | median)
explain=$(for _ in 1 2 3 4 5; do run target/release/podgrace explain --output json "$dir/manifests"; done | median)
rss=$(/usr/bin/time -f %M target/release/podgrace explain --output json "$dir/manifests" 2>&1 >/dev/null | tail -1)
printf 'parse only:           %.3f s\n' "$parse"
printf 'explain --output json: %.3f s (ratio %.2f)\n' "$explain" "$(echo "$explain / $parse" | bc -l)"
printf 'explain peak RSS:     %d MB\n' "$((rss / 1024))"
