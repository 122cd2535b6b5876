#!/usr/bin/env bash
# Make sure a clean Debian machine (root, or sudo available) has everything the
# local control plane needs, then build/reuse the binaries (scripts/cluster/build.sh).
#
#   - Debian packages: openssl, curl, ca-certificates, util-linux (setsid, flock),
#     coreutils (base64), installed with apt-get only when a command is missing.
#   - For the real node (unless OVERSELL_REAL_NODE=0): containerd, runc,
#     containernetworking-plugins (/usr/lib/cni), iptables, nftables (nft: `down`
#     drops the nf_tables tables the node created), same rule.
#   - Go >= 1.26 must already be on PATH (Debian's golang package is older and no
#     toolchain can be downloaded here); this script checks and says so.
#
# Idempotent and fast when everything is present (build.sh then takes < 1 s).
# A cold build takes tens of minutes on 2 cores (see docs/local-cluster.md).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

say() { printf '[ci-install] %s\n' "$*"; }

SUDO=""
if [[ $(id -u) != 0 ]]; then
  if command -v sudo >/dev/null; then SUDO="sudo"; else SUDO="__none__"; fi
fi

declare -A PKG_FOR=([openssl]=openssl [curl]=curl [setsid]=util-linux [flock]=util-linux [base64]=coreutils)
missing=()
for cmd in openssl curl setsid flock base64; do
  command -v "$cmd" >/dev/null || missing+=("${PKG_FOR[$cmd]}")
done
[[ -f /etc/ssl/certs/ca-certificates.crt ]] || missing+=(ca-certificates)
if [[ "${OVERSELL_REAL_NODE:-1}" != 0 ]]; then
  declare -A NODE_PKG_FOR=([containerd]=containerd [ctr]=containerd [containerd-shim-runc-v2]=containerd [runc]=runc
    [iptables]=iptables [ip6tables]=iptables [nft]=nftables)
  for cmd in containerd ctr containerd-shim-runc-v2 runc iptables ip6tables nft; do
    command -v "$cmd" >/dev/null || missing+=("${NODE_PKG_FOR[$cmd]}")
  done
  for p in bridge host-local loopback; do
    [[ -x "/usr/lib/cni/$p" ]] || missing+=(containernetworking-plugins)
  done
fi

if (( ${#missing[@]} > 0 )); then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  [[ "$SUDO" == "__none__" ]] && { say "missing packages ${missing[*]} and not root (no sudo)"; exit 1; }
  command -v apt-get >/dev/null || { say "missing ${missing[*]} and no apt-get: install them by hand"; exit 1; }
  say "installing: ${missing[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  say "system packages present (openssl, curl, util-linux, coreutils, ca-certificates; real node: containerd, runc, CNI plugins, iptables, nftables)"
fi

command -v go >/dev/null || { say "Go not found on PATH: need Go >= 1.26 (e.g. /usr/local/go/bin)"; exit 1; }
gov="$(GOTOOLCHAIN=local go env GOVERSION)"   # e.g. go1.26.8
minor="${gov#go1.}"; minor="${minor%%.*}"
if [[ ! "$minor" =~ ^[0-9]+$ ]] || (( minor < 26 )); then
  say "Go $gov is too old: Kubernetes v1.36 and etcd v3.5.35 need Go >= 1.26"; exit 1
fi
say "Go $gov ok"

exec "$HERE/build.sh"
