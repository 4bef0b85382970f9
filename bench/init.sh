#!/usr/bin/env bash
# podgrace init against Debian's tini, tini-static and dumb-init as PID 1 of the same child, in
# the same run (crates/podgrace-node/examples/bench_init.rs says what is measured and how):
# resident memory (VmRSS, RssAnon, RssFile, PSS) and signal forwarding latency p50/p99/max.
#
#   bash bench/init.sh            # ROUNDS=3 SIGNALS=2000; the static binary (cargo build-static)
#
# Needs root (a PID namespace per init) and the Debian packages tini and dumb-init.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PODGRACE:-target/x86_64-unknown-linux-gnu/release/podgrace}
[ -x "$bin" ] || cargo build-static
# The benchmark itself is built as build-static builds podgrace (same target and flags), so it
# reuses that build's dependencies; the probe (the `direct` row) is then a static binary too.
cargo build --release -q --locked -p podgrace-node --example bench_init --target x86_64-unknown-linux-gnu \
  --config "target.x86_64-unknown-linux-gnu.rustflags=['-C','target-feature=+crt-static','-C','relocation-model=static']"
target/x86_64-unknown-linux-gnu/release/examples/bench_init --rounds "${ROUNDS:-3}" --signals "${SIGNALS:-2000}" --podgrace "$bin"
