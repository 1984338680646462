#!/usr/bin/env bash
# .ci/run's build of the image, one link of its background build chain: installs podman, runc, slirp4netns and
# debootstrap where they are missing (as it installs openssl), builds the image (hack/image/build.sh), and prints last
# the file that holds the image's ID, which .ci/run hands to e2e/install/image.test.ts as JOINGUARD_IMAGE (by ID:
# another build on the machine may move the name before the spec runs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
as_root() { if [[ $EUID -eq 0 ]]; then "$@"; else sudo -n "$@"; fi; }
tools=(podman runc slirp4netns debootstrap)
for t in "${tools[@]}"; do
  command -v "$t" >/dev/null && continue
  echo "[image] installing ${tools[*]}" >&2
  as_root apt-get update -qq >&2 && as_root apt-get install -y -qq "${tools[@]}" debian-archive-keyring >&2
  break
done
bash hack/image/build.sh >&2
echo "$PWD/${OUT_DIR:-out}/image-id.txt"
