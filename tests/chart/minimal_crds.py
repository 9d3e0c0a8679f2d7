"""Minimal test CRDs for the chart's server-side dry-run (kc.py dry-run
--install-crds), with structural schemas: a subset of the upstream cert-manager v1 and
Prometheus Operator v1 CRDs, covering the fields the chart renders (and their
common siblings). Unknown fields are not preserved, so with
fieldValidation=Strict a misspelt or misplaced field in the chart fails the
dry-run. These are test fixtures, not a replacement for the real CRDs.
"""

# Also the field manager of kc.py's applies: a CRD carrying it was made by
# these tests and may be deleted by them.
FIELD_MANAGER = "sandbox-webhook-chart-tests"

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
