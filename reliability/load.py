#!/usr/bin/python3
"""Load on `podgrace serve` (issue 18 item 6): 1,000 pods, 100 concurrent `kubectl get pods -w`
clients, and continuous create/delete churn for 10 minutes.

    python3 reliability/load.py [--bin target/release/podgrace] [--pods 1000] [--watchers 100]
                                [--minutes 10] [--churn 4]

serve runs the pods for real on the process runtime (`hostNetwork: true`: a /24 pod network has
253 addresses; each pod is a `sleep` in its own PID namespace and cgroups). Once the 1,000 pods
are created, 100 kubectl watch clients start (`kubectl get pods -w --output-watch-events`, each
printing type, name and resourceVersion of every event), then for --minutes the churn deletes
the oldest churn pod (grace 1 s: the kubelet stops it, writes its status and deletes it) and
creates a new one, --churn of each per second, over one keep-alive HTTPS connection whose
requests are timed, along with gets and lists (limit=500) on it. serve's resident memory is
sampled every 10 s. At the end every watch client's state (its initial list plus its events)
must equal the API's final list, object by object and resourceVersion by resourceVersion (no
event lost, none made up), and each client's events must come in resourceVersion order without
a repeat. Prints the API latencies (p50, p99, max), the memory samples, and what was lost.
Needs root, kubectl, and a release build for latencies worth comparing with issue 12's targets
(p99 <= 5 ms at 1,000 pods).
"""

import argparse
import base64
import http.client
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time


def rss_mb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0


class Client:
    """One keep-alive HTTPS connection to serve with the kubeconfig's CA and token."""

    def __init__(self, kubeconfig):
        text = open(kubeconfig).read()
        server = re.search(r"server: https://(\S+)", text).group(1)
        self.host, port = server.rsplit(":", 1)
        self.port = int(port)
        self.token = re.search(r"token: (\S+)", text).group(1)
        ca = base64.b64decode(re.search(r"certificate-authority-data: (\S+)", text).group(1)).decode()
        self.ctx = ssl.create_default_context(cadata=ca)
        self.conn = None
        self.times = {}

    def call(self, what, method, path, body=None):
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=30)
            headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
            data = json.dumps(body).encode() if body is not None else None
            try:
                t = time.perf_counter()
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                payload = r.read()
                dt = (time.perf_counter() - t) * 1000
                self.times.setdefault(what, []).append(dt)
                return r.status, payload
            except (http.client.HTTPException, OSError):
                self.conn = None
                if attempt:
                    raise
        return 0, b""


def pod(name):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "load"}},
            "spec": {"hostNetwork": True, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "100000"]}]}}


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))] if v else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release/podgrace")
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--watchers", type=int, default=100)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--churn", type=float, default=4, help="creates and deletes per second")
    ap.add_argument("--kubectl", default="kubectl")
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="podgrace-load-")
    kc = os.path.join(d, "kubeconfig")
    serve = subprocess.Popen([args.bin, "serve", "--bind", "127.0.0.1:0", "--kubeconfig-out", kc],
                             stdout=subprocess.PIPE, stderr=open(os.path.join(d, "serve.err"), "w"), text=True)
    for line in serve.stdout:
        if line.startswith("kube-proxy: "):
            break
    threading.Thread(target=serve.stdout.read, daemon=True).start()
    watchers = []
    try:
        c = Client(kc)
        base = "/api/v1/namespaces/default/pods"
        t0 = time.time()
        rss0 = rss_mb(serve.pid)
        for i in range(args.pods):
            code, body = c.call("create", "POST", base, pod(f"p{i:05d}"))
            assert code == 201, (code, body[:300])
        created = time.time() - t0
        # Every pod Running before the watchers and the churn start.
        while True:
            code, body = c.call("list-all", "GET", base + "?fieldSelector=status.phase%3DRunning")
            running = len(json.loads(body)["items"])
            if running >= args.pods or time.time() - t0 > 600:
                break
            time.sleep(2)
        print(f"{args.pods} pods created in {created:.1f} s, {running} Running after {time.time() - t0:.1f} s; "
              f"serve {rss0:.0f} MB before, {rss_mb(serve.pid):.0f} MB with them", flush=True)
        fmt = '{.type} {.object.metadata.name} {.object.metadata.resourceVersion}{"\\n"}'
        for w in range(args.watchers):
            out = open(os.path.join(d, f"watch-{w}.out"), "w")
            p = subprocess.Popen([args.kubectl, "get", "pods", "-w", "--output-watch-events", "-o", f"jsonpath={fmt}"],
                                 env=dict(os.environ, KUBECONFIG=kc), stdout=out,
                                 stderr=open(os.path.join(d, f"watch-{w}.err"), "w"))
            watchers.append((p, out))
        time.sleep(5)
        c.times = {}
        samples = []
        churn = [f"p{i:05d}" for i in range(args.pods)]
        n = args.pods
        t1 = time.time()
        end = t1 + args.minutes * 60
        next_sample = t1
        step = 1.0 / args.churn
        k = 0
        while time.time() < end:
            if time.time() >= next_sample:
                samples.append((round(time.time() - t1), round(rss_mb(serve.pid), 1)))
                next_sample += 10
            victim = churn.pop(0)
            code, body = c.call("delete", "DELETE", f"{base}/{victim}", {"gracePeriodSeconds": 1})
            assert code in (200, 202), (code, body[:300])
            name = f"p{n:05d}"
            n += 1
            code, body = c.call("create", "POST", base, pod(name))
            assert code == 201, (code, body[:300])
            churn.append(name)
            code, _ = c.call("get", "GET", f"{base}/{churn[len(churn) // 2]}")
            assert code == 200
            if k % 10 == 0:
                code, _ = c.call("list limit=500", "GET", base + "?limit=500")
                assert code == 200
            k += 1
            time.sleep(max(0.0, t1 + k * step - time.time()))
        # Let the last deletes finish (grace 1 s, the kubelet's final delete), then compare.
        time.sleep(8)
        samples.append((round(time.time() - t1), round(rss_mb(serve.pid), 1)))
        code, body = c.call("list-all", "GET", base)
        final = {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in json.loads(body)["items"]}
        list_rv = int(json.loads(body)["metadata"]["resourceVersion"])
        time.sleep(3)
        lost, bad_order, events = 0, 0, 0
        for w, (p, out) in enumerate(watchers):
            p.send_signal(signal.SIGTERM)
            p.wait()
            out.close()
            state, last = {}, 0
            for line in open(out.name):
                parts = line.split()
                if len(parts) != 3:
                    continue
                ty, name, rv = parts[0], parts[1], int(parts[2])
                events += 1
                if ty == "DELETED":
                    state.pop(name, None)
                else:
                    state[name] = str(rv)
                if rv <= last and ty != "ADDED":
                    bad_order += 1
                if ty != "ADDED" or rv > last:
                    last = max(last, rv)
            # The client's state up to the final list's version.
            missing = {k: v for k, v in final.items() if state.get(k) != v}
            extra = {k for k in state if k not in final}
            if missing or extra:
                lost += 1
                print(f"watch {w}: {len(missing)} objects differ, {len(extra)} objects it still has "
                      f"(e.g. {list(missing.items())[:3]} {list(extra)[:3]})", flush=True)
        watchers = []
        print(f"churn: {k} deletes and {k} creates in {time.time() - t1 - 11:.0f} s; final list at "
              f"resourceVersion {list_rv} with {len(final)} pods")
        print(f"{args.watchers} kubectl watches: {events} events printed; clients whose state differs from "
              f"the API's: {lost}; events out of order: {bad_order}")
        for what, v in sorted(c.times.items()):
            print(f"  {what:<16} n={len(v):<6} p50 {pct(v, 0.5):7.2f} ms  p99 {pct(v, 0.99):7.2f} ms  max {max(v):7.2f} ms")
        print("serve's resident memory (s, MB): " + ", ".join(f"{t}:{m}" for t, m in samples))
        with open(os.path.join(d, "result.json"), "w") as f:
            json.dump({"times": c.times, "samples": samples, "lost": lost, "bad_order": bad_order}, f)
        print(f"files in {d}")
    finally:
        for p, _ in watchers:
            p.kill()
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(120)
        except subprocess.TimeoutExpired:
            serve.send_signal(signal.SIGTERM)
            serve.wait()


if __name__ == "__main__":
    main()
