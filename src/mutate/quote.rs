//! How a value from the request is quoted in a message: cut short, so that
//! a long annotation cannot make a long denial or log line.

use std::borrow::Cow;

/// Values from the request quoted in a denial are cut to this many
/// characters (contract: answer.long-values), so a 10 KB annotation cannot make
/// a 10 KB message that is then logged and shown by kubectl. Kubernetes names
/// are at most 253 characters and the seed's messages quote short values, so
/// those are never cut.
pub(crate) const MAX_QUOTED: usize = 256;

/// `value` as quoted in a denial: at most [`MAX_QUOTED`] characters, the
/// rest replaced by an ellipsis.
pub(crate) fn clip(value: &str) -> Cow<'_, str> {
    match value.char_indices().nth(MAX_QUOTED) {
        None => Cow::Borrowed(value),
        Some((end, _)) => Cow::Owned(format!("{}…", &value[..end])),
    }
}

/// What `kubectl` shows of a warning in full (contract: warning.length).
pub(crate) const MAX_WARNING: usize = 120;

/// At most [`MAX_WARNING`] characters: a long prefix or key is cut with an
/// ellipsis rather than the warning dropped.
pub(crate) fn fit(message: String) -> String {
    match message.char_indices().nth(MAX_WARNING - 1) {
        Some((end, _)) if message[end..].chars().nth(1).is_some() => {
            format!("{}…", &message[..end])
        }
        _ => message,
    }
}
