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

CASE, PATH = sys.argv[1], sys.argv[2]
NS = sys.argv[3] if len(sys.argv) > 3 else "sbx"
SYSTEM_NS = ["kube-system", "kube-public", "kube-node-lease"]

results = []


def check(what, cond, why=""):
    results.append((what, bool(cond), why))


def run_checks(what, fn):
    """Run fn(); an exception (KeyError on a missing field...) is a failure."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - report anything as a failed check
        check(what, False, f"{type(e).__name__}: {e}")


with open(PATH, encoding="utf-8") as f:
    docs = [d for d in yaml.safe_load_all(f) if d]

by_kind = {}
for d in docs:
    by_kind.setdefault(d["kind"], []).append(d)


def one(kind, name=None):
    objs = [o for o in by_kind.get(kind, []) if name is None or o["metadata"]["name"] == name]
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
    check("priorityClassName is system-cluster-critical", pod.get("priorityClassName") == "system-cluster-critical")
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
    check("no checksum annotation on the pod template (config and certs hot-reload)",
          not any(k.startswith("checksum/") for k in ann), ann)
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
    check("no RBAC objects (the webhook calls no API)",
          not any(k in by_kind for k in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")), list(by_kind))
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
        if o["kind"] != "MutatingWebhookConfiguration":
            check(f"{o['kind']} {o['metadata']['name']} is in the release namespace",
                  o["metadata"].get("namespace") == NS, o["metadata"].get("namespace"))
    return dep


def openssl(*args, stdin=None):
    return subprocess.run(["openssl", *args], input=stdin, capture_output=True, text=True)


# ---------------------------------------------------------------- cases
def case_helm():
    mwc, w = check_webhook()
    check_deployment("rel-sandbox-webhook-tls")
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
    check_deployment("rel-sandbox-webhook-tls")
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
    check("certManager: serving Certificate writes the mounted Secret",
          serving["spec"]["secretName"] == "rel-sandbox-webhook-tls")
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
    check("deployment.enabled=false renders only the webhook configuration",
          list(by_kind) == ["MutatingWebhookConfiguration"], list(by_kind))


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
                 "ServiceMonitor", "Certificate", "MutatingWebhookConfiguration"):
        check(f"values-all renders a {kind}", kind in by_kind, list(by_kind))
    check("values-all: issuerRef skips the self-signed chain", "Issuer" not in by_kind)
    pod = one("Deployment")["spec"]["template"]["spec"]
    c = pod["containers"][0]
    check("values-all: image by digest", c["image"].endswith("@sha256:" + "0123456789abcdef" * 4), c["image"])
    check("values-all: client CA mounted and passed",
          "--client-ca=/etc/sandbox-webhook/client-ca/client-ca.crt" in c["args"])
    check("values-all: preStop sleep", c["lifecycle"]["preStop"]["sleep"]["seconds"] == 5)
    check("values-all: listen address and ports", "--addr=0.0.0.0:9443" in c["args"]
          and "--admin-addr=0.0.0.0:9080" in c["args"])
    np_ = one("NetworkPolicy")["spec"]
    check("values-all: NetworkPolicy has webhook and metrics rules", len(np_["ingress"]) == 2, np_)
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


CASES = {"helm": case_helm, "certManager": case_certmanager, "existingSecret": case_existing, "url": case_url,
         "all": case_all, "prefix": case_prefix, "single": case_single, "netpol": case_netpol_default}
run_checks(f"{CASE}: checks ran to completion", CASES[CASE])

failed = 0
for what, ok, why in results:
    if ok:
        print(f"ok - [{CASE}] {what}")
    else:
        failed += 1
        print(f"not ok - [{CASE}] {what}: {str(why)[:400]}")
if not results:
    print(f"not ok - [{CASE}] no checks ran")
    failed = 1
sys.exit(1 if failed else 0)
