#!/usr/bin/env bash
# Smoke test of the local control plane (test/cluster/cluster.sh):
#   1. a kwok fake node (annotation kwok.x-k8s.io/node=fake, label type=kwok) becomes Ready
#   2. a pod scheduled by kube-scheduler onto it becomes Running (kwok fakes the kubelet)
#   3. PATCH nodes/status as system:node:<name> (Node authorizer + NodeRestriction) is allowed
#      and the new allocatable is stored
#   4. the same identity may NOT patch another node's status
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
cleanup() { K delete pod "$POD" --ignore-not-found --grace-period=0 --force >/dev/null 2>&1; K delete node "$N" "$OTHER" --ignore-not-found >/dev/null 2>&1; }
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

if out="$("$OVERSELL_KUBECTL" --kubeconfig "$NODE_KC" patch node "$N" --subresource=status --type=strategic \
      -p '{"status":{"allocatable":{"cpu":"6","memory":"12Gi"}}}' 2>&1)"; then
  ok "PATCH nodes/status as system:node:$N allowed: $out"
else
  ko "PATCH nodes/status as system:node:$N: $out"
fi
got="$(K get node "$N" -o jsonpath='{.status.allocatable.cpu}/{.status.allocatable.memory}')"
[[ "$got" == "6/12Gi" ]] && ok "stored allocatable is $got" || ko "stored allocatable is $got, want 6/12Gi"

if out="$("$OVERSELL_KUBECTL" --kubeconfig "$NODE_KC" patch node "$OTHER" --subresource=status --type=strategic \
      -p '{"status":{"allocatable":{"cpu":"6"}}}' 2>&1)"; then
  ko "system:node:$N could patch $OTHER: $out"
else
  [[ "$out" == *Forbidden* || "$out" == *forbidden* ]] && ok "system:node:$N may not patch $OTHER (forbidden)" || ko "unexpected: $out"
fi

sleep 2
node_ready && ok "node still Ready after the status patch" || ko "node not Ready after the status patch"

cleanup
[[ $DOWN == 1 ]] && "$CLUSTER" down
echo "$pass passed, $fail failed"
(( fail == 0 ))
