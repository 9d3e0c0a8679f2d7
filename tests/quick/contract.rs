//! The contract is cited: every rule of `docs/contract.md` (an anchor
//! `<a id="area.rule">`) is named by at least one test, as `contract:
//! area.rule` on the test itself (its doc comment or body, a fixture's
//! first comment, a chart check; `items` says what counts), under `tests/`
//! or in a `#[cfg(test)]` part of `src/`; and every citation names a rule
//! that exists, so a renamed or removed rule cannot leave a test pointing
//! nowhere. A file-level list names rules, it checks none.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use regex::Regex;

mod items;

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

/// The IDs of the list that starts `rest` (what follows a `contract:`): a
/// list separated by commas, which may go on over comment lines (`//`,
/// `///`, `//!`, `#`).
fn list_at(mut rest: &str) -> Vec<String> {
    let id = Regex::new(r"^ *([a-z]+\.[a-z][a-z0-9-]*)").unwrap();
    let separator = Regex::new(r"^,\s*(?:(?://[/!]?|#)\s*)?").unwrap();
    let mut out = Vec::new();
    while let Some(found) = id.captures(rest) {
        out.push(found[1].to_owned());
        rest = &rest[found[0].len()..];
        match separator.find(rest) {
            Some(sep) => rest = &rest[sep.end()..],
            None => break,
        }
    }
    out
}

/// The IDs named after each `contract:` in `text`.
fn citations(text: &str, into: &mut BTreeSet<String>) {
    for (at, _) in text.match_indices("contract:") {
        into.extend(list_at(&text[at + "contract:".len()..]));
    }
}

/// The files below `dir` whose name ends in one of `extensions`.
fn files_below(dir: &Path, extensions: &[&str], out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_below(&path, extensions, out);
        } else if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| extensions.contains(&e))
        {
            out.push(path);
        }
    }
}

/// A citation found, and whether it is on a test.
struct Cited {
    /// `path:line`, for the message.
    at: String,
    id: String,
    on_test: bool,
}

/// The names of the scenarios of the suites with their own main (the
/// `scenarios![...]` lists): their functions are tests as `#[test]`s are.
fn scenarios(files: &[(String, String)]) -> BTreeSet<String> {
    let list = Regex::new(r"scenarios!\[([^\]]*)\]").unwrap();
    let name = Regex::new(r"::\s*([a-z_][a-z0-9_]*)\s*(?:,|$)").unwrap();
    let mut out = BTreeSet::new();
    for (_, text) in files {
        for found in list.captures_iter(text) {
            out.extend(name.captures_iter(&found[1]).map(|c| c[1].to_owned()));
        }
    }
    out
}

/// Every citation of the tests: all of `tests/` (Rust, fixtures, the
/// chart's checks); in `src/`, the files named `tests.rs` or under a
/// `tests` folder whole, and of the others what follows their first
/// `#[cfg(test)]`. Each is marked by whether it is on a test (`items`).
fn cited() -> Vec<Cited> {
    let mut files = Vec::new();
    let mut paths = Vec::new();
    files_below(
        &root().join("tests"),
        &["rs", "yaml", "yml", "sh", "py"],
        &mut paths,
    );
    // This file's own examples are not citations.
    let own = root().join(file!().trim_start_matches("./"));
    for path in paths.iter().filter(|p| **p != own) {
        files.push((relative(path), std::fs::read_to_string(path).unwrap()));
    }
    let mut sources = Vec::new();
    files_below(&root().join("src"), &["rs"], &mut sources);
    for path in &sources {
        let text = std::fs::read_to_string(path).unwrap();
        let test_file = path.file_name().is_some_and(|n| n == "tests.rs")
            || path.strip_prefix(root().join("src")).is_ok_and(|p| {
                p.parent()
                    .is_some_and(|d| d.components().any(|c| c.as_os_str() == "tests"))
            });
        // Blanked rather than cut, so line numbers hold.
        let tests = if test_file {
            text
        } else {
            let from = text.find("#[cfg(test)]").unwrap_or(text.len());
            let head: String = text[..from]
                .chars()
                .map(|c| if c == '\n' { c } else { ' ' })
                .collect();
            head + &text[from..]
        };
        files.push((relative(path), tests));
    }
    let scenarios = scenarios(&files);
    let mut out = Vec::new();
    for (path, text) in &files {
        let on_test = items::on_test(path, text, &scenarios);
        for (line, id) in citations_by_line(text) {
            out.push(Cited {
                at: format!("{path}:{}", line + 1),
                id,
                on_test: on_test(line),
            });
        }
    }
    out
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap()
        .to_string_lossy()
        .replace('\\', "/")
}

/// `(line index, id)` of every citation in `text`, each at the line of
/// its `contract:`.
fn citations_by_line(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let (mut line, mut from) = (0, 0);
    for (at, _) in text.match_indices("contract:") {
        line += text[from..at].matches('\n').count();
        from = at;
        let ids = list_at(&text[at + "contract:".len()..]);
        out.extend(ids.into_iter().map(|id| (line, id)));
    }
    out
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
    let unknown: BTreeSet<String> = cited
        .iter()
        .filter(|c| !known.contains(c.id.as_str()))
        .map(|c| format!("{} at {}", c.id, c.at))
        .collect();
    none(
        "cited, but not a rule of docs/contract.md",
        unknown.iter().map(String::as_str),
    );
    let on_test: BTreeSet<&str> = cited
        .iter()
        .filter(|c| c.on_test)
        .map(|c| c.id.as_str())
        .collect();
    let mut uncited = Vec::new();
    for rule in rules
        .iter()
        .filter(|r| !on_test.contains(r.as_str()) && !NOT_YET_CITED.contains(&r.as_str()))
    {
        let elsewhere: Vec<&str> = cited
            .iter()
            .filter(|c| c.id == *rule)
            .map(|c| c.at.as_str())
            .collect();
        uncited.push(if elsewhere.is_empty() {
            format!("{rule}: cited nowhere")
        } else {
            format!("{rule}: cited only off a test, at {}", elsewhere.join(", "))
        });
    }
    assert!(
        uncited.is_empty(),
        "docs/contract.md rules no test cites. A citation counts in the doc comment of a #[test] or of an e2e scenario (or in its body), in a fixture's first comment, or on a chart check (a `def`'s docstring, a comment above the line that runs it); a file-level //! list or a helper does not. Cite each rule on the test that checks it, or write that test:\n{}",
        uncited.join("\n")
    );
    let since = NOT_YET_CITED.iter().filter(|r| on_test.contains(**r));
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

/// Which citations count, on one made-up file of each kind.
#[test]
fn only_citations_on_a_test_count() {
    let on = |path: &str, text: &str| -> Vec<String> {
        let scenarios: BTreeSet<String> = ["a_scenario".to_owned()].into();
        let on_test = items::on_test(path, text, &scenarios);
        citations_by_line(text)
            .into_iter()
            .filter(|(line, _)| on_test(*line))
            .map(|(_, id)| id)
            .collect()
    };
    let rust = "//! contract: file.level\n\n\
        /// contract: a.helper\nfn helper() {}\n\n\
        /// contract: a.test\n#[tokio::test(flavor = \"multi_thread\")]\nasync fn t() {\n    \
        let s = \"}\"; // contract: in.body\n    if s.is_empty() { helper(); }\n}\n\
        // contract: after.it\nconst X: u8 = 1;\n\n\
        /// contract: a.scenario\npub(crate) async fn a_scenario(env: &Env) -> Result<()> {\n    Ok(())\n}\n\
        proptest! {\n    /// contract: a.property\n    #[test]\n    fn p(x in 0..1u8) {}\n}\n";
    assert_eq!(
        on("tests/x.rs", rust),
        ["a.test", "in.body", "a.scenario", "a.property"]
    );
    let fixture =
        "# A case (contract: a.fixture)\n# more\napiVersion: v1\n# contract: later.comment\n";
    assert_eq!(on("tests/fixtures/x.pod.yaml", fixture), ["a.fixture"]);
    let shell = "#!/usr/bin/env bash\n# The file (contract: file.level)\nset -e\n\n\
        # The check (contract: a.check)\nrun_test \"x\" true\n# contract: dangling\n\n";
    assert_eq!(on("tests/chart/x.sh", shell), ["a.check"]);
    let python = "\"\"\"The file (contract: file.level)\"\"\"\n\n\
        # contract: above.def\ndef check_x(a,\n            b):\n    \"\"\"Checks x (contract: a.docstring,\n    a.second)\n    \"\"\"\n    \
        return 1  # contract: in.code\n\n# contract: a.constant\nRULES = []\n";
    assert_eq!(
        on("tests/chart/x.py", python),
        ["above.def", "a.docstring", "a.second"]
    );
}
