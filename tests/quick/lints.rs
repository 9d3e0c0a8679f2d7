//! The fuzz crate and the test-support crate are linted as the crate is:
//! neither inherits `Cargo.toml`'s `[lints]` (the fuzz crate is a workspace
//! of its own), so each carries a copy, and this keeps the copies equal.
//! (`./test.sh`'s clippy step runs them all with `-D warnings`.)

/// The `[lints...]` tables of a manifest, comments and blank lines left out.
fn lints(manifest: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line.starts_with("[lints");
        }
        if inside && !line.is_empty() && !line.starts_with('#') {
            out.push(line.to_owned());
        }
    }
    out
}

#[test]
fn the_fuzz_crate_has_the_crates_lints() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    let main = lints(&read("Cargo.toml"));
    assert!(
        main.iter().any(|l| l.starts_with("pedantic")),
        "Cargo.toml: no pedantic in [lints.clippy]: {main:?}"
    );
    let fuzz = lints(&read("fuzz/Cargo.toml"));
    assert_eq!(
        fuzz, main,
        "fuzz/Cargo.toml's [lints] differ from Cargo.toml's: copy Cargo.toml's tables over"
    );
}

/// The test-support crate (`tests/common/`, a workspace member) carries the
/// same copy: `[lints]` is not inherited without a `[workspace.lints]`.
#[test]
fn the_test_support_crate_has_the_crates_lints() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    let main = lints(&read("Cargo.toml"));
    let support = lints(&read("tests/common/Cargo.toml"));
    assert_eq!(
        support, main,
        "tests/common/Cargo.toml's [lints] differ from Cargo.toml's: copy Cargo.toml's tables over"
    );
}
