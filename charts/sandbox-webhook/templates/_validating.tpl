{{/*
The ValidatingWebhookConfiguration of the workload pre-flight (SPEC 11).

Rendered by mutatingwebhookconfiguration.yaml, right after the
MutatingWebhookConfiguration, so that both carry the caBundle and the
annotations of the same render (in certificates.mode=helm the CA is made in
that file). Called with a dict: `root` (the chart's context), `caBundle`,
`annotations` and `variant` (as the mutating configuration's: a release with
a revision judges the templates of its revision's namespaces, and in
namespaces without the label, templates labelled with it).

A workload's pod template is judged as the pod webhook will judge its pods:
a template that would be denied is denied at apply time, with the pod
webhook's message after the template's path. failurePolicy Ignore by default:
the pod webhook stays the enforcement point, and an unreachable pre-flight
must not block Deployments of every team.
*/}}
{{- define "sandbox-webhook.validatingWebhookConfiguration" -}}
{{- $root := .root }}
{{- $v := $root.Values }}
{{- $fullname := include "sandbox-webhook.fullname" $root }}
{{- $id := printf "%s/id" $v.config.prefix }}
{{- $rev := include "sandbox-webhook.revisionLabel" $root }}
{{- $selects := .variant.selects }}
{{- $revisionCondition := "" }}
{{- if eq $selects "default" }}
{{- $revisionCondition = printf "!(%s)" (include "sandbox-webhook.templateLabels" (printf "%q in %%[1]s" $rev)) }}
{{- else if eq $selects "pods" }}
{{- $revisionCondition = include "sandbox-webhook.templateLabels" (printf "%q in %%[1]s && %%[1]s[%q] == %q" $rev $rev $v.revision) }}
{{- end }}
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: {{ .variant.name }}
  labels:
    {{- include "sandbox-webhook.labels" $root | nindent 4 }}
  {{- with .annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
webhooks:
  - name: {{ default (printf "sandbox-webhook.%s" $v.config.prefix) $v.validation.name }}
    admissionReviewVersions: ["v1"]
    # The pre-flight only answers allowed or denied; never a patch.
    sideEffects: None
    failurePolicy: {{ $v.validation.failurePolicy }}
    timeoutSeconds: {{ $v.validation.timeoutSeconds }}
    matchPolicy: Equivalent
    clientConfig:
      {{- if $v.webhook.url }}
      url: {{ include "sandbox-webhook.validationURL" $root | quote }}
      {{- else }}
      service:
        name: {{ $fullname }}
        namespace: {{ $root.Release.Namespace }}
        port: {{ $v.service.port }}
        path: {{ $v.validation.path | quote }}
      {{- end }}
      {{- with .caBundle }}
      caBundle: {{ . }}
      {{- end }}
    # The kinds of SPEC 11 (src/workload/kinds.rs KINDS); no subresources.
    rules:
      - operations: ["CREATE", "UPDATE"]
        apiGroups: ["apps"]
        apiVersions: ["v1"]
        resources: ["deployments", "statefulsets", "daemonsets", "replicasets"]
        scope: Namespaced
      - operations: ["CREATE", "UPDATE"]
        apiGroups: ["batch"]
        apiVersions: ["v1"]
        resources: ["jobs", "cronjobs"]
        scope: Namespaced
      - operations: ["CREATE", "UPDATE"]
        apiGroups: ["sandbox.opensandbox.io"]
        apiVersions: ["v1alpha1"]
        resources: ["batchsandboxes"]
        scope: Namespaced
      # agent-sandbox 1.0 serves only v1beta1; earlier releases v1alpha1.
      # Both keep the template at spec.podTemplate.
      - operations: ["CREATE", "UPDATE"]
        apiGroups: ["agents.x-k8s.io"]
        apiVersions: ["v1alpha1", "v1beta1"]
        resources: ["sandboxes"]
        scope: Namespaced
    # Where the pod webhook mutates, and nowhere else.
    namespaceSelector:
      matchExpressions:
        - key: kubernetes.io/metadata.name
          operator: NotIn
          values: {{ include "sandbox-webhook.excludedNamespaces" $root }}
        {{- if eq $selects "namespaces" }}
        - key: {{ $rev }}
          operator: In
          values: [{{ $v.revision | quote }}]
        {{- else }}
        - key: {{ $rev }}
          operator: DoesNotExist
        {{- end }}
        {{- with $v.webhook.namespaceSelector.matchExpressions }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $v.webhook.namespaceSelector.matchLabels }}
      matchLabels:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    {{- /*
    An objectSelector sees the workload's labels, not its template's, so the
    template label is matched in CEL. matchConditions are GA from 1.30; below
    that every workload of these kinds is sent, and the webhook skips those
    without the label itself. Each step is guarded with has(): an error
    in a condition would apply the failurePolicy.
    */}}
    {{- if semverCompare ">=1.30.0-0" $root.Capabilities.KubeVersion.Version }}
    matchConditions:
      - name: sandbox-template
        expression: >-
          (has(object.spec) && has(object.spec.template) && has(object.spec.template.metadata)
          && has(object.spec.template.metadata.labels) && {{ $id | quote }} in object.spec.template.metadata.labels)
          || (has(object.spec) && has(object.spec.jobTemplate) && has(object.spec.jobTemplate.spec)
          && has(object.spec.jobTemplate.spec.template) && has(object.spec.jobTemplate.spec.template.metadata)
          && has(object.spec.jobTemplate.spec.template.metadata.labels)
          && {{ $id | quote }} in object.spec.jobTemplate.spec.template.metadata.labels)
          || (has(object.spec) && has(object.spec.podTemplate) && has(object.spec.podTemplate.metadata)
          && has(object.spec.podTemplate.metadata.labels) && {{ $id | quote }} in object.spec.podTemplate.metadata.labels)
      {{- /*
      Revisions: the default release leaves templates labelled with a
      revision alone; in namespaces without the label, a release with a
      revision judges only the templates labelled with it.
      */}}
      {{- with $revisionCondition }}
      - name: sandbox-revision
        expression: {{ . | quote }}
      {{- end }}
    {{- end }}
{{- end -}}

{{/*
A CEL condition on a workload's pod template labels, wherever the kind keeps
its template, each step guarded with has(): the argument is a printf format
whose %[1]s is the labels map.
*/}}
{{- define "sandbox-webhook.templateLabels" -}}
{{- $paths := list (list "object.spec" "object.spec.template" "object.spec.template.metadata" "object.spec.template.metadata.labels") (list "object.spec" "object.spec.jobTemplate" "object.spec.jobTemplate.spec" "object.spec.jobTemplate.spec.template" "object.spec.jobTemplate.spec.template.metadata" "object.spec.jobTemplate.spec.template.metadata.labels") (list "object.spec" "object.spec.podTemplate" "object.spec.podTemplate.metadata" "object.spec.podTemplate.metadata.labels") -}}
{{- $terms := list -}}
{{- range $paths -}}
{{- $guards := list -}}
{{- range . }}{{ $guards = append $guards (printf "has(%s)" .) }}{{ end -}}
{{- $terms = append $terms (printf "(%s && %s)" (join " && " $guards) (printf $ (last .))) -}}
{{- end -}}
{{- join " || " $terms -}}
{{- end -}}

{{/*
The pre-flight's URL with webhook.url (out-of-cluster development):
validation.url, else webhook.url with its trailing /mutate replaced by
validation.path.
*/}}
{{- define "sandbox-webhook.validationURL" -}}
{{- $v := .Values -}}
{{- if $v.validation.url -}}
{{- $v.validation.url -}}
{{- else if hasSuffix "/mutate" $v.webhook.url -}}
{{- printf "%s%s" (trimSuffix "/mutate" $v.webhook.url) $v.validation.path -}}
{{- else -}}
{{- fail (printf "webhook.url %q does not end in /mutate: set validation.url to the pre-flight's URL (or validation.enabled=false)" $v.webhook.url) -}}
{{- end -}}
{{- end -}}
