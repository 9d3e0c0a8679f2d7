//! The grammars a configuration value must match, as regular expressions
//! shared with the chart's `values.schema.json` (a test checks that the
//! schema carries exactly these patterns), plus the checks a regular
//! expression cannot express (lengths).
//!
//! The patterns use only what both the `regex` crate and JSON Schema's
//! ECMA-262 / Go RE2 dialects read alike: no `\w`, no look-around.

use std::sync::LazyLock;

use regex::Regex;

/// A DNS-1123 label (Kubernetes namespace names): at most 63 characters of
/// lower-case letters, digits and `-`, starting and ending alphanumeric.
pub const DNS_LABEL: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
pub const DNS_LABEL_MAX: usize = 63;

/// A DNS-1123 subdomain (label and annotation key prefixes): dot-separated
/// labels, at most 253 characters.
pub const DNS_SUBDOMAIN: &str =
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
pub const DNS_SUBDOMAIN_MAX: usize = 253;

/// An image reference, ported from the distribution project's reference
/// grammar (`reference/regexp.go`, what containerd parses pod images with):
/// `[registry[:port]/]repository[:tag][@digest]`, repository path components
/// lower-case.
///
/// One deliberate narrowing: a first component counts as a registry only if it
/// has a dot or a port or is `localhost` (or an `[IPv6]` address). The
/// upstream grammar also takes an upper-case first component such as
/// `Opensandbox/execd` as a registry host, which is always a typo for a
/// repository.
pub const IMAGE: &str = concat!(
    "^",
    // Registry: a dotted host (optional port), any host with a port,
    // localhost, or a bracketed IPv6 address; then a slash.
    "(((",
    "[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)+(:[0-9]+)?",
    "|[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?:[0-9]+",
    "|localhost",
    "|\\[[a-fA-F0-9:]+\\](:[0-9]+)?",
    ")/)?)",
    // Repository: slash-separated lower-case components; inside one, runs of
    // alphanumerics joined by `.`, `_`, `__` or dashes.
    "[a-z0-9]+((\\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\\.|_|__|-+)[a-z0-9]+)*)*",
    // Tag: up to 128 word characters, dots and dashes, not starting with
    // either of the latter.
    "(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?",
    // Digest: algorithm:hex, at least 32 hex digits.
    "(@[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?",
    "$"
);
/// The distribution project's limit on registry plus repository.
pub const IMAGE_NAME_MAX: usize = 255;

/// A non-negative Kubernetes quantity, ported from k8s.io/apimachinery's
/// `resource.Quantity` grammar: a decimal number, then a binary suffix
/// (`Ki` … `Ei`), a decimal suffix (`n`, `u`, `m`, `k`, `M` … `E`) or a
/// decimal exponent (`e3`, `E-2`). The exponent is whole, as apimachinery's
/// parser (not its looser OpenAPI pattern) requires. No minus sign: the
/// apiserver refuses negative container resources.
pub const QUANTITY: &str =
    "^\\+?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][-+]?[0-9]+)?$";

/// A container resource name: `cpu`, `memory`, `ephemeral-storage`,
/// `hugepages-<size>`, or an extended resource `<domain>/<name>`.
pub const RESOURCE_NAME: &str = concat!(
    "^(cpu|memory|ephemeral-storage|hugepages-[0-9]+([KMGTPE]i|[kMGTPE])?",
    "|[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
    "/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$"
);

/// An OTLP collector endpoint: `http://` or `https://`, a host (a DNS
/// name, an IPv4 address or a bracketed IPv6 address), an optional port
/// and an optional path of visible ASCII characters. No user or password:
/// the value is written into every sidecar's environment.
pub const OTLP_ENDPOINT: &str = concat!(
    "^https?://",
    "([A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*",
    "|\\[[0-9A-Fa-f:.]+\\])",
    "(:[0-9]{1,5})?",
    "(/[!-~]*)?$"
);

/// A chained upstream proxy (`egress.upstreamProxy.url`): `http://` or
/// `https://` (either case), a host (a DNS name or a bracketed IPv6
/// address), an optional port and nothing after but an optional `/`. No
/// user or password, path, query or fragment: the sidecar takes a host and
/// port only, and its credential has its own fields.
pub const UPSTREAM_PROXY_URL: &str = concat!(
    "^[Hh][Tt][Tt][Pp][Ss]?://",
    "([A-Za-z0-9]([-A-Za-z0-9_]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([-A-Za-z0-9_]*[A-Za-z0-9])?)*",
    "|\\[[0-9A-Fa-f:.]+\\])",
    "(:[0-9]{1,5})?/?$"
);

/// A key of a Secret's `data` (what `valueFrom.secretKeyRef.key` names).
pub const SECRET_KEY: &str = "^[-._a-zA-Z0-9]+$";

/// A pattern that fails to compile (a bug in this file, which the unit tests
/// below would show) matches nothing, so it rejects rather than accepts.
type Pattern = LazyLock<Result<Regex, regex::Error>>;

fn matches(pattern: &Pattern, value: &str) -> bool {
    pattern.as_ref().is_ok_and(|re| re.is_match(value))
}

static DNS_LABEL_RE: Pattern = LazyLock::new(|| Regex::new(DNS_LABEL));
static DNS_SUBDOMAIN_RE: Pattern = LazyLock::new(|| Regex::new(DNS_SUBDOMAIN));
static IMAGE_RE: Pattern = LazyLock::new(|| Regex::new(IMAGE));
static QUANTITY_RE: Pattern = LazyLock::new(|| Regex::new(QUANTITY));
static RESOURCE_NAME_RE: Pattern = LazyLock::new(|| Regex::new(RESOURCE_NAME));
static OTLP_ENDPOINT_RE: Pattern = LazyLock::new(|| Regex::new(OTLP_ENDPOINT));
static UPSTREAM_PROXY_URL_RE: Pattern = LazyLock::new(|| Regex::new(UPSTREAM_PROXY_URL));
static SECRET_KEY_RE: Pattern = LazyLock::new(|| Regex::new(SECRET_KEY));

/// A namespace name; the error says what is wrong with it.
pub fn dns_label(value: &str) -> Result<(), String> {
    let len = value.len();
    let too_long = (len > DNS_LABEL_MAX)
        .then(|| format!("is {len} characters long; a namespace name has at most {DNS_LABEL_MAX}"));
    name(
        value,
        too_long,
        &DNS_LABEL_RE,
        "is not a namespace name: use lower-case letters, digits and '-', starting and ending with a letter or digit",
    )
}

pub fn dns_subdomain(value: &str) -> Result<(), String> {
    let too_long_label = value.split('.').any(|l| l.len() > DNS_LABEL_MAX);
    let too_long = (value.len() > DNS_SUBDOMAIN_MAX || too_long_label).then(|| {
        format!(
            "is too long for a DNS subdomain (at most {DNS_SUBDOMAIN_MAX} characters, {DNS_LABEL_MAX} between dots)"
        )
    });
    name(
        value,
        too_long,
        &DNS_SUBDOMAIN_RE,
        "is not a DNS subdomain such as opensandbox.io: use lower-case letters, digits, '-' and '.'",
    )
}

/// A release's revision (`revision`): a DNS label, because it is the value
/// of the `<prefix>/rev` label that selects it and part of object names.
pub fn revision(value: &str) -> Result<(), String> {
    dns_label(value).map_err(|_| {
        format!(
            "'{}' is not a revision name: use at most {DNS_LABEL_MAX} lower-case letters, digits and '-', starting and ending with a letter or digit (a DNS label such as canary or v1-2)",
            shorten(value)
        )
    })
}

/// A runtime class name (a DNS subdomain, as the API names `RuntimeClass` objects).
pub fn runtime_class(value: &str) -> Result<(), String> {
    dns_subdomain(value).map_err(|_| {
        format!(
            "'{}' is not a runtime class name: use lower-case letters, digits, '-' and '.' (a DNS subdomain such as gvisor or kata-qemu)",
            shorten(value)
        )
    })
}

/// An OTLP endpoint URL; the error says what is wrong with it.
pub fn otlp_endpoint(value: &str) -> Result<(), String> {
    let Some(rest) = value
        .strip_prefix("http://")
        .or_else(|| value.strip_prefix("https://"))
    else {
        return refuse(
            value,
            "is not an http:// or https:// URL, such as http://otel-collector:4318",
        );
    };
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() {
        return refuse(
            value,
            "has no host; write one, such as http://otel-collector:4318",
        );
    }
    if authority.contains('@') {
        return refuse(
            value,
            "carries a user or password; the endpoint is written into every sidecar's environment, so give none",
        );
    }
    if !matches(&OTLP_ENDPOINT_RE, value) {
        return refuse(
            value,
            "is not a URL with a host, an optional port and a path, such as http://otel-collector:4318",
        );
    }
    // After the last colon: a port when all digits (a bracketed IPv6
    // address without a port ends in `]`).
    let port = authority
        .rsplit_once(':')
        .map(|(_, port)| port)
        .filter(|port| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()));
    if let Some(port) = port
        && port.parse::<u16>().map_or(true, |p| p == 0)
    {
        return refuse(value, "has a port outside 1 to 65535");
    }
    Ok(())
}

/// An upstream proxy URL. Unlike every other rule here, the message never
/// quotes the value (contract: config.upstream-proxy): it names what is
/// wrong with it only.
pub fn upstream_proxy_url(value: &str) -> Result<(), String> {
    let problem = |p: &str| Err(p.to_owned());
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return problem("contains a space or a control character; write http://host:port");
    }
    let Some((scheme, rest)) = value.split_once("://") else {
        return problem("has no scheme; write http://host:port or https://host:port");
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return problem("has a scheme other than http or https");
    }
    if rest.contains(['?', '#']) {
        return problem("has a query or a fragment; write http://host:port only");
    }
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    if authority.contains('@') {
        return problem(
            "carries a user or password; give the credential as authorizationSecretRef (or authorization) instead",
        );
    }
    if !path.is_empty() && path != "/" {
        return problem("has a path; the proxy is a host and a port only");
    }
    let port = match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(':') && !port.contains(']') => Some(port),
        _ => None,
    };
    let host = port.map_or(authority, |p| &authority[..authority.len() - p.len() - 1]);
    if host.is_empty() {
        return problem("has no host; write http://host:port");
    }
    if let Some(port) = port
        && port.parse::<u16>().map_or(true, |p| p == 0)
    {
        return problem("has a port outside 1 to 65535");
    }
    if !matches(&UPSTREAM_PROXY_URL_RE, value) {
        return problem(
            "is not a host name or a bracketed IPv6 address with an optional port; write http://host:port",
        );
    }
    Ok(())
}

/// A key of a Secret.
pub fn secret_key(value: &str) -> Result<(), String> {
    if value.len() > DNS_SUBDOMAIN_MAX || !matches(&SECRET_KEY_RE, value) {
        return refuse(
            value,
            "is not a Secret key: use letters, digits, '-', '_' and '.', at most 253",
        );
    }
    Ok(())
}

/// A name's checks in order: its length (`too_long` holds why it is too
/// long), then its grammar (`mismatch` says what it should look like).
fn name(
    value: &str,
    too_long: Option<String>,
    pattern: &Pattern,
    mismatch: &str,
) -> Result<(), String> {
    match too_long {
        Some(why) => refuse(value, why),
        None if !matches(pattern, value) => refuse(value, mismatch),
        None => Ok(()),
    }
}

pub fn image(value: &str) -> Result<(), String> {
    if value.chars().any(char::is_whitespace) {
        return refuse(value, "contains whitespace; an image reference has none");
    }
    if !matches(&IMAGE_RE, value) {
        // Upper case is the usual mistake; say so when it is the only one.
        let hint = if matches(&IMAGE_RE, &value.to_ascii_lowercase()) {
            "the repository must be lower-case"
        } else {
            "expected [registry[:port]/]repository[:tag][@sha256:digest], e.g. opensandbox/execd:v1.0.18"
        };
        return refuse(
            value,
            format_args!("is not a valid image reference: {hint}"),
        );
    }
    let name = value.split('@').next().unwrap_or(value);
    let name_end = tag_start(name).unwrap_or(name.len());
    if name_end > IMAGE_NAME_MAX {
        return refuse(
            value,
            format_args!(
                "has a registry and repository of {name_end} characters; at most {IMAGE_NAME_MAX} are allowed"
            ),
        );
    }
    Ok(())
}

/// Where `:tag` starts in `name` (a reference without its digest): the
/// colon after the last slash (a colon before it is a registry port).
fn tag_start(name: &str) -> Option<usize> {
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    name[last_slash..].find(':').map(|i| last_slash + i)
}

pub fn quantity_syntax(value: &str) -> Result<(), String> {
    if value.trim_start().starts_with('-') {
        return refuse(value, "is negative; resources must be at least 0");
    }
    if !matches(&QUANTITY_RE, value) {
        return refuse(
            value,
            "is not a Kubernetes quantity such as 500m, 2, 1.5 or 256Mi",
        );
    }
    Ok(())
}

pub fn resource_name(value: &str) -> Result<(), String> {
    let extended_in_kubernetes_domain = value
        .split_once('/')
        .is_some_and(|(domain, _)| domain == "kubernetes.io" || domain.ends_with(".kubernetes.io"));
    if !matches(&RESOURCE_NAME_RE, value)
        || extended_in_kubernetes_domain
        || value.len() > DNS_SUBDOMAIN_MAX
    {
        return refuse(
            value,
            "is not a container resource: use cpu, memory, ephemeral-storage, hugepages-<size> or an extended resource such as example.com/gpu",
        );
    }
    Ok(())
}

/// The error for `value`: the value quoted (cut by [`shorten`]), then why.
fn refuse(value: &str, why: impl std::fmt::Display) -> Result<(), String> {
    Err(format!("'{}' {why}", shorten(value)))
}

/// Values quoted in messages are cut, so one broken line cannot flood a log.
pub fn shorten(value: &str) -> String {
    const MAX: usize = 80;
    if value.chars().count() <= MAX {
        value.escape_debug().to_string()
    } else {
        let head: String = value.chars().take(MAX).collect();
        format!("{}…", head.escape_debug())
    }
}

#[cfg(test)]
mod tests;
