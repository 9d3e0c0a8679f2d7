# shellcheck shell=bash
# Part of tests/chart/run.sh (sourced there, not run): the chart README's
# Argo CD snippet is valid for the configuration the chart renders, the README
# documents every value, values-all.yaml sets every value, and the packaged
# chart and helm's Kubernetes version are what the docs promise. (What the
# README says in prose is the README's to keep; a check that greps for
# sentences protects no user.)
# Uses run.sh's $CHART, $HERE, $HELM, $WORK, $NS, $KUBE_NEW and counters.

# ------------------------------------------------------------------ the chart README
argo_snippet() {
    "$HELM" template sandbox-webhook "$CHART" -n opensandbox-system --show-only templates/mutatingwebhookconfiguration.yaml \
        >"$WORK/argo-mwc.yaml" &&
        python3 "$HERE/check_readme_argo.py" "$CHART/README.md" "$WORK/argo-mwc.yaml"
}
run_test "README: the Argo CD ignoreDifferences snippet is valid and names the webhook configuration the chart renders" argo_snippet

# ------------------------------------------------------------------ docs and fixtures stay complete
leaf_keys() { # leaf_keys FILE: dotted paths of values.yaml, maps with entries expanded
    python3 - "$1" <<'EOF'
import sys, yaml
def walk(v, p):
    # By the last path component, so controller.resources is one value too.
    if isinstance(v, dict) and v and p.split(".")[-1] not in (
            "podSecurityContext", "securityContext", "resources", "updateStrategy",
            "livenessProbe", "readinessProbe", "nodeSelector", "ownerActions"):
        for k, x in v.items():
            yield from walk(x, f"{p}.{k}" if p else k)
    else:
        yield p
for k in walk(yaml.safe_load(open(sys.argv[1])), ""):
    print(k)
EOF
}
missing_readme=""
missing_all=""
while IFS= read -r key; do
    grep -qF "| \`$key\` |" "$CHART/README.md" || missing_readme+=" $key"
    python3 - "$HERE/values-all.yaml" "$key" <<'EOF' || missing_all+=" $key"
import sys, yaml
v = yaml.safe_load(open(sys.argv[1]))
for part in sys.argv[2].split("."):
    if not isinstance(v, dict) or part not in v:
        sys.exit(1)
    v = v[part]
EOF
done < <(leaf_keys "$CHART/values.yaml")
if [[ -z "$missing_readme" ]]; then ok "chart README documents every value"; else not_ok "chart README lacks:$missing_readme"; fi
if [[ -z "$missing_all" ]]; then ok "values-all.yaml sets every value"; else not_ok "values-all.yaml lacks:$missing_all"; fi
run_test "helm package: the archive has the schema, README and NOTES and no keys" bash -c "
    '$HELM' package '$CHART' -d '$WORK/pkg' >/dev/null &&
    files=\$(tar -tzf '$WORK'/pkg/sandbox-webhook-*.tgz) &&
    grep -qx 'sandbox-webhook/values.schema.json' <<<\"\$files\" &&
    grep -qx 'sandbox-webhook/README.md' <<<\"\$files\" &&
    grep -qx 'sandbox-webhook/templates/NOTES.txt' <<<\"\$files\" &&
    ! grep -Eq '\\.(key|pem)\$' <<<\"\$files\""
run_test "values.yaml passes values.schema.json (helm lint of defaults)" "$HELM" lint --strict --kube-version "$KUBE_NEW" "$CHART"
# cluster.sh stamps helm with the e2e control plane's Kubernetes version, so
# the chart's kubeVersion (>= 1.29) is met without --kube-version.
run_test "helm lint --strict without --kube-version (helm's built-in Kubernetes version)" \
    "$HELM" lint --strict "$CHART"
run_test "helm template without --kube-version renders the chart" \
    bash -c "'$HELM' template rel '$CHART' -n '$NS' | grep -q '^kind: MutatingWebhookConfiguration\$'"
mkdir -p "$WORK/kv/templates"
printf 'apiVersion: v2\nname: kv\nversion: 0.0.1\nkubeVersion: ">=%s-0"\n' "$KUBE_NEW" >"$WORK/kv/Chart.yaml"
printf 'v: {{ .Capabilities.KubeVersion.Version }}\n' >"$WORK/kv/templates/v.yaml"
run_test "helm's built-in Kubernetes version is at least $KUBE_NEW (a chart requiring it renders)" \
    "$HELM" template "$WORK/kv"
