//! Warnings for likely mistakes (contract: warning.cap): what the webhook
//! accepts but what almost certainly does not do what its author meant. Each is
//! one sentence of at most [`MAX_WARNING`](super::quote::MAX_WARNING) characters for `kubectl` users. On
//! the hot path, so each check works on what the decision has already read: the
//! annotation keys are compared, never decoded, the expiry is the intent's
//! parsed time, and the policy's targets were classified as it was parsed.

use chrono::{DateTime, SecondsFormat, Utc};

use super::context::Context;
use super::intent::Intent;
use super::intent::policy::{Address, address};
use super::intent::typo::misspelled;
use super::quote::fit;
use super::read::pod::PodView;

/// At most this many warnings reach an answer, then one line says how many
/// more there were: a pod's author chooses how many annotation keys it has,
/// and 60,000 misspelled ones made a 5.67 MiB response.
pub(crate) const MAX_WARNINGS: usize = 10;

/// Adds the warnings for `pod`, admitted with `intent`, to `out`, which
/// holds those found before; at most [`MAX_WARNINGS`] in all, and a last
/// line with the number of the rest. The expiry and the policy are warned
/// about before the annotation keys: one each, and what the author needs
/// most to see.
pub(crate) fn warn(pod: &PodView<'_>, intent: &Intent, ctx: &Context<'_>, out: &mut Vec<String>) {
    let config = ctx.config;
    let keys = config.keys();
    let mut out = Capped { out, more: 0 };
    if let Some(at) = intent.expires_at
        && at <= ctx.now
    {
        out.push(|| {
            format!(
                "{} {} is already past: the lifecycle controller removes the pod at once",
                keys.expires_at,
                rfc3339(at)
            )
        });
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
        out.push(|| format!("{} egress[{index}].target {what}{fix}", keys.network_policy));
    }
    for key in pod.annotation_keys() {
        if let Some(known) = misspelled(key, &config.prefix) {
            out.push(|| {
                format!(
                    "annotation {key} is ignored: did you mean {}/{known}?",
                    config.prefix
                )
            });
        }
    }
    out.finish();
}

/// Warnings up to [`MAX_WARNINGS`], and a count of those left out: a
/// warning past the cap is counted, never written.
struct Capped<'o> {
    out: &'o mut Vec<String>,
    more: usize,
}

impl Capped<'_> {
    fn push(&mut self, message: impl FnOnce() -> String) {
        if self.out.len() < MAX_WARNINGS {
            self.out.push(fit(message()));
        } else {
            self.more += 1;
        }
    }

    fn finish(self) {
        if self.more > 0 {
            self.out.push(format!("and {} more warnings", self.more));
        }
    }
}

fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// contract: warning.length
    #[test]
    fn warnings_fit_in_120_characters() {
        assert_eq!(fit("x".repeat(120)), "x".repeat(120));
        let cut = fit("é".repeat(121));
        assert_eq!(cut.chars().count(), 120);
        assert!(cut.ends_with("é…"), "{cut}");
    }
}
