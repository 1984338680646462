#!/usr/bin/env bash
# The image's two bases as a release builds them: each pinned by digest in the Dockerfile (ARG NODE_IMAGE and
# ARG RUNTIME_IMAGE, value `name@sha256:<64 hex>`), each with the tag it was taken for on the line above
# (`# tag: name:tag`). Refuses (exit 1) a base named by tag alone or with no tag line; where Docker buildx runs, also
# refuses a pin that differs from what its tag resolves to now, or a tag that does not resolve: a release neither
# builds from a moving tag nor from a stale pin unnoticed (moving a pin is a reviewed commit of the Dockerfile).
#
#   hack/release-bases.sh [DOCKERFILE]     prints NAME=pin for each base; exit 1 with the reasons otherwise
set -euo pipefail
dockerfile="${1:-Dockerfile}"
[[ -f "$dockerfile" ]] || { echo "release-bases: no $dockerfile" >&2; exit 1; }

resolve=false
if command -v docker >/dev/null 2>&1 && docker buildx version >/dev/null 2>&1; then resolve=true; fi
problems=()
for arg in NODE_IMAGE RUNTIME_IMAGE; do
  pin="$(sed -n "s/^ARG ${arg}=//p" "$dockerfile")"
  tag="$(grep -B1 "^ARG ${arg}=" "$dockerfile" | sed -n 's/^# tag: *//p')"
  if [[ -z "$pin" ]]; then problems+=("${arg}: no ARG ${arg}= line in ${dockerfile}"); continue; fi
  if [[ ! "$pin" =~ ^[^@[:space:]]+@sha256:[0-9a-f]{64}$ ]]; then
    problems+=("${arg}=${pin} names its base by tag alone, not by digest; the digest to fill in is unknown here: resolve it where a registry answers (docker buildx imagetools inspect ${tag:-$pin}) and pin ${arg}=<name>@sha256:<digest> in a reviewed commit")
    continue
  fi
  if [[ -z "$tag" ]]; then problems+=("${arg}: no '# tag: <name:tag>' line above it (the tag its digest was taken for)"); continue; fi
  if [[ "${tag%:*}" != "${pin%@*}" ]]; then problems+=("${arg}: pinned ${pin%@*} but its tag line names ${tag}"); continue; fi
  if $resolve; then
    current="$(docker buildx imagetools inspect "$tag" --format '{{json .Manifest.Digest}}' 2>/dev/null | tr -d '"' || true)"
    if [[ -z "$current" ]]; then
      problems+=("${arg}: ${tag} does not resolve here, so the pin ${pin#*@} cannot be compared with it")
      continue
    fi
    if [[ "$current" != "${pin#*@}" ]]; then
      problems+=("${arg}: digest mismatch: pinned ${pin#*@}, ${tag} resolves to ${current} today; check the new base and move the pin in a reviewed commit")
      continue
    fi
  fi
  echo "${arg}=${pin}"
done
if [[ ${#problems[@]} -gt 0 ]]; then
  printf 'release-bases: %s\n' "${problems[@]}" >&2
  exit 1
fi
