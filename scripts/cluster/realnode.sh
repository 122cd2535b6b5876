# shellcheck shell=bash
# The real node of the local cluster: containerd + runc + CNI bridge from Debian,
# kubelet and kube-proxy built by build.sh, a pause image we build. Sourced by
# cluster.sh (uses its STATE, BIN, PKI, start/stop/say/die, kubectl_admin ...).
#
# Everything host-global is namespaced and recorded, so `down` can undo it even
# after a crashed `up`:
#   bridge $NODE_BRIDGE (oversell0, 198.18.0.1/24), containerd with its own
#   socket/root/state under $NODE_DIR (not the system containerd), runc state
#   under $NODE_DIR/runc, netns under containerd's state dir, CNI config and
#   IPAM state under $NODE_DIR/cni, kubelet root dir $NODE_DIR/kubelet.
# What the kubelet/kube-proxy/bridge plugin change outside those (sysctls,
# iptables chains, /var/lib/kubelet/device-plugins, /var/log/containers,
# /run/containerd/s shim sockets, kubepods cgroups) is recorded at `up` in
# $NODE_DIR/host-before/ and put back by `down`.

NODE_DIR="$STATE/node"
NODE_ENV="$NODE_DIR/node.env"            # what `up` used (names, addresses, ports)
HOST_BEFORE="$NODE_DIR/host-before"     # host state before the first `up`
HOST_MARKER=/run/oversell-real-node     # host-global: which state dir owns the real node
NODE_COMPONENTS=(containerd kubelet apiserver-forward kube-proxy)

REAL_NODE="${OVERSELL_REAL_NODE:-1}"
node_defaults() { # from the environment; a running node's node.env overrides them (load_node_env)
  NODE_NAME="${OVERSELL_REAL_NODE_NAME:-oversell-real-node}"
  NODE_BRIDGE="${OVERSELL_NODE_BRIDGE:-oversell0}"
  POD_CIDR="${OVERSELL_POD_CIDR:-198.18.0.0/24}"   # a /24: the bridge takes .1
  KUBELET_PORT="${OVERSELL_KUBELET_PORT:-10250}"
  KUBELET_HEALTHZ_PORT="${OVERSELL_KUBELET_HEALTHZ_PORT:-10248}"
  KUBE_PROXY_HEALTHZ_PORT="${OVERSELL_KUBE_PROXY_HEALTHZ_PORT:-10256}"
  KUBE_PROXY_METRICS_PORT="${OVERSELL_KUBE_PROXY_METRICS_PORT:-10249}"
  NODEUTIL="$(nodeutil_dir)/nodeutil"
}
NODE_LABEL="oversell.io/real-node"       # =true, and a NoSchedule taint with the same key
CNI_BIN_DIR="${OVERSELL_CNI_BIN_DIR:-/usr/lib/cni}"
PAUSE_IMAGE="oversell.local/pause:1"
PROBE_IMAGE="oversell.local/probe:1"

load_node_env() {
  # shellcheck disable=SC1090
  if [[ -f "$NODE_ENV" ]]; then source "$NODE_ENV"; fi
  NODE_IP="${POD_CIDR%.*}.1"
  CTR_SOCK="$NODE_DIR/containerd.sock"
  return 0
}

# Sysctls the kubelet (setupKernelTunables), the bridge plugin (ip_forward) and
# kube-proxy (route_localnet, conntrack) may set; saved at `up`, restored at `down`.
NODE_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward net.ipv4.conf.all.forwarding
  net.ipv6.conf.all.forwarding net.ipv4.conf.all.route_localnet net.bridge.bridge-nf-call-iptables
  net.bridge.bridge-nf-call-ip6tables net.netfilter.nf_conntrack_max
  net.netfilter.nf_conntrack_tcp_timeout_established net.netfilter.nf_conntrack_tcp_timeout_close_wait)
# Host paths the node may create outside $NODE_DIR; removed at `down` only if absent before `up`.
# (/var/lib/cni is shared with other CNI users such as buildah/podman: only our
# network's cache files are removed there, see node_down.)
NODE_HOST_PATHS=(/var/lib/kubelet /var/log/containers /var/log/pods /run/containerd
  /opt/containerd /var/lib/containerd /usr/libexec/kubernetes)

real_node_enabled() { [[ "$REAL_NODE" == 1 ]]; }

# The binaries that are not from build.sh.
exe_of() { # component -> expected /proc/<pid>/exe
  case "$1" in
    containerd) readlink -f "$(command -v containerd 2>/dev/null || echo /usr/bin/containerd)" ;;
    apiserver-forward) echo "$NODEUTIL" ;;
    *) echo "$BIN/$1" ;;
  esac
}

# ------------------------------------------------------------------ nodeutil
# One static Go binary (scripts/cluster/nodeutil, stdlib only): the pause
# process, the in-pod API check, the host-side TCP forwarder. Cached by the
# hash of its source; the pause and probe images are built next to it.
NODEUTIL_SRC="$HERE/nodeutil"
nodeutil_dir() {
  local h; h="$(cat "$NODEUTIL_SRC/go.mod" "$NODEUTIL_SRC/main.go" "$HERE/mkimage.sh" | sha256sum | cut -c1-16)"
  echo "${OVERSELL_CACHE:-$HOME/.cache/oversell}/nodeutil/$h"
}
node_defaults
# A running node's recorded values (NODEUTIL included: the forwarder's binary)
# win over the defaults, so down/status/stop-component act on what `up` started.
load_node_env

build_nodeutil() {
  local d; d="$(dirname "$NODEUTIL")"
  if [[ -x "$NODEUTIL" && -f "$d/pause.tar" && -f "$d/probe.tar" ]]; then return 0; fi
  need go
  mkdir -p "$d"
  local t0; t0=$(date +%s)
  ( cd "$NODEUTIL_SRC" && GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" \
      go build -trimpath -ldflags "-s -w" -o "$NODEUTIL.tmp" . ) || die "building $NODEUTIL_SRC failed"
  mv -f "$NODEUTIL.tmp" "$NODEUTIL"
  "$HERE/mkimage.sh" "$d/pause.tar" "$PAUSE_IMAGE" '["/nodeutil","pause"]' "$NODEUTIL=/nodeutil" >/dev/null
  "$HERE/mkimage.sh" "$d/probe.tar" "$PROBE_IMAGE" '["/nodeutil"]' "$NODEUTIL=/nodeutil" >/dev/null
  say "built nodeutil + pause/probe images in $(( $(date +%s) - t0 ))s ($d)"
}

ctr_() { ctr --address "$CTR_SOCK" --connect-timeout 3s --namespace k8s.io "$@"; }

# --------------------------------------------------------------- host state
sysctl_path() { echo "/proc/sys/${1//.//}"; }

# A comparable picture of what the real node can touch on the host (for `down`'s check).
host_snapshot() { # out-dir
  local o="$1" p
  mkdir -p "$o"
  for p in "${NODE_SYSCTLS[@]}"; do
    if [[ -r "$(sysctl_path "$p")" ]]; then echo "$p = $(tr '\t' ' ' < "$(sysctl_path "$p")")"; fi
  done > "$o/sysctls"
  { command -v iptables-save >/dev/null && iptables-save 2>/dev/null | grep -v '^#' | sed 's/\[[0-9]*:[0-9]*\]//'; } > "$o/iptables" || true
  { command -v ip6tables-save >/dev/null && ip6tables-save 2>/dev/null | grep -v '^#' | sed 's/\[[0-9]*:[0-9]*\]//'; } > "$o/ip6tables" || true
  { command -v nft >/dev/null && nft list tables 2>/dev/null; } > "$o/nft-tables" || true
  awk '{print $5}' /proc/self/mountinfo | sort > "$o/mounts"
  ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort > "$o/links"
  ip -o addr show | awk '{print $2, $3, $4}' | sort > "$o/addrs"
  ip route show table all 2>/dev/null | sort > "$o/routes"
  for p in "${NODE_HOST_PATHS[@]}" /var/lib/cni; do [[ -e "$p" ]] && echo "$p"; done > "$o/paths"
  find /sys/fs/cgroup -maxdepth 2 -name kubepods -type d 2>/dev/null | sort > "$o/cgroups"
}

record_host_before() {
  # Kept from the first `up` until `down` restored it: a crashed `up` followed
  # by another `up` must not take the kubelet's values for the originals.
  [[ -f "$HOST_BEFORE/sysctls" ]] && return 0
  host_snapshot "$HOST_BEFORE.tmp"
  rm -rf "$HOST_BEFORE"; mv "$HOST_BEFORE.tmp" "$HOST_BEFORE"
}

restore_sysctls() {
  [[ -f "$HOST_BEFORE/sysctls" ]] || return 0
  local k v cur
  while IFS= read -r line; do
    k="${line%% = *}"; v="${line#* = }"
    [[ -w "$(sysctl_path "$k")" ]] || continue
    cur="$(tr '\t' ' ' < "$(sysctl_path "$k")")"
    if [[ "$cur" != "$v" ]]; then
      echo "$v" > "$(sysctl_path "$k")" 2>/dev/null && say "restored $k: $cur -> $v" || say "could not restore $k (is $cur, was $v)"
    fi
  done < "$HOST_BEFORE/sysctls"
}

# Remove KUBE-* chains (kubelet: KUBE-FIREWALL, KUBE-KUBELET-CANARY; kube-proxy:
# KUBE-SERVICES, KUBE-SVC-*, ...) and the rules that jump to them, in every
# table, IPv4 and IPv6 - except chains that were there before `up`. Our bridge
# plugin config (no ipMasq, no portmap) adds no CNI-* chains, and CNI-* chains
# of other CNI users on the host (podman, buildah) are left alone. Then drop
# nf_tables tables the node created and left empty.
cleanup_iptables() {
  local fam save cmd before t line chain
  for fam in 4 6; do
    if [[ $fam == 4 ]]; then save=iptables-save cmd=iptables before="$HOST_BEFORE/iptables"
    else save=ip6tables-save cmd=ip6tables before="$HOST_BEFORE/ip6tables"; fi
    command -v "$save" >/dev/null || continue
    local dump; dump="$("$save" 2>/dev/null || true)"
    [[ -n "$dump" ]] || continue
    t=""
    local -a rules=() chains=()
    while IFS= read -r line; do
      case "$line" in
        \**) t="${line#\*}" ;;
        :KUBE-*)
          chain="${line#:}"; chain="${chain%% *}"
          if ! grep -q "^:$chain " "$before" 2>/dev/null; then chains+=("$t $chain"); fi ;;
        -A\ *)
          # Rules in chains we keep that jump to chains we delete.
          if [[ "$line" =~ -j\ KUBE- ]]; then
            chain="$(awk '{print $2}' <<<"$line")"
            [[ "$chain" == KUBE-* ]] || rules+=("$t ${line#-A }")
          fi ;;
      esac
    done <<<"$dump"
    local r c n=0
    for r in "${rules[@]}"; do
      # shellcheck disable=SC2086
      eval "$cmd -w -t ${r%% *} -D ${r#* }" 2>/dev/null && n=$((n + 1))
    done
    for c in "${chains[@]}"; do "$cmd" -w -t "${c%% *}" -F "${c#* }" 2>/dev/null || true; done
    for c in "${chains[@]}"; do "$cmd" -w -t "${c%% *}" -X "${c#* }" 2>/dev/null && n=$((n + 1)); done
    (( n > 0 )) && say "ip${fam/4/}tables: removed $n KUBE-* chains and jumps"
  done
  # iptables-nft creates a table on first use; nothing of the host's rules is
  # left in one that did not exist before and has only empty built-in chains.
  if command -v nft >/dev/null && [[ -f "$HOST_BEFORE/nft-tables" ]]; then
    local tbl
    while IFS= read -r tbl; do
      [[ -n "$tbl" ]] || continue
      grep -qxF "$tbl" "$HOST_BEFORE/nft-tables" && continue
      # empty = nothing but the table, its built-in chains and their policies
      if ! nft list "$tbl" 2>/dev/null | grep -qvE '^\s*(table |chain |type |}|$)'; then
        nft delete "$tbl" 2>/dev/null && say "removed empty nf_tables $tbl (created by the node)"
      fi
    done < <(nft list tables 2>/dev/null)
  fi
}

# ------------------------------------------------------------------- config
write_node_configs() {
  mkdir -p "$NODE_DIR"/{containerd,cni/net.d,cni/ipam,kubelet,pod-logs,volume-plugins,runc,kube-proxy}
  cat > "$NODE_DIR/containerd/config.toml" <<EOF
# Generated by scripts/cluster/cluster.sh up: containerd for the local real node.
version = 2
root = "$NODE_DIR/containerd/root"
state = "$NODE_DIR/containerd/state"
[grpc]
  address = "$CTR_SOCK"
[ttrpc]
  address = ""
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$NODE_DIR/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Root here lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj otherwise.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$NODE_DIR/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$NODE_DIR/cni/net.d"
    max_conf_num = 1
EOF
  cat > "$NODE_DIR/cni/net.d/10-oversell.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "oversell",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$NODE_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$POD_CIDR", "gateway": "$NODE_IP" }]],
        "routes": [{ "dst": "0.0.0.0/0" }],
        "dataDir": "$NODE_DIR/cni/ipam"
      }
    }
  ]
}
EOF
  printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' > "$NODE_DIR/kubelet/resolv.conf"
  cat > "$NODE_DIR/kubelet/config.yaml" <<EOF
# Generated by scripts/cluster/cluster.sh up: the real node's kubelet.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: true }
  x509: { clientCAFile: $PKI/ca.crt }
authorization: { mode: Webhook }
containerRuntimeEndpoint: unix://$CTR_SOCK
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
podLogsDir: $NODE_DIR/pod-logs
volumePluginDir: $NODE_DIR/volume-plugins
clusterDomain: cluster.local
# No cluster DNS; pods get a resolver on their own loopback, so a name lookup
# fails at once instead of going to the host's (outside) nameserver.
resolvConf: $NODE_DIR/kubelet/resolv.conf
registerWithTaints:
  - { key: $NODE_LABEL, value: "true", effect: NoSchedule }
rotateCertificates: false
serverTLSBootstrap: false
maxPods: 50
EOF
  cat > "$NODE_DIR/kube-proxy/config.yaml" <<EOF
# Generated by scripts/cluster/cluster.sh up: kube-proxy for the real node.
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: { kubeconfig: $CONF/kube-proxy.kubeconfig }
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_CIDR
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:$KUBE_PROXY_HEALTHZ_PORT
metricsBindAddress: 127.0.0.1:$KUBE_PROXY_METRICS_PORT
# NodePorts only on the bridge address, never on the host's real interfaces.
nodePortAddresses: ["$NODE_IP/32"]
iptables:
  localhostNodePorts: false   # would set net.ipv4.conf.all.route_localnet=1
  masqueradeAll: false
# 0 = leave the host's conntrack sysctls alone.
conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s }
EOF
}

# Each node component's command line (cluster.sh's start_component calls this).
start_node_component() { # component
  case "$1" in
    containerd)
      # No registry is reachable (and none may be contacted): a dead proxy on
      # loopback makes every pull fail fast instead of resolving registry names.
      HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 NO_PROXY= \
        start containerd --config "$NODE_DIR/containerd/config.toml" --log-level warn ;;
    kubelet)
      # shellcheck disable=SC2086
      start kubelet --config="$NODE_DIR/kubelet/config.yaml" --kubeconfig="$NODES/$NODE_NAME.kubeconfig" \
        --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --node-labels="$NODE_LABEL=true" \
        --root-dir="$NODE_DIR/kubelet/root" --cert-dir="$NODE_DIR/kubelet/pki" \
        --v="$VERBOSITY" ${OVERSELL_KUBELET_EXTRA_ARGS:-} ;;
    apiserver-forward)
      start apiserver-forward forward "$NODE_IP:$APISERVER_PORT" "127.0.0.1:$APISERVER_PORT" ;;
    kube-proxy)
      # shellcheck disable=SC2086
      start kube-proxy --config="$NODE_DIR/kube-proxy/config.yaml" --v="$VERBOSITY" ${OVERSELL_KUBE_PROXY_EXTRA_ARGS:-} ;;
  esac
}

node_healthy() { # component
  local out
  case "$1" in
    containerd) [[ -S "$CTR_SOCK" ]] && ctr --address "$CTR_SOCK" --connect-timeout 3s version >/dev/null 2>&1 ;;
    kubelet) out="$(curl -sS --max-time 5 "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz" 2>/dev/null)" && [[ "$out" == ok ]] ;;
    kube-proxy) curl -sS --max-time 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$KUBE_PROXY_HEALTHZ_PORT/healthz" 2>/dev/null | grep -q 200 ;;
    apiserver-forward) curl -sS --max-time 5 --cacert "$PKI/ca.crt" --resolve "kubernetes:$APISERVER_PORT:$NODE_IP" \
        "https://kubernetes:$APISERVER_PORT/livez" -o /dev/null -w '%{http_code}' 2>/dev/null | grep -qE '^(200|401|403)$' ;;
  esac
}
node_health_url() {
  case "$1" in
    containerd) echo "unix://$CTR_SOCK" ;;
    kubelet) echo "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz" ;;
    kube-proxy) echo "http://127.0.0.1:$KUBE_PROXY_HEALTHZ_PORT/healthz" ;;
    apiserver-forward) echo "tcp://$NODE_IP:$APISERVER_PORT -> 127.0.0.1:$APISERVER_PORT" ;;
  esac
}

node_ready() {
  [[ "$(kubectl_admin get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]
}

# The `kubernetes` Service's endpoint: the apiserver runs with
# --endpoint-reconciler-type=none (it listens on 127.0.0.1, which is not a valid
# endpoint), so point the Service at the forwarder on the bridge address.
write_kubernetes_endpoints() {
  kubectl_admin apply -f - >/dev/null <<EOF
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kubernetes
  namespace: default
  labels:
    kubernetes.io/service-name: kubernetes
    endpointslice.kubernetes.io/managed-by: oversell-cluster.sh
addressType: IPv4
endpoints:
  - addresses: ["$NODE_IP"]
    conditions: { ready: true }
ports:
  - { name: https, port: $APISERVER_PORT, protocol: TCP }
EOF
}

# ----------------------------------------------------------------- commands
node_preflight() {
  [[ $(id -u) == 0 ]] || die "the real node needs root (containerd, kubelet, iptables); run as root or set OVERSELL_REAL_NODE=0"
  local c
  for c in containerd containerd-shim-runc-v2 runc ctr iptables ip6tables ip mount umount; do
    command -v "$c" >/dev/null || die "'$c' not found: run scripts/cluster/ci-install.sh (or OVERSELL_REAL_NODE=0 for no real node)"
  done
  [[ -x "$CNI_BIN_DIR/bridge" && -x "$CNI_BIN_DIR/host-local" && -x "$CNI_BIN_DIR/loopback" ]] ||
    die "CNI plugins not in $CNI_BIN_DIR (Debian: containernetworking-plugins; run scripts/cluster/ci-install.sh)"
  [[ -d /proc/sys/net/bridge ]] || die "br_netfilter is not loaded (needed for Services between pods on the bridge)"
  (( ${#CTR_SOCK} < 100 )) || die "containerd socket path too long for a unix socket: $CTR_SOCK (set OVERSELL_CLUSTER_DIR to a shorter path)"
  if [[ -f "$HOST_MARKER" ]]; then
    local owner; owner="$(cat "$HOST_MARKER")"
    [[ "$owner" == "$STATE" ]] || die "the real node on this host belongs to $owner ($HOST_MARKER): run 'down' there, or set OVERSELL_REAL_NODE=0"
  fi
  if ip link show "$NODE_BRIDGE" >/dev/null 2>&1 && [[ ! -f "$HOST_MARKER" ]]; then
    die "bridge $NODE_BRIDGE exists but is not ours: set OVERSELL_NODE_BRIDGE"
  fi
  for p in "$KUBELET_HEALTHZ_PORT" "$KUBE_PROXY_HEALTHZ_PORT" "$KUBE_PROXY_METRICS_PORT"; do
    port_busy "$p" && die "port 127.0.0.1:$p is in use (set OVERSELL_KUBELET_HEALTHZ_PORT / OVERSELL_KUBE_PROXY_*_PORT)"
  done
  return 0
}

node_up() {
  real_node_enabled || { rm -f "$NODE_ENV"; return 0; }
  local T0 t; T0=$(date +%s)
  node_defaults; load_node_env   # a previous node's node.env is gone (cmd_up ran node_down)
  node_preflight
  mkdir -p "$NODE_DIR"
  echo "$STATE" > "$HOST_MARKER"
  cat > "$NODE_ENV" <<EOF
NODE_NAME=$NODE_NAME
NODE_BRIDGE=$NODE_BRIDGE
POD_CIDR=$POD_CIDR
KUBELET_PORT=$KUBELET_PORT
KUBELET_HEALTHZ_PORT=$KUBELET_HEALTHZ_PORT
KUBE_PROXY_HEALTHZ_PORT=$KUBE_PROXY_HEALTHZ_PORT
KUBE_PROXY_METRICS_PORT=$KUBE_PROXY_METRICS_PORT
NODEUTIL=$NODEUTIL
EOF
  load_node_env
  record_host_before
  build_nodeutil

  # The bridge first: the kubelet's node IP must be an address of this host.
  if ! ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
    ip link add "$NODE_BRIDGE" type bridge
  fi
  ip addr replace "$NODE_IP/${POD_CIDR#*/}" dev "$NODE_BRIDGE"
  ip link set "$NODE_BRIDGE" up

  write_node_configs
  cmd_node_cert "$NODE_NAME" >/dev/null
  [[ -f "$PKI/kube-proxy.crt" ]] || sign "$PKI" kube-proxy "/CN=system:kube-proxy" "$CLIENT_EXT"
  write_kubeconfig "$CONF/kube-proxy.kubeconfig" system:kube-proxy "$PKI/kube-proxy.crt" "$PKI/kube-proxy.key"

  for c in "${NODE_COMPONENTS[@]}"; do [[ -f "$LOGS/$c.log" ]] && mv -f "$LOGS/$c.log" "$LOGS/$c.log.prev"; done
  start_component containerd; wait_healthy containerd
  t=$(date +%s)
  ctr_ images import "$(dirname "$NODEUTIL")/pause.tar" >/dev/null || fail_up "importing the pause image"
  ctr_ images import "$(dirname "$NODEUTIL")/probe.tar" >/dev/null || fail_up "importing the probe image"
  say "imported $PAUSE_IMAGE, $PROBE_IMAGE in $(( $(date +%s) - t ))s"
  start_component apiserver-forward; wait_healthy apiserver-forward
  write_kubernetes_endpoints
  t=$(date +%s)
  start_component kubelet
  start_component kube-proxy
  wait_healthy kubelet
  wait_healthy kube-proxy
  wait_for kubelet "node $NODE_NAME not Ready" node_ready
  say "node $NODE_NAME Ready $(( $(date +%s) - t ))s after the kubelet started (real node up in $(( $(date +%s) - T0 ))s)"
}

# Kill every container of our containerd, also after a crash of containerd:
# runc's state dir is ours, so `runc --root` finds what is left.
kill_containers() {
  local id n=0
  if is_ours containerd "$(pid_of containerd)" && node_healthy containerd; then
    for id in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true; n=$((n + 1)); done
    for ((i = 0; i < 50; i++)); do
      [[ -z "$(ctr_ tasks ls 2>/dev/null | awk 'NR > 1 && $3 != "STOPPED"')" ]] && break; sleep 0.1
    done
    for id in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$id" >/dev/null 2>&1 || true; done
    for id in $(ctr_ containers ls -q 2>/dev/null); do ctr_ containers delete "$id" >/dev/null 2>&1 || true; done
  fi
  # The runc shim keeps its state in <Root>/<containerd namespace>.
  local root
  for root in "$NODE_DIR"/runc/*/; do
    [[ -d "$root" ]] || continue
    for id in $(runc --root "$root" list -q 2>/dev/null); do
      runc --root "$root" kill "$id" KILL >/dev/null 2>&1 || true
      runc --root "$root" delete --force "$id" >/dev/null 2>&1 || true
      n=$((n + 1))
    done
  done
  # Last resort: every process in a kubepods cgroup the node created.
  if [[ -f "$HOST_BEFORE/cgroups" ]] && ! grep -q . "$HOST_BEFORE/cgroups"; then
    local pids; pids="$( { find /sys/fs/cgroup/pids/kubepods /sys/fs/cgroup/kubepods -name cgroup.procs -exec cat {} + 2>/dev/null || true; } | sort -u)"
    if [[ -n "$pids" ]]; then
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null || true
      say "killed $(wc -w <<<"$pids") leftover processes in kubepods cgroups"
      sleep 0.5
    fi
  fi
  (( n > 0 )) && say "killed $n containers/tasks"
  # Shims of our containerd (their -address is our socket) outlive it.
  local pid
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $CTR_SOCK" 2>/dev/null || true); do
    [[ "$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)" == *"-address $CTR_SOCK"* ]] || continue
    kill -KILL "$pid" 2>/dev/null && say "killed leftover shim pid $pid"
  done
  return 0
}

unmount_under() { # dir: every mount point at or below it, deepest first
  local d="$1" m n=0
  [[ -n "$d" && "$d" == /* ]] || return 0
  while IFS= read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || say "could not unmount $m"
    n=$((n + 1))
  done < <(awk -v d="$d" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r -u)
  (( n > 0 )) && say "unmounted $n mounts under $d"
  return 0
}

remove_kubepods_cgroups() {
  local c
  for c in /sys/fs/cgroup/*/kubepods; do
    [[ -d "$c" ]] || continue
    grep -qxF "$c" "$HOST_BEFORE/cgroups" 2>/dev/null && continue
    find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [[ -d "$c" ]] && say "cgroup $c still has processes: left in place"
  done
  return 0
}

node_down() {
  load_node_env
  [[ -f "$NODE_ENV" || -f "$HOST_BEFORE/sysctls" || -d "$NODE_DIR" ]] || return 0
  local c i
  for ((i = ${#NODE_COMPONENTS[@]} - 1; i >= 0; i--)); do
    c="${NODE_COMPONENTS[$i]}"; [[ "$c" == containerd ]] && continue; stop "$c"
  done
  kill_containers
  stop containerd
  kill_containers   # anything containerd left (shims, runc state)
  # kube-proxy's own cleanup knows all of its rules; ours below catches the rest.
  if [[ -x "$BIN/kube-proxy" ]] && command -v iptables >/dev/null; then
    "$BIN/kube-proxy" --cleanup --v=0 >/dev/null 2>&1 || true
  fi
  unmount_under "$NODE_DIR"
  [[ -d /var/lib/kubelet ]] && unmount_under /var/lib/kubelet
  remove_kubepods_cgroups
  if ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then ip link delete "$NODE_BRIDGE" && say "deleted bridge $NODE_BRIDGE"; fi
  cleanup_iptables
  restore_sysctls
  if [[ -f "$HOST_BEFORE/paths" ]]; then
    for c in "${NODE_HOST_PATHS[@]}"; do
      [[ -e "$c" ]] || continue
      grep -qxF "$c" "$HOST_BEFORE/paths" && continue
      unmount_under "$c"
      rm -rf --one-file-system "$c" && say "removed $c (created by the node)"
    done
  fi
  # libcni's result cache of our sandboxes (containerd keeps it in /var/lib/cni):
  # networks "oversell" and "cni-loopback", named <network>-<sandbox id>-<if>.
  local sb
  for sb in "$NODE_DIR"/containerd/{root,state}/io.containerd.grpc.v1.cri/sandboxes/*; do
    [[ -e "$sb" ]] && rm -f /var/lib/cni/results/*-"$(basename "$sb")"-* 2>/dev/null
  done
  rm -f /var/lib/cni/results/oversell-* 2>/dev/null || true
  if ! grep -qxF /var/lib/cni "$HOST_BEFORE/paths" 2>/dev/null; then
    rmdir /var/lib/cni/results /var/lib/cni 2>/dev/null && say "removed /var/lib/cni (created by the node)"
  fi
  # The host is back: keep the before/after pictures for the record, drop the rest.
  if [[ -d "$HOST_BEFORE" ]]; then
    host_snapshot "$STATE/host-after-down"
    rm -rf "$STATE/host-before-up"; cp -r "$HOST_BEFORE" "$STATE/host-before-up"
    # What is there now and was not before `up` (a changed sysctl shows as its
    # new value). Things that went away meanwhile are other programs' business.
    local f left=""
    for f in "$STATE/host-after-down"/*; do
      local extra; extra="$(comm -13 <(sort "$STATE/host-before-up/$(basename "$f")" 2>/dev/null) <(sort "$f"))"
      [[ -n "$extra" ]] && left+="$(basename "$f"):"$'\n'"$(sed 's/^/  + /' <<<"$extra")"$'\n'
    done
    if [[ -n "$left" ]]; then
      say "host has more than before 'up' (see $STATE/host-{before-up,after-down}/); run 'down' again once it is gone:"
      printf '%s' "$left" | sed 's/^/    /' | head -40
      # Keep what the next `down` needs to finish the job.
      find "$NODE_DIR" -mindepth 1 -maxdepth 1 ! -name host-before ! -name node.env -exec rm -rf --one-file-system {} + 2>/dev/null || true
      return 0
    fi
    say "host as before 'up': nothing added to sysctls, iptables, nf_tables, mounts, links, addresses, routes, paths, kubepods cgroups"
  fi
  rm -rf --one-file-system "$NODE_DIR"
  if [[ -f "$HOST_MARKER" && "$(cat "$HOST_MARKER")" == "$STATE" ]]; then rm -f "$HOST_MARKER"; fi
  return 0
}

node_status() { # prints rows, returns 1 if anything is unhealthy
  [[ -f "$NODE_ENV" ]] || return 0
  local c pid alive health all=0
  for c in "${NODE_COMPONENTS[@]}"; do
    pid="$(pid_of "$c")"; alive=no; health=-
    if is_ours "$c" "$pid"; then
      alive=yes
      if node_healthy "$c"; then health="ok ($(node_health_url "$c"))"; else health="FAIL ($(node_health_url "$c"))"; all=1; fi
    else
      all=1
    fi
    printf '%-24s %-8s %-6s %s\n' "$c" "${pid:--}" "$alive" "$health"
  done
  local ready
  ready="$(kubectl_admin get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.status.nodeInfo.kubeletVersion} {.status.nodeInfo.containerRuntimeVersion}' 2>/dev/null || echo "? (no answer)")"
  printf '%-24s %-8s %-6s %s\n' "node/$NODE_NAME" - - "Ready=$ready"
  [[ "$ready" == True* ]] || all=1
  return $all
}

cmd_import_image() { # tar...
  load_ports; load_node_env
  [[ $# -gt 0 ]] || die "usage: $0 import-image <image archive (OCI or docker save)>..."
  node_healthy containerd || die "the real node's containerd is not running (cluster.sh up with OVERSELL_REAL_NODE=1)"
  local f
  for f in "$@"; do
    [[ -f "$f" ]] || die "no such file: $f"
    ctr_ images import "$f" || die "ctr images import $f failed"
  done
  ctr_ images ls -q | grep -v '^sha256:' || true
}
