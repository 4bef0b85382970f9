#!/usr/bin/env bash
# The controllers' own latency in a rollout (issue 13): `podgrace serve` (release build, process
# runtime) runs a Deployment of 100 replicas (maxSurge 25%, maxUnavailable 25%, no readiness
# probe: a pod is Ready once its container runs); `kubectl rollout restart` rolls it. A watch
# (the Python client, Debian's python3-kubernetes for /usr/bin/python3) stamps every pod and
# ReplicaSet event as it arrives. Printed, each with n, p50, p99 and max in milliseconds:
#   ready->rs-status  a new pod's Ready (the kubelet's status write) to the first ReplicaSet
#                     status write after it that counts it (the ReplicaSet controller);
#   rs-status->scale  for each scale of a ReplicaSet (the Deployment controller's step), from the
#                     last ReplicaSet status write before it (more available, or pods gone) to
#                     the scale;
#   ready->scale      the same steps where that status write counted a new Ready: from that
#                     pod's Ready to the scale (both controllers).
# Both ends are seen through the same watch, so its delivery delay cancels out except for
# ordering. Run as root (each pod has its own network namespace); say the load average beside
# the numbers.
#   BIN=path/to/podgrace bash bench/rollout.sh     # another build (default: target/release)
#   REPLICAS=100 bash bench/rollout.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-}
if [ -z "$BIN" ]; then
  cargo build --release -p podgrace >/dev/null
  BIN=target/release/podgrace
fi
REPLICAS=${REPLICAS:-100}
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
"$BIN" serve --bind 127.0.0.1:0 --kubeconfig-out "$dir/kubeconfig" >"$dir/serve.out" 2>"$dir/serve.err" &
serve_pid=$!
for _ in $(seq 1 100); do grep -q '^kube-proxy: ' "$dir/serve.out" 2>/dev/null && break; sleep 0.1; done
export KUBECONFIG="$dir/kubeconfig"
cat >"$dir/web.yaml" <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: $REPLICAS
  selector: {matchLabels: {app: web}}
  strategy: {rollingUpdate: {maxSurge: 25%, maxUnavailable: 25%}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 2
      containers: [{name: app, image: 'busybox:1.36', command: [sh, -c, 'trap "exit 0" TERM; while true; do sleep 1; done']}]
EOF
kubectl apply -f "$dir/web.yaml" >/dev/null
kubectl rollout status deployment/web --timeout=600s >/dev/null
/usr/bin/python3 - "$dir/events.jsonl" <<'PY' &
import json, sys, time, threading
from kubernetes import client, config, watch
config.load_kube_config()
out = open(sys.argv[1], "w", buffering=1)
def follow(kind, lister):
    w = watch.Watch()
    for ev in w.stream(lister, namespace="default", timeout_seconds=900):
        t = time.monotonic()
        o = ev["object"]
        rec = {"t": t, "kind": kind, "type": ev["type"], "name": o.metadata.name}
        if kind == "pod":
            rec["owner"] = (o.metadata.owner_references or [None])[0].name if o.metadata.owner_references else None
            rec["ready"] = any(c.type == "Ready" and c.status == "True" for c in (o.status.conditions or []))
            rec["deleting"] = o.metadata.deletion_timestamp is not None
        else:
            rec["replicas"] = o.spec.replicas
            rec["available"] = o.status.available_replicas or 0
            rec["readyReplicas"] = o.status.ready_replicas or 0
            rec["statusReplicas"] = o.status.replicas or 0
        out.write(json.dumps(rec) + "\n")
v1, apps = client.CoreV1Api(), client.AppsV1Api()
for k, f in (("pod", v1.list_namespaced_pod), ("rs", apps.list_namespaced_replica_set)):
    threading.Thread(target=follow, args=(k, f), daemon=True).start()
time.sleep(900)
PY
watch_pid=$!
sleep 3
start=$(date +%s.%N)
kubectl rollout restart deployment/web >/dev/null
kubectl rollout status deployment/web --timeout=600s >/dev/null
end=$(date +%s.%N)
sleep 1
kill "$watch_pid" 2>/dev/null || true
wait "$watch_pid" 2>/dev/null || true
echo "rollout of $REPLICAS replicas: $(python3 -c "print(f'{$end - $start:.1f}')") s; load average $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$dir/events.jsonl" <<'PY'
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1])]
evs.sort(key=lambda e: e["t"])
# Only what happened after the restart: the first ReplicaSet that is not the original one.
first_rs = next(e["name"] for e in evs if e["kind"] == "rs")
ready_seen, last_rs = {}, {}
readies, status_writes, scales = [], [], []
for e in evs:
    if e["kind"] == "pod":
        key = e["name"]
        if e["ready"] and not e["deleting"] and not ready_seen.get(key) and e["owner"] != first_rs:
            readies.append(e)
        ready_seen[key] = e["ready"]
    else:
        prev = last_rs.get(e["name"])
        if prev is not None:
            if e["replicas"] != prev["replicas"]:
                scales.append(e)
            elif any(e[k] != prev[k] for k in ("readyReplicas", "available", "statusReplicas")):
                e["up"] = e["available"] > prev["available"]
                status_writes.append(e)
        last_rs[e["name"]] = e
def stats(name, xs):
    xs = sorted(xs)
    if not xs:
        print(f"{name:18} n=0"); return
    q = lambda p: xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]
    print(f"{name:18} n={len(xs):4}  p50 {q(0.5)*1000:7.2f} ms  p99 {q(0.99)*1000:7.2f} ms  max {xs[-1]*1000:7.2f} ms")
a = []
for r in readies:
    nxt = next((s for s in status_writes if s["t"] >= r["t"] and s["name"] == r["owner"]), None)
    if nxt: a.append(nxt["t"] - r["t"])
b, c = [], []
for s in scales:
    st = [w for w in status_writes if w["t"] <= s["t"]]
    if not st:
        continue
    c.append(s["t"] - st[-1]["t"])
    if st[-1]["up"]:
        before = [r for r in readies if r["t"] <= st[-1]["t"] and r["owner"] == st[-1]["name"]]
        if before: b.append(s["t"] - before[-1]["t"])
stats("ready->rs-status", a)
stats("rs-status->scale", c)
stats("ready->scale", b)
PY
