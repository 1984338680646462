#!/usr/bin/env bash
# Builds JoinGuard's image where a Docker engine is reachable, and says so plainly where it is not.
#
#   hack/docker-build.sh                      build ghcr.io/joinguard/joinguard:v<package.json version>
#   IMAGE=registry.example/jg:dev hack/docker-build.sh
#   hack/docker-build.sh --kind-load <name>   also load the image into the kind cluster <name>
#   hack/docker-build.sh --push               also push it
#
# Exit codes: 0 built; 2 no Docker engine here (nothing built); other: the build failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

version="$(sed -n 's/^  "version": "\(.*\)",$/\1/p' package.json | head -1)"
image="${IMAGE:-ghcr.io/joinguard/joinguard:v${version}}"
kind_cluster=""
push=false
while [[ $# -gt 0 ]]; do
  case "$1" in
    --kind-load) kind_cluster="${2:?--kind-load needs a kind cluster name}"; shift 2 ;;
    --push) push=true; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "docker-build: unknown argument $1" >&2; exit 64 ;;
  esac
done

if ! command -v docker >/dev/null 2>&1; then
  echo "docker-build: no docker CLI on PATH; nothing built. Install Docker (or build the Dockerfile with another builder)." >&2
  exit 2
fi
if ! docker info >/dev/null 2>&1; then
  echo "docker-build: the docker CLI is here but no Docker engine answers${DOCKER_HOST:+ at $DOCKER_HOST}; nothing built." >&2
  echo "docker-build: start a Docker engine (or set DOCKER_HOST) and run this again." >&2
  exit 2
fi

echo "docker-build: building $image"
docker build --pull -t "$image" -f Dockerfile .
if [[ -n "$kind_cluster" ]]; then
  command -v kind >/dev/null 2>&1 || { echo "docker-build: --kind-load needs kind on PATH" >&2; exit 1; }
  # Not `kind load docker-image`: with the containerd image store (Docker 29's default) it names platforms whose
  # content is not there; an archive of the host's platform loads (as e2e/kind/run.sh does).
  archive="$(mktemp -d)/image.tar"
  docker save --platform "linux/$(docker version -f '{{.Server.Arch}}')" -o "$archive" "$image"
  kind load image-archive "$archive" --name "$kind_cluster"
  rm -f "$archive"
fi
if $push; then docker push "$image"; fi
echo "docker-build: built $image"
