#!/usr/bin/env python3
"""Assert key facts of a `helm template` rendering of charts/sandbox-webhook.

Usage: check_rendered.py CASE RENDERED.yaml [NAMESPACE]

Prints one line per check, `ok - <what>` or `not ok - <what>: <why>`, and
exits 1 if any check failed. tests/chart/run.sh counts the lines.
Needs python3 with PyYAML; openssl is used to verify generated certificates.
"""
import base64
import json
import os
import subprocess
import sys
import tempfile

import yaml

from tap import check, finish, run_checks

CASE, PATH = sys.argv[1], sys.argv[2]
NS = sys.argv[3] if len(sys.argv) > 3 else "sbx"
SYSTEM_NS = ["kube-system", "kube-public", "kube-node-lease"]
# Cluster-scoped, in this order; check_validating.py checks the second.
WEBHOOK_CONFIGURATIONS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")

with open(PATH, encoding="utf-8") as f:
    docs = [d for d in yaml.safe_load_all(f) if d]

# The lifecycle controller's objects (templates/controller-*.yaml) are checked
# by case_controller; every other check is about the webhook's.
CONTROLLER = "lifecycle-controller"
controller_docs = [d for d in docs
                   if (d.get("metadata", {}).get("labels") or {}).get("app.kubernetes.io/component") == CONTROLLER]
docs = [d for d in docs if d not in controller_docs]
by_kind = {}
for d in docs:
    by_kind.setdefault(d["kind"], []).append(d)
ctl_by_kind = {}
for d in controller_docs:
    ctl_by_kind.setdefault(d["kind"], []).append(d)


def is_test_hook(o):
    return (o["metadata"].get("annotations") or {}).get("helm.sh/hook") == "test"


def one(kind, name=None):
    """The one object of a kind (and name) outside the helm test hook."""
    objs = [o for o in by_kind.get(kind, []) if (name is None or o["metadata"]["name"] == name) and not is_test_hook(o)]
    if len(objs) != 1:
        raise AssertionError(f"expected exactly one {kind}{' ' + name if name else ''}, found {len(objs)}")
    return objs[0]


def selector_values(sel, key, op):
    for e in sel.get("matchExpressions", []):
        if e["key"] == key and e["operator"] == op:
            return e.get("values", [])
    return None


# ---------------------------------------------------------------- webhook config
def check_webhook(prefix="opensandbox.io", failure="Fail", timeout=5, extra_ns=(), url=None, ca_bundle=None,
                  port=443):
    mwc = one("MutatingWebhookConfiguration")
    fullname = one("Service")["metadata"]["name"] if "Service" in by_kind else "rel-sandbox-webhook"
    check(f"MutatingWebhookConfiguration name carries the release namespace ({fullname}-{NS})",
          mwc["metadata"]["name"] == f"{fullname}-{NS}", mwc["metadata"]["name"])
    check("MutatingWebhookConfiguration opts out of AKS's admissions enforcer",
          (mwc["metadata"].get("annotations") or {}).get("admissions.enforcer/disabled") == "true",
          mwc["metadata"].get("annotations"))
    check("exactly one webhook in the configuration", len(mwc["webhooks"]) == 1)
    w = mwc["webhooks"][0]
    check("webhook name is fully qualified", w["name"].count(".") >= 2, w["name"])
    check("admissionReviewVersions is [v1]", w["admissionReviewVersions"] == ["v1"], w["admissionReviewVersions"])
    check("sideEffects is None", w["sideEffects"] == "None", w["sideEffects"])
    check("reinvocationPolicy is IfNeeded", w["reinvocationPolicy"] == "IfNeeded", w.get("reinvocationPolicy"))
    check("matchPolicy is Equivalent", w["matchPolicy"] == "Equivalent", w.get("matchPolicy"))
    check(f"failurePolicy is {failure}", w["failurePolicy"] == failure, w["failurePolicy"])
    check(f"timeoutSeconds is {timeout}", w["timeoutSeconds"] == timeout, w["timeoutSeconds"])
    rules = w["rules"]
    check("rules: CREATE pods v1 Namespaced only",
          rules == [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                     "resources": ["pods"], "scope": "Namespaced"}], json.dumps(rules))
    excluded = selector_values(w["namespaceSelector"], "kubernetes.io/metadata.name", "NotIn")
    check("namespaceSelector has kubernetes.io/metadata.name NotIn", excluded is not None)
    excluded = excluded or []
    check(f"namespaceSelector excludes the release namespace {NS}", NS in excluded, excluded)
    check("namespaceSelector excludes the system namespaces", all(n in excluded for n in SYSTEM_NS), excluded)
    for n in extra_ns:
        check(f"namespaceSelector excludes config.excludedNamespaces entry {n}", n in excluded, excluded)
    check("namespaceSelector values have no duplicates", len(excluded) == len(set(excluded)), excluded)
    obj_sel = w["objectSelector"]
    check(f"objectSelector requires {prefix}/id Exists",
          selector_values(obj_sel, f"{prefix}/id", "Exists") is not None, json.dumps(obj_sel))
    cc = w["clientConfig"]
    if url:
        check("clientConfig.url is webhook.url", cc.get("url") == url, cc)
        check("clientConfig has no service with webhook.url", "service" not in cc, cc)
    else:
        svc = cc.get("service", {})
        check(f"clientConfig.service points at the chart's Service on {port} /mutate",
              svc.get("namespace") == NS and svc.get("port") == port and svc.get("path") == "/mutate"
              and svc.get("name") == one("Service")["metadata"]["name"], cc)
        check("clientConfig has no url", "url" not in cc, cc)
    if ca_bundle is not None:
        check("caBundle is the expected CA", cc.get("caBundle") == ca_bundle,
              f"{cc.get('caBundle', '')[:20]}... != {ca_bundle[:20]}...")
    return mwc, w


# ---------------------------------------------------------------- deployment
def check_deployment(tls_secret):
    dep = one("Deployment")
    spec = dep["spec"]
    pod = spec["template"]["spec"]
    c = pod["containers"][0]
    check("Deployment has 2 replicas", spec["replicas"] == 2, spec["replicas"])
    aa = pod.get("affinity", {}).get("podAntiAffinity", {}).get("preferredDuringSchedulingIgnoredDuringExecution", [])
    check("preferred pod anti-affinity across nodes",
          any(t["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname" for t in aa), aa)
    check("no priorityClassName by default (GKE refuses system-cluster-critical outside kube-system)",
          "priorityClassName" not in pod, pod.get("priorityClassName"))
    check("terminationGracePeriodSeconds 30 = shutdown delay 5 + drain 15 + 10",
          pod.get("terminationGracePeriodSeconds") == 30, pod.get("terminationGracePeriodSeconds"))
    check("no preStop hook (--shutdown-delay replaces the sleep)", "lifecycle" not in c, c.get("lifecycle"))
    tsc = pod.get("topologySpreadConstraints") or []
    sel_labels = spec["selector"]["matchLabels"]
    check("default topology spread across zones, per ReplicaSet (matchLabelKeys pod-template-hash), ScheduleAnyway",
          tsc == [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
                   "matchLabelKeys": ["pod-template-hash"], "labelSelector": {"matchLabels": sel_labels}}], tsc)
    tmeta = spec["template"]["metadata"]
    check("pod template is opted out of Istio (sidecar and ambient) and Linkerd injection",
          tmeta["labels"].get("sidecar.istio.io/inject") == "false"
          and tmeta["labels"].get("istio.io/dataplane-mode") == "none"
          and (tmeta.get("annotations") or {}).get("linkerd.io/inject") == "disabled", tmeta)
    check("no helm.sh/chart label on the pod template (a chart bump alone does not roll the pods)",
          "helm.sh/chart" not in tmeta["labels"], tmeta["labels"])
    check("no prometheus.io annotations by default", not any(k.startswith("prometheus.io/")
                                                          for k in tmeta.get("annotations") or {}))
    check("pod does not mount a ServiceAccount token", pod.get("automountServiceAccountToken") is False)
    psc, sc = pod.get("securityContext", {}), c.get("securityContext", {})
    check("runs as non-root uid 65532", psc.get("runAsNonRoot") is True and psc.get("runAsUser") == 65532
          and sc.get("runAsUser") == 65532, (psc, sc))
    check("readOnlyRootFilesystem", sc.get("readOnlyRootFilesystem") is True)
    check("allowPrivilegeEscalation false", sc.get("allowPrivilegeEscalation") is False)
    check("capabilities drop ALL", sc.get("capabilities", {}).get("drop") == ["ALL"])
    check("seccomp RuntimeDefault", psc.get("seccompProfile", {}).get("type") == "RuntimeDefault"
          and sc.get("seccompProfile", {}).get("type") == "RuntimeDefault")
    res = c.get("resources", {})
    check("resources have requests and a memory limit", res.get("requests") and res.get("limits", {}).get("memory"), res)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    check("container ports webhook 8443 and admin 8080", ports == {"webhook": 8443, "admin": 8080}, ports)
    check("liveness probe is GET /livez on the admin port",
          c["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "admin"}, c["livenessProbe"])
    check("readiness probe is GET /readyz on the admin port",
          c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}, c["readinessProbe"])
    env = {e["name"]: e for e in c.get("env", [])}
    check("POD_NAMESPACE comes from the downward API",
          env.get("POD_NAMESPACE", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.namespace")
    args = c["args"]
    check("args pass --shutdown-timeout=15s", "--shutdown-timeout=15s" in args, args)
    check("args start with serve and name config, cert and key",
          args[0] == "serve" and "--config=/etc/sandbox-webhook/config/config.yaml" in args
          and "--tls-cert=/etc/sandbox-webhook/tls/tls.crt" in args
          and "--tls-key=/etc/sandbox-webhook/tls/tls.key" in args, args)
    mounts = c["volumeMounts"]
    check("no volume is mounted with subPath (hot reload needs directories)",
          all("subPath" not in m for m in mounts), mounts)
    vols = {v["name"]: v for v in pod["volumes"]}
    cm_name = one("ConfigMap")["metadata"]["name"]
    check("config volume is the chart's ConfigMap", vols["config"].get("configMap", {}).get("name") == cm_name, vols)
    check(f"tls volume is Secret {tls_secret}", vols["tls"].get("secret", {}).get("secretName") == tls_secret, vols)
    ann = spec["template"]["metadata"].get("annotations", {}) or {}
    check("the only checksum on the pod template is checksum/selector (config and certs hot-reload)",
          [k for k in ann if k.startswith("checksum/")] == ["checksum/selector"], ann)
    sa = one("ServiceAccount")
    check("ServiceAccount has automountServiceAccountToken false", sa.get("automountServiceAccountToken") is False)
    check("pod uses the chart's ServiceAccount", pod["serviceAccountName"] == sa["metadata"]["name"])
    svc = one("Service")
    sp = {p["name"]: p for p in svc["spec"]["ports"]}
    check("Service port 443 targets the webhook container port",
          sp.get("https-webhook", {}).get("port") == 443 and sp["https-webhook"]["targetPort"] == "webhook", sp)
    check("Service exposes the metrics port", sp.get("http-metrics", {}).get("targetPort") == "admin", sp)
    sel = svc["spec"]["selector"]
    labels = spec["template"]["metadata"]["labels"]
    check("Service selector matches the pod labels", all(labels.get(k) == v for k, v in sel.items()), sel)
    pdb = one("PodDisruptionBudget")
    check("PodDisruptionBudget minAvailable 1 with 2 replicas", pdb["spec"].get("minAvailable") == 1, pdb["spec"])
    check("no RBAC objects outside the helm test hook (the webhook calls no API)",
          not [o for o in docs if o["kind"] in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
               and not is_test_hook(o)], list(by_kind))
    cfg = yaml.safe_load(one("ConfigMap")["data"]["config.yaml"])
    check("config.yaml has the documented top-level keys",
          set(cfg) == {"prefix", "excludedNamespaces", "execd", "egress", "expiry"}, sorted(cfg))
    check("config.yaml defaults match the documented ones",
          cfg["prefix"] == "opensandbox.io" and cfg["excludedNamespaces"] == SYSTEM_NS
          and cfg["execd"] == {"image": "opensandbox/execd:v1.0.18", "resources": None}
          and cfg["egress"] == {"image": "opensandbox/egress:v1.1.0", "mode": "dns", "disableIPv6": True,
                                "nativeSidecar": True, "maxRules": 4096, "resources": None}
          and cfg["expiry"] == {"defaultTimeoutSeconds": None, "maxTimeoutSeconds": None}, cfg)
    for o in docs:
        if o["kind"] not in WEBHOOK_CONFIGURATIONS and not (is_test_hook(o) and o["kind"] in ("Role", "RoleBinding")):
            check(f"{o['kind']} {o['metadata']['name']} is in the release namespace",
                  o["metadata"].get("namespace") == NS, o["metadata"].get("namespace"))
    return dep


def check_test_hook(fullname="rel-sandbox-webhook", prefix="opensandbox.io", test_ns="default",
                    image="curlimages/curl:8.11.1", mesh=True):
    hooks = [o for o in docs if is_test_hook(o)]
    name = f"{fullname}-test"
    check("helm test: ServiceAccount, Role, RoleBinding and Pod, all test hooks",
          sorted(o["kind"] for o in hooks) == ["Pod", "Role", "RoleBinding", "ServiceAccount"]
          and all(o["metadata"]["name"] == name for o in hooks), [(o["kind"], o["metadata"]["name"]) for o in hooks])
    for o in hooks:
        ann = o["metadata"]["annotations"]
        check(f"helm test: {o['kind']} is deleted before re-creation and after success",
              ann.get("helm.sh/hook-delete-policy") == "before-hook-creation,hook-succeeded", ann)
    by = {o["kind"]: o for o in hooks}
    for kind in ("ServiceAccount", "Role", "RoleBinding"):
        check(f"helm test: {kind} is created before the pod (hook weight -1)",
              by[kind]["metadata"]["annotations"].get("helm.sh/hook-weight") == "-1")
    role = by["Role"]
    check(f"helm test: the Role only allows creating pods in {test_ns}",
          role["metadata"]["namespace"] == test_ns
          and role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}], role)
    rb = by["RoleBinding"]
    check("helm test: the RoleBinding binds that Role to the test ServiceAccount",
          rb["metadata"]["namespace"] == test_ns and rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                                                       "kind": "Role", "name": name}
          and rb["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": NS}], rb)
    pod = by["Pod"]
    ps = pod["spec"]
    (c,) = ps["containers"]
    check("helm test: pod runs once (restartPolicy Never) as the test ServiceAccount",
          ps["restartPolicy"] == "Never" and ps["serviceAccountName"] == name and pod["metadata"]["namespace"] == NS)
    check(f"helm test: image {image}", c["image"] == image, c["image"])
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    check(f"helm test: dry-runs in {test_ns} with the label {prefix}/id",
          env == {"TEST_NAMESPACE": test_ns, "SANDBOX_LABEL": f"{prefix}/id"}, env)
    script = c["args"][0]
    check("helm test: the script POSTs with dryRun=All and requires execd-installer in the answer",
          c["command"] == ["/bin/sh", "-ec"] and "pods?dryRun=All" in script and "execd-installer" in script
          and "exit 1" in script, c["command"])
    psc, sc = ps.get("securityContext", {}), c.get("securityContext", {})
    check("helm test: pod meets Pod Security restricted (non-root, seccomp, no escalation, drop ALL)",
          psc.get("runAsNonRoot") is True and psc.get("seccompProfile") == {"type": "RuntimeDefault"}
          and sc.get("allowPrivilegeEscalation") is False and sc.get("capabilities") == {"drop": ["ALL"]}, (psc, sc))
    check("helm test: the test pod itself is not a sandbox (no <prefix>/id label)",
          f"{prefix}/id" not in pod["metadata"]["labels"], pod["metadata"]["labels"])
    if mesh:
        check("helm test: pod is opted out of mesh injection",
              pod["metadata"]["labels"].get("sidecar.istio.io/inject") == "false"
              and pod["metadata"]["annotations"].get("linkerd.io/inject") == "disabled", pod["metadata"])


def openssl(*args, stdin=None):
    return subprocess.run(["openssl", *args], input=stdin, capture_output=True, text=True)


# ---------------------------------------------------------------- cases
def case_helm():
    mwc, w = check_webhook()
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
                         port=8443)
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
          "--shutdown-timeout=20s" in c["args"]
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
    }
    check("PrometheusRule: the five alerts", sorted(rules) == sorted(want), sorted(rules))
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
    """The lifecycle controller (SPEC 10): hardening like the webhook's, its
    own selector, exactly SPEC 10's RBAC, config, PDB, metrics Service."""
    webhook = one("Deployment")["spec"]["template"]["spec"]
    dep = ctl_one("Deployment")
    spec = dep["spec"]
    pod = spec["template"]["spec"]
    c = pod["containers"][0]
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
                   (("agents.x-k8s.io",), ("sandboxes",), ("delete",)),
                   (("batch",), ("jobs",), ("delete",)),
                   (("sandbox.opensandbox.io",), ("batchsandboxes",), ("delete",))])
    check("controller: ClusterRole is exactly SPEC 10's verbs", got == want, got)
    binding = ctl_one("ClusterRoleBinding")
    check("controller: ClusterRoleBinding binds its ServiceAccount",
          binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": NS}])
    role = ctl_one("Role")
    check("controller: Role covers only leases", all(r["resources"] == ["leases"] for r in role["rules"]), role)
    cfg = yaml.safe_load(ctl_one("ConfigMap")["data"]["config.yaml"])
    check("controller: config.yaml has prefix, excludedNamespaces and controller",
          set(cfg) == {"prefix", "excludedNamespaces", "controller"}
          and cfg["controller"]["platform"] == {"deleteUnschedulable": False}, cfg)
    check("controller: PDB maxUnavailable 1", ctl_one("PodDisruptionBudget")["spec"]["maxUnavailable"] == 1)
    svc = ctl_one("Service")
    check("controller: metrics Service selects the controller pods",
          all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()), svc["spec"]["selector"])
    check("controller: no ValidatingAdmissionPolicy unless the API serves it",
          "ValidatingAdmissionPolicy" not in ctl_by_kind, list(ctl_by_kind))


def case_controller_vap():
    policy = ctl_one("ValidatingAdmissionPolicy")
    binding = ctl_one("ValidatingAdmissionPolicyBinding")
    check("renewal policy: UPDATE of pods", policy["spec"]["matchConstraints"]["resourceRules"][0]["operations"] == ["UPDATE"])
    check("renewal policy: binding denies", binding["spec"]["validationActions"] == ["Deny"]
          and binding["spec"]["policyName"] == policy["metadata"]["name"])


def case_controller_off():
    check("controller.enabled=false renders no controller object", not controller_docs,
          [d["kind"] for d in controller_docs])


CASES = {"controller": case_controller, "controller-vap": case_controller_vap, "controller-off": case_controller_off,
         "prometheusrule": case_prometheusrule, "netpol-monitor": case_netpol_monitor, "hostnet": case_hostnet, "gke": case_gke,
         "helm": case_helm, "certManager": case_certmanager, "existingSecret": case_existing, "url": case_url,
         "all": case_all, "prefix": case_prefix, "single": case_single, "netpol": case_netpol_default}
run_checks(f"{CASE}: checks ran to completion", CASES[CASE])
finish(CASE)
