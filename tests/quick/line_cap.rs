//! No source file over 500 lines: the project's Rust, shell and Python,
//! tests and tools included (a test file is read as often as the code it
//! tests). Data is not source: fixtures, the fuzz corpus, lock files,
//! Markdown, YAML and JSON are left out, and so is what builds write.

use std::path::Path;

/// The most lines a source file may have.
const CAP: usize = 500;

/// The kinds of file that count, by extension.
const SOURCE: &[&str] = &["rs", "sh", "py"];

/// Folders that hold no source of the project's own: version control, what
/// builds and tools write, and data.
const SKIPPED: &[&str] = &[
    ".git",
    "target",
    "fuzz/target",
    "fuzz/artifacts",
    "fuzz/coverage",
    "fuzz/corpus",
    "tests/fixtures",
    "certs/dev",
    "__pycache__",
];

/// `(path, lines)` of every source file below `rel` over `cap` lines.
fn over(root: &Path, rel: &str, cap: usize, out: &mut Vec<(String, usize)>) {
    let dir = root.join(rel);
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        if SKIPPED
            .iter()
            .any(|s| path == *s || path.ends_with(&format!("/{s}")))
        {
            continue;
        }
        if entry.file_type().unwrap().is_dir() {
            over(root, &path, cap, out);
        } else if Path::new(&path)
            .extension()
            .is_some_and(|e| SOURCE.iter().any(|s| e == *s))
        {
            let text =
                std::fs::read_to_string(root.join(&path)).unwrap_or_else(|e| panic!("{path}: {e}"));
            let lines = text.lines().count();
            if lines > cap {
                out.push((path, lines));
            }
        }
    }
}

fn message(found: &[(String, usize)]) -> String {
    found
        .iter()
        .map(|(path, lines)| {
            format!(
                "{path}: {lines} lines, over the {CAP}-line cap: split it by concern (its tests into a file of their own, a part with one job into a module named for it)"
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn no_source_file_over_500_lines() {
    let mut found = Vec::new();
    over(Path::new(env!("CARGO_MANIFEST_DIR")), "", CAP, &mut found);
    assert!(found.is_empty(), "{}", message(&found));
}

/// The walk finds what it must: with a cap of 400 lines, files known to be
/// longer (Rust, shell, test code) are reported, and data is not.
#[test]
fn the_walk_sees_rust_shell_and_tests_but_not_data() {
    let mut found = Vec::new();
    over(Path::new(env!("CARGO_MANIFEST_DIR")), "", 400, &mut found);
    let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
    for ext in [".rs", ".sh"] {
        assert!(
            paths.iter().any(|p| p.ends_with(ext)),
            "no {ext} file over 400 lines: {paths:?}"
        );
    }
    assert!(paths.iter().any(|p| p.starts_with("tests/")), "{paths:?}");
    assert!(paths.iter().any(|p| p.starts_with("src/")), "{paths:?}");
    assert!(
        !paths.iter().any(|p| p.starts_with("tests/fixtures/")
            || Path::new(p).extension().is_some_and(|e| e == "md")),
        "{paths:?}"
    );
    let text = message(&[("src/x.rs".to_owned(), 501)]);
    assert!(
        text.starts_with("src/x.rs: 501 lines, over the 500-line cap"),
        "{text}"
    );
}
