//! The egress token (contract: egress.token, intent.egress-auth-token): the
//! rule a `<prefix>/egress-auth-token` annotation must follow, and where a
//! token comes from when the pod has none.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use thiserror::Error;

/// The token travels in an HTTP header: visible ASCII only, and at least one
/// character. `inject --egress-token` is held to the same rule.
#[must_use]
pub fn is_egress_token(value: &str) -> bool {
    !value.is_empty() && value.bytes().all(|b| b.is_ascii_graphic())
}

/// Why no egress token could be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The operating system's random source failed (getrandom's error is
    /// not a `std::error::Error` without its `std` feature, so no source).
    #[error("{0}")]
    Random(getrandom::Error),
}

/// Where the egress token comes from when the pod has none: random in the
/// server, fixed in tests and reproducible CLI runs.
pub trait TokenSource: Send + Sync {
    /// A fresh token for one pod.
    ///
    /// # Errors
    /// When no unpredictable token can be made; the pod is then denied
    /// with a 500 rather than given a guessable token.
    fn token(&self) -> Result<String, TokenError>;
}

/// 24 random bytes, URL-safe base64 without padding (32 characters).
pub struct RandomTokens;

impl TokenSource for RandomTokens {
    fn token(&self) -> Result<String, TokenError> {
        let mut bytes = [0u8; 24];
        // No fallback: a predictable token would let anyone drive the sidecar.
        getrandom::fill(&mut bytes).map_err(TokenError::Random)?;
        Ok(URL_SAFE_NO_PAD.encode(bytes))
    }
}

pub struct FixedToken(pub String);

impl TokenSource for FixedToken {
    fn token(&self) -> Result<String, TokenError> {
        Ok(self.0.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_tokens_are_32_url_safe_chars() {
        let a = RandomTokens.token().unwrap();
        let b = RandomTokens.token().unwrap();
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        );
    }
}
