{{/*
One MutatingWebhookConfiguration of the pod webhook (SPEC 1).

Rendered by mutatingwebhookconfiguration.yaml, once for the default release
and twice for a release with a `revision` (see there), so that every one
carries the caBundle and the annotations of the same render. Called with a
dict: `root` (the chart's context), `caBundle`, `annotations` and `variant`
(`name`: the configuration's name; `selects`: `default`, `namespaces` or
`pods`).
*/}}
{{- define "sandbox-webhook.mutatingConfiguration" -}}
{{- $root := .root }}
{{- $v := $root.Values }}
{{- $fullname := include "sandbox-webhook.fullname" $root }}
{{- $rev := include "sandbox-webhook.revisionLabel" $root }}
{{- $selects := .variant.selects }}
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: {{ .variant.name }}
  labels:
    {{- include "sandbox-webhook.labels" $root | nindent 4 }}
  {{- with .annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
webhooks:
  - name: {{ include "sandbox-webhook.webhookName" $root }}
    admissionReviewVersions: ["v1"]
    # The webhook only computes a patch; a dry-run request gets the same answer.
    sideEffects: None
    # Every mutation is idempotent, so the webhook may safely be called again
    # after later webhooks changed the pod.
    reinvocationPolicy: IfNeeded
    failurePolicy: {{ $v.webhook.failurePolicy }}
    timeoutSeconds: {{ $v.webhook.timeoutSeconds }}
    matchPolicy: Equivalent
    clientConfig:
      {{- if $v.webhook.url }}
      url: {{ $v.webhook.url | quote }}
      {{- else }}
      service:
        name: {{ $fullname }}
        namespace: {{ $root.Release.Namespace }}
        port: {{ $v.service.port }}
        path: {{ $v.webhook.path | quote }}
      {{- end }}
      {{- with .caBundle }}
      caBundle: {{ . }}
      {{- end }}
    # CREATE is where a sandbox is completed. UPDATE of pods and of their
    # ephemeral containers is where it could be undone after admission (an
    # injected container's image swapped, a privileged or NET_ADMIN
    # ephemeral container): the webhook denies those, and drops NET_RAW and
    # NET_ADMIN from ephemeral containers beside a policy, under the same
    # failurePolicy (docs/security.md, "After admission").
    rules:
      - operations: ["CREATE"]
        apiGroups: [""]
        apiVersions: ["v1"]
        resources: ["pods"]
        scope: Namespaced
      - operations: ["UPDATE"]
        apiGroups: [""]
        apiVersions: ["v1"]
        resources: ["pods", "pods/ephemeralcontainers"]
        scope: Namespaced
    # Never the system namespaces, the webhook's own namespace, nor
    # config.excludedNamespaces (the webhook checks them again); and only
    # the namespaces of this release's revision.
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
    # Only sandbox pods: those labelled <prefix>/id (and, outside a
    # revision's namespaces, only those of this release's revision).
    objectSelector:
      matchExpressions:
        - key: {{ printf "%s/id" $v.config.prefix }}
          operator: Exists
        {{- if eq $selects "pods" }}
        - key: {{ $rev }}
          operator: In
          values: [{{ $v.revision | quote }}]
        {{- else if eq $selects "default" }}
        - key: {{ $rev }}
          operator: DoesNotExist
        {{- end }}
        {{- with $v.webhook.objectSelector.matchExpressions }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $v.webhook.objectSelector.matchLabels }}
      matchLabels:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    {{- /*
    What the webhook would certainly leave unchanged is not even sent
    (contract: select.match-conditions): a pod that opts out with
    `<prefix>/inject: "false"`, which the webhook skips before reading any
    other annotation. The webhook also accepts the value with blanks
    around it and in any case; the condition takes only the three spellings
    people write, so it never skips a pod the webhook would not. Each step
    is guarded with has(): an error in a condition would apply the
    failurePolicy. matchConditions are GA from 1.30; below that the webhook
    skips these pods itself.
    */}}
    {{- if semverCompare ">=1.30.0-0" $root.Capabilities.KubeVersion.Version }}
    matchConditions:
      - name: not-opted-out
        expression: >-
          !(has(object.metadata.annotations)
          && {{ printf "%s/inject" $v.config.prefix | quote }} in object.metadata.annotations
          && object.metadata.annotations[{{ printf "%s/inject" $v.config.prefix | quote }}] in ["false", "False", "FALSE"])
    {{- end }}
{{- end -}}
