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
