#!/usr/bin/env bash
# Cuts a JoinGuard release into out/ (or $OUT_DIR):
#   addon-components.yaml          clusterctl's components (the CRD, RBAC, Deployment, webhooks, cert-manager objects)
#   metadata.yaml                  clusterctl's release series -> contract
#   observability-components.yaml  optional: metrics Service, ServiceMonitor, PrometheusRule, Grafana dashboard
#   grafana-dashboard.json         the dashboard alone, for a Grafana import
#   shard-components.yaml          optional: one shard's Deployment (JOINGUARD_SHARD=<value>), for sharded installs
#   checksums.txt                  sha256 of the five files above (sha256sum -c checksums.txt)
#   image-digest.txt               with --push: the pushed image's digest (what the release workflow signs)
# and, where Docker buildx is available, the image ghcr.io/joinguard/joinguard:vVERSION for linux/amd64 and
# linux/arm64 (pushed with --push; without it, built into the buildx cache only, since a multi-platform
# image cannot be loaded into a local Docker image store).
#
#   hack/release.sh VERSION [--push]      VERSION without the v, e.g. 0.1.0; it must equal package.json's
#
# Without buildx the script says so, builds no image, and still writes the files (exit 0): the files are
# the release that clusterctl reads; the image is built where a Docker engine runs (.github/workflows/release.yaml).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

version="${1:-}"
push=false
[[ "${2:-}" == "--push" ]] && push=true
if [[ ! "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "usage: hack/release.sh VERSION [--push]   (VERSION like 0.1.0, without the v)" >&2
  exit 64
fi
pkg_version="$(node -p 'require("./package.json").version')"
if [[ "$version" != "$pkg_version" ]]; then
  echo "release: VERSION $version is not package.json's version $pkg_version; bump package.json (and manifests/clusterctl/metadata.yaml for a new minor) first" >&2
  exit 1
fi
out="${OUT_DIR:-out}"
image="ghcr.io/joinguard/joinguard:v${version}"
platforms="linux/amd64,linux/arm64"

echo "release: v${version} -> ${out}/"
# The manifests build checks clusterctl's contract (one Namespace, container manager, every variable with a
# default, the image tagged v${version}, a release series for ${version%.*}) and refuses to write otherwise.
npx tsx manifests/build.ts "$out"
files=(addon-components.yaml metadata.yaml observability-components.yaml grafana-dashboard.json shard-components.yaml)
(cd "$out" && sha256sum "${files[@]}" > checksums.txt && cat checksums.txt)

runtime_pin="$(sed -n 's/^ARG RUNTIME_IMAGE=//p' Dockerfile)"
if ! command -v docker >/dev/null 2>&1 || ! docker buildx version >/dev/null 2>&1; then
  echo "release: no Docker buildx here: the image ${image} was NOT built (the files in ${out}/ are complete)." >&2
  echo "release: build it where buildx runs: hack/release.sh ${version} --push (or the tagged-release workflow); without Docker or a registry, hack/image/build.sh builds it with podman on local stand-in bases." >&2
  exit 0
fi
# The pinned base against what its tag names today: a difference is not an error, but it is shown.
runtime_tag="${runtime_pin%@*}"
current="$(docker buildx imagetools inspect "$runtime_tag" --format '{{json .Manifest.Digest}}' 2>/dev/null | tr -d '"' || true)"
echo "release: runtime base pinned ${runtime_pin#*@}; ${runtime_tag} resolves to ${current:-(could not resolve)} today"

# The build stages' image (node:24-bookworm) moves weekly: the release pins it to the digest it resolves to now,
# printed here and in the image's provenance, so the build can be repeated.
builder_tag="$(sed -n 's/^ARG NODE_IMAGE=//p' Dockerfile)"
builder_digest="$(docker buildx imagetools inspect "$builder_tag" --format '{{json .Manifest.Digest}}' 2>/dev/null | tr -d '"' || true)"
if [[ -z "$builder_digest" ]]; then
  echo "release: cannot resolve ${builder_tag} to a digest; refusing to build from a moving tag" >&2
  exit 1
fi
echo "release: build stages pinned to ${builder_tag}@${builder_digest}"
commit="$(git rev-parse HEAD 2>/dev/null || echo "")"
echo "release: building ${image} for ${platforms} (commit ${commit:-unknown})"
args=(buildx build --platform "$platforms" -t "$image" -f Dockerfile
  --build-arg "NODE_IMAGE=${builder_tag}@${builder_digest}"
  --build-arg "GIT_COMMIT=${commit}"
  --label "org.opencontainers.image.version=v${version}"
  --label "org.opencontainers.image.revision=${commit}"
  --label "org.opencontainers.image.source=https://github.com/joinguard/joinguard"
  --metadata-file "${out}/build-metadata.json"
  --provenance=true --sbom=true)
if $push; then args+=(--push); fi
docker "${args[@]}" .
if $push; then
  # The digest of the pushed multi-platform index: what cosign signs (by digest, never by tag).
  digest="$(node -p 'require(process.argv[1])["containerimage.digest"]' "${out}/build-metadata.json")"
  echo "${digest}" > "${out}/image-digest.txt"
  docker buildx imagetools inspect "$image"
  echo "release: pushed ${image}@${digest}"
else
  echo "release: built ${image} (not pushed; run again with --push to publish)"
fi
