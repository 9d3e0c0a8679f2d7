//! JSON, read the crate's way and said in JSON's words: the scaffolding of
//! the hand-written readers (`visit`), a string borrowed from the request
//! ([`text::Text`]), and what could not be read, as its path and what was
//! expected there ([`error::JsonError`]). Nothing here knows what a pod is.

// First, and `#[macro_use]`: the other readers use its macros.
#[macro_use]
pub(crate) mod visit;

pub mod error;
pub(crate) mod text;
