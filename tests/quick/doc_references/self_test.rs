//! The checks themselves, on a made-up repository with planted errors.

use std::collections::{BTreeMap, BTreeSet};

use super::scan::{self, Repo};

const CARGO_TOML: &str = "[package]\nname = \"x\"\n\n[[test]]\nname = \"quick\"\npath = \"tests/quick/main.rs\"\n\n[[bench]]\nname = \"mutation\"\nharness = false\n";

/// A repository with `files` (path, text) besides a few fixed ones; every
/// folder of a file is a path too.
fn repo(files: &[(&str, &str)]) -> Repo {
    let mut all: Vec<(&str, &str)> = vec![
        ("Cargo.toml", CARGO_TOML),
        ("src/lib.rs", "pub mod mutate;\n"),
        ("src/mutate/mod.rs", "mod read;\npub use read::Pod;\n"),
        ("src/mutate/read/mod.rs", "mod lists;\npub struct Pod;\n"),
        ("src/mutate/read/lists.rs", "pub fn fold() {}\n"),
        ("tests/quick/main.rs", "mod golden;\n"),
        ("tests/quick/golden.rs", "#[test]\nfn fixtures_match() {}\n"),
        (
            "docs/contract.md",
            "# Contract\n\n<a id=\"egress.order\"></a>\n## Limits and timeouts\n",
        ),
        ("examples/loadgen.rs", ""),
    ];
    all.extend_from_slice(files);
    let mut paths = BTreeSet::new();
    let mut text = BTreeMap::new();
    for (path, body) in all {
        let mut at = path;
        while !at.is_empty() {
            paths.insert(at.to_owned());
            at = scan::folder(at);
        }
        text.insert(path.to_owned(), body.to_owned());
    }
    Repo { paths, text }
}

fn paths(doc: &str) -> Vec<String> {
    let r = repo(&[("docs/guide.md", doc)]);
    let mut out = scan::path_findings(&r, "docs/guide.md");
    out.extend(scan::link_findings(&r, "docs/guide.md"));
    out
}

/// The findings of [`paths`], which must be `count`.
#[track_caller]
fn paths_found(doc: &str, count: usize) -> Vec<String> {
    let found = paths(doc);
    assert_eq!(found.len(), count, "{found:?}");
    found
}

/// Fails the test unless one of `found` says `part`.
#[track_caller]
fn assert_one_says(found: &[String], part: &str) {
    assert!(found.iter().any(|f| f.contains(part)), "{found:?}");
}

#[test]
fn paths_that_resolve_pass() {
    let doc = "From the root `src/mutate/read/lists.rs`, from src/ `mutate/read/`,\n\
               from here `contract.md#egress.order`, a command `tests/quick/golden.rs --flag`,\n\
               a [link](contract.md#limits-and-timeouts) and [one](../src/lib.rs).\n\
               Not paths: `opensandbox.io/id`, `linux/amd64`, `/opt/x.sh`, `<prefix>/inject`,\n\
               `schema.rs`, `target/release/x`, `tests/fixtures/NAME.pod.yaml`, `https://x/y`.\n\
               ```\nsrc/gone.rs\n```\n";
    assert_eq!(paths(doc), Vec::<String>::new());
}

#[test]
fn a_wrong_path_fails_with_its_line() {
    let found = paths_found("# Guide\n\nSee `src/mutate/lists.rs`.\n", 1);
    assert!(
        found[0].starts_with("docs/guide.md:3: `src/mutate/lists.rs` does not exist"),
        "{found:?}"
    );
}

#[test]
fn a_wrong_link_or_anchor_fails() {
    let doc = "[a](contract.md#egress.gone) [b](missing.md) `docs/contract.md#nope`\n";
    let found = paths_found(doc, 3);
    assert_one_says(&found, "no anchor `#egress.gone`");
    assert_one_says(&found, "docs/missing.md, which does not exist");
    assert_one_says(&found, "no anchor `#nope`");
}

#[test]
fn cargo_targets_and_filters_are_checked() {
    let doc = "`cargo test --test quick golden` and `cargo bench --bench mutation`\n\
               ```sh\ncargo build --release --example loadgen\n```\n\
               `REFRESH_GOLDEN=1 cargo test --test golden` `cargo test --test quick -- layers`\n\
               `cargo bench --bench review` `cargo run --example gone`\n";
    let r = repo(&[("docs/guide.md", doc)]);
    let found = scan::cargo_findings(&r, "docs/guide.md");
    assert_eq!(found.len(), 4, "{found:?}");
    assert!(
        found[0]
            .starts_with("docs/guide.md:5: `cargo test --test golden`: no test target `golden`"),
        "{found:?}"
    );
    assert!(
        found[1].contains("the filter `layers` matches no module or function of tests/quick/"),
        "{found:?}"
    );
    assert!(found[2].contains("no bench target `review`"), "{found:?}");
    assert!(found[3].contains("no example `gone`"), "{found:?}");
}

#[test]
fn a_stale_module_path_fails_and_says_where_it_is_now() {
    let r = repo(&[]);
    for ok in [
        "mutate::read::lists::fold",
        "crate::mutate::Pod",
        "mutate::read",
        "kube::Client",
    ] {
        assert_eq!(scan::module_problem(&r, ok), None, "{ok}");
    }
    let found = scan::module_problem(&r, "mutate::lists").unwrap();
    assert!(
        found.contains("src/mutate/mod.rs neither defines nor re-exports `lists`"),
        "{found}"
    );
    assert!(
        found.contains("(it is at `mutate::read::lists`)"),
        "{found}"
    );
    let found = scan::module_problem(&r, "mutate::read::lists::gone").unwrap();
    assert!(found.contains("`gone`"), "{found}");
    let comment = "fn f() {} // `mutate::lists`\n/// see `mutate::lists`\n";
    let found = scan::module_findings(&r, "src/x.rs", comment, |l| {
        l.trim_start().starts_with("//")
    });
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("src/x.rs:2: "), "{found:?}");
}
