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

{{/*
Labels that describe the release but select nothing; commonLabels may
override them.
*/}}
{{- define "sandbox-webhook.standardLabels" -}}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/component: admission-webhook
app.kubernetes.io/part-of: opensandbox
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
Labels of every object. Built as one map, so a key given twice (commonLabels
repeating a chart label) is one key, and the selector labels always win
(sandbox-webhook.validate refuses commonLabels that try to set them).
*/}}
{{- define "sandbox-webhook.labels" -}}
{{- $labels := include "sandbox-webhook.selectorLabels" . | fromYaml -}}
{{- $labels = merge $labels (dict "helm.sh/chart" (include "sandbox-webhook.chart" .)) (.Values.commonLabels | default dict) (include "sandbox-webhook.standardLabels" . | fromYaml) -}}
{{- toYaml $labels -}}
{{- end -}}

{{/*
Labels of the pod template. No helm.sh/chart: a chart version bump alone
must not roll the pods (the app version label changes with the image, which
rolls them anyway).
*/}}
{{- define "sandbox-webhook.podLabels" -}}
{{- $labels := include "sandbox-webhook.selectorLabels" . | fromYaml -}}
{{- $labels = merge $labels (.Values.podLabels | default dict) (.Values.commonLabels | default dict) (include "sandbox-webhook.meshOptOutLabels" . | fromYaml | default dict) (include "sandbox-webhook.standardLabels" . | fromYaml) -}}
{{- toYaml $labels -}}
{{- end -}}

{{/*
Service-mesh opt-out, for every pod the chart runs (webhook, controller,
helm test). The API server has no mesh identity: a sidecar in front of a
webhook in a STRICT-mTLS namespace refuses its calls. Istio reads the label
(the annotation of the same name is deprecated), ambient mode reads
istio.io/dataplane-mode, Linkerd reads the annotation. Empty when
meshOptOut is false.
*/}}
{{- define "sandbox-webhook.meshOptOutLabels" -}}
{{- if .Values.meshOptOut -}}
sidecar.istio.io/inject: "false"
istio.io/dataplane-mode: none
{{- end -}}
{{- end -}}

{{- define "sandbox-webhook.meshOptOutAnnotations" -}}
{{- if .Values.meshOptOut -}}
linkerd.io/inject: disabled
{{- end -}}
{{- end -}}

{{/*
topologySpreadConstraints with the labelSelector filled in where omitted.
Call with (dict "constraints" LIST "selectorLabels" MAP); prints a YAML list,
or nothing for an empty LIST. Shared by every Deployment of the chart.
*/}}
{{- define "sandbox-webhook.topologySpreadConstraints" -}}
{{- $constraints := list -}}
{{- range .constraints -}}
{{- $c := deepCopy . -}}
{{- if not $c.labelSelector -}}
{{- $_ := set $c "labelSelector" (dict "matchLabels" $.selectorLabels) -}}
{{- end -}}
{{- $constraints = append $constraints $c -}}
{{- end -}}
{{- with $constraints -}}
{{- toYaml . -}}
{{- end -}}
{{- end -}}

{{/*
Checksum of the configuration keys that decide which pods the API server
sends to the webhook: config.prefix (objectSelector <prefix>/id), the
excluded namespaces (namespaceSelector) and the revision (both selectors). The MutatingWebhookConfiguration
changes at once on `helm upgrade`, while running pods read the new ConfigMap
only a kubelet sync later; in between, pods selected under the new keys
would be admitted bare. This checksum on the pod template rolls the pods
when, and only when, one of these keys changes; every other config key is
hot-reloaded. webhook.namespaceSelector/objectSelector are not part of it:
they only narrow what the API server sends, and the binary does not read them.
*/}}
{{- define "sandbox-webhook.selectorChecksum" -}}
{{- dict "prefix" .Values.config.prefix "excludedNamespaces" (include "sandbox-webhook.excludedNamespaces" . | fromJsonArray) "revision" .Values.revision | toJson | sha256sum -}}
{{- end -}}

{{/*
terminationGracePeriodSeconds: covers the shutdown delay, the drain and a
margin for the process to exit after its last response.
*/}}
{{- define "sandbox-webhook.minGracePeriod" -}}
{{- add (int .Values.shutdownDelaySeconds) (int .Values.shutdownTimeoutSeconds) 10 -}}
{{- end -}}

{{- define "sandbox-webhook.terminationGracePeriodSeconds" -}}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds -}}
{{- include "sandbox-webhook.minGracePeriod" . -}}
{{- else -}}
{{- int .Values.terminationGracePeriodSeconds -}}
{{- end -}}
{{- end -}}

{{/*
The flags sandbox-webhook.serveArgs sets from values; extraArgs may not repeat them.
*/}}
{{- define "sandbox-webhook.chartFlags" -}}
{{- toJson (list "--config" "--tls-cert" "--tls-key" "--client-ca" "--addr" "--admin-addr" "--log-format" "--shutdown-delay" "--shutdown-timeout") -}}
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
Name of the Secret holding tls.crt / tls.key mounted by the pods. Each mode
has its own default name: switching helm -> certManager must not make Helm
delete the Secret cert-manager writes, and certManager -> helm must not make
Helm create a Secret cert-manager already owns.
*/}}
{{- define "sandbox-webhook.tlsSecretName" -}}
{{- $fullname := include "sandbox-webhook.fullname" . -}}
{{- if eq .Values.certificates.mode "existingSecret" -}}
{{- required "certificates.existingSecret.name is required when certificates.mode is existingSecret: create a kubernetes.io/tls Secret (see certs/README.md) and set its name" .Values.certificates.existingSecret.name -}}
{{- else if .Values.certificates.secretName -}}
{{- .Values.certificates.secretName -}}
{{- else if eq .Values.certificates.mode "certManager" -}}
{{- printf "%s-cm-tls" $fullname -}}
{{- else -}}
{{- printf "%s-tls" $fullname -}}
{{- end -}}
{{- end -}}

{{/*
Name of the CA Secret of the modes that make their own CA (helm, and
certManager without issuerRef); per mode, like the TLS Secret.
*/}}
{{- define "sandbox-webhook.caSecretName" -}}
{{- $fullname := include "sandbox-webhook.fullname" . -}}
{{- if eq .Values.certificates.mode "certManager" -}}
{{- printf "%s-cm-ca" $fullname -}}
{{- else -}}
{{- printf "%s-ca" $fullname -}}
{{- end -}}
{{- end -}}

{{/*
Name of the MutatingWebhookConfiguration. It is cluster-scoped, so it carries
the release namespace: two releases of the same name in two namespaces must
not fight over one object.
*/}}
{{- define "sandbox-webhook.webhookConfigurationName" -}}
{{- printf "%s-%s" (include "sandbox-webhook.fullname" .) .Release.Namespace | trunc 253 | trimSuffix "-" -}}
{{- end -}}

{{/*
Name of the webhook inside the MutatingWebhookConfiguration; the API server
requires a fully qualified name (at least three DNS labels), and keys the
webhook's audit annotations under it (`sandbox-webhook.<prefix>/decision`).
*/}}
{{- define "sandbox-webhook.webhookName" -}}
{{- default (printf "sandbox-webhook.%s" .Values.config.prefix) .Values.webhook.name -}}
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
{{- fail "deployment.enabled=false renders only the webhook configurations: set webhook.url (e.g. https://127.0.0.1:8443/mutate) to the webhook running outside the cluster" -}}
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
{{- include "sandbox-webhook.validateWorkload" . -}}
{{- end -}}

{{/*
Guards for values the API server would accept but that break the webhook or
its availability, each with what to set instead.
*/}}
{{- define "sandbox-webhook.validateWorkload" -}}
{{- range $what, $labels := dict "commonLabels" .Values.commonLabels "podLabels" .Values.podLabels -}}
{{- range $key := list "app.kubernetes.io/name" "app.kubernetes.io/instance" -}}
{{- if hasKey ($labels | default dict) $key -}}
{{- fail (printf "%s must not set %s: it is a selector label of the chart's Deployment, Service and PDB (a Deployment's selector is immutable and must match its pods); use nameOverride or the release name instead" $what $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if .Values.deployment.enabled -}}
{{- if eq (.Values.updateStrategy.type | default "RollingUpdate") "Recreate" -}}
{{- fail "updateStrategy.type=Recreate stops every webhook pod before starting new ones: with failurePolicy Fail every sandbox create is rejected during each rollout (and the API server refuses Recreate together with the default rollingUpdate settings). Use RollingUpdate (the default: maxSurge 1, maxUnavailable 0)" -}}
{{- end -}}
{{- $pdb := .Values.podDisruptionBudget -}}
{{- if and $pdb.enabled (gt (int .Values.replicas) 1) -}}
{{- if not (kindIs "invalid" $pdb.maxUnavailable) -}}
{{- if or (eq (toString $pdb.maxUnavailable) "0") (eq (toString $pdb.maxUnavailable) "0%") -}}
{{- fail (printf "podDisruptionBudget.maxUnavailable=%v never allows an eviction: every node drain would block on the webhook pods. Use at least 1" $pdb.maxUnavailable) -}}
{{- end -}}
{{- else if or (and (kindIs "string" $pdb.minAvailable) (eq $pdb.minAvailable "100%")) (and (not (kindIs "string" $pdb.minAvailable)) (ge (int $pdb.minAvailable) (int .Values.replicas))) -}}
{{- fail (printf "podDisruptionBudget.minAvailable=%v with replicas=%v never allows an eviction: every node drain would block on the webhook pods. Set minAvailable below replicas (e.g. %d) or raise replicas" $pdb.minAvailable .Values.replicas (sub (int .Values.replicas) 1)) -}}
{{- end -}}
{{- end -}}
{{- $chartFlags := include "sandbox-webhook.chartFlags" . | fromJsonArray -}}
{{- range .Values.extraArgs -}}
{{- $flag := regexReplaceAll "=.*$" (toString .) "" -}}
{{- if has $flag $chartFlags -}}
{{- fail (printf "extraArgs repeats %s, which the chart already sets from a value (the binary exits at start on a repeated flag). Use the value instead: --config/--tls-cert/--tls-key are fixed, --client-ca is clientCA.configMapName, --addr/--admin-addr are listenAddress and containerPorts, --log-format is logFormat, --shutdown-delay is shutdownDelaySeconds, --shutdown-timeout is shutdownTimeoutSeconds" $flag) -}}
{{- end -}}
{{- end -}}
{{- $minGrace := include "sandbox-webhook.minGracePeriod" . | int -}}
{{- if and (not (kindIs "invalid" .Values.terminationGracePeriodSeconds)) (lt (int .Values.terminationGracePeriodSeconds) $minGrace) -}}
{{- fail (printf "terminationGracePeriodSeconds=%v is shorter than shutdownDelaySeconds (%v) + shutdownTimeoutSeconds (%v) + 10: the kubelet would kill pods that still answer admission requests. Set at least %d, or null to compute it" .Values.terminationGracePeriodSeconds .Values.shutdownDelaySeconds .Values.shutdownTimeoutSeconds $minGrace) -}}
{{- end -}}
{{- if .Values.hostNetwork -}}
{{- range $name, $port := .Values.containerPorts -}}
{{- if eq (int $port) 10250 -}}
{{- fail (printf "containerPorts.%s=10250 with hostNetwork=true: the kubelet listens on 10250 on every node. Pick a port that is free on the nodes (and open it from the control plane)" $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.test.namespace (has .Values.test.namespace (include "sandbox-webhook.excludedNamespaces" . | fromJsonArray)) -}}
{{- fail (printf "test.namespace=%s is excluded from the webhook (config.excludedNamespaces, the system namespaces or the release namespace): the helm test pod would find its dry-run sandbox unmutated. Choose a namespace where sandboxes are mutated" .Values.test.namespace) -}}
{{- end -}}
{{- end -}}


{{/*
Namespace of the helm test's dry-run sandbox: test.namespace, else `default`
when the webhook mutates there; empty when there is none (no test rendered).
*/}}
{{- define "sandbox-webhook.testNamespace" -}}
{{- if .Values.test.namespace -}}
{{- .Values.test.namespace -}}
{{- else if not (has "default" (include "sandbox-webhook.excludedNamespaces" . | fromJsonArray)) -}}
default
{{- end -}}
{{- end -}}

{{/*
The webhook's configuration file (config.yaml), which the controller reads
too: it classifies every sandbox against what this configuration injects
(its drift audit), so both must read the same settings.

Top-level keys in the documented order; unknown keys are rejected by
values.schema.json (the binary rejects them too). Helm drops keys whose value
is null in user values, so an empty string stands for null where null means
something: an empty config.egress.image turns egress injection off (written
as `image: null`), an empty otlpEndpoint is none, and an empty
pod.automountServiceAccountToken leaves every pod alone (written as null).
`revision` (top-level in values) is written only when set.
*/}}
{{- define "sandbox-webhook.configFile" -}}
{{- $config := deepCopy .Values.config }}
{{- if not (dig "egress" "image" "" $config) }}
{{- $_ := set $config "egress" (set (get $config "egress" | default dict) "image" nil) }}
{{- end }}
{{- if not (dig "egress" "otlpEndpoint" "" $config) }}
{{- $_ := set $config "egress" (set (get $config "egress" | default dict) "otlpEndpoint" nil) }}
{{- end }}
{{- if eq "" (toString (dig "pod" "automountServiceAccountToken" false $config)) }}
{{- $_ := set $config "pod" (set (get $config "pod" | default dict) "automountServiceAccountToken" nil) }}
{{- end }}
{{- with .Values.revision }}
{{- $_ := set $config "revision" . }}
{{- end }}
{{- range $key := list "prefix" "revision" "excludedNamespaces" "execd" "egress" "pod" "expiry" }}
{{- if hasKey $config $key }}
{{ toYaml (pick $config $key) }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
Revisions (canary upgrades, as Istio's): `<prefix>/rev` on a namespace, or on
a pod in a namespace without it, says which release injects it. The default
release (no `revision`) takes what carries no such label.
*/}}
{{- define "sandbox-webhook.revisionLabel" -}}
{{- printf "%s/rev" .Values.config.prefix -}}
{{- end -}}
