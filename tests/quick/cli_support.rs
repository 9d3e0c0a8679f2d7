//! What the `inject` tests on files share.

/// Fails the test unless `diff` starts as a unified diff of `path` against
/// itself (`--- a/PATH`, `+++ b/PATH`, a hunk), as `patch -p1` reads it.
#[track_caller]
pub fn assert_diff_of(diff: &str, path: &str) {
    assert!(
        diff.starts_with(&format!("--- a/{path}\n+++ b/{path}\n@@ ")),
        "{path}: {diff}"
    );
}
