//! Warnings for likely mistakes (SPEC 11): what the webhook accepts but what
//! almost certainly does not do what its author meant. Each is one sentence
//! of at most [`MAX_WARNING`] characters for `kubectl` users. On the hot
//! path, so each check works on what the decision has already read: the
//! annotation keys are compared, never decoded, the expiry is the intent's
//! parsed time, and the policy's targets were classified as it was parsed.

use chrono::{DateTime, SecondsFormat, Utc};

use super::context::Context;
use super::intent::Intent;
use super::pod::PodView;
use super::policy::{Address, address};

/// The names after `<prefix>/` that the webhook and its controller read
/// (SPEC 2, 6, 10), as `config::Keys` spells them.
const KNOWN: [&str; 12] = [
    "id",
    "inject",
    "platform",
    "timeout",
    "expires-at",
    "network-policy",
    "egress-mode",
    "credential-proxy",
    "entrypoint",
    "main-container",
    "egress-auth-token",
    "manual-cleanup",
];

/// What `kubectl` shows of a warning in full (SPEC 7).
const MAX_WARNING: usize = 120;

/// Adds the warnings for `pod`, admitted with `intent`, to `out`.
pub(crate) fn warn(pod: &PodView<'_>, intent: &Intent, ctx: &Context<'_>, out: &mut Vec<String>) {
    let config = ctx.config;
    let keys = config.keys();
    for key in pod.annotation_keys() {
        if let Some(known) = misspelled(key, &config.prefix) {
            out.push(fit(format!(
                "annotation {key} is ignored: did you mean {}/{known}?",
                config.prefix
            )));
        }
    }
    if let Some(at) = intent.expires_at
        && at <= ctx.now
    {
        out.push(fit(format!(
            "{} {} is already past: the lifecycle controller removes the pod at once",
            keys.expires_at,
            rfc3339(at)
        )));
    }
    if let Some((index, target)) = intent.policy.as_ref().and_then(|p| p.odd_target.as_ref())
        && let Some(address) = address(target)
    {
        let (what, host) = match address {
            Address::Url(host) => ("is a URL, not a host name", host),
            Address::HostPort(host) => ("has a port; targets match host names only", host),
        };
        let fix = if host.is_empty() {
            String::new()
        } else {
            format!(": use {host}")
        };
        out.push(fit(format!(
            "{} egress[{index}].target {what}{fix}",
            keys.network_policy
        )));
    }
}

fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// The known name an annotation key under the prefix was likely meant to
/// be: same letters in another case, or a small typo. `None` for a known
/// key, a key outside the prefix, or one too far from every known name
/// (other tools put their own keys under `opensandbox.io/` too).
fn misspelled(key: &str, prefix: &str) -> Option<&'static str> {
    let name = under_prefix(key, prefix)?;
    if key.starts_with(prefix) && KNOWN.contains(&name) {
        return None;
    }
    KNOWN
        .iter()
        .map(|known| (distance(name, known), *known))
        .filter(|(d, known)| *d <= allowed_typos(known))
        .min_by_key(|(d, _)| *d)
        .map(|(_, known)| known)
}

/// The part after `<prefix>/`, the prefix compared without case (DNS names
/// have none, so `OpenSandbox.io/timeout` is the same mistake).
fn under_prefix<'k>(key: &'k str, prefix: &str) -> Option<&'k str> {
    let head = key.get(..prefix.len())?;
    let rest = key.get(prefix.len()..)?;
    let name = rest.strip_prefix('/')?;
    head.eq_ignore_ascii_case(prefix).then_some(name)
}

/// Short names would match too much with a typo allowed: `id` matches only
/// in another case.
fn allowed_typos(known: &str) -> usize {
    match known.len() {
        0..=3 => 0,
        4..=6 => 1,
        _ => 2,
    }
}

/// Edits (insert, delete, substitute, swap two neighbours) between `a` and
/// `b`, without case: the optimal string alignment distance. Keys are at
/// most 63 characters (Kubernetes' limit for a key's name), so two rows of
/// 64 cover it; a longer name is too far from every known one anyway.
fn distance(a: &str, b: &str) -> usize {
    const ROW: usize = 64;
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() >= ROW || b.len() >= ROW {
        return usize::MAX;
    }
    let lower = |c: u8| c.to_ascii_lowercase();
    let mut before = [0usize; ROW];
    let mut prev: [usize; ROW] = std::array::from_fn(|j| j);
    let mut cur = [0usize; ROW];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(lower(a[i - 1]) != lower(b[j - 1]));
            let mut d = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1
                && j > 1
                && lower(a[i - 1]) == lower(b[j - 2])
                && lower(a[i - 2]) == lower(b[j - 1])
            {
                d = d.min(before[j - 2] + 1);
            }
            cur[j] = d;
        }
        before = prev;
        prev = cur;
    }
    prev[b.len()]
}

/// At most [`MAX_WARNING`] characters: a long prefix or key is cut with an
/// ellipsis rather than the warning dropped.
fn fit(message: String) -> String {
    match message.char_indices().nth(MAX_WARNING - 1) {
        Some((end, _)) if message[end..].chars().nth(1).is_some() => {
            format!("{}…", &message[..end])
        }
        _ => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn known_names_are_the_configured_keys() {
        let config = Config::default();
        let k = config.keys();
        let keys = [
            &k.id,
            &k.inject,
            &k.platform,
            &k.timeout,
            &k.expires_at,
            &k.network_policy,
            &k.egress_mode,
            &k.credential_proxy,
            &k.entrypoint,
            &k.main_container,
            &k.egress_auth_token,
            &k.manual_cleanup,
        ];
        let names: Vec<_> = keys
            .iter()
            .map(|k| k.strip_prefix("opensandbox.io/").expect("under the prefix"))
            .collect();
        assert_eq!(names, KNOWN);
    }

    #[test]
    fn suggests_the_known_name_for_case_and_typos() {
        let p = "opensandbox.io";
        for (key, meant) in [
            ("opensandbox.io/Timeout", "timeout"),
            ("opensandbox.io/timeuot", "timeout"),
            ("opensandbox.io/timeouts", "timeout"),
            ("OpenSandbox.io/timeout", "timeout"),
            ("opensandbox.io/expires_at", "expires-at"),
            ("opensandbox.io/expiresAt", "expires-at"),
            ("opensandbox.io/networkpolicy", "network-policy"),
            ("opensandbox.io/Network-Policy", "network-policy"),
            ("opensandbox.io/ID", "id"),
            ("opensandbox.io/injct", "inject"),
        ] {
            assert_eq!(misspelled(key, p), Some(meant), "{key}");
        }
    }

    #[test]
    fn leaves_known_foreign_and_distant_keys_alone() {
        let p = "opensandbox.io";
        for key in [
            "opensandbox.io/timeout",
            "opensandbox.io/id",
            "opensandbox.io/session-id",
            "opensandbox.io/user-oid",
            "opensandbox.io/ip",
            "opensandbox.io/state",
            "opensandbox.io/",
            "example.com/timeout",
            "opensandbox.iox/timeout",
            "opensandbox.io.timeout",
            "kubectl.kubernetes.io/last-applied-configuration",
            "é",
        ] {
            assert_eq!(misspelled(key, p), None, "{key}");
        }
        let long = format!("opensandbox.io/{}", "t".repeat(200));
        assert_eq!(misspelled(&long, p), None);
        assert_eq!(
            misspelled("example.com/Timeout", "example.com"),
            Some("timeout")
        );
    }

    #[test]
    fn distance_counts_edits_without_case() {
        assert_eq!(distance("timeout", "timeout"), 0);
        assert_eq!(distance("TimeOut", "timeout"), 0);
        assert_eq!(distance("timeuot", "timeout"), 1);
        assert_eq!(distance("timout", "timeout"), 1);
        assert_eq!(distance("tmeouts", "timeout"), 2);
        assert_eq!(distance("", "id"), 2);
        assert_eq!(distance("platform", "timeout"), 7);
        assert_eq!(distance("ab", "ba"), 1);
    }

    #[test]
    fn warnings_fit_in_120_characters() {
        assert_eq!(fit("x".repeat(120)), "x".repeat(120));
        let cut = fit("é".repeat(121));
        assert_eq!(cut.chars().count(), 120);
        assert!(cut.ends_with("é…"), "{cut}");
    }
}
