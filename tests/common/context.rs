//! One way to build a `mutate::Context`: it borrows its configuration and
//! token source, so the builder owns them and lends a `Context` out.

use chrono::{DateTime, Utc};
use sandbox_webhook::config::Config;
use sandbox_webhook::mutate::{Context, FixedToken, TokenSource};

/// The egress token of a fixed-token context (32 characters, like a real one).
pub const TOKEN: &str = "fixtureTokenFixtureTokenFixture0";

pub struct TestContext {
    config: Config,
    now: DateTime<Utc>,
    own_namespace: Option<String>,
    tokens: Box<dyn TokenSource>,
}

impl Default for TestContext {
    fn default() -> Self {
        Self::new()
    }
}

impl TestContext {
    /// The built-in configuration, the fixed clock, the fixed [`TOKEN`] and
    /// no own namespace.
    pub fn new() -> Self {
        TestContext {
            config: Config::default(),
            now: crate::clock::now(),
            own_namespace: None,
            tokens: Box::new(FixedToken(TOKEN.into())),
        }
    }

    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    pub fn own_namespace(mut self, namespace: &str) -> Self {
        self.own_namespace = Some(namespace.to_owned());
        self
    }

    pub fn token(self, token: &str) -> Self {
        self.tokens(FixedToken(token.into()))
    }

    pub fn tokens(mut self, tokens: impl TokenSource + 'static) -> Self {
        self.tokens = Box::new(tokens);
        self
    }

    pub fn get(&self) -> Context<'_> {
        Context {
            config: &self.config,
            now: self.now,
            own_namespace: self.own_namespace.as_deref(),
            tokens: self.tokens.as_ref(),
        }
    }
}
