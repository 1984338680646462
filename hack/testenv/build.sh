#!/usr/bin/env bash
# Builds the local test control plane from Go modules: etcd, kube-apiserver and, for one CAPI release,
# CAPI's three managers (and, for the default release, clusterctl of the same version, for the install tests),
# and sim-kubelet, the simulation's kubelet endpoint and etcd members (hack/testenv/sim-kubelet, test-only).
# Binaries go to a cache folder outside git, keyed by the pinned versions (go.mod + go.sum of each tool
# module and the build recipe); a binary already there is reused. Prints what it builds, how far it is and
# how long it took.
#
#   hack/testenv/build.sh                  build what is missing for the default release (v1.14)
#   hack/testenv/build.sh --capi v1.10     the same for CAPI v1.10 (v1beta1); v1.11, v1.12, v1.13 likewise (v1beta2)
#   hack/testenv/build.sh --base           only what the releases share (etcd, kube-apiserver, sim-kubelet)
#   hack/testenv/build.sh --print [--capi R]   only print the release's bin folder (no build)
#   hack/testenv/build.sh --all            every release (CI)
#
# The last line printed is the release's bin folder: etcd and kube-apiserver (links into a folder shared by
# the releases), the managers, crds/ and release.json (where the release's module and provider folders are,
# for the webhook manifests).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${JOINGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/joinguard}"
release="${JOINGUARD_CAPI_RELEASE:-v1.14}"
print_only=false
all=false
base_only=false
while [[ $# -gt 0 ]]; do
  case "$1" in
    --print) print_only=true; shift ;;
    --capi) release="${2:?--capi needs a release (v1.14, v1.13, v1.12, v1.11, v1.10)}"; shift 2 ;;
    --all) all=true; shift ;;
    --base) base_only=true; shift ;;
    *) echo "[testenv build] unknown argument $1" >&2; exit 64 ;;
  esac
done

if $all; then
  for r in v1.14 v1.13 v1.12 v1.11 v1.10; do "$here/build.sh" --capi "$r" >/dev/null; done
  exec "$here/build.sh" --capi v1.14 --print
fi

# The releases: tool module, the folder of the core provider inside the CAPI module (its main package, CRDs
# and webhook manifests), the kube-apiserver tool module, and whether clusterctl is built with it.
# The three mains are packages of the one module sigs.k8s.io/cluster-api in every release: up to v1.13 the core
# manager is its root package (main.go, with config/ at the root), bootstrap/kubeadm and controlplane/kubeadm
# beside it; v1.14 moved core into core/ (core/main.go, core/config/) and its API types into a module of their
# own (sigs.k8s.io/cluster-api/api).
case "$release" in
  v1.14) capi_mod=capi-v1.14; core_sub=core; kube_mod=kube; with_clusterctl=true ;;
  v1.13|v1.12|v1.11|v1.10) capi_mod=capi-$release; core_sub=.; kube_mod=kube; with_clusterctl=false ;;
  *) echo "[testenv build] unknown CAPI release $release (known: v1.14, v1.13, v1.12, v1.11, v1.10)" >&2; exit 64 ;;
esac

# Versions, read from the tool modules so that there is one place to change them.
# `module version` on a require line, inside or outside a require block.
pinned() { awk -v m="$1" '{ if ($1 == "require") { $1 = "" ; $0 = $0 } } $1 == m { print $2; exit }' "$2"; }
kube_version="$(pinned k8s.io/kubernetes "$here/$kube_mod/go.mod")"
etcd_version="$(pinned go.etcd.io/etcd/server/v3 "$here/etcd/go.mod")"
capi_version="$(pinned sigs.k8s.io/cluster-api "$here/$capi_mod/go.mod")"
for v in kube_version etcd_version capi_version; do
  [[ -n "${!v}" ]] || { echo "[testenv build] cannot read $v from the tool modules" >&2; exit 1; }
done

build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
kube_minor="${kube_version#v1.}"; kube_minor="${kube_minor%%.*}"
kube_ld="-s -w -X k8s.io/component-base/version.gitVersion=${kube_version} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${kube_minor} -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.buildDate=@DATE@ -X k8s.io/client-go/pkg/version.gitVersion=${kube_version} -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=${kube_minor}"
capi_minor="${capi_version#v1.}"; capi_minor="${capi_minor%%.*}"
capi_ld="-s -w -X sigs.k8s.io/cluster-api/version.gitVersion=${capi_version} -X sigs.k8s.io/cluster-api/version.gitMajor=1 -X sigs.k8s.io/cluster-api/version.gitMinor=${capi_minor} -X sigs.k8s.io/cluster-api/version.gitTreeState=clean -X sigs.k8s.io/cluster-api/version.buildDate=@DATE@"
if [[ "$core_sub" == "." ]]; then core_pkg="sigs.k8s.io/cluster-api"; else core_pkg="sigs.k8s.io/cluster-api/$core_sub"; fi

# name | module dir | package | ldflags (@DATE@ becomes the build date; the recipe, not the date, is keyed)
base_targets=(
  "etcd|etcd|go.etcd.io/etcd/server/v3|-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=${etcd_version}"
  "kube-apiserver|$kube_mod|k8s.io/kubernetes/cmd/kube-apiserver|${kube_ld}"
)
release_targets=(
  "capi-core|$capi_mod|$core_pkg|${capi_ld}"
  "capi-kubeadm-bootstrap|$capi_mod|sigs.k8s.io/cluster-api/bootstrap/kubeadm|${capi_ld}"
  "capi-kubeadm-control-plane|$capi_mod|sigs.k8s.io/cluster-api/controlplane/kubeadm|${capi_ld}"
)
# Not part of the control plane: the install tests use it for clusterctl's own substitution and repository.
$with_clusterctl && release_targets+=("clusterctl|clusterctl|sigs.k8s.io/cluster-api/cmd/clusterctl|${capi_ld}")

keyof() { # the recipe of a list of targets: their modules' go.mod/go.sum and the target lines
  local t dir
  { for t in "$@"; do dir="$(cut -d'|' -f2 <<<"$t")"; cat "$here/$dir/go.mod" "$here/$dir/go.sum"; echo "$t"; done; } | sha256sum | cut -c1-12
}
base="$cache/bin/k8s-${kube_version}_etcd-${etcd_version}_$(keyof "${base_targets[@]}")"
# The simulation's kubelet endpoint and etcd members (test-only, our own code): its own folder, keyed by its
# module and sources, so that an edit of it rebuilds it alone (not etcd, kube-apiserver or a CAPI release).
sim_target="sim-kubelet|sim-kubelet|.|-s -w"
sim="$cache/bin/sim-kubelet_$( { cat "$here/sim-kubelet"/*.go; keyof "$sim_target"; } | sha256sum | cut -c1-12)"
bin="$cache/bin/capi-${capi_version}_k8s-${kube_version}_$(keyof "${base_targets[@]}" "${release_targets[@]}")"

if $print_only; then echo "$bin"; exit 0; fi
mkdir -p "$base" "$sim"

now() { date +%s; }
start_all=$(now)
total=$(( ${#base_targets[@]} + 1 ))
$base_only || total=$(( total + ${#release_targets[@]} ))
i=0
build() { # target line, output folder
  local name dir pkg ldflags s beat
  IFS='|' read -r name dir pkg ldflags <<<"$1"
  i=$((i + 1))
  if [[ -x "$2/$name" ]]; then
    echo "[testenv build $i/$total] $name: cached" >&2
    return
  fi
  echo "[testenv build $i/$total] $name: building $pkg (CAPI $release; first build of this version takes minutes) ..." >&2
  s=$(now)
  # A heartbeat so that a long cold build shows it is alive.
  ( while sleep 30; do echo "[testenv build $i/$total] $name: still building, $(( $(now) - s ))s" >&2; done ) &
  beat=$!
  if ! (cd "$here/$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "${ldflags//@DATE@/$build_date}" -o "$2/$name.tmp.$$" "$pkg"); then
    kill "$beat" 2>/dev/null || true
    echo "[testenv build] $name (CAPI $release) FAILED" >&2
    exit 1
  fi
  kill "$beat" 2>/dev/null || true
  wait "$beat" 2>/dev/null || true
  mv "$2/$name.tmp.$$" "$2/$name"
  echo "[testenv build $i/$total] $name: built in $(( $(now) - s ))s" >&2
}
for t in "${base_targets[@]}"; do build "$t" "$base"; done
build "$sim_target" "$sim"
# The shared part alone: .ci/run builds it first, so that the releases it then builds side by side do not each
# build kube-apiserver again.
if $base_only; then
  echo "[testenv build] shared binaries done in $(( $(now) - start_all ))s: $base" >&2
  echo "$base"
  exit 0
fi
mkdir -p "$bin"
for t in "${release_targets[@]}"; do build "$t" "$bin"; done
for name in etcd kube-apiserver; do ln -sfn "$base/$name" "$bin/$name"; done
ln -sfn "$sim/sim-kubelet" "$bin/sim-kubelet"

# CRDs and webhook manifests come from the CAPI module of the same version.
capi_dir="$(cd "$here/$capi_mod" && go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)"
core_dir="$capi_dir/$core_sub"; [[ "$core_sub" == "." ]] && core_dir="$capi_dir"
providers=("capi-core|$core_dir" "capi-kubeadm-bootstrap|$capi_dir/bootstrap/kubeadm" "capi-kubeadm-control-plane|$capi_dir/controlplane/kubeadm")
# Temporary names are per process: every test env start runs this script, and parallel test processes
# (.ci/run) may run it at the same time; each rename is atomic.
if [[ ! -d "$bin/crds" ]]; then
  mkdir -p "$bin/crds.tmp.$$"
  for p in "${providers[@]}"; do cp "${p#*|}/config/crd/bases"/*.yaml "$bin/crds.tmp.$$/"; done
  mv -T "$bin/crds.tmp.$$" "$bin/crds" 2>/dev/null || rm -rf "$bin/crds.tmp.$$"
fi
{
  echo "{"
  echo "  \"release\": \"$release\", \"version\": \"$capi_version\", \"kubernetes\": \"$kube_version\", \"moduleDir\": \"$capi_dir\","
  echo "  \"providerDirs\": {"
  sep=""
  for p in "${providers[@]}"; do printf '%s    "%s": "%s"' "$sep" "${p%|*}" "${p#*|}"; sep=$',\n'; done
  printf '\n  }\n}\n'
} >"$bin/release.json.tmp.$$"
mv "$bin/release.json.tmp.$$" "$bin/release.json"

echo "[testenv build] CAPI $release done in $(( $(now) - start_all ))s: $bin" >&2
echo "$bin"
