//! The upstream proxy's part of the egress sidecar (contract:
//! egress.upstream-proxy, egress.upstream-proxy-ca): three env entries, and
//! with a CA bundle its Secret volume, mounted into the sidecar only. The
//! shapes and names are upstream's (opensandbox-server 1.1.1), except that
//! the credential may come from a Secret rather than sit in the pod spec.

use serde::Serialize;

use crate::config::{SecretKeyRef, UpstreamProxy};
use crate::mutate::read::k8s::{EnvVar, UPSTREAM_CA_KEY, UPSTREAM_CA_PATH, UPSTREAM_CA_VOLUME};

const PROXY_ENV: &str = "OPENSANDBOX_EGRESS_UPSTREAM_PROXY";
const AUTH_ENV: &str = "OPENSANDBOX_EGRESS_UPSTREAM_PROXY_AUTH";
const CA_ENV: &str = "OPENSANDBOX_EGRESS_MITMPROXY_UPSTREAM_EXTRA_CA";

/// An `env` item of the sidecar: a literal, or a Secret's key.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(untagged)]
pub(crate) enum Env<'a> {
    Value(EnvVar<'a>),
    FromSecret(SecretEnv<'a>),
}

#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SecretEnv<'a> {
    name: &'static str,
    value_from: ValueFrom<'a>,
}

#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
struct ValueFrom<'a> {
    secret_key_ref: &'a SecretKeyRef,
}

/// The proxy's env entries, in upstream's order: the URL, the
/// `Proxy-Authorization` value when there is one, the CA bundle's path when
/// there is a bundle.
pub(crate) fn env<'a>(proxy: &'a UpstreamProxy, out: &mut Vec<Env<'a>>) {
    out.push(Env::Value(EnvVar {
        name: PROXY_ENV,
        value: &proxy.url,
    }));
    if let Some(header) = &proxy.authorization {
        out.push(Env::Value(EnvVar {
            name: AUTH_ENV,
            value: header,
        }));
    } else if let Some(secret) = &proxy.authorization_secret_ref {
        out.push(Env::FromSecret(SecretEnv {
            name: AUTH_ENV,
            value_from: ValueFrom {
                secret_key_ref: secret,
            },
        }));
    }
    if proxy.ca_secret_name.is_some() {
        out.push(Env::Value(EnvVar {
            name: CA_ENV,
            value: UPSTREAM_CA_PATH,
        }));
    }
}

/// The sidecar's mount of the CA bundle: the one file, read-only.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CaMount {
    name: &'static str,
    mount_path: &'static str,
    sub_path: &'static str,
    read_only: bool,
}

pub(crate) const CA_MOUNT: CaMount = CaMount {
    name: UPSTREAM_CA_VOLUME,
    mount_path: UPSTREAM_CA_PATH,
    sub_path: UPSTREAM_CA_KEY,
    read_only: true,
};

/// The pod's volume of the CA bundle's Secret.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct CaVolume<'a> {
    name: &'static str,
    secret: CaSecret<'a>,
}

#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
struct CaSecret<'a> {
    secret_name: &'a str,
    items: [KeyToPath; 1],
}

#[derive(Debug, Clone, Copy, Serialize)]
struct KeyToPath {
    key: &'static str,
    path: &'static str,
}

impl CaVolume<'_> {
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }
}

/// The CA volume a pod with this proxy's sidecar needs, if the proxy has a
/// bundle.
pub(crate) fn ca_volume(proxy: &UpstreamProxy) -> Option<CaVolume<'_>> {
    proxy.ca_secret_name.as_deref().map(|secret_name| CaVolume {
        name: UPSTREAM_CA_VOLUME,
        secret: CaSecret {
            secret_name,
            items: [KeyToPath {
                key: UPSTREAM_CA_KEY,
                path: UPSTREAM_CA_KEY,
            }],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn proxy(yaml: &str) -> UpstreamProxy {
        crate::config::Config::from_yaml(&format!(
            "egress: {{mode: dns+nft, upstreamProxy: {yaml}}}"
        ))
        .unwrap()
        .egress
        .upstream_proxy
        .unwrap()
    }

    /// contract: egress.upstream-proxy, egress.upstream-proxy-ca
    #[test]
    fn entries_in_upstreams_order_with_the_credential_from_a_secret() {
        let p = proxy(
            "{url: 'http://proxy:3128', authorizationSecretRef: {name: proxy-auth, key: header}, caSecretName: corp-ca}",
        );
        let mut out = Vec::new();
        env(&p, &mut out);
        assert_eq!(
            serde_json::to_value(&out).unwrap(),
            json!([
                {"name": PROXY_ENV, "value": "http://proxy:3128"},
                {"name": AUTH_ENV, "valueFrom": {"secretKeyRef": {"name": "proxy-auth", "key": "header"}}},
                {"name": CA_ENV, "value": "/etc/ssl/certs/opensandbox-upstream-extra-ca.pem"},
            ])
        );
        assert_eq!(
            serde_json::to_value(ca_volume(&p).unwrap()).unwrap(),
            json!({"name": "opensandbox-egress-upstream-extra-ca",
                   "secret": {"secretName": "corp-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}})
        );
        assert_eq!(
            serde_json::to_value(CA_MOUNT).unwrap(),
            json!({"name": "opensandbox-egress-upstream-extra-ca",
                   "mountPath": "/etc/ssl/certs/opensandbox-upstream-extra-ca.pem",
                   "subPath": "ca.crt", "readOnly": true})
        );
        let literal = proxy("{url: 'http://proxy:3128', authorization: 'Basic eA=='}");
        let mut out = Vec::new();
        env(&literal, &mut out);
        assert_eq!(
            serde_json::to_value(&out).unwrap(),
            json!([{"name": PROXY_ENV, "value": "http://proxy:3128"},
                   {"name": AUTH_ENV, "value": "Basic eA=="}])
        );
        assert!(ca_volume(&literal).is_none());
    }
}
