#!/usr/bin/env bash
# Builds JoinGuard's image from the Dockerfile as written, with podman, where no Docker engine and no image registry
# are (the development machines and .ci/run): the bases come from hack/image/base.sh (local stand-ins, tagged with
# the Dockerfile's names), the build never pulls, and its RUN steps reach the npm registry through the host's network.
#
#   hack/image/build.sh                 build ghcr.io/joinguard/joinguard:v<package.json version> for this machine
#   IMAGE=localhost/jg:dev hack/image/build.sh
#
# The two base arguments differ from a release build: NODE_IMAGE and RUNTIME_IMAGE name the stand-ins by the tags
# hack/image/base.sh prints, because a base made here cannot carry the published digest the Dockerfile pins.
# Everything else (stages, files, user, ENV, labels, entry point) is the Dockerfile's. The last line printed is the
# image's name; its ID is in ${OUT_DIR:-out}/image-id.txt. Needs podman and runc (apt-get install podman runc
# debootstrap): podman's default runtime, crun, cannot set its rlimits here, so every container runs with runc and
# explicit ulimits.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

# The commit the image records: HEAD of a tree without changes (a developer's changed tree is built, not claimed).
if [[ -z "${JOINGUARD_IMAGE_COMMIT+set}" ]]; then
  JOINGUARD_IMAGE_COMMIT="$(git rev-parse HEAD 2>/dev/null || echo "")"
  if [[ -n "$JOINGUARD_IMAGE_COMMIT" && -n "$(git status --porcelain 2>/dev/null)" ]]; then JOINGUARD_IMAGE_COMMIT=""; fi
  export JOINGUARD_IMAGE_COMMIT
fi
# Rootful podman (and base.sh's debootstrap) need root: run again under sudo where the user is not (GitHub's runners).
if [[ $EUID -ne 0 ]]; then
  exec sudo -n --preserve-env=IMAGE,OUT_DIR,JOINGUARD_CACHE,JOINGUARD_IMAGE_COMMIT bash "$0" "$@"
fi

for tool in podman runc; do
  command -v "$tool" >/dev/null || { echo "[image] needs $tool: apt-get install -y podman runc debootstrap" >&2; exit 1; }
done
version="$(node -p 'require("./package.json").version')"
image="${IMAGE:-ghcr.io/joinguard/joinguard:v${version}}"
out="${OUT_DIR:-out}"
started=$(date +%s)

# base.sh prints the stand-ins' tags: the build stages' first, the runtime's second.
bases_out="$(bash hack/image/base.sh)"
mapfile -t bases <<<"$bases_out"
builder_tag="${bases[0]:?hack/image/base.sh printed no builder tag}"
runtime_tag="${bases[1]:?hack/image/base.sh printed no runtime tag}"
runtime_pin="$(sed -n 's/^ARG RUNTIME_IMAGE=//p' Dockerfile)"
commit="$JOINGUARD_IMAGE_COMMIT"

# The host's CA bundle for the build's RUN steps (npm ci reaches the registry through the host's network, which
# on some machines passes a TLS-inspecting proxy whose CA only the host trusts): mounted, never copied into a layer.
ca_args=()
ca="${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}"
if [[ -f "$ca" ]]; then
  mkdir -p "$out"
  printf 'cafile=/etc/ssl/certs/ca-certificates.crt\n' >"$out/image-build.npmrc"
  ca_args=(-v "$ca:/etc/ssl/certs/ca-certificates.crt:ro" -v "$PWD/$out/image-build.npmrc:/usr/local/etc/npmrc:ro")
fi

echo "[image] building $image with podman (runtime base $runtime_tag: the local stand-in, not $runtime_pin)" >&2
mkdir -p "$out"
s=$(date +%s)
podman build --runtime runc --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --pull=never --network host \
  --layers -f Dockerfile -t "$image" "${ca_args[@]}" \
  --build-arg "NODE_IMAGE=$builder_tag" --build-arg "RUNTIME_IMAGE=$runtime_tag" \
  --build-arg "GIT_COMMIT=$commit" \
  --label "org.opencontainers.image.version=v$version" \
  --label "org.opencontainers.image.revision=$commit" \
  --label "io.joinguard.base=local stand-ins from hack/image/base.sh" \
  --iidfile "$out/image-id.txt" . >"$out/image-build.log" 2>&1 || { tail -40 "$out/image-build.log" >&2; exit 1; }
size="$(podman image inspect --format '{{.Size}}' "$image")"
echo "[image] built $image ($(cat "$out/image-id.txt" | cut -c1-19), $(( size / 1024 / 1024 )) MiB) in $(( $(date +%s) - s ))s; $(( $(date +%s) - started ))s with the bases" >&2
echo "$image"
