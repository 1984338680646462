#!/usr/bin/env bash
# Cuts a JoinGuard release into out/ (or $OUT_DIR):
#   addon-components.yaml          clusterctl's components (the CRD, RBAC, Deployment, webhooks, cert-manager objects)
#   metadata.yaml                  clusterctl's release series -> contract
#   observability-components.yaml  optional: metrics Service, ServiceMonitor, PrometheusRule, Grafana dashboard
#   grafana-dashboard.json         the dashboard alone, for a Grafana import
#   shard-components.yaml          optional: one shard's Deployment (JOINGUARD_SHARD=<value>), for sharded installs
#   gitops.tar.gz                  the GitOps base (out/gitops/: kustomize base/ and components/), as one file
#   checksums.txt                  sha256 of the six files above (sha256sum -c checksums.txt)
#   image-digest.txt               with --push: the pushed image's digest (what the release workflow smoke-tests
#                                  and signs), written only once the registry serves that digest for the tag
# and, where Docker buildx is available, the image ghcr.io/joinguard/joinguard:vVERSION for linux/amd64 and
# linux/arm64 from the Dockerfile's bases as pinned there by digest (hack/release-bases.sh: no tag is resolved to
# build from, a base named by tag alone or a pin its tag no longer resolves to stops the release).
#
#   hack/release.sh VERSION            the files, and the image where buildx runs (built, not pushed)
#   hack/release.sh VERSION --files    the files only (the release workflow's test job, which hands them over)
#   hack/release.sh VERSION --push     the image only, pushed, from the files already in out/ (the publish job: they
#                                      come from the test job; checked against checksums.txt, never built here, so
#                                      no devDependency runs where the signing identity is held)
#
# VERSION is without the v, e.g. 0.1.0; it must equal package.json's. Without buildx and without --push the script
# says so, builds no image, and still writes the files (exit 0); --push without buildx fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

version="${1:-}"
mode=all
case "${2:-}" in
  "") ;;
  --files) mode=files ;;
  --push) mode=push ;;
  *) version="" ;;
esac
if [[ ! "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "usage: hack/release.sh VERSION [--files|--push]   (VERSION like 0.1.0, without the v)" >&2
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
files=(addon-components.yaml metadata.yaml observability-components.yaml grafana-dashboard.json shard-components.yaml gitops.tar.gz)

if [[ "$mode" != push ]]; then
  echo "release: v${version} -> ${out}/"
  # The manifests build checks clusterctl's contract (one Namespace, container manager, every variable with a
  # default, the image tagged v${version}, a release series for ${version%.*}) and refuses to write otherwise.
  npx tsx manifests/build.ts "$out"
  # The GitOps base as one file, the same bytes from the same tree: names sorted, times and owners fixed.
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$out" -cf - gitops | gzip -n > "$out/gitops.tar.gz"
  (cd "$out" && sha256sum "${files[@]}" > checksums.txt && cat checksums.txt)
  if [[ "$mode" == files ]]; then exit 0; fi
else
  # The files were built by the test job: exactly these, unchanged since, naming this release's image.
  [[ -f "$out/checksums.txt" ]] || { echo "release: --push needs the release files in ${out}/ (the test job's artifact): no checksums.txt" >&2; exit 1; }
  listed="$(awk '{print $2}' "$out/checksums.txt" | tr '\n' ' ')"
  if [[ "$listed" != "${files[*]} " ]]; then
    echo "release: ${out}/checksums.txt lists ${listed:-nothing}, not ${files[*]}" >&2
    exit 1
  fi
  (cd "$out" && sha256sum --strict --quiet -c checksums.txt) || { echo "release: the release files in ${out}/ differ from their checksums.txt" >&2; exit 1; }
  grep -q "image: ${image}\$" "$out/addon-components.yaml" || { echo "release: ${out}/addon-components.yaml does not name ${image}" >&2; exit 1; }
fi

if ! command -v docker >/dev/null 2>&1 || ! docker buildx version >/dev/null 2>&1; then
  echo "release: no Docker buildx here: the image ${image} was NOT built (the files in ${out}/ are complete)." >&2
  if [[ "$mode" == push ]]; then exit 1; fi
  echo "release: build it where buildx runs: hack/release.sh ${version} --push (or the tagged-release workflow); without Docker or a registry, hack/image/build.sh builds it with podman on local stand-in bases." >&2
  exit 0
fi
# The bases as the Dockerfile pins them, compared with what their tags resolve to now: any difference stops here.
if ! bases="$(bash hack/release-bases.sh Dockerfile)"; then
  echo "release: the image ${image} was NOT built: its bases are not pinned as a release needs (above)" >&2
  exit 1
fi
echo "release: bases (the Dockerfile's pins, resolved by digest only): ${bases//$'\n'/, }"
commit="$(git rev-parse HEAD 2>/dev/null || echo "")"
echo "release: building ${image} for ${platforms} (commit ${commit:-unknown})"
mkdir -p "$out"
args=(buildx build --platform "$platforms" -t "$image" -f Dockerfile
  --build-arg "GIT_COMMIT=${commit}"
  --label "org.opencontainers.image.version=v${version}"
  --label "org.opencontainers.image.revision=${commit}"
  --label "org.opencontainers.image.source=https://github.com/joinguard/joinguard"
  --metadata-file "${out}/build-metadata.json"
  --provenance=true --sbom=true)
if [[ "$mode" == push ]]; then args+=(--push); fi
docker "${args[@]}" .
if [[ "$mode" == push ]]; then
  # The digest of the pushed multi-platform index: what is smoke-tested and signed (by digest, never by tag). The
  # registry must serve that digest for the tag; a difference fails the release.
  digest="$(node -p 'require(process.argv[1])["containerimage.digest"] ?? ""' "$(cd "$out" && pwd)/build-metadata.json")"
  if [[ ! "$digest" =~ ^sha256:[0-9a-f]{64}$ ]]; then
    echo "release: the build recorded no image digest (${out}/build-metadata.json: '${digest}')" >&2
    exit 1
  fi
  served="$(docker buildx imagetools inspect "$image" --format '{{json .Manifest.Digest}}' | tr -d '"' || true)"
  if [[ "$served" != "$digest" ]]; then
    echo "release: digest mismatch: pushed ${digest}, the registry serves ${image} as ${served:-nothing}" >&2
    exit 1
  fi
  echo "${digest}" > "${out}/image-digest.txt"
  echo "release: pushed ${image}@${digest}"
else
  echo "release: built ${image} (not pushed; run again with --push to publish)"
fi
