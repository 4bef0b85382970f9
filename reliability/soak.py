#!/usr/bin/python3
"""Soak of the process runtime (issue 18 item 3): randomized terminations, each checked
against the timeline `podgrace explain` computes for the same manifest and the same delete.

    python3 reliability/soak.py --seed 1 --count 10000 [--parallel 6] [--bin target/debug/podgrace]
    python3 reliability/soak.py --seed 1 --only 4711        # one termination again, verbose

Each termination is drawn from (seed, index) alone, so any one can be replayed. A pod gets one
or two main containers and maybe a native sidecar, each with a random stop behaviour (ignores
its stop signal and is SIGKILLed at the deadline; exits at once; exits after a drain that may
outlast the grace), a random stop signal (lifecycle.stopSignal), a random preStop (none, the
sleep action, an exec `sleep N`, one that fails, an httpGet nobody answers, one longer than the
grace), maybe probes that pass; a random terminationGracePeriodSeconds (0 to 6 s). It is
terminated by `podgrace run` after a random delay with a random trigger: a delete (with
--grace-period, --now or --force at random), a soft or hard eviction, a liveness probe that
fails; sometimes a second delete during the termination. Checked, with the tolerance of the
run tests (+-150 ms, --tolerance):
  * every container's preStop start and end, stop signal, SIGKILL and exit against explain's
    times for that trigger (each within [min - tol, max + tol]);
  * no process of the pod left once podgrace has exited (by an environment marker in every
    container, which hooks and probes inherit);
  * nothing of the pod's sandbox left: its network namespace (/run/netns/podgrace-N-PID), the
    host end of its veth pair (pghN, by interface index) and its cgroups (read from its
    processes while it ran).
A container the termination came before (--delete-after counts from the first container's
start, so a main container behind a sidecar may not have started on a loaded machine) is not
compared: the kubelet never starts it. A termination whose only problem is an instant outside
the tolerance is run again alone at the end (--recheck): the campaign runs --parallel of them
on a shared machine, and what is late again alone is the finding.
Prints a summary (terminations, mismatches, orphans, leaks, the deviations' p50/p99/max) and
writes every result as a JSON line to --out. Needs root (namespaces, cgroups); run it under
nice on a shared machine: `nice -n 15 python3 reliability/soak.py ...`.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

TOL = 0.15

BEHAVIOURS = ["ignore", "exit", "drain"]
SIGNALS = [None, None, "SIGTERM", "SIGINT", "SIGQUIT", "SIGUSR1"]


def shell_for(behaviour, signal, drain):
    """The container's command: a shell loop that acts on `signal` (SIGTERM when None)."""
    sig = (signal or "SIGTERM")[3:]
    if behaviour == "ignore":
        # PID 1 of its PID namespace without a handler: every stop signal is ignored.
        return ["sleep", "100000"]
    action = "exit 0" if behaviour == "exit" else f"sleep {drain}; exit 0"
    return ["sh", "-c", f"trap '{action}' {sig}; while :; do sleep 0.05; done"]


def yaml_list(items):
    return "[" + ", ".join(json.dumps(x) for x in items) + "]"


def draw(seed, index):
    """The pod, the run's flags and explain's flags of termination `index`."""
    rng = random.Random(seed * 1_000_003 + index)
    marker = f"PODGRACE_SOAK={seed}-{index}"
    tgps = rng.choice([0, 1, 1, 2, 2, 3, 3, 4, 5, 6])
    containers = []
    n_main = rng.choice([1, 1, 2])
    sidecar = rng.random() < 0.3
    probe_kill = rng.random() < 0.08
    names = [f"c{k}" for k in range(n_main)] + (["side"] if sidecar else [])
    for name in names:
        behaviour = rng.choice(BEHAVIOURS)
        signal = rng.choice(SIGNALS)
        drain = round(rng.uniform(0.2, 4.0), 1)
        c = {"name": name, "image": "busybox", "command": shell_for(behaviour, signal, drain),
             "env": [{"name": marker.split("=")[0], "value": marker.split("=")[1]}]}
        lifecycle = {}
        if signal:
            lifecycle["stopSignal"] = signal
        hook = rng.choice(["none", "none", "sleep", "exec", "fail", "http", "long"])
        if hook == "sleep" and tgps == 0:
            # The sleep action must not outlast the pod's terminationGracePeriodSeconds
            # (validation refuses the pod): an exec hook instead.
            hook = "exec"
        if hook == "sleep":
            lifecycle["preStop"] = {"sleep": {"seconds": rng.randint(1, min(3, tgps))}}
        elif hook == "exec":
            lifecycle["preStop"] = {"exec": {"command": ["sleep", str(rng.choice([0.5, 1, 2]))]}}
        elif hook == "fail":
            lifecycle["preStop"] = {"exec": {"command": ["sh", "-c", "exit 3"]}}
        elif hook == "http":
            lifecycle["preStop"] = {"httpGet": {"path": "/drain", "port": 9}}
        elif hook == "long":
            lifecycle["preStop"] = {"exec": {"command": ["sleep", "300"]}}
        if lifecycle:
            c["lifecycle"] = lifecycle
        if rng.random() < 0.3:
            c["readinessProbe"] = {"exec": {"command": ["true"]}, "periodSeconds": 1}
        if rng.random() < 0.2:
            c["livenessProbe"] = {"exec": {"command": ["true"]}, "periodSeconds": 1}
        containers.append(c)
    if probe_kill:
        # The first main container fails its liveness probe: the kubelet kills it with the pod's
        # grace (or the probe's own terminationGracePeriodSeconds).
        containers[0]["livenessProbe"] = {"exec": {"command": ["false"]}, "periodSeconds": 1,
                                          "failureThreshold": 1, "initialDelaySeconds": rng.randint(0, 1)}
        if rng.random() < 0.5:
            containers[0]["livenessProbe"]["terminationGracePeriodSeconds"] = rng.randint(1, 3)
    mains = [c for c in containers if c["name"] != "side"]
    sides = [c for c in containers if c["name"] == "side"]
    for c in sides:
        c["restartPolicy"] = "Always"
    lines = ["apiVersion: v1", "kind: Pod", f"metadata: {{name: soak-{index}}}", "spec:",
             "  os: {name: linux}", f"  terminationGracePeriodSeconds: {tgps}"]

    def block(key, cs):
        lines.append(f"  {key}:")
        for c in cs:
            lines.append("  - " + json.dumps(c))

    if sides:
        block("initContainers", sides)
    block("containers", mains)
    yaml = "\n".join(lines) + "\n"

    delay = round(rng.uniform(0.3, 1.2), 2)
    run = ["--delete-after", f"{delay}s"]
    explain = []
    if probe_kill:
        run = ["--delete-after", "8s"]
        explain = ["--trigger", f"liveness:{mains[0]['name']}"]
        return yaml, marker, run, explain, "liveness"
    trigger = rng.choice(["delete"] * 6 + ["grace", "now", "force", "evict-soft", "evict-hard"])
    if trigger == "grace":
        g = rng.randint(0, 5)
        run += ["--grace-period", str(g)]
        explain += ["--grace-period", str(g)]
    elif trigger == "now":
        run += ["--now"]
        explain += ["--now"]
    elif trigger == "force":
        run += ["--force", "--grace-period", "0"]
        explain += ["--force", "--grace-period", "0"]
    elif trigger.startswith("evict"):
        run += ["--trigger", trigger]
        explain += ["--trigger", trigger]
        if trigger == "evict-soft":
            m = rng.randint(0, 4)
            run += ["--eviction-max-pod-grace-period", str(m)]
            explain += ["--eviction-max-pod-grace-period", str(m)]
    # A second delete follows a first delete (run refuses one after an eviction).
    if trigger in ("delete", "grace", "now") and rng.random() < 0.3:
        g = rng.choice(["0", "1", "2", "3", "force", "now"])
        second = f"{g}@{round(rng.uniform(0.1, max(0.2, tgps)), 1)}"
        run += ["--second-delete", second]
        explain += ["--second-delete", second]
    return yaml, marker, run, explain, trigger


def pids_with(marker):
    out = []
    needle = marker.encode()
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            env = open(f"/proc/{p}/environ", "rb").read()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            out.append(int(p))
    return out


def cgroups_of(pid):
    """The pod-level cgroup directories of a container process (v1 and v2 lines)."""
    out = set()
    try:
        for line in open(f"/proc/{pid}/cgroup"):
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            if "/pod" not in path:
                continue
            # /podgrace/kubepods/burstable/pod<UID>[/<container>] -> the pod's own directory.
            parts = path.split("/")
            k = next(i for i, p in enumerate(parts) if p.startswith("pod") and len(p) > 30)
            pod = "/".join(parts[: k + 1])
            for ctrl in (ctrls.split(",") if ctrls else ["unified"]):
                name = ctrl.replace("name=", "")
                base = "/sys/fs/cgroup/" + name if os.path.isdir("/sys/fs/cgroup/" + name) else "/sys/fs/cgroup"
                out.add(base + pod)
    except (OSError, StopIteration, ValueError):
        pass
    return out


def ifindex(link):
    try:
        return int(open(f"/sys/class/net/{link}/ifindex").read())
    except (OSError, ValueError):
        return None


def veths_of(pid):
    """{host veth name: interface index} of the sandboxes of podgrace process `pid`
    (network namespace podgrace-N-PID, host end pghN)."""
    out = {}
    if not os.path.isdir("/run/netns"):
        return out
    for n in os.listdir("/run/netns"):
        if n.startswith("podgrace-") and n.endswith(f"-{pid}"):
            link = "pgh" + n.split("-")[1]
            ix = ifindex(link)
            if ix is not None:
                out[link] = ix
    return out


def within(got, rng_, what, problems):
    """Checks `got` against explain's {min, max} (or a number) with the tolerance; returns the
    distance outside [min, max] (0 inside)."""
    if got is None or rng_ is None:
        return None
    lo, hi = (rng_["min"], rng_["max"]) if isinstance(rng_, dict) else (rng_, rng_)
    off = max(0.0, lo - got, got - hi)
    if off > TOL:
        problems.append(f"{what}: {got:.3f} s, explain says [{lo}, {hi}]")
    return off


def compare(report, timeline, trigger, problems):
    devs = []
    want = {c["name"]: c for c in timeline["containers"]}
    # A container the delete came before (--delete-after counts from the first container's
    # start: on a loaded machine a main container behind a sidecar may not have started yet)
    # is never started, as the kubelet does; explain's timeline assumes every one running.
    started = {e.get("container") for e in report.get("events", []) if e.get("reason") == "Started"}
    for c in report["containers"]:
        ts = c.get("terminations") or []
        if not ts and c["name"] not in started:
            continue
        if trigger == "liveness":
            ts = [t for t in ts if t["reason"] == "LivenessProbe"][:1]
            if c["name"] not in want:
                continue
            if not ts:
                problems.append(f"{c['name']}: no liveness kill")
                continue
        if not ts:
            if c["name"] in want:
                problems.append(f"{c['name']}: never terminated")
            continue
        t, w = ts[0], want.get(c["name"])
        if w is None:
            problems.append(f"{c['name']}: not in explain's timeline")
            continue
        name = c["name"]
        if w.get("preStop") and t.get("preStop"):
            devs.append(within(t["preStop"]["afterSeconds"], w["preStop"]["startSeconds"], f"{name} preStop start", problems))
            if t["preStop"]["outcome"] in ("completed", "cut"):
                devs.append(within(t["preStop"]["endAfterSeconds"], w["preStop"]["endSeconds"], f"{name} preStop end", problems))
        elif w.get("preStop") and not t.get("preStop") and t.get("stopSignalAfterSeconds") is not None:
            problems.append(f"{name}: explain runs a preStop, the run did not")
        if t.get("stopSignalAfterSeconds") is not None:
            devs.append(within(t["stopSignalAfterSeconds"], w["stopSignalSeconds"], f"{name} stop signal", problems))
        if t.get("killAfterSeconds") is not None:
            devs.append(within(t["killAfterSeconds"], w["killSeconds"], f"{name} SIGKILL", problems))
        if t.get("exitAfterSeconds") is not None:
            hi = w["killSeconds"]["max"] if isinstance(w["killSeconds"], dict) else w["killSeconds"]
            if t["exitAfterSeconds"] > hi + TOL:
                problems.append(f"{name}: exited at {t['exitAfterSeconds']:.3f} s, after explain's last SIGKILL {hi}")
    return [d for d in devs if d is not None]


def one(args, index, verbose=False):
    yaml, marker, run_flags, explain_flags, trigger = draw(args.seed, index)
    problems = []
    with tempfile.TemporaryDirectory(prefix="podgrace-soak-") as d:
        path = os.path.join(d, "pod.yaml")
        with open(path, "w") as f:
            f.write(yaml)
        ex = subprocess.run([args.bin, "explain", path, "-o", "json"] + explain_flags,
                            capture_output=True, text=True)
        if ex.returncode != 0:
            return {"index": index, "trigger": trigger, "problems": [f"explain failed: {ex.stderr.strip()}"], "yaml": yaml}
        timeline = json.loads(ex.stdout)[0]
        cmd = [args.bin, "run", path, "-o", "json", "--pod-network", args.pod_network] + run_flags
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # While it runs: the pod's cgroups, read from its processes.
        cgroups = set()
        out = {}

        def reader():
            out["stdout"], out["stderr"] = p.communicate()

        th = threading.Thread(target=reader)
        th.start()
        veths = {}
        while th.is_alive():
            for pid in pids_with(marker):
                cgroups |= cgroups_of(pid)
            veths.update(veths_of(p.pid))
            th.join(0.2)
        stdout, stderr = out.get("stdout", ""), out.get("stderr", "")
        netns = [n for n in os.listdir("/run/netns") if n.endswith(f"-{p.pid}")] if os.path.isdir("/run/netns") else []
        # The host end of the pod's veth pair, by its interface index (another podgrace may
        # take the same name at once).
        leaked_veths = sorted(n for n, ix in veths.items() if ifindex(n) == ix)
        # Orphans: any process of the pod alive once podgrace has gone (2 s for the kernel's
        # teardown of the PID namespace).
        deadline = time.time() + 2
        left = pids_with(marker)
        while left and time.time() < deadline:
            time.sleep(0.05)
            left = pids_with(marker)
        leaked_cgroups = sorted(c for c in cgroups if os.path.isdir(c))
        if p.returncode != 0:
            problems.append(f"run exited {p.returncode}: {stderr.strip()[-400:]}")
        if left:
            problems.append(f"orphans: {left}")
        if netns:
            problems.append(f"leaked netns: {netns}")
        if leaked_cgroups:
            problems.append(f"leaked cgroups: {leaked_cgroups}")
        if leaked_veths:
            problems.append(f"leaked veths: {leaked_veths}")
        devs = []
        if p.returncode == 0:
            report = json.loads(stdout)
            devs = compare(report, timeline, trigger, problems)
            if verbose:
                print(yaml, " ".join(run_flags))
                print(json.dumps(timeline["containers"], indent=1))
                print(json.dumps([c["terminations"] for c in report["containers"]], indent=1))
    return {"index": index, "trigger": trigger, "problems": problems, "devs": devs,
            "orphans": len(left), "netns": len(netns), "cgroups": len(leaked_cgroups),
            "veths": len(leaked_veths), "checked_veths": len(veths),
            "yaml": yaml if problems else None, "flags": run_flags if problems else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--start", type=int, default=0, help="first index (to continue a campaign)")
    ap.add_argument("--only", type=int, help="run this one index, verbose")
    ap.add_argument("--parallel", type=int, default=6)
    ap.add_argument("--bin", default="target/debug/podgrace")
    ap.add_argument("--pod-network", default="198.18.93.0/24")
    ap.add_argument("--tolerance", type=float, default=0.15)
    ap.add_argument("--out", default="soak-results.jsonl")
    ap.add_argument("--recheck", type=int, default=100,
                    help="run at most this many late terminations again, alone")
    args = ap.parse_args()
    global TOL
    TOL = args.tolerance
    if args.only is not None:
        r = one(args, args.only, verbose=True)
        print(json.dumps(r, indent=1))
        sys.exit(1 if r["problems"] else 0)
    t0 = time.time()
    done, failed, orphans, netns, cgroups, veths, checked_veths, devs = 0, 0, 0, 0, 0, 0, 0, []
    by_trigger = {}
    late = []
    with open(args.out, "a") as out, ThreadPoolExecutor(args.parallel) as pool:
        for r in pool.map(lambda i: one(args, i), range(args.start, args.start + args.count)):
            done += 1
            out.write(json.dumps(r) + "\n")
            out.flush()
            devs += r.get("devs", [])
            orphans += r.get("orphans", 0)
            netns += r.get("netns", 0)
            cgroups += r.get("cgroups", 0)
            veths += r.get("veths", 0)
            checked_veths += r.get("checked_veths", 0)
            by_trigger[r["trigger"]] = by_trigger.get(r["trigger"], 0) + 1
            if r["problems"]:
                if all(timing_only(p) for p in r["problems"]):
                    late.append(r["index"])
                else:
                    failed += 1
                print(f"#{r['index']} ({r['trigger']}): " + "; ".join(r["problems"]), flush=True)
            if done % 100 == 0:
                print(f"{done} terminations, {failed} with problems, {len(late)} late, {time.time() - t0:.0f} s", flush=True)
    elapsed = time.time() - t0
    # A termination whose only problem is an instant outside the tolerance is run again alone
    # (the campaign runs --parallel of them on a shared machine): what is late again is a finding.
    still_late = []
    for i in late[: args.recheck]:
        r = one(args, i)
        if r["problems"]:
            still_late.append(i)
            print(f"#{i} again, alone: " + "; ".join(r["problems"]), flush=True)
    devs.sort()
    pct = lambda q: devs[min(len(devs) - 1, int(q * (len(devs) - 1)))] if devs else 0
    print(f"seed {args.seed}, indexes {args.start}..{args.start + args.count - 1}: {done} terminations "
          f"({', '.join(f'{k} {v}' for k, v in sorted(by_trigger.items()))}) in {elapsed:.0f} s, {args.parallel} at a time")
    print(f"{len(devs)} instants checked against explain (tolerance {TOL * 1000:.0f} ms): "
          f"outside [min, max] by p50 {pct(0.5) * 1000:.0f} ms, p99 {pct(0.99) * 1000:.0f} ms, max {pct(1.0) * 1000:.0f} ms")
    print(f"terminations with an instant outside the tolerance: {len(late)}; run again alone: "
          f"{min(len(late), args.recheck)}, late again: {len(still_late)} {still_late}")
    print(f"terminations with another problem: {failed}; orphans {orphans}; leaked netns {netns}; "
          f"leaked veths {veths} (of {checked_veths} seen); leaked cgroups {cgroups}")
    sys.exit(1 if failed or still_late else 0)


def timing_only(problem):
    """A problem that is an instant outside explain's range (not an orphan, a leak, a failure)."""
    return "explain says [" in problem or "after explain's last SIGKILL" in problem

if __name__ == "__main__":
    main()
