#!/usr/bin/env bash
# Coverage-guided fuzzing of podgrace's input paths (issue 18 item 1): every cargo-fuzz target of
# fuzz/ (manifest loading, explain, lint, and serve's request decoding: whole requests, patches,
# query parameters and selectors, protobuf bodies) for a bounded time each, under nice, seeded
# from the real manifests of ../shared/corpus (fuzz/seeds.py). Prints per target the executions,
# libFuzzer's coverage (cov: edges, ft: features), the corpus size, and any crash; exits 1 when a
# target crashed (its input is in fuzz/artifacts/TARGET/).
#
#   bash reliability/fuzz.sh                 # 300 s per target
#   SECS=60 bash reliability/fuzz.sh manifest api_request
#   JOBS=2 bash reliability/fuzz.sh          # two targets at a time (a machine of your own)
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`) and a C++ compiler (libFuzzer is built from
# source by libfuzzer-sys). The stable toolchain is enough: without a sanitizer (-s none: the
# code is safe Rust, and AddressSanitizer would halve the executions) cargo-fuzz passes only
# stable flags (the SanitizerCoverage passes, --cfg fuzzing); debug assertions and overflow
# checks are on (-a). For AddressSanitizer on stable, `SANITIZER=address` sets RUSTC_BOOTSTRAP=1,
# which lets rustc take cargo-fuzz's -Zsanitizer=address (and rebuilds everything once: cargo
# keys its builds on RUSTC_BOOTSTRAP).
# The corpus grows in fuzz/corpus/TARGET (not committed); a crash's input becomes a regression
# test in the normal test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-300}
JOBS=${JOBS:-1}
SHARED=${PODGRACE_SHARED:-../shared}
SANITIZER=${SANITIZER:-none}
if [ "$SANITIZER" != none ]; then
  export RUSTC_BOOTSTRAP=1
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(manifest explain lint api_request api_patch api_query api_protobuf)
fi

mkdir -p fuzz/corpus fuzz/logs
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
/usr/bin/python3 fuzz/seeds.py "$SHARED/corpus" "$seeds"

(cd fuzz && nice -n 15 cargo fuzz build -s "$SANITIZER" -a >/dev/null)

dict_of() {
  case "$1" in
    api_*) echo fuzz/dict/api.dict ;;
    *) echo fuzz/dict/yaml.dict ;;
  esac
}

run_one() {
  local t=$1
  mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
  # -rss_limit_mb: a 64 KiB input must not need more (no unbounded work from a small input);
  # -timeout: one input taking 10 s is a hang.
  (cd fuzz && nice -n 15 cargo fuzz run -s "$SANITIZER" -a "$t" "corpus/$t" "$seeds/$t" -- \
    -max_total_time="$SECS" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
    -dict="../$(dict_of "$t")" -print_final_stats=1) \
    >"fuzz/logs/$t.log" 2>&1 || true
}

running=0
for t in "${targets[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$JOBS" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

crashed=0
printf '%-14s %12s %10s %8s %8s %8s  %s\n' target executions exec/s cov ft corpus result
for t in "${targets[@]}"; do
  log="fuzz/logs/$t.log"
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  rate=$(grep -o 'stat::average_exec_per_sec: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  last=$(grep -E '^#[0-9]+' "$log" | grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*' | tail -1)
  cov=$(echo "$last" | awk '{print $2}')
  ft=$(echo "$last" | awk '{print $4}')
  corp=$(echo "$last" | awk '{print $6}')
  result=ok
  if grep -qE 'ERROR: libFuzzer|panicked at|deadly signal|==ERROR' "$log"; then
    result="CRASH: $(grep -oE 'Test unit written to [^ ]*' "$log" | tail -1)"
    crashed=1
  fi
  printf '%-14s %12s %10s %8s %8s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$result"
done
exit "$crashed"
