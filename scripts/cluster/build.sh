#!/usr/bin/env bash
# Build a real, local Kubernetes control plane from the Go module proxy.
#
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl  (k8s.io/kubernetes)
#   etcd                                                              (go.etcd.io/etcd/server/v3)
#   kwok                                                              (sigs.k8s.io/kwok/cmd/kwok)
#
# Every component is built in its own generated "wrapper" Go module (no .go
# files of ours, never `go mod tidy`-ed): the wrapper requires the upstream
# module at a pinned version and, for k8s.io/kubernetes, replaces each
# k8s.io/<staging> module (required there as v0.0.0) with its v0.Y.Z release.
#
# Output:  ${OVERSELL_CACHE:-$HOME/.cache/oversell}/k8s/<K8S_VERSION>/bin/
# A binary is rebuilt only when it is missing or its stamp (pinned version +
# recipe) differs, so a second run with everything present takes well under
# a second. A cold build takes tens of minutes on 2 cores.
#
# Usage: scripts/cluster/build.sh [--print-bin-dir] [--force]
#   --print-bin-dir  print the bin directory and exit (builds nothing)
#   --force          rebuild every binary
# Env:   K8S_VERSION, ETCD_VERSION, KWOK_VERSION override the pins (for trying
#        another release; the defaults are what the project tests against),
#        OVERSELL_CACHE moves the cache, BUILD_JOBS is passed to `go build -p`.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.36.3}"   # newest v1.3x patch on the proxy that builds with Go 1.26
ETCD_VERSION="${ETCD_VERSION:-v3.5.35}" # etcd 3.5.x (k8s 1.31+ needs >= 3.5)
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
RECIPE=1 # bump when flags/ldflags below change, to invalidate stamps

CACHE="${OVERSELL_CACHE:-$HOME/.cache/oversell}"
ROOT="$CACHE/k8s/$K8S_VERSION"
BIN="$ROOT/bin"
SRC="$ROOT/src"

FORCE=0
for a in "$@"; do
  case "$a" in
    --print-bin-dir) echo "$BIN"; exit 0 ;;
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument: $a" >&2; exit 2 ;;
  esac
done

K8S_MINOR="${K8S_VERSION#v1.}"; K8S_MINOR="${K8S_MINOR%%.*}"
K8S_PATCH="${K8S_VERSION##*.}"
STAGING_VERSION="v0.${K8S_MINOR}.${K8S_PATCH}"

K8S_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy)
ALL=("${K8S_CMDS[@]}" etcd kwok)

stamp_of() { # component -> expected stamp content
  case "$1" in
    etcd) echo "etcd $ETCD_VERSION recipe=$RECIPE" ;;
    kwok) echo "kwok $KWOK_VERSION recipe=$RECIPE" ;;
    *)    echo "$1 $K8S_VERSION recipe=$RECIPE" ;;
  esac
}
is_fresh() { # component
  [[ $FORCE == 0 && -x "$BIN/$1" && -f "$BIN/.stamp-$1" ]] &&
    [[ "$(cat "$BIN/.stamp-$1")" == "$(stamp_of "$1")" ]]
}

# Fast path: everything present and current -> done, no go invocation at all.
all_fresh=1
for c in "${ALL[@]}"; do is_fresh "$c" || { all_fresh=0; break; }; done
stages_fresh() {
  [[ $FORCE == 0 && -f "$ROOT/kwok-stages.yaml" && -f "$ROOT/.stamp-kwok-stages" ]] &&
    [[ "$(cat "$ROOT/.stamp-kwok-stages")" == "kwok-stages $KWOK_VERSION" ]]
}
stages_fresh || all_fresh=0
if [[ $all_fresh == 1 ]]; then
  echo "build.sh: all binaries present in $BIN (k8s $K8S_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION)"
  exit 0
fi

command -v go >/dev/null || { echo "build.sh: 'go' not found in PATH (need Go >= 1.26)" >&2; exit 1; }

# Never download a toolchain; resolve modules freely (wrappers have no go.sum
# up front); ignore any go.work of the caller; static binaries.
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0
export GOFLAGS="-mod=mod -buildvcs=false"
JOBS="${BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"

mkdir -p "$BIN" "$SRC"

# Serialise concurrent builds of the same version (e.g. parallel test jobs).
exec 9>"$ROOT/.build.lock"
if command -v flock >/dev/null; then
  if ! flock -n 9; then
    echo "build.sh: another build of $K8S_VERSION is running; waiting for it..."
    flock 9
  fi
fi

T0=$(date +%s)
log() { printf '[build %4ds] %s\n' "$(( $(date +%s) - T0 ))" "$*"; }

# Run a long command with a heartbeat line every 60 s so the log shows progress.
with_heartbeat() { # label cmd...
  local label="$1"; shift
  local start; start=$(date +%s)
  # The sleep must not keep our stdout open (a caller reading it through a pipe
  # would wait for it) and must die with the heartbeat loop.
  (
    sp=""
    trap '[[ -n $sp ]] && kill "$sp" 2>/dev/null; exit 0' TERM
    while true; do
      sleep 60 >/dev/null 2>&1 & sp=$!
      wait "$sp"
      log "  ... still building $label ($(( $(date +%s) - start ))s)"
    done
  ) &
  local hb=$!
  local rc=0
  "$@" || rc=$?
  kill "$hb" 2>/dev/null; wait "$hb" 2>/dev/null || true
  return $rc
}

go_build() { # label wrapper-dir out pkg ldflags
  local label="$1" dir="$2" out="$3" pkg="$4" ldflags="$5"
  local start; start=$(date +%s)
  log "building $label ($pkg)"
  ( cd "$dir" && with_heartbeat "$label" go build -p "$JOBS" -trimpath -ldflags "-s -w $ldflags" -o "$out.tmp" "$pkg" )
  mv -f "$out.tmp" "$out"
  stamp_of "$label" > "$BIN/.stamp-$label"
  log "built $label in $(( $(date +%s) - start ))s ($(du -h "$out" | cut -f1))"
}

# Put a freshly generated $W/go.mod.new in place. `go build -mod=mod` may add
# requirements to go.mod and fills go.sum, so compare against the last
# generated text (go.mod.gen), not go.mod, and start over only when it changed.
install_wrapper() { # dir
  local W="$1"
  if ! cmp -s "$W/go.mod.new" "$W/go.mod.gen" || [[ ! -f "$W/go.mod" ]]; then
    cp "$W/go.mod.new" "$W/go.mod"; rm -f "$W/go.sum"
  fi
  mv -f "$W/go.mod.new" "$W/go.mod.gen"
}

# Module proxy fetch of a .mod file, via the go command (honours GOPROXY).
mod_file_of() { # module@version -> path of its go.mod in the module cache
  go mod download -json "$1" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p'
}

# ---------------------------------------------------------------- kubernetes
need_k8s=0
for c in "${K8S_CMDS[@]}"; do is_fresh "$c" || need_k8s=1; done
if [[ $need_k8s == 1 ]]; then
  log "kubernetes $K8S_VERSION (staging modules $STAGING_VERSION), go $(go env GOVERSION), -p $JOBS"
  W="$SRC/kubernetes"; mkdir -p "$W"
  upstream_mod="$(cd "$SRC" && GOFLAGS='' mod_file_of "k8s.io/kubernetes@$K8S_VERSION")"
  [[ -f "$upstream_mod" ]] || { echo "build.sh: cannot fetch k8s.io/kubernetes@$K8S_VERSION go.mod" >&2; exit 1; }
  go_line="$(grep -m1 '^go ' "$upstream_mod")"
  godebug_line="$(grep -m1 '^godebug ' "$upstream_mod" || true)"
  # Staging modules: required as v0.0.0 and replaced with ./staging/src/... upstream.
  mapfile -t staging < <(
    sed -n '/^replace (/,/^)/p' "$upstream_mod" | awk '$2=="=>" && $3 ~ /^\.\/staging\// {print $1}' | sort -u
  )
  [[ ${#staging[@]} -gt 0 ]] || { echo "build.sh: no staging replace block found in $upstream_mod" >&2; exit 1; }
  {
    echo "// Generated by scripts/cluster/build.sh - do not edit, do not 'go mod tidy'."
    echo "module oversell.local/kubernetes-build"
    echo
    echo "$go_line"
    [[ -n "$godebug_line" ]] && echo "$godebug_line"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    for m in "${staging[@]}"; do
      # Only modules upstream actually requires (v0.0.0); some listed ones
      # (e.g. k8s.io/sample-cli-plugin) are not published for every release.
      if grep -qE "^[[:space:]]*$m v0\.0\.0([[:space:]]|$)" "$upstream_mod"; then
        echo "	$m => $m $STAGING_VERSION"
      fi
    done
    echo ")"
  } > "$W/go.mod.new"
  install_wrapper "$W"
  log "wrapper module: $W/go.mod ($(grep -c '=>' "$W/go.mod") staging replaces)"

  vpkgs=(k8s.io/component-base/version k8s.io/client-go/pkg/version)
  build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  ld=""
  for p in "${vpkgs[@]}"; do
    ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$K8S_MINOR"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=$build_date"
  done
  for c in "${K8S_CMDS[@]}"; do
    is_fresh "$c" && { log "$c: up to date"; continue; }
    go_build "$c" "$W" "$BIN/$c" "k8s.io/kubernetes/cmd/$c" "$ld"
  done
fi

# ---------------------------------------------------------------------- etcd
if ! is_fresh etcd; then
  W="$SRC/etcd"; mkdir -p "$W"
  cat > "$W/go.mod.new" <<EOF
// Generated by scripts/cluster/build.sh - do not edit, do not 'go mod tidy'.
module oversell.local/etcd-build

go 1.26.0

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
EOF
  install_wrapper "$W"
  # In 3.5.x the etcd main package is the module root (server/main.go).
  go_build etcd "$W" "$BIN/etcd" "go.etcd.io/etcd/server/v3" ""
fi

# ---------------------------------------------------------------------- kwok
if ! is_fresh kwok; then
  W="$SRC/kwok"; mkdir -p "$W"
  cat > "$W/go.mod.new" <<EOF
// Generated by scripts/cluster/build.sh - do not edit, do not 'go mod tidy'.
module oversell.local/kwok-build

go 1.26.0

require sigs.k8s.io/kwok $KWOK_VERSION
EOF
  install_wrapper "$W"
  go_build kwok "$W" "$BIN/kwok" "sigs.k8s.io/kwok/cmd/kwok" \
    "-X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=$K8S_VERSION"
fi

# kwok's own process has no default Stages (kwokctl injects them); take the
# default node/pod stages from the same kwok module release, so they match
# the binary: node-initialize, node-heartbeat-with-lease (kwok keeps a 40 s
# node Lease), pod-ready, pod-complete, pod-delete.
if ! stages_fresh; then
  kdir="$(cd "$SRC" && GOFLAGS='' go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  st="$kdir/kustomize/stage"
  {
    echo "# Generated by scripts/cluster/build.sh from sigs.k8s.io/kwok@$KWOK_VERSION kustomize/stage (Apache-2.0)."
    for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
             pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
      [[ -f "$st/$f" ]] || { echo "build.sh: missing kwok stage $st/$f" >&2; exit 1; }
      echo "---"; cat "$st/$f"
    done
  } > "$ROOT/kwok-stages.yaml.tmp"
  mv -f "$ROOT/kwok-stages.yaml.tmp" "$ROOT/kwok-stages.yaml"
  echo "kwok-stages $KWOK_VERSION" > "$ROOT/.stamp-kwok-stages"
  log "wrote $ROOT/kwok-stages.yaml"
fi

log "done: $BIN"
for c in "${ALL[@]}"; do printf '  %-24s %s\n' "$c" "$(cat "$BIN/.stamp-$c")"; done
