{{/*
Chart name, truncated to 63 characters (a DNS label).
*/}}
{{- define "sandbox-webhook.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Full name: <release>-<chart>, or the release name when it already contains the
chart name; truncated to 63 characters.
*/}}
{{- define "sandbox-webhook.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "sandbox-webhook.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sandbox-webhook.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sandbox-webhook.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sandbox-webhook.labels" -}}
helm.sh/chart: {{ include "sandbox-webhook.chart" . }}
{{ include "sandbox-webhook.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/component: admission-webhook
app.kubernetes.io/part-of: opensandbox
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "sandbox-webhook.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "sandbox-webhook.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "sandbox-webhook.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/*
Name of the Secret holding tls.crt / tls.key mounted by the pods.
*/}}
{{- define "sandbox-webhook.tlsSecretName" -}}
{{- if eq .Values.certificates.mode "existingSecret" -}}
{{- required "certificates.existingSecret.name is required when certificates.mode is existingSecret: create a kubernetes.io/tls Secret (see certs/README.md) and set its name" .Values.certificates.existingSecret.name -}}
{{- else -}}
{{- default (printf "%s-tls" (include "sandbox-webhook.fullname" .)) .Values.certificates.secretName -}}
{{- end -}}
{{- end -}}

{{/*
Name of the webhook inside the MutatingWebhookConfiguration; the API server
requires a fully qualified name (at least three DNS labels).
*/}}
{{- define "sandbox-webhook.webhookName" -}}
{{- default (printf "pods.sandbox.%s" .Values.config.prefix) .Values.webhook.name -}}
{{- end -}}

{{/*
The namespaces the API server never sends to the webhook: the system
namespaces, the release namespace (the webhook must never gate its own pods)
and the configuration's excludedNamespaces, without duplicates.
*/}}
{{- define "sandbox-webhook.excludedNamespaces" -}}
{{- $ns := list "kube-system" "kube-public" "kube-node-lease" .Release.Namespace -}}
{{- $ns = concat $ns (.Values.config.excludedNamespaces | default list) -}}
{{- toJson (uniq $ns) -}}
{{- end -}}

{{/*
caBundle given in values, as base64 of PEM. Accepts a PEM text (e.g.
`--set-file webhook.caBundle=ca.crt`) or its base64 encoding.
*/}}
{{- define "sandbox-webhook.valuesCABundle" -}}
{{- $ca := .Values.webhook.caBundle | trim -}}
{{- if hasPrefix "-----BEGIN" $ca -}}
{{- $ca | printf "%s\n" | b64enc -}}
{{- else -}}
{{- $ca -}}
{{- end -}}
{{- end -}}

{{/*
Checks that fail early with a message telling what to set.
*/}}
{{- define "sandbox-webhook.validate" -}}
{{- if and (not .Values.deployment.enabled) (not .Values.webhook.url) -}}
{{- fail "deployment.enabled=false renders only the MutatingWebhookConfiguration: set webhook.url (e.g. https://127.0.0.1:8443/mutate) to the webhook running outside the cluster" -}}
{{- end -}}
{{- if and .Values.webhook.url (not (hasPrefix "https://" .Values.webhook.url)) -}}
{{- fail (printf "webhook.url must start with https:// (got %q): the API server only calls webhooks over TLS" .Values.webhook.url) -}}
{{- end -}}
{{- if and .Values.webhook.url (not .Values.webhook.caBundle) -}}
{{- fail "webhook.url is set: webhook.caBundle is required (the CA that signed the local webhook's certificate, PEM or base64; e.g. --set-file webhook.caBundle=certs/dev/ca.crt)" -}}
{{- end -}}
{{- if and .Values.deployment.enabled (eq .Values.certificates.mode "existingSecret") -}}
{{- if not .Values.certificates.existingSecret.name -}}
{{- fail "certificates.mode=existingSecret: certificates.existingSecret.name is required (a kubernetes.io/tls Secret in the release namespace; certs/gen.sh makes one)" -}}
{{- end -}}
{{- if not .Values.webhook.caBundle -}}
{{- fail "certificates.mode=existingSecret: webhook.caBundle is required (the CA that signed the Secret's tls.crt, PEM or base64; e.g. --set-file webhook.caBundle=ca.crt)" -}}
{{- end -}}
{{- end -}}
{{- $expiry := .Values.config.expiry | default dict -}}
{{- $default := dig "defaultTimeoutSeconds" nil $expiry -}}
{{- $max := dig "maxTimeoutSeconds" nil $expiry -}}
{{- if and (not (kindIs "invalid" $default)) (not (kindIs "invalid" $max)) -}}
{{- if gt (float64 $default) (float64 $max) -}}
{{- fail (printf "config.expiry.defaultTimeoutSeconds (%v) must not exceed config.expiry.maxTimeoutSeconds (%v)" $default $max) -}}
{{- end -}}
{{- end -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" .Values.config.prefix) -}}
{{- fail (printf "config.prefix %q is not a DNS subdomain (e.g. opensandbox.io)" .Values.config.prefix) -}}
{{- end -}}
{{- end -}}
