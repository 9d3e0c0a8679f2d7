"""The other side of the differential suite's check (b): the intent of a
create request given to the webhook as a bare pod with annotations, the
webhook configured as the server is, and both pods normalized for the
deliberate differences so that everything else is compared field by field.
"""

import copy
import json

import yaml

P = "opensandbox.io"
INTENT_KEYS = [f"{P}/{k}" for k in (
    "network-policy", "credential-proxy", "egress-env", "execd-isolation",
    "lifecycle", "timeout", "platform",
)]
RESTRICTED = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def webhook_config(config, native):
    """The webhook configured as the server `config` is (`native`: where it
    puts the sidecar)."""
    egress, k8s, runtime = config.egress, config.kubernetes, config.runtime
    execd = {"image": runtime.execd_image, "runAsInit": runtime.execd_run_as_init, "allowIsolation": True}
    resources = k8s.execd_init_resources
    if resources:
        execd["resources"] = {k: v for k, v in (("limits", resources.limits), ("requests", resources.requests)) if v}
    sidecar = {"image": egress.image, "mode": egress.mode, "disableIPv6": egress.disable_ipv6, "nativeSidecar": native}
    if egress.otlp_endpoint:
        sidecar["otlpEndpoint"] = egress.otlp_endpoint
    if egress.requests or egress.limits:
        sidecar["resources"] = {k: v for k, v in (("limits", egress.limits), ("requests", egress.requests)) if v}
    proxy = egress.upstream_proxy
    if proxy:
        sidecar["upstreamProxy"] = {"url": proxy.url}
        if proxy.authorization:
            sidecar["upstreamProxy"]["authorization"] = proxy.authorization.get_secret_value()
        if proxy.ca_secret_name:
            sidecar["upstreamProxy"]["caSecretName"] = proxy.ca_secret_name
    return yaml.safe_dump({"execd": execd, "egress": sidecar})


def server_token(pod):
    """The egress token the server gave the pod, if it has a sidecar."""
    for c in pod["spec"]["containers"]:
        for e in c.get("env") or []:
            if e["name"] == "OPENSANDBOX_EGRESS_TOKEN":
                return e["value"]
    return None


def _k8s_resources(limits, requests):
    """The request's resources as a container's (a gpu is NVIDIA's)."""
    def translate(values):
        out = {k: v for k, v in values.items() if k != "gpu"}
        if "gpu" in values:
            out["nvidia.com/gpu"] = values["gpu"]
        return out
    if not limits:
        return None
    return {"limits": translate(limits), "requests": translate(requests or limits)}


def _volumes(request):
    """The request's volumes as a pod's volumes and the main container's mounts."""
    volumes, mounts = [], []
    for v in request.get("volumes") or []:
        if "pvc" in v:
            volumes.append({"name": v["name"], "persistentVolumeClaim": {
                "claimName": v["pvc"]["claimName"], "readOnly": v.get("readOnly", False)}})
        else:
            volumes.append({"name": v["name"], "hostPath": {"path": v["host"]["path"], "type": "DirectoryOrCreate"}})
        mount = {"name": v["name"], "mountPath": v["mountPath"], "readOnly": v.get("readOnly", False)}
        if v.get("subPath"):
            mount["subPath"] = v["subPath"]
        mounts.append(mount)
    return volumes, mounts


def bare_pod(case, config, server_pod):
    """The request of `case` as a pod with annotations, as a platform
    without OpenSandbox's server would write it: the template's fields,
    the main container from the request, the intent in annotations."""
    request = case["request"]
    # The server's own metadata (secure access, extensions) is no intent of
    # the webhook's: the bare pod carries it as a platform would.
    annotations = {
        k: v for k, v in (server_pod["metadata"].get("annotations") or {}).items()
        if k.startswith(f"{P}/") and k != f"{P}/egress-auth-token"
    }
    policy = request.get("networkPolicy")
    env = request.get("env") or {}
    if policy is not None:
        annotations[f"{P}/network-policy"] = json.dumps(policy)
        token = server_token(server_pod)
        if token:
            annotations[f"{P}/egress-auth-token"] = token
        egress_env = {k: v for k, v in env.items() if k.startswith("OPENSANDBOX_EGRESS_")}
        if egress_env:
            annotations[f"{P}/egress-env"] = json.dumps(egress_env)
    if (request.get("credentialProxy") or {}).get("enabled"):
        annotations[f"{P}/credential-proxy"] = "true"
    if (request.get("extensions") or {}).get("bootstrap.execd.isolation") == "enable":
        annotations[f"{P}/execd-isolation"] = "enable"
    if request.get("lifecycle"):
        annotations[f"{P}/lifecycle"] = json.dumps(request["lifecycle"])
    if request.get("timeout"):
        annotations[f"{P}/timeout"] = str(request["timeout"])
    if request.get("platform"):
        annotations[f"{P}/platform"] = "{os}/{arch}".format(**request["platform"])

    volumes, mounts = _volumes(request)
    main = {"name": "sandbox", "image": request["image"]["uri"], "command": request["entrypoint"]}
    if case["provider"] == "batchsandbox":
        main["imagePullPolicy"] = config.kubernetes.image_pull_policy
    main_env = [{"name": k, "value": v} for k, v in env.items() if not k.startswith("OPENSANDBOX_EGRESS_")]
    if main_env:
        main["env"] = main_env
    resources = _k8s_resources(request.get("resourceLimits"), request.get("resourceRequests"))
    if resources:
        main["resources"] = resources
    spec = {"containers": [main]}
    labels = {f"{P}/id": server_pod["metadata"]["labels"][f"{P}/id"], **(request.get("metadata") or {})}
    _template(case, spec, main, labels, volumes, mounts)
    if mounts:
        main["volumeMounts"] = mounts
    if volumes:
        spec["volumes"] = volumes
    if config.secure_runtime and config.secure_runtime.k8s_runtime_class:
        spec["runtimeClassName"] = config.secure_runtime.k8s_runtime_class
    if request["image"].get("auth"):
        # The server creates this Secret beside the workload.
        spec["imagePullSecrets"] = [{"name": server_pod["spec"]["imagePullSecrets"][0]["name"]}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": server_pod["metadata"]["name"],
            "namespace": server_pod["metadata"]["namespace"],
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
    }


def _template(case, spec, main, labels, volumes, mounts):
    """What the workload template of `case` gives the pod: its pod-level
    fields, its labels, and for a BatchSandbox its main container's mounts
    and securityContext and its volumes."""
    template = case.get("template")
    if not template:
        return
    if case["provider"] == "batchsandbox":
        pod = template["spec"]["template"]
    else:
        pod = template["spec"]["podTemplate"]
    labels.update((pod.get("metadata") or {}).get("labels") or {})
    for key, value in pod.get("spec", {}).items():
        if key not in ("containers", "initContainers", "volumes"):
            spec[key] = copy.deepcopy(value)
    if case["provider"] == "batchsandbox":
        volumes.extend(copy.deepcopy(pod["spec"].get("volumes", [])))
        extra = pod["spec"].get("containers", [{}])[0]
        mounts.extend(copy.deepcopy(extra.get("volumeMounts", [])))
        if "securityContext" in extra:
            main["securityContext"] = copy.deepcopy(extra["securityContext"])


def _canonical_rules(text):
    policy = json.loads(text)
    if isinstance(policy.get("defaultAction"), str):
        policy["defaultAction"] = policy["defaultAction"].lower()
    for rule in policy.get("egress") or []:
        rule["action"] = rule["action"].lower()
    return json.dumps(policy, sort_keys=True)


def normalized(case, workload, server_pod, webhook_pod, native):
    """`server_pod` and `webhook_pod` with the deliberate differences taken
    out, and the names of those met."""
    want, got, named = copy.deepcopy(server_pod), copy.deepcopy(webhook_pod), set()
    want["metadata"].pop("ownerReferences", None)
    for meta in (want["metadata"].get("labels", {}), want["metadata"].get("annotations", {})):
        for key in [k for k in meta if k.startswith("agents.x-k8s.io/")]:
            del meta[key]
    named.add("controller-metadata")
    if "windows" in case["name"]:
        named.add("windows-vm-profile")
        return ({"nodeSelector": want["spec"].get("nodeSelector")},
                {"nodeSelector": got["spec"].get("nodeSelector")}, named)
    annotations = got["metadata"].get("annotations", {})
    for key in INTENT_KEYS:
        if annotations.pop(key, None) is not None:
            named.add("intent-annotations")
    if annotations.pop(f"{P}/expires-at", None) is not None:
        named.add("lifetime-on-pod")
        lifetime = workload["spec"].get("expireTime") or workload["spec"].get("shutdownTime")
        annotations["(workload lifetime)"] = bool(lifetime)
        want["metadata"].setdefault("annotations", {})["(workload lifetime)"] = True
    if annotations.pop(f"{P}/injected", None) is not None:
        named.add("injection-record")
    token = f"{P}/egress-auth-token"
    if token in annotations and token not in want["metadata"].get("annotations", {}):
        del annotations[token]
        named.add("token-annotation")
    for pod in (want, got):
        if not pod["metadata"].get("annotations"):
            pod["metadata"].pop("annotations", None)
        for c in pod["spec"].get("initContainers", []) + pod["spec"]["containers"]:
            for e in c.get("env") or []:
                if c["name"] == "egress" and e["name"] == "OPENSANDBOX_EGRESS_RULES":
                    canonical = _canonical_rules(e["value"])
                    if canonical != e["value"]:
                        named.add("rules-compact")
                    e["value"] = canonical
    inits = got["spec"].get("initContainers", [])
    want_inits = want["spec"].get("initContainers", [])
    if inits and want_inits and inits[0].get("securityContext") == RESTRICTED and "securityContext" not in want_inits[0]:
        del inits[0]["securityContext"]
        named.add("restricted-installer")
    for at, c in enumerate(inits):
        if native and c["name"] == "egress":
            sidecar = inits.pop(at)
            sidecar.pop("restartPolicy", None)
            if sidecar.pop("startupProbe", None) is not None:
                named.add("startup-probe")
            got["spec"]["containers"].append(sidecar)
            named.add("native-sidecar")
            break
    _main_container(case, want, got, named)
    names = [[v["name"] for v in pod["spec"].get("volumes", [])] for pod in (want, got)]
    if names[0] != names[1] and sorted(names[0]) == sorted(names[1]):
        named.add("volume-order")
    for pod in (want, got):
        if pod["spec"].get("volumes"):
            pod["spec"]["volumes"].sort(key=lambda v: v["name"])
    return want, got, named


MITM = "OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT"


def _main_container(case, want, got, named):
    """The main containers' deliberate differences: the order of mounts,
    where the MITM variable is, and isolation's capabilities."""
    w, g = want["spec"]["containers"][0], got["spec"]["containers"][0]
    names = [[m["name"] for m in c.get("volumeMounts", [])] for c in (w, g)]
    if names[0] != names[1] and sorted(names[0]) == sorted(names[1]):
        named.add("mount-order")
        for c in (w, g):
            c["volumeMounts"].sort(key=lambda m: m["name"])
    for c in (w, g):
        env = c.get("env") or []
        mitm = [e for e in env if e["name"] == MITM]
        if mitm and env.index(mitm[0]) != len(env) - 2:
            if c is w:
                named.add("mitm-env-position")
            env.remove(mitm[0])
            env.insert(len(env) - 1, mitm[0])
    dropped = lambda c: (c.get("securityContext") or {}).get("capabilities", {}).get("drop") or []
    if "NET_RAW" in dropped(g) and "NET_RAW" not in dropped(w):
        named.add("drop-net-raw")
        dropped(g).remove("NET_RAW")
    added = lambda c: (c.get("securityContext") or {}).get("capabilities", {}).get("add")
    template = ((case.get("template") or {}).get("spec", {}).get("template", {})
                .get("spec", {}).get("containers", [{}])[0].get("securityContext", {})
                .get("capabilities", {}).get("add", []))
    if added(w) == ["SYS_ADMIN"] and template and added(g) == sorted(set(template + ["SYS_ADMIN"])):
        named.add("isolation-caps-union")
        g["securityContext"]["capabilities"]["add"] = ["SYS_ADMIN"]


def _has(value, key):
    """Whether the object `value` has `key`, or the list `value` index `key`."""
    return key in value if isinstance(value, dict) else key < len(value)


def differences(want, got, path=""):
    """The JSON paths where `got` differs from `want`."""
    if isinstance(want, dict) and isinstance(got, dict):
        keys = [(k, f"{path}.{k}") for k in list(want) + [k for k in got if k not in want]]
    elif isinstance(want, list) and isinstance(got, list):
        keys = [(i, f"{path}[{i}]") for i in range(max(len(want), len(got)))]
    else:
        return [] if want == got else [f"{path}: {json.dumps(want)[:80]} != {json.dumps(got)[:80]}"]
    out = []
    for key, at in keys:
        if _has(want, key) and _has(got, key):
            out += differences(want[key], got[key], at)
        else:
            out.append(f"{at} ({'missing' if not _has(got, key) else 'extra'})")
    return out


def deliberate_denial(case, message):
    """The name of a deliberate difference that is a denial of the same
    intent the server admits, or None."""
    if "windows" in case["name"] and "Windows platform" in message:
        return "windows-policy-denied"
    return None
