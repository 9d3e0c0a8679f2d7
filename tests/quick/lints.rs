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

/// The `[lints...]` tables of the repository's manifest `path`.
fn lints_of(path: &str) -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    lints(&std::fs::read_to_string(root.join(path)).unwrap())
}

/// Fails unless the manifest `copy` holds `Cargo.toml`'s `[lints]` tables.
#[track_caller]
fn assert_lints_copied(copy: &str) {
    assert_eq!(
        lints_of(copy),
        lints_of("Cargo.toml"),
        "{copy}'s [lints] differ from Cargo.toml's: copy Cargo.toml's tables over"
    );
}

#[test]
fn the_fuzz_crate_has_the_crates_lints() {
    let main = lints_of("Cargo.toml");
    assert!(
        main.iter().any(|l| l.starts_with("pedantic")),
        "Cargo.toml: no pedantic in [lints.clippy]: {main:?}"
    );
    assert_lints_copied("fuzz/Cargo.toml");
}

/// The test-support crate (`tests/common/`, a workspace member) carries the
/// same copy: `[lints]` is not inherited without a `[workspace.lints]`.
#[test]
fn the_test_support_crate_has_the_crates_lints() {
    assert_lints_copied("tests/common/Cargo.toml");
}
