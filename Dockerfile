# syntax=docker/dockerfile:1

# feedsync image: one binary, every command. The default command is one sync run
# (what a CronJob wants); a Deployment passes `sync --watch` as its args.
#
#   docker build -t feedsync:0.1.0 .
#   docker run --rm -e FEED_BASE_URL=... -e FEED_API_KEY_FILE=/run/secrets/key feedsync:0.1.0
#
# .ci/image-recipe repeats the runtime stage's steps on a machine without Docker.

# --- build: dev dependencies, TypeScript to dist/, the CLI bundled into dist/bin/ ---
FROM node:24-bookworm-slim AS build
WORKDIR /app
# The lockfile alone decides the dependency layer, so code changes reuse the cache.
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
RUN npm run build

# --- runtime: production dependencies, compiled code, migrations -------------------
FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
# No dev dependency (TypeScript, test tools) reaches the image; the cache goes too.
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY migrations ./migrations
# Files stay owned by root and read-only to the process: the program writes nothing
# but maybe /tmp, so the root filesystem can be mounted read-only. 1000 is the base
# image's `node` user; numeric so that runAsNonRoot can verify it.
USER 1000:1000
# 9464: /metrics, /healthz, /readyz of `sync --watch`; 8080: `serve-webhooks`.
EXPOSE 9464 8080
# Exec form: node is PID 1 and gets SIGTERM itself, so a run drains and exits 0.
# No HEALTHCHECK: the default command exits when done, and the orchestrator's own
# probes (Kubernetes, compose) know which mode they started.
# Semi-spaces of 8 MB instead of V8's 16: a catch-up keeps every event a second or so,
# so the young generation grows to its limit; halving it takes about 15 MB off the
# worker's peak RSS at no CPU cost measured (docs/BENCHMARKS.md runs the worker so).
ENTRYPOINT ["node", "--max-semi-space-size=8", "--liftoff-only", "--heap-growing-percent=50", "dist/bin/feedsync.js"]
CMD ["sync", "--once"]
