#!/usr/bin/env bash
# Benchmark of `podgrace lint --output json` over 10,000 generated Deployments (~2 KB each, the
# generator of bench/explain.sh), against a plain parse of the same files with the same YAML
# library (the parse_only example). Prints the median of 5 runs of each, the ratio, lint's peak
# resident memory and its finding counts. Exit 1 from lint (findings) is expected; 2 is not.
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
run() { # prints seconds of one run of "$@" (exit 0 or 1)
  local t0 t1 rc=0
  t0=$(date +%s.%N); "$@" >/dev/null || rc=$?; t1=$(date +%s.%N)
  if [ "$rc" -gt 1 ]; then echo "failed ($rc): $*" >&2; exit 1; fi
  echo "$t1 - $t0" | bc -l
}
parse=$(for _ in 1 2 3 4 5; do run target/release/examples/parse_only "$dir/manifests"; done | median)
lint=$(for _ in 1 2 3 4 5; do run target/release/podgrace lint --output json "$dir/manifests"; done | median)
rss=$( (/usr/bin/time -f %M target/release/podgrace lint --output json "$dir/manifests" 2>&1 >/dev/null || true) | tail -1)
summary=$(target/release/podgrace lint --output json "$dir/manifests" | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"])' || true)
printf 'parse only:          %.3f s\n' "$parse"
printf 'lint --output json:  %.3f s (ratio %.2f)\n' "$lint" "$(echo "$lint / $parse" | bc -l)"
printf 'lint peak RSS:       %d MB\n' "$((rss / 1024))"
printf 'findings:            %s\n' "$summary"
