//! What a policy target may be, and what it looks like: an FQDN, a `*.`
//! wildcard, an IP or a CIDR (contract: policy.target-grammar,
//! warning.policy-target), else refused; a URL or `host:port` where a host name
//! was meant is kept, for a warning. Checked as the policy is parsed, so that
//! `mistakes` can warn without reading the targets again.
//!
//! The targets reach the egress sidecar, which runs with `NET_ADMIN`, in
//! its environment as they were written: a target that is none of these
//! (`'; rm -rf /'`, a newline, a backtick, a space) never gets there.

use std::net::IpAddr;

/// A policy target written as an address rather than a host name, IP or
/// CIDR, with the host it names (possibly empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Address<'a> {
    /// `scheme://host...`
    Url(&'a str),
    /// `host:port` or `[ipv6]:port`
    HostPort(&'a str),
}

/// Whether a (trimmed) target may reach the sidecar: an FQDN, `*` or a
/// `*.` wildcard, an IP or a CIDR, or a URL or `host:port` (warned about)
/// whose host is one of those and whose other characters are those of a
/// URL that no shell gives a meaning to (so not `&`, `;`, `$`, quotes,
/// parentheses, backticks, spaces or control characters).
pub(crate) fn acceptable(target: &str) -> bool {
    if host(target) || cidr(target) {
        return true;
    }
    let url_safe = target
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._~:/?#[]@%=+,*".contains(&b));
    match address(target) {
        Some(Address::Url(h)) => url_safe && (h.is_empty() || host(h)),
        Some(Address::HostPort(h)) => url_safe && host(h),
        None => false,
    }
}

/// An FQDN (`example.com`, `example.com.`, a single label), `*`, a `*.`
/// wildcard, or an IP.
fn host(text: &str) -> bool {
    if text == "*" || text.parse::<IpAddr>().is_ok() {
        return true;
    }
    let name = text.strip_prefix("*.").unwrap_or(text);
    let name = name.strip_suffix('.').unwrap_or(name);
    !name.is_empty() && name.len() <= 253 && name.split('.').all(label)
}

/// A DNS label: 1 to 63 letters, digits, `-` (not first or last) or `_`
/// (service names such as `_sip._tcp` have them).
fn label(label: &str) -> bool {
    (1..=63).contains(&label.len())
        && !label.starts_with('-')
        && !label.ends_with('-')
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `ip/bits`, with at most 32 bits for IPv4 and 128 for IPv6.
fn cidr(text: &str) -> bool {
    let Some((ip, bits)) = text.split_once('/') else {
        return false;
    };
    let Ok(ip) = ip.parse::<IpAddr>() else {
        return false;
    };
    let most = if ip.is_ipv4() { 32 } else { 128 };
    !bits.is_empty()
        && bits.bytes().all(|b| b.is_ascii_digit())
        && bits.parse::<u8>().is_ok_and(|n| n <= most)
}

/// Classifies a (trimmed) policy target; `None` for anything that is not
/// plainly a URL or `host:port`. An IPv6 address or CIDR has more than one
/// colon, so it is never taken for `host:port`.
pub(crate) fn address(target: &str) -> Option<Address<'_>> {
    // Both shapes have a colon; a host name has none. One byte scan per rule
    // instead of a substring search (docs/performance.md).
    if !target.contains(':') {
        return None;
    }
    if let Some((_, rest)) = target.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let host = strip_port(host).unwrap_or(host);
        return Some(Address::Url(
            host.trim_start_matches('[').trim_end_matches(']'),
        ));
    }
    strip_port(target)
        .map(|host| Address::HostPort(host.trim_start_matches('[').trim_end_matches(']')))
}

/// `host` of `host:port` (digits), or of `[ipv6]:port`.
fn strip_port(text: &str) -> Option<&str> {
    let (host, port) = text.rsplit_once(':')?;
    let numeric = !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit());
    let one_colon = !host.contains(':') || (host.starts_with('[') && host.ends_with(']'));
    (numeric && one_colon && !host.is_empty()).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_hosts_wildcards_ips_cidrs_and_url_like_targets() {
        for target in [
            "pypi.org",
            "PyPI.org.",
            "a",
            "localhost",
            "xn--bcher-kva.example",
            "_sip._tcp.example.com",
            "*",
            "*.github.com",
            "10.1.2.3",
            "::1",
            "2001:db8::1",
            "10.0.0.0/8",
            "0.0.0.0/0",
            "2001:db8::/32",
            "::/0",
            "https://files.pythonhosted.org/packages",
            "https://api.example.com/v1?x=1,y=2",
            "http://user@example.com:8080",
            "https://[2001:db8::1]:443/",
            "file:///etc/hosts",
            "api.example.com:443",
            "[2001:db8::1]:443",
        ] {
            assert!(acceptable(target), "{target}");
        }
    }

    #[test]
    fn refuses_everything_else() {
        let long_label = format!("{}.com", "a".repeat(64));
        let long_name = format!("{}a", "abcdefghi.".repeat(26));
        for target in [
            "'; rm -rf /'",
            "a.com\nb.com",
            "a.com\rb.com",
            "`id`.example.com",
            "$(id).example.com",
            "example .com",
            "example.com ",
            "exa\tmple.com",
            "\"quoted\"",
            "a.com\\nb.com",
            "a;b",
            "a|b",
            "a&b",
            "<a>",
            "-a.com",
            "a-.com",
            "a..com",
            ".a.com",
            "*a.com",
            "*.*.com",
            "a.*.com",
            "**",
            long_label.as_str(),
            long_name.as_str(),
            "10.0.0.0/33",
            "10.0.0.0/",
            "10.0.0.0/+8",
            "2001:db8::/129",
            "10.0.0.0/8/8",
            "example.com/8",
            "https://example.com/$(id)",
            "https://api.example.com/v1?x=1&y=2",
            "https://example.com/'; rm -rf /'",
            "https://exa mple.com/",
            "https://`id`/",
            "https://bad_host!/",
            "a.com:443;id",
            "é.example.com",
        ] {
            assert!(!acceptable(target), "{target:?}");
        }
    }

    #[test]
    fn classifies_targets() {
        for (target, want) in [
            (
                "https://api.example.com/v1?x=1",
                Some(Address::Url("api.example.com")),
            ),
            (
                "http://user@example.com:8080",
                Some(Address::Url("example.com")),
            ),
            (
                "https://[2001:db8::1]:443/",
                Some(Address::Url("2001:db8::1")),
            ),
            ("file:///etc/hosts", Some(Address::Url(""))),
            ("example.com:443", Some(Address::HostPort("example.com"))),
            ("10.0.0.1:53", Some(Address::HostPort("10.0.0.1"))),
            ("[2001:db8::1]:443", Some(Address::HostPort("2001:db8::1"))),
            ("example.com", None),
            ("*.example.com", None),
            ("10.0.0.0/8", None),
            ("2001:db8::1", None),
            ("2001:db8::/32", None),
            ("::1", None),
            ("fe80::1:80", None),
            ("example.com:", None),
            (":443", None),
            ("example.com:https", None),
        ] {
            assert_eq!(address(target), want, "{target}");
        }
    }
}
