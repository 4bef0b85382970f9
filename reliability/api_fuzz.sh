#!/usr/bin/env bash
# OpenAPI-driven fuzz of `podgrace serve` (issue 18 item 5): schemathesis (PyPI) reads serve's own
# OpenAPI v3 documents (/openapi/v3, every group version) and sends generated requests to every
# operation, with the kubeconfig's token over TLS. The check (reliability/st_hooks.py, no_5xx):
# no answer is a 5xx, but kube-apiserver's own 504 for a too large resourceVersion. Generated
# commands become `true` (the process runtime runs them as root on this machine).
#
#   python3 -m venv /tmp/st && /tmp/st/bin/pip install schemathesis
#   ST=/tmp/st/bin/st bash reliability/api_fuzz.sh            # 100 examples per operation
#   N=1000 SEED=2 ST=/tmp/st/bin/st bash reliability/api_fuzz.sh
#
# Prints schemathesis' summary per group version and the answers by status code; exits 1 when a
# check failed (the failing requests, as curl commands, are in schemathesis' output).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/debug/podgrace}
N=${N:-100}
SEED=${SEED:-1}
ST=${ST:-st}
WORKERS=${WORKERS:-2}
d=$(mktemp -d /tmp/podgrace-apifuzz-XXXXXX)
nice -n 15 "$BIN" serve --bind 127.0.0.1:0 --kubeconfig-out "$d/kc" --pod-network 198.18.95.0/24 \
  >"$d/out" 2>"$d/err" &
pid=$!
stop() {
  # SIGINT: serve drains its pods as a node shutdown would, then exits.
  kill -INT "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
trap stop EXIT
for _ in $(seq 100); do
  grep -q '^kube-proxy:' "$d/out" 2>/dev/null && break
  sleep 0.2
done
server=$(grep -o 'https://[0-9.:]*' "$d/out" | head -1)
token=$(sed -n 's/^ *token: *//p' "$d/kc")
sed -n 's/^ *certificate-authority-data: *//p' "$d/kc" | base64 -d >"$d/ca.pem"
get() { curl -sf --cacert "$d/ca.pem" -H "Authorization: Bearer $token" "$server$1"; }
gvs=$(get /openapi/v3 | python3 -c 'import json,sys; print("\n".join(json.load(sys.stdin)["paths"]))')
export PYTHONPATH=reliability SCHEMATHESIS_HOOKS=st_hooks ST_TALLY="$d/tally.json"
failed=0
for gv in $gvs; do
  f="$d/$(echo "$gv" | tr / _).json"
  get "/openapi/v3/$gv" >"$f"
  echo "== $gv"
  nice -n 15 "$ST" run "$f" --url "$server" -H "Authorization: Bearer $token" \
    --tls-verify "$d/ca.pem" --checks no_5xx -n "$N" --seed "$SEED" --workers "$WORKERS" \
    --request-timeout 30 --no-color --continue-on-failure 2>&1 | tee "$d/st-$(echo "$gv" | tr / _).log" \
    | grep -E '^(Operations|Test cases|Test Phases|Seed|Failures|=+ [A-Z]|✅|❌|🚫|⏭)|[0-9]+ (passed|failed|errors?)|Server error|curl' || true
  grep -qE '[1-9][0-9]* failed|Server error|no_5xx' "$d/st-$(echo "$gv" | tr / _).log" && failed=1
done
echo "answers by status code: $(cat "$d/tally.json")"
echo "serve's log and schemathesis' output in $d"
exit "$failed"
