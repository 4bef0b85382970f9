#!/usr/bin/env bash
# Benchmark of `podgrace explain --output json` over 10,000 generated Deployments (~2 KB each)
# against a plain parse of the same files with the same YAML library (see bench/parse_bench.sh).
exec bash "$(dirname "$0")/parse_bench.sh" explain
