#!/usr/bin/env bash
# Builds cert-manager's controller, webhook and cainjector from this tool module (go.mod pins
# github.com/cert-manager/cert-manager; the three mains beside this script), for the install tests. Same cache
# scheme as hack/testenv/build.sh: a folder outside git keyed by the pinned version and a hash of go.mod, go.sum,
# the mains and this script; binaries already there are reused. Also copies cert-manager's CRDs (deploy/crds) from
# the module, renders its chart's webhook Service and webhook configurations (chart-render, beside this script) into
# webhook.yaml, and writes cert-manager.json (version, module folder). Prints what it builds, a heartbeat while
# compiling, and how long it took.
#
#   hack/testenv/cert-manager/build.sh           build what is missing; the last line printed is the bin folder
#   hack/testenv/cert-manager/build.sh --print   only print the bin folder (no build)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${JOINGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/joinguard}"

version="$(awk '{ if ($1 == "require") { $1 = "" ; $0 = $0 } } $1 == "github.com/cert-manager/cert-manager" { print $2; exit }' "$here/go.mod")"
[[ -n "$version" ]] || { echo "[cert-manager build] cannot read the cert-manager version from $here/go.mod" >&2; exit 1; }
key="$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" "$here"/*/*.go | sha256sum | cut -c1-12)"
bin="$cache/bin/cert-manager-${version}_${key}"

if [[ "${1:-}" == "--print" ]]; then echo "$bin"; exit 0; fi
mkdir -p "$bin"
# One build at a time: the install specs start in parallel (.ci/run) and each runs this script; the others wait
# here for the first, then find the binaries cached, instead of compiling the same packages side by side.
exec 9>"$bin.lock"
if ! flock -n 9; then
  echo "[cert-manager build] another build of $bin is running; waiting for it ..." >&2
  flock 9
fi

now() { date +%s; }
start_all=$(now)
# cert-manager's version package, as its release builds set it (`cert-manager-controller --version` has no flag
# here; the version is logged at start).
ldflags="-s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=${version} -X github.com/cert-manager/cert-manager/pkg/util.AppGitState=clean"
i=0
for name in controller webhook cainjector; do
  i=$((i + 1))
  out="$bin/cert-manager-$name"
  if [[ -x "$out" ]]; then
    echo "[cert-manager build $i/3] cert-manager-$name: cached" >&2
    continue
  fi
  echo "[cert-manager build $i/3] cert-manager-$name: building cert-manager $version's $name (first build takes minutes) ..." >&2
  s=$(now)
  ( while sleep 30; do echo "[cert-manager build $i/3] cert-manager-$name: still building, $(( $(now) - s ))s" >&2; done ) &
  beat=$!
  if ! (cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out.tmp.$$" "./$name"); then
    kill "$beat" 2>/dev/null || true
    echo "[cert-manager build] cert-manager-$name FAILED" >&2
    exit 1
  fi
  kill "$beat" 2>/dev/null || true
  wait "$beat" 2>/dev/null || true
  mv "$out.tmp.$$" "$out"
  echo "[cert-manager build $i/3] cert-manager-$name: built in $(( $(now) - s ))s" >&2
done

# CRDs and the chart's webhook objects come from the module of the same version. Temporary names are per process
# (parallel test processes may run this at once); each rename is atomic.
module_dir="$(cd "$here" && go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)"
if [[ ! -d "$bin/crds" ]]; then
  mkdir -p "$bin/crds.tmp.$$"
  cp "$module_dir/deploy/crds"/*.yaml "$bin/crds.tmp.$$/"
  mv -T "$bin/crds.tmp.$$" "$bin/crds" 2>/dev/null || rm -rf "$bin/crds.tmp.$$"
fi
if [[ ! -s "$bin/webhook.yaml" ]]; then
  (cd "$here" && go run ./chart-render "$module_dir/deploy/charts/cert-manager" cert-manager "$version" \
    webhook-service.yaml webhook-validating-webhook.yaml webhook-mutating-webhook.yaml) >"$bin/webhook.yaml.tmp.$$"
  mv "$bin/webhook.yaml.tmp.$$" "$bin/webhook.yaml"
fi
printf '{ "version": "%s", "moduleDir": "%s" }\n' "$version" "$module_dir" >"$bin/cert-manager.json.tmp.$$"
mv "$bin/cert-manager.json.tmp.$$" "$bin/cert-manager.json"

echo "[cert-manager build] cert-manager $version done in $(( $(now) - start_all ))s: $bin" >&2
echo "$bin"
