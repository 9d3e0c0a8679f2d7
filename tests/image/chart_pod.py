"""A Deployment of the rendered chart as a `podman run`, for tests/image/run.sh.

    helm template ... | python3 chart_pod.py COMPONENT NAMESPACE DIR

COMPONENT is `webhook` or `controller` (the lifecycle controller). Writes
the files of the pod's ConfigMap volumes into DIR/<volume>/ (a Secret
volume is expected at DIR/<volume>/, made by the caller) and prints, one per
line: the container's image; the podman flags that give the container the
pod's and the container's securityContext, its volumes (read-only) and its
environment (fieldRefs as the kubelet would fill them for a pod in
NAMESPACE); the line `--`; the container's args. A securityContext field or
an env source this script does not know fails it, so what the chart grows
cannot go untested.
"""

import os
import sys

import yaml


def find(docs, kind, pred):
    for d in docs:
        if d and d.get("kind") == kind and pred(d):
            return d
    sys.exit(f"chart_pod.py: no matching {kind} rendered")


def security_flags(pod_sc, sc):
    user = sc.get("runAsUser", pod_sc.get("runAsUser"))
    group = sc.get("runAsGroup", pod_sc.get("runAsGroup"))
    if user is None or group is None:
        sys.exit("chart_pod.py: runAsUser/runAsGroup not set")
    out = [f"--user={user}:{group}"]
    for key, value in sc.items():
        if key in ("runAsUser", "runAsGroup"):
            pass
        elif key == "runAsNonRoot":
            if value and user == 0:
                sys.exit("chart_pod.py: runAsNonRoot with runAsUser 0")
        elif key == "readOnlyRootFilesystem":
            out += ["--read-only"] if value else []
        elif key == "allowPrivilegeEscalation":
            out += [] if value else ["--security-opt=no-new-privileges"]
        elif key == "privileged":
            out += ["--privileged"] if value else []
        elif key == "capabilities":
            out += [f"--cap-drop={c}" for c in value.get("drop", [])]
            out += [f"--cap-add={c}" for c in value.get("add", [])]
        elif key == "seccompProfile" and value.get("type") == "RuntimeDefault":
            pass  # podman applies its default profile, a node's RuntimeDefault
        else:
            sys.exit(f"chart_pod.py: securityContext.{key}={value} not mapped to a podman flag")
    for key, value in pod_sc.items():
        if key in ("runAsUser", "runAsGroup", "runAsNonRoot"):
            pass
        elif key == "fsGroup":
            # The kubelet makes mounted volumes group-owned by fsGroup (the
            # caller does that to DIR) and adds the group to the process.
            out.append(f"--group-add={value}")
        elif key == "seccompProfile" and value.get("type") == "RuntimeDefault":
            pass
        else:
            sys.exit(f"chart_pod.py: podSecurityContext.{key}={value} not mapped to a podman flag")
    return out


def volume_flags(docs, spec, container, out_dir):
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    out = []
    for mount in container.get("volumeMounts", []):
        vol = volumes[mount["name"]]
        src = os.path.join(out_dir, mount["name"])
        if "configMap" in vol:
            cm = find(docs, "ConfigMap", lambda d: d["metadata"]["name"] == vol["configMap"]["name"])
            os.makedirs(src, exist_ok=True)
            for name, text in cm["data"].items():
                with open(os.path.join(src, name), "w") as f:
                    f.write(text)
        elif "secret" not in vol:
            sys.exit(f"chart_pod.py: volume {mount['name']} is neither a ConfigMap nor a Secret")
        out.append(f"--volume={src}:{mount['mountPath']}:ro")
    return out


def env_flags(dep, container, namespace):
    out = []
    for e in container.get("env", []):
        if "value" in e:
            out.append(f"--env={e['name']}={e['value']}")
            continue
        path = e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        if path == "metadata.namespace":
            out.append(f"--env={e['name']}={namespace}")
        elif path == "metadata.name":
            out.append(f"--env={e['name']}={dep['metadata']['name']}-image-test")
        else:
            sys.exit(f"chart_pod.py: env {e['name']} from {e.get('valueFrom')} not mapped")
    return out


def main():
    component, namespace, out_dir = sys.argv[1:4]
    docs = list(yaml.safe_load_all(sys.stdin))

    def wanted(d):
        is_controller = d["metadata"]["labels"].get("app.kubernetes.io/component") == "lifecycle-controller"
        return is_controller == (component == "controller")

    dep = find(docs, "Deployment", wanted)
    spec = dep["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    lines = [container["image"]]
    lines += security_flags(spec.get("securityContext") or {}, container.get("securityContext") or {})
    lines += volume_flags(docs, spec, container, out_dir)
    lines += env_flags(dep, container, namespace)
    lines += ["--"] + container.get("args", [])
    print("\n".join(lines))


if __name__ == "__main__":
    main()
