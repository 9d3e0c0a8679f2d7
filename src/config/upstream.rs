//! `egress.upstreamProxy` (contract: config.upstream-proxy): the corporate
//! CONNECT proxy every egress sidecar chains through (upstream's
//! `[egress.upstream_proxy]`, opensandbox-server 1.1.1).
//!
//! Invariant: no message made here quotes a value of this section. The URL
//! names internal infrastructure and may hold a credential by mistake, and
//! `authorization` is one; a refusal is logged at start-up and at every
//! reload, so it names the field and what is wrong with it, never the value
//! (nor the type of a wrong value, which `values::wrong` would describe).

use serde_yaml_ng::Value;

use super::rules;
use super::schema::{SecretKeyRef, UpstreamProxy};
use super::values::{Errors, Result, child, entries, invalid, keep};

const KEYS: [&str; 4] = [
    "url",
    "authorization",
    "authorizationSecretRef",
    "caSecretName",
];
const URL_EXAMPLE: &str =
    "http://host:port or https://host:port, such as http://proxy.example.com:3128";

/// `egress.upstreamProxy` at `path` (not null), or `None` with its
/// mistakes kept in `errors`.
pub(super) fn read(value: &Value, path: &str, errors: &mut Errors) -> Option<UpstreamProxy> {
    let Value::Mapping(map) = value else {
        errors.push(invalid(
            path,
            format!(
                "must be a mapping with the keys {} (or null: no upstream proxy)",
                KEYS.join(", ")
            ),
        ));
        return None;
    };
    let before = errors.len();
    let mut url = None;
    let mut proxy = UpstreamProxy {
        url: String::new(),
        authorization: None,
        authorization_secret_ref: None,
        ca_secret_name: None,
    };
    for (key, v) in entries(map, path, errors) {
        let field = child(path, key);
        match key {
            "url" => url = keep(errors, self::url(v, &field)),
            "authorization" => proxy.authorization = keep(errors, authorization(v, &field)),
            "authorizationSecretRef" => {
                proxy.authorization_secret_ref = secret_key_ref(v, &field, errors);
            }
            "caSecretName" => {
                proxy.ca_secret_name = keep(errors, secret_name(v, &field));
            }
            _ => errors.push(invalid(
                &field,
                format!("unknown field; the fields here are {}", KEYS.join(", ")),
            )),
        }
    }
    match url {
        Some(url) => proxy.url = url,
        None if errors.len() == before => {
            errors.push(invalid(
                &child(path, "url"),
                format!("is required: the proxy's {URL_EXAMPLE}"),
            ));
        }
        None => {}
    }
    if proxy.authorization.is_some() && proxy.authorization_secret_ref.is_some() {
        errors.push(invalid(
            path,
            "sets both authorization and authorizationSecretRef; keep one (authorizationSecretRef keeps the credential out of pod specs)",
        ));
    }
    (errors.len() == before).then_some(proxy)
}

/// A string, said without describing what was there instead.
fn text<'a>(value: &'a Value, field: &str, what: &str) -> Result<&'a str> {
    match value {
        Value::String(s) => Ok(s),
        _ => Err(invalid(field, format!("must be {what}"))),
    }
}

fn url(value: &Value, field: &str) -> Result<String> {
    let url = text(value, field, &format!("a string: {URL_EXAMPLE}"))?;
    rules::upstream_proxy_url(url).map_err(|problem| invalid(field, problem))?;
    Ok(url.to_owned())
}

fn authorization(value: &Value, field: &str) -> Result<String> {
    let header = text(
        value,
        field,
        "a string: the whole Proxy-Authorization value, such as Basic <base64>",
    )?;
    if header.trim().is_empty() {
        return Err(invalid(
            field,
            "is empty; remove it, or give the whole Proxy-Authorization value",
        ));
    }
    if header.chars().any(char::is_control) {
        return Err(invalid(
            field,
            "contains a line break or another control character, which an HTTP header cannot carry",
        ));
    }
    Ok(header.to_owned())
}

fn secret_name(value: &Value, field: &str) -> Result<String> {
    let name = text(value, field, "a Secret name (a DNS subdomain)")?;
    rules::dns_subdomain(name).map_err(|m| invalid(field, m))?;
    Ok(name.to_owned())
}

fn secret_key_ref(value: &Value, path: &str, errors: &mut Errors) -> Option<SecretKeyRef> {
    let Value::Mapping(map) = value else {
        errors.push(invalid(
            path,
            "must be a mapping {name: <Secret>, key: <key>} of a Secret in the sandbox's namespace",
        ));
        return None;
    };
    let before = errors.len();
    let (mut name, mut key) = (None, None);
    for (k, v) in entries(map, path, errors) {
        let field = child(path, k);
        match k {
            "name" => name = keep(errors, secret_name(v, &field)),
            "key" => {
                key = keep(
                    errors,
                    text(
                        v,
                        &field,
                        "a key of the Secret, such as proxy-authorization",
                    )
                    .and_then(|k| {
                        rules::secret_key(k).map_err(|m| invalid(&field, m))?;
                        Ok(k.to_owned())
                    }),
                );
            }
            _ => errors.push(invalid(
                &field,
                "unknown field; the fields here are name, key",
            )),
        }
    }
    for (field, missing) in [("name", name.is_none()), ("key", key.is_none())] {
        if missing && errors.len() == before {
            errors.push(invalid(&child(path, field), "is required"));
        }
    }
    Some(SecretKeyRef {
        name: name?,
        key: key?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_yaml(yaml: &str) -> std::result::Result<UpstreamProxy, Vec<String>> {
        let value: Value = serde_yaml_ng::from_str(yaml).unwrap();
        let mut errors = Vec::new();
        let read = read(&value, "egress.upstreamProxy", &mut errors);
        match read {
            Some(p) if errors.is_empty() => Ok(p),
            _ => Err(errors.iter().map(ToString::to_string).collect()),
        }
    }

    #[test]
    fn a_proxy_with_a_secret_ref_and_a_ca() {
        let p = read_yaml(
            "{url: 'https://proxy.corp.example:3128', authorizationSecretRef: {name: proxy-auth, key: header}, caSecretName: corp-ca}",
        )
        .unwrap();
        assert_eq!(p.url, "https://proxy.corp.example:3128");
        assert_eq!(
            p.authorization_secret_ref,
            Some(SecretKeyRef {
                name: "proxy-auth".into(),
                key: "header".into()
            })
        );
        assert_eq!(p.ca_secret_name.as_deref(), Some("corp-ca"));
        let shown = format!("{p:?}");
        assert!(!shown.contains("proxy.corp"), "{shown}");
    }

    #[test]
    fn the_debug_form_hides_the_credential() {
        let p = read_yaml("{url: 'http://p:1', authorization: 'Basic c2VjcmV0'}").unwrap();
        assert_eq!(p.authorization.as_deref(), Some("Basic c2VjcmV0"));
        assert!(!format!("{p:?}").contains("c2VjcmV0"));
    }
}
