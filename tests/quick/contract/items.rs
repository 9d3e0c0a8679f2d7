//! Which lines of a file are on a test, where a citation counts:
//! - Rust: a test function (`#[test]`, `#[tokio::test]`, a `proptest!`
//!   case, or a scenario of a suite with its own main) from the comments
//!   and attributes right above it to the end of its body;
//! - a fixture (`.yaml`, `.yml`): its first comment, which is the case's;
//! - a chart check in shell: a comment right above the line that runs it
//!   (not the file's opening comment);
//! - a chart check in Python: the docstring of a `def`, or a comment right
//!   above one.
//!
//! A file-level list (`//!`, a script's opening comment, a module
//! docstring) and a helper's doc are not on a test.

use std::collections::BTreeSet;

use regex::Regex;

/// Whether line `i` (from 0) of `text` is on a test.
pub fn on_test(path: &str, text: &str, scenarios: &BTreeSet<String>) -> impl Fn(usize) -> bool {
    let lines: Vec<&str> = text.lines().collect();
    let marked = match path.rsplit('.').next() {
        Some("rs") => rust(&lines, scenarios),
        Some("yaml" | "yml") => fixture(&lines),
        Some("sh") => shell(&lines),
        Some("py") => python(&lines),
        _ => vec![false; lines.len()],
    };
    move |i| marked.get(i).copied().unwrap_or(false)
}

fn rust(lines: &[&str], scenarios: &BTreeSet<String>) -> Vec<bool> {
    let signature =
        Regex::new(r"^(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?fn\s+([a-z_][a-z0-9_]*)").unwrap();
    let test_attribute = Regex::new(r"^#\[(?:[a-z_]+::)*test\b").unwrap();
    let mut marked = vec![false; lines.len()];
    for (i, line) in lines.iter().enumerate() {
        let Some(found) = signature.captures(line.trim_start()) else {
            continue;
        };
        // The comments and attributes right above the function.
        let mut top = i;
        let mut is_test = scenarios.contains(&found[1]);
        while top > 0 {
            let above = lines[top - 1].trim_start();
            let attribute =
                above.starts_with("#[") || above.starts_with(')') || above.ends_with(',');
            if above.starts_with("//") && !above.starts_with("//!") || attribute {
                is_test |= test_attribute.is_match(above);
                top -= 1;
            } else {
                break;
            }
        }
        if is_test {
            let end = body_end(lines, i);
            marked[top..=end].iter_mut().for_each(|m| *m = true);
        }
    }
    marked
}

/// The last line of the body of the function whose signature starts at
/// line `from`: braces counted outside comments, strings and characters.
fn body_end(lines: &[&str], from: usize) -> usize {
    let mut depth = 0usize;
    let mut opened = false;
    let mut in_string = false;
    for (i, line) in lines.iter().enumerate().skip(from) {
        let chars: Vec<char> = line.chars().collect();
        let mut j = 0;
        while j < chars.len() {
            let c = chars[j];
            if in_string {
                if c == '\\' {
                    j += 1;
                } else if c == '"' {
                    in_string = false;
                }
            } else if c == '/' && chars.get(j + 1) == Some(&'/') {
                break;
            } else if c == '"' {
                in_string = true;
            } else if c == '\'' && chars.get(j + 2) == Some(&'\'') {
                j += 2;
            } else if c == '{' {
                depth += 1;
                opened = true;
            } else if c == '}' {
                depth = depth.saturating_sub(1);
                if opened && depth == 0 {
                    return i;
                }
            } else if c == ';' && !opened {
                return i;
            }
            j += 1;
        }
    }
    lines.len().saturating_sub(1)
}

fn fixture(lines: &[&str]) -> Vec<bool> {
    let first = lines
        .iter()
        .take_while(|l| l.trim_start().starts_with('#'))
        .count();
    (0..lines.len()).map(|i| i < first).collect()
}

fn shell(lines: &[&str]) -> Vec<bool> {
    let mut marked = vec![false; lines.len()];
    // The opening comment (after the `#!` line) is the file's, not a check's.
    let mut i = usize::from(lines.first().is_some_and(|l| l.starts_with("#!")));
    while i < lines.len() && lines[i].trim_start().starts_with('#') {
        i += 1;
    }
    while i < lines.len() {
        if !lines[i].trim_start().starts_with('#') {
            i += 1;
            continue;
        }
        let start = i;
        while i < lines.len() && lines[i].trim_start().starts_with('#') {
            i += 1;
        }
        if lines.get(i).is_some_and(|l| !l.trim().is_empty()) {
            marked[start..i].iter_mut().for_each(|m| *m = true);
        }
    }
    marked
}

fn python(lines: &[&str]) -> Vec<bool> {
    let mut marked = vec![false; lines.len()];
    for (i, line) in lines.iter().enumerate() {
        if !line.trim_start().starts_with("def ") {
            continue;
        }
        // Comments right above.
        let mut top = i;
        while top > 0 && lines[top - 1].trim_start().starts_with('#') {
            top -= 1;
        }
        marked[top..=i].iter_mut().for_each(|m| *m = true);
        // The signature, then a docstring if one comes first.
        let mut j = i;
        while j < lines.len() && !lines[j].trim_end().ends_with(':') {
            j += 1;
        }
        let Some(next) = lines.get(j + 1) else {
            continue;
        };
        let quote = ["\"\"\"", "'''"]
            .into_iter()
            .find(|q| next.trim_start().starts_with(q));
        let Some(quote) = quote else { continue };
        let mut end = j + 1;
        let opened_and_closed = next.trim_start()[3..].contains(quote);
        if !opened_and_closed {
            end += 1;
            while end < lines.len() && !lines[end].contains(quote) {
                end += 1;
            }
        }
        let end = end.min(lines.len() - 1);
        marked[i..=end].iter_mut().for_each(|m| *m = true);
    }
    marked
}
