#!/usr/bin/env bash
# JoinGuard end to end on kind + CAPD, installed the way users install it: `clusterctl init --addon joinguard`.
#
#   NOT RUN IN CI, AND IT CANNOT RUN IN THE DEVELOPMENT SANDBOX: it needs a Docker engine, kind, clusterctl and
#   network access (clusterctl downloads CAPI core, kubeadm and CAPD; kind pulls kindest/node images).
#   What was checked, and how, without running it: README.md beside this file.
#
# What it does:
#   1. npm ci; builds the image (hack/docker-build.sh) and the provider files (npm run manifests);
#   2. creates a kind management cluster on a pinned node image, loads the image as an archive of the host's
#      platform, makes a clusterctl local repository (file://) from out/ with the image overridden to the
#      one just built, and runs `clusterctl init` with every provider pinned to CAPI $CAPI_VERSION;
#   3. creates a CAPD workload cluster (DevCluster/DevMachineTemplate v1beta2) whose first worker's
#      bootstrap is blocked (workload-cluster.yaml), and a MachineJoinCheck for its workers;
#   4. unblocks every later worker, and asserts that JoinGuard had the stuck worker replaced (JoinTimeout:
#      CAPD v1.14 reports a Machine provisioned before its bootstrap runs) and that the replacement joins.
#
# Environment: CAPI_VERSION (v1.14.2), KUBERNETES_VERSION of the workload cluster (v1.34.0), KIND_NODE_IMAGE
# of the management cluster (kindest/node:v1.34.0), KIND_CLUSTER (joinguard-e2e), KEEP=1 keeps everything,
# CLUSTERCTL (default: hack/testenv/build.sh's clusterctl of CAPI_VERSION when Go is here, else clusterctl
# on PATH; its version must be CAPI_VERSION), TIMEOUT_MINUTES (25).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

CAPI_VERSION="${CAPI_VERSION:-v1.14.2}"
KUBERNETES_VERSION="${KUBERNETES_VERSION:-v1.34.0}"
KIND_NODE_IMAGE="${KIND_NODE_IMAGE:-kindest/node:v1.34.0}"
KIND_CLUSTER="${KIND_CLUSTER:-joinguard-e2e}"
TIMEOUT_MINUTES="${TIMEOUT_MINUTES:-25}"
NAMESPACE=joinguard-e2e
CLUSTER_NAME=jg-e2e
IMAGE_REPOSITORY=joinguard.local
IMAGE="$IMAGE_REPOSITORY/joinguard:e2e"
work="$(mktemp -d)"
kubeconfig="$work/kubeconfig"
export CLUSTERCTL_DISABLE_VERSIONCHECK=true

say() { echo "== [e2e/kind $(date +%H:%M:%S)] $*"; }
fail() { echo "!! [e2e/kind] FAILED: $*" >&2; exit 1; }

if [[ -z "${CLUSTERCTL:-}" ]]; then
  # The clusterctl of the tested release, built by the test control plane's build (cached after the first).
  if command -v go >/dev/null 2>&1 && [[ "$CAPI_VERSION" == "v1.14.2" ]]; then
    CLUSTERCTL="$(bash "$root/hack/testenv/build.sh" --capi v1.14 | tail -1)/clusterctl"
  else
    CLUSTERCTL=clusterctl
  fi
fi
for tool in docker kind kubectl "$CLUSTERCTL" npm; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool is not on PATH (this script needs Docker, kind, kubectl, clusterctl and npm)"
done
docker info >/dev/null 2>&1 || fail "no Docker engine answers; this script cannot run without one"
clusterctl_version="$("$CLUSTERCTL" version -o short 2>/dev/null || true)"
[[ "$clusterctl_version" == "$CAPI_VERSION" ]] || fail "clusterctl is $clusterctl_version, not $CAPI_VERSION (set CLUSTERCTL)"

unblocker=""
cleanup() {
  [[ -n "$unblocker" ]] && kill "$unblocker" 2>/dev/null || true
  if [[ "${KEEP:-}" == "1" ]]; then
    say "KEEP=1: kind cluster $KIND_CLUSTER and workload cluster $CLUSTER_NAME left running; kubeconfig $kubeconfig"
    return
  fi
  say "cleaning up"
  # Delete the workload cluster first: its Machines are containers on the host, not inside kind.
  kubectl --kubeconfig "$kubeconfig" delete cluster -n "$NAMESPACE" "$CLUSTER_NAME" --ignore-not-found --timeout=5m >/dev/null 2>&1 || true
  kind delete cluster --name "$KIND_CLUSTER" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

k() { kubectl --kubeconfig "$kubeconfig" "$@"; }

say "building the image $IMAGE and the provider files"
(cd "$root" && npm ci --no-audit --no-fund >/dev/null)
IMAGE="$IMAGE" "$root/hack/docker-build.sh"
(cd "$root" && npm run --silent manifests)

say "creating the kind management cluster $KIND_CLUSTER ($KIND_NODE_IMAGE)"
kind create cluster --name "$KIND_CLUSTER" --image "$KIND_NODE_IMAGE" --config "$here/kind-config.yaml" --kubeconfig "$kubeconfig" --wait 120s
# `kind load docker-image` fails with the containerd image store (Docker 29's default) when the image index
# names platforms whose content is not there; an archive of the host's platform loads.
platform="linux/$(docker version -f '{{.Server.Arch}}')"
docker save --platform "$platform" -o "$work/image.tar" "$IMAGE"
kind load image-archive "$work/image.tar" --name "$KIND_CLUSTER"

say "clusterctl local repository from out/"
version="v$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$root/package.json" | head -1)"
repo="$work/repository/addon-joinguard/$version"
mkdir -p "$repo"
cp "$root/out/addon-components.yaml" "$root/out/metadata.yaml" "$repo/"
cat >"$work/clusterctl.yaml" <<EOF
providers:
  - name: joinguard
    url: file://$repo/addon-components.yaml
    type: AddonProvider
images:
  addon-joinguard:
    repository: $IMAGE_REPOSITORY
    tag: e2e
EOF

say "clusterctl init, every provider pinned to CAPI $CAPI_VERSION, addon joinguard $version"
CLUSTER_TOPOLOGY=false "$CLUSTERCTL" init --kubeconfig "$kubeconfig" --config "$work/clusterctl.yaml" \
  --core "cluster-api:$CAPI_VERSION" --bootstrap "kubeadm:$CAPI_VERSION" --control-plane "kubeadm:$CAPI_VERSION" \
  --infrastructure "docker:$CAPI_VERSION" --addon "joinguard:$version" --wait-providers
k -n joinguard-system rollout status deployment/joinguard-controller-manager --timeout=5m
[[ "$(k -n joinguard-system get deployment joinguard-controller-manager -o jsonpath='{.spec.template.spec.containers[0].image}')" == "$IMAGE" ]] \
  || fail "clusterctl did not apply the image override"

say "workload cluster $CLUSTER_NAME (first worker blocked) and its MachineJoinCheck"
k create namespace "$NAMESPACE"
export CLUSTER_NAME NAMESPACE KUBERNETES_VERSION
"$CLUSTERCTL" generate yaml --config "$work/clusterctl.yaml" --from "$here/workload-cluster.yaml" | k apply -f -
"$CLUSTERCTL" generate yaml --config "$work/clusterctl.yaml" --from "$here/machinejoincheck.yaml" | k apply -f -
# The defaulting webhook answered if the defaults are there.
[[ "$(k -n "$NAMESPACE" get mjc "$CLUSTER_NAME-workers" -o jsonpath='{.spec.remediation.strategy}')" == "Auto" ]] \
  || fail "the MachineJoinCheck was not defaulted: is the webhook serving?"

# Never fails: one kubectl error (an apiserver blip during a 25-minute wait) must not end the run under set -e.
workers() {
  k -n "$NAMESPACE" get machines -l "cluster.x-k8s.io/deployment-name=$CLUSTER_NAME-md-0" \
    -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.metadata.uid}{" "}{.status.nodeRef.name}{"\n"}{end}' 2>/dev/null \
    || echo "kubectl-failed"
}

say "waiting for the first worker Machine"
stuck="" stuck_uid=""
for _ in $(seq 1 120); do
  read -r stuck stuck_uid _ < <(workers | grep -v '^kubectl-failed$' | head -1) || true
  [[ -n "$stuck" ]] && break
  sleep 5
done
[[ -n "$stuck" ]] || fail "no worker Machine appeared"
say "the first worker $stuck stays blocked; every later worker is unblocked"

# Unblock every worker container but the stuck one (CAPD names containers after their Machine).
(
  while true; do
    for m in $(workers | grep -v '^kubectl-failed$' | awk '{print $1}'); do
      [[ "$m" == "$stuck" ]] && continue
      for c in $(docker ps --format '{{.Names}}' | grep -E "(^|-)${m}\$" || true); do
        docker exec "$c" sh -c 'mkdir -p /run/joinguard-e2e && touch /run/joinguard-e2e/unblock' 2>/dev/null || true
      done
    done
    sleep 5
  done
) &
unblocker=$!

say "waiting up to ${TIMEOUT_MINUTES}m for JoinGuard to have $stuck replaced and the replacement joined"
deadline=$(( $(date +%s) + TIMEOUT_MINUTES * 60 ))
while true; do
  list="$(workers)"
  if grep -q '^kubectl-failed$' <<<"$list"; then sleep 10; continue; fi
  gone=true; grep -q "^$stuck " <<<"$list" && gone=false
  joined="$(awk -v s="$stuck" '$1 != s && $3 != "" {print $1}' <<<"$list" | head -1)"
  if $gone && [[ -n "$joined" ]]; then break; fi
  if (( $(date +%s) > deadline )); then
    k -n "$NAMESPACE" get machines -o wide || true
    k -n "$NAMESPACE" get mjc "$CLUSTER_NAME-workers" -o yaml || true
    k -n joinguard-system logs deployment/joinguard-controller-manager --tail=100 || true
    fail "$stuck was not replaced by a joined Machine in ${TIMEOUT_MINUTES}m"
  fi
  sleep 10
done

say "checking what JoinGuard recorded"
status="$(k -n "$NAMESPACE" get mjc "$CLUSTER_NAME-workers" -o json)"
grep -q "\"uid\": \"$stuck_uid\"" <<<"$status" || fail "status.recentFailures/remediations do not name $stuck"
# CAPD v1.14 sets providerID and status.initialization.provisioned once the container runs, before the
# bootstrap commands (dockermachine_backend.go): the blocked worker is a Provisioned Machine with no Node.
grep -q '"kind": "JoinTimeout"' <<<"$status" || fail "no JoinTimeout recorded"
k -n "$NAMESPACE" get events --field-selector "involvedObject.name=$stuck" | grep -q RemediationRequested \
  || fail "no RemediationRequested event on $stuck"
k -n "$NAMESPACE" get mjc
say "PASSED: $stuck (blocked bootstrap) replaced through CAPI; $joined joined"
