#!/usr/bin/env bash
# Pack files into a single-layer OCI image archive that `ctr images import`
# (and `docker load`/`podman load`) accept. No registry, no image builder.
#
# Usage: scripts/cluster/mkimage.sh <out.tar> <image ref> <entrypoint JSON array> <src>=<dest>...
#   e.g. mkimage.sh pause.tar oversell.local/pause:1 '["/nodeutil","pause"]' /path/nodeutil=/nodeutil
# <src> files are copied to <dest> in the image, mode kept, owned by 0:0, mtime 0.
# The archive is an OCI layout (oci-layout, index.json, blobs/sha256/...); the
# index names the image with the annotations io.containerd.image.name (what
# ctr import reads) and org.opencontainers.image.ref.name.
set -euo pipefail
[[ $# -ge 4 ]] || { sed -n '2,11p' "$0" >&2; exit 2; }
out="$1" ref="$2" entry="$3"; shift 3

work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
mkdir -p "$work/rootfs" "$work/oci/blobs/sha256"
for m in "$@"; do
  src="${m%%=*}" dest="${m#*=}"
  [[ -f "$src" && "$dest" == /* ]] || { echo "mkimage.sh: bad mapping '$m' (want <existing file>=</abs/path>)" >&2; exit 2; }
  mkdir -p "$work/rootfs$(dirname "$dest")"
  cp -p "$src" "$work/rootfs$dest"
done
# Directories a container runtime expects to mount over.
mkdir -p "$work/rootfs"/{proc,sys,dev,etc,tmp,var/run}
: > "$work/rootfs/etc/hosts"; : > "$work/rootfs/etc/resolv.conf"; : > "$work/rootfs/etc/hostname"
echo 'root:x:0:0:root:/:/nodeutil' > "$work/rootfs/etc/passwd"
echo 'root:x:0:' > "$work/rootfs/etc/group"
chmod 1777 "$work/rootfs/tmp"

sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }
blob() { # file -> digest (moves it into blobs)
  local d; d="$(sha "$1")"; mv -f "$1" "$work/oci/blobs/sha256/$d"; echo "$d"
}

tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work/rootfs" -cf "$work/layer.tar" .
diff_id="$(sha "$work/layer.tar")"; layer_size="$(size "$work/layer.tar")"
layer="$(blob "$work/layer.tar")"

arch="$(go env GOARCH 2>/dev/null || dpkg --print-architecture 2>/dev/null || echo amd64)"
printf '{"architecture":"%s","os":"linux","config":{"Entrypoint":%s,"Env":["PATH=/"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created_by":"scripts/cluster/mkimage.sh"}]}' \
  "$arch" "$entry" "$diff_id" > "$work/config.json"
config_size="$(size "$work/config.json")"; config="$(blob "$work/config.json")"

printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
  "$config" "$config_size" "$layer" "$layer_size" > "$work/manifest.json"
manifest_size="$(size "$work/manifest.json")"; manifest="$(blob "$work/manifest.json")"

printf '{"imageLayoutVersion":"1.0.0"}' > "$work/oci/oci-layout"
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
  "$manifest" "$manifest_size" "$arch" "$ref" "${ref##*:}" > "$work/oci/index.json"

mkdir -p "$(dirname "$out")"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work/oci" -cf "$out.tmp" .
mv -f "$out.tmp" "$out"
echo "$out: $ref (manifest sha256:$manifest, $(( layer_size / 1024 )) KiB layer)"
