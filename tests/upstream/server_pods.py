"""The pods OpenSandbox's real server builds, from its own code.

`KubernetesSandboxService.create_sandbox` of opensandbox-server (the pinned
release in requirements.txt) is called for a create request, with only its
Kubernetes client replaced: `StandInClient` records the custom resource the
server would create (a BatchSandbox or an agent-sandbox Sandbox) and reports
it ready, so the server's own pod building, validation and template merging
all run as they do in a cluster. Nothing of the server is copied here.

The pod is then what the workload's controller makes of the template:
agent-sandbox's (v1.0.1, `reconcilePod`: the template's labels and
annotations, its name-hash label, the annotation that lists the propagated
labels, a controller reference) and OpenSandbox's BatchSandbox controller
(not served by any module proxy, so modelled on the same lines: the
template's metadata and spec, a controller reference).
"""

import asyncio
import copy
import hashlib
import importlib.metadata
import logging
import os
import tempfile

import yaml

from opensandbox_server.api.schema import CreateSandboxRequest
from opensandbox_server.config import AppConfig
from opensandbox_server.services.k8s import kubernetes_service

logging.disable(logging.CRITICAL)


class StandInClient:
    """The server's Kubernetes client, as far as creating a sandbox uses it."""

    def __init__(self, _config):
        self.created = []
        self.secrets = []

    def create_custom_object(self, group, version, namespace, plural, body):
        body = copy.deepcopy(body)
        body.setdefault("metadata", {})["uid"] = "uid-" + body["metadata"]["name"]
        self.created.append(body)
        return copy.deepcopy(body)

    def get_custom_object(self, group, version, namespace, plural, name):
        for body in self.created:
            if body["metadata"]["name"] == name:
                ready = copy.deepcopy(body)
                if body["kind"] == "BatchSandbox":
                    ready["status"] = {"phase": "Succeed", "replicas": 1, "ready": 1}
                else:
                    ready["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
                return ready
        return None

    def subscribe_custom_objects(self, **_kwargs):
        return None

    def create_secret(self, namespace, body):
        self.secrets.append(body)
        return body

    def get_pvc(self, *_args, **_kwargs):
        return None

    def create_pvc(self, *_args, **kwargs):
        return kwargs.get("body")

    def patch_pvc(self, *_args, **_kwargs):
        return None

    def delete_custom_object(self, **_kwargs):
        return None

    def list_pods(self, **_kwargs):
        return []


kubernetes_service.K8sClient = StandInClient


def _app_config(case, workdir):
    """The server's configuration for `case`, its template written to a file."""
    provider = case["provider"]
    server = copy.deepcopy(case.get("server", {}))
    kubernetes = {"namespace": "sandboxes", "workload_provider": provider}
    kubernetes.update(server.pop("kubernetes", {}))
    config = {
        "runtime": {"type": "kubernetes", "execd_image": "opensandbox/execd:v1.1.0"},
        "kubernetes": kubernetes,
        "egress": {"image": "opensandbox/egress:v1.1.7", "mode": "dns"},
        "storage": {"allowed_host_paths": ["/data"]},
    }
    for section, values in server.items():
        config.setdefault(section, {}).update(values)
    if provider == "agent-sandbox":
        config.setdefault("agent_sandbox", {})
    template = case.get("template")
    if template is not None:
        path = os.path.join(workdir, case["name"] + ".template.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(template, f)
        if provider == "agent-sandbox":
            config["agent_sandbox"]["template_file"] = path
        else:
            config["kubernetes"]["batchsandbox_template_file"] = path
    return AppConfig(**config)


def server_version():
    return importlib.metadata.version("opensandbox-server")


def build(case):
    """Calls the server for `case`. Returns (config, workload, pod)."""
    token = "tok-" + hashlib.sha256(case["name"].encode()).hexdigest()[:29]
    sandbox_id = "sbx-" + case["name"]
    with tempfile.TemporaryDirectory() as workdir:
        config = _app_config(case, workdir)
        service = kubernetes_service.KubernetesSandboxService(config)
        service.generate_sandbox_id = lambda: sandbox_id
        kubernetes_service.generate_egress_token = lambda: token
        request = CreateSandboxRequest(**case["request"])
        asyncio.run(service.create_sandbox(request))
    [workload] = service.k8s_client.created
    return config, workload, pod_of(workload)


def pod_of(workload):
    """The pod the workload's controller creates from its template."""
    metadata = workload["metadata"]
    owner = {
        "apiVersion": workload["apiVersion"],
        "kind": workload["kind"],
        "name": metadata["name"],
        "uid": metadata["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    if workload["kind"] == "Sandbox":
        template = workload["spec"]["podTemplate"]
        reserved = ("agents.x-k8s.io/", "extensions.agents.x-k8s.io/")
        given = template.get("metadata", {}).get("labels") or {}
        labels = {k: v for k, v in given.items() if not k.startswith(reserved)}
        name_hash = hashlib.sha256(metadata["name"].encode()).hexdigest()[:8]
        labels["agents.x-k8s.io/sandbox-name-hash"] = name_hash
        annotations = {
            k: v
            for k, v in (template.get("metadata", {}).get("annotations") or {}).items()
            if not k.startswith(reserved)
        }
        if given:
            annotations["agents.x-k8s.io/propagated-labels"] = ",".join(sorted(given))
        name = metadata["name"]
    else:
        template = workload["spec"]["template"]
        labels = dict(template.get("metadata", {}).get("labels") or {})
        annotations = dict(template.get("metadata", {}).get("annotations") or {})
        name = metadata["name"] + "-0"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": metadata["namespace"],
            "labels": labels,
            "ownerReferences": [owner],
        },
        "spec": copy.deepcopy(template["spec"]),
    }
    if annotations:
        pod["metadata"]["annotations"] = annotations
    return pod
