#!/usr/bin/python3
"""Chaos (issue 18 item 4): podgrace SIGKILLed at random moments, on the process runtime.

    python3 reliability/chaos.py run --seed 1 --count 200 [--parallel 4]
    python3 reliability/chaos.py serve --seed 1 --count 20

`run`: a `podgrace run` is SIGKILLed at a random moment of one of these (drawn from the seed):
  hook      an exec preStop hook is running (sleep 5, grace 10);
  deadline  the app ignores SIGTERM and podgrace waits for the grace deadline (grace 4);
  restart   the container exits every 0.3 s and is being restarted or backed off;
  sidecar   a native sidecar's preStop runs after the app has exited;
  probe     exec liveness and readiness probes run every second, a termination is on;
  second    a second, shorter delete came during a preStop.
Each container carries an environment marker (hooks and probes inherit it). Checked: no process
of the pod is alive 2 s after podgrace died (the guarantee: every container process gets
PR_SET_PDEATHSIG(SIGKILL) and is PID 1 of its own PID namespace). Reported: what the kill left
of the sandboxes (network namespaces, their veths, pod cgroups) and what the next podgrace
start cleaned of it.

`serve`: `podgrace serve` with a Deployment of three replicas (preStop sleep 2, grace 5) and a
`kubectl get pods -w` is SIGKILLed at a random moment (pods starting, running, or being
terminated by a scale-down); then started again on the same address with the same kubeconfig
path. Checked: the watching kubectl ends (with kubectl's own message, or none) instead of
hanging; no pod process outlives serve; the new serve answers a kubectl that reads the same
kubeconfig path (new CA and token), and the old kubeconfig's token is refused (401).

Needs root; run it under nice on a shared machine.
"""

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

SCENARIOS = ["hook", "deadline", "restart", "sidecar", "probe", "second"]


def pids_with(marker):
    out = []
    needle = marker.encode()
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            env = open(f"/proc/{p}/environ", "rb").read()
            stat = open(f"/proc/{p}/stat").read()
        except OSError:
            continue
        if needle in env.split(b"\0") and stat.rsplit(")", 1)[1].split()[0] != "Z":
            out.append(int(p))
    return out


def pod(scenario, marker, rng):
    """(manifest, run flags, seconds after the termination starts to kill in)."""
    k, v = marker.split("=")
    env = f'[{{"name": "{k}", "value": "{v}"}}]'
    app = '["sh", "-c", "trap \'exit 0\' TERM; while :; do sleep 0.05; done"]'
    ignore = '["sleep", "100000"]'
    head = f"apiVersion: v1\nkind: Pod\nmetadata: {{name: chaos}}\nspec:\n"
    if scenario == "hook":
        y = head + f"""  terminationGracePeriodSeconds: 10
  containers:
  - {{name: app, image: busybox, command: {app}, env: {env}, lifecycle: {{preStop: {{exec: {{command: [sleep, "5"]}}}}}}}}
"""
        return y, ["--delete-after", "300ms"], rng.uniform(0.05, 5.0)
    if scenario == "deadline":
        y = head + f"""  terminationGracePeriodSeconds: 4
  containers:
  - {{name: app, image: busybox, command: {ignore}, env: {env}}}
"""
        return y, ["--delete-after", "300ms"], rng.uniform(0.05, 4.2)
    if scenario == "restart":
        y = head + f"""  restartPolicy: Always
  containers:
  - {{name: app, image: busybox, command: ["sh", "-c", "sleep 0.3; exit 1"], env: {env}}}
"""
        return y, ["--delete-after", "60s"], None
    if scenario == "sidecar":
        y = head + f"""  terminationGracePeriodSeconds: 8
  initContainers:
  - {{name: proxy, image: busybox, restartPolicy: Always, command: {ignore}, env: {env}, lifecycle: {{preStop: {{exec: {{command: [sleep, "3"]}}}}}}}}
  containers:
  - {{name: app, image: busybox, command: {app}, env: {env}}}
"""
        return y, ["--delete-after", "300ms"], rng.uniform(0.05, 6.0)
    if scenario == "probe":
        y = head + f"""  terminationGracePeriodSeconds: 3
  containers:
  - name: app
    image: busybox
    command: {ignore}
    env: {env}
    livenessProbe: {{exec: {{command: [sh, -c, "sleep 0.5"]}}, periodSeconds: 1, timeoutSeconds: 2}}
    readinessProbe: {{exec: {{command: [sh, -c, "sleep 0.3"]}}, periodSeconds: 1}}
    lifecycle: {{preStop: {{exec: {{command: [sleep, "1"]}}}}}}
"""
        return y, ["--delete-after", "1500ms"], rng.uniform(0.05, 3.2)
    # second
    y = head + f"""  terminationGracePeriodSeconds: 6
  containers:
  - {{name: app, image: busybox, command: {ignore}, env: {env}, lifecycle: {{preStop: {{exec: {{command: [sleep, "4"]}}}}}}}}
"""
    return y, ["--delete-after", "300ms", "--second-delete", "1@1"], rng.uniform(0.05, 6.2)


def own_netns(pid):
    if not os.path.isdir("/run/netns"):
        return []
    return [n for n in os.listdir("/run/netns") if n.startswith("podgrace-") and n.endswith(f"-{pid}")]


def pod_cgroups_of(pid):
    out = set()
    try:
        for line in open(f"/proc/{pid}/cgroup"):
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            parts = path.split("/")
            k = [i for i, p in enumerate(parts) if p.startswith("pod") and len(p) > 30]
            if not k:
                continue
            podpath = "/".join(parts[: k[0] + 1])
            for ctrl in (ctrls.split(",") if ctrls else ["unified"]):
                base = "/sys/fs/cgroup/" + ctrl.replace("name=", "")
                out.add((base if os.path.isdir(base) else "/sys/fs/cgroup") + podpath)
    except OSError:
        pass
    return out


def one_run(args, i):
    rng = random.Random(args.seed * 7919 + i)
    scenario = SCENARIOS[i % len(SCENARIOS)] if args.scenario is None else args.scenario
    marker = f"PODGRACE_CHAOS={args.seed}-{i}"
    yaml, flags, after = pod(scenario, marker, rng)
    with tempfile.TemporaryDirectory(prefix="podgrace-chaos-") as d:
        path = os.path.join(d, "pod.yaml")
        open(path, "w").write(yaml)
        p = subprocess.Popen([args.bin, "run", path, "--pod-network", args.pod_network] + flags,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        started = threading.Event()

        def watch_stderr():
            for line in p.stderr:
                if "deleting the pod" in line or "Killing" in line:
                    started.set()
            started.set()

        threading.Thread(target=watch_stderr, daemon=True).start()
        if after is None:
            # restart: wait until it has restarted at least once, then a random moment.
            t0 = time.time()
            while time.time() - t0 < 10 and len(pids_with(marker)) == 0:
                time.sleep(0.02)
            time.sleep(rng.uniform(0.3, 4.0))
        else:
            if not started.wait(15):
                p.kill()
                return {"i": i, "scenario": scenario, "problem": "the termination never started"}
            time.sleep(after)
        before = pids_with(marker)
        cgroups = set()
        for pid in before:
            cgroups |= pod_cgroups_of(pid)
        alive = p.poll() is None
        p.send_signal(signal.SIGKILL)
        p.wait()
        t = time.time()
        left = pids_with(marker)
        while left and time.time() - t < 2:
            time.sleep(0.02)
            left = pids_with(marker)
        gone_after = time.time() - t
        return {"i": i, "scenario": scenario, "killed_at": after, "podgrace_alive": alive,
                "processes_before": len(before), "orphans": left, "gone_after": round(gone_after, 3),
                "netns_left": own_netns(p.pid), "cgroups_left": sorted(c for c in cgroups if os.path.isdir(c)),
                "problem": f"orphans {left}" if left else None}


def run_mode(args):
    t0 = time.time()
    results = []
    with ThreadPoolExecutor(args.parallel) as pool:
        for r in pool.map(lambda i: one_run(args, i), range(args.count)):
            results.append(r)
            if r.get("problem"):
                print(f"#{r['i']} ({r['scenario']}): {r['problem']}", flush=True)
    kills = [r for r in results if r.get("podgrace_alive")]
    orphans = sum(len(r.get("orphans") or []) for r in results)
    netns = sorted({n for r in results for n in r.get("netns_left", [])})
    cgroups = sorted({c for r in results for c in r.get("cgroups_left", [])})
    by = {}
    for r in kills:
        by[r["scenario"]] = by.get(r["scenario"], 0) + 1
    print(f"{len(kills)} SIGKILLs of a running podgrace ({', '.join(f'{k} {v}' for k, v in sorted(by.items()))}) "
          f"in {time.time() - t0:.0f} s; processes of the pods before the kill: {sum(r.get('processes_before', 0) for r in kills)}")
    print(f"processes alive 2 s after the kill: {orphans}; slowest to go: "
          f"{max((r.get('gone_after', 0) for r in kills), default=0):.3f} s")
    print(f"left by the kills: {len(netns)} network namespaces, {len(cgroups)} pod cgroup directories")
    # The next podgrace start removes the network namespaces of dead podgrace processes.
    with tempfile.TemporaryDirectory(prefix="podgrace-chaos-") as d:
        path = os.path.join(d, "pod.yaml")
        open(path, "w").write("apiVersion: v1\nkind: Pod\nmetadata: {name: after}\nspec:\n  terminationGracePeriodSeconds: 1\n"
                              "  containers:\n  - {name: app, image: busybox, command: [sleep, '1000']}\n")
        subprocess.run([args.bin, "run", path, "--delete-after", "200ms", "--pod-network", args.pod_network],
                       capture_output=True)
    netns_after = [n for n in netns if os.path.exists(f"/run/netns/{n}")]
    cgroups_after = [c for c in cgroups if os.path.isdir(c)]
    print(f"after the next podgrace run: {len(netns_after)} of those namespaces, {len(cgroups_after)} of those cgroups left")
    with open(args.out, "w") as f:
        json.dump({"results": results, "netns_after": netns_after, "cgroups_after": cgroups_after}, f)
    sys.exit(1 if orphans or len(kills) < args.count * 0.9 else 0)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_serve(args, port, kubeconfig, log):
    p = subprocess.Popen([args.bin, "serve", "--bind", f"127.0.0.1:{port}", "--kubeconfig-out", kubeconfig,
                          "--pod-network", args.pod_network],
                         stdout=subprocess.PIPE, stderr=log, text=True)
    for line in p.stdout:
        if line.startswith("kube-proxy: "):
            break
    threading.Thread(target=lambda: p.stdout.read(), daemon=True).start()
    return p


def kubectl(kubeconfig, *a, timeout=30):
    return subprocess.run(["kubectl", "--kubeconfig", kubeconfig, *a], capture_output=True, text=True, timeout=timeout)


DEPLOY = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: app
        image: busybox
        command: ["sleep", "100000"]
        env: [{name: PODGRACE_CHAOS, value: "MARK"}]
        lifecycle: {preStop: {exec: {command: [sleep, "2"]}}}
"""


def serve_mode(args):
    rng = random.Random(args.seed)
    d = tempfile.mkdtemp(prefix="podgrace-chaos-serve-")
    kc = os.path.join(d, "kubeconfig")
    log = open(os.path.join(d, "serve.log"), "w")
    port = free_port()
    problems = []
    watch_ends = []
    t0 = time.time()
    s = start_serve(args, port, kc, log)
    for i in range(args.count):
        mark = f"{args.seed}-serve-{i}"
        f = os.path.join(d, "deploy.yaml")
        open(f, "w").write(DEPLOY.replace("MARK", mark))
        r = kubectl(kc, "apply", "-f", f)
        if r.returncode != 0:
            problems.append(f"#{i}: apply: {r.stderr.strip()}")
        w = subprocess.Popen(["kubectl", "--kubeconfig", kc, "get", "pods", "-w"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        moment = rng.choice(["starting", "running", "terminating"])
        if moment == "starting":
            time.sleep(rng.uniform(0.05, 1.5))
        elif moment == "running":
            time.sleep(rng.uniform(2.0, 4.0))
        else:
            time.sleep(3)
            kubectl(kc, "scale", "deployment/web", "--replicas=0")
            time.sleep(rng.uniform(0.1, 2.5))
        before = len(pids_with(f"PODGRACE_CHAOS={mark}"))
        old = open(kc).read()
        s.kill()
        s.wait()
        t = time.time()
        try:
            w.wait(10)
            watch_ends.append(time.time() - t)
            err = w.stderr.read().strip()
        except subprocess.TimeoutExpired:
            w.kill()
            problems.append(f"#{i}: kubectl get -w still running 10 s after serve died")
            err = ""
        left = pids_with(f"PODGRACE_CHAOS={mark}")
        while left and time.time() - t < 2:
            time.sleep(0.05)
            left = pids_with(f"PODGRACE_CHAOS={mark}")
        if left:
            problems.append(f"#{i}: {len(left)} pod processes outlived serve")
        s = start_serve(args, port, kc, log)
        r = kubectl(kc, "get", "pods", "-o", "name", "--request-timeout=10s")
        if r.returncode != 0:
            problems.append(f"#{i}: the restarted serve refused the rewritten kubeconfig: {r.stderr.strip()}")
        oldkc = os.path.join(d, "old.kubeconfig")
        open(oldkc, "w").write(old)
        r = kubectl(oldkc, "get", "pods", "--request-timeout=10s")
        if r.returncode == 0:
            problems.append(f"#{i}: the old kubeconfig still opens the restarted serve")
        print(f"#{i}: killed while {moment} ({before} pod processes), kubectl -w ended after "
              f"{watch_ends[-1] if watch_ends else -1:.2f} s (exit {w.returncode}{': ' + err if err else ''}); "
              f"restarted, {'ok' if not problems else problems[-1]}", flush=True)
    s.send_signal(signal.SIGTERM)
    try:
        s.wait(30)
    except subprocess.TimeoutExpired:
        s.send_signal(signal.SIGTERM)
        s.wait()
    print(f"{args.count} SIGKILLs of serve in {time.time() - t0:.0f} s; watches ended after at most "
          f"{max(watch_ends, default=0):.2f} s; problems: {len(problems)}")
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["run", "serve"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--scenario", choices=SCENARIOS)
    ap.add_argument("--bin", default="target/debug/podgrace")
    ap.add_argument("--pod-network", default="198.18.94.0/24")
    ap.add_argument("--out", default="chaos-results.json")
    args = ap.parse_args()
    (run_mode if args.mode == "run" else serve_mode)(args)


if __name__ == "__main__":
    main()
