//! Manifests as repositories keep them (contract: manifest.inputs), for
//! `inject`, `diagnose` and `test`: inputs read and checked document by
//! document ([`parse`]), objects injected as the webhook would inject them
//! ([`Injector`]), and changed objects written back as YAML that every reader
//! takes the same way ([`yaml`]).

mod inject;
mod source;
#[cfg(test)]
mod tests;
pub mod yaml;

pub use inject::{Entry, Injector, Judged, MAX_REQUEST_BYTES, NoteKind, Outcome, describe};
pub use source::{Document, InputError, Parsed, Reading, Syntax, parse, read};
