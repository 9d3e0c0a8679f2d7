#!/usr/bin/env python3
"""A small Kubernetes REST client for the chart tests (stdlib + PyYAML).

There is no kubectl on the test machines, so tests/chart/dryrun.sh uses this
to talk to the API server with the kubeconfig's client certificate.

  kubeclient.py --kubeconfig F dry-run [--install-crds] FILE...
      Server-side dry-run of every object in the rendered YAML FILEs: a
      server-side apply (PATCH application/apply-patch+yaml) with dryRun=All
      and fieldValidation=Strict, so the API server runs defaulting,
      validation and admission but persists nothing, and unknown fields are
      errors. Prints `ok - ...` / `not ok - ...` / `skip - ...` per object.
      Kinds the server does not serve are skipped with the reason, unless
      --install-crds creates the minimal CRDs below first (and deletes them
      afterwards).
  kubeclient.py --kubeconfig F ensure-namespace NS
  kubeclient.py --kubeconfig F get PATH            (prints the JSON)
  kubeclient.py --kubeconfig F create [--dry-run] PATH FILE
      POST the one object in FILE (YAML or JSON; - for stdin) to PATH and
      print what the API server returns (after admission). With --dry-run
      (dryRun=All) nothing is stored. On an error prints `HTTP <code>:
      <message>` on stderr and exits 1.
  kubeclient.py --kubeconfig F merge-patch PATH JSON
  kubeclient.py --kubeconfig F delete PATH         (404 is fine)
"""
import argparse
import base64
import json
import os
import ssl
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

FIELD_MANAGER = "sandbox-webhook-chart-tests"


class Client:
    def __init__(self, kubeconfig):
        with open(kubeconfig, encoding="utf-8") as f:
            cfg = yaml.safe_load(f)
        ctx_name = cfg.get("current-context")
        ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in cfg["users"] if u["name"] == ctx["user"])
        self.server = cluster["server"].rstrip("/")
        self._tmp = tempfile.TemporaryDirectory(prefix="kubeclient-")
        base = os.path.dirname(os.path.abspath(kubeconfig))

        def material(data_key, file_key, src):
            if src.get(data_key):
                path = os.path.join(self._tmp.name, data_key)
                with open(path, "wb") as out:
                    out.write(base64.b64decode(src[data_key]))
                os.chmod(path, 0o600)
                return path
            if src.get(file_key):
                return os.path.join(base, src[file_key])
            return None

        self.ctx = ssl.create_default_context()
        ca = material("certificate-authority-data", "certificate-authority", cluster)
        if cluster.get("insecure-skip-tls-verify"):
            self.ctx.check_hostname = False
            self.ctx.verify_mode = ssl.CERT_NONE
        elif ca:
            self.ctx.load_verify_locations(cafile=ca)
        cert = material("client-certificate-data", "client-certificate", user)
        key = material("client-key-data", "client-key", user)
        if cert and key:
            self.ctx.load_cert_chain(cert, key)
        self.token = user.get("token")
        self._resources = {}

    def request(self, method, path, body=None, content_type="application/json", query=None):
        url = self.server + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=30) as resp:
                raw = resp.read()
                return resp.status, (json.loads(raw) if raw else {})
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, {"message": raw.decode(errors="replace")}

    # ------------------------------------------------------------ discovery
    def resource_for(self, api_version, kind):
        """(plural, namespaced) of a kind, or None when the server does not serve it."""
        key = (api_version, kind)
        if key not in self._resources:
            path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            status, body = self.request("GET", path)
            found = None
            if status == 200:
                for r in body.get("resources", []):
                    if r["kind"] == kind and "/" not in r["name"]:
                        found = (r["name"], r["namespaced"])
                        break
            if found is None:
                return None  # not cached: a CRD may appear later
            self._resources[key] = found
        return self._resources[key]

    def object_path(self, obj, namespace):
        api_version, kind = obj["apiVersion"], obj["kind"]
        res = self.resource_for(api_version, kind)
        if res is None:
            return None
        plural, namespaced = res
        prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        name = obj["metadata"]["name"]
        if namespaced:
            ns = obj["metadata"].get("namespace") or namespace
            return f"{prefix}/namespaces/{ns}/{plural}/{name}"
        return f"{prefix}/{plural}/{name}"

    def dry_run_apply(self, obj, namespace):
        path = self.object_path(obj, namespace)
        if path is None:
            return None, "not served"
        status, body = self.request(
            "PATCH", path, body=json.dumps(obj).encode(), content_type="application/apply-patch+yaml",
            query={"dryRun": "All", "fieldManager": FIELD_MANAGER, "force": "true", "fieldValidation": "Strict"})
        if status in (200, 201):
            return True, body
        return False, f"HTTP {status}: {body.get('message', body)}"

    def ensure_namespace(self, name):
        status, _ = self.request("GET", f"/api/v1/namespaces/{name}")
        if status == 200:
            return
        status, body = self.request("POST", "/api/v1/namespaces",
                                    body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        if status not in (200, 201, 409):
            raise SystemExit(f"cannot create namespace {name}: HTTP {status}: {body.get('message')}")

    # ------------------------------------------------------------ minimal CRDs
    def install_crd(self, crd, on_created):
        """Create crd unless a real one of that name exists; True when it is ours.
        on_created(name) is called as soon as the CRD is ours, before waiting for it."""
        name = crd["metadata"]["name"]
        path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
        status, body = self.request("GET", path)
        if status == 200:
            labels = body.get("metadata", {}).get("labels") or {}
            if labels.get("app.kubernetes.io/managed-by") != FIELD_MANAGER:
                return False  # a real CRD (e.g. cert-manager is installed): use it, never touch it
            # left over by an interrupted run of these tests: adopt it, so it is deleted at the end
        else:
            status, body = self.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd)
            if status not in (200, 201):
                raise SystemExit(f"cannot create CRD {name}: HTTP {status}: {body.get('message')}")
        on_created(name)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status, body = self.request("GET", path)
            conds = {c["type"]: c["status"] for c in (body.get("status") or {}).get("conditions") or []}
            if conds.get("Established") == "True":
                # discovery lags a little behind the Established condition
                group, version = crd["spec"]["group"], crd["spec"]["versions"][0]["name"]
                kind = crd["spec"]["names"]["kind"]
                while time.monotonic() < deadline:
                    if self.resource_for(f"{group}/{version}", kind):
                        return True
                    time.sleep(0.5)
            time.sleep(0.5)
        raise SystemExit(f"CRD {name} did not become established within 30s")

    def delete(self, path):
        status, body = self.request("DELETE", path)
        if status not in (200, 202, 404):
            raise SystemExit(f"DELETE {path}: HTTP {status}: {body.get('message')}")


# Minimal structural schemas: a subset of the upstream cert-manager v1 and
# Prometheus Operator v1 CRDs, covering the fields the chart renders (and their
# common siblings). Unknown fields are not preserved, so with
# fieldValidation=Strict a misspelt or misplaced field in the chart fails the
# dry-run. These are test fixtures, not a replacement for the real CRDs.
S = {"type": "string"}
B = {"type": "boolean"}
I = {"type": "integer"}
STRS = {"type": "array", "items": S}
ANY = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
ISSUER_REF = {"type": "object", "required": ["name"], "properties": {"name": S, "kind": S, "group": S}}
LABEL_SELECTOR = {"type": "object", "properties": {
    "matchLabels": {"type": "object", "additionalProperties": S},
    "matchExpressions": {"type": "array", "items": {"type": "object", "required": ["key", "operator"], "properties": {
        "key": S, "operator": S, "values": STRS}}}}}
USAGES = {"type": "array", "items": {"type": "string", "enum": [
    "signing", "digital signature", "content commitment", "key encipherment", "key agreement",
    "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any", "server auth",
    "client auth", "code signing", "email protection", "s/mime", "ipsec end system", "ipsec tunnel",
    "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc"]}}


def crd(group, kind, plural, spec_schema, short=None):
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", "labels": {"app.kubernetes.io/managed-by": FIELD_MANAGER}},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List",
                      **({"shortNames": short} if short else {})},
            "versions": [{
                "name": "v1", "served": True, "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "apiVersion": S, "kind": S, "metadata": {"type": "object"},
                    "spec": spec_schema, "status": ANY}}},
            }],
        },
    }


MINIMAL_CRDS = {
    ("cert-manager.io/v1", "Certificate"): crd("cert-manager.io", "Certificate", "certificates", {
        "type": "object", "required": ["issuerRef", "secretName"], "properties": {
            "secretName": S, "commonName": S, "dnsNames": STRS, "ipAddresses": STRS, "uris": STRS,
            "emailAddresses": STRS, "duration": S, "renewBefore": S, "renewBeforePercentage": I,
            "isCA": B, "usages": USAGES, "revisionHistoryLimit": I, "encodeUsagesInRequest": B,
            "subject": ANY, "literalSubject": S, "secretTemplate": ANY, "keystores": ANY,
            "additionalOutputFormats": {"type": "array", "items": ANY}, "nameConstraints": ANY,
            "otherNames": {"type": "array", "items": ANY},
            "privateKey": {"type": "object", "properties": {
                "algorithm": {"type": "string", "enum": ["RSA", "ECDSA", "Ed25519"]},
                "encoding": {"type": "string", "enum": ["PKCS1", "PKCS8"]},
                "size": I,
                "rotationPolicy": {"type": "string", "enum": ["Never", "Always"]}}},
            "issuerRef": ISSUER_REF}}, ["cert", "certs"]),
    ("cert-manager.io/v1", "Issuer"): crd("cert-manager.io", "Issuer", "issuers", {
        "type": "object", "properties": {
            "selfSigned": {"type": "object", "properties": {"crlDistributionPoints": STRS}},
            "ca": {"type": "object", "required": ["secretName"], "properties": {
                "secretName": S, "crlDistributionPoints": STRS, "ocspServers": STRS,
                "issuingCertificateURLs": STRS}},
            "acme": ANY, "vault": ANY, "venafi": ANY}}),
    ("monitoring.coreos.com/v1", "ServiceMonitor"): crd("monitoring.coreos.com", "ServiceMonitor", "servicemonitors", {
        "type": "object", "required": ["selector"], "properties": {
            "jobLabel": S, "targetLabels": STRS, "podTargetLabels": STRS, "sampleLimit": I,
            "selector": LABEL_SELECTOR,
            "namespaceSelector": {"type": "object", "properties": {"any": B, "matchNames": STRS}},
            "endpoints": {"type": "array", "items": {"type": "object", "properties": {
                "port": S, "targetPort": {"x-kubernetes-int-or-string": True}, "path": S,
                "scheme": {"type": "string", "enum": ["http", "https"]},
                "interval": S, "scrapeTimeout": S, "honorLabels": B, "honorTimestamps": B,
                "params": ANY, "tlsConfig": ANY, "bearerTokenSecret": ANY, "authorization": ANY,
                "basicAuth": ANY, "oauth2": ANY, "followRedirects": B, "enableHttp2": B,
                "filterRunning": B, "proxyUrl": S,
                "relabelings": {"type": "array", "items": ANY},
                "metricRelabelings": {"type": "array", "items": ANY}}}}}}, ["smon"]),
}


# ------------------------------------------------------------ commands
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
            client.delete(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
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
    if args.cmd == "dry-run":
        return cmd_dry_run(client, args)
    if args.cmd == "ensure-namespace":
        client.ensure_namespace(args.name)
        return 0
    if args.cmd == "get":
        status, body = client.request("GET", args.path)
        print(json.dumps(body))
        return 0 if status == 200 else 1
    if args.cmd == "create":
        if args.file == "-":
            obj = yaml.safe_load(sys.stdin)
        else:
            with open(args.file, encoding="utf-8") as f:
                obj = yaml.safe_load(f)
        status, body = client.request("POST", args.path, body=obj,
                                      query={"dryRun": "All"} if args.dry_run else None)
        if status not in (200, 201):
            print(f"HTTP {status}: {body.get('message', body)}", file=sys.stderr)
            return 1
        print(json.dumps(body))
        return 0
    if args.cmd == "merge-patch":
        status, body = client.request("PATCH", args.path, body=args.patch.encode(),
                                      content_type="application/merge-patch+json")
        if status != 200:
            print(f"HTTP {status}: {body.get('message')}", file=sys.stderr)
        return 0 if status == 200 else 1
    if args.cmd == "delete":
        client.delete(args.path)
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
