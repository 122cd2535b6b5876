{{/* Labels on every object. Selectors use app.kubernetes.io/name only, as in deploy/base. */}}
{{- define "oversell.labels" -}}
app.kubernetes.io/part-of: oversell
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "oversell.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The gateway Service's DNS names (self-managed certificate SANs, cert-manager dnsNames). */}}
{{- define "oversell.gatewayHost" -}}
oversell-gateway.{{ .Release.Namespace }}.svc
{{- end }}

{{- define "oversell.validate" -}}
{{- if not (has .Values.certificates.mode (list "self-managed" "cert-manager")) }}
{{- fail (printf "certificates.mode must be self-managed or cert-manager, not %q" .Values.certificates.mode) }}
{{- end }}
{{- if not (has .Values.webhook.failurePolicy (list "Ignore" "Fail")) }}
{{- fail (printf "webhook.failurePolicy must be Ignore or Fail, not %q" .Values.webhook.failurePolicy) }}
{{- end }}
{{- if empty .Values.nodeOptIn.matchLabels }}
{{- fail "nodeOptIn.matchLabels must not be empty: an empty selector would send every node to the webhook" }}
{{- end }}
{{- end }}

{{/* nodeOptIn.matchLabels as a label selector string: k1=v1,k2=v2 */}}
{{- define "oversell.optInSelector" -}}
{{- $parts := list -}}
{{- range $k, $v := .Values.nodeOptIn.matchLabels -}}
{{- $parts = append $parts (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- join "," $parts -}}
{{- end -}}

{{/* The metrics API (metricsApi.enabled): the gateway's env names and port, in one place. */}}
{{- define "oversell.metricsApiPort" -}}4443{{- end -}}
{{- define "oversell.metricsApiEnv" -}}
- { name: OVERSELL_METRICS_API, value: "on" }
- { name: OVERSELL_METRICS_API_PORT, value: {{ include "oversell.metricsApiPort" . | quote }} }
{{- end -}}

{{/* The ConfigMap (release namespace) that keeps an APIService oversell took over, to give it back. */}}
{{- define "oversell.metricsApiPrevious" -}}oversell-metrics-api-previous{{- end -}}

{{/* The APIService v1beta1.metrics.k8s.io pointing at the gateway: rendered as
an object, or handed to the take-over Job as JSON (metrics-api-handover.yaml). */}}
{{- define "oversell.metricsApiService" -}}
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta1.metrics.k8s.io
  labels: {{- include "oversell.labels" . | nindent 4 }}
  annotations:
    # Helm never deletes it: the give-back Job does (post-delete, or post-upgrade
    # turning the metrics API off), because it carries the take-over's record
    # of what was replaced, without which nothing is restored.
    helm.sh/resource-policy: keep
    {{- if eq .Values.certificates.mode "cert-manager" }}
    # cert-manager's CA injector sets the caBundle from the gateway's Certificate.
    cert-manager.io/inject-ca-from: {{ printf "%s/oversell-gateway" .Release.Namespace }}
    {{- end }}
spec:
  group: metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  # Port 4443: the Service's 443 is the webhook's. caBundle: injected, never rendered.
  service:
    name: oversell-gateway
    namespace: {{ .Release.Namespace }}
    port: {{ include "oversell.metricsApiPort" . }}
{{- end -}}

{{/* The APIService v1beta1.metrics.k8s.io in the cluster now (empty under helm template). */}}
{{- define "oversell.metricsApiExisting" -}}
{{- toJson (lookup "apiregistration.k8s.io/v1" "APIService" "" "v1beta1.metrics.k8s.io") -}}
{{- end -}}
