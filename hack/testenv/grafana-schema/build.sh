#!/usr/bin/env bash
# Builds the dashboard schema checker (main.go beside this script; the Grafana Foundation SDK pinned in go.mod), for
# e2e/lifecycle/grafana-schema.test.ts. Same cache scheme as hack/testenv/promtool/build.sh: a folder outside git keyed
# by a hash of go.mod, go.sum, main.go and this script; a binary already there is reused.
#
#   hack/testenv/grafana-schema/build.sh           build if missing, print the binary's path on the last line
#   hack/testenv/grafana-schema/build.sh --print   only print the binary's path (no build)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${JOINGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/joinguard}"
version="$(awk '$1 == "require" && $2 == "github.com/grafana/grafana-foundation-sdk/go" { print $3; exit }' "$here/go.mod")"
[[ -n "$version" ]] || { echo "[grafana-schema build] cannot read the SDK version from $here/go.mod" >&2; exit 1; }
key="$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" "$here/build.sh" | sha256sum | cut -c1-12)"
bin="$cache/bin/grafana-schema-${version}_${key}"

if [[ "${1:-}" == "--print" ]]; then echo "$bin/grafana-schema"; exit 0; fi
if [[ -x "$bin/grafana-schema" ]]; then
  echo "[grafana-schema build] cached: $bin/grafana-schema" >&2
  echo "$bin/grafana-schema"
  exit 0
fi
mkdir -p "$bin"
s=$(date +%s)
echo "[grafana-schema build] building the dashboard schema checker (Grafana Foundation SDK $version) ..." >&2
if ! (cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/grafana-schema.tmp.$$" .); then
  echo "[grafana-schema build] FAILED" >&2
  exit 1
fi
mv "$bin/grafana-schema.tmp.$$" "$bin/grafana-schema"
echo "[grafana-schema build] built in $(( $(date +%s) - s ))s: $bin/grafana-schema" >&2
echo "$bin/grafana-schema"
