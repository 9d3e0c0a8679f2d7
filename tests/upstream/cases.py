"""The create requests the differential suite sends OpenSandbox's server.

One row per request: its name, the workload provider, what of the server's
configuration differs from `server_pods._app_config`'s base (execd
v1.1.0, egress v1.1.7 in mode dns), the request as the server's REST API
takes it, and a workload template. Together they cover both providers and
every option the server has: policy, credential proxy, egress env,
isolation, lifecycle, EXECD_INIT, upstream proxy, OTLP, resources of
every container, platform (Windows included), volumes, image auth,
runtime class, metadata, secure access and extensions (the annotations
the server writes on BatchSandbox pods), and templates.
"""

IMAGE = {"uri": "python:3.12-slim"}
ENTRY = ["python", "-m", "http.server"]
LIMITS = {"cpu": "1", "memory": "2Gi"}
POLICY = {
    "defaultAction": "deny",
    "egress": [
        {"action": "allow", "target": "pypi.org"},
        {"action": "ALLOW", "target": "*.github.com"},
        {"action": "deny", "target": "10.0.0.0/8"},
    ],
}
NFT = {"egress": {"mode": "dns+nft"}}
UPSTREAM = {
    "egress": {
        "mode": "dns+nft",
        "upstream_proxy": {
            "url": "http://proxy.corp.example:3128",
            "authorization": "Basic c2FuZGJveDpwcm94eQ==",
            "ca_secret_name": "corp-proxy-ca",
        },
    }
}
LIFECYCLE = {
    "preStart": {"command": ["sh", "-c", "pip install -r /work/req.txt"], "timeoutSeconds": 120},
    "periodic": [{"name": "sync", "schedule": "*/5 * * * *", "command": ["sync"]}],
}
ISOLATION = {"bootstrap.execd.isolation": "enable"}
BATCH_TEMPLATE = {
    "spec": {
        "template": {
            "metadata": {"labels": {"team": "research"}},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 0,
                "tolerations": [{"operator": "Exists"}],
                "volumes": [{"name": "shared", "configMap": {"name": "shared", "optional": True}}],
                "containers": [
                    {
                        "name": "sandbox",
                        "volumeMounts": [{"name": "shared", "mountPath": "/etc/shared", "readOnly": True}],
                        "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}},
                    }
                ],
            },
        }
    }
}
AGENT_TEMPLATE = {
    "spec": {
        "podTemplate": {
            "spec": {
                "tolerations": [{"operator": "Exists"}],
                "terminationGracePeriodSeconds": 5,
            }
        }
    }
}


def request(**fields):
    """A request with an image and an entrypoint, and `fields`."""
    body = {"image": IMAGE, "entrypoint": ENTRY, "timeout": 3600, "resourceLimits": LIMITS}
    body.update(fields)
    return {k: v for k, v in body.items() if v is not None}


def both(name, server=None, template=None, **fields):
    """The row for each provider."""
    rows = []
    for provider, short in [("batchsandbox", "batch"), ("agent-sandbox", "agent")]:
        rows.append(
            {
                "name": f"{short}-{name}",
                "provider": provider,
                "server": server or {},
                "request": request(**fields),
                "template": template.get(provider) if template else None,
            }
        )
    return rows


CASES = [
    *both("plain"),
    *both("no-timeout", timeout=None),
    *both("policy", networkPolicy=POLICY),
    *both("policy-empty", networkPolicy={}),
    *both("policy-default-allow", networkPolicy={"defaultAction": "allow", "egress": []}),
    *both(
        "policy-egress-env",
        networkPolicy=POLICY,
        env={
            "FOO": "bar",
            "OPENSANDBOX_EGRESS_LOG_LEVEL": "debug",
            "OPENSANDBOX_EGRESS_CREDENTIAL_VAULT_REQUIRE_SCOPED_MATCH": "true",
            "OPENSANDBOX_EGRESS_DENY_WEBHOOK": None,
        },
    ),
    *both("policy-ipv6-left-on", server={"egress": {"disable_ipv6": False}}, networkPolicy=POLICY),
    *both("credential-proxy", server=NFT, networkPolicy=POLICY, credentialProxy={"enabled": True}),
    *both(
        "credential-proxy-egress-env",
        server=NFT,
        networkPolicy=POLICY,
        credentialProxy={"enabled": True},
        env={"OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT": "true", "OPENSANDBOX_EGRESS_MITMPROXY_EXTRA_PORTS": "8443"},
    ),
    *both(
        "transparent-egress-env",
        server=NFT,
        networkPolicy=POLICY,
        env={"OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT": "true"},
    ),
    *both(
        "upstream-proxy-credential",
        server=UPSTREAM,
        networkPolicy=POLICY,
        credentialProxy={"enabled": True},
    ),
    *both(
        "upstream-proxy-transparent",
        server=UPSTREAM,
        networkPolicy=POLICY,
        env={"OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT": "1"},
    ),
    *both("upstream-proxy-no-policy", server=UPSTREAM),
    *both("otlp", server={"egress": {"otlp_endpoint": "http://otel-collector.observability:4318"}}, networkPolicy=POLICY),
    *both(
        "egress-resources",
        server={"egress": {"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}}},
        networkPolicy=POLICY,
    ),
    *both(
        "execd-resources",
        server={"kubernetes": {"execd_init_resources": {"limits": {"cpu": "100m", "memory": "64Mi"}, "requests": {"cpu": "50m", "memory": "32Mi"}}}},
    ),
    *both("isolation", extensions=ISOLATION),
    *both("isolation-policy", extensions=ISOLATION, networkPolicy=POLICY),
    *both("lifecycle", lifecycle=LIFECYCLE),
    *both("execd-init", server={"runtime": {"execd_run_as_init": True}}, networkPolicy=POLICY),
    *both("resources", resourceLimits={"cpu": "2", "memory": "4Gi", "gpu": "1"}),
    *both("resources-requests", resourceLimits={"cpu": "2", "memory": "4Gi"}, resourceRequests={"cpu": "500m", "memory": "1Gi"}),
    *both(
        "volumes",
        volumes=[
            {"name": "work", "pvc": {"claimName": "work-claim"}, "mountPath": "/work"},
            {"name": "data", "host": {"path": "/data/shared"}, "mountPath": "/data", "readOnly": True, "subPath": "team"},
        ],
    ),
    *both("platform-arm64", platform={"os": "linux", "arch": "arm64"}),
    *both(
        "secure-access-extensions",
        server={"ingress": {"mode": "gateway", "gateway": {"address": "gateway.example.com", "route": {"mode": "header"}}}},
        secureAccess=True,
        extensions={"access.renew.extend.seconds": "600", "opensandbox.extensions.team": "research"},
    ),
    *both("metadata", metadata={"team": "research", "app.example.com/tier": "gold"}),
    *both("image-auth", image={"uri": "registry.example.com/team/python:3.12", "auth": {"username": "u", "password": "p"}}),
    *both("runtime-class", server={"secure_runtime": {"type": "kata", "k8s_runtime_class": "kata-qemu"}}, networkPolicy=POLICY),
    *both(
        "template",
        template={"batchsandbox": BATCH_TEMPLATE, "agent-sandbox": AGENT_TEMPLATE},
        networkPolicy=POLICY,
    ),
    *both(
        "everything",
        server={**UPSTREAM, "runtime": {"execd_run_as_init": True}},
        template={"batchsandbox": BATCH_TEMPLATE, "agent-sandbox": AGENT_TEMPLATE},
        networkPolicy=POLICY,
        credentialProxy={"enabled": True},
        env={"FOO": "bar", "OPENSANDBOX_EGRESS_LOG_LEVEL": "info"},
        extensions=ISOLATION,
        lifecycle=LIFECYCLE,
        resourceLimits={"cpu": "1", "memory": "2Gi"},
        volumes=[{"name": "work", "pvc": {"claimName": "work-claim"}, "mountPath": "/work"}],
        platform={"os": "linux", "arch": "amd64"},
    ),
    # The Windows VM profile is the BatchSandbox provider's only.
    {
        "name": "batch-windows",
        "provider": "batchsandbox",
        "server": {},
        "request": request(platform={"os": "windows", "arch": "amd64"}, resourceLimits={"cpu": "4", "memory": "8Gi"}),
        "template": None,
    },
    {
        "name": "batch-windows-policy",
        "provider": "batchsandbox",
        "server": {},
        "request": request(
            platform={"os": "windows", "arch": "amd64"},
            resourceLimits={"cpu": "4", "memory": "8Gi"},
            networkPolicy=POLICY,
            entrypoint=["/run/entry.sh", "--eni"],
        ),
        "template": None,
    },
]
