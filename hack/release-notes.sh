#!/usr/bin/env bash
# The head of a release's notes (GitHub adds the generated ones below it): the image by digest and how to verify
# the image, a release file's signature and its provenance attestation. Reads out/image-digest.txt and GitHub's
# GITHUB_REPOSITORY, GITHUB_REF and GITHUB_REF_NAME; prints to stdout.
#
#   bash hack/release-notes.sh > out/release-header.md
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
digest="$(cat "${OUT_DIR:-out}/image-digest.txt")"
identity="https://github.com/${GITHUB_REPOSITORY}/.github/workflows/release.yaml@${GITHUB_REF}"
issuer=https://token.actions.githubusercontent.com
cat <<NOTES
Image: \`ghcr.io/joinguard/joinguard:${GITHUB_REF_NAME}\` (\`${digest}\`), signed with cosign (keyless); before signing,
it answered \`--version\` on linux/amd64 and on linux/arm64 (under QEMU emulation).

\`\`\`sh
cosign verify ghcr.io/joinguard/joinguard@${digest} --certificate-identity ${identity} --certificate-oidc-issuer ${issuer}
cosign verify-blob addon-components.yaml --bundle addon-components.yaml.sigstore.json --certificate-identity ${identity} --certificate-oidc-issuer ${issuer}
gh attestation verify addon-components.yaml --repo ${GITHUB_REPOSITORY}
\`\`\`

\`gitops.tar.gz\` is the GitOps base (\`tar -xzf gitops.tar.gz\`: \`gitops/base\` and \`gitops/components\`).
NOTES
