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
