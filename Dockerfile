# syntax=docker/dockerfile:1
# Build: compile TypeScript and generate proto types.
FROM node:22-bookworm-slim AS build
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
COPY scripts ./scripts
RUN npm run build && npm prune --omit=dev --ignore-scripts

# Run: distroless Node, non-root, nothing but the app.
FROM gcr.io/distroless/nodejs22-debian12:nonroot
WORKDIR /app
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY examples ./examples
USER 65532:65532
ENV NODE_ENV=production
# Entry points: oversell-gateway, oversell-agent, oversell (the CLI); see the wrappers below.
COPY --chmod=0755 <<'SH' /usr/local/bin/oversell-gateway
#!/nodejs/bin/node
import('/app/dist/gateway/main.js');
SH
COPY --chmod=0755 <<'SH' /usr/local/bin/oversell-agent
#!/nodejs/bin/node
// By hand only: the DaemonSet runs /nodejs/bin/node --jitless --no-expose-wasm
// on main.js (17 MiB less RSS); a shebang line carries one argument, not two.
import('/app/dist/agent/main.js');
SH
COPY --chmod=0755 <<'SH' /usr/local/bin/oversell
#!/nodejs/bin/node
import('/app/dist/cli/main.js');
SH
ENTRYPOINT ["/nodejs/bin/node"]
CMD ["/app/dist/gateway/main.js"]
