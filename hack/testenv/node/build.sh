#!/usr/bin/env bash
# Builds a real node for the local test control plane from Go modules: kubelet, kube-controller-manager,
# kube-scheduler and kube-proxy from the same k8s.io/kubernetes version as the control plane's kube-apiserver
# (node/kube/go.mod, checked against ../kube/go.mod), containerd, its runc shim and ctr (node/containerd/go.mod),
# and the pods' sandbox image (node/pause, made here as an OCI archive: registry.k8s.io/pause cannot be pulled).
# runc and the CNI plugins are Debian's (runc, containernetworking-plugins), installed where missing.
# Same cache scheme as hack/testenv/build.sh: a folder outside git keyed by the versions and a hash of the modules,
# the pause sources and this script; what is there is reused. Only the specs that start a node need it
# (hack/testenv/node.ts; docs/decisions/kubelet-on-this-machine.md says which settings make it run here).
#
#   hack/testenv/node/build.sh           build what is missing; the last line printed is the bin folder
#   hack/testenv/node/build.sh --print   only print the bin folder (no build)
#
# Measured on 2 shared cores under load, warm module cache: kubelet 380 s, containerd + shim + ctr about 200 s.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${JOINGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/joinguard}"

pinned() { awk -v m="$1" '{ if ($1 == "require") { $1 = "" ; $0 = $0 } } $1 == m { print $2; exit }' "$2"; }
kube_version="$(pinned k8s.io/kubernetes "$here/kube/go.mod")"
containerd_version="$(pinned github.com/containerd/containerd/v2 "$here/containerd/go.mod")"
apiserver_version="$(pinned k8s.io/kubernetes "$here/../kube/go.mod")"
[[ -n "$kube_version" && -n "$containerd_version" ]] || { echo "[node build] cannot read the versions" >&2; exit 1; }
# The node's components and the control plane's apiserver move together: one version in two tool modules.
if [[ "$kube_version" != "$apiserver_version" ]]; then
  echo "[node build] node/kube pins k8s.io/kubernetes $kube_version, the apiserver's module $apiserver_version" >&2
  exit 1
fi
key="$({ cat "$here/kube/go.mod" "$here/kube/go.sum" "$here/containerd/go.mod" "$here/containerd/go.sum" \
  "$here/pause/go.mod" "$here/pause/main.go" "${BASH_SOURCE[0]}"; } | sha256sum | cut -c1-12)"
bin="$cache/bin/node-k8s-${kube_version}_containerd-${containerd_version}_$key"
if [[ "${1:-}" == "--print" ]]; then echo "$bin"; exit 0; fi

as_root() { if [[ $EUID -eq 0 ]]; then "$@"; else sudo -n "$@"; fi; }
if ! command -v runc >/dev/null || [[ ! -x /usr/lib/cni/bridge ]]; then
  echo "[node build] installing runc and containernetworking-plugins" >&2
  as_root apt-get update -qq >&2 && as_root apt-get install -y -qq runc containernetworking-plugins >&2
fi

mkdir -p "$bin"
now() { date +%s; }
start_all=$(now)
kube_minor="${kube_version#v1.}"; kube_minor="${kube_minor%%.*}"
kube_ld="-s -w -X k8s.io/component-base/version.gitVersion=${kube_version} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${kube_minor} -X k8s.io/component-base/version.gitTreeState=clean"
cd_ld="-s -w -X github.com/containerd/containerd/v2/version.Version=${containerd_version}"
# name | module dir | package | ldflags
targets=(
  "kubelet|kube|k8s.io/kubernetes/cmd/kubelet|$kube_ld"
  "kube-controller-manager|kube|k8s.io/kubernetes/cmd/kube-controller-manager|$kube_ld"
  "kube-scheduler|kube|k8s.io/kubernetes/cmd/kube-scheduler|$kube_ld"
  "kube-proxy|kube|k8s.io/kubernetes/cmd/kube-proxy|$kube_ld"
  "containerd|containerd|github.com/containerd/containerd/v2/cmd/containerd|$cd_ld"
  "containerd-shim-runc-v2|containerd|github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2|$cd_ld"
  "ctr|containerd|github.com/containerd/containerd/v2/cmd/ctr|$cd_ld"
  "pause|pause|.|-s -w"
)
i=0
for t in "${targets[@]}"; do
  IFS='|' read -r name dir pkg ldflags <<<"$t"
  i=$((i + 1))
  if [[ -x "$bin/$name" ]]; then echo "[node build $i/${#targets[@]}] $name: cached" >&2; continue; fi
  echo "[node build $i/${#targets[@]}] $name: building $pkg (minutes cold) ..." >&2
  s=$(now)
  ( while sleep 30; do echo "[node build $i/${#targets[@]}] $name: still building, $(( $(now) - s ))s" >&2; done ) &
  beat=$!
  # CGO off: containerd then leaves out the btrfs snapshotter (cgo), which the node does not use (overlayfs).
  if ! (cd "$here/$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$bin/$name.tmp.$$" "$pkg"); then
    kill "$beat" 2>/dev/null || true
    echo "[node build] $name FAILED" >&2
    exit 1
  fi
  kill "$beat" 2>/dev/null || true
  wait "$beat" 2>/dev/null || true
  mv "$bin/$name.tmp.$$" "$bin/$name"
  echo "[node build $i/${#targets[@]}] $name: built in $(( $(now) - s ))s" >&2
done

# The sandbox image as an OCI archive (`ctr images import` reads it): one layer with /pause, no registry involved.
if [[ ! -f "$bin/pause.tar" ]]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/rootfs" "$work/oci/blobs/sha256"
  cp "$bin/pause" "$work/rootfs/pause"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work/rootfs" -cf "$work/layer.tar" pause
  # blob FILE: copies it into the layout as a blob and prints its digest (hex).
  blob() {
    local d; d="$(sha256sum "$1" | cut -d' ' -f1)"; cp "$1" "$work/oci/blobs/sha256/$d"; echo "$d"
  }
  size() { stat -c %s "$1"; }
  arch="$(go env GOARCH)"
  layer="$(blob "$work/layer.tar")"
  printf '{"architecture":"%s","os":"linux","config":{"Entrypoint":["/pause"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$arch" "$layer" >"$work/config.json"
  config="$(blob "$work/config.json")"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "$config" "$(size "$work/config.json")" "$layer" "$(size "$work/layer.tar")" >"$work/manifest.json"
  manifest="$(blob "$work/manifest.json")"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"localhost/joinguard/pause:test","org.opencontainers.image.ref.name":"test"}}]}' \
    "$manifest" "$(size "$work/manifest.json")" "$arch" >"$work/oci/index.json"
  echo '{"imageLayoutVersion":"1.0.0"}' >"$work/oci/oci-layout"
  tar -C "$work/oci" -cf "$bin/pause.tar.tmp.$$" oci-layout index.json blobs
  mv "$bin/pause.tar.tmp.$$" "$bin/pause.tar"
fi

echo "[node build] done in $(( $(now) - start_all ))s: $bin" >&2
echo "$bin"
