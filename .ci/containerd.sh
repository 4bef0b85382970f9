#!/usr/bin/env bash
# A private containerd for podgrace's --runtime containerd tests and for developers.
#
#   .ci/containerd.sh start [DIR]   start one (root, state, socket and CNI config under DIR)
#   .ci/containerd.sh stop [DIR]    stop the one started in DIR, its shims and its pods' mounts
#   .ci/containerd.sh socket [DIR]  print its socket path
#   .ci/containerd.sh image REF ROOTFS CONFIG_JSON [DIR]
#                                   pack ROOTFS as a one-layer OCI image REF whose image config
#                                   is CONFIG_JSON (`{"Entrypoint":[...],"StopSignal":"SIGQUIT"}`)
#                                   and import it into the containerd of DIR (namespace k8s.io)
#
# DIR defaults to $PODGRACE_CONTAINERD_DIR, else /tmp/podgrace-containerd. The tests find the
# socket there (or in $PODGRACE_CONTAINERD). Needs root, Debian's containerd, runc,
# containernetworking-plugins and gcc (the sandbox image's pause process is built here, static,
# and imported as podgrace.local/pause:1; no registry is used).
#
# Pods get their addresses from a CNI bridge (cni-podgrace0) on $PODGRACE_CONTAINERD_POD_NETWORK
# (default 198.18.78.0/24, beside the process runtime's 198.18.77.0/24, outside every private
# and link-local range). Only what this script started is ever stopped: the containerd whose pid
# it recorded and the shims serving its socket.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cmd="${1:-}"
if [ "$cmd" = image ]; then
  image_ref="${2:?REF}" image_rootfs="${3:?ROOTFS}" image_config="${4:?CONFIG_JSON}"
  shift 3
fi
dir="${2:-${PODGRACE_CONTAINERD_DIR:-/tmp/podgrace-containerd}}"
sock="$dir/containerd.sock"
pod_network="${PODGRACE_CONTAINERD_POD_NETWORK:-198.18.78.0/24}"
pause_ref="podgrace.local/pause:1"

die() { echo "containerd.sh: $*" >&2; exit 1; }

running() { [ -f "$dir/containerd.pid" ] && kill -0 "$(cat "$dir/containerd.pid")" 2>/dev/null; }

# An OCI image archive of one layer: oci_archive REF ROOTFS OUT CONFIG_JSON ("config" object).
oci_archive() {
  local ref="$1" rootfs="$2" out="$3" config="$4" work
  work="$(mktemp -d)"
  mkdir -p "$work/blobs/sha256"
  tar -C "$rootfs" --numeric-owner --owner=0 --group=0 --sort=name --mtime=@0 -cf "$work/layer.tar" .
  local layer_sha layer_size cfg cfg_sha cfg_size man man_sha man_size
  layer_sha="$(sha256sum "$work/layer.tar" | cut -d' ' -f1)"
  layer_size="$(stat -c %s "$work/layer.tar")"
  mv "$work/layer.tar" "$work/blobs/sha256/$layer_sha"
  cfg="{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":$config,\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:$layer_sha\"]}}"
  cfg_sha="$(printf %s "$cfg" | sha256sum | cut -d' ' -f1)"
  cfg_size="${#cfg}"
  printf %s "$cfg" >"$work/blobs/sha256/$cfg_sha"
  man="{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"sha256:$cfg_sha\",\"size\":$cfg_size},\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\",\"digest\":\"sha256:$layer_sha\",\"size\":$layer_size}]}"
  man_sha="$(printf %s "$man" | sha256sum | cut -d' ' -f1)"
  man_size="${#man}"
  printf %s "$man" >"$work/blobs/sha256/$man_sha"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$man_sha" "$man_size" "$ref" "${ref##*:}" >"$work/index.json"
  printf '{"imageLayoutVersion":"1.0.0"}' >"$work/oci-layout"
  tar -C "$work" -cf "$out" oci-layout index.json blobs
  rm -rf "$work"
}

start() {
  [ "$(id -u)" = 0 ] || die "needs root (containerd, runc and CNI do)"
  for b in containerd containerd-shim-runc-v2 runc ctr gcc; do
    command -v "$b" >/dev/null || die "$b not found: apt-get install containerd runc containernetworking-plugins gcc"
  done
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] ||
    die "CNI plugins not found in /usr/lib/cni: apt-get install containernetworking-plugins"
  if running; then
    echo "$sock"
    return
  fi
  mkdir -p "$dir/root" "$dir/state" "$dir/cni" "$dir/logs"
  dir="$(cd "$dir" && pwd)"
  sock="$dir/containerd.sock"
  local snapshotter=overlayfs
  # overlayfs on overlayfs (a container's own root) does not work everywhere; native always does.
  if ! grep -qw overlay /proc/filesystems; then snapshotter=native; fi
  cat >"$dir/config.toml" <<EOF
version = 2
root = "$dir/root"
state = "$dir/state"
oom_score = 0
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_ref"
  # No CAP_SYS_RESOURCE on these machines: containerd must not lower oom_score_adj below ours.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "$snapshotter"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni"
    max_conf_num = 1
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/opt"
EOF
  cat >"$dir/cni/10-podgrace.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "podgrace",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni-podgrace0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$dir/cni-ipam",
        "ranges": [[{"subnet": "$pod_network"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  # Its working directory is DIR: containerd creates a missing relative hostPath there.
  (cd "$dir" && exec containerd --config "$dir/config.toml") >"$dir/logs/containerd.log" 2>&1 &
  echo $! >"$dir/containerd.pid"
  for _ in $(seq 1 100); do
    if [ -S "$sock" ] && ctr -a "$sock" version >/dev/null 2>&1; then break; fi
    running || die "containerd exited at start; see $dir/logs/containerd.log"
    sleep 0.1
  done
  ctr -a "$sock" version >/dev/null 2>&1 || die "containerd did not answer on $sock; see $dir/logs/containerd.log"
  if ! ctr -a "$sock" -n k8s.io images ls -q | grep -qx "$pause_ref"; then
    local work
    work="$(mktemp -d)"
    mkdir -p "$work/rootfs"
    gcc -static -O2 -s -o "$work/rootfs/pause" "$here/images/pause.c"
    oci_archive "$pause_ref" "$work/rootfs" "$work/pause.tar" '{"Entrypoint":["/pause"]}'
    ctr -a "$sock" -n k8s.io images import --no-unpack "$work/pause.tar" >/dev/null
    rm -rf "$work"
  fi
  echo "$sock"
}

stop() {
  if ! running; then
    rm -f "$dir/containerd.pid"
    return
  fi
  local pid
  pid="$(cat "$dir/containerd.pid")"
  # The shims of this containerd (they serve its socket's namespace and outlive it otherwise),
  # and the containers under them.
  local shims
  shims="$(pgrep -f -- "-address $sock( |$)" || true)"
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  for s in $shims; do
    # A shim's children are its containers; they die with their PID namespace's init.
    pkill -9 -P "$s" 2>/dev/null || true
    kill -9 "$s" 2>/dev/null || true
  done
  # Mounts left under this containerd's state and root (rootfs overlays, sandbox shm).
  grep -oE " $dir/[^ ]+" /proc/self/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  rm -f "$dir/containerd.pid"
}

image() {
  running || die "no containerd running in $dir: start one with $0 start"
  local work
  work="$(mktemp -d)"
  oci_archive "$image_ref" "$image_rootfs" "$work/image.tar" "$image_config"
  ctr -a "$sock" -n k8s.io images import "$work/image.tar" >/dev/null
  rm -rf "$work"
}

case "$cmd" in
  start) start ;;
  image) image ;;
  stop) stop ;;
  socket) echo "$sock" ;;
  *) die "usage: containerd.sh start|stop|socket [DIR] | image REF ROOTFS CONFIG_JSON [DIR]" ;;
esac
