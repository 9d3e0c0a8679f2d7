"""The rendering check_rendered.py asserts on, and its shared checks: the
arguments (CASE, RENDERED.yaml, NAMESPACE), the documents by kind (the
lifecycle controller's apart), and the checks of the webhook
configuration, the Deployment and the `helm test` hook that several cases
run.
"""
import json
import subprocess
import sys

import yaml

from tap import check

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
                  port=443, revision=None, conditions=True, name=None):
    """The chart's MutatingWebhookConfiguration (contract: select.webhook-configuration); with a
    revision, the one that selects the revision's namespaces."""
    fullname = one("Service")["metadata"]["name"] if "Service" in by_kind else "rel-sandbox-webhook"
    mwc = one("MutatingWebhookConfiguration", f"{fullname}-{NS}")
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
    # contract: select.pod-update: UPDATE too, under the same failurePolicy.
    check("rules: CREATE pods, UPDATE pods and pods/ephemeralcontainers, v1 Namespaced only",
          rules == [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                     "resources": ["pods"], "scope": "Namespaced"},
                    {"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
                     "resources": ["pods", "pods/ephemeralcontainers"], "scope": "Namespaced"}],
          json.dumps(rules))
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
    name = name or f"sandbox-webhook.{prefix}"
    check(f"webhook name is {name}, the audit annotations' key prefix", w["name"] == name, w["name"])
    rev = f"{prefix}/rev"
    ns_rev = [e for e in w["namespaceSelector"]["matchExpressions"] if e["key"] == rev]
    obj_rev = [e for e in obj_sel["matchExpressions"] if e["key"] == rev]
    if revision is None:
        # contract: revision.selectors
        check(f"default release: namespaces and pods labelled {rev} are left to their revision",
              ns_rev == [{"key": rev, "operator": "DoesNotExist"}]
              and obj_rev == [{"key": rev, "operator": "DoesNotExist"}], (ns_rev, obj_rev))
    else:
        check(f"revision {revision}: the namespaces labelled {rev}={revision}, whatever their pods say",
              ns_rev == [{"key": rev, "operator": "In", "values": [revision]}] and obj_rev == [], (ns_rev, obj_rev))
    conds = w.get("matchConditions")
    if conditions:
        # contract: select.match-conditions
        expr = " ".join((conds or [{}])[0].get("expression", "").split())
        check("matchCondition not-opted-out: the pods that opt out are not sent",
              [c["name"] for c in conds or []] == ["not-opted-out"]
              and expr == f'!(has(object.metadata.annotations) && "{prefix}/inject" in object.metadata.annotations'
              f' && object.metadata.annotations["{prefix}/inject"] in ["false", "False", "FALSE"])', conds)
    else:
        check("no matchConditions below Kubernetes 1.30", conds is None, conds)
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
def deployment_parts(dep):
    """A Deployment's spec, its pod template's spec and its first container."""
    spec = dep["spec"]
    pod = spec["template"]["spec"]
    return spec, pod, pod["containers"][0]


def check_deployment(tls_secret):
    dep = one("Deployment")
    spec, pod, c = deployment_parts(dep)
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
    check("args pass --shutdown-delay=5s and --shutdown-timeout=15s",
          "--shutdown-delay=5s" in args and "--shutdown-timeout=15s" in args, args)
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
          set(cfg) == {"prefix", "excludedNamespaces", "execd", "egress", "pod", "expiry"}, sorted(cfg))
    check("config.yaml defaults match the documented ones",
          cfg["prefix"] == "opensandbox.io" and cfg["excludedNamespaces"] == SYSTEM_NS
          and cfg["execd"] == {"image": "opensandbox/execd:v1.1.0", "resources": None,
                               "runAsInit": False, "allowIsolation": False}
          and cfg["egress"] == {"image": "opensandbox/egress:v1.1.7", "mode": "dns", "disableIPv6": True,
                                "nativeSidecar": True, "maxRules": 4096, "resources": None,
                                "otlpEndpoint": None, "incompatibleRuntimeClasses": ["gvisor"],
                                "upstreamProxy": None}
          and cfg["pod"] == {"automountServiceAccountToken": False}
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
