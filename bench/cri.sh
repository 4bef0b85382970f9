#!/usr/bin/env bash
# podgrace on containerd (issue 15's benchmark), on the private containerd of .ci/containerd.sh:
#
# 1. crates/podgrace-node/examples/bench_cri.rs: PODS pods (default 50) started and stopped one
#    at a time by a minimal CRI client making crictl's calls and, alternately, by podgrace's
#    kubelet over the containerd runtime; prints start (request -> container seen running) and
#    stop (delete -> exit seen and sandbox stopped) percentiles for both ways and their ratio.
# 2. `podgrace drill --runtime containerd:SOCK --replicas PODS`: the demo drill's two runs, each
#    with PODS pods on containerd behind the drill's proxy, started, drilled and stopped.
# 3. What containerd holds before and after, which must be the same: pod sandboxes (CRI
#    ListPodSandbox through ctr's k8s.io containers), runc shims serving this socket, and the
#    CNI network namespaces (/var/run/netns/cni-*).
#
#   sudo .ci/containerd.sh start     # once
#   sudo bash bench/cri.sh           # PODS=50; PODGRACE=target/debug/podgrace to skip a release build
#
# Needs root (containerd's socket and CNI) and gcc (the signal logger image is built here).
set -euo pipefail
cd "$(dirname "$0")/.."
pods=${PODS:-50}
dir=${PODGRACE_CONTAINERD_DIR:-/tmp/podgrace-containerd}
sock=${PODGRACE_CONTAINERD:-$dir/containerd.sock}
image=podgrace.bench/siglog:1
die() { echo "bench/cri.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (containerd's socket, CNI)"
ctr -a "$sock" version >/dev/null 2>&1 || die "no containerd at $sock: start one with 'sudo .ci/containerd.sh start' (or set PODGRACE_CONTAINERD)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/rootfs/bin"
gcc -static -O2 -o "$work/rootfs/bin/siglog" crates/podgrace-node/tests/images/siglog.c
bash .ci/containerd.sh image "$image" "$work/rootfs" '{"Entrypoint":["/bin/siglog"]}' "$(dirname "$sock")" >/dev/null

held() {
  local sandboxes shims netns
  sandboxes=$(ctr -a "$sock" -n k8s.io containers ls -q 2>/dev/null | wc -l)
  shims=$(pgrep -f -c -- "containerd-shim-runc-v2 .*-address $sock" || true)
  netns=$( (ls /var/run/netns 2>/dev/null || true) | grep -c '^cni-' || true)
  echo "containers (sandboxes and theirs) $sandboxes, shims $shims, CNI netns $netns"
}

echo "$(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
before="$(held)"
echo "before: $before"
cargo build --release -q -p podgrace-node --example bench_cri
"${CARGO_TARGET_DIR:-target}"/release/examples/bench_cri --socket "$sock" --image "$image" --pods "$pods" "$@"

bin=${PODGRACE:-${CARGO_TARGET_DIR:-target}/release/podgrace}
[ -n "${PODGRACE:-}" ] || cargo build --release -q -p podgrace --bin podgrace
echo "--- podgrace drill --runtime containerd:$sock --replicas $pods"
start=$(date +%s%N)
# Exit 1 is the drill's verdict (a run lost requests: with 50 pods sharing 200 requests/s each
# pod sees about 4 new connections a second, so a 1 s quiet window can open by chance under
# load); 2 and 3 are bad input and a failure of this machine.
rc=0
"$bin" drill --runtime "containerd:$sock" --replicas "$pods" >"$work/drill.out" 2>"$work/drill.err" || rc=$?
if [ "$rc" -gt 1 ]; then
  cat "$work/drill.err" >&2
  die "the drill failed (exit $rc)"
fi
end=$(date +%s%N)
sed -n '/^the endpoint race/,$p' "$work/drill.out" | grep -E '^(the endpoint race|  *(requests|failed|verdict|    connect))' || true
echo "drill: exit $rc"
echo "drill: $(( (end - start) / 1000000 )) ms wall (the three runs)"
after="$(held)"
echo "after:  $after"
[ "$before" = "$after" ] && echo "leaks: none" || die "containerd holds something it did not before"
