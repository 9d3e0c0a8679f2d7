#!/usr/bin/env python3
"""Assert the workload pre-flight's ValidatingWebhookConfiguration (contract: workload.webhook-configuration)
in a `helm template` rendering of charts/sandbox-webhook.

Usage: check_validating.py CASE RENDERED.yaml [NAMESPACE]

Prints one line per check, `ok - <what>` or `not ok - <what>: <why>`, and
exits 1 if any check failed. tests/chart/run.sh counts the lines.
"""
import json
import sys

import yaml

from tap import check, finish, run_checks

CASE, PATH = sys.argv[1], sys.argv[2]
NS = sys.argv[3] if len(sys.argv) > 3 else "sbx"

# The kinds of the contract (contract: workload.kinds), as src/workload/kinds.rs KINDS has them.
# agent-sandbox 1.0 serves only Sandbox v1beta1; earlier releases v1alpha1.
RULES = [
    ("apps", ["v1"], ["deployments", "statefulsets", "daemonsets", "replicasets"]),
    ("batch", ["v1"], ["jobs", "cronjobs"]),
    ("sandbox.opensandbox.io", ["v1alpha1"], ["batchsandboxes"]),
    ("agents.x-k8s.io", ["v1alpha1", "v1beta1"], ["sandboxes"]),
]
# Where each kind keeps its template, as the matchCondition must read it.
TEMPLATE_LABELS = ["object.spec.template.metadata.labels",
                   "object.spec.jobTemplate.spec.template.metadata.labels",
                   "object.spec.podTemplate.metadata.labels"]

with open(PATH, encoding="utf-8") as f:
    docs = [d for d in yaml.safe_load_all(f) if d]


def of_kind(kind):
    return [d for d in docs if d["kind"] == kind]


def the(kind):
    objs = of_kind(kind)
    if len(objs) != 1:
        raise AssertionError(f"expected exactly one {kind}, found {len(objs)}")
    return objs[0]


def selecting_namespaces(kind):
    """The configuration of `kind` that selects namespaces (a release with a revision has a
    second one, `-pods`, for the pods labelled with it)."""
    objs = [d for d in of_kind(kind) if not d["metadata"]["name"].endswith("-pods")]
    if len(objs) != 1:
        raise AssertionError(f"expected exactly one {kind} (besides -pods), found {len(objs)}")
    return objs[0]


def check_vwc(prefix="opensandbox.io", name=None, failure="Ignore", timeout=5, conditions=True, revision=None):
    """The pre-flight's configuration, mirrored on the pod webhook's."""
    mwc = selecting_namespaces("MutatingWebhookConfiguration")
    vwc = selecting_namespaces("ValidatingWebhookConfiguration")
    check("ValidatingWebhookConfiguration has the MutatingWebhookConfiguration's name (release namespace in it)",
          vwc["metadata"]["name"] == mwc["metadata"]["name"], vwc["metadata"]["name"])
    check("same annotations as the pod webhook's (AKS opt-out, cert-manager injection)",
          vwc["metadata"].get("annotations") == mwc["metadata"].get("annotations"),
          (vwc["metadata"].get("annotations"), mwc["metadata"].get("annotations")))
    check("exactly one webhook", len(vwc["webhooks"]) == 1, len(vwc["webhooks"]))
    w, m = vwc["webhooks"][0], mwc["webhooks"][0]
    name = name or f"sandbox-webhook.{prefix}"
    check(f"webhook name is {name}", w["name"] == name, w["name"])
    check("admissionReviewVersions [v1], sideEffects None, matchPolicy Equivalent",
          w["admissionReviewVersions"] == ["v1"] and w["sideEffects"] == "None"
          and w["matchPolicy"] == "Equivalent", w)
    check("no reinvocationPolicy (not a mutating webhook)", "reinvocationPolicy" not in w, w.get("reinvocationPolicy"))
    check(f"failurePolicy is {failure}", w["failurePolicy"] == failure, w["failurePolicy"])
    check(f"timeoutSeconds is {timeout}", w["timeoutSeconds"] == timeout, w["timeoutSeconds"])
    expected = [{"operations": ["CREATE", "UPDATE"], "apiGroups": [g], "apiVersions": v, "resources": r,
                 "scope": "Namespaced"} for g, v, r in RULES]
    check("rules: CREATE and UPDATE of the workload kinds, no subresources",
          w["rules"] == expected, json.dumps(w["rules"]))
    check("namespaceSelector is the pod webhook's", w["namespaceSelector"] == m["namespaceSelector"],
          (w["namespaceSelector"], m["namespaceSelector"]))
    check("no objectSelector (it would see the workload's labels, not the template's)",
          "objectSelector" not in w, w.get("objectSelector"))
    cc, mc = w["clientConfig"], m["clientConfig"]
    check("caBundle is the pod webhook's", cc.get("caBundle") == mc.get("caBundle"),
          (str(cc.get("caBundle"))[:20], str(mc.get("caBundle"))[:20]))
    if "service" in mc:
        svc, msvc = cc.get("service", {}), mc["service"]
        check("clientConfig.service is the pod webhook's Service at /validate",
              svc.get("path") == "/validate"
              and {k: svc.get(k) for k in ("name", "namespace", "port")}
              == {k: msvc.get(k) for k in ("name", "namespace", "port")}, cc)
    conds = w.get("matchConditions")
    if conditions:
        names = [c["name"] for c in conds or []]
        # contract: revision.selectors
        want = ["sandbox-template"] if revision else ["sandbox-template", "sandbox-revision"]
        check(f"matchConditions {want}", names == want, conds)
        if not revision:
            rev = " ".join(conds[-1]["expression"].split())
            check(f"the default release leaves templates labelled {prefix}/rev alone",
                  rev.startswith("!(") and all(f'"{prefix}/rev" in {labels}' in rev for labels in TEMPLATE_LABELS),
                  rev)
        expr = " ".join((conds or [{}])[0].get("expression", "").split())
        for labels in TEMPLATE_LABELS:
            check(f"matchCondition reads {labels} for {prefix}/id",
                  f'"{prefix}/id" in {labels}' in expr, expr)
            # Every step is guarded: an error in a condition applies the failurePolicy.
            parts = labels.split(".")
            guards = [f"has({'.'.join(parts[:i])})" for i in range(2, len(parts) + 1)]
            check(f"matchCondition guards each step to {labels} with has()",
                  all(g in expr for g in guards), [g for g in guards if g not in expr])
    else:
        check("no matchConditions below Kubernetes 1.30", conds is None, conds)
    return vwc, w


def case_default():
    check_vwc()


def case_old():
    check_vwc(conditions=False)


def case_off():
    check("validation.enabled=false renders no ValidatingWebhookConfiguration",
          not of_kind("ValidatingWebhookConfiguration"), [d["kind"] for d in docs])
    check("... and still the MutatingWebhookConfiguration", len(of_kind("MutatingWebhookConfiguration")) == 1)


def case_all():
    _, w = check_vwc(prefix="sandbox.example.com", name="preflight.sandbox.example.com", failure="Fail", timeout=7,
                     revision="v2")
    check("values-all: the extra namespaceSelector expression is kept",
          {"key": "sandbox.example.com/enabled", "operator": "NotIn", "values": ["false"]}
          in w["namespaceSelector"]["matchExpressions"], w["namespaceSelector"])


def case_url():
    _, w = check_vwc()
    cc = w["clientConfig"]
    check("webhook.url: the pre-flight's url ends in /validate instead of /mutate",
          cc.get("url") == "https://127.0.0.1:18443/validate" and "service" not in cc, cc)


def case_url_override():
    _, w = check_vwc()
    check("validation.url wins", w["clientConfig"].get("url") == "https://127.0.0.1:19443/pre", w["clientConfig"])


def case_certmanager():
    vwc, w = check_vwc()
    check("certManager: cainjector annotation and no caBundle",
          "cert-manager.io/inject-ca-from" in (vwc["metadata"].get("annotations") or {})
          and "caBundle" not in w["clientConfig"], vwc["metadata"])


CASES = {"default": case_default, "old": case_old, "off": case_off, "all": case_all, "url": case_url,
         "url-override": case_url_override, "certManager": case_certmanager}
run_checks("checks ran to completion", CASES[CASE])
finish(f"validation {CASE}")
