//! What `inject` says on standard error about what it read.

use crate::manifest::{Entry, NoteKind, Outcome};

/// Everything worth knowing on stderr, in order: skips and notes (unless
/// `quiet`), warnings, denials.
pub(super) fn report(entries: &[Entry], quiet: bool) {
    let prefix = |at: &str| {
        if at.is_empty() {
            String::new()
        } else {
            format!("{at}: ")
        }
    };
    for entry in entries {
        match entry {
            Entry::Judged(judged) => {
                let p = prefix(&judged.at);
                match &judged.outcome {
                    Outcome::Skipped(reason) if !quiet => {
                        eprintln!("{p}skipped ({}): {}", reason.as_str(), reason.sentence());
                    }
                    Outcome::Denied(denial) => eprintln!("{p}{denial}"),
                    _ => {}
                }
                for w in &judged.warnings {
                    eprintln!("{p}warning: {w}");
                }
            }
            Entry::Note {
                kind: NoteKind::TooLarge,
                at,
                text,
            } => eprintln!("warning: {at}: {text}"),
            Entry::Note { at, text, .. } if !quiet => eprintln!("{}{text}", prefix(at)),
            Entry::Note { .. } => {}
        }
    }
}
