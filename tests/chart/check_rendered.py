#!/usr/bin/env python3
"""Assert key facts of a `helm template` rendering of charts/sandbox-webhook.

Usage: check_rendered.py CASE RENDERED.yaml [NAMESPACE]

Prints one line per check, `ok - <what>` or `not ok - <what>: <why>`, and
exits 1 if any check failed. tests/chart/run.sh counts the lines.
Needs python3 with PyYAML; openssl is used to verify generated certificates.
"""
import base64
import os
import tempfile

import yaml

from rendered import (CASE, NS, WEBHOOK_CONFIGURATIONS, by_kind, check_deployment, check_test_hook,
                      check_webhook, controller_docs, ctl_by_kind, deployment_parts, docs, is_test_hook, one,
                      openssl, selector_values)
from tap import check, finish, run_checks


# ---------------------------------------------------------------- cases
def case_helm():
    mwc, w = check_webhook()
    check("defaults: no NetworkPolicy (values.yaml says why no default can admit only the API server)",
          not by_kind.get("NetworkPolicy"))
    check_deployment("rel-sandbox-webhook-tls")
    check_test_hook()
    tls = one("Secret", "rel-sandbox-webhook-tls")
    ca = one("Secret", "rel-sandbox-webhook-ca")
    check("helm mode: caBundle == ca.crt of the TLS Secret == CA Secret's certificate",
          w["clientConfig"]["caBundle"] == tls["data"]["ca.crt"] == ca["data"]["tls.crt"])
    check("helm mode: no cert-manager annotation", "cert-manager.io/inject-ca-from" not in
          (mwc["metadata"].get("annotations") or {}))
    with tempfile.TemporaryDirectory() as d:
        for name, b64 in (("ca.crt", ca["data"]["tls.crt"]), ("tls.crt", tls["data"]["tls.crt"]),
                          ("tls.key", tls["data"]["tls.key"])):
            with open(os.path.join(d, name), "wb") as f:
                f.write(base64.b64decode(b64))
        v = openssl("verify", "-CAfile", f"{d}/ca.crt", f"{d}/tls.crt")
        check("helm mode: serving certificate verifies against the CA", v.returncode == 0, v.stdout + v.stderr)
        t = openssl("x509", "-in", f"{d}/tls.crt", "-noout", "-ext", "subjectAltName")
        check(f"helm mode: certificate is valid for rel-sandbox-webhook.{NS}.svc",
              f"DNS:rel-sandbox-webhook.{NS}.svc" in t.stdout, t.stdout + t.stderr)
        k = openssl("pkey", "-in", f"{d}/tls.key", "-noout", "-text")
        check("helm mode: key is ECDSA P-256", "prime256v1" in k.stdout or "P-256" in k.stdout, k.stdout[:200])
        m1 = openssl("pkey", "-in", f"{d}/tls.key", "-pubout").stdout
        m2 = openssl("x509", "-in", f"{d}/tls.crt", "-noout", "-pubkey").stdout
        check("helm mode: key matches the certificate", m1 and m1 == m2)


def case_certmanager():
    mwc, w = check_webhook()
    check_deployment("rel-sandbox-webhook-cm-tls")
    ann = mwc["metadata"].get("annotations") or {}
    check("certManager: inject-ca-from names the serving Certificate",
          ann.get("cert-manager.io/inject-ca-from") == f"{NS}/rel-sandbox-webhook", ann)
    check("certManager: no caBundle in the configuration (cainjector fills it)", "caBundle" not in w["clientConfig"])
    check("certManager: no Secret is rendered", "Secret" not in by_kind, list(by_kind))
    ss = one("Issuer", "rel-sandbox-webhook-selfsigned")
    check("certManager: self-signed Issuer", ss["spec"] == {"selfSigned": {}}, ss["spec"])
    cacert = one("Certificate", "rel-sandbox-webhook-ca")
    check("certManager: CA Certificate is a CA issued by the self-signed Issuer",
          cacert["spec"]["isCA"] is True and cacert["spec"]["issuerRef"]["name"] == "rel-sandbox-webhook-selfsigned")
    cai = one("Issuer", "rel-sandbox-webhook-ca")
    check("certManager: CA Issuer uses the CA Certificate's Secret",
          cai["spec"] == {"ca": {"secretName": cacert["spec"]["secretName"]}}, cai["spec"])
    serving = one("Certificate", "rel-sandbox-webhook")
    check("certManager: serving Certificate is issued by the CA Issuer",
          serving["spec"]["issuerRef"] == {"name": "rel-sandbox-webhook-ca", "kind": "Issuer", "group": "cert-manager.io"},
          serving["spec"]["issuerRef"])
    check("certManager: serving Certificate writes the mounted Secret, named apart from helm mode's",
          serving["spec"]["secretName"] == "rel-sandbox-webhook-cm-tls", serving["spec"]["secretName"])
    check("certManager: the CA Certificate's Secret is named apart from helm mode's",
          cacert["spec"]["secretName"] == "rel-sandbox-webhook-cm-ca", cacert["spec"]["secretName"])
    check(f"certManager: serving Certificate covers rel-sandbox-webhook.{NS}.svc",
          f"rel-sandbox-webhook.{NS}.svc" in serving["spec"]["dnsNames"], serving["spec"]["dnsNames"])


def case_existing():
    expected = os.environ["EXPECTED_CA_B64"]
    check_webhook(ca_bundle=expected)
    check_deployment("my-tls")
    check("existingSecret: the chart renders no Secret", "Secret" not in by_kind, list(by_kind))
    check("existingSecret: no cert-manager objects", "Certificate" not in by_kind and "Issuer" not in by_kind)


def case_url():
    expected = os.environ["EXPECTED_CA_B64"]
    check_webhook(url="https://127.0.0.1:18443/mutate", ca_bundle=expected)
    check("deployment.enabled=false renders only the webhook configurations (and the helm test hook)",
          [o["kind"] for o in docs if not is_test_hook(o)] == list(WEBHOOK_CONFIGURATIONS), list(by_kind))


def case_all():
    _, w = check_webhook(prefix="sandbox.example.com", failure="Ignore", timeout=10, extra_ns=["monitoring"],
                         port=8443, revision="v2", name="inject.sandbox.example.com")
    check("values-all: extra namespaceSelector expression is kept",
          selector_values(w["namespaceSelector"], "sandbox.example.com/enabled", "NotIn") == ["false"])
    check("values-all: extra objectSelector expression is kept",
          selector_values(w["objectSelector"], "sandbox.example.com/tier", "In") == ["standard", "premium"])
    check("values-all: matchLabels are kept",
          w["objectSelector"].get("matchLabels") == {"example.com/managed": "true"}
          and w["namespaceSelector"].get("matchLabels") == {"example.com/sandboxes": "allowed"})
    for kind in ("Deployment", "Service", "ServiceAccount", "ConfigMap", "PodDisruptionBudget", "NetworkPolicy",
                 "ServiceMonitor", "PodMonitor", "PrometheusRule", "Certificate", *WEBHOOK_CONFIGURATIONS):
        check(f"values-all renders a {kind}", kind in by_kind, list(by_kind))
    check("values-all: issuerRef skips the self-signed chain", "Issuer" not in by_kind)
    check_test_hook(fullname="sandbox-hook", prefix="sandbox.example.com", test_ns="sandboxes", mesh=False,
                    image="registry.example.com/mirror/curl@sha256:" + "fedcba9876543210" * 4)
    pod = one("Deployment")["spec"]["template"]["spec"]
    c = pod["containers"][0]
    check("values-all: image by digest", c["image"].endswith("@sha256:" + "0123456789abcdef" * 4), c["image"])
    check("values-all: client CA mounted and passed",
          "--client-ca=/etc/sandbox-webhook/client-ca/client-ca.crt" in c["args"])
    check("values-all: shutdown delay and timeout, grace period",
          "--shutdown-delay=7s" in c["args"] and "--shutdown-timeout=20s" in c["args"]
          and pod["terminationGracePeriodSeconds"] == 45, (c["args"], pod.get("terminationGracePeriodSeconds")))
    check("values-all: extraArgs appended", c["args"][-1] == "--max-connections=2048", c["args"])
    check("values-all: priorityClassName", pod.get("priorityClassName") == "sandbox-critical")
    tmeta = one("Deployment")["spec"]["template"]["metadata"]
    check("values-all: meshOptOut false: no mesh opt-out labels or annotations",
          not any(k in tmeta["labels"] for k in ("sidecar.istio.io/inject", "istio.io/dataplane-mode"))
          and "linkerd.io/inject" not in (tmeta.get("annotations") or {}), tmeta)
    check("values-all: prometheus.io annotations on the pods",
          {k: v for k, v in tmeta["annotations"].items() if k.startswith("prometheus.io/")}
          == {"prometheus.io/scrape": "true", "prometheus.io/port": "9080", "prometheus.io/path": "/metrics"},
          tmeta["annotations"])
    check("values-all: podAnnotations kept", tmeta["annotations"].get("example.com/scrape") == "false")
    check("values-all: podLabels and commonLabels on the pod template",
          tmeta["labels"].get("example.com/tier") == "control" and tmeta["labels"].get("team") == "platform")
    pm = one("PodMonitor")
    check("values-all: PodMonitor in its namespace scrapes the admin port of the release's pods",
          pm["metadata"]["namespace"] == "observability"
          and pm["spec"]["podMetricsEndpoints"][0]["port"] == "admin"
          and pm["spec"]["namespaceSelector"] == {"matchNames": [NS]}
          and pm["spec"]["selector"]["matchLabels"] == one("Deployment")["spec"]["selector"]["matchLabels"], pm["spec"])
    rule = one("PrometheusRule")
    exprs = [r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]]
    check("values-all: PrometheusRule uses seriesSelector and the thresholds",
          rule["metadata"]["namespace"] == "monitoring" and all('job="sandbox-hook"' in e for e in exprs)
          and any("< 21 * 86400" in e for e in exprs) and any(e.endswith("> 0.5") for e in exprs)
          and any(e.endswith("> 0.9") for e in exprs)
          and any(e.endswith("> 0.01") for e in exprs) and any(e.endswith("> 5") for e in exprs), exprs)
    check("values-all: alertLabels on every alert",
          all(r["labels"].get("team") == "platform" for g in rule["spec"]["groups"] for r in g["rules"]))
    check("values-all: listen address and ports", "--addr=0.0.0.0:9443" in c["args"]
          and "--admin-addr=0.0.0.0:9080" in c["args"])
    np_ = one("NetworkPolicy")["spec"]
    check("values-all: NetworkPolicy has webhook and metrics rules", len(np_["ingress"]) == 2, np_)
    metrics_from = np_["ingress"][1]["from"]
    check("values-all: metrics port open to networkPolicy.metrics.from and the ServiceMonitor's and PodMonitor's namespaces",
          metrics_from[0]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}
          and {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}} in metrics_from
          and {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}}} in metrics_from,
          metrics_from)
    check("values-all: PDB maxUnavailable wins over minAvailable",
          one("PodDisruptionBudget")["spec"] == {"maxUnavailable": 1, "unhealthyPodEvictionPolicy": "IfHealthyBudget",
                                                 "selector": one("PodDisruptionBudget")["spec"]["selector"]})
    cfg = yaml.safe_load(one("ConfigMap")["data"]["config.yaml"])
    check("values-all: config.yaml carries the configured values",
          cfg["prefix"] == "sandbox.example.com" and cfg["egress"]["mode"] == "dns+nft"
          and cfg["expiry"] == {"defaultTimeoutSeconds": 3600, "maxTimeoutSeconds": 86400}, cfg)


def case_prefix():
    check_webhook(prefix="example.org", extra_ns=["sandbox-system"])
    cfg = yaml.safe_load(one("ConfigMap")["data"]["config.yaml"])
    check("prefix override reaches config.yaml", cfg["prefix"] == "example.org", cfg["prefix"])


def case_single():
    check("replicas=1 renders no PodDisruptionBudget", "PodDisruptionBudget" not in by_kind, list(by_kind))
    dep = one("Deployment")
    check("replicas=1 is rendered", dep["spec"]["replicas"] == 1)


def case_netpol_default():
    np_ = one("NetworkPolicy")["spec"]
    check("NetworkPolicy default: webhook port open to all sources",
          np_["ingress"] == [{"ports": [{"port": "webhook", "protocol": "TCP"}]}], np_["ingress"])
    check("NetworkPolicy default: denies egress", np_["policyTypes"] == ["Ingress", "Egress"] and np_["egress"] == [],
          np_)


def case_prometheusrule():
    """contract: drift.alert

    The chart's alerts, each with its expression; sandboxes not injected for 10 minutes fire one."""
    rule = one("PrometheusRule")
    rules = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    want = {
        "SandboxWebhookCertificateExpiresSoon":
            f'min by (namespace, pod) (sandbox_webhook_certificate_expiry_timestamp_seconds{{namespace="{NS}"}})'
            " - time() < 14 * 86400",
        "SandboxWebhookTLSHandshakeFailures":
            "sum by (namespace, reason) (increase(sandbox_webhook_tls_handshake_failures_total"
            f'{{namespace="{NS}"}}[10m])) > 10',
        "SandboxWebhookAdmissionErrors":
            f'sum by (namespace) (rate(sandbox_webhook_admission_requests_total{{namespace="{NS}",outcome="error"}}[5m]))'
            f' / sum by (namespace) (rate(sandbox_webhook_admission_requests_total{{namespace="{NS}"}}[5m])) > 0.05',
        "SandboxWebhookSlowAdmissions":
            "histogram_quantile(0.99, sum by (namespace, le) (rate(sandbox_webhook_admission_duration_seconds_bucket"
            f'{{namespace="{NS}"}}[5m]))) > 1',
        "SandboxWebhookConfigReloadFailing":
            f'min by (namespace, pod) (sandbox_webhook_config_last_reload_success{{namespace="{NS}"}}) == 0',
        "SandboxWebhookControllerMemoryNearLimit":
            f'max by (namespace, pod) (sandbox_webhook_controller_resident_memory_bytes{{namespace="{NS}"}}'
            f' / (sandbox_webhook_controller_memory_limit_bytes{{namespace="{NS}"}} > 0)) > 0.8',
        "SandboxWebhookSandboxesNotInjected":
            f'max by (namespace) (sandbox_webhook_drift_pods{{namespace="{NS}",state="not-injected"}}) > 0',
    }
    check("PrometheusRule: the seven alerts", sorted(rules) == sorted(want), sorted(rules))
    check("PrometheusRule: sandboxes not injected for 10 minutes",
          rules.get("SandboxWebhookSandboxesNotInjected", {}).get("for") == "10m")
    for alert, expr in want.items():
        r = rules.get(alert, {})
        check(f"PrometheusRule: {alert} expression", r.get("expr") == expr, r.get("expr"))
        check(f"PrometheusRule: {alert} has for, severity and summary",
              r.get("for") and r.get("labels", {}).get("severity") in ("warning", "critical")
              and r.get("annotations", {}).get("summary"), r)
    check("PrometheusRule: in the release namespace", rule["metadata"]["namespace"] == NS)


def case_hostnet():
    pod = one("Deployment")["spec"]["template"]["spec"]
    req = pod["affinity"]["podAntiAffinity"].get("requiredDuringSchedulingIgnoredDuringExecution", [])
    check("hostNetwork: required pod anti-affinity per node (two pods cannot bind the same node port)",
          len(req) == 1 and req[0]["topologyKey"] == "kubernetes.io/hostname", pod["affinity"])
    check("hostNetwork: dnsPolicy ClusterFirstWithHostNet", pod.get("dnsPolicy") == "ClusterFirstWithHostNet")


def case_gke():
    pod = one("Deployment")["spec"]["template"]["spec"]
    c = pod["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    check("containerPorts.webhook=10250: container port and --addr", ports["webhook"] == 10250
          and "--addr=[::]:10250" in c["args"], (ports, c["args"]))
    sp = {p["name"]: p for p in one("Service")["spec"]["ports"]}
    check("containerPorts.webhook=10250: Service port 443 targets it by name",
          sp["https-webhook"]["port"] == 443 and sp["https-webhook"]["targetPort"] == "webhook", sp)


def case_netpol_monitor():
    np_ = one("NetworkPolicy")["spec"]
    admin = [r for r in np_["ingress"] if r["ports"] == [{"port": "admin", "protocol": "TCP"}]]
    check("NetworkPolicy + ServiceMonitor in namespace monitoring: the admin port is open from that namespace",
          len(admin) == 1 and admin[0]["from"] == [{"namespaceSelector": {"matchLabels": {
              "kubernetes.io/metadata.name": "monitoring"}}}], np_["ingress"])


def ctl_one(kind):
    objs = ctl_by_kind.get(kind, [])
    if len(objs) != 1:
        raise AssertionError(f"expected exactly one controller {kind}, found {len(objs)}")
    return objs[0]


def case_controller():
    """The lifecycle controller (contract: controller.rbac): hardening like the webhook's, its
    own selector, exactly the contract's RBAC, config, PDB, metrics Service."""
    webhook = one("Deployment")["spec"]["template"]["spec"]
    spec, pod, c = deployment_parts(ctl_one("Deployment"))
    check("controller: 2 replicas", spec["replicas"] == 2, spec["replicas"])
    check("controller: same pod securityContext as the webhook", pod["securityContext"] == webhook["securityContext"])
    check("controller: same container securityContext as the webhook",
          c["securityContext"] == webhook["containers"][0]["securityContext"])
    check("controller: no host access", not any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))
          and all("hostPath" not in v for v in pod["volumes"]))
    check("controller: mounts its token (it calls the API)", pod.get("automountServiceAccountToken") is True)
    check("controller: args", c["args"][0] == "controller"
          and "--config=/etc/sandbox-webhook/config/config.yaml" in c["args"], c["args"])
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in c["env"]}
    check("controller: POD_NAMESPACE and POD_NAME from the downward API",
          env.get("POD_NAMESPACE") == "metadata.namespace" and env.get("POD_NAME") == "metadata.name", env)
    webhook_sel = one("Deployment")["spec"]["selector"]["matchLabels"]
    labels = spec["template"]["metadata"]["labels"]
    check("controller pods are not selected by the webhook's selector",
          not all(labels.get(k) == v for k, v in webhook_sel.items()), (webhook_sel, labels))
    sa = ctl_one("ServiceAccount")
    check("controller: its own ServiceAccount", pod["serviceAccountName"] == sa["metadata"]["name"]
          and pod["serviceAccountName"] != webhook["serviceAccountName"])
    rules = ctl_one("ClusterRole")["rules"]
    got = sorted((tuple(r["apiGroups"]), tuple(r["resources"]), tuple(r["verbs"])) for r in rules)
    want = sorted([(("",), ("pods",), ("get", "list", "watch", "delete")),
                   (("",), ("pods/status",), ("patch",)),
                   (("events.k8s.io",), ("events",), ("create",)),
                   (("agents.x-k8s.io",), ("sandboxes",), ("patch",)),
                   (("batch",), ("jobs",), ("delete",)),
                   (("sandbox.opensandbox.io",), ("batchsandboxes",), ("delete",))])
    check("controller: ClusterRole is exactly the contract's verbs", got == want, got)
    binding = ctl_one("ClusterRoleBinding")
    check("controller: ClusterRoleBinding binds its ServiceAccount",
          binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": NS}])
    role = ctl_one("Role")
    check("controller: Role covers only leases", all(r["resources"] == ["leases"] for r in role["rules"]), role)
    cfg = yaml.safe_load(ctl_one("ConfigMap")["data"]["config.yaml"])
    webhook_cfg = yaml.safe_load(one("ConfigMap")["data"]["config.yaml"])
    check("controller: config.yaml is the webhook's (its drift audit compares with what it injects)"
          " and the controller section",
          {k: v for k, v in cfg.items() if k != "controller"} == webhook_cfg
          and cfg["controller"]["platform"] == {"deleteUnschedulable": False}, cfg)
    check("controller: ownerActions by default (contract: controller.expiry-owner-actions)",
          cfg["controller"]["expiry"] == {"ownerActions": {
              "BatchSandbox.sandbox.opensandbox.io": "delete", "Job.batch": "delete",
              "Sandbox.agents.x-k8s.io": "shutdown"}}, cfg["controller"])
    check("controller: PDB maxUnavailable 1", ctl_one("PodDisruptionBudget")["spec"]["maxUnavailable"] == 1)
    svc = ctl_one("Service")
    check("controller: metrics Service selects the controller pods",
          all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()), svc["spec"]["selector"])
    check("controller: no ValidatingAdmissionPolicy unless the API serves it",
          "ValidatingAdmissionPolicy" not in ctl_by_kind, list(ctl_by_kind))


def controller_rbac_and_expiry():
    """The owner rules of the controller's ClusterRole, and its config's expiry section."""
    rules = ctl_one("ClusterRole")["rules"]
    owners = sorted((tuple(r["apiGroups"]), tuple(r["resources"]), tuple(r["verbs"])) for r in rules
                    if r["apiGroups"] not in ([""], ["events.k8s.io"]))
    cfg = yaml.safe_load(ctl_one("ConfigMap")["data"]["config.yaml"])
    return owners, cfg["controller"]["expiry"]


def check_owners(rbac_says, rbac, config_says, config):
    """Checks the controller's owner rules against `rbac` (group, resource, verb
    triples) and its config's expiry section against `config`."""
    owners, expiry = controller_rbac_and_expiry()
    want = sorted(((group,), (resource,), (verb,)) for group, resource, verb in rbac)
    check(rbac_says, owners == want, owners)
    check(config_says, expiry == config, expiry)


def case_controller_owners():
    """ownerActions set in values: a kind set to null is dropped, suspend is patch on sandboxes."""
    check_owners("owner actions: RBAC delete on deleted kinds, patch on sandboxes only",
                 [("apps", "replicasets", "delete"), ("batch", "jobs", "delete"),
                  ("agents.x-k8s.io", "sandboxes", "patch")],
                 "owner actions: the config keeps the non-null entries",
                 {"ownerActions": {"Job.batch": "delete", "ReplicaSet.apps": "delete",
                                   "Sandbox.agents.x-k8s.io": "suspend"}})


def case_controller_deprecated():
    """The deprecated deleteOwnerKinds, while set, replaces ownerActions, in the config and the RBAC."""
    check_owners("deleteOwnerKinds: RBAC delete on those kinds only",
                 [("agents.x-k8s.io", "sandboxes", "delete"), ("batch", "jobs", "delete")],
                 "deleteOwnerKinds: rendered alone (the binary refuses both keys)",
                 {"deleteOwnerKinds": ["Job.batch", "Sandbox.agents.x-k8s.io"]})


def case_controller_vap():
    policy = ctl_one("ValidatingAdmissionPolicy")
    binding = ctl_one("ValidatingAdmissionPolicyBinding")
    check("renewal policy: UPDATE of pods", policy["spec"]["matchConstraints"]["resourceRules"][0]["operations"] == ["UPDATE"])
    check("renewal policy: binding denies", binding["spec"]["validationActions"] == ["Deny"]
          and binding["spec"]["policyName"] == policy["metadata"]["name"])


def case_controller_off():
    check("controller.enabled=false renders no controller object", not controller_docs,
          [d["kind"] for d in controller_docs])
    alerts = [r["alert"] for g in one("PrometheusRule")["spec"]["groups"] for r in g["rules"]]
    check("controller.enabled=false: no alert on the controller's memory or drift audit",
          "SandboxWebhookControllerMemoryNearLimit" not in alerts
          and "SandboxWebhookSandboxesNotInjected" not in alerts, alerts)


def case_revision():
    """contract: revision.selectors, revision.label

    A release with a revision: one configuration for the namespaces labelled with it, one for the
    pods labelled with it in namespaces without the label; both the same webhook; no pod matches two."""
    mwc, w = check_webhook(revision="canary")
    pods = one("MutatingWebhookConfiguration", f"{mwc['metadata']['name']}-pods")
    check("revision: two MutatingWebhookConfigurations", len(by_kind["MutatingWebhookConfiguration"]) == 2)
    p = pods["webhooks"][0]
    rev = "opensandbox.io/rev"
    check("revision: the pods configuration's webhook is the same but for its selectors",
          {k: v for k, v in p.items() if k not in ("namespaceSelector", "objectSelector")}
          == {k: v for k, v in w.items() if k not in ("namespaceSelector", "objectSelector")}, p)
    check("revision: pods labelled canary, only in namespaces without the label",
          {"key": rev, "operator": "DoesNotExist"} in p["namespaceSelector"]["matchExpressions"]
          and selector_values(p["objectSelector"], rev, "In") == ["canary"], p)
    vwcs = by_kind["ValidatingWebhookConfiguration"]
    check("revision: the pre-flight has the same two selections",
          sorted(v["metadata"]["name"] for v in vwcs)
          == sorted(m["metadata"]["name"] for m in by_kind["MutatingWebhookConfiguration"])
          and all(v["webhooks"][0]["namespaceSelector"] == m["webhooks"][0]["namespaceSelector"]
                  for v in vwcs for m in by_kind["MutatingWebhookConfiguration"]
                  if v["metadata"]["name"] == m["metadata"]["name"]), [v["metadata"]["name"] for v in vwcs])
    pre = [v for v in vwcs if v["metadata"]["name"].endswith("-pods")][0]["webhooks"][0]
    expr = pre["matchConditions"][1]["expression"]
    check("revision: the pods pre-flight judges only templates labelled canary",
          pre["matchConditions"][1]["name"] == "sandbox-revision"
          and '"opensandbox.io/rev"] == "canary"' in expr, pre["matchConditions"])
    cfg = yaml.safe_load(one("ConfigMap")["data"]["config.yaml"])
    ctl = yaml.safe_load(ctl_one("ConfigMap")["data"]["config.yaml"])
    check("revision: the webhook's and the controller's configuration name it",
          cfg.get("revision") == "canary" and ctl.get("revision") == "canary", (cfg, ctl))


CASES = {"revision": case_revision, "controller": case_controller, "controller-vap": case_controller_vap, "controller-off": case_controller_off,
         "controller-owners": case_controller_owners, "controller-deprecated": case_controller_deprecated,
         "prometheusrule": case_prometheusrule, "netpol-monitor": case_netpol_monitor, "hostnet": case_hostnet, "gke": case_gke,
         "helm": case_helm, "certManager": case_certmanager, "existingSecret": case_existing, "url": case_url,
         "all": case_all, "prefix": case_prefix, "single": case_single, "netpol": case_netpol_default}
run_checks(f"{CASE}: checks ran to completion", CASES[CASE])
finish(CASE)
