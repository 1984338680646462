#!/usr/bin/env bash
# Builds the local test control plane from Go modules: etcd, kube-apiserver and CAPI's three managers
# (and clusterctl of the same CAPI version, for the install tests).
# Binaries go to a cache folder outside git, keyed by the pinned versions (go.mod + go.sum of each tool
# module); a binary already there is reused. Prints what it builds, how far it is and how long it took.
#
#   hack/testenv/build.sh            build what is missing, print the bin folder on the last line
#   hack/testenv/build.sh --print    only print the bin folder (no build)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${JOINGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/joinguard}"

# Versions, read from the tool modules so that there is one place to change them.
# `module version` on a require line, inside or outside a require block.
pinned() { awk -v m="$1" '{ if ($1 == "require") { $1 = "" ; $0 = $0 } } $1 == m { print $2; exit }' "$2"; }
kube_version="$(pinned k8s.io/kubernetes "$here/kube/go.mod")"
etcd_version="$(pinned go.etcd.io/etcd/server/v3 "$here/etcd/go.mod")"
capi_version="$(pinned sigs.k8s.io/cluster-api "$here/capi/go.mod")"
for v in kube_version etcd_version capi_version; do
  [[ -n "${!v}" ]] || { echo "[testenv build] cannot read $v from the tool modules" >&2; exit 1; }
done

key="$(cat "$here"/{kube,etcd,capi,clusterctl}/go.{mod,sum} "$here/build.sh" | sha256sum | cut -c1-12)"
bin="$cache/bin/k8s-${kube_version}_etcd-${etcd_version}_capi-${capi_version}_${key}"

if [[ "${1:-}" == "--print" ]]; then echo "$bin"; exit 0; fi
mkdir -p "$bin"

now() { date +%s; }
start_all=$(now)
build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"

# name | module dir | package | ldflags
kube_minor="${kube_version#v1.}"; kube_minor="${kube_minor%%.*}"
kube_ld="-s -w -X k8s.io/component-base/version.gitVersion=${kube_version} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${kube_minor} -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.buildDate=${build_date} -X k8s.io/client-go/pkg/version.gitVersion=${kube_version} -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=${kube_minor}"
capi_minor="${capi_version#v1.}"; capi_minor="${capi_minor%%.*}"
capi_ld="-s -w -X sigs.k8s.io/cluster-api/version.gitVersion=${capi_version} -X sigs.k8s.io/cluster-api/version.gitMajor=1 -X sigs.k8s.io/cluster-api/version.gitMinor=${capi_minor} -X sigs.k8s.io/cluster-api/version.gitTreeState=clean -X sigs.k8s.io/cluster-api/version.buildDate=${build_date}"
targets=(
  "etcd|etcd|go.etcd.io/etcd/server/v3|-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=${etcd_version}"
  "kube-apiserver|kube|k8s.io/kubernetes/cmd/kube-apiserver|${kube_ld}"
  "capi-core|capi|sigs.k8s.io/cluster-api/core|${capi_ld}"
  "capi-kubeadm-bootstrap|capi|sigs.k8s.io/cluster-api/bootstrap/kubeadm|${capi_ld}"
  "capi-kubeadm-control-plane|capi|sigs.k8s.io/cluster-api/controlplane/kubeadm|${capi_ld}"
  # Not part of the control plane: the install tests use it for clusterctl's own substitution and repository.
  "clusterctl|clusterctl|sigs.k8s.io/cluster-api/cmd/clusterctl|${capi_ld}"
)

total=${#targets[@]}
i=0
for t in "${targets[@]}"; do
  IFS='|' read -r name dir pkg ldflags <<<"$t"
  i=$((i + 1))
  if [[ -x "$bin/$name" ]]; then
    echo "[testenv build $i/$total] $name: cached" >&2
    continue
  fi
  echo "[testenv build $i/$total] $name: building $pkg (first build of this version takes minutes) ..." >&2
  s=$(now)
  # A heartbeat so that a long cold build shows it is alive.
  ( while sleep 30; do echo "[testenv build $i/$total] $name: still building, $(( $(now) - s ))s" >&2; done ) &
  beat=$!
  if ! (cd "$here/$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$bin/$name.tmp" "$pkg"); then
    kill "$beat" 2>/dev/null || true
    echo "[testenv build] $name FAILED" >&2
    exit 1
  fi
  kill "$beat" 2>/dev/null || true
  wait "$beat" 2>/dev/null || true
  mv "$bin/$name.tmp" "$bin/$name"
  echo "[testenv build $i/$total] $name: built in $(( $(now) - s ))s" >&2
done

# CRD sources come from the CAPI module of the same version.
capi_dir="$(cd "$here/capi" && go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)"
if [[ ! -d "$bin/crds" ]]; then
  mkdir -p "$bin/crds.tmp"
  for d in core/config/crd/bases bootstrap/kubeadm/config/crd/bases controlplane/kubeadm/config/crd/bases; do
    cp "$capi_dir/$d"/*.yaml "$bin/crds.tmp/"
  done
  mv "$bin/crds.tmp" "$bin/crds"
fi

echo "[testenv build] done in $(( $(now) - start_all ))s: $bin" >&2
echo "$bin"
