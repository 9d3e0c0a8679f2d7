"""The differential suite: this webhook against OpenSandbox's real server.

contract: coexist.recognised, coexist.kept, coexist.policy, egress.token-kept,
egress.rules-as-values, expiry.owner-held, egress.upstream-proxy,
egress.upstream-proxy-ca, egress.extra-env-allowlist

For every create request of `cases.py`, OpenSandbox's server (the pinned
opensandbox-server, its own code, only its Kubernetes client stood in for:
`server_pods.py`) builds its pod, and the webhook binary answers as the
apiserver would ask it (`sandbox-webhook review`):

(a) the server's pod is admitted with no patch, under the cluster's
    default configuration and under one that mirrors the server's; a patch
    is counted by the harm it would do (a sidecar removed, a policy or
    token changed, an installer rewritten, a Windows pod touched, a
    lifetime label that is false);
(b) the same intent, given as a bare pod with annotations, comes out of
    the webhook as the server's pod, field by field, but for the
    deliberate differences of docs/behaviour.md (`DELIBERATE` below, each
    named where it applies), once with the sidecar where the server puts
    it (`egress.nativeSidecar: false`) and once where the webhook does by
    default.

Usage: differential.py --webhook PATH [--verbose]. Prints one line per
request and the counts; exits 1 if any request fails either check.
"""

import argparse
import base64
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time

import yaml

# The review as the apiserver sends it, shared with the benchmarks.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from admission import pod_create_review  # noqa: E402

import bare
import cases
import server_pods

NOW = "2026-10-01T00:00:00Z"
P = "opensandbox.io"

# The deliberate differences of docs/behaviour.md ("Deliberate differences
# from OpenSandbox's server"), by the name each normalizer reports.
DELIBERATE = {
    "intent-annotations": "the intent is the pod's annotations, not a workload's fields",
    "lifetime-on-pod": "the lifetime is the pod's expires-at annotation, not the workload's expireTime/shutdownTime",
    "token-annotation": "the token is also written to the pod's egress-auth-token annotation",
    "injection-record": "the pod records what the webhook injected in its injected annotation",
    "drop-net-raw": "beside a policy the main container drops NET_RAW as well as NET_ADMIN",
    "startup-probe": "the native sidecar has a startup probe, so the app starts once the rules are in place",
    "windows-policy-denied": "a policy on a Windows platform is denied: the webhook injects no sidecar there",
    "rules-compact": "the rules are compact JSON with actions lower-cased",
    "restricted-installer": "the installer without the IPv6 guard runs with the restricted securityContext",
    "native-sidecar": "the sidecar is a native sidecar in initContainers (egress.nativeSidecar: true)",
    "volume-order": "the webhook's volumes are appended after the pod's own",
    "mount-order": "the webhook's mounts are appended after the main container's own",
    "mitm-env-position": "the main container's MITM variable comes with the webhook's env, not among the request's",
    "isolation-caps-union": "isolation joins SYS_ADMIN to the capabilities a template adds; the server's template merge drops them",
    "windows-vm-profile": "the Windows VM profile is the server's to build: only the architecture selector is set",
    "controller-metadata": "the workload controller's owner reference, labels and annotations",
}


def apply_patch(doc, ops):
    """RFC 6902, the operations the webhook writes (add, remove, replace)."""
    doc = json.loads(json.dumps(doc))
    for op in ops:
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
        parent = doc
        for t in tokens[:-1]:
            parent = parent[int(t)] if isinstance(parent, list) else parent[t]
        last = tokens[-1]
        if op["op"] == "remove":
            del parent[int(last) if isinstance(parent, list) else last]
        elif isinstance(parent, list):
            at = len(parent) if last == "-" else int(last)
            if op["op"] == "add":
                parent.insert(at, op["value"])
            else:
                parent[at] = op["value"]
        else:
            parent[last] = op["value"]
    return doc


def review(webhook, pod, config_yaml, token=None):
    """The webhook's answer to the CREATE of `pod`: (allowed, ops, warnings, message)."""
    request = pod_create_review(
        pod, "differential", pod["metadata"]["namespace"], {"username": "system:serviceaccount:sandbox:controller"}
    )
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as config:
        config.write(config_yaml)
        config.flush()
        args = [webhook, "review", "-f", "-", "--config", config.name, "--now", NOW]
        if token:
            args += ["--egress-token", token]
        out = subprocess.run(args, input=json.dumps(request), capture_output=True, text=True)
    if out.returncode != 0:
        return False, [], [], "review failed: " + out.stderr.strip()
    response = json.loads(out.stdout)["response"]
    ops = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    message = response.get("status", {}).get("message")
    return response["allowed"], ops, response.get("warnings", []), message


def containers(pod, name):
    spec = pod["spec"]
    return [c for key in ("initContainers", "containers") for c in spec.get(key, []) if c["name"] == name]


def env_of(container, name):
    for e in container.get("env") or []:
        if e["name"] == name:
            return e.get("value", e.get("valueFrom"))
    return None


def harms(case, pod, ops):
    """What a patch on the server's pod would break, by kind."""
    if not ops:
        return []
    after = apply_patch(pod, ops)
    found = []
    before_sidecar, after_sidecar = containers(pod, "egress"), containers(after, "egress")
    if before_sidecar and not after_sidecar:
        found.append("sidecar removed")
    elif before_sidecar:
        b, a = before_sidecar[0], after_sidecar[0]
        if env_of(b, "OPENSANDBOX_EGRESS_RULES") != env_of(a, "OPENSANDBOX_EGRESS_RULES"):
            found.append("policy changed")
        if env_of(b, "OPENSANDBOX_EGRESS_TOKEN") != env_of(a, "OPENSANDBOX_EGRESS_TOKEN"):
            found.append("token changed")
    annotations = lambda p: p["metadata"].get("annotations") or {}
    token = f"{P}/egress-auth-token"
    if annotations(pod).get(token) != annotations(after).get(token):
        found.append("token changed")
    if containers(pod, "execd-installer") != containers(after, "execd-installer"):
        found.append("installer rewritten")
    if "windows" in case["name"]:
        found.append("windows pod touched")
    if f"{P}/manual-cleanup" in after["metadata"].get("labels", {}) and f"{P}/manual-cleanup" not in pod["metadata"].get("labels", {}):
        found.append("false manual-cleanup label")
    return found or ["other patch"]


def check_a(webhook, case, config, pod):
    """(a): the server's pod through review, under each configuration.
    Returns the problems and the kinds of harm a patch would do."""
    problems, all_harms = [], set()
    for what, config_yaml in [
        ("default configuration", "{}\n"),
        ("mirrored configuration", bare.webhook_config(config, native=False)),
    ]:
        allowed, ops, warnings, message = review(webhook, pod, config_yaml)
        if not allowed:
            problems.append(f"(a) {what}: denied: {message}")
            continue
        found = harms(case, pod, ops)
        all_harms.update(found)
        if found:
            problems.append(f"(a) {what}: patched ({', '.join(found)}): {[o['op'] + ' ' + o['path'] for o in ops]}")
        for w in warnings:
            if "server" not in w:
                problems.append(f"(a) {what}: unexpected warning: {w}")
    return problems, all_harms


def check_b(webhook, case, config, workload, pod):
    """(b): the same intent as a bare pod, through review, against the server's pod."""
    problems, used = [], set()
    token = bare.server_token(pod)
    for native in (False, True):
        config_yaml = bare.webhook_config(config, native=native)
        start = bare.bare_pod(case, config, pod)
        allowed, ops, _warnings, message = review(webhook, start, config_yaml, token)
        if not allowed:
            deliberate = bare.deliberate_denial(case, message)
            if deliberate:
                used.add(deliberate)
            else:
                problems.append(f"(b) native={native}: denied: {message}")
            continue
        out = apply_patch(start, ops)
        _, again, _, _ = review(webhook, out, config_yaml, token)
        if again:
            problems.append(f"(b) native={native}: the webhook's own output, admitted again, is patched: {again}")
        want, got, named = bare.normalized(case, workload, pod, out, native)
        used |= named
        for path in bare.differences(want, got):
            problems.append(f"(b) native={native}: differs at {path}")
    return problems, used


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--webhook", required=True)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    started = time.monotonic()
    failed, counts, used = [], {}, set()
    # The server's code runs one request at a time (the suite replaces its
    # token source per request); the webhook's answers are processes of
    # their own, run side by side.
    built = [(case, *server_pods.build(case)) for case in cases.CASES]
    sidecar_pods = sum(bool(containers(pod, "egress")) for *_, pod in built)
    windows_pods = sum("windows" in case["name"] for case, *_ in built)

    def check(row):
        case, config, workload, pod = row
        return check_a(args.webhook, case, config, pod), check_b(args.webhook, case, config, workload, pod)

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(check, built))
    for (case, *_), ((problems_a, found), (problems_b, named)) in zip(built, results):
        for h in found:
            counts[h] = counts.get(h, 0) + 1
        used |= named
        problems = problems_a + problems_b
        print(f"{'FAIL' if problems else 'ok  '} {case['name']}" + (f" ({', '.join(sorted(named))})" if args.verbose and named else ""))
        for p in problems:
            print("     " + p)
        if problems:
            failed.append(case["name"])
    print()
    print(f"{len(cases.CASES)} requests to opensandbox-server {server_pods.server_version()}, "
          f"{len(cases.CASES)} pods built ({sidecar_pods} with an egress sidecar, {windows_pods} Windows VM profile)")
    print("  (a) the server's pods through review, pods with each harm under either configuration:")
    for kind in ["sidecar removed", "policy changed", "token changed", "installer rewritten",
                 "windows pod touched", "false manual-cleanup label", "other patch"]:
        print(f"      {kind}: {counts.get(kind, 0)}")
    print(f"  (b) deliberate differences met: {', '.join(sorted(used))}")
    unmet = sorted(set(DELIBERATE) - used)
    if unmet:
        print(f"  (b) deliberate differences never met: {', '.join(unmet)}")
        failed.append("the table lists differences no request shows")
    print(f"  {len(failed)} failed, {time.monotonic() - started:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
