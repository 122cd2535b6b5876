#!/usr/bin/env bash
# A real, local Kubernetes control plane for tests: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kwok (fake nodes and pods), all
# plain processes on 127.0.0.1. Binaries come from scripts/cluster/build.sh.
#
# Usage: scripts/cluster/cluster.sh <command>
#   up                 build if needed, generate certs, start everything, wait until healthy
#   down               stop exactly the processes in the pid files, delete etcd data
#   status             per component: pid, alive, health (exit 0 only if all healthy)
#   stop-component <c> stop one component of a running cluster (fault tests), e.g. apiserver
#   start-component <c>
#                      start it again with the same flags as `up`, wait until healthy
#                      (<c>: etcd, apiserver, controller-manager, scheduler, kwok or a full name)
#   node-cert <name>   client cert + kubeconfig for user system:node:<name> (group system:nodes)
#                      -> .oversell/cluster/nodes/<name>.kubeconfig (+ .crt/.key)
#   serving-cert <name> [san...]
#                      serving cert signed by the cluster CA for 127.0.0.1/localhost (+ SANs),
#                      e.g. for a webhook: .oversell/cluster/serving/<name>.crt/.key; caBundle = pki/ca.crt
#   env                print shell exports (KUBECONFIG, OVERSELL_KUBECTL, ...)
#   kubectl [args...]  run the built kubectl against the cluster as admin
#   import-image <tar>...
#                      import an OCI or docker-save archive into the real node's containerd
#                      (namespace k8s.io); pods use it with imagePullPolicy: Never
#   clean              down, then delete the whole state dir (certs included)
#
# The real node (scripts/cluster/realnode.sh; root, Debian containerd/runc/CNI
# plugins/iptables from ci-install.sh): containerd with its own socket and dirs
# under <state>/node, a kubelet (node oversell-real-node, label and NoSchedule
# taint oversell.io/real-node=true), kube-proxy (iptables), the CNI bridge
# oversell0 (pods 198.18.0.0/24, Services 198.19.0.0/16), the pause image built
# here. `down` puts back what it changed on the host (docs/local-cluster.md).
#   OVERSELL_REAL_NODE (1; 0 = control plane and kwok only)  OVERSELL_REAL_NODE_NAME
#   OVERSELL_NODE_BRIDGE (oversell0)  OVERSELL_POD_CIDR (198.18.0.0/24)
#   OVERSELL_KUBELET_PORT (10250)  OVERSELL_KUBELET_HEALTHZ_PORT (10248)
#   OVERSELL_KUBE_PROXY_HEALTHZ_PORT (10256)  OVERSELL_KUBE_PROXY_METRICS_PORT (10249)
#   OVERSELL_{KUBELET,KUBE_PROXY}_EXTRA_ARGS
# Env (defaults):  OVERSELL_CLUSTER_DIR (<repo>/.oversell/cluster)
#   OVERSELL_ETCD_PORT (12379)  OVERSELL_ETCD_PEER_PORT (12380)
#   OVERSELL_APISERVER_PORT (16443)  OVERSELL_KCM_PORT (16257)
#   OVERSELL_SCHEDULER_PORT (16259)  OVERSELL_KWOK_PORT (16247)
#   OVERSELL_CLUSTER_TIMEOUT (180 s, per wait)  OVERSELL_CLUSTER_V (1, klog -v)
#   OVERSELL_CLUSTER_KEEP_ON_FAILURE=1  leave components running when `up` fails
#   OVERSELL_{ETCD,APISERVER,KCM,SCHEDULER,KWOK}_EXTRA_ARGS  extra flags (word-split)
#   plus build.sh's K8S_VERSION / OVERSELL_CACHE.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
STATE="${OVERSELL_CLUSTER_DIR:-$REPO/.oversell/cluster}"
PKI="$STATE/pki"; PIDS="$STATE/pids"; LOGS="$STATE/logs"; CONF="$STATE/config"
NODES="$STATE/nodes"; SERVING="$STATE/serving"
PORTS_FILE="$STATE/ports.env"

# Ports: the ones recorded by a running cluster win over the environment, so
# down/status/node-cert talk to what `up` really started.
ETCD_PORT="${OVERSELL_ETCD_PORT:-12379}"
ETCD_PEER_PORT="${OVERSELL_ETCD_PEER_PORT:-12380}"
APISERVER_PORT="${OVERSELL_APISERVER_PORT:-16443}"
KCM_PORT="${OVERSELL_KCM_PORT:-16257}"
SCHEDULER_PORT="${OVERSELL_SCHEDULER_PORT:-16259}"
KWOK_PORT="${OVERSELL_KWOK_PORT:-16247}"
load_ports() { # also restores RUN_BIN: the bin dir the running cluster was started from
  # shellcheck disable=SC1090
  if [[ -f "$PORTS_FILE" ]]; then source "$PORTS_FILE"; fi
  if [[ -n "${RUN_BIN:-}" ]]; then BIN="$RUN_BIN"; fi
  return 0
}

TIMEOUT="${OVERSELL_CLUSTER_TIMEOUT:-180}"
VERBOSITY="${OVERSELL_CLUSTER_V:-1}"
# Service and pod ranges from 198.18.0.0/15 (benchmarking, RFC 2544): never a real network.
SERVICE_CIDR="198.19.0.0/16"
SERVICE_IP="198.19.0.1"

COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

say() { printf '[cluster] %s\n' "$*"; }
die() { printf '[cluster] ERROR: %s\n' "$*" >&2; exit 1; }

bin_dir() { "$HERE/build.sh" --print-bin-dir; }
BIN="$(bin_dir)"
STAGES="$(dirname "$BIN")/kwok-stages.yaml"
# The real node (containerd, kubelet, kube-proxy, ...): scripts/cluster/realnode.sh.
# shellcheck source=scripts/cluster/realnode.sh
source "$HERE/realnode.sh"

need() { command -v "$1" >/dev/null || die "'$1' not found (run scripts/cluster/ci-install.sh)"; }

# ------------------------------------------------------------------- certs
# Key (kept if present) + CSR + openssl x509 -req signed by our CA, 10 years.
sign() { # dir name subject extensions
  local dir="$1" name="$2" subj="$3" ext="$4"
  [[ -f "$dir/$name.key" ]] || openssl genrsa -out "$dir/$name.key" 2048 2>/dev/null
  openssl req -new -key "$dir/$name.key" -subj "$subj" -out "$dir/$name.csr" 2>/dev/null
  printf '%b\n' "$ext" > "$dir/$name.ext"
  openssl x509 -req -in "$dir/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$dir/$name.ext" -out "$dir/$name.crt" 2>/dev/null
  rm -f "$dir/$name.csr" "$dir/$name.ext"
  chmod 600 "$dir/$name.key"
}
CLIENT_EXT='basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth'
serving_ext() { # san-list (comma separated, e.g. IP:127.0.0.1,DNS:localhost)
  printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=%s' "$1"
}

ensure_ca() {
  need openssl
  mkdir -p "$PKI"
  if [[ ! -f "$PKI/ca.crt" || ! -f "$PKI/ca.key" ]]; then
    say "generating CA in $PKI"
    openssl genrsa -out "$PKI/ca.key" 2048 2>/dev/null
    chmod 600 "$PKI/ca.key"
    openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=oversell-local-ca" -days 3650 -sha256 \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
      -out "$PKI/ca.crt" 2>/dev/null
    # A new CA invalidates every leaf signed by an old one.
    rm -f "$PKI"/{apiserver,admin,kube-controller-manager,kube-scheduler,kwok,kube-proxy,apiserver-kubelet-client}.crt
    rm -rf "$NODES" "$SERVING"
  fi
}

ensure_pki() {
  ensure_ca
  # A cert made before the Service range moved to 198.19.0.0/16 lacks the new ClusterIP.
  if [[ -f "$PKI/apiserver.crt" ]] && ! openssl x509 -in "$PKI/apiserver.crt" -noout -ext subjectAltName 2>/dev/null | grep -q "IP Address:$SERVICE_IP\b"; then
    rm -f "$PKI/apiserver.crt"
  fi
  [[ -f "$PKI/apiserver.crt" ]] || sign "$PKI" apiserver "/CN=kube-apiserver" "$(serving_ext \
    "IP:127.0.0.1,DNS:localhost,IP:$SERVICE_IP,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local")"
  [[ -f "$PKI/admin.crt" ]] || sign "$PKI" admin "/O=system:masters/CN=oversell-admin" "$CLIENT_EXT"
  [[ -f "$PKI/kube-controller-manager.crt" ]] || sign "$PKI" kube-controller-manager "/CN=system:kube-controller-manager" "$CLIENT_EXT"
  [[ -f "$PKI/kube-scheduler.crt" ]] || sign "$PKI" kube-scheduler "/CN=system:kube-scheduler" "$CLIENT_EXT"
  # kwok fakes kubelets for many nodes and also writes pod status: give it admin rights.
  [[ -f "$PKI/kwok.crt" ]] || sign "$PKI" kwok "/O=system:masters/CN=kwok-controller" "$CLIENT_EXT"
  # The API server's client cert towards kubelets (logs, exec, port-forward).
  [[ -f "$PKI/apiserver-kubelet-client.crt" ]] || sign "$PKI" apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$CLIENT_EXT"
  # Front-proxy (request-header) CA: lets KCM/scheduler/aggregated servers
  # load a complete extension-apiserver-authentication configmap.
  if [[ ! -f "$PKI/front-proxy-ca.crt" ]]; then
    openssl genrsa -out "$PKI/front-proxy-ca.key" 2048 2>/dev/null
    chmod 600 "$PKI/front-proxy-ca.key"
    openssl req -x509 -new -key "$PKI/front-proxy-ca.key" -subj "/CN=oversell-front-proxy-ca" -days 3650 -sha256 \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
      -out "$PKI/front-proxy-ca.crt" 2>/dev/null
    rm -f "$PKI/front-proxy-client.crt"
  fi
  if [[ ! -f "$PKI/front-proxy-client.crt" ]]; then
    [[ -f "$PKI/front-proxy-client.key" ]] || openssl genrsa -out "$PKI/front-proxy-client.key" 2048 2>/dev/null
    openssl req -new -key "$PKI/front-proxy-client.key" -subj "/CN=front-proxy-client" -out "$PKI/front-proxy-client.csr" 2>/dev/null
    printf '%b\n' "$CLIENT_EXT" > "$PKI/front-proxy-client.ext"
    openssl x509 -req -in "$PKI/front-proxy-client.csr" -CA "$PKI/front-proxy-ca.crt" -CAkey "$PKI/front-proxy-ca.key" \
      -CAcreateserial -days 3650 -sha256 -extfile "$PKI/front-proxy-client.ext" -out "$PKI/front-proxy-client.crt" 2>/dev/null
    rm -f "$PKI/front-proxy-client.csr" "$PKI/front-proxy-client.ext"
    chmod 600 "$PKI/front-proxy-client.key"
  fi
  if [[ ! -f "$PKI/sa.key" ]]; then
    openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
    openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
    chmod 600 "$PKI/sa.key"
  fi
}

b64() { base64 -w0 < "$1"; }
write_kubeconfig() { # out user crt key
  local out="$1" user="$2" crt="$3" key="$4"
  mkdir -p "$(dirname "$out")"
  cat > "$out.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: oversell
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(b64 "$PKI/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(b64 "$crt")
    client-key-data: $(b64 "$key")
contexts:
- name: $user@oversell
  context:
    cluster: oversell
    user: $user
current-context: $user@oversell
EOF
  chmod 600 "$out.tmp"; mv -f "$out.tmp" "$out"
}

# ---------------------------------------------------------------- processes
pid_of() { [[ -f "$PIDS/$1.pid" ]] && cat "$PIDS/$1.pid" || true; }
# Alive AND really our binary (guards against pid reuse after a reboot/crash).
is_ours() { # component pid
  local exe want
  [[ -n "$2" && -d "/proc/$2" ]] || return 1
  exe="$(readlink "/proc/$2/exe" 2>/dev/null || true)"
  want="$(exe_of "$1")"
  [[ "$exe" == "$want" || "$exe" == "$want (deleted)" ]]
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start() { # component args...
  local c="$1"; shift
  mkdir -p "$PIDS" "$LOGS"
  local exe; exe="$(exe_of "$c")"
  {
    echo "==== $(date -u +%FT%TZ) starting $c"
    printf '%q ' "$exe" "$@"; echo
  } >> "$LOGS/$c.log"
  # setsid: own session, so a Ctrl-C in the caller's terminal does not kill it;
  # `down` stops it by pid.
  setsid "$exe" "$@" >> "$LOGS/$c.log" 2>&1 < /dev/null &
  local pid=$! i
  echo "$pid" > "$PIDS/$c.pid"
  # Until setsid has exec'ed, /proc/<pid>/exe is still bash/setsid.
  for ((i = 0; i < 50; i++)); do is_ours "$c" "$pid" && break; [[ -d /proc/$pid ]] || break; sleep 0.05; done
  say "started $c (pid $pid, log ${LOGS#"$REPO"/}/$c.log)"
}

stop() { # component
  local c="$1" pid i
  pid="$(pid_of "$c")"
  [[ -n "$pid" ]] || return 0
  if is_ours "$c" "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do is_ours "$c" "$pid" || break; sleep 0.1; done
    if is_ours "$c" "$pid"; then
      say "$c (pid $pid) did not stop in 10s, sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do is_ours "$c" "$pid" || break; sleep 0.1; done
    fi
    say "stopped $c (pid $pid)"
  else
    say "$c: pid $pid not running (stale pid file)"
  fi
  rm -f "$PIDS/$c.pid"
}

# Each component's command line, in one place: `up` starts them all,
# `start-component` one of them again (after `stop-component`) with the same flags.
start_component() { # component
  case "$1" in
    etcd)
      # shellcheck disable=SC2086
      start etcd --name=oversell --data-dir="$STATE/etcd" \
        --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-cluster="oversell=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state=new \
        --unsafe-no-fsync=true --log-level=warn ${OVERSELL_ETCD_EXTRA_ARGS:-} ;;
    kube-apiserver)
      # shellcheck disable=SC2086
      start kube-apiserver --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
        --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
        --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
        --client-ca-file="$PKI/ca.crt" \
        --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
        --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
        --requestheader-extra-headers-prefix=X-Remote-Extra- \
        --proxy-client-cert-file="$PKI/front-proxy-client.crt" --proxy-client-key-file="$PKI/front-proxy-client.key" \
        --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
        --service-account-issuer=https://kubernetes.default.svc.cluster.local \
        --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
        --service-cluster-ip-range="$SERVICE_CIDR" --allow-privileged=true \
        --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
        --kubelet-preferred-address-types=InternalIP \
        --endpoint-reconciler-type=none --profiling=false --v="$VERBOSITY" ${OVERSELL_APISERVER_EXTRA_ARGS:-} ;;
    kube-controller-manager)
      # shellcheck disable=SC2086
      start kube-controller-manager --kubeconfig="$CONF/kube-controller-manager.kubeconfig" \
        --authentication-kubeconfig="$CONF/kube-controller-manager.kubeconfig" \
        --authorization-kubeconfig="$CONF/kube-controller-manager.kubeconfig" \
        --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --leader-elect=false \
        --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
        --use-service-account-credentials=true \
        --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
        --service-cluster-ip-range="$SERVICE_CIDR" --controllers='*' \
        --profiling=false --v="$VERBOSITY" ${OVERSELL_KCM_EXTRA_ARGS:-} ;;
    kube-scheduler)
      # shellcheck disable=SC2086
      start kube-scheduler --kubeconfig="$CONF/kube-scheduler.kubeconfig" \
        --authentication-kubeconfig="$CONF/kube-scheduler.kubeconfig" \
        --authorization-kubeconfig="$CONF/kube-scheduler.kubeconfig" \
        --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" --leader-elect=false \
        --profiling=false --v="$VERBOSITY" ${OVERSELL_SCHEDULER_EXTRA_ARGS:-} ;;
    kwok)
      # kwok manages only nodes annotated kwok.x-k8s.io/node=fake (and their pods).
      # shellcheck disable=SC2086
      start kwok --kubeconfig="$CONF/kwok.kubeconfig" --config="$STAGES" \
        --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
        --node-lease-duration-seconds=40 --cidr=198.18.128.0/17 --node-ip=127.0.0.1 \
        --server-address="127.0.0.1:$KWOK_PORT" ${OVERSELL_KWOK_EXTRA_ARGS:-} ;;
    containerd|kubelet|kube-proxy|apiserver-forward) start_node_component "$1" ;;
    *) die "unknown component '$1' (one of: ${COMPONENTS[*]})" ;;
  esac
}

# ------------------------------------------------------------------- health
curl_admin() { curl -sS --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$@"; }
health_url() {
  case "$1" in
    etcd) echo "http://127.0.0.1:$ETCD_PORT/health" ;;
    kube-apiserver) echo "https://127.0.0.1:$APISERVER_PORT/readyz" ;;
    kube-controller-manager) echo "https://127.0.0.1:$KCM_PORT/healthz" ;;
    kube-scheduler) echo "https://127.0.0.1:$SCHEDULER_PORT/healthz" ;;
    kwok) echo "http://127.0.0.1:$KWOK_PORT/healthz" ;;
    *) node_health_url "$1" ;;
  esac
}
healthy() { # component -> 0 if its health endpoint says ok
  local out url; url="$(health_url "$1")"
  case "$1" in
    etcd) out="$(curl -sS --max-time 5 "$url" 2>/dev/null)" || return 1; [[ "$out" == *'"health":"true"'* ]] ;;
    kube-apiserver) out="$(curl_admin "$url" 2>/dev/null)" || return 1; [[ "$out" == ok ]] ;;
    # Self-signed serving certs (in memory); /healthz is always allowed.
    kube-controller-manager|kube-scheduler) out="$(curl -ksS --max-time 5 "$url" 2>/dev/null)" || return 1; [[ "$out" == ok ]] ;;
    kwok) out="$(curl -sS --max-time 5 "$url" 2>/dev/null)" || return 1; [[ "$out" == ok* ]] ;;
    *) node_healthy "$1" ;;
  esac
}

dump_logs() {
  local c
  for c in "${COMPONENTS[@]}" "${NODE_COMPONENTS[@]}"; do
    [[ -f "$LOGS/$c.log" ]] || continue
    echo "----- tail of $LOGS/$c.log" >&2
    tail -n 25 "$LOGS/$c.log" >&2
  done
}

fail_up() {
  say "FAILED: $*" >&2
  dump_logs
  if [[ "${OVERSELL_CLUSTER_KEEP_ON_FAILURE:-0}" != 1 ]]; then
    say "stopping what was started (set OVERSELL_CLUSTER_KEEP_ON_FAILURE=1 to keep it)" >&2
    cmd_down >&2 || true
  fi
  exit 1
}

# Polls `check...` until it succeeds; `up` fails if component c exits or
# TIMEOUT passes first. Sets WAITED (seconds).
wait_for() { # component "what did not happen" check...
  local c="$1" what="$2" start; shift 2; start=$(date +%s)
  while ! "$@"; do
    is_ours "$c" "$(pid_of "$c")" || fail_up "$c exited (see log)"
    (( $(date +%s) - start < TIMEOUT )) || fail_up "$what after ${TIMEOUT}s"
    sleep 0.5
  done
  WAITED=$(( $(date +%s) - start ))
}

wait_healthy() { # component
  wait_for "$1" "$1 not healthy ($(health_url "$1"))" healthy "$1"
  say "$1 healthy after ${WAITED}s"
}

kubectl_admin() { "$BIN/kubectl" --kubeconfig "$STATE/admin.kubeconfig" "$@"; }

# ----------------------------------------------------------------- commands
cmd_up() {
  need curl; need openssl; need setsid
  local T0; T0=$(date +%s)

  # Already running? (judged with the ports/binaries that run recorded)
  local c st=0
  (
    load_ports
    running=0 ok=1 all=("${COMPONENTS[@]}")
    # The running cluster decides: with a real node (node.env) all of it must be healthy.
    if [[ -f "$NODE_ENV" ]]; then all+=("${NODE_COMPONENTS[@]}"); fi
    for c in "${all[@]}"; do
      if is_ours "$c" "$(pid_of "$c")"; then running=$((running + 1)); healthy "$c" || ok=0; fi
    done
    (( running == 0 )) && exit 10
    (( ok == 1 && running == ${#all[@]} )) && exit 0
    say "partly running or unhealthy ($running/${#all[@]} components up); run '$0 down' first" >&2
    exit 11
  ) || st=$?
  case $st in
    0) say "already up (kubeconfig: $STATE/admin.kubeconfig)"; return 0 ;;
    10) ;;
    *) exit 1 ;;
  esac
  # Nothing runs: what a crashed `up` left of the real node (mounts, bridge,
  # iptables, sysctls) is undone before starting again.
  if [[ -d "$NODE_DIR" ]]; then say "cleaning up after a previous real node"; node_down; fi
  rm -f "$PIDS"/*.pid 2>/dev/null || true
  if real_node_enabled; then node_defaults; load_node_env; node_preflight; fi

  "$HERE/build.sh"
  [[ -f "$STAGES" ]] || die "kwok stages file $STAGES missing (build.sh should write it)"

  for p in "$ETCD_PORT" "$ETCD_PEER_PORT" "$APISERVER_PORT" "$KCM_PORT" "$SCHEDULER_PORT" "$KWOK_PORT"; do
    port_busy "$p" && die "port 127.0.0.1:$p is in use (set OVERSELL_*_PORT to move it)"
  done

  mkdir -p "$STATE" "$CONF" "$LOGS" "$PIDS"
  cat > "$PORTS_FILE" <<EOF
ETCD_PORT=$ETCD_PORT
ETCD_PEER_PORT=$ETCD_PEER_PORT
APISERVER_PORT=$APISERVER_PORT
KCM_PORT=$KCM_PORT
SCHEDULER_PORT=$SCHEDULER_PORT
KWOK_PORT=$KWOK_PORT
RUN_BIN=$BIN
EOF
  ensure_pki
  write_kubeconfig "$STATE/admin.kubeconfig" oversell-admin "$PKI/admin.crt" "$PKI/admin.key"
  write_kubeconfig "$CONF/kube-controller-manager.kubeconfig" system:kube-controller-manager "$PKI/kube-controller-manager.crt" "$PKI/kube-controller-manager.key"
  write_kubeconfig "$CONF/kube-scheduler.kubeconfig" system:kube-scheduler "$PKI/kube-scheduler.crt" "$PKI/kube-scheduler.key"
  write_kubeconfig "$CONF/kwok.kubeconfig" kwok-controller "$PKI/kwok.crt" "$PKI/kwok.key"
  # Node kubeconfigs carry the server URL: refresh those that exist (port may have changed).
  if [[ -d "$NODES" ]]; then
    for f in "$NODES"/*.crt; do
      [[ -f "$f" ]] || continue
      local n; n="$(basename "$f" .crt)"
      write_kubeconfig "$NODES/$n.kubeconfig" "system:node:$n" "$NODES/$n.crt" "$NODES/$n.key"
    done
  fi

  rm -rf "$STATE/etcd"
  # Fresh logs per `up`; the previous run's are kept as *.log.prev.
  for c in "${COMPONENTS[@]}"; do [[ -f "$LOGS/$c.log" ]] && mv -f "$LOGS/$c.log" "$LOGS/$c.log.prev"; done
  start_component etcd; wait_healthy etcd
  start_component kube-apiserver; wait_healthy kube-apiserver
  start_component kube-controller-manager
  start_component kube-scheduler
  start_component kwok
  wait_healthy kube-controller-manager
  wait_healthy kube-scheduler
  wait_healthy kwok

  # Pods are rejected until the "default" ServiceAccount exists (made by KCM).
  local start_sa; start_sa=$(date +%s)
  until kubectl_admin get serviceaccount default -n default >/dev/null 2>&1; do
    (( $(date +%s) - start_sa < TIMEOUT )) || fail_up "serviceaccount default/default not created after ${TIMEOUT}s"
    sleep 0.5
  done
  node_up

  say "up in $(( $(date +%s) - T0 ))s: https://127.0.0.1:$APISERVER_PORT"
  say "export KUBECONFIG=$STATE/admin.kubeconfig   # kubectl: $BIN/kubectl"
}

cmd_down() {
  local c i
  node_down
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do stop "${COMPONENTS[$i]}"; done
  rm -rf "$STATE/etcd"
  say "down"
}

cmd_status() {
  load_ports
  local c pid alive health all=0
  printf '%-24s %-8s %-6s %s\n' COMPONENT PID ALIVE HEALTH
  for c in "${COMPONENTS[@]}"; do
    pid="$(pid_of "$c")"; alive=no; health=-
    if is_ours "$c" "$pid"; then
      alive=yes
      if [[ -f "$PKI/admin.crt" ]] && healthy "$c"; then health="ok ($(health_url "$c"))"; else health="FAIL ($(health_url "$c"))"; all=1; fi
    else
      all=1
    fi
    printf '%-24s %-8s %-6s %s\n' "$c" "${pid:--}" "$alive" "$health"
  done
  node_status || all=1
  [[ -f "$STATE/admin.kubeconfig" ]] && echo "kubeconfig: $STATE/admin.kubeconfig"
  return $all
}

cmd_node_cert() {
  local n="${1:-}"
  [[ "$n" =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] || die "usage: $0 node-cert <node-name> (a DNS-1123 name)"
  load_ports
  ensure_ca
  mkdir -p "$NODES"
  [[ -f "$NODES/$n.crt" ]] || sign "$NODES" "$n" "/O=system:nodes/CN=system:node:$n" "$CLIENT_EXT"
  write_kubeconfig "$NODES/$n.kubeconfig" "system:node:$n" "$NODES/$n.crt" "$NODES/$n.key"
  echo "$NODES/$n.kubeconfig"
}

cmd_serving_cert() {
  local n="${1:-}"; shift || true
  [[ "$n" =~ ^[A-Za-z0-9._-]+$ ]] || die "usage: $0 serving-cert <name> [extra SAN, e.g. DNS:foo.bar.svc or IP:10.0.0.1]..."
  ensure_ca
  mkdir -p "$SERVING"
  local san="IP:127.0.0.1,DNS:localhost" s
  for s in "$@"; do san+=",$s"; done
  rm -f "$SERVING/$n.crt"
  sign "$SERVING" "$n" "/CN=$n" "$(serving_ext "$san")"
  echo "$SERVING/$n.crt"
}

component_name() { # short or full name -> the name in COMPONENTS
  case "$1" in
    apiserver|kube-apiserver) echo kube-apiserver ;;
    controller-manager|kcm|kube-controller-manager) echo kube-controller-manager ;;
    scheduler|kube-scheduler) echo kube-scheduler ;;
    etcd|kwok|containerd|kubelet|kube-proxy|apiserver-forward) echo "$1" ;;
    *) die "usage: $0 stop-component|start-component <etcd|apiserver|controller-manager|scheduler|kwok|containerd|kubelet|kube-proxy|apiserver-forward>" ;;
  esac
}

cmd_stop_component() {
  local c; c="$(component_name "${1:-}")"
  load_ports
  stop "$c"
}

cmd_start_component() {
  local c; c="$(component_name "${1:-}")"
  load_ports
  [[ -f "$PORTS_FILE" ]] || die "no cluster here to start $c in (run '$0 up')"
  if is_ours "$c" "$(pid_of "$c")"; then say "$c already running (pid $(pid_of "$c"))"; return 0; fi
  # One component failing to come back is the test's finding: leave the rest running.
  OVERSELL_CLUSTER_KEEP_ON_FAILURE=1
  local T0; T0=$(date +%s)
  start_component "$c"
  wait_healthy "$c"
  say "$c back in $(( $(date +%s) - T0 ))s"
}

cmd_env() {
  load_ports
  cat <<EOF
export KUBECONFIG=$STATE/admin.kubeconfig
export OVERSELL_KUBECTL=$BIN/kubectl
export OVERSELL_CLUSTER_DIR=$STATE
export OVERSELL_APISERVER_URL=https://127.0.0.1:$APISERVER_PORT
export OVERSELL_CLUSTER_CA=$PKI/ca.crt
EOF
}

cmd_clean() {
  cmd_down
  rm -rf "$STATE"
  say "removed $STATE"
}

case "${1:-}" in
  up) cmd_up ;;
  down) load_ports; cmd_down ;;
  status) cmd_status ;;
  stop-component) shift; cmd_stop_component "$@" ;;
  start-component) shift; cmd_start_component "$@" ;;
  node-cert) shift; cmd_node_cert "$@" ;;
  serving-cert) shift; cmd_serving_cert "$@" ;;
  env) cmd_env ;;
  kubectl) shift; load_ports; kubectl_admin "$@" ;;
  import-image) shift; cmd_import_image "$@" ;;
  clean) load_ports; cmd_clean ;;
  *) sed -n '2,46p' "$0" >&2; exit 2 ;;
esac
