#!/usr/bin/env bash
# The chart rejects at `helm install` what the binary would reject at start-up
# (contract: config.chart-parity): for each configuration below, `helm template` with it as
# the `config:` value must fail exactly when `sandbox-webhook config validate`
# fails on it. When the chart accepts, the binary validates the config.yaml the
# chart actually rendered (the file the pods load), so a value the schema lets
# through but the binary refuses (a crash-looping rollout) is caught too.
#
#   tests/chart/config_parity.sh BIN HELM
#
# One known difference, on purpose: a `null` in Helm values deletes the key
# (Helm's merge), so `prefix: null` installs the default prefix instead of
# being rejected; the cases below therefore never use null.
# Prints TAP lines and `N passed, M failed`; exits non-zero on a mismatch.
set -euo pipefail

BIN="$1"
HELM="$2"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CHART="$ROOT/charts/sandbox-webhook"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
tap_start

# verdict CASE-NAME YAML: compares the chart's and the binary's verdicts.
verdict() {
    local name="$1" yaml="$2" chart binary
    printf '%s\n' "$yaml" >"$WORK/config.yaml"
    { echo "config:"; sed 's/^/  /' "$WORK/config.yaml"; } >"$WORK/values.yaml"
    if "$HELM" template rel "$CHART" -n sbx -f "$WORK/values.yaml" >"$WORK/rendered.yaml" 2>"$WORK/helm.err"; then
        chart=accepts
        # What the pods would load: the rendered config.yaml.
        extract_config "$WORK/rendered.yaml" "$WORK/config.yaml"
    else
        chart=rejects
    fi
    if "$BIN" config validate "$WORK/config.yaml" >"$WORK/bin.out" 2>&1; then binary=accepts; else binary=rejects; fi
    if [[ "$chart" == "$binary" ]]; then
        ok "config parity: $name: chart and binary both ${chart%s}"
    else
        not_ok "config parity: $name: the chart ${chart%s}s, the binary ${binary%s}s"
        sed -e 's/^/    helm: /' "$WORK/helm.err" | tail -n 3
        sed -e 's/^/    bin: /' "$WORK/bin.out" | tail -n 3
    fi
}

ensure_pyyaml

# Accepted by both.
verdict "the defaults" '{}'
verdict "another prefix" 'prefix: sandbox.example.com'
verdict "a digest-pinned execd image" "execd: {image: \"registry.example.com:5000/team/execd:v2@sha256:$(printf '%064d' 1)\"}"
verdict "egress off (empty image)" 'egress: {image: ""}'
verdict "resources as quantities" 'execd: {resources: {limits: {cpu: 500m, memory: 256Mi}, requests: {cpu: "0.1"}}}'
verdict "mode dns+nft" 'egress: {mode: dns+nft}'
verdict "expiry bounds" 'expiry: {defaultTimeoutSeconds: 3600, maxTimeoutSeconds: 7200}'
verdict "one excluded namespace" 'excludedNamespaces: [tenant-a]'
verdict "the smallest rule cap" 'egress: {maxRules: 1}'
verdict "execd as init, isolation allowed" 'execd: {runAsInit: true, allowIsolation: true}'
verdict "an OTLP endpoint" 'egress: {otlpEndpoint: "https://otel-collector.observability:4318"}'
verdict "no OTLP endpoint (empty)" 'egress: {otlpEndpoint: ""}'
verdict "no incompatible runtime classes" 'egress: {incompatibleRuntimeClasses: []}'
verdict "two incompatible runtime classes" 'egress: {incompatibleRuntimeClasses: [gvisor, kata-fc]}'
verdict "pods left alone (empty)" 'pod: {automountServiceAccountToken: ""}'
verdict "automount forced off" 'pod: {automountServiceAccountToken: false}'
verdict "an upstream proxy with a Secret credential and a CA" 'egress: {mode: dns+nft, upstreamProxy: {url: "http://proxy.corp.example:3128", authorizationSecretRef: {name: proxy-auth, key: header}, caSecretName: corp-ca}}'
verdict "an upstream proxy with a literal credential" 'egress: {mode: dns+nft, upstreamProxy: {url: "https://[fd00::1]:8443/", authorization: "Basic eA=="}}'

# Rejected by both.
verdict "a prefix that is not a DNS subdomain" 'prefix: Open_Sandbox'
verdict "an empty prefix" 'prefix: ""'
verdict "a numeric image" 'execd: {image: 123}'
verdict "an image with a space" 'execd: {image: "opensandbox/execd: v1"}'
verdict "an upper-case repository" 'egress: {image: OpenSandbox/egress:v1}'
verdict "a cpu that is not a quantity" 'execd: {resources: {limits: {cpu: lots}}}'
verdict "a negative memory" 'egress: {resources: {requests: {memory: -1Mi}}}'
verdict "an unknown resource name" 'execd: {resources: {limits: {cpus: "1"}}}'
verdict "an upper-case namespace" 'excludedNamespaces: [Kube-System]'
verdict "an unknown egress mode" 'egress: {mode: iptables}'
verdict "no rules allowed" 'egress: {maxRules: 0}'
verdict "too many rules" 'egress: {maxRules: 50001}'
verdict "a default timeout below 60 s" 'expiry: {defaultTimeoutSeconds: 10}'
verdict "a maximum above ten years" 'expiry: {maxTimeoutSeconds: 400000000}'
verdict "a boolean as text" 'egress: {nativeSidecar: "yes"}'
verdict "a misspelled key" 'execd: {imgae: x}'
verdict "an unknown top-level key" 'prefixes: [a]'
verdict "a default timeout above the maximum" 'expiry: {defaultTimeoutSeconds: 7200, maxTimeoutSeconds: 3600}'
verdict "runAsInit as text" 'execd: {runAsInit: "true"}'
verdict "an OTLP endpoint without a scheme" 'egress: {otlpEndpoint: otel-collector:4318}'
verdict "an OTLP endpoint without a host" 'egress: {otlpEndpoint: "http://"}'
verdict "an OTLP endpoint with a password" 'egress: {otlpEndpoint: "https://u:p@otel:4318"}'
verdict "an upper-case runtime class" 'egress: {incompatibleRuntimeClasses: [gVisor]}'
verdict "runtime classes as one string" 'egress: {incompatibleRuntimeClasses: gvisor}'
verdict "automount forced on" 'pod: {automountServiceAccountToken: true}'
verdict "an unknown pod key" 'pod: {automount: false}'
verdict "an upstream proxy in mode dns" 'egress: {upstreamProxy: {url: "http://proxy:3128"}}'
verdict "an upstream proxy with a password in its URL" 'egress: {mode: dns+nft, upstreamProxy: {url: "http://u:p@proxy:3128"}}'
verdict "an upstream proxy with a path" 'egress: {mode: dns+nft, upstreamProxy: {url: "http://proxy:3128/x"}}'
verdict "an upstream proxy without a scheme" 'egress: {mode: dns+nft, upstreamProxy: {url: "proxy:3128"}}'
verdict "an upstream proxy without a url" 'egress: {mode: dns+nft, upstreamProxy: {caSecretName: corp-ca}}'
verdict "an upstream proxy with both credentials" 'egress: {mode: dns+nft, upstreamProxy: {url: "http://proxy:3128", authorization: "Basic eA==", authorizationSecretRef: {name: a, key: b}}}'
verdict "an upstream proxy credential that is blank" 'egress: {mode: dns+nft, upstreamProxy: {url: "http://proxy:3128", authorization: " "}}'
verdict "an upstream proxy Secret key with a slash" 'egress: {mode: dns+nft, upstreamProxy: {url: "http://proxy:3128", authorizationSecretRef: {name: a, key: "a/b"}}}'

printf '\n%d passed, %d failed\n' "$pass" "$fail"
[[ $fail -eq 0 ]]
