//! How deep a YAML input nests, found before it is parsed.
//!
//! libyaml's scanner (under `serde_yaml_ng`) keeps one entry per open flow
//! collection (`[`, `{`) and walks all of them for every token, so a
//! document nested `n` deep costs some n² steps: 100,000 `[` took 29 s in a
//! release build. `serde_yaml_ng` refuses nesting past 128 only once the
//! whole document has been scanned into events, after that time. So the
//! same scanner is driven here event by event, and stops at the first
//! collection past [`MAX_DEPTH`]: the work done before that is bounded by
//! the depth it allowed, and the scan of a document that passes costs at
//! most [`MAX_DEPTH`] steps a token, linear in its length.
//!
//! The check is the parser the document is then read with, so the two
//! cannot disagree on where a collection opens; a syntax error stops the
//! check and is left to the real parse, which reports it in its own words.

use std::mem::MaybeUninit;

use unsafe_libyaml as unsafe_sys;

/// The deepest nesting of collections read: what `serde_yaml_ng` itself
/// reads, so no document that was read before is refused now. No
/// Kubernetes object or configuration comes near it.
pub const MAX_DEPTH: usize = 128;

/// A YAML input nested deeper than [`MAX_DEPTH`], where the collection
/// that goes past it opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "collections nested more than {MAX_DEPTH} deep (line {line} column {column}); no Kubernetes object or configuration nests that deep"
)]
pub struct TooDeep {
    /// 1-based, as editors count.
    pub line: u64,
    pub column: u64,
}

/// The parser, boxed: it points at itself once given its input, so it must
/// not move; deleted when dropped.
struct Parser(Box<MaybeUninit<unsafe_sys::yaml_parser_t>>);

impl Drop for Parser {
    fn drop(&mut self) {
        // SAFETY: initialized in `check` before any `Parser` is returned,
        // and deleted only here.
        unsafe { unsafe_sys::yaml_parser_delete(self.0.as_mut_ptr()) }
    }
}

/// Refuses `text` if its collections nest deeper than [`MAX_DEPTH`].
///
/// # Errors
/// [`TooDeep`], where the collection past the limit opens.
pub fn check(text: &str) -> Result<(), TooDeep> {
    let mut raw = Box::new(MaybeUninit::<unsafe_sys::yaml_parser_t>::uninit());
    // SAFETY: `yaml_parser_initialize` writes the whole struct (it zeroes
    // it first) and fails only when it cannot allocate its buffers.
    if unsafe { unsafe_sys::yaml_parser_initialize(raw.as_mut_ptr()) }.fail {
        return Ok(()); // out of memory: the real parse will say so
    }
    let mut parser = Parser(raw);
    let p = parser.0.as_mut_ptr();
    // SAFETY: `p` is initialized and boxed (it does not move); `text`
    // outlives `parser`, which is dropped (deleted) at the end of this
    // function.
    unsafe {
        unsafe_sys::yaml_parser_set_encoding(p, unsafe_sys::YAML_UTF8_ENCODING);
        unsafe_sys::yaml_parser_set_input_string(p, text.as_ptr(), text.len() as u64);
    }
    let mut depth = 0usize;
    loop {
        let mut event = MaybeUninit::<unsafe_sys::yaml_event_t>::uninit();
        // SAFETY: `p` is a live parser; on success `event` is initialized
        // and deleted below, on failure it holds nothing to delete.
        if unsafe { unsafe_sys::yaml_parser_parse(p, event.as_mut_ptr()) }.fail {
            return Ok(());
        }
        // SAFETY: initialized by the successful parse above.
        let (kind, mark) = unsafe {
            let e = event.assume_init_ref();
            (e.type_, e.start_mark)
        };
        // SAFETY: an event from `yaml_parser_parse`, deleted once.
        unsafe { unsafe_sys::yaml_event_delete(event.as_mut_ptr()) };
        match kind {
            unsafe_sys::YAML_SEQUENCE_START_EVENT | unsafe_sys::YAML_MAPPING_START_EVENT => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(TooDeep {
                        line: mark.line + 1,
                        column: mark.column + 1,
                    });
                }
            }
            unsafe_sys::YAML_SEQUENCE_END_EVENT | unsafe_sys::YAML_MAPPING_END_EVENT => {
                depth = depth.saturating_sub(1);
            }
            unsafe_sys::YAML_STREAM_END_EVENT => return Ok(()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn flow(depth: usize) -> String {
        format!("a: {}{}\n", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn the_limit_is_where_serde_yaml_stops_reading() {
        // The top-level map is one level: `a`'s value adds the rest.
        let deepest = flow(MAX_DEPTH - 1);
        assert_eq!(check(&deepest), Ok(()));
        assert!(serde_yaml_ng::from_str::<serde_yaml_ng::Value>(&deepest).is_ok());
        let deeper = flow(MAX_DEPTH);
        assert_eq!(
            check(&deeper),
            Err(TooDeep {
                line: 1,
                column: 3 + MAX_DEPTH as u64
            })
        );
        assert!(serde_yaml_ng::from_str::<serde_yaml_ng::Value>(&deeper).is_err());
        let block = format!("a:\n{}x\n", "- ".repeat(MAX_DEPTH));
        assert!(check(&block).is_err());
        let e = check(&flow(100_000)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("collections nested more than 128 deep (line 1 column 131)"),
            "{e}"
        );
    }

    #[test]
    fn deep_nesting_is_refused_before_it_costs_anything() {
        let started = Instant::now();
        for text in [
            flow(100_000),
            format!("{}\n", "{a: ".repeat(100_000)),
            format!("{}x\n", "- ".repeat(100_000)),
        ] {
            assert!(check(&text).is_err());
        }
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn syntax_errors_and_multiple_documents_are_left_to_the_parser() {
        assert_eq!(check("a: [b\n"), Ok(()));
        assert_eq!(check("a: 1\n---\nb: [[1]]\n---\n"), Ok(()));
        // Balanced documents, one after the other, do not add up.
        let docs = format!("{}---\n", flow(100)).repeat(10);
        assert_eq!(check(&docs), Ok(()));
        assert_eq!(check(""), Ok(()));
    }
}
