#!/usr/bin/env bash
# Build helm from the Go module proxy (Debian has no helm package).
#
#   helm.sh/helm/v3/cmd/helm at a pinned v3 release, GOTOOLCHAIN=local,
#   CGO_ENABLED=0, with the version ldflags of helm's own Makefile (so
#   `helm version` is right and `helm template`/`helm lint` assume the
#   Kubernetes minor of the client-go helm was built against, not 1.20).
#
# Output:  ${OVERSELL_CACHE:-$HOME/.cache/oversell}/helm/<HELM_VERSION>/helm
# Reused when present and its stamp (version + recipe) matches: a second run
# takes well under a second. A cold build takes a few minutes on 2 cores.
#
# Usage: test/deploy/build-helm.sh [--print-path] [--force]
#   --print-path  print the path of the helm binary and exit (builds nothing)
#   --force       rebuild
# Env:   HELM_VERSION overrides the pin, OVERSELL_CACHE moves the cache.
set -euo pipefail

# Newest helm v3 on the proxy whose go.mod (go 1.26.0) builds with Go 1.26.
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
RECIPE=1 # bump when the flags below change, to invalidate the stamp

CACHE="${OVERSELL_CACHE:-$HOME/.cache/oversell}"
DIR="$CACHE/helm/$HELM_VERSION"
BIN="$DIR/helm"
STAMP="$DIR/.stamp"
WANT="helm $HELM_VERSION recipe=$RECIPE"

say() { printf '[build-helm] %s\n' "$*"; }
die() { printf '[build-helm] ERROR: %s\n' "$*" >&2; exit 1; }

FORCE=0
for a in "$@"; do
  case "$a" in
    --print-path) echo "$BIN"; exit 0 ;;
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) die "unknown argument: $a" ;;
  esac
done

if [[ $FORCE == 0 && -x "$BIN" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
  say "helm $HELM_VERSION present: $BIN"
  exit 0
fi

command -v go >/dev/null || die "go not found (helm is built from the Go module proxy)"
export GOTOOLCHAIN=local CGO_ENABLED=0
say "$(go version); building helm $HELM_VERSION into $DIR"
start=$SECONDS

# The module's go.mod tells which client-go (and so which Kubernetes minor)
# helm was built against; helm's Makefile derives the default kube version
# from it the same way (client-go v0.Y.Z -> Kubernetes 1.Y).
say "downloading helm.sh/helm/v3@$HELM_VERSION"
gomod="$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')"
[[ -f "$gomod" ]] || die "could not download helm.sh/helm/v3@$HELM_VERSION"
needgo="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$gomod")"
say "helm $HELM_VERSION needs go $needgo"
clientgo="$(sed -n 's/^[[:space:]]*k8s.io\/client-go v0\.\([0-9]*\)\..*$/\1/p' "$gomod" | head -n1)"
[[ -n "$clientgo" ]] || die "no k8s.io/client-go in $gomod"
say "built against client-go v0.$clientgo: default Kubernetes version v1.$clientgo"

V=helm.sh/helm/v3
LDFLAGS="-s -w -X $V/internal/version.version=$HELM_VERSION -X $V/internal/version.gitTreeState=clean"
LDFLAGS+=" -X $V/pkg/lint/rules.k8sVersionMajor=1 -X $V/pkg/lint/rules.k8sVersionMinor=$clientgo"
LDFLAGS+=" -X $V/pkg/chartutil.k8sVersionMajor=1 -X $V/pkg/chartutil.k8sVersionMinor=$clientgo"

mkdir -p "$DIR"
tmp="$(mktemp -d "$DIR/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
say "go install $V/cmd/helm@$HELM_VERSION (dependencies download on first run, then compile)"
GOBIN="$tmp" go install -trimpath -ldflags "$LDFLAGS" "$V/cmd/helm@$HELM_VERSION"
"$tmp/helm" version --short >/dev/null || die "the built helm does not run"
mv -f "$tmp/helm" "$BIN"
echo "$WANT" > "$STAMP"
say "built $("$BIN" version --short) in $((SECONDS - start)) s: $BIN"
