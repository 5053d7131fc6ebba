# syntax=docker/dockerfile:1
# Self-hosted noise-suppression API: gateway + model service in one image (docs/operations.md, "Docker").
# Three stages: `build` installs everything and compiles the TypeScript and the models; `deps` installs the runtime
# dependencies alone (npm ci --omit=dev); the final image gets those, dist/src and models/ and nothing that only
# builds (TypeScript, AssemblyScript, the model converter's TFLite/ONNX packages, test and lint tools).
# Nothing is downloaded when the container runs.
#
#   docker build -t nsm .
#   docker run -d --name nsm -p 8080:8080 -v nsm-data:/data --stop-timeout 75 --init nsm
#   docker exec nsm node dist/src/cli/keys.js create --workspace acme   # keys CLI inside the container
#
# Node.js: the current Active LTS line, 26 (LTS since 2026-10-28), on Debian 13 (trixie). The code also runs on
# Node 20.19+, 22 and 24 (README, "Node.js versions"). NODE_IMAGE picks another base with node and npm (the build
# stages also need apt-get); RUNTIME_IMAGE, one for the final stage only (node alone is enough there).

ARG NODE_IMAGE=node:26-trixie-slim
ARG RUNTIME_IMAGE=${NODE_IMAGE}

# ---- toolchain: what compiling native modules needs (better-sqlite3 builds from source without a prebuilt binary)
FROM ${NODE_IMAGE} AS toolchain
WORKDIR /app
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
# onnxruntime-node's install script would fetch CUDA libraries from NuGet; the CPU binaries are in the package.
ENV ONNXRUNTIME_NODE_INSTALL=skip
COPY package.json package-lock.json ./

# ---- build: every dependency (cached while the lockfile is unchanged), TypeScript + WebAssembly, the ONNX models
FROM toolchain AS build
RUN npm ci --ignore-scripts --no-audit --no-fund && npm rebuild
COPY . .
RUN npm run build && npm run models

# ---- deps: the runtime dependencies only, from the same lockfile -------------------------------------------------
FROM toolchain AS deps
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm rebuild
# Keep only this platform's ONNX Runtime binaries (the package ships darwin, win32 and linux for two CPUs each), and
# of better-sqlite3 only its compiled module (a build from source leaves the SQLite sources and object files); npm 9
# also leaves the scope folders of the dev packages it skipped, empty.
ARG TARGETARCH=amd64
RUN set -eu; \
    case "$TARGETARCH" in amd64) ort=x64 ;; arm64) ort=arm64 ;; *) echo "unsupported TARGETARCH $TARGETARCH" >&2; exit 1 ;; esac; \
    bin=node_modules/onnxruntime-node/bin/napi-v6; \
    find "$bin" -mindepth 1 -maxdepth 1 ! -name linux -exec rm -rf {} +; \
    find "$bin/linux" -mindepth 1 -maxdepth 1 ! -name "$ort" -exec rm -rf {} +; \
    test -f "$bin/linux/$ort/onnxruntime_binding.node"; \
    sq=node_modules/better-sqlite3; \
    find "$sq/build" -mindepth 1 ! -path "$sq/build/Release" ! -path "$sq/build/Release/better_sqlite3.node" -delete; \
    rm -rf "$sq/deps" "$sq/src"; \
    test -f "$sq/build/Release/better_sqlite3.node"; \
    find node_modules -mindepth 1 -maxdepth 1 -type d -empty -delete
# ffprobe's package ships its binary without execute bits, and its install script adds them for the owner only (root
# here): the service runs as "node".
RUN chmod 0755 node_modules/@ffprobe-installer/*/ffprobe \
 && node -e "require('child_process').execFileSync(require('@ffprobe-installer/ffprobe').path, ['-version'])"

# ---- runtime ----------------------------------------------------------------------------------------------------
FROM ${RUNTIME_IMAGE}
WORKDIR /app
ENV NODE_ENV=production \
    PORT=8080 \
    HOST=0.0.0.0 \
    DATA_DIR=/data \
    LOG_FORMAT=json
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/package.json /app/openapi.json ./
COPY --from=build /app/dist/src ./dist/src
COPY --from=build /app/models ./models
COPY --from=build /app/public ./public
COPY --from=build /app/bin ./bin
COPY --from=build /app/scripts/healthcheck.js ./scripts/healthcheck.js
# /data holds gateway.db, jobs.db, the generated admin secret and request temp files; the service runs as "node"
# (uid 1000), so a bind-mounted folder must be writable by uid 1000 (the app checks at start and says so if not).
RUN mkdir -p /data && chown node:node /data
VOLUME ["/data"]
EXPOSE 8080
USER node
# Liveness through GET /healthz (node, since the slim image has no curl). start-period covers worker start-up.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 CMD ["node", "scripts/healthcheck.js"]
# SIGTERM starts a drain of up to 60 s (in-flight denoise calls finish). Docker's default stop timeout is 10 s:
# give it more (docker run --stop-timeout 75, compose stop_grace_period: 75s, Kubernetes
# terminationGracePeriodSeconds: 75).
STOPSIGNAL SIGTERM
# --initial-old-space-size: see README, "Operations" (fewer full garbage collections on the main thread).
CMD ["node", "--initial-old-space-size=128", "dist/src/server.js"]
