# shellcheck shell=bash
# Part of tests/chart/run.sh (sourced there, not run): the config.yaml the
# chart renders is one the binary accepts. Uses run.sh's $bin, $WORK, render,
# counters and lib.sh's extract_config.

# With a built binary (cargo build), the config.yaml that the chart renders is
# fed to `sandbox-webhook inject`, which loads it exactly like `serve` does.
if [[ -n "$bin" ]] && "$bin" inject --help >/dev/null 2>&1; then
    sandbox_pod() { # sandbox_pod PREFIX [network-policy [transparent]] > pod.yaml
        printf 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: demo\n  namespace: default\n'
        printf '  labels:\n    %s/id: demo\n  annotations:\n    %s/timeout: 30m\n' "$1" "$1"
        [[ -n "${2:-}" ]] && printf "    %s/network-policy: '{\"defaultAction\":\"deny\"}'\n" "$1"
        # An upstream proxy (values-all.yaml) chains the transparent proxy only.
        [[ -n "${3:-}" ]] && printf "    %s/egress-env: '{\"OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT\":\"true\"}'\n" "$1"
        printf 'spec:\n  containers:\n    - name: sandbox\n      image: busybox\n      command: [sleep, "3600"]\n'
    }
    render "$WORK/egress-off.yaml" --set config.egress.image=
    extract_config "$WORK/helm.yaml" "$WORK/cfg-default.yaml"
    extract_config "$WORK/all.yaml" "$WORK/cfg-all.yaml"
    extract_config "$WORK/egress-off.yaml" "$WORK/cfg-egress-off.yaml"
    sandbox_pod opensandbox.io policy >"$WORK/pod-default.yaml"
    sandbox_pod sandbox.example.com policy transparent >"$WORK/pod-all.yaml"
    sandbox_pod opensandbox.io >"$WORK/pod-plain.yaml"
    inject() { "$bin" inject --now 2026-01-01T00:00:00Z --egress-token test-token "$@"; }
    run_test "binary accepts the default config.yaml and injects execd and egress" bash -c "
        out=\$($(declare -f inject); bin='$bin'; inject --config '$WORK/cfg-default.yaml' -f '$WORK/pod-default.yaml') &&
        grep -q 'execd-installer' <<<\"\$out\" && grep -q 'name: egress' <<<\"\$out\""
    run_test "binary accepts values-all.yaml's config.yaml (prefix sandbox.example.com)" bash -c "
        out=\$($(declare -f inject); bin='$bin'; inject --config '$WORK/cfg-all.yaml' -f '$WORK/pod-all.yaml') &&
        grep -q 'execd-installer' <<<\"\$out\" && grep -q 'sandbox.example.com/expires-at' <<<\"\$out\""
    run_test "binary accepts config.egress.image= (egress off) and still injects execd" bash -c "
        out=\$($(declare -f inject); bin='$bin'; inject --config '$WORK/cfg-egress-off.yaml' -f '$WORK/pod-plain.yaml') &&
        grep -q 'execd-installer' <<<\"\$out\""
    for cfg in default all egress-off; do
        run_test "sandbox-webhook config validate accepts the chart's config.yaml ($cfg)" \
            "$bin" config validate "$WORK/cfg-$cfg.yaml"
    done
    # Every configuration the chart accepts, the binary accepts from the
    # rendered config.yaml, and the schema rejects what the binary rejects.
    run_test "config parity: helm's schema and \`config validate\` agree on 27 configurations (config_parity.sh)" \
        "$HERE/config_parity.sh" "$bin" "$HELM"
    expect_fail "egress off: a pod asking for a network policy is denied" "egress image" \
        "$bin" inject --config "$WORK/cfg-egress-off.yaml" -f "$WORK/pod-default.yaml" --now 2026-01-01T00:00:00Z
    # The README tells production installs to pin the injected images by digest.
    pinned_execd="opensandbox/execd:v1.0.18@sha256:$(printf '%064d' 7)"
    pinned_egress="opensandbox/egress:v1.1.0@sha256:$(printf '%064d' 8)"
    render "$WORK/pinned.yaml" --set "config.execd.image=$pinned_execd" --set "config.egress.image=$pinned_egress"
    extract_config "$WORK/pinned.yaml" "$WORK/cfg-pinned.yaml"
    run_test "binary accepts digest-pinned config.execd.image/config.egress.image and injects them as given" bash -c "
        out=\$($(declare -f inject); bin='$bin'; inject --config '$WORK/cfg-pinned.yaml' -f '$WORK/pod-default.yaml') &&
        grep -qF -e 'image: $pinned_execd' -e 'image: \"$pinned_execd\"' <<<\"\$out\" &&
        grep -qF -e 'image: $pinned_egress' -e 'image: \"$pinned_egress\"' <<<\"\$out\""
else
    log "no sandbox-webhook binary with an inject subcommand built: config.yaml contract checks skipped"
fi
