{{/*
The lifecycle controller's names and labels. Its selector labels differ from
the webhook's (app.kubernetes.io/name gets a `-controller` suffix), so the
webhook's Service, PDB and ServiceMonitor never select controller pods.
*/}}
{{- define "sandbox-webhook.controllerFullname" -}}
{{- printf "%s-controller" (include "sandbox-webhook.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sandbox-webhook.controllerSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-controller" (include "sandbox-webhook.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sandbox-webhook.controllerLabels" -}}
helm.sh/chart: {{ include "sandbox-webhook.chart" . }}
{{ include "sandbox-webhook.controllerSelectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/component: lifecycle-controller
app.kubernetes.io/part-of: opensandbox
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "sandbox-webhook.controllerServiceAccountName" -}}
{{- default (include "sandbox-webhook.controllerFullname" .) .Values.controller.serviceAccount.name -}}
{{- end -}}
