//! Reading the paths a Rust file writes: a small lexer (comments, strings
//! and character literals dropped), `use` trees and inline paths.

pub(crate) type Module = Vec<String>;

#[derive(Debug, PartialEq)]
enum Tok {
    Ident(String),
    Colons,
    Open,
    Close,
    Comma,
    Semi,
    Star,
    Other,
}

/// Rust source as the tokens that matter for paths: comments, strings and
/// character literals are dropped; lifetimes lex as identifiers.
fn lex(src: &str) -> Vec<Tok> {
    let s: Vec<char> = src.chars().collect();
    let at = |i: usize| s.get(i).copied().unwrap_or('\0');
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            loop {
                if at(i) == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if at(i) == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else if i >= s.len() {
                    break;
                } else {
                    i += 1;
                }
            }
        } else if c == '"' {
            i += 1;
            while i < s.len() && s[i] != '"' {
                i += if s[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if (c == 'r' || c == 'b')
            && matches!((at(i + 1), at(i + 2)), ('"' | '#', _) | ('r', '"' | '#'))
        {
            // r"…", r#"…"#, b"…", br#"…"#: count the hashes, find the quote
            // followed by as many.
            i += if at(i + 1) == 'r' { 2 } else { 1 };
            let mut hashes = 0;
            while at(i) == '#' {
                hashes += 1;
                i += 1;
            }
            let raw = c == 'r' || hashes > 0 || at(i - hashes - 1) == 'r';
            i += 1;
            while i < s.len() {
                if s[i] == '\\' && !raw {
                    i += 2;
                } else if s[i] == '"' && (0..hashes).all(|h| at(i + 1 + h) == '#') {
                    i += 1 + hashes;
                    break;
                } else {
                    i += 1;
                }
            }
        } else if c == '\'' {
            if at(i + 1) == '\\' {
                i += 2;
                while i < s.len() && s[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
            }
        } else if c.is_alphanumeric() || c == '_' || c == '$' {
            let start = i;
            i += 1;
            while i < s.len() && (s[i].is_alphanumeric() || s[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(s[start..i].iter().collect()));
        } else {
            out.push(match c {
                ':' if at(i + 1) == ':' => {
                    i += 1;
                    Tok::Colons
                }
                '{' => Tok::Open,
                '}' => Tok::Close,
                ',' => Tok::Comma,
                ';' => Tok::Semi,
                '*' => Tok::Star,
                _ => Tok::Other,
            });
            i += 1;
        }
    }
    out
}

/// A path as written, with the module it was written in (the file's module
/// plus any inline `mod name { … }` around it).
pub(crate) struct Written {
    pub scope: Module,
    pub path: Vec<String>,
}

/// The paths of a `use` tree starting at `toks[i]`, each prefixed with
/// `prefix`; returns the index after the tree.
fn use_tree(toks: &[Tok], mut i: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix;
    while let Some(t) = toks.get(i) {
        match t {
            Tok::Colons | Tok::Star | Tok::Other => i += 1,
            Tok::Ident(s) if s == "as" => i += 2,
            Tok::Ident(s) => {
                path.push(s.clone());
                i += 1;
            }
            Tok::Open => {
                i += 1;
                while let Some(t) = toks.get(i) {
                    match t {
                        Tok::Close => return i + 1,
                        Tok::Comma => i += 1,
                        _ => i = use_tree(toks, i, path.clone(), out),
                    }
                }
                return i;
            }
            Tok::Comma | Tok::Close | Tok::Semi => break,
        }
    }
    out.push(path);
    i
}

/// The paths one file writes, and the inline modules it declares.
pub(crate) fn paths_of(file: &Module, src: &str) -> (Vec<Written>, Vec<Module>) {
    let toks = lex(src);
    let (mut written, mut inline) = (Vec::new(), Vec::new());
    let mut scope = file.clone();
    // The brace depth at which each open inline module closes.
    let mut closes = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    let ident = |i: usize| match toks.get(i) {
        Some(Tok::Ident(s)) => Some(s.as_str()),
        _ => None,
    };
    while i < toks.len() {
        match &toks[i] {
            Tok::Open => depth += 1,
            Tok::Close => {
                depth -= 1;
                if closes.last() == Some(&depth) {
                    closes.pop();
                    scope.pop();
                }
            }
            Tok::Ident(s) if s == "mod" && toks.get(i + 2) == Some(&Tok::Open) => {
                if let Some(name) = ident(i + 1) {
                    scope.push(name.to_owned());
                    inline.push(scope.clone());
                    closes.push(depth);
                    depth += 1;
                    i += 3;
                    continue;
                }
            }
            Tok::Ident(s) if s == "use" => {
                let mut paths = Vec::new();
                i = use_tree(&toks, i + 1, Vec::new(), &mut paths);
                written.extend(paths.into_iter().map(|path| Written {
                    scope: scope.clone(),
                    path,
                }));
                continue;
            }
            Tok::Ident(s)
                if toks.get(i + 1) == Some(&Tok::Colons)
                    && (i == 0 || toks[i - 1] != Tok::Colons) =>
            {
                let mut path = vec![s.clone()];
                let mut j = i + 1;
                while toks.get(j) == Some(&Tok::Colons) {
                    let Some(next) = ident(j + 1) else { break };
                    path.push(next.to_owned());
                    j += 2;
                }
                written.push(Written {
                    scope: scope.clone(),
                    path,
                });
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    (written, inline)
}
