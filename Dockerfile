# syntax=docker/dockerfile:1
# JoinGuard's image: the controller and its admission webhook (`node dist/cmd/joinguard.js`).
# Build: hack/release.sh VERSION (linux/amd64 and linux/arm64 with buildx), or hack/docker-build.sh; without Docker
# and without a registry, hack/image/build.sh (podman, on local stand-ins of both bases: how .ci/run builds the image
# that e2e/install/image.test.ts starts as the Deployment runs it; it passes both bases by their stand-ins' tags).
#
# The two bases, each pinned by digest: a release builds from these pins and resolves no tag to build from. The line
# `# tag: ...` above each names the tag the digest was taken for; hack/release.sh refuses a base named by tag alone
# and fails when a pin differs from what its tag resolves to at release time (moving a pin is a reviewed commit).
#
# Build stages: Node 24 on Debian bookworm. ITS DIGEST IS UNKNOWN HERE: no registry is reachable from the development
# sandbox and the project records none, so this is still the tag alone and hack/release.sh REFUSES to build the
# release image until it is filled in: `docker buildx imagetools inspect docker.io/library/node:24-bookworm`, then
# NODE_IMAGE=docker.io/library/node@sha256:<that index digest>.
# tag: docker.io/library/node:24-bookworm
ARG NODE_IMAGE=docker.io/library/node:24-bookworm
# Runtime: distroless Node 24 (no shell, no package manager), tag `nonroot` (uid 65532, as the Deployment's
# runAsUser). THE DIGEST IS NOT VERIFIED HERE: it was never pulled (no registry reachable); it is the digest ten
# public Dockerfiles and lock files pin for this tag (code search, December 2026; one of them notes it is the
# multi-arch index digest of :nonroot). hack/release.sh compares it with what the tag resolves to and fails if they
# differ.
# tag: gcr.io/distroless/nodejs24-debian12:nonroot
ARG RUNTIME_IMAGE=gcr.io/distroless/nodejs24-debian12@sha256:14d42e2511532589a7c7e01a753667a74fcc96266e137e8125006b87b0c32d0a

# --- compile: all dependencies, only the product's sources (no tests, test helpers, e2e or bench) ---
# Both build stages run on the builder's own platform (pure JavaScript: nothing to compile per architecture).
FROM --platform=$BUILDPLATFORM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# The lint workspace's manifest (npm ci needs every workspace the lock names; its tools are devDependencies).
COPY lint/package.json ./lint/
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json ./
COPY api ./api
COPY runtime ./runtime
COPY controllers ./controllers
COPY webhooks ./webhooks
COPY cmd ./cmd
# A build config that narrows tsconfig.json to what runs in the image.
RUN printf '%s\n' '{"extends":"./tsconfig.json","compilerOptions":{"sourceMap":false,"types":["node"]},' \
      '"include":["api","runtime","controllers","webhooks","cmd"],' \
      '"exclude":["**/*.test.ts","**/testing/**","node_modules","dist"]}' > tsconfig.image.json \
 && npx tsc -p tsconfig.image.json \
 && test -f dist/cmd/joinguard.js

# --- production node_modules only ---
FROM --platform=$BUILDPLATFORM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
COPY lint/package.json ./lint/
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts && npm cache clean --force

# --- the version line's commit (controllers/version.ts reads build-info.json beside package.json) ---
FROM --platform=$BUILDPLATFORM ${NODE_IMAGE} AS info
ARG GIT_COMMIT=""
RUN node -e 'const c=process.argv[1]; require("fs").writeFileSync("/build-info.json", JSON.stringify({gitCommit: /^[0-9a-f]{7,40}$/.test(c) ? c : ""})+"\n")' "${GIT_COMMIT}"

# --- runtime: distroless Node 24, non-root, nothing but dist and production modules ---
# Nothing is written to the image's filesystem at run time: the Deployment mounts it read-only, with an
# emptyDir at /tmp and the webhook certificate from a Secret.
FROM ${RUNTIME_IMAGE}
ENV NODE_ENV=production
# V8 heap setting chosen by measurement (docs/decisions/v8-heap-small-semi-space-and-memory-limit.md; bench/heap-results.txt):
# small semi-spaces cut peak RSS at 10,000 Machines from 418 to 299 MiB for ~6 % more CPU. NODE_OPTIONS, not
# an ENTRYPOINT flag, so that the Deployment's NODE_OPTIONS can change it (the command line would win).
ENV NODE_OPTIONS=--max-semi-space-size=2
# glibc's allocator, chosen by measurement (docs/decisions/glibc-allocator-two-arenas-and-thresholds.md; bench/history.json):
# at most two arenas, allocations of 32 KiB and more mmap'd (returned when freed), the top of the heap trimmed past
# 1 MiB. Peak RSS at 10,000 Machines 136 -> 125 MiB (mean of 3 rounds each), CPU within noise. The Deployment
# states the same (bench/node-options.test.ts keeps the image, the Deployment and the bench equal).
ENV MALLOC_ARENA_MAX=2
ENV MALLOC_MMAP_THRESHOLD_=32768
ENV MALLOC_TRIM_THRESHOLD_=1048576
WORKDIR /app
COPY --from=deps --chown=0:0 /app/node_modules ./node_modules
COPY --from=build --chown=0:0 /src/dist ./dist
COPY --chown=0:0 package.json ./
# The license the image is distributed under, as a file and as the OCI label (hack/release-smoke.sh checks both on
# the pushed image).
COPY --chown=0:0 LICENSE ./LICENSE
LABEL org.opencontainers.image.licenses="Apache-2.0"
COPY --from=info --chown=0:0 /build-info.json ./build-info.json
# The numeric uid matches the Deployment's runAsUser, so runAsNonRoot can verify it; files stay root-owned
# and read-only to it.
USER 65532:65532
EXPOSE 8443 9440 9443
# distroless keeps node at /nodejs/bin/node; no shell resolves a bare `node`.
ENTRYPOINT ["/nodejs/bin/node", "/app/dist/cmd/joinguard.js"]
