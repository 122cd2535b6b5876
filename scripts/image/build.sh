#!/usr/bin/env bash
# Build the oversell image from the repository's Dockerfile with buildah
# (Debian's package; no daemon, no registry) and export it as an image archive
# that `ctr -n k8s.io images import`, `docker load` and `podman load` read.
#
#   scripts/image/build.sh                 local bases (scripts/image/build-bases.sh)
#   scripts/image/build.sh --public-bases  the Dockerfile's default bases (needs docker.io and gcr.io)
#
# Environment:
#   OVERSELL_IMAGE          tag, default ghcr.io/oversell/oversell:<package.json version>,
#                           the name deploy/ and the Helm chart use
#   OVERSELL_IMAGE_ARCHIVE  default .oversell/images/oversell.tar (docker-archive format)
#   STORAGE_DRIVER          buildah's storage driver (default: buildah's, overlay here; vfs works anywhere)
#   OVERSELL_BUILDAH_ROOT   a storage of its own (<dir>/root, <dir>/run) instead of /var/lib/containers/storage
#
# Cached: the archive is rebuilt only when the Dockerfile, the build context's
# files or a base image changed (a sha256 over them, kept next to the
# archive); buildah's layer cache (--layers) keeps `npm ci` when only sources
# changed. Writes <archive>.env with IMAGE=, IMAGE_ID=, ARCHIVE= for the
# scripts that import it.
set -euo pipefail
# shellcheck source=scripts/image/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bases=local
[[ "${1:-}" == "--public-bases" ]] && bases=public

version="$(node -p 'require(process.argv[1]).version' "$REPO/package.json")"
IMAGE="${OVERSELL_IMAGE:-ghcr.io/oversell/oversell:$version}"
ARCHIVE="${OVERSELL_IMAGE_ARCHIVE:-$IMAGES_DIR/oversell.tar}"
mkdir -p "$(dirname "$ARCHIVE")"

# One build at a time per archive.
exec 9>"$ARCHIVE.lock"
flock 9

build_args=()
if [[ $bases == local ]]; then
  while IFS='=' read -r k v; do build_args+=(--build-arg "$k=$v"); done < <("$REPO/scripts/image/build-bases.sh")
  pull=(--pull-never)
else
  ensure_packages buildah=buildah runc=runc
  pull=()
fi

# The inputs: what the Dockerfile reads from the context (.dockerignore'd paths
# left out) and the base images' IDs.
inputs_hash() {
  (
    cd "$REPO"
    echo "image=$IMAGE bases=$bases ${build_args[*]}"
    if [[ $bases == local ]]; then
      for a in "${build_args[@]}"; do
        [[ $a == --build-arg ]] && continue
        bh inspect --type image --format '{{.FromImageID}}' "${a#*=}"
      done
    fi
    find Dockerfile .dockerignore package.json package-lock.json tsconfig.json proto wire lib agent gateway cli sim scripts examples \
      -path proto/gen -prune -o -type f -print0 | sort -z | xargs -0 sha256sum
  ) | sha256sum | cut -c1-64
}
inputs="$(inputs_hash)"
if [[ -f "$ARCHIVE" && -f "$ARCHIVE.inputs" && "$(cat "$ARCHIVE.inputs")" == "$inputs" ]] && image_exists "$IMAGE"; then
  say "$ARCHIVE: up to date ($IMAGE, inputs ${inputs:0:12})"
  exit 0
fi

say "buildah build -f Dockerfile ($bases bases) -t $IMAGE"
bh build --isolation chroot --layers "${pull[@]}" "${build_args[@]}" \
  -f "$REPO/Dockerfile" -t "$IMAGE" "$REPO" >&2

say "exporting docker-archive $ARCHIVE"
rm -f "$ARCHIVE.tmp" "$ARCHIVE.inputs"
bh push --quiet "$IMAGE" "docker-archive:$ARCHIVE.tmp:$IMAGE" >/dev/null
mv -f "$ARCHIVE.tmp" "$ARCHIVE"
image_id="$(bh inspect --type image --format '{{.FromImageID}}' "$IMAGE")"
printf 'IMAGE=%s\nIMAGE_ID=sha256:%s\nARCHIVE=%s\n' "$IMAGE" "$image_id" "$ARCHIVE" >"$ARCHIVE.env"
echo "$inputs" >"$ARCHIVE.inputs"
say "done: $ARCHIVE ($(du -m "$ARCHIVE" | cut -f1) MiB, image $IMAGE, id ${image_id:0:12})"
