#!/usr/bin/env bash
# Builds kustomize from its Go module (pinned in go.mod beside this script), for e2e/lifecycle/gitops.test.ts. Same
# cache scheme as hack/testenv/promtool/build.sh: a folder outside git keyed by the version and a hash of go.mod,
# go.sum and this script; a binary already there is reused.
#
#   hack/testenv/kustomize/build.sh           build if missing, print the binary's path on the last line
#   hack/testenv/kustomize/build.sh --print   only print the binary's path (no build)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${JOINGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/joinguard}"
version="$(awk '$1 == "sigs.k8s.io/kustomize/kustomize/v5" { print $2; exit }' "$here/go.mod")"
[[ -n "$version" ]] || { echo "[kustomize build] cannot read the kustomize version from $here/go.mod" >&2; exit 1; }
key="$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -c1-12)"
bin="$cache/bin/kustomize-${version}_${key}"

if [[ "${1:-}" == "--print" ]]; then echo "$bin/kustomize"; exit 0; fi
if [[ -x "$bin/kustomize" ]]; then
  echo "[kustomize build] cached: $bin/kustomize" >&2
  echo "$bin/kustomize"
  exit 0
fi
mkdir -p "$bin"
s=$(date +%s)
echo "[kustomize build] building kustomize $version ..." >&2
if ! (cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/kustomize.tmp.$$" sigs.k8s.io/kustomize/kustomize/v5); then
  echo "[kustomize build] FAILED" >&2
  exit 1
fi
mv "$bin/kustomize.tmp.$$" "$bin/kustomize"
echo "[kustomize build] built in $(( $(date +%s) - s ))s: $bin/kustomize" >&2
echo "$bin/kustomize"
