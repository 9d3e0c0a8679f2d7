//! What several subcommands share: the offline commands' options
//! ([`DecisionArgs`]), the `--config` file and the `--now` time.

use std::path::PathBuf;

use chrono::{DateTime, Utc};

use crate::config::Config;
use crate::mutate::{Context, FixedToken, RandomTokens, TokenSource};

/// Options shared by the offline commands: they make output reproducible.
#[derive(Debug, clap::Args)]
pub struct DecisionArgs {
    /// Configuration file (YAML); the built-in defaults when omitted.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Admission time (RFC 3339) used to compute expires-at; now by default.
    #[arg(long, value_name = "RFC3339", value_parser = parse_time)]
    pub now: Option<DateTime<Utc>>,
    /// Egress token to use when the pod has none (random by default):
    /// visible ASCII characters, at least one.
    #[arg(long, value_name = "TOKEN", value_parser = parse_egress_token)]
    pub egress_token: Option<String>,
    /// The webhook's own namespace, which is always excluded (`serve
    /// --namespace`). `--webhook-namespace`, its old name, still works.
    #[arg(long = "namespace", value_name = "NS", alias = "webhook-namespace")]
    pub webhook_namespace: Option<String>,
}

/// The `--config` file of the offline commands, or the built-in defaults.
pub(super) fn load_config(path: Option<&std::path::Path>) -> Result<Config, String> {
    match path {
        Some(path) => Config::load(path).map_err(|e| e.to_string()),
        None => Ok(Config::default()),
    }
}

impl DecisionArgs {
    pub(super) fn load_config(&self) -> Result<Config, String> {
        load_config(self.config.as_deref())
    }

    /// The egress tokens these flags ask for: the fixed one, or random ones.
    pub(super) fn tokens(&self) -> Box<dyn TokenSource> {
        match &self.egress_token {
            Some(t) => Box::new(FixedToken(t.clone())),
            None => Box::new(RandomTokens),
        }
    }

    /// What the core decides with: `config`, at `--now` (or now), in
    /// `--namespace`.
    pub(super) fn context<'a>(
        &'a self,
        config: &'a Config,
        tokens: &'a dyn TokenSource,
    ) -> Context<'a> {
        Context {
            config,
            now: self.now.unwrap_or_else(Utc::now),
            own_namespace: self.webhook_namespace.as_deref(),
            tokens,
        }
    }
}

pub(super) fn parse_time(s: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("not an RFC 3339 time: {e}"))
}

/// The rule the webhook applies to a pod's own token: a token it would deny
/// on the pod is refused here, not written into the output.
fn parse_egress_token(s: &str) -> Result<String, String> {
    if crate::mutate::is_egress_token(s) {
        Ok(s.to_owned())
    } else {
        Err("must be a non-empty string of visible ASCII characters (no spaces); omit the flag for a random token".into())
    }
}
