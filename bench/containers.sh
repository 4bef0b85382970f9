#!/usr/bin/env bash
# Work per object: `podgrace lint` and `podgrace explain` (release build, --output json) over one
# Pod of 30,000 containers (1.2 MB), one of 300,000 (12.8 MB: above kube-apiserver's 3 MiB
# request limit, so refused where it passes it), a List of 10 Pods of 30,000 containers each
# (300,000 containers, every object under the limit), and two alias bombs under 1 KB. Prints
# wall time and peak resident memory of each run (/usr/bin/time).
#   BIN=path/to/podgrace bash bench/containers.sh     # another build (default: target/release)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-}
if [ -z "$BIN" ]; then
  cargo build --release -p podgrace >/dev/null
  BIN=target/release/podgrace
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 - "$dir" <<'PY'
import sys
d = sys.argv[1]
def pod(name, n, indent=""):
    out = [f"{indent}apiVersion: v1", f"{indent}kind: Pod", f"{indent}metadata: {{name: {name}}}",
           f"{indent}spec:", f"{indent}  containers:"]
    out += [f"{indent}  - {{name: c{i}, command: [sleep, '9']}}" for i in range(n)]
    return out
open(f"{d}/pod-30k.yaml", "w").write("\n".join(pod("big", 30000)) + "\n")
open(f"{d}/pod-300k.yaml", "w").write("\n".join(pod("big", 300000)) + "\n")
lst = ["apiVersion: v1", "kind: List", "items:"]
for p in range(10):
    items = pod(f"big{p}", 30000, "  ")
    items[0] = "- " + items[0][2:]
    lst += items
open(f"{d}/list-10x30k.yaml", "w").write("\n".join(lst) + "\n")
# Billion laughs as Kubernetes' own test writes it (9 levels of 9), and with mappings.
b = ["apiVersion: v1", "kind: ConfigMap", "metadata: {name: bomb}", "data:",
     '  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
for p, n in zip("abcdefgh", "bcdefghi"):
    b.append(f"  {n}: &{n} [" + ",".join([f"*{p}"] * 9) + "]")
open(f"{d}/bomb-seq.yaml", "w").write("\n".join(b) + "\n")
m = ["apiVersion: v1", "kind: ConfigMap", "metadata: {name: bomb}", "data:",
     "  a: &a {" + ", ".join(f'x{i}: "lollollollollollollollollollollol"' for i in range(9)) + "}"]
for p, n in zip("abcdefg", "bcdefgh"):
    m.append(f"  {n}: &{n} [" + ",".join([f"*{p}"] * 9) + "]")
open(f"{d}/bomb-map.yaml", "w").write("\n".join(m) + "\n")
PY
printf '%-18s %8s  %-8s %10s %12s  %s\n' input bytes verb seconds "peak RSS" "exit"
for f in pod-30k pod-300k list-10x30k bomb-seq bomb-map; do
  for verb in lint explain; do
    size=$(stat -c %s "$dir/$f.yaml")
    set +e
    /usr/bin/time -f '%e %M' -o "$dir/time" "$BIN" "$verb" "$dir/$f.yaml" -o json >/dev/null 2>"$dir/err"
    code=$?
    set -e
    read -r secs kb < <(tail -n 1 "$dir/time")
    printf '%-18s %8s  %-8s %10s %9s MB  %s\n' "$f" "$size" "$verb" "$secs" "$((kb / 1024))" "$code"
  done
done
