//! The contract is cited: every rule of `docs/contract.md` (an anchor
//! `<a id="area.rule">`) is named by at least one test, as `contract:
//! area.rule` in a test's doc or a fixture's first comment, under `tests/`
//! or in a `#[cfg(test)]` part of `src/`; and every citation names a rule
//! that exists, so a renamed or removed rule cannot leave a test pointing
//! nowhere.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use regex::Regex;

/// Rules no test cites yet. The list only shrinks: a rule cited since
/// fails the test until it is taken off.
const NOT_YET_CITED: &[&str] = &[];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The rule IDs of the contract, in order.
fn rules() -> Vec<String> {
    let contract = std::fs::read_to_string(root().join("docs/contract.md")).unwrap();
    let anchor = Regex::new(r#"<a id="([a-z]+\.[a-z][a-z0-9-]*)"></a>"#).unwrap();
    anchor
        .captures_iter(&contract)
        .map(|c| c[1].to_owned())
        .collect()
}

/// The IDs named after each `contract:` in `text`: a list separated by
/// commas, which may go on over comment lines (`//`, `///`, `//!`, `#`).
fn citations(text: &str, into: &mut BTreeSet<String>) {
    let id = Regex::new(r"^ *([a-z]+\.[a-z][a-z0-9-]*)").unwrap();
    let separator = Regex::new(r"^,\s*(?:(?://[/!]?|#)\s*)?").unwrap();
    for (at, _) in text.match_indices("contract:") {
        let mut rest = &text[at + "contract:".len()..];
        while let Some(found) = id.captures(rest) {
            into.insert(found[1].to_owned());
            rest = &rest[found[0].len()..];
            match separator.find(rest) {
                Some(sep) => rest = &rest[sep.end()..],
                None => break,
            }
        }
    }
}

/// The files below `dir` whose name ends in one of `extensions`.
fn files(dir: &Path, extensions: &[&str], out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, extensions, out);
        } else if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| extensions.contains(&e))
        {
            out.push(path);
        }
    }
}

/// Every citation in the tests: all of `tests/`; in `src/`, the files
/// named `tests.rs` or under a `tests` folder whole, and of the others what
/// follows their first `#[cfg(test)]`.
fn cited() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut paths = Vec::new();
    files(
        &root().join("tests"),
        &["rs", "yaml", "yml", "sh", "py"],
        &mut paths,
    );
    // This file's own examples are not citations.
    let own = root().join(file!().trim_start_matches("./"));
    for path in paths.iter().filter(|p| **p != own) {
        citations(&std::fs::read_to_string(path).unwrap(), &mut found);
    }
    let mut sources = Vec::new();
    files(&root().join("src"), &["rs"], &mut sources);
    for path in &sources {
        let text = std::fs::read_to_string(path).unwrap();
        let test_file = path.file_name().is_some_and(|n| n == "tests.rs")
            || path.strip_prefix(root().join("src")).is_ok_and(|p| {
                p.parent()
                    .is_some_and(|d| d.components().any(|c| c.as_os_str() == "tests"))
            });
        let tests = if test_file {
            &text[..]
        } else {
            text.find("#[cfg(test)]").map_or("", |at| &text[at..])
        };
        citations(tests, &mut found);
    }
    found
}

/// Fails with `what` and the names when there are any.
#[track_caller]
fn none<'a>(what: &str, names: impl Iterator<Item = &'a str>) {
    let names: Vec<&str> = names.collect();
    assert!(names.is_empty(), "{what}: {names:?}");
}

#[test]
fn every_rule_is_cited_by_a_test_and_every_citation_is_a_rule() {
    let rules = rules();
    assert!(rules.len() > 100, "docs/contract.md: {} rules", rules.len());
    let known: BTreeSet<&str> = rules.iter().map(String::as_str).collect();
    let cited = cited();
    let unknown = cited
        .iter()
        .map(String::as_str)
        .filter(|c| !known.contains(c));
    none("cited, but not a rule of docs/contract.md", unknown);
    let uncited = rules
        .iter()
        .map(String::as_str)
        .filter(|r| !cited.contains(*r) && !NOT_YET_CITED.contains(r));
    none("rules no test cites (`contract: <id>`)", uncited);
    let since = NOT_YET_CITED.iter().filter(|r| cited.contains(**r));
    none("cited now, take them off NOT_YET_CITED", since.copied());
    let gone = NOT_YET_CITED.iter().filter(|r| !known.contains(**r));
    none("NOT_YET_CITED names what is no rule", gone.copied());
}

#[test]
fn a_citation_list_goes_on_over_comment_lines() {
    let mut found = BTreeSet::new();
    citations(
        "/// contract: a.b, c.d-e,\n/// f.g\n# [contract: h.i] text, j.k\n//! contract: l.m. More",
        &mut found,
    );
    let want = ["a.b", "c.d-e", "f.g", "h.i", "l.m"];
    assert_eq!(found, want.iter().map(|s| (*s).to_owned()).collect());
}
