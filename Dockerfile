# Self-hosted noise-suppression API: gateway + model service in one image.
# Everything the service needs comes from npm (ffmpeg via @ffmpeg-installer, ONNX Runtime via onnxruntime-node);
# the ONNX graphs are generated from the TFLite networks during `npm ci` (prepare step).
FROM node:20-bookworm-slim AS build
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
COPY . .
RUN npm ci && npm prune --omit=dev

FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production PORT=8080 DATA_DIR=/data
COPY --from=build /app /app
RUN mkdir -p /data && chown node:node /data
VOLUME ["/data"]
EXPOSE 8080
USER node
CMD ["node", "dist/src/server.js"]
