//! What the CLI tests share.

/// Fails the test unless `diff` starts as a unified diff of `path` against
/// itself (`--- a/PATH`, `+++ b/PATH`, a hunk), as `patch -p1` reads it.
#[track_caller]
pub fn assert_diff_of(diff: &str, path: &str) {
    assert!(
        diff.starts_with(&format!("--- a/{path}\n+++ b/{path}\n@@ ")),
        "{path}: {diff}"
    );
}

/// Fails the test, showing `text`, unless it holds each of `parts`.
#[track_caller]
pub fn assert_holds(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "no {part:?} in:\n{text}");
    }
}

/// Fails the test, showing `text`, if it holds `part`.
#[track_caller]
pub fn assert_lacks(text: &str, part: &str) {
    assert!(!text.contains(part), "{part:?} in:\n{text}");
}

/// Fails the test, showing `text`, unless one of `lines` holds `part`.
#[track_caller]
pub fn assert_a_line_holds(lines: &[&str], part: &str, text: &str) {
    assert!(
        lines.iter().any(|l| l.contains(part)),
        "no line with {part:?} in:\n{text}"
    );
}

/// Fails the test, showing `text`, unless it starts with `start`.
#[track_caller]
pub fn assert_starts(text: &str, start: &str) {
    assert!(text.starts_with(start), "no {start:?} first in:\n{text}");
}

/// Fails the test, showing `text`, unless it ends with `end`.
#[track_caller]
pub fn assert_ends(text: &str, end: &str) {
    assert!(text.ends_with(end), "no {end:?} last in:\n{text}");
}
