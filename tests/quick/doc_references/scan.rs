//! What a document or a code comment refers to, and whether it is there. Pure
//! over a [`Repo`] (a set of paths and the text of some files), so the
//! self-test can plant errors in a made-up repository.
//!
//! The rules, in the words of the messages:
//! - a *path* is a word of backticked text (outside fenced code) that holds
//!   a `/` and whose first part is an entry of the repository's root, of the
//!   document's folder or of `src/` (`mutate/read/` is `src/mutate/read/`);
//!   it must exist under that base. A bare file name (`schema.rs`) is a
//!   name, not a path, and is not checked. Placeholders (`<id>`, `NAME`,
//!   `*`), absolute paths, URLs and what builds write (`target/`,
//!   `certs/dev/`) are not paths of the repository;
//! - a *link* `[text](target)` resolves from the document's folder, and its
//!   `#anchor` is an `<a id>` or a heading of the target;
//! - a *cargo target*: `cargo test --test X` names a `[[test]]` of
//!   `Cargo.toml` (`--bench`, `--example` likewise), and a filter after it
//!   (`cargo test --test quick golden`) matches a module or function of
//!   that suite;
//! - a *module path* is backticked text such as `mutate::read::lists` or
//!   `crate::review::wire::ResponseOut::write` whose first part is a
//!   top-level module of `src/`: its modules exist, and its first item is
//!   defined in the module (or the folder below it).

use std::collections::BTreeSet;

use regex::Regex;

/// Written by builds and tools (git-ignored): absent from a clone.
pub const GENERATED: &[&str] = &[
    "target",
    "certs/dev",
    "fuzz/target",
    "fuzz/artifacts",
    "fuzz/coverage",
];

/// Stand-ins the docs use for a name the reader picks.
const PLACEHOLDERS: &[&str] = &["NAME", "DIR", "FILE", "PATH", "NS", "N", "X"];

/// What a check needs of the repository: every path (files and folders,
/// relative, `/`-separated) and the text of the files it reads.
pub struct Repo {
    pub paths: BTreeSet<String>,
    pub text: std::collections::BTreeMap<String, String>,
}

impl Repo {
    pub fn exists(&self, path: &str) -> bool {
        let path = path.trim_end_matches('/');
        path.is_empty() || self.paths.contains(path)
    }

    fn read(&self, path: &str) -> &str {
        self.text.get(path).map_or("", String::as_str)
    }

    /// The `.rs` files at or below `dir`.
    fn sources_under<'a>(&'a self, dir: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let prefix = format!("{dir}/");
        self.text
            .keys()
            .filter(move |p| p.starts_with(&prefix) && is(p, "rs"))
            .map(String::as_str)
    }
}

/// Whether `path`'s extension is `ext` (the project's files are named in
/// lower case).
pub fn is(path: &str, ext: &str) -> bool {
    std::path::Path::new(path)
        .extension()
        .is_some_and(|e| e == ext)
}

/// `path`'s folder ("" at the root).
pub fn folder(path: &str) -> &str {
    path.rfind('/').map_or("", |at| &path[..at])
}

fn join(base: &str, rel: &str) -> String {
    let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    for part in rel.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            _ => parts.push(part),
        }
    }
    parts.join("/")
}

fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

/// `text` with the inside of its fenced code blocks blanked (newlines
/// kept, so line numbers hold).
pub fn without_fences(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fenced = false;
    for line in text.split_inclusive('\n') {
        let fence = line.trim_start().starts_with("```");
        if fence || fenced {
            out.extend(line.chars().map(|c| if c == '\n' { c } else { ' ' }));
        } else {
            out.push_str(line);
        }
        if fence {
            fenced = !fenced;
        }
    }
    out
}

/// The anchors of a Markdown document: `<a id="...">` and its headings as
/// GitHub names them.
pub fn anchors(text: &str) -> BTreeSet<String> {
    let id = Regex::new(r#"<a id="([^"]+)""#).unwrap();
    let mut out: BTreeSet<String> = id.captures_iter(text).map(|c| c[1].to_owned()).collect();
    for line in without_fences(text).lines() {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#').trim();
        let slug: String = heading
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        out.insert(slug);
    }
    out
}

/// Why `word` (from backticked text in `doc`) is a path that does not
/// resolve; `None` when it resolves or is not a path.
pub fn path_problem(repo: &Repo, doc: &str, word: &str) -> Option<String> {
    let word = word
        .trim_start_matches('(')
        .trim_end_matches([',', '.', ';', ':', ')', '"', '\'']);
    let word = word.split_once(':').map_or(word, |(p, _)| p);
    let skip = word.contains("://")
        || word.starts_with(['/', '~', '$', '-'])
        || word.contains(['<', '>', '{', '}', '*', '[', ']', '|', '=', '@', '%'])
        || word.contains("...")
        || !word.contains('/');
    if skip {
        return None;
    }
    let (path, anchor) = word
        .split_once('#')
        .map_or((word, None), |(p, a)| (p, Some(a)));
    if path.split('/').any(|part| {
        let stem = part.split('.').next().unwrap_or(part);
        PLACEHOLDERS.contains(&stem)
    }) {
        return None;
    }
    let here = folder(doc);
    let up = path.starts_with("../");
    let path = path.trim_start_matches("./");
    let first = path.split('/').next().unwrap_or(path);
    let bases: Vec<&str> = if up {
        vec![here]
    } else {
        ["", here, "src"]
            .into_iter()
            .filter(|base| repo.exists(&join(base, first)))
            .collect()
    };
    if bases.is_empty() {
        return None; // `opensandbox.io/id`, `linux/amd64`, `./execd`: not a path here
    }
    let full = bases.iter().map(|b| join(b, path)).find(|p| repo.exists(p));
    if bases
        .iter()
        .any(|b| GENERATED.iter().any(|g| join(b, path).starts_with(g)))
    {
        return None;
    }
    match (full, anchor) {
        (None, _) => Some(format!(
            "`{word}` does not exist (a path resolves from the repository root, the document's folder or src/): fix the path, or write a bare name if it is not a file of this repository"
        )),
        (Some(file), Some(anchor)) => anchor_problem(repo, &file, anchor),
        (Some(_), None) => None,
    }
}

fn anchor_problem(repo: &Repo, file: &str, anchor: &str) -> Option<String> {
    if !is(file, "md") || anchors(repo.read(file)).contains(anchor) {
        return None;
    }
    Some(format!(
        "{file} has no anchor `#{anchor}` (an `<a id=\"{anchor}\"></a>` or a heading)"
    ))
}

/// What `judge` finds at each match of `pattern` in `doc`'s prose (code
/// fences left out), given the prose and the match, in the order found.
fn prose_findings(
    repo: &Repo,
    doc: &str,
    pattern: &str,
    mut judge: impl FnMut(&str, &regex::Captures, &mut Vec<String>),
) -> Vec<String> {
    let text = without_fences(repo.read(doc));
    let mut out = Vec::new();
    for found in Regex::new(pattern).unwrap().captures_iter(&text) {
        judge(&text, &found, &mut out);
    }
    out
}

/// Every backticked path of `doc` that does not resolve, as `doc:line: why`.
pub fn path_findings(repo: &Repo, doc: &str) -> Vec<String> {
    prose_findings(repo, doc, r"`([^`]+)`", |text, found, out| {
        let at = found.get(1).unwrap();
        for word in at.as_str().split_whitespace() {
            if let Some(why) = path_problem(repo, doc, word) {
                out.push(format!("{doc}:{}: {why}", line_of(text, at.start())));
            }
        }
    })
}

/// Every Markdown link of `doc` to a file or anchor that is not there.
pub fn link_findings(repo: &Repo, doc: &str) -> Vec<String> {
    prose_findings(repo, doc, r"\]\(([^)\s]+)\)", |text, found, out| {
        let target = &found[1];
        if target.contains("://") || target.starts_with("mailto:") {
            return;
        }
        let at = line_of(text, found.get(0).unwrap().start());
        let (path, anchor) = target
            .split_once('#')
            .map_or((target, None), |(p, a)| (p, Some(a)));
        let file = if path.is_empty() {
            doc.to_owned()
        } else {
            join(folder(doc), path)
        };
        let why = if repo.exists(&file) {
            anchor.and_then(|a| anchor_problem(repo, &file, a))
        } else {
            Some(format!(
                "the link `{target}` goes to {file}, which does not exist"
            ))
        };
        out.extend(why.map(|why| format!("{doc}:{at}: {why}")));
    })
}

/// The names `cargo test --test NAME` takes: `Cargo.toml`'s `[[test]]`s.
fn targets(repo: &Repo, kind: &str) -> BTreeSet<String> {
    let manifest = repo.read("Cargo.toml");
    let mut out = BTreeSet::new();
    let name = Regex::new(r#"(?m)^name = "([^"]+)""#).unwrap();
    for section in manifest.split(&format!("[[{kind}]]")).skip(1) {
        if let Some(found) = name.captures(section.split("\n[").next().unwrap_or("")) {
            out.insert(found[1].to_owned());
        }
    }
    out
}

/// The module and function names of the suite whose `[[test]]` is `name`.
fn suite_names(repo: &Repo, name: &str) -> BTreeSet<String> {
    let dir = format!("tests/{name}");
    let item = Regex::new(r"\b(?:fn|mod)\s+([a-z_][a-z0-9_]*)").unwrap();
    let mut out = BTreeSet::new();
    for file in repo.sources_under(&dir) {
        let stem = file
            .rsplit('/')
            .next()
            .unwrap_or(file)
            .trim_end_matches(".rs");
        out.insert(stem.to_owned());
        out.extend(item.captures_iter(repo.read(file)).map(|c| c[1].to_owned()));
    }
    out
}

/// Every `cargo test --test X`, `--bench X` or `--example X` in `doc`
/// (code blocks included) whose target or filter is not there.
pub fn cargo_findings(repo: &Repo, doc: &str) -> Vec<String> {
    let text = repo.read(doc);
    let token = Regex::new(r"[^\s`]+|`").unwrap();
    let tokens: Vec<(usize, &str)> = token
        .find_iter(text)
        .map(|m| (m.start(), m.as_str()))
        .collect();
    let filter = Regex::new(r"^[a-z_][a-z0-9_:]*$").unwrap();
    let mut out = Vec::new();
    for (i, &(at, word)) in tokens.iter().enumerate() {
        if word != "cargo" {
            continue;
        }
        let args: Vec<&str> = tokens[i + 1..]
            .iter()
            .map(|&(_, t)| t)
            .take_while(|t| {
                !matches!(*t, "`" | "cargo" | "&&" | "||" | "|" | ";") && !t.starts_with('#')
            })
            .collect();
        let line = line_of(text, at);
        let mut problem =
            |why: String| out.push(format!("{doc}:{line}: `cargo {}`: {why}", args.join(" ")));
        for (j, pair) in args.windows(2).enumerate() {
            let name = pair[1];
            if name.chars().all(|c| c.is_ascii_uppercase()) {
                continue; // `cargo test --test X`: a placeholder
            }
            match pair[0] {
                "--test" => {
                    let known = targets(repo, "test");
                    if !known.contains(name) {
                        problem(format!(
                            "no test target `{name}` (Cargo.toml's [[test]]s: {known:?})"
                        ));
                        continue;
                    }
                    let names = suite_names(repo, name);
                    for f in args[j + 2..].iter().filter(|a| filter.is_match(a)) {
                        if !names
                            .iter()
                            .any(|n| n.contains(f) || f.contains(n.as_str()) && f.contains("::"))
                        {
                            problem(format!(
                                "the filter `{f}` matches no module or function of tests/{name}/"
                            ));
                        }
                    }
                }
                "--bench" if !targets(repo, "bench").contains(name) => {
                    problem(format!(
                        "no bench target `{name}` (Cargo.toml's [[bench]]s)"
                    ));
                }
                "--example"
                    if !["examples", "fuzz/examples"].iter().any(|d| {
                        repo.exists(&format!("{d}/{name}.rs"))
                            || repo.exists(&format!("{d}/{name}/main.rs"))
                    }) =>
                {
                    problem(format!("no example `{name}` (examples/ or fuzz/examples/)"));
                }
                _ => {}
            }
        }
    }
    out
}

/// The file of the module `segments` names, if it is one.
fn module_file(repo: &Repo, segments: &[&str]) -> Option<String> {
    let base = format!("src/{}", segments.join("/"));
    [format!("{base}.rs"), format!("{base}/mod.rs")]
        .into_iter()
        .find(|f| repo.exists(f))
}

/// Where `item` is defined in `src/`, as module paths, for the message:
/// modules of that name first, else items; those under `within` (the
/// module the text named) when there are any.
fn defined_at(repo: &Repo, item: &str, within: &str) -> Vec<String> {
    let defined = definition(item);
    let named = [format!("/{item}.rs"), format!("/{item}/mod.rs")];
    let module_of = |f: &str| {
        let module = f.trim_start_matches("src/").trim_end_matches(".rs");
        module.trim_end_matches("/mod").replace('/', "::")
    };
    let modules: BTreeSet<String> = repo
        .sources_under("src")
        .filter(|f| named.iter().any(|n| f.ends_with(n.as_str())))
        .map(module_of)
        .collect();
    let found: BTreeSet<String> = if modules.is_empty() {
        repo.sources_under("src")
            .filter(|f| defined.is_match(repo.read(f)))
            .map(|f| format!("{}::{item}", module_of(f)))
            .collect()
    } else {
        modules
    };
    let near: Vec<&String> = found
        .iter()
        .filter(|m| m.starts_with(&format!("{within}::")))
        .collect();
    let shown: Vec<&String> = if near.is_empty() {
        found.iter().collect()
    } else {
        near
    };
    shown.iter().map(|m| format!("`{m}`")).collect()
}

fn definition(item: &str) -> Regex {
    Regex::new(&format!(
        r"\b(?:fn|struct|enum|const|static|type|trait|mod|union|macro_rules!)\s+{item}\b"
    ))
    .unwrap()
}

/// Why the module path `path` does not resolve, or `None`. Its modules are
/// files of `src/`; its first item is defined in the last module's file or
/// re-exported by it (`pub use`); the items after it (a method, a variant)
/// appear in that module's folder or where the first item is defined.
pub fn module_problem(repo: &Repo, path: &str) -> Option<String> {
    let explicit = path.starts_with("crate::") || path.starts_with("sandbox_webhook::");
    let segments: Vec<&str> = path.split("::").skip(usize::from(explicit)).collect();
    module_file(repo, &segments[..1]).or_else(|| explicit.then(String::new))?;
    let mut depth = 0;
    while depth < segments.len() && module_file(repo, &segments[..=depth]).is_some() {
        depth += 1;
    }
    let rest = &segments[depth..];
    let first = *rest.first()?;
    let file = module_file(repo, &segments[..depth]).unwrap_or_else(|| "src/lib.rs".to_owned());
    let own = repo.read(&file);
    let reexport = Regex::new(&format!(
        r"\bpub(?:\([^)]*\))?\s+use\s+[^;]*\b{first}\b[^;]*;"
    ))
    .unwrap();
    let defined = definition(first);
    let missing = if defined.is_match(own) || reexport.is_match(own) {
        let dir = folder(&file).to_owned();
        let scope: Vec<&str> = std::iter::once(file.as_str())
            .chain(repo.sources_under(&dir))
            .chain(
                repo.sources_under("src")
                    .filter(|f| defined.is_match(repo.read(f))),
            )
            .collect();
        let word = |w: &str| Regex::new(&format!(r"\b{w}\b")).unwrap();
        rest[1..]
            .iter()
            .find(|w| !scope.iter().any(|f| word(w).is_match(repo.read(f))))
            .copied()
    } else {
        Some(first)
    };
    let what = missing?;
    let now = defined_at(repo, what, &segments[..depth].join("::"));
    let hint = if now.is_empty() {
        String::new()
    } else {
        format!(" (it is at {})", now.join(", "))
    };
    Some(format!(
        "`{path}`: {file} neither defines nor re-exports `{what}`{hint}: write the path as it is now"
    ))
}

/// Every backticked module path in `text` (the lines `keep` accepts) that
/// does not resolve, as `name:line: why`.
///
/// Outside `src/`, `crate::` is another crate (a test suite, the fuzz
/// crate), so only `sandbox_webhook::` and unprefixed paths are ours there.
pub fn module_findings(
    repo: &Repo,
    name: &str,
    text: &str,
    keep: impl Fn(&str) -> bool,
) -> Vec<String> {
    let ours = name.starts_with("src/") || is(name, "md");
    let path = Regex::new(
        r"`((?:crate::|sandbox_webhook::)?[a-z_][a-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)+)(?:\(\))?`",
    )
    .unwrap();
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if !keep(line) {
            continue;
        }
        for found in path.captures_iter(line) {
            if !ours && found[1].starts_with("crate::") {
                continue;
            }
            if let Some(why) = module_problem(repo, &found[1]) {
                out.push(format!("{name}:{}: {why}", n + 1));
            }
        }
    }
    out
}
