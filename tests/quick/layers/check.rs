//! Where the written paths lead, and what of that breaks the layers.

use std::collections::{BTreeMap, BTreeSet};

use super::read::{Module, Written, paths_of};

/// The module a written path names, if it is in this crate.
fn resolve(w: &Written, modules: &BTreeSet<Module>) -> Option<Module> {
    let (first, rest) = w.path.split_first()?;
    let mut base = match first.as_str() {
        "crate" | "$crate" => Vec::new(),
        "self" => w.scope.clone(),
        "super" => w.scope[..w.scope.len().checked_sub(1)?].to_vec(),
        _ => {
            let mut child = w.scope.clone();
            child.push(first.clone());
            modules.contains(&child).then_some(child)?
        }
    };
    for seg in rest {
        match seg.as_str() {
            "super" => {
                base.pop();
            }
            "self" => {}
            _ => base.push(seg.clone()),
        }
    }
    Some(base)
}

fn module_of(path: &str) -> Module {
    let mut m: Module = path
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if matches!(m.last().map(String::as_str), Some("mod" | "lib")) {
        m.pop();
    }
    m
}

/// Every import that runs upward, every module missing from a listed
/// directory, and every loop, as sentences. `files` are (path under src/,
/// source).
pub(crate) fn check(files: &[(String, String)], layers: &[(&str, &[&str])]) -> Vec<String> {
    let file_modules: BTreeSet<Module> = files.iter().map(|(p, _)| module_of(p)).collect();
    let mut modules = file_modules.clone();
    let mut written = Vec::new();
    for (path, src) in files {
        let (w, inline) = paths_of(&module_of(path), src);
        modules.extend(inline);
        written.push((module_of(path), w));
    }
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (from, ws) in &written {
        for w in ws {
            let Some(mut to) = resolve(w, &modules) else {
                continue;
            };
            while !file_modules.contains(&to) && to.pop().is_some() {}
            if &to != from {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    let name = |m: &[String]| {
        if m.is_empty() {
            "lib".to_owned()
        } else {
            m.join("::")
        }
    };
    let order: BTreeMap<&str, Vec<Vec<&str>>> = layers
        .iter()
        .map(|(dir, ls)| (*dir, ls.iter().map(|l| l.split(' ').collect()).collect()))
        .collect();
    let rank = |dir: &[String], m: &str| {
        order
            .get(dir.join("::").as_str())
            .map(|ls| ls.iter().position(|l| l.contains(&m)))
    };
    let mut unlisted = BTreeSet::new();
    for m in &file_modules {
        for cut in 0..=m.len() {
            let child = m.get(cut).map_or("mod", String::as_str);
            if child != "tests" && rank(&m[..cut], child) == Some(None) {
                let what = if cut == m.len() {
                    format!("{}'s mod.rs", name(m))
                } else {
                    name(&m[..=cut])
                };
                unlisted.insert(format!(
                    "{what} is not in the layers of {}",
                    name(&m[..cut])
                ));
            }
        }
    }
    for (dir, ls) in layers {
        for m in ls.iter().flat_map(|l| l.split(' ')).filter(|m| *m != "mod") {
            let module: Module = dir
                .split("::")
                .chain([m])
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            if !file_modules.contains(&module) {
                unlisted.insert(format!(
                    "{} is listed in the layers but is no module",
                    name(&module)
                ));
            }
        }
    }
    let mut found: Vec<String> = unlisted.into_iter().collect();
    for (from, tos) in &edges {
        for to in tos {
            let cut = from.iter().zip(to).take_while(|(a, b)| a == b).count();
            let (a, b) = (
                from.get(cut).map_or("mod", String::as_str),
                to.get(cut).map_or("mod", String::as_str),
            );
            if a == "tests" {
                continue;
            }
            if let (Some(Some(ra)), Some(Some(rb))) = (rank(&from[..cut], a), rank(&from[..cut], b))
                && rb >= ra
            {
                found.push(format!(
                    "{} imports {}, which is not below it",
                    name(from),
                    name(to)
                ));
            }
        }
    }
    let names = |ms: &[Module], sep: &str| ms.iter().map(|m| name(m)).collect::<Vec<_>>().join(sep);
    found.extend(loops(&edges).iter().map(|(group, path)| {
        format!(
            "{} import each other around a loop, e.g. {}",
            names(group, ", "),
            names(path, " -> ")
        )
    }));
    found
}

/// Each group of files that reach each other through imports: its files,
/// and the shortest loop through the first of them.
fn loops(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<(Vec<Module>, Vec<Module>)> {
    // The shortest import path from `from` to each file it reaches, as each
    // file's predecessor on it.
    let paths = |from: &Module| {
        let mut before: BTreeMap<Module, Module> = BTreeMap::new();
        let mut todo = std::collections::VecDeque::from([from.clone()]);
        while let Some(m) = todo.pop_front() {
            for next in edges.get(&m).into_iter().flatten() {
                if !before.contains_key(next) {
                    before.insert(next.clone(), m.clone());
                    todo.push_back(next.clone());
                }
            }
        }
        before
    };
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for start in edges.keys() {
        let before = paths(start);
        if done.contains(start) || !before.contains_key(start) {
            continue;
        }
        let group: Vec<Module> = before
            .keys()
            .filter(|m| paths(m).contains_key(start))
            .cloned()
            .collect();
        let mut path = vec![start.clone()];
        while let Some(prev) = before
            .get(path.last().expect("not empty"))
            .filter(|p| *p != start)
        {
            path.push(prev.clone());
        }
        path.push(start.clone());
        path.reverse();
        done.extend(group.iter().cloned());
        out.push((group, path));
    }
    out
}
