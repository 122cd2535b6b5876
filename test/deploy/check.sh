#!/usr/bin/env bash
# CI check for the packaging: kustomize overlays, the Helm chart, docker-compose.yml.
#
#   1. tools: helm (test/deploy/build-helm.sh, from the Go module proxy, cached),
#      kubectl (OVERSELL_KUBECTL, else the one scripts/cluster/build.sh built, else
#      PATH; built by scripts/cluster/build.sh if none), and from npm dclint, yaml,
#      ajv, kubernetes-models, @kubernetes-models/cert-manager (test/deploy/tools,
#      pinned by its lock file, installed into the cache, never into the repo)
#   2. the chart's copies are their sources, byte for byte: the CRD is
#      deploy/base/crd.yaml, files/monitoring/* are deploy/monitoring/*
#   3. helm lint --strict, both certificate modes, monitoring on; invalid values are refused
#   4. render: kubectl kustomize deploy/, overlays/self-managed, overlays/cert-manager,
#      deploy/ with the monitoring Component, overlays/monitoring, deploy/ with
#      the agent-pod-read Component, deploy/ with the metrics-api Component and
#      overlays/cert-manager with metrics-api-cert-manager; helm template, both
#      modes, in namespace oversell and in another namespace, with
#      monitoring.enabled=true, with agent.podRead=true, and with
#      metricsApi.enabled=true (both modes, two namespaces)
#   5. every rendered document (and every deploy/base/*.yaml) parses and passes
#      its schema offline (Kubernetes OpenAPI, cert-manager CRDs, our CRD); the
#      renders keep their promises (test/deploy/manifests.mjs: security context,
#      probes, PDB, spread, RBAC scope, TLS mode, webhook -> Service -> port,
#      NetworkPolicy ports, the caBundle-only ValidatingAdmissionPolicy, the
#      pod-image policy of namespaces that require their sidecars, ...),
#      every RBAC rule is a row of the table in docs/install.md and every row
#      is granted, and kustomize and helm render the same objects, the same
#      RBAC rules per subject and the same policies per mode; with monitoring
#      on, both render the same monitoring objects (same specs, the dashboard
#      byte for byte), and none with it off; with the metrics API on, both
#      render the same APIService and RBAC for the mode (and Helm its give-back
#      hook), and none of it with it off
#   6. docker-compose.yml against the Compose Specification schema (dclint)
#   7. only with KUBECONFIG set: server-side dry-run apply of every render. This
#      creates the Namespace "oversell" and the OversellPolicy CRD for real
#      (server-side apply, field manager oversell-check), like the e2e suite;
#      cert-manager.io objects are left out when the cluster lacks cert-manager,
#      the renders with monitoring when it lacks the Prometheus operator's CRDs.
#
# Usage: test/deploy/check.sh        Env: KUBECONFIG (optional, see 7),
#   OVERSELL_KUBECTL, OVERSELL_CACHE, OVERSELL_CHECK_OUT (keep the renders there).
# Once helm and the npm tools are cached it takes well under a minute.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
CACHE="${OVERSELL_CACHE:-$HOME/.cache/oversell}"
CHART="$REPO/deploy/helm/oversell"
cd "$REPO"

T0=$SECONDS
step() { printf '\n[check %3ds] === %s\n' "$((SECONDS - T0))" "$*"; }
ok() { printf '  ok   %s\n' "$*"; }
die() { printf '\n[check] FAILED: %s\n' "$*" >&2; exit 1; }
run() { # label cmd... : run, show output only on failure
  local label="$1" out; shift
  if out="$("$@" 2>&1)"; then ok "$label"; else printf '%s\n' "$out" >&2; die "$label"; fi
}

if [[ -n "${OVERSELL_CHECK_OUT:-}" ]]; then
  OUT="$OVERSELL_CHECK_OUT"; mkdir -p "$OUT"
else
  OUT="$(mktemp -d)"; trap 'rm -rf "$OUT"' EXIT
fi

# ------------------------------------------------------------------ 1. tools
step "tools"
bash "$HERE/build-helm.sh"
HELM="$(bash "$HERE/build-helm.sh" --print-path)"

KUBECTL="${OVERSELL_KUBECTL:-}"
if [[ -z "$KUBECTL" ]]; then
  built="$(bash "$REPO/scripts/cluster/build.sh" --print-bin-dir)/kubectl"
  if [[ -x "$built" ]]; then KUBECTL="$built"
  elif command -v kubectl >/dev/null; then KUBECTL="$(command -v kubectl)"
  else
    echo "  no kubectl: building the local control plane binaries (scripts/cluster/build.sh; cold: ~15 min on 2 cores)"
    bash "$REPO/scripts/cluster/build.sh"
    KUBECTL="$built"
  fi
fi
[[ -x "$KUBECTL" ]] || die "kubectl not found at $KUBECTL"
ok "helm $("$HELM" version --short) ($HELM)"
ok "kubectl $("$KUBECTL" version --client -o json | sed -n 's/.*"gitVersion": "\(.*\)".*/\1/p' | head -n1) ($KUBECTL)"

command -v node >/dev/null && command -v npm >/dev/null || die "node and npm are needed (Node >= 20.19)"
lock_sum="$(cat "$HERE/tools/package.json" "$HERE/tools/package-lock.json" | sha256sum | cut -c1-16)"
TOOLS="$CACHE/deploy-tools/$lock_sum"
if [[ ! -f "$TOOLS/.installed" ]]; then
  echo "  installing test/deploy/tools (npm ci) into $TOOLS"
  rm -rf "$TOOLS"; mkdir -p "$TOOLS"
  cp "$HERE/tools/package.json" "$HERE/tools/package-lock.json" "$TOOLS/"
  (cd "$TOOLS" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci of test/deploy/tools"
  touch "$TOOLS/.installed"
fi
ok "node $(node --version), dclint $("$TOOLS/node_modules/.bin/dclint" --version) ($TOOLS)"
manifests() { node "$HERE/manifests.mjs" --tools "$TOOLS" "$@"; }
select_docs() { node "$HERE/select.mjs" --tools "$TOOLS" "$@"; }

# ------------------------------------------------------- 2. chart copies
step "chart copies = their sources"
cmp -s deploy/base/crd.yaml "$CHART/crds/oversellpolicies.yaml" ||
  die "deploy/helm/oversell/crds/oversellpolicies.yaml differs from deploy/base/crd.yaml: cp deploy/base/crd.yaml deploy/helm/oversell/crds/oversellpolicies.yaml"
ok "crds/oversellpolicies.yaml = deploy/base/crd.yaml"
# Helm reads files inside the chart only: the monitoring objects live in
# deploy/monitoring (the kustomize Component) and the chart carries copies.
MONITORING_FILES=(servicemonitor.yaml podmonitor.yaml prometheusrule.yaml grafana-dashboard.json)
for f in "${MONITORING_FILES[@]}"; do
  cmp -s "deploy/monitoring/$f" "$CHART/files/monitoring/$f" ||
    die "deploy/helm/oversell/files/monitoring/$f differs from deploy/monitoring/$f: cp deploy/monitoring/{servicemonitor,podmonitor,prometheusrule}.yaml deploy/monitoring/grafana-dashboard.json deploy/helm/oversell/files/monitoring/"
done
extra="$(ls "$CHART/files/monitoring" | grep -vxF -f <(printf '%s\n' "${MONITORING_FILES[@]}") || true)"
[[ -z "$extra" ]] || die "deploy/helm/oversell/files/monitoring/ has files deploy/monitoring does not ship: $extra"
ok "files/monitoring/{${MONITORING_FILES[*]}} = deploy/monitoring/"
cmp -s deploy/components/hold-while-gateway-down/policy.yaml "$CHART/files/hold-while-gateway-down/policy.yaml" ||
  die "deploy/helm/oversell/files/hold-while-gateway-down/policy.yaml differs from deploy/components/hold-while-gateway-down/policy.yaml: cp deploy/components/hold-while-gateway-down/policy.yaml deploy/helm/oversell/files/hold-while-gateway-down/"
ok "files/hold-while-gateway-down/policy.yaml = deploy/components/hold-while-gateway-down/policy.yaml"

# ---------------------------------------------------------------- 3. lint
step "helm lint"
for mode in self-managed cert-manager; do
  run "helm lint --strict (certificates.mode=$mode)" "$HELM" lint --strict "$CHART" --namespace oversell --set "certificates.mode=$mode"
done
run "helm lint --strict (DryRun default policy, failurePolicy Fail, 3 replicas)" \
  "$HELM" lint --strict "$CHART" --set defaultPolicy.mode=DryRun --set webhook.failurePolicy=Fail --set gateway.replicas=3
run "helm lint --strict (default policy disabled)" "$HELM" lint --strict "$CHART" --set defaultPolicy.enabled=false
run "helm lint --strict (sidecar injection off)" "$HELM" lint --strict "$CHART" --set sidecars.enabled=false
run "helm lint --strict (sidecars failurePolicy Fail)" "$HELM" lint --strict "$CHART" --set sidecars.failurePolicy=Fail
run "helm lint --strict (1 replica, webhook CIDRs, no NetworkPolicy)" "$HELM" lint --strict "$CHART" --set gateway.replicas=1 --set 'networkPolicy.webhookFromCIDRs={10.0.0.0/8}'
run "helm lint --strict (no NetworkPolicy)" "$HELM" lint --strict "$CHART" --set networkPolicy.enabled=false
run "helm lint --strict (agent pod read)" "$HELM" lint --strict "$CHART" --set agent.podRead=true
run "helm lint --strict (monitoring, extra labels)" "$HELM" lint --strict "$CHART" --set monitoring.enabled=true --set monitoring.labels.release=kube-prometheus-stack
labelled="$("$HELM" template oversell "$CHART" --set monitoring.enabled=true --set monitoring.labels.release=kube-prometheus-stack)"
[[ "$(grep -c 'release: kube-prometheus-stack' <<<"$labelled")" == 3 ]] || die "monitoring.labels must reach the ServiceMonitor, PodMonitor and PrometheusRule (and nothing else)"
ok "monitoring.labels: on the ServiceMonitor, PodMonitor and PrometheusRule"
one="$("$HELM" template oversell "$CHART" --set gateway.replicas=1)"
if grep -q 'minDomains:' <<<"$one" || ! grep -q 'whenUnsatisfiable: DoNotSchedule' <<<"$one"; then die "gateway.replicas=1 must drop minDomains (a rolling update would otherwise never schedule its surge pod on one node) and keep the hard spread"; fi
ok "gateway.replicas=1: spread kept, minDomains dropped"
cidr="$("$HELM" template oversell "$CHART" --set 'networkPolicy.webhookFromCIDRs={10.0.0.0/8}')"
grep -q 'cidr: "10.0.0.0/8"' <<<"$cidr" || die "networkPolicy.webhookFromCIDRs does not reach the NetworkPolicy"
ok "networkPolicy.webhookFromCIDRs limits the webhook port"
no_pods="$("$HELM" template oversell "$CHART" --set sidecars.enabled=false)"
if grep -q -e 'path: /mutate/pods' -e 'name: oversell-gateway-sidecars' -e 'name: oversell-required-pod-images' <<<"$no_pods" || ! grep -q 'OVERSELL_SIDECARS' <<<"$no_pods"; then die "sidecars.enabled=false still renders pod webhooks, template RBAC or the required-namespace image policy"; fi
ok "sidecars.enabled=false: no pod webhooks, no template RBAC, no image policy, OVERSELL_SIDECARS=none"
refused() { # label helm-template-args...
  local label="$1"; shift
  if "$HELM" template oversell "$CHART" "$@" >/dev/null 2>&1; then die "helm template accepted $label"; fi
  ok "refused: $label"
}
refused "certificates.mode=bogus" --set certificates.mode=bogus
refused "webhook.failurePolicy=Never" --set webhook.failurePolicy=Never
refused "sidecars.failurePolicy=Never" --set sidecars.failurePolicy=Never
refused "defaultPolicy.mode=Sometimes" --set defaultPolicy.mode=Sometimes
refused "defaultPolicy.cpu.maxRatio=0.5" --set defaultPolicy.cpu.maxRatio=0.5
heap="$("$HELM" template oversell "$CHART" --set gateway.heapMb=640)"
grep -q '"--max-old-space-size=640"' <<<"$heap" || die "gateway.heapMb=640 does not reach the gateway's --max-old-space-size"
ok "gateway.heapMb=640: the gateway runs with --max-old-space-size=640"
refused "gateway.heapMb=0" --set gateway.heapMb=0
refused "empty nodeOptIn.matchLabels" --set 'nodeOptIn.matchLabels.oversell\.io/enabled=null'
refused "networkPolicy.webhookFromCIDRs={not-a-cidr}" --set 'networkPolicy.webhookFromCIDRs={not-a-cidr}'
refused "monitoring.enabled=maybe" --set monitoring.enabled=maybe
run "helm lint --strict (metrics API, self-managed)" "$HELM" lint --strict "$CHART" --set metricsApi.enabled=true
run "helm lint --strict (metrics API, cert-manager, take-over, webhook CIDRs)" "$HELM" lint --strict "$CHART" --set metricsApi.enabled=true --set metricsApi.takeOver=true --set certificates.mode=cert-manager --set 'networkPolicy.webhookFromCIDRs={10.0.0.0/8}'
refused "metricsApi.enabled=yes" --set metricsApi.enabled=yes
refused "metricsApi.takeover=true (misspelt)" --set metricsApi.takeover=true
# helm template has no cluster: lookup finds no APIService, so even with
# takeOver ours is rendered and there is nothing to take over (the lookup path
# runs on install; docs/install.md, "The metrics API").
mapi="$("$HELM" template oversell "$CHART" --set metricsApi.enabled=true --set metricsApi.takeOver=true)"
if ! grep -q '^kind: APIService' <<<"$mapi" || grep -q 'name: oversell-metrics-api-take-over' <<<"$mapi" || ! grep -q 'name: oversell-metrics-api-give-back' <<<"$mapi"; then
  die "metricsApi.takeOver=true with no APIService in the cluster must render ours and the give-back Job, and no take-over Job"
fi
ok "metricsApi.takeOver=true, no cluster: ours rendered, give-back hook, nothing to take over"
mcidr="$("$HELM" template oversell "$CHART" --set metricsApi.enabled=true --set 'networkPolicy.webhookFromCIDRs={10.0.0.0/8}')"
[[ "$(grep -c 'cidr: "10.0.0.0/8"' <<<"$mcidr")" == 2 ]] || die "networkPolicy.webhookFromCIDRs must limit the metrics API port as it limits the webhook's"
ok "networkPolicy.webhookFromCIDRs limits the metrics API port too"

# -------------------------------------------------------------- 4. render
step "render"
run "kubectl kustomize deploy/" sh -c "'$KUBECTL' kustomize deploy/ > '$OUT/kustomize-self-managed.yaml'"
run "kubectl kustomize deploy/overlays/self-managed" sh -c "'$KUBECTL' kustomize deploy/overlays/self-managed > '$OUT/overlay-self-managed.yaml'"
run "kubectl kustomize deploy/overlays/cert-manager" sh -c "'$KUBECTL' kustomize deploy/overlays/cert-manager > '$OUT/kustomize-cert-manager.yaml'"
run "kubectl kustomize deploy/base" sh -c "'$KUBECTL' kustomize deploy/base > '$OUT/base.yaml'"
cmp -s "$OUT/kustomize-self-managed.yaml" "$OUT/overlay-self-managed.yaml" || die "deploy/ does not render the same as deploy/overlays/self-managed"
ok "deploy/ renders exactly overlays/self-managed"
for mode in self-managed cert-manager; do
  for ns in oversell ops; do
    run "helm template -n $ns (certificates.mode=$mode)" sh -c \
      "'$HELM' template oversell '$CHART' --namespace $ns --include-crds --set certificates.mode=$mode > '$OUT/helm-$mode-$ns.yaml'"
  done
done
# Monitoring on: a kustomization as docs/metrics.md shows it (deploy/ plus the
# Component; kustomize takes relative paths only), and Helm's switch.
mkdir -p "$OUT/with-monitoring"
printf '%s\n' 'apiVersion: kustomize.config.k8s.io/v1beta1' 'kind: Kustomization' \
  "resources: [$(realpath --relative-to="$OUT/with-monitoring" "$REPO/deploy")]" \
  "components: [$(realpath --relative-to="$OUT/with-monitoring" "$REPO/deploy/monitoring")]" > "$OUT/with-monitoring/kustomization.yaml"
run "kubectl kustomize: deploy/ with components: [deploy/monitoring]" sh -c "'$KUBECTL' kustomize '$OUT/with-monitoring' > '$OUT/kustomize-self-managed-monitoring.yaml'"
run "kubectl kustomize deploy/overlays/monitoring" sh -c "'$KUBECTL' kustomize deploy/overlays/monitoring > '$OUT/overlay-monitoring.yaml'"
for ns in oversell ops; do
  run "helm template -n $ns (monitoring.enabled=true)" sh -c \
    "'$HELM' template oversell '$CHART' --namespace $ns --include-crds --set monitoring.enabled=true > '$OUT/helm-self-managed-$ns-monitoring.yaml'"
done
# Agent pod read on (opt-in): deploy/ plus the Component, and Helm's switch.
mkdir -p "$OUT/with-agent-pod-read"
printf '%s\n' 'apiVersion: kustomize.config.k8s.io/v1beta1' 'kind: Kustomization' \
  "resources: [$(realpath --relative-to="$OUT/with-agent-pod-read" "$REPO/deploy")]" \
  "components: [$(realpath --relative-to="$OUT/with-agent-pod-read" "$REPO/deploy/agent-pod-read")]" > "$OUT/with-agent-pod-read/kustomization.yaml"
run "kubectl kustomize: deploy/ with components: [deploy/agent-pod-read]" sh -c "'$KUBECTL' kustomize '$OUT/with-agent-pod-read' > '$OUT/kustomize-agent-pod-read.yaml'"
run "helm template (agent.podRead=true)" sh -c "'$HELM' template oversell '$CHART' --namespace oversell --include-crds --set agent.podRead=true > '$OUT/helm-agent-pod-read.yaml'"
# The metrics API on: deploy/ (self-managed) with components/metrics-api,
# overlays/cert-manager with components/metrics-api-cert-manager, and Helm's switch.
for pair in "metrics-api:deploy:self-managed" "metrics-api-cert-manager:deploy/overlays/cert-manager:cert-manager"; do
  IFS=: read -r component base mode <<<"$pair"
  mkdir -p "$OUT/with-$component"
  printf '%s\n' 'apiVersion: kustomize.config.k8s.io/v1beta1' 'kind: Kustomization' \
    "resources: [$(realpath --relative-to="$OUT/with-$component" "$REPO/$base")]" \
    "components: [$(realpath --relative-to="$OUT/with-$component" "$REPO/deploy/components/$component")]" > "$OUT/with-$component/kustomization.yaml"
  run "kubectl kustomize: $base with components: [deploy/components/$component]" sh -c "'$KUBECTL' kustomize '$OUT/with-$component' > '$OUT/kustomize-$mode-metrics-api.yaml'"
  for ns in oversell ops; do
    run "helm template -n $ns (metricsApi.enabled=true, certificates.mode=$mode)" sh -c \
      "'$HELM' template oversell '$CHART' --namespace $ns --include-crds --set metricsApi.enabled=true --set certificates.mode=$mode > '$OUT/helm-$mode-$ns-metrics-api.yaml'"
  done
done
# The grant hold: deploy/ with components/hold-while-gateway-down, and Helm's
# switch in two namespaces: the same policy and binding, paramRef in the install namespace.
mkdir -p "$OUT/with-hold"
printf '%s\n' 'apiVersion: kustomize.config.k8s.io/v1beta1' 'kind: Kustomization' \
  "resources: [$(realpath --relative-to="$OUT/with-hold" "$REPO/deploy")]" \
  "components: [$(realpath --relative-to="$OUT/with-hold" "$REPO/deploy/components/hold-while-gateway-down")]" > "$OUT/with-hold/kustomization.yaml"
run "kubectl kustomize: deploy/ with components: [deploy/components/hold-while-gateway-down]" sh -c "'$KUBECTL' kustomize '$OUT/with-hold' > '$OUT/kustomize-hold.yaml'"
HOLD_KINDS=MutatingAdmissionPolicy,MutatingAdmissionPolicyBinding
select_docs --kinds "$HOLD_KINDS" "$OUT/kustomize-hold.yaml" > "$OUT/hold-from-component.yaml"
for ns in oversell ops; do
  run "helm template -n $ns (holdWhileGatewayDown.enabled=true)" sh -c \
    "'$HELM' template oversell '$CHART' --namespace $ns --set holdWhileGatewayDown.enabled=true > '$OUT/helm-$ns-hold.yaml'"
  select_docs --kinds "$HOLD_KINDS" "$OUT/helm-$ns-hold.yaml" > "$OUT/hold-from-helm-$ns.yaml"
  run "Helm's hold = the Component's (namespace $ns)" node "$HERE/same-spec.mjs" --tools "$TOOLS" "$OUT/hold-from-component.yaml" "$OUT/hold-from-helm-$ns.yaml" "$ns"
done
[[ -z "$(select_docs --kinds "$HOLD_KINDS" "$OUT/helm-self-managed-oversell.yaml")" ]] || die "Helm renders the hold with holdWhileGatewayDown.enabled off (the default)"
ok "the hold is off by default in Helm"
MONITORING_KINDS=ServiceMonitor,PodMonitor,PrometheusRule,ConfigMap
select_docs --kinds "$MONITORING_KINDS" "$OUT/kustomize-self-managed-monitoring.yaml" > "$OUT/monitoring-from-component.yaml"
select_docs --kinds "$MONITORING_KINDS" "$OUT/overlay-monitoring.yaml" > "$OUT/monitoring-from-overlay.yaml"
[[ -z "$(select_docs --not-kinds "$MONITORING_KINDS" "$OUT/overlay-monitoring.yaml")" ]] || die "overlays/monitoring renders more than the monitoring objects"
[[ -s "$OUT/monitoring-from-overlay.yaml" ]] && cmp -s "$OUT/monitoring-from-component.yaml" "$OUT/monitoring-from-overlay.yaml" ||
  die "overlays/monitoring does not render the objects the Component adds to deploy/"
ok "overlays/monitoring renders exactly the Component's objects"
select_docs --not-kinds "$MONITORING_KINDS" "$OUT/kustomize-self-managed-monitoring.yaml" > "$OUT/rest-with-monitoring.yaml"
select_docs --not-kinds "$MONITORING_KINDS" "$OUT/kustomize-self-managed.yaml" > "$OUT/rest-without-monitoring.yaml"
cmp -s "$OUT/rest-with-monitoring.yaml" "$OUT/rest-without-monitoring.yaml" || die "the monitoring Component changes objects of deploy/ (a Component's transformers apply to everything it is added to)"
ok "the monitoring Component adds objects and changes none of deploy/"

# ------------------------------------------------------------ 5. documents
step "documents parse and pass their schemas; renders keep their promises"
manifests --parse-only $(ls deploy/base/*.yaml | grep -v kustomization.yaml) || die "deploy/base/*.yaml (read one by one by the e2e suite)"
manifests --parse-only "$OUT/base.yaml" || die "kubectl kustomize deploy/base"
manifests --mode self-managed --namespace oversell kustomize="$OUT/kustomize-self-managed.yaml" helm="$OUT/helm-self-managed-oversell.yaml" || die "self-managed renders"
manifests --mode cert-manager --namespace oversell kustomize="$OUT/kustomize-cert-manager.yaml" helm="$OUT/helm-cert-manager-oversell.yaml" || die "cert-manager renders"
manifests --mode self-managed --namespace ops helm-ops="$OUT/helm-self-managed-ops.yaml" || die "self-managed helm render in namespace ops"
manifests --mode cert-manager --namespace ops helm-ops="$OUT/helm-cert-manager-ops.yaml" || die "cert-manager helm render in namespace ops"
manifests --mode self-managed --namespace oversell --monitoring on kustomize-monitoring="$OUT/kustomize-self-managed-monitoring.yaml" helm-monitoring="$OUT/helm-self-managed-oversell-monitoring.yaml" || die "renders with monitoring"
manifests --mode self-managed --namespace ops --monitoring on helm-ops-monitoring="$OUT/helm-self-managed-ops-monitoring.yaml" || die "helm render with monitoring in namespace ops"
manifests --mode self-managed --namespace oversell --agent-pod-read on kustomize-agent-pod-read="$OUT/kustomize-agent-pod-read.yaml" helm-agent-pod-read="$OUT/helm-agent-pod-read.yaml" || die "renders with agent pod read"
for mode in self-managed cert-manager; do
  manifests --mode $mode --namespace oversell --metrics-api on kustomize-metrics-api="$OUT/kustomize-$mode-metrics-api.yaml" helm-metrics-api="$OUT/helm-$mode-oversell-metrics-api.yaml" || die "$mode renders with the metrics API"
  manifests --mode $mode --namespace ops --metrics-api on helm-ops-metrics-api="$OUT/helm-$mode-ops-metrics-api.yaml" || die "$mode helm render with the metrics API in namespace ops"
done

# -------------------------------------------------------------- 6. compose
step "docker-compose.yml against the Compose Specification schema"
# -q: errors only (schema violations and dclint's error rules); style warnings are not failures.
if "$TOOLS/node_modules/.bin/dclint" -q --color=false docker-compose.yml; then ok "docker-compose.yml is valid"
else die "docker-compose.yml (dclint)"; fi
printf 'services:\n  x:\n    image: busybox\n    ports: 8443\n' > "$OUT/bad-compose.yml"
if "$TOOLS/node_modules/.bin/dclint" -q --color=false "$OUT/bad-compose.yml" >/dev/null 2>&1; then die "dclint accepted an invalid compose file"; fi
ok "an invalid compose file is refused (the schema check is live)"

# ------------------------------------------------------- 7. server dry run
if [[ -n "${KUBECONFIG:-}" ]]; then
  step "server-side dry run against $KUBECONFIG"
  K=("$KUBECTL" --kubeconfig "$KUBECONFIG")
  "${K[@]}" version >/dev/null 2>&1 || die "the cluster in KUBECONFIG=$KUBECONFIG does not answer"
  not_groups=""
  if ! "${K[@]}" get crd certificates.cert-manager.io >/dev/null 2>&1; then
    not_groups="cert-manager.io"
    echo "  (no cert-manager in this cluster: cert-manager.io objects are left out of the dry run)"
  fi
  # Prerequisites for real, as the e2e suite does: the namespace and the CRD.
  select_docs --kinds Namespace,CustomResourceDefinition "$OUT/kustomize-self-managed.yaml" > "$OUT/prereq.yaml"
  run "apply Namespace oversell and the CRD (for real)" \
    "${K[@]}" apply --server-side --force-conflicts --field-manager=oversell-check -f "$OUT/prereq.yaml"
  run "CRD established" "${K[@]}" wait --for=condition=Established --timeout=60s crd/oversellpolicies.oversell.io
  for f in $(ls deploy/base/*.yaml | grep -v -e kustomization.yaml -e namespace.yaml -e crd.yaml); do
    run "$f (as the e2e suite reads it) passes a server-side dry run" \
      "${K[@]}" apply --server-side --dry-run=server --force-conflicts --field-manager=oversell-check -f "$f"
  done
  renders=(kustomize-self-managed kustomize-cert-manager helm-self-managed-oversell helm-cert-manager-oversell kustomize-self-managed-metrics-api helm-self-managed-oversell-metrics-api kustomize-cert-manager-metrics-api helm-cert-manager-oversell-metrics-api)
  if "${K[@]}" get crd servicemonitors.monitoring.coreos.com podmonitors.monitoring.coreos.com prometheusrules.monitoring.coreos.com >/dev/null 2>&1; then
    renders+=(kustomize-self-managed-monitoring helm-self-managed-oversell-monitoring)
  else
    echo "  (no Prometheus operator CRDs in this cluster: the renders with monitoring are left out of the dry run)"
  fi
  for r in "${renders[@]}"; do
    select_docs --not-kinds Namespace,CustomResourceDefinition --not-groups "$not_groups" "$OUT/$r.yaml" > "$OUT/$r.rest.yaml"
    n="$(grep -c '^kind:' "$OUT/$r.rest.yaml")"
    run "$r: $n objects pass kubectl apply --server-side --dry-run=server" \
      "${K[@]}" apply --server-side --dry-run=server --force-conflicts --field-manager=oversell-check -f "$OUT/$r.rest.yaml"
  done
else
  step "server-side dry run: skipped (set KUBECONFIG to run it)"
fi

printf '\n[check %3ds] packaging: all checks passed\n' "$((SECONDS - T0))"
