#!/usr/bin/env python3
"""The chart tests' Kubernetes client: a thin command line over the official
Kubernetes Python client (`kubernetes` on PyPI, pinned in requirements.txt;
lib.sh's kube_python installs it in a virtualenv). There is no kubectl on the
test machines.

  kc.py --kubeconfig F dry-run [--install-crds] FILE...
      Server-side dry-run of every object in the rendered YAML FILEs: a
      server-side apply with dryRun=All and fieldValidation=Strict, so the API
      server runs defaulting, validation and admission but persists nothing,
      and unknown fields are errors. Prints `ok - ...` / `not ok - ...` /
      `skip - ...` per object. Kinds the server does not serve are skipped
      with the reason, unless --install-crds creates the minimal CRDs of
      minimal_crds.py first (and deletes them afterwards).
  kc.py --kubeconfig F ensure-namespace NS
  kc.py --kubeconfig F get PATH            (prints the JSON; exit 1 if not 200)
  kc.py --kubeconfig F absent PATH         (exit 0 on 404, 1 if it exists, 2 on any other answer)
  kc.py --kubeconfig F create [--dry-run] PATH FILE
      POST the one object in FILE (YAML or JSON; - for stdin) to PATH and
      print what the API server returns (after admission). With --dry-run
      (dryRun=All) nothing is stored. On an error prints `HTTP <code>:
      <message>` on stderr and exits 1.
  kc.py --kubeconfig F merge-patch PATH JSON
  kc.py --kubeconfig F delete PATH         (404 is fine)
"""
import argparse
import json
import os
import sys
import tempfile
import time

import yaml
from kubernetes import config, dynamic
from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError, ResourceNotFoundError

from minimal_crds import FIELD_MANAGER, MINIMAL_CRDS

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def message(e):
    """`HTTP <code>: <message>` of an API error."""
    return f"HTTP {e.status}: {e.summary()}"


class Client:
    def __init__(self, kubeconfig):
        # A discovery cache of our own: the default one is shared by every
        # client of the same host, and these control planes come and go.
        self._tmp = tempfile.TemporaryDirectory(prefix="kc-")
        self.dyn = dynamic.DynamicClient(
            config.new_client_from_config(config_file=kubeconfig),
            cache_file=os.path.join(self._tmp.name, "discovery.json"),
        )

    def request(self, method, path, body=None, **params):
        """The JSON the server answers (a dict); raises DynamicApiError."""
        resp = self.dyn.request(method, path, body=body, serialize=False, **params)
        raw = resp.data
        return json.loads(raw) if raw else {}

    def resource_for(self, api_version, kind):
        """The served resource of a kind, or None."""
        try:
            return self.dyn.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            return None

    def dry_run_apply(self, obj, namespace):
        res = self.resource_for(obj["apiVersion"], obj["kind"])
        if res is None:
            return None, "not served"
        ns = (obj["metadata"].get("namespace") or namespace) if res.namespaced else None
        try:
            body = self.dyn.server_side_apply(
                res, body=obj, namespace=ns, field_manager=FIELD_MANAGER, force_conflicts=True,
                dry_run="All", query_params=[("fieldValidation", "Strict")])
            return True, body
        except DynamicApiError as e:
            return False, message(e)

    def ensure_namespace(self, name):
        try:
            self.request("GET", f"/api/v1/namespaces/{name}")
            return
        except NotFoundError:
            pass
        try:
            self.request("POST", "/api/v1/namespaces",
                         body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        except DynamicApiError as e:
            if e.status != 409:
                raise SystemExit(f"cannot create namespace {name}: {message(e)}")

    def install_crd(self, crd, on_created):
        """Create crd unless a real one of that name exists; True when it is ours.
        on_created(name) is called as soon as the CRD is ours, before waiting for it."""
        name = crd["metadata"]["name"]
        path = f"{CRDS}/{name}"
        try:
            existing = self.request("GET", path)
            labels = existing.get("metadata", {}).get("labels") or {}
            if labels.get("app.kubernetes.io/managed-by") != FIELD_MANAGER:
                return False  # a real CRD (e.g. cert-manager is installed): use it, never touch it
            # left over by an interrupted run of these tests: adopt it, so it is deleted at the end
        except NotFoundError:
            try:
                self.request("POST", CRDS, body=crd)
            except DynamicApiError as e:
                raise SystemExit(f"cannot create CRD {name}: {message(e)}")
        on_created(name)
        group, version = crd["spec"]["group"], crd["spec"]["versions"][0]["name"]
        kind = crd["spec"]["names"]["kind"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status = self.request("GET", path).get("status") or {}
            conds = {c["type"]: c["status"] for c in status.get("conditions") or []}
            # discovery lags a little behind the Established condition
            if conds.get("Established") == "True" and self.resource_for(f"{group}/{version}", kind):
                return True
            time.sleep(0.5)
        raise SystemExit(f"CRD {name} did not become established within 30s")

    def delete(self, path):
        try:
            self.request("DELETE", path)
        except NotFoundError:
            pass
        except DynamicApiError as e:
            raise SystemExit(f"DELETE {path}: {message(e)}")


def cmd_dry_run(client, args):
    objs = []
    for path in args.files:
        with open(path, encoding="utf-8") as f:
            objs.extend((path, d) for d in yaml.safe_load_all(f) if d)
    created = []
    failed = 0
    try:
        if args.install_crds:
            needed = {(o["apiVersion"], o["kind"]) for _, o in objs}
            for key in sorted(needed):
                # Also when the kind is served: a minimal CRD left over by an
                # interrupted run is adopted (and deleted below); a real one is kept.
                if key in MINIMAL_CRDS:
                    name = MINIMAL_CRDS[key]["metadata"]["name"]
                    if client.install_crd(MINIMAL_CRDS[key], on_created=created.append):
                        print(f"# created minimal test CRD {name}")
        for path, obj in objs:
            label = f"{os.path.basename(path)}: {obj['kind']} {obj['metadata'].get('name')}"
            ok, detail = client.dry_run_apply(obj, args.namespace)
            if ok is None:
                key = (obj["apiVersion"], obj["kind"])
                why = ("its CRD is not installed (run with --install-crds for a minimal one)"
                       if key in MINIMAL_CRDS else "the API server does not serve it")
                print(f"skip - {label}: {obj['apiVersion']} {obj['kind']} not served: {why}")
            elif ok:
                print(f"ok - server-side dry-run {label}")
            else:
                failed += 1
                print(f"not ok - server-side dry-run {label}: {detail}")
    finally:
        for name in created:
            client.delete(f"{CRDS}/{name}")
            print(f"# deleted minimal test CRD {name}")
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"), required="KUBECONFIG" not in os.environ)
    p.add_argument("--namespace", default="default", help="namespace of objects that name none")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dry-run")
    d.add_argument("--install-crds", action="store_true")
    d.add_argument("files", nargs="+")
    sub.add_parser("ensure-namespace").add_argument("name")
    sub.add_parser("get").add_argument("path")
    sub.add_parser("absent").add_argument("path")
    cr = sub.add_parser("create")
    cr.add_argument("--dry-run", action="store_true")
    cr.add_argument("path")
    cr.add_argument("file")
    mp = sub.add_parser("merge-patch")
    mp.add_argument("path")
    mp.add_argument("patch")
    sub.add_parser("delete").add_argument("path")
    args = p.parse_args()
    client = Client(args.kubeconfig)
    try:
        if args.cmd == "dry-run":
            return cmd_dry_run(client, args)
        if args.cmd == "ensure-namespace":
            client.ensure_namespace(args.name)
        elif args.cmd == "delete":
            client.delete(args.path)
        elif args.cmd == "get":
            print(json.dumps(client.request("GET", args.path)))
        elif args.cmd == "absent":
            try:
                client.request("GET", args.path)
            except NotFoundError:
                return 0
            print(f"{args.path} exists", file=sys.stderr)
            return 1
        elif args.cmd == "create":
            if args.file == "-":
                obj = yaml.safe_load(sys.stdin)
            else:
                with open(args.file, encoding="utf-8") as f:
                    obj = yaml.safe_load(f)
            query = [("dryRun", "All")] if args.dry_run else []
            print(json.dumps(client.request("POST", args.path, body=obj, query_params=query)))
        elif args.cmd == "merge-patch":
            client.request("PATCH", args.path, body=json.loads(args.patch),
                           content_type="application/merge-patch+json")
    except DynamicApiError as e:
        print(message(e), file=sys.stderr)
        return 2 if args.cmd == "absent" else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
