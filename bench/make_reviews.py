#!/usr/bin/env python3
"""Writes the AdmissionReview bodies used by the benchmarks into bench/reviews/.

Realistic sandbox pods, about 2 KB, 8 KB, 10 KB and 30 KB as the apiserver
sends them (defaults filled in, managedFields present), the 2, 10 and 30 KB
ones also with a network policy of 10 and of 1,000 rules (bench/cases.txt).
Deterministic: same output each run.
"""
import json
import os
import re

from admission import pod_create_review

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "reviews")
P = "opensandbox.io"
TARGET_BYTES = {"2k": 2048, "8k": 8192, "10k": 10240, "30k": 30720}
# Containers beside the init container, past the 2 KB pod's one.
CONTAINERS = {"8k": 3, "10k": 4, "30k": 13}


def cases():
    """(name, size, rules) for each line of bench/cases.txt, the one list."""
    with open(os.path.join(HERE, "cases.txt")) as f:
        for line in f:
            name = line.strip()
            if not name or name.startswith("#"):
                continue
            m = re.fullmatch(r"pod-(2k|8k|10k|30k)(?:-rules(\d+))?", name)
            if not m:
                raise SystemExit(f"bench/cases.txt: cannot read case {name!r}")
            yield name, m.group(1), None if m.group(2) is None else int(m.group(2))


def container(name, i, rich):
    c = {
        "name": name,
        "image": f"registry.example.com/team/{name}:v1.{i}.0",
        "command": ["/usr/bin/python3", "-m", "app", f"--worker={i}"],
        "args": ["--log-level=info", "--port=8080"],
        "ports": [{"name": "http", "containerPort": 8080 + i, "protocol": "TCP"}],
        "resources": {"limits": {"cpu": "2", "memory": "4Gi"}, "requests": {"cpu": "500m", "memory": "1Gi"}},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }
    if rich:
        c["env"] = [{"name": f"SETTING_{k}", "value": f"value-{k}-" + "x" * 20} for k in range(12)]
        c["env"].append({"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}})
        c["volumeMounts"] = [{"name": f"data-{k}", "mountPath": f"/data/{k}"} for k in range(3)]
        c["volumeMounts"].append({"name": "kube-api-access", "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"})
        probe = {"httpGet": {"path": "/healthz", "port": 8080 + i, "scheme": "HTTP"}, "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
        c["livenessProbe"] = probe
        c["readinessProbe"] = probe
        c["securityContext"] = {"runAsNonRoot": True, "runAsUser": 1000, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return c


def managed_fields(n):
    fields = {"f:metadata": {"f:labels": {".": {}, f"f:{P}/id": {}}, "f:annotations": {".": {}}},
              "f:spec": {"f:containers": {f'k:{{"name":"c{i}"}}': {".": {}, "f:image": {}, "f:name": {}, "f:resources": {".": {}, "f:limits": {}}} for i in range(n)}}}
    return [{"manager": "opensandbox-server", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields}]


def pod(size, rules):
    annotations = {f"{P}/platform": "linux/amd64", f"{P}/timeout": "1h"}
    if rules is not None:
        annotations[f"{P}/network-policy"] = json.dumps(
            {"defaultAction": "deny", "egress": [{"action": "allow", "target": f"host-{i}.pypi.example.org"} for i in range(rules)]},
            separators=(",", ":"))
    spec = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ],
    }
    if size == "2k":
        spec["containers"] = [container("sandbox", 0, False)]
        mf = managed_fields(1)
    else:
        n = CONTAINERS[size]
        spec["containers"] = [container("sandbox", 0, True)] + [container(f"c{i}", i, True) for i in range(1, n)]
        spec["volumes"] = [{"name": f"data-{k}", "emptyDir": {}} for k in range(3)] + [
            {"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}]
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                                  {"key": "node.example.com/pool", "operator": "In", "values": ["sandbox", "batch"]}]}]}}}
        spec["initContainers"] = [container("prepare", 9, size == "30k")]
        mf = managed_fields(n)
    obj = {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "generateName": "sandbox-",
            "namespace": "sandboxes",
            "creationTimestamp": None,
            "labels": {f"{P}/id": "bench-0001", "app.kubernetes.io/name": "sandbox", "team": "research"},
            "annotations": annotations,
            "managedFields": mf,
        },
        "spec": spec,
        "status": {},
    }
    user = {"username": "system:serviceaccount:opensandbox:server", "uid": "e3b0c442", "groups": ["system:serviceaccounts", "system:serviceaccounts:opensandbox", "system:authenticated"]}
    return pod_create_review(obj, "705ab4f5-6393-11e8-b7cc-42010a800002", "sandboxes", user)


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, size, rules in cases():
        body = json.dumps(pod(size, rules), separators=(",", ":"))
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            f.write(body)
        print(f"{name}.json: {len(body)} bytes (target ~{TARGET_BYTES[size]} without rules)")


if __name__ == "__main__":
    main()
