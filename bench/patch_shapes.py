#!/usr/bin/env python3
"""The patch shapes bench/apiserver.sh compares (issue 19), from the pod and
the webhook's own patch for it (`sandbox-webhook inject -o patch`):

  ours   the webhook's patch as it is;
  fine   the same result in many fine-grained `add` operations: every object
         the webhook adds is added empty, then key by key;
  whole  the same result in few operations that replace whole arrays and
         maps (containers, initContainers, volumes, nodeSelector,
         annotations), computed from the patched pod;
  label  one label added: what a minimal webhook (the kube-rs admission
         example) answers.

Each is written to OUT/<shape>.json; every shape but `label` yields the same
pod, which this script checks before writing anything. That pod, the
webhook's result, is written to OUT/injected-pod.json.

  bench/patch_shapes.py POD.json OURS_PATCH.json OUT_DIR
"""
import copy
import json
import sys

import jsonpatch


def fine(pod, ops):
    out = []
    doc = copy.deepcopy(pod)
    for op in ops:
        value = op.get("value")
        if op["op"] == "add" and isinstance(value, dict) and len(value) > 1:
            path = op["path"]
            if path.endswith("/-"):
                # The index the appended item gets: the array's length now.
                parent = jsonpatch.JsonPointer(path[:-2]).resolve(doc)
                path = f"{path[:-2]}/{len(parent)}"
            out.append({"op": "add", "path": path, "value": {}})
            for key, v in value.items():
                token = key.replace("~", "~0").replace("/", "~1")
                out.append({"op": "add", "path": f"{path}/{token}", "value": v})
        else:
            out.append(op)
        doc = jsonpatch.apply_patch(doc, [op])
    return out


def whole(pod, patched):
    out = []
    for parent, key in [("spec", "containers"), ("spec", "initContainers"), ("spec", "volumes"),
                        ("spec", "nodeSelector"), ("metadata", "annotations"), ("metadata", "labels")]:
        after = patched.get(parent, {}).get(key)
        before = pod.get(parent, {}).get(key)
        if after != before:
            out.append({"op": "replace" if before is not None else "add",
                        "path": f"/{parent}/{key}", "value": after})
    return out


def main():
    pod_path, ours_path, out_dir = sys.argv[1:4]
    pod = json.load(open(pod_path))
    ours = json.load(open(ours_path))
    patched = jsonpatch.apply_patch(copy.deepcopy(pod), ours)
    shapes = {"ours": ours, "fine": fine(pod, ours), "whole": whole(pod, patched),
              "label": [{"op": "add", "path": "/metadata/labels/bench-admission", "value": "modified"}]}
    for name in ("fine", "whole"):
        got = jsonpatch.apply_patch(copy.deepcopy(pod), shapes[name])
        if got != patched:
            raise SystemExit(f"shape {name} does not give the webhook's pod")
    for name, ops in shapes.items():
        text = json.dumps(ops, separators=(",", ":"))
        with open(f"{out_dir}/{name}.json", "w") as f:
            f.write(text)
        print(f"shape {name:<6} {len(ops):>3} operations, {len(text):>6} bytes")
    with open(f"{out_dir}/injected-pod.json", "w") as f:
        json.dump(patched, f)


main()
