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

{{/*
Like sandbox-webhook.labels: one map, so commonLabels repeating a chart label
is one key and the selector labels win.
*/}}
{{- define "sandbox-webhook.controllerStandardLabels" -}}
{{- $labels := include "sandbox-webhook.standardLabels" . | fromYaml -}}
{{- $_ := set $labels "app.kubernetes.io/component" "lifecycle-controller" -}}
{{- toYaml $labels -}}
{{- end -}}

{{- define "sandbox-webhook.controllerLabels" -}}
{{- $labels := include "sandbox-webhook.controllerSelectorLabels" . | fromYaml -}}
{{- $labels = merge $labels (dict "helm.sh/chart" (include "sandbox-webhook.chart" .)) (.Values.commonLabels | default dict) (include "sandbox-webhook.controllerStandardLabels" . | fromYaml) -}}
{{- toYaml $labels -}}
{{- end -}}

{{/*
Pod template labels: no helm.sh/chart (a chart bump alone must not roll the
pods), the mesh opt-out like every pod of the chart.
*/}}
{{- define "sandbox-webhook.controllerPodLabels" -}}
{{- $labels := include "sandbox-webhook.controllerSelectorLabels" . | fromYaml -}}
{{- $labels = merge $labels (.Values.commonLabels | default dict) (include "sandbox-webhook.meshOptOutLabels" . | fromYaml | default dict) (include "sandbox-webhook.controllerStandardLabels" . | fromYaml) -}}
{{- toYaml $labels -}}
{{- end -}}

{{- define "sandbox-webhook.controllerServiceAccountName" -}}
{{- default (include "sandbox-webhook.controllerFullname" .) .Values.controller.serviceAccount.name -}}
{{- end -}}

{{/*
Names of the controller's cluster-scoped objects (ClusterRole, its binding,
the renewal policy and its binding) carry the release namespace, like the
webhook configuration's, so one release name can be installed in two
namespaces.
*/}}
{{- define "sandbox-webhook.controllerClusterName" -}}
{{- printf "%s-%s" (include "sandbox-webhook.controllerFullname" .) .Release.Namespace | trunc 253 | trimSuffix "-" -}}
{{- end -}}

{{- define "sandbox-webhook.renewalPolicyName" -}}
{{- printf "%s-expires-at-%s" (include "sandbox-webhook.fullname" .) .Release.Namespace | trunc 253 | trimSuffix "-" -}}
{{- end -}}
