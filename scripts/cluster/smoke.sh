#!/usr/bin/env bash
# Smoke test of the local control plane (scripts/cluster/cluster.sh):
#   1. a kwok fake node (annotation kwok.x-k8s.io/node=fake, label type=kwok) becomes Ready
#   2. a pod scheduled by kube-scheduler onto it becomes Running (kwok fakes the kubelet)
#   3. PATCH nodes/<name>/status as system:node:<name>, the way a kubelet does it (client
#      cert CN=system:node:<name>, O=system:nodes; Node authorizer + NodeRestriction) is
#      allowed and the new allocatable is stored
#   4. the same identity may NOT patch another node's status
#   5. (when the cluster has the real node) it is Ready, and a pod on it (image
#      oversell.local/probe:1, imagePullPolicy Never) reaches the API server through the
#      `kubernetes` Service ClusterIP and exits 0, from its cgroup under /kubepods
# Starts the cluster if it is not up; with --down stops it at the end.
# Prints "N passed, N failed" and exits non-zero on any failure.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CLUSTER="$HERE/cluster.sh"
DOWN=0; [[ "${1:-}" == "--down" ]] && DOWN=1

"$CLUSTER" up || exit 1
eval "$("$CLUSTER" env)"
K() { "$OVERSELL_KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }

N=smoke-kwok-0; OTHER=smoke-kwok-1; POD=smoke-pod
pass=0; fail=0
ok() { echo "PASS: $*"; pass=$((pass + 1)); }
ko() { echo "FAIL: $*"; fail=$((fail + 1)); }
wait_for() { # seconds description command...
  local t="$1" d="$2"; shift 2
  local s; s=$(date +%s)
  until "$@" >/dev/null 2>&1; do
    (( $(date +%s) - s < t )) || { ko "$d (timeout ${t}s)"; return 1; }
    sleep 0.5
  done
  ok "$d ($(( $(date +%s) - s ))s)"
}
REAL_POD=smoke-real-node
cleanup() { K delete pod "$REAL_POD" --ignore-not-found --grace-period=0 --force >/dev/null 2>&1; K delete pod "$POD" --ignore-not-found --grace-period=0 --force >/dev/null 2>&1; K delete node "$N" "$OTHER" --ignore-not-found >/dev/null 2>&1; }
cleanup

for n in "$N" "$OTHER"; do
  K apply -f - <<EOF >/dev/null || ko "create node $n"
apiVersion: v1
kind: Node
metadata:
  name: $n
  annotations:
    kwok.x-k8s.io/node: fake
  labels:
    type: kwok
    kubernetes.io/hostname: $n
status:
  capacity: {cpu: "4", memory: 8Gi, pods: "110"}
  allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
EOF
done
node_ready() { [[ "$(K get node "$N" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" == True ]]; }
wait_for 60 "kwok node $N Ready" node_ready

K apply -f - <<EOF >/dev/null || ko "create pod"
apiVersion: v1
kind: Pod
metadata: {name: $POD, namespace: default}
spec:
  nodeSelector: {type: kwok, kubernetes.io/hostname: $N}
  containers:
  - name: c
    image: registry.invalid/fake:1
    resources: {requests: {cpu: 500m, memory: 256Mi}}
EOF
pod_running() { [[ "$(K get pod "$POD" -o jsonpath='{.spec.nodeName}/{.status.phase}')" == "$N/Running" ]]; }
wait_for 60 "pod $POD scheduled on $N and Running" pod_running

NODE_KC="$("$CLUSTER" node-cert "$N")"
who="$("$OVERSELL_KUBECTL" --kubeconfig "$NODE_KC" auth whoami -o jsonpath='{.status.userInfo.username}/{.status.userInfo.groups}' 2>&1)"
[[ "$who" == "system:node:$N/"*system:nodes* ]] && ok "node kubeconfig authenticates as $who" || ko "whoami: $who"

# What a kubelet does: PATCH /api/v1/nodes/<name>/status, strategic merge patch,
# no GET of nodes/status first. (`kubectl patch --subresource=status` GETs
# nodes/status before patching, which the Node authorizer does not grant to
# nodes, so it is refused with "cannot get resource nodes/status".)
NODE_DIR="$(dirname "$NODE_KC")"
patch_status() { # as-node target-node json -> prints "HTTP <code>" and the body
  curl -sS --max-time 10 --cacert "$OVERSELL_CLUSTER_CA" --cert "$NODE_DIR/$1.crt" --key "$NODE_DIR/$1.key" \
    -X PATCH -H 'Content-Type: application/strategic-merge-patch+json' --data "$3" \
    -w '\nHTTP %{http_code}\n' "$OVERSELL_APISERVER_URL/api/v1/nodes/$2/status"
}
out="$(patch_status "$N" "$N" '{"status":{"allocatable":{"cpu":"6","memory":"12Gi"}}}' 2>&1)"
code="$(tail -n1 <<<"$out")"
[[ "$code" == "HTTP 200" ]] && ok "PATCH nodes/$N/status as system:node:$N allowed ($code)" || ko "PATCH nodes/$N/status as system:node:$N: $out"
got="$(K get node "$N" -o jsonpath='{.status.allocatable.cpu}/{.status.allocatable.memory}')"
[[ "$got" == "6/12Gi" ]] && ok "stored allocatable is $got" || ko "stored allocatable is $got, want 6/12Gi"

out="$(patch_status "$N" "$OTHER" '{"status":{"allocatable":{"cpu":"6"}}}' 2>&1)"
code="$(tail -n1 <<<"$out")"
if [[ "$code" == "HTTP 403" ]]; then
  msg="$(grep -m1 '"message"' <<<"$out" | sed -e 's/^ *"message": *"//' -e 's/",\{0,1\} *$//' -e 's/\\"/"/g')"
  ok "system:node:$N may not patch nodes/$OTHER/status ($code: $msg)"
else
  ko "system:node:$N patching $OTHER: $out"
fi
got="$(K get node "$OTHER" -o jsonpath='{.status.allocatable.cpu}')"
[[ "$got" == "4" ]] && ok "$OTHER allocatable unchanged ($got)" || ko "$OTHER allocatable is $got, want 4"

sleep 2
node_ready && ok "node still Ready after the status patch" || ko "node not Ready after the status patch"

REAL="$(K get nodes -l oversell.io/real-node=true -o jsonpath='{.items[0].metadata.name}' 2>/dev/null)"
if [[ -n "$REAL" ]]; then
  real_ready() { [[ "$(K get node "$REAL" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" == True ]]; }
  wait_for 60 "real node $REAL Ready" real_ready && echo "      ($(K get node "$REAL" -o jsonpath='{.status.nodeInfo.kubeletVersion} {.status.nodeInfo.containerRuntimeVersion}'))"
  K apply -f - <<EOF >/dev/null || ko "create pod $REAL_POD"
apiVersion: v1
kind: Pod
metadata: { name: $REAL_POD, namespace: default }
spec:
  restartPolicy: Never
  nodeSelector: { oversell.io/real-node: "true" }
  tolerations: [{ key: oversell.io/real-node, operator: Exists, effect: NoSchedule }]
  containers:
    - { name: probe, image: oversell.local/probe:1, imagePullPolicy: Never, args: [apicheck, -timeout, 60s] }
EOF
  real_done() { [[ "$(K get pod "$REAL_POD" -o jsonpath='{.status.phase}')" =~ ^(Succeeded|Failed)$ ]]; }
  if wait_for 120 "pod $REAL_POD finished" real_done; then
    phase="$(K get pod "$REAL_POD" -o jsonpath='{.status.phase}')"
    uid="$(K get pod "$REAL_POD" -o jsonpath='{.metadata.uid}')"
    log="$(K logs "$REAL_POD" 2>&1)"
    [[ "$phase" == Succeeded && "$log" == *"/version -> 200"* ]] && ok "pod on $REAL reached the API server via the kubernetes Service ($(grep -m1 -o 'GET [^ ]* -> 200' <<<"$log"))" || ko "pod on $REAL: $phase: $log"
    [[ "$log" == *":/kubepods/besteffort/pod$uid/"* ]] && ok "it ran in its cgroup /kubepods/besteffort/pod$uid" || ko "pod cgroup not under /kubepods: $log"
  fi
else
  echo "(no real node in this cluster: OVERSELL_REAL_NODE=0)"
fi

cleanup
[[ $DOWN == 1 ]] && "$CLUSTER" down
echo "$pass passed, $fail failed"
(( fail == 0 ))
