#!/usr/bin/env bash
# Fetches (downloads and unpacks, builds nothing) the CAPI sources the unit tables read into the Go module cache: CAPI
# v1.14's module and its API module (the v1beta2 CRDs and types: api/capi/fields, resources and fixtures tests) and
# v1.10's module (the v1beta1 CRDs), at the versions the tool modules pin. hack/run-tests.sh runs it first, before the
# unit job, so that a cold runner's unit job runs every test; hack/testenv/build.sh would fetch the same modules later
# for its builds. Cold: about 4 s, 85 MB; cached: under a second. Prints each folder; the last line is the cache.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
s=$(date +%s%N)
fetch() { # tool module, module paths
  local dir="$1"; shift
  (cd "$here/$dir" && go mod download -json "$@") | awk -F'"' '$2 == "Dir" { print "[capi-sources] " $4 } $2 == "Error" { print "[capi-sources] " $4; bad = 1 } END { exit bad }'
}
fetch capi-v1.14 sigs.k8s.io/cluster-api sigs.k8s.io/cluster-api/api >&2
fetch capi-v1.10 sigs.k8s.io/cluster-api >&2
echo "[capi-sources] fetched in $(( ($(date +%s%N) - s) / 1000000 )) ms" >&2
go env GOMODCACHE
