# The two base images are build arguments; the defaults are the public images,
# so `docker build .` builds as it always did. A build without a container
# registry passes local bases made from Debian packages instead
# (scripts/image/build.sh; docs/install.md, "Building the image"). Any
# BUILD_IMAGE needs node >= 20 and npm on PATH; any RUNTIME_IMAGE needs
# /nodejs/bin/node and the user 65532, as distroless has them.
ARG BUILD_IMAGE=node:22-bookworm-slim
ARG RUNTIME_IMAGE=gcr.io/distroless/nodejs22-debian12:nonroot

# Build: compile TypeScript and generate proto types.
FROM ${BUILD_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# Scripts stay off for the dependencies (the grpc-js decoder fix is applied at run time: lib/grpc-stream-decoder.ts).
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY proto ./proto
COPY wire ./wire
COPY lib ./lib
COPY agent ./agent
COPY gateway ./gateway
COPY cli ./cli
COPY sim ./sim
COPY scripts ./scripts
RUN npm run build && npm prune --omit=dev --ignore-scripts

# Run: distroless Node (by default), non-root, nothing but the app.
FROM ${RUNTIME_IMAGE}
WORKDIR /app
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY examples ./examples
USER 65532:65532
ENV NODE_ENV=production
# Entry points: oversell-gateway, oversell-agent, oversell (the CLI): scripts/image/bin/.
COPY --chmod=0755 scripts/image/bin/ /usr/local/bin/
ENTRYPOINT ["/nodejs/bin/node"]
CMD ["/app/dist/gateway/main.js"]
