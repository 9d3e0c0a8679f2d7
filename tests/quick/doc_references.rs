//! The docs say only what is there: every backticked path, Markdown link
//! and anchor, `cargo test --test X` (and `--bench`, `--example`) and
//! module path in the project's Markdown resolves, and so does every
//! backticked module path in a code comment. What counts as each is in
//! `scan`'s header; `self_test` plants each kind of error.

mod scan;
mod self_test;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use scan::{GENERATED, Repo};

/// Folders no document is about: version control, and what builds and
/// tools write.
const SKIPPED: &[&str] = &[".git", "__pycache__"];

fn walk(root: &Path, rel: &str, repo: &mut Repo) {
    let dir = root.join(rel);
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        if SKIPPED.contains(&name.as_str()) || GENERATED.contains(&path.as_str()) {
            continue;
        }
        repo.paths.insert(path.clone());
        if entry.file_type().unwrap().is_dir() {
            walk(root, &path, repo);
        } else if [".md", ".rs"].iter().any(|e| name.ends_with(e)) || path == "Cargo.toml" {
            let text =
                std::fs::read_to_string(root.join(&path)).unwrap_or_else(|e| panic!("{path}: {e}"));
            repo.text.insert(path, text);
        }
    }
}

fn repo() -> Repo {
    let mut repo = Repo {
        paths: BTreeSet::new(),
        text: BTreeMap::new(),
    };
    walk(Path::new(env!("CARGO_MANIFEST_DIR")), "", &mut repo);
    repo
}

fn docs(repo: &Repo) -> Vec<String> {
    let docs: Vec<String> = repo
        .text
        .keys()
        .filter(|p| scan::is(p, "md") && !p.starts_with("tests/fixtures/"))
        .cloned()
        .collect();
    assert!(
        docs.len() >= 15 && docs.iter().any(|d| d == "docs/contract.md"),
        "found only these Markdown files: {docs:?}"
    );
    docs
}

/// What `find` reports for each Markdown file of the repository, in order.
fn in_docs(repo: &Repo, find: impl Fn(&str) -> Vec<String>) -> Vec<String> {
    docs(repo).iter().flat_map(|doc| find(doc)).collect()
}

#[track_caller]
fn none(what: &str, found: &[String]) {
    assert!(found.is_empty(), "{what}:\n{}", found.join("\n"));
}

#[test]
fn every_path_link_and_anchor_in_the_docs_resolves() {
    let repo = repo();
    let found = in_docs(&repo, |doc| {
        [
            scan::path_findings(&repo, doc),
            scan::link_findings(&repo, doc),
        ]
        .concat()
    });
    none(
        "paths, links and anchors in the docs that lead nowhere",
        &found,
    );
}

#[test]
fn every_cargo_target_in_the_docs_exists() {
    let repo = repo();
    let found = in_docs(&repo, |doc| scan::cargo_findings(&repo, doc));
    none("cargo commands in the docs that name no target", &found);
}

#[test]
fn every_module_path_in_the_docs_and_code_comments_resolves() {
    let repo = repo();
    let mut found = in_docs(&repo, |doc| {
        scan::module_findings(&repo, doc, &repo.text[doc], |_| true)
    });
    for (file, text) in repo.text.iter().filter(|(p, _)| scan::is(p, "rs")) {
        let comment = |line: &str| line.trim_start().starts_with("//");
        found.extend(scan::module_findings(&repo, file, text, comment));
    }
    none(
        "module paths that are not where the text says (docs, and comments in code)",
        &found,
    );
}
