#!/usr/bin/env bash
# Check the image archive that scripts/image/build.sh wrote, the way a runtime
# would run it, without a container runtime: unpack its layers in order
# (whiteouts applied) into a root filesystem, read its config (entrypoint,
# cmd, user, env), and run, chrooted, as the image's user (65532):
#
#   1. the entrypoint + default cmd (the gateway) with --help;
#   2. the agent's command from deploy/base/agent.yaml with --help
#      (OVERSELL_AGENT_COMMAND='["/nodejs/bin/node", ...]' tries another);
#   3. the entry-point wrappers in /usr/local/bin (shebang /nodejs/bin/node);
#   4. the pipeline, live, in a network and mount namespace of its own, on a
#      read-only root filesystem: the gateway (local mode: no kubeconfig,
#      --policies flags, certificates on a tmpfs /tmp), the agent
#      reading this host's /proc and cgroups through /host/proc and
#      /host/sys/fs/cgroup (read-only binds, as the DaemonSet mounts them)
#      and streaming to it, then the image's CLI `oversell top` showing the
#      node with its usage, and the gateway's /readyz.
#
#   scripts/image/check.sh [archive]    default .oversell/images/oversell.tar
set -euo pipefail
# shellcheck source=scripts/image/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ARCHIVE="${1:-${OVERSELL_IMAGE_ARCHIVE:-$IMAGES_DIR/oversell.tar}}"
[[ -f "$ARCHIVE" ]] || die "$ARCHIVE: no such archive (scripts/image/build.sh makes it)"
ensure_packages unshare=util-linux ip=iproute2 curl=curl

WORK="$(mktemp -d "${TMPDIR:-/tmp}/oversell-image-check.XXXXXX")"
trap '$SUDO rm -rf --one-file-system "$WORK"' EXIT
ROOT="$WORK/rootfs"
mkdir -p "$WORK/archive" "$ROOT"
tar -xf "$ARCHIVE" -C "$WORK/archive"

# manifest.json -> config file and layers; config -> what the runtime runs.
mapfile -t meta < <(node -e '
  const fs = require("fs"), dir = process.argv[1];
  const [m] = JSON.parse(fs.readFileSync(dir + "/manifest.json", "utf8"));
  const c = JSON.parse(fs.readFileSync(dir + "/" + m.Config, "utf8")).config;
  console.log((m.RepoTags || []).join(","));
  console.log(c.User || "0:0");
  console.log(JSON.stringify([...(c.Entrypoint || []), ...(c.Cmd || [])]));
  console.log((c.Env || []).join("\u0001"));
  for (const l of m.Layers) console.log(l);
' "$WORK/archive")
tags="${meta[0]}" user="${meta[1]}" argv_json="${meta[2]}" env_line="${meta[3]}"
layers=("${meta[@]:4}")
say "$ARCHIVE: $tags, ${#layers[@]} layers, user $user, runs $argv_json"

for layer in "${layers[@]}"; do
  # Whiteouts first (a deletion in this layer of something below), then the files.
  while IFS= read -r wh; do
    base="${wh##*/}" dir="$(dirname "$wh")"
    if [[ "$base" == .wh..wh..opq ]]; then
      find "$ROOT/$dir" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
    else
      rm -rf "${ROOT:?}/$dir/${base#.wh.}"
    fi
  done < <(tar -tf "$WORK/archive/$layer" | grep -E '(^|/)\.wh\.' || true)
  $SUDO tar -xpf "$WORK/archive/$layer" -C "$ROOT" --same-owner --exclude='.wh.*'
done
rm -rf "$WORK/archive"
[[ "$user" == *:* ]] || user="$user:$user"
mapfile -t image_env < <(tr '\001' '\n' <<<"$env_line")
mapfile -t image_argv < <(node -e 'for (const a of JSON.parse(process.argv[1])) console.log(a)' "$argv_json")
# The agent's command as the DaemonSet runs it, or OVERSELL_AGENT_COMMAND (a JSON array) to try another.
mapfile -t agent_argv < <(node -e '
  const y = require("fs").readFileSync(process.argv[1], "utf8");
  const m = process.env.OVERSELL_AGENT_COMMAND || y.match(/command:\s*(\[.*\])/)[1];
  for (const a of JSON.parse(m)) console.log(a);' "$REPO/deploy/base/agent.yaml")

# in_image argv...: run argv chrooted in the image as its user, with only its env.
in_image() { $SUDO env -i "${image_env[@]}" chroot --userspec="$user" "$ROOT" "$@"; }

expect_help() {
  local what="$1" pattern="$2" out; shift 2
  if ! out="$(in_image "$@" --help 2>&1)" || ! grep -q "$pattern" <<<"$out"; then
    printf '%s\n' "$out" | tail -20 >&2
    die "$what: '$*' --help failed (output above)"
  fi
  say "ok: $what: $* --help -> \"$(grep -m1 "$pattern" <<<"$out")\""
}
expect_help "entrypoint + cmd" '^Usage: oversell-gateway' "${image_argv[@]}"
expect_help "agent (deploy/base/agent.yaml)" '^Usage: oversell-agent' "${agent_argv[@]}"
expect_help "wrapper" '^Usage: oversell-gateway' /usr/local/bin/oversell-gateway
expect_help "wrapper" '^Usage: oversell-agent' /usr/local/bin/oversell-agent
expect_help "wrapper" '^Usage: oversell ' /usr/local/bin/oversell
id_out="$(in_image /nodejs/bin/node -p 'process.getuid() + ":" + process.getgid() + " " + process.version + " certs " + require("tls").rootCertificates.length')"
say "ok: runs as $id_out"

# The live run. unshare: a network namespace (loopback only), a mount
# namespace (the binds vanish with it) and a PID namespace (whatever is left
# in it is killed when it ends).
say "live: gateway + agent in a private network namespace, agent reading this host's /proc and cgroups"
mkdir -p "$ROOT/proc" "$ROOT/host/proc" "$ROOT/host/sys/fs/cgroup"
export ROOT WORK
printf '%s\0' "${image_env[@]}" >"$WORK/env"
printf '%s\0' "${agent_argv[@]}" >"$WORK/agent_argv"
# shellcheck disable=SC2016 # expanded by the inner bash
$SUDO env ROOT="$ROOT" WORK="$WORK" USERSPEC="$user" unshare --net --mount --propagation private --pid --fork --kill-child bash -euo pipefail -c '
  ip link set lo up
  # Read-only root filesystem, as both workloads run (readOnlyRootFilesystem);
  # a tmpfs on /tmp for the certificates of the local-mode gateway.
  mount --bind "$ROOT" "$ROOT"
  mount -o remount,bind,ro "$ROOT"
  mount -t tmpfs -o mode=1777 tmpfs "$ROOT/tmp"
  mount --rbind /proc "$ROOT/proc"
  mount --rbind -o ro /proc "$ROOT/host/proc"
  mount --rbind -o ro /sys/fs/cgroup "$ROOT/host/sys/fs/cgroup"
  mapfile -d "" -t env <"$WORK/env"
  mapfile -d "" -t agent <"$WORK/agent_argv"
  run() { env -i "${env[@]}" chroot --userspec="$USERSPEC" "$ROOT" "$@"; }
  # Backgrounded directly (no function, no subshell): $! is the node process itself.
  env -i "${env[@]}" chroot --userspec="$USERSPEC" "$ROOT" /nodejs/bin/node /app/dist/gateway/main.js --bind-address 127.0.0.1 --tls-dir /tmp/tls \
    --policies flags --log-level warn >"$WORK/gateway.log" 2>&1 &
  gw=$!
  env -i "${env[@]}" chroot --userspec="$USERSPEC" "$ROOT" "${agent[@]}" --node-name image-check --gateway 127.0.0.1:50052 --pods-file /app/examples/local-pods.yaml \
    --proc-root /host/proc --cgroup-root /host/sys/fs/cgroup --metrics-address 127.0.0.1:9091 \
    --log-level warn >"$WORK/agent.log" 2>&1 &
  ag=$!
  trap "kill $gw $ag 2>/dev/null || true; wait 2>/dev/null || true" EXIT
  ok=""
  for _ in $(seq 1 60); do
    kill -0 "$gw" 2>/dev/null && kill -0 "$ag" 2>/dev/null || { out="(gateway or agent exited)"; break; }
    if out="$(run /usr/local/bin/oversell --address 127.0.0.1:50051 top -o wide 2>&1)" && grep -q "^image-check" <<<"$out"; then ok=1; break; fi
    sleep 0.5
  done
  if [[ -z "$ok" ]]; then
    echo "--- oversell top: $out"; echo "--- gateway log"; tail -20 "$WORK/gateway.log"; echo "--- agent log"; tail -20 "$WORK/agent.log"
    if grep -q "WebAssembly is not defined" "$WORK/agent.log"; then
      echo "--- Node 22 without WebAssembly (--jitless, --no-expose-wasm) dies on an ESM import of node:http (its"
      echo "    ESM facade reads the lazy http.WebSocket, which loads undici, which compiles llhttp as WebAssembly)."
      echo "    agent/main.ts defuses that before the agent loads: did something import node:http ahead of it?"
    fi
    exit 1
  fi
  printf "%s\n" "$out"
  curl -fsS http://127.0.0.1:9090/healthz >/dev/null
  curl -fsS http://127.0.0.1:9091/metrics | grep -m1 "^oversell_" >/dev/null
' >&2 || die "live run failed (logs above)"
say "ok: live: the agent streamed this host's usage to the gateway; the image's CLI shows it (above)"
say "image check passed"
