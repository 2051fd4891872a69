//! No module leans on one that leans back on it (ARCHITECTURE.md): in every crate of
//! the workspace, the files' `crate::` and `super::` paths form no circle. A circle is
//! reported with the files in it, so whoever adds one sees which import closed it.
//! Test modules (`#[cfg(test)] mod tests`) are left out: they may look anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without comments and without its test module.
fn code(p: &Path) -> String {
    let text = std::fs::read_to_string(p).unwrap();
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths a `use` tree names, braces expanded: `crate::{a::B, c::{D, E}}` gives
/// `crate::a::B`, `crate::c::D`, `crate::c::E`.
fn expand(prefix: &str, tree: &str, out: &mut Vec<String>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head = tree[..open].trim_end_matches("::");
        let close = tree.rfind('}').filter(|c| *c > open).unwrap_or(tree.len());
        let inner = &tree[open + 1..close];
        let base = if head.is_empty() {
            prefix.to_string()
        } else if prefix.is_empty() {
            head.to_string()
        } else {
            format!("{prefix}::{head}")
        };
        let (mut depth, mut start) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&base, &inner[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(&base, &inner[start..], out);
    } else if !tree.is_empty() {
        let tree = tree.split(" as ").next().unwrap().trim();
        out.push(if prefix.is_empty() {
            tree.to_string()
        } else {
            format!("{prefix}::{tree}")
        });
    }
}

/// Every `crate::...` and `super::...` path in the code.
fn paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let lines: Vec<&str> = code.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim_start();
        let l = l
            .strip_prefix("pub(crate) ")
            .or_else(|| l.strip_prefix("pub "))
            .unwrap_or(l);
        if let Some(u) = l.strip_prefix("use ") {
            // A use statement, to its semicolon.
            let mut stmt = u.to_string();
            while !stmt.contains(';') && i + 1 < lines.len() {
                i += 1;
                stmt.push_str(lines[i]);
            }
            expand("", stmt.split(';').next().unwrap(), &mut out);
        }
        i += 1;
    }
    for root in ["crate::", "super::"] {
        let mut at = 0;
        while let Some(i) = code[at..].find(root) {
            let s = at + i;
            let tail: String = code[s..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            out.push(tail.trim_end_matches(':').to_string());
            at = s + root.len();
        }
    }
    out.retain(|p| p.starts_with("crate::") || p.starts_with("super::"));
    out
}

/// The directory a module file's submodules live in: `src/local.rs` -> `src/local`,
/// `src/console/mod.rs` -> `src/console`, the crate root's -> `src`.
fn module_dir(file: &Path, src: &Path) -> PathBuf {
    let stem = file.file_stem().unwrap().to_str().unwrap();
    if file.parent() == Some(src) && (stem == "lib" || stem == "main") || stem == "mod" {
        file.parent().unwrap().to_path_buf()
    } else {
        file.with_extension("")
    }
}

/// The file of the module `dir` belongs to (its parent module's file).
fn module_file(dir: &Path, src: &Path) -> Option<PathBuf> {
    if dir == src {
        return None;
    }
    let rs = dir.with_extension("rs");
    if rs.exists() {
        return Some(rs);
    }
    let m = dir.join("mod.rs");
    m.exists().then_some(m)
}

/// The deepest module file a path reaches from a directory.
fn resolve(mut dir: PathBuf, segments: &[&str]) -> Option<PathBuf> {
    let mut found = None;
    for s in segments {
        let rs = dir.join(format!("{s}.rs"));
        let m = dir.join(s).join("mod.rs");
        if rs.exists() {
            found = Some(rs);
        } else if m.exists() {
            found = Some(m);
        } else {
            break;
        }
        dir = dir.join(s);
    }
    found
}

/// The crate root's re-exports: item name -> the module it comes from.
fn reexports(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut ps = Vec::new();
    for line in code(root).lines() {
        if let Some(u) = line.trim().strip_prefix("pub use ") {
            expand("", u.trim_end_matches(';'), &mut ps);
        }
    }
    for p in ps {
        let segs: Vec<&str> = p.split("::").collect();
        if segs.len() >= 2 {
            out.insert(segs[segs.len() - 1].to_string(), segs[0].to_string());
        }
    }
    out
}

/// The crate's module graph: file -> the files it uses.
fn graph(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mut all = Vec::new();
    files(src, &mut all);
    let root = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .find(|p| p.exists())
        .unwrap();
    let again = reexports(&root);
    let mut g = BTreeMap::new();
    for f in &all {
        if f.parent() == Some(src) && (f.ends_with("lib.rs") || f.ends_with("main.rs")) {
            continue;
        }
        let mut deps = BTreeSet::new();
        for p in paths(&code(f)) {
            let segs: Vec<&str> = p.split("::").collect();
            let (dir, rest) = if segs[0] == "crate" {
                (src.to_path_buf(), &segs[1..])
            } else {
                // super:: from this file's module: its parent's directory (and up).
                let mut dir = module_dir(f, src);
                let mut rest = &segs[..];
                while rest.first() == Some(&"super") {
                    dir = dir.parent().unwrap().to_path_buf();
                    rest = &rest[1..];
                }
                (dir, rest)
            };
            let target = resolve(dir.clone(), rest).or_else(|| {
                if dir == src {
                    // `crate::Item`, an item the crate root re-exports.
                    rest.first()
                        .and_then(|i| again.get(*i))
                        .and_then(|m| resolve(src.to_path_buf(), &[m.as_str()]))
                } else {
                    // `super::Item`, an item of the parent module's own file.
                    module_file(&dir, src)
                }
            });
            if let Some(t) = target.filter(|t| t != f) {
                deps.insert(t);
            }
        }
        g.insert(f.clone(), deps);
    }
    g
}

/// The circles of a graph (strongly connected parts of more than one file).
fn circles(g: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    // Kosaraju: order by finish time, then walk the reversed graph.
    fn visit<'a>(
        n: &'a PathBuf,
        g: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        seen: &mut BTreeSet<&'a PathBuf>,
        order: &mut Vec<&'a PathBuf>,
    ) {
        if !seen.insert(n) {
            return;
        }
        for m in g.get(n).into_iter().flatten() {
            visit(m, g, seen, order);
        }
        order.push(n);
    }
    let mut seen = BTreeSet::new();
    let mut order = Vec::new();
    for n in g.keys() {
        visit(n, g, &mut seen, &mut order);
    }
    let mut back: BTreeMap<&PathBuf, Vec<&PathBuf>> = BTreeMap::new();
    for (n, ms) in g {
        for m in ms {
            back.entry(m).or_default().push(n);
        }
    }
    let mut done: BTreeSet<&PathBuf> = BTreeSet::new();
    let mut out = Vec::new();
    for n in order.into_iter().rev() {
        if done.contains(n) {
            continue;
        }
        let mut part = Vec::new();
        let mut stack = vec![n];
        done.insert(n);
        while let Some(x) = stack.pop() {
            part.push(x.clone());
            for y in back.get(x).into_iter().flatten() {
                if done.insert(y) {
                    stack.push(y);
                }
            }
        }
        if part.len() > 1 {
            part.sort();
            out.push(part);
        }
    }
    out
}

#[test]
fn no_crate_has_a_module_circle() {
    let top = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for krate in [
        "src",
        "scheduler/src",
        "demo/src",
        "local/src",
        "kube/src",
        "agent/src",
        "widgets/src",
    ] {
        let src = top.join(krate);
        let g = graph(&src);
        assert!(!g.is_empty(), "{krate}: no module files read");
        for c in circles(&g) {
            let names: Vec<String> = c
                .iter()
                .map(|p| p.strip_prefix(top).unwrap().display().to_string())
                .collect();
            found.push(names.join(" <-> "));
        }
    }
    assert!(found.is_empty(), "module circles:\n{}", found.join("\n"));
}

#[test]
fn the_checker_sees_a_circle() {
    // Two files that import each other, one through a braced use and one through the
    // crate root's re-export, and a third that only looks at them.
    let dir = std::env::temp_dir().join(format!("maar-modules-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("c")).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "pub mod a;\npub mod b;\npub mod c;\npub use b::Bee;\n",
    )
    .unwrap();
    std::fs::write(src.join("a.rs"), "use crate::{model::X, Bee};\n").unwrap();
    std::fs::write(
        src.join("b.rs"),
        "pub struct Bee;\nfn f() { crate::a::g() }\n",
    )
    .unwrap();
    std::fs::write(src.join("c.rs"), "pub mod d;\nuse crate::a;\n").unwrap();
    std::fs::write(
        src.join("c").join("d.rs"),
        "use super::super::b::Bee;\n// crate::c::d\n",
    )
    .unwrap();
    std::fs::write(src.join("model.rs"), "pub struct X;\n").unwrap();
    let g = graph(&src);
    let c = circles(&g);
    assert_eq!(c, vec![vec![src.join("a.rs"), src.join("b.rs")]], "{g:?}");
    assert!(
        g[&src.join("c").join("d.rs")].contains(&src.join("b.rs")),
        "{g:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
