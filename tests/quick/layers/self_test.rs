//! The checker itself, on small made-up crates.

use super::check::check;

const LAYERS: &[(&str, &[&str])] = &[
    ("", &["low", "a b", "high", "mod"]),
    ("a", &["x", "y", "mod"]),
];

fn run(files: &[(&str, &str)]) -> Vec<String> {
    let mut all: Vec<(String, String)> = [
        ("lib.rs", ""),
        ("low.rs", ""),
        ("high.rs", ""),
        ("a/mod.rs", ""),
        ("b/mod.rs", ""),
        ("a/x.rs", ""),
        ("a/y.rs", ""),
    ]
    .iter()
    .filter(|(p, _)| !files.iter().any(|(q, _)| q == p))
    .map(|(p, s)| ((*p).to_owned(), (*s).to_owned()))
    .collect();
    all.extend(
        files
            .iter()
            .map(|(p, s)| ((*p).to_owned(), (*s).to_owned())),
    );
    check(&all, LAYERS)
}

#[test]
fn downward_imports_pass() {
    let found = run(&[
        ("high.rs", "use crate::low::L;\nuse crate::a::{self, x::X};"),
        ("a/y.rs", "use super::x::X; fn f() { crate::low::f(); }"),
        ("a/mod.rs", "mod x; mod y; pub use y::Y; fn f() { x::g() }"),
    ]);
    assert_eq!(found, Vec::<String>::new());
}

#[test]
fn upward_imports_fail_however_written() {
    for (file, src) in [
        ("low.rs", "use crate::high::H;"),
        ("low.rs", "pub(crate) use crate::{a::Y, high::{self, H}};"),
        ("low.rs", "fn f() {\n    let _ = crate::high::make();\n}"),
        (
            "low.rs",
            "#[cfg(test)]\nmod tests {\n    use crate::high::H;\n}",
        ),
    ] {
        let found = run(&[(file, src)]);
        assert!(
            found.contains(&"low imports high, which is not below it".to_owned()),
            "{src}: {found:?}"
        );
    }
    for src in [
        "use super::y::Y;",
        "fn f() { super::super::a::y::g(); }",
        "use super::Y;",
    ] {
        let found = run(&[("a/x.rs", src)]);
        assert_eq!(found.len(), 1, "{src}: {found:?}");
        assert!(found[0].starts_with("a::x imports a"), "{src}: {found:?}");
    }
    let found = run(&[
        ("a/y.rs", "use super::x::X;"),
        ("a/x.rs", "use super::y::Y;"),
    ]);
    assert!(
        found.contains(&"a::x imports a::y, which is not below it".to_owned()),
        "{found:?}"
    );
}

#[test]
fn comments_strings_and_test_modules_are_not_imports() {
    let src = "// use crate::high::H;\n/* crate::high::f() /* nested */ crate::high */\n\
               const S: &str = \"crate::high::f()\"; const R: &str = r#\"use crate::high::H;\"#;\n\
               const C: char = '\"'; fn f<'a>(x: &'a str) -> &'a str { x }\n\
               #[cfg(test)]\nmod tests {\n    use super::*;\n}";
    assert_eq!(run(&[("low.rs", src)]), Vec::<String>::new());
    assert_eq!(
        run(&[
            ("a/tests.rs", "use super::*; use super::y::Y;"),
            ("a/mod.rs", "#[cfg(test)]\nmod tests;")
        ]),
        Vec::<String>::new()
    );
}

#[test]
fn loops_fail_in_unlisted_directories_too() {
    let found = run(&[
        ("b/mod.rs", "mod p; mod q; mod r;"),
        ("b/p.rs", "use super::q::Q;"),
        ("b/q.rs", "fn f() { super::r::g(); }"),
        ("b/r.rs", "use crate::b::p::P;"),
    ]);
    assert_eq!(
        found,
        ["b::p, b::q, b::r import each other around a loop, e.g. b::p -> b::q -> b::r -> b::p"]
    );
    let found = run(&[
        ("b/mod.rs", "mod p; pub struct S; fn f() { p::g() }"),
        ("b/p.rs", "use super::S;"),
    ]);
    assert_eq!(
        found,
        ["b, b::p import each other around a loop, e.g. b -> b::p -> b"]
    );
}

#[test]
fn every_module_of_a_listed_directory_is_listed() {
    let found = run(&[("a/z.rs", ""), ("extra.rs", "")]);
    assert_eq!(
        found,
        [
            "a::z is not in the layers of a",
            "extra is not in the layers of lib"
        ]
    );
    let files = [
        "lib.rs", "low.rs", "a/mod.rs", "a/x.rs", "a/y.rs", "b/mod.rs",
    ]
    .map(|p| (p.to_owned(), String::new()));
    assert_eq!(
        check(&files, LAYERS),
        ["high is listed in the layers but is no module"]
    );
}
