#!/usr/bin/env bash
# Benchmark of `podgrace lint --output json` over the same 10,000 generated Deployments as
# bench/explain.sh, against the same plain parse (see bench/parse_bench.sh).
exec bash "$(dirname "$0")/parse_bench.sh" lint
