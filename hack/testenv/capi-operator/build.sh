#!/usr/bin/env bash
# Builds the Cluster API Operator's manager from its Go module (pinned in go.mod beside this script) and copies its
# CRDs beside the binary, for e2e/lifecycle/capi-operator.test.ts. Same cache scheme as hack/testenv/promtool/build.sh:
# a folder outside git keyed by the version and a hash of go.mod, go.sum and this script; a binary already there is
# reused. Built with go build's defaults, so Go's build cache is reused too. Measured cold here, on 2 cores shared
# with other builds (load ~30): 1146 s; warm cache: 21 s.
#
#   hack/testenv/capi-operator/build.sh           build if missing, print the folder (capi-operator, crds/) last
#   hack/testenv/capi-operator/build.sh --print   only print the folder (no build)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${JOINGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/joinguard}"
module=sigs.k8s.io/cluster-api-operator
version="$(awk -v m="$module" '$1 == m { print $2; exit }' "$here/go.mod")"
[[ -n "$version" ]] || { echo "[capi-operator build] cannot read the $module version from $here/go.mod" >&2; exit 1; }
key="$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -c1-12)"
bin="$cache/bin/capi-operator-${version}_${key}"

if [[ "${1:-}" == "--print" ]]; then echo "$bin"; exit 0; fi
if [[ -x "$bin/capi-operator" && -d "$bin/crds" ]]; then
  echo "[capi-operator build] cached: $bin" >&2
  echo "$bin"
  exit 0
fi
mkdir -p "$bin"
now() { date +%s; }
s=$(now)
echo "[capi-operator build] building the Cluster API Operator $version (cold: several minutes on 2 cores) ..." >&2
( while sleep 60; do echo "[capi-operator build] still building, $(( $(now) - s ))s" >&2; done ) &
beat=$!
trap 'kill "$beat" 2>/dev/null || true' EXIT
if ! (cd "$here" && go build -o "$bin/capi-operator.tmp.$$" "$module/cmd"); then
  echo "[capi-operator build] FAILED" >&2
  exit 1
fi
dir="$(cd "$here" && go list -m -f '{{.Dir}}' "$module")"
rm -rf "$bin/crds" && mkdir -p "$bin/crds" && cp "$dir"/config/crd/bases/*.yaml "$bin/crds/"
mv "$bin/capi-operator.tmp.$$" "$bin/capi-operator"
echo "[capi-operator build] built in $(( $(now) - s ))s: $bin" >&2
echo "$bin"
