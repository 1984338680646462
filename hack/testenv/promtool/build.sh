#!/usr/bin/env bash
# Builds promtool from its Go module (this folder's go.mod pins github.com/prometheus/prometheus), for
# `promtool check rules` on the PrometheusRule JoinGuard ships. Same cache scheme as hack/testenv/build.sh:
# a folder outside git keyed by the pinned version and a hash of go.mod, go.sum and this script; a binary
# already there is reused. Prints what it does, a heartbeat while compiling, and how long it took.
#
#   hack/testenv/promtool/build.sh           build if missing, print the binary's path on the last line
#   hack/testenv/promtool/build.sh --print   only print the binary's path (no build)
#
# Measured cold (empty module and build caches, 2 shared cores): ~30 s of module downloads, ~230 s compiling.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${JOINGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/joinguard}"

version="$(awk '$1 == "github.com/prometheus/prometheus" { print $2; exit }' "$here/go.mod")"
[[ -n "$version" ]] || { echo "[promtool build] cannot read the prometheus version from $here/go.mod" >&2; exit 1; }
key="$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -c1-12)"
bin="$cache/bin/promtool-${version}_${key}"

if [[ "${1:-}" == "--print" ]]; then echo "$bin/promtool"; exit 0; fi
if [[ -x "$bin/promtool" ]]; then
  echo "[promtool build] cached: $bin/promtool" >&2
  echo "$bin/promtool"
  exit 0
fi
mkdir -p "$bin"

now() { date +%s; }
s=$(now)
# Module v0.3XX.Y is Prometheus 3.XX.Y (v0.305.0 is 3.5.0); promtool prints it with --version.
IFS=. read -r _ mid patch <<<"$version"
release="3.$(( 10#$mid - 300 )).$patch"
echo "[promtool build] building promtool $release (module $version; first build takes about 4 minutes on 2 cores) ..." >&2
( while sleep 30; do echo "[promtool build] still building, $(( $(now) - s ))s" >&2; done ) &
beat=$!
trap 'kill "$beat" 2>/dev/null || true' EXIT
# remove_all_sd leaves out the service-discovery plugins (cloud SDKs): `check rules` needs none of them,
# and the build is much smaller without them.
if ! (cd "$here" && CGO_ENABLED=0 go build -trimpath -tags remove_all_sd \
      -ldflags "-s -w -X github.com/prometheus/common/version.Version=${release}" \
      -o "$bin/promtool.tmp" github.com/prometheus/prometheus/cmd/promtool); then
  echo "[promtool build] FAILED" >&2
  exit 1
fi
mv "$bin/promtool.tmp" "$bin/promtool"
echo "[promtool build] built in $(( $(now) - s ))s: $bin/promtool" >&2
echo "$bin/promtool"
