# syntax=docker/dockerfile:1
# JoinGuard's image: the controller and its admission webhook (`node dist/cmd/joinguard.js`).
# Build: hack/docker-build.sh (or `docker build -t ghcr.io/joinguard/joinguard:v0.1.0 .`).
ARG NODE_IMAGE=node:24-bookworm
ARG RUNTIME_IMAGE=node:24-bookworm-slim

# --- compile: all dependencies, only the product's sources (no tests, test helpers, e2e or bench) ---
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json ./
COPY api ./api
COPY controllers ./controllers
COPY webhooks ./webhooks
COPY cmd ./cmd
# A build config that narrows tsconfig.json to what runs in the image.
RUN printf '%s\n' '{"extends":"./tsconfig.json","compilerOptions":{"sourceMap":false,"types":["node"]},' \
      '"include":["api","controllers","webhooks","cmd"],' \
      '"exclude":["**/*.test.ts","**/testing/**","node_modules","dist"]}' > tsconfig.image.json \
 && npx tsc -p tsconfig.image.json \
 && test -f dist/cmd/joinguard.js

# --- production node_modules only ---
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts && npm cache clean --force

# --- runtime: slim Node 24, non-root, nothing but dist and production modules ---
FROM ${RUNTIME_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY package.json ./
# The numeric uid matches the Deployment's runAsUser, so runAsNonRoot can verify it.
USER 65532:65532
EXPOSE 8443 8081 9443
ENTRYPOINT ["node", "/app/dist/cmd/joinguard.js"]
