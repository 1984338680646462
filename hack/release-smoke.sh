#!/usr/bin/env bash
# The pushed image, started by digest on every platform it is published for, before anything signs it: arm64 runs
# under QEMU emulation on the amd64 runner (docker/setup-qemu-action). Each platform's image must answer --version
# with this release's version and commit, as the Deployment runs it (its user, a read-only root), carry the license
# label, and hold the LICENSE file. Any difference exits non-zero and the release stops before signing.
#
#   hack/release-smoke.sh DIGEST VERSION     DIGEST sha256:<64 hex> (out/image-digest.txt), VERSION like 0.1.0
#
# Not here: the e2e/kind flow against the pushed digest (see CHANGELOG, "Known not to work, or not proven").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

digest="${1:-}"
version="${2:-}"
if [[ ! "$digest" =~ ^sha256:[0-9a-f]{64}$ || ! "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "usage: hack/release-smoke.sh sha256:<digest> VERSION" >&2
  exit 64
fi
ref="ghcr.io/joinguard/joinguard@${digest}"
commit="$(git rev-parse HEAD 2>/dev/null || echo "")"
want="Version: v${version} (git commit: ${commit})"
# The platforms hack/release.sh builds.
platforms=(linux/amd64 linux/arm64)
failed=0
fail() { echo "release-smoke: $*" >&2; failed=1; }
for platform in "${platforms[@]}"; do
  run=(docker run --rm --pull always --platform "$platform" --read-only --user 65532:65532 --network none)
  got="$("${run[@]}" "$ref" --version 2>&1)" || { fail "${platform}: ${ref} --version exited non-zero: ${got}"; continue; }
  [[ "$got" == "$want" ]] || fail "${platform}: --version said '${got}', not '${want}'"
  # What was pulled for this platform is this platform's image.
  arch="$(docker image inspect --format '{{.Os}}/{{.Architecture}}' "$ref" 2>&1)" || true
  [[ "$arch" == "$platform" ]] || fail "${platform}: the image pulled is ${arch}"
  label="$(docker image inspect --format '{{index .Config.Labels "org.opencontainers.image.licenses"}}' "$ref" 2>&1)" || true
  [[ "$label" == "Apache-2.0" ]] || fail "${platform}: label org.opencontainers.image.licenses is '${label}', not Apache-2.0"
  license="$("${run[@]}" --entrypoint /nodejs/bin/node "$ref" -p 'require("fs").readFileSync("/app/LICENSE", "utf8").includes("Apache License")' 2>&1)" || true
  [[ "$license" == "true" ]] || fail "${platform}: /app/LICENSE is not the Apache License (${license})"
  if [[ $failed -eq 0 ]]; then echo "release-smoke: ${platform}: ${got}; licensed Apache-2.0 (label and /app/LICENSE)"; fi
done
exit "$failed"
