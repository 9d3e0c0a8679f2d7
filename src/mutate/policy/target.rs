//! What a policy target looks like: a URL or `host:port` where a host name
//! was meant. Classified as the policy is parsed, so that `mistakes` can warn
//! without reading the targets again.

/// A policy target written as an address rather than a host name, IP or
/// CIDR, with the host it names (possibly empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Address<'a> {
    /// `scheme://host...`
    Url(&'a str),
    /// `host:port` or `[ipv6]:port`
    HostPort(&'a str),
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
