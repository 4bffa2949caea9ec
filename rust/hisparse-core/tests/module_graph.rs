//! The workspace's module graphs: no import cycle between the modules of any
//! crate (the core, `hisparse-check` and `hisparse-py`, read from their
//! `src/` beside this crate; issue 24), and in the core no engine-neutral
//! module (everything outside `engines/`) that names an engine module
//! (docs/layout.md, issue 16). A crate root (`lib.rs`) that its modules name
//! is a module like the others: helpers they share live in a module of their
//! own. The Python package's twin is tests/test_module_graph.py. Data flows one way, read -> resolve ->
//! validate -> advise -> report, and a cycle is the first sign it no longer
//! does.
//!
//! Every `src/**/*.rs` is read as text: a file is a module (`a/mod.rs` is `a`,
//! `a/b.rs` is `a::b`, `lib.rs` the crate root); its edges are the modules its
//! code names: `use` trees (`crate::`, `super::`, `self::`, a declared child),
//! and the same paths written in code (`crate::a::b::f()`). Comments and
//! string literals are skipped; an inline `mod tests { use super::*; }` is
//! part of its file. A path names the longest module prefix it has, so
//! `crate::pool::HostKVPool` (a re-export) is an edge to `pool`, the file that
//! re-exports it. `mod x;` declarations are not edges (a parent owning a file
//! is not a dependency); `pub use x::Y` is.

mod rust_lex;

use rust_lex::{lex, Tok};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One module's source: its path (`["engines", "vllm_0_33", "resolve"]`) and text.
struct Source {
    module: Vec<String>,
    text: String,
}

/// Module -> (module it names -> first line naming it).
type Graph = BTreeMap<String, BTreeMap<String, usize>>;

fn name(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_string()
    } else {
        module.join("::")
    }
}

/// The module path of a file relative to `src/`.
fn module_of(rel: &str) -> Vec<String> {
    let rel = rel.strip_suffix(".rs").expect("a .rs file");
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The paths a `use` tree spells out: `a::{b, c::{self, d}}` gives
/// `a::b`, `a::c`, `a::c::d` (`self` ends a path; `*` and `as x` do not add a segment).
fn use_paths(toks: &[Tok]) -> Vec<Vec<String>> {
    fn tree(toks: &[Tok], i: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let mut path = prefix.to_vec();
        while *i < toks.len() {
            match &toks[*i] {
                Tok::Ident(s) if s == "as" => {
                    *i += 2; // `as name`
                    break;
                }
                Tok::Ident(s) if s == "self" && !path.is_empty() => *i += 1,
                Tok::Ident(s) => {
                    path.push(s.clone());
                    *i += 1;
                }
                Tok::Colons => *i += 1,
                Tok::Star => {
                    *i += 1;
                    break;
                }
                Tok::Open => {
                    *i += 1;
                    loop {
                        match toks.get(*i) {
                            None => return,
                            Some(Tok::Close) => {
                                *i += 1;
                                return;
                            }
                            Some(Tok::Comma) => *i += 1,
                            Some(_) => tree(toks, i, &path, out),
                        }
                    }
                }
                _ => break,
            }
        }
        out.push(path);
    }
    let mut out = Vec::new();
    let mut i = 0;
    tree(toks, &mut i, &[], &mut out);
    out
}

/// Every module each module names, with the first line naming it.
fn graph(sources: &[Source]) -> Graph {
    let known: BTreeSet<Vec<String>> = sources.iter().map(|s| s.module.clone()).collect();
    let mut g = Graph::new();
    for src in sources {
        let m = &src.module;
        let toks = lex(&src.text);
        let kinds: Vec<Tok> = toks.iter().map(|(t, _)| t.clone()).collect();
        let ident = |i: usize| match kinds.get(i) {
            Some(Tok::Ident(s)) => Some(s.as_str()),
            _ => None,
        };
        // Child modules this file declares (`mod x;`): a bare `x::` names them.
        let children: BTreeSet<String> = (0..kinds.len())
            .filter(|&i| ident(i) == Some("mod") && kinds.get(i + 2) == Some(&Tok::Semi))
            .filter_map(|i| ident(i + 1).map(str::to_string))
            .collect();
        let edges = g.entry(name(m)).or_default();
        // Where the resolved path lands: its longest known module prefix.
        let mut add = |path: &[String], inline: usize, line: usize| {
            let Some(first) = path.first() else { return };
            let (mut base, rest): (Vec<String>, &[String]) = match first.as_str() {
                "crate" => (Vec::new(), &path[1..]),
                "self" => (m.clone(), &path[1..]),
                "super" => {
                    let n = path.iter().take_while(|s| *s == "super").count();
                    // Inside an inline module, the first supers stay in this file.
                    let up = n.saturating_sub(inline);
                    if up > m.len() {
                        return;
                    }
                    (m[..m.len() - up].to_vec(), &path[n..])
                }
                c if children.contains(c) => (m.clone(), path),
                _ => return,
            };
            base.extend(rest.iter().cloned());
            let target = (0..=base.len())
                .rev()
                .map(|k| &base[..k])
                .find(|p| known.contains(*p))
                .map(<[String]>::to_vec);
            if let Some(t) = target {
                if &t != m {
                    edges.entry(name(&t)).or_insert(line);
                }
            }
        };
        // Inline modules open here (brace depth at which each began).
        let (mut depth, mut inline): (usize, Vec<usize>) = (0, Vec::new());
        let mut i = 0;
        while i < kinds.len() {
            match &kinds[i] {
                Tok::Open => depth += 1,
                Tok::Close => {
                    depth = depth.saturating_sub(1);
                    if inline.last() == Some(&depth) {
                        inline.pop();
                    }
                }
                Tok::Ident(s) if s == "mod" && kinds.get(i + 2) == Some(&Tok::Open) => {
                    inline.push(depth);
                }
                Tok::Ident(s) if s == "use" => {
                    let end = (i..kinds.len())
                        .find(|&j| kinds[j] == Tok::Semi)
                        .unwrap_or(kinds.len());
                    for p in use_paths(&kinds[i + 1..end]) {
                        add(&p, inline.len(), toks[i].1);
                    }
                    i = end;
                    continue;
                }
                Tok::Ident(s)
                    if (s == "crate" || s == "super" || s == "self" || children.contains(s))
                        && kinds.get(i + 1) == Some(&Tok::Colons)
                        && (i == 0 || kinds[i - 1] != Tok::Colons) =>
                {
                    let mut path = vec![s.clone()];
                    let mut j = i + 1;
                    while kinds.get(j) == Some(&Tok::Colons) {
                        match ident(j + 1) {
                            Some(n) => path.push(n.to_string()),
                            None => break,
                        }
                        j += 2;
                    }
                    add(&path, inline.len(), toks[i].1);
                    i = j;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
    g
}

/// Every cycle's modules (Tarjan's strongly connected components of more than
/// one module), each with one closed walk through it, edge by edge.
fn cycles(g: &Graph) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        if let Some(edges) = t.g.get(v) {
            for w in edges.keys() {
                let w = w.as_str();
                if !t.index.contains_key(w) {
                    visit(t, w);
                    let lw = t.low[w];
                    let lv = t.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if t.on.contains(w) {
                    let iw = t.index[w];
                    let lv = t.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
        }
        if t.low[v] == t.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                scc.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                t.out.push(scc);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

/// A shortest closed walk from the first module of `scc` back to it, inside `scc`.
fn walk(g: &Graph, scc: &[String]) -> Vec<String> {
    let start = &scc[0];
    let inside: BTreeSet<&String> = scc.iter().collect();
    let mut prev: BTreeMap<&String, &String> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for w in g.get(v).into_iter().flat_map(|e| e.keys()) {
            if !inside.contains(w) {
                continue;
            }
            if w == start {
                // start -> ... -> v, then back to start.
                let mut back = vec![v];
                while let Some(p) = prev.get(back.last().unwrap()) {
                    back.push(p);
                }
                let mut walk: Vec<String> = back.into_iter().rev().cloned().collect();
                walk.push(start.clone());
                return walk;
            }
            if !prev.contains_key(w) && w != start {
                prev.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    scc.to_vec()
}

/// Neutral modules naming an engine module: (module, engine module, line).
fn neutral_to_engine(g: &Graph) -> Vec<(String, String, usize)> {
    let is_engine = |m: &str| m == "engines" || m.starts_with("engines::");
    g.iter()
        .filter(|(m, _)| !is_engine(m) && m.as_str() != "crate")
        .flat_map(|(m, edges)| {
            edges
                .iter()
                .filter(|(t, _)| is_engine(t))
                .map(|(t, l)| (m.clone(), t.clone(), *l))
        })
        .collect()
}

/// What is wrong with the graph, in words (empty: nothing).
fn problems(g: &Graph) -> Vec<String> {
    let mut out = Vec::new();
    for scc in cycles(g) {
        let w = walk(g, &scc);
        let steps: Vec<String> = w
            .windows(2)
            .map(|p| format!("{} -> {} (line {})", p[0], p[1], g[&p[0]][&p[1]]))
            .collect();
        let inside: Vec<String> = scc
            .iter()
            .map(|m| {
                let to: Vec<&str> = g[m]
                    .keys()
                    .filter(|t| scc.contains(t))
                    .map(String::as_str)
                    .collect();
                format!("{m} -> [{}]", to.join(", "))
            })
            .collect();
        out.push(format!(
            "import cycle among {{{}}}: {}\n  its edges: {}",
            scc.join(", "),
            steps.join(", "),
            inside.join("; ")
        ));
    }
    for (m, t, line) in neutral_to_engine(g) {
        out.push(format!(
            "engine-neutral module {m} names engine module {t} (line {line})"
        ));
    }
    out
}

fn read_tree(dir: &Path, root: &Path, out: &mut Vec<Source>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read src/")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            read_tree(&p, root, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let rel = p
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            out.push(Source {
                module: module_of(&rel),
                text: std::fs::read_to_string(&p).expect("read a source file"),
            });
        }
    }
}

/// Every source file of a crate of this workspace: `crate_dir` is relative to
/// `rust/` (`"hisparse-core"`, `"hisparse-check"`, `"hisparse-py"`).
fn crate_sources(crate_dir: &str) -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crate_dir)
        .join("src");
    let mut out = Vec::new();
    read_tree(&root, &root, &mut out);
    out
}

fn core_sources() -> Vec<Source> {
    crate_sources("hisparse-core")
}

/// The cycles of a crate's graph, in words (empty: none).
fn cycle_problems(g: &Graph) -> Vec<String> {
    problems(g)
        .into_iter()
        .filter(|p| p.starts_with("import cycle"))
        .collect()
}

#[test]
fn the_core_has_no_import_cycle_and_neutral_modules_name_no_engine() {
    let sources = core_sources();
    assert!(sources.len() > 30, "read {} files", sources.len());
    let g = graph(&sources);
    // The graph is not empty by accident: known edges are seen.
    assert!(g["engines::vllm_0_33::resolve"].contains_key("engines::vllm_0_33::validate"));
    assert!(g["crate"].contains_key("pool"));
    let found = problems(&g);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_cli_crate_has_no_import_cycle() {
    // hisparse-check: lib.rs and its modules (main.rs names only `hisparse_check::`).
    let sources = crate_sources("hisparse-check");
    assert!(sources.len() > 10, "read {} files", sources.len());
    let g = graph(&sources);
    assert!(g["crate"].contains_key("launch"), "{:?}", g["crate"]);
    let found = cycle_problems(&g);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_binding_crate_has_no_import_cycle() {
    let sources = crate_sources("hisparse-py");
    assert!(sources.len() > 5, "read {} files", sources.len());
    let g = graph(&sources);
    assert!(g["crate"].contains_key("results"), "{:?}", g["crate"]);
    let found = cycle_problems(&g);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

fn synthetic(files: &[(&str, &str)]) -> Graph {
    let sources: Vec<Source> = files
        .iter()
        .map(|(rel, text)| Source {
            module: module_of(rel),
            text: text.to_string(),
        })
        .collect();
    graph(&sources)
}

#[test]
fn a_cycle_through_use_trees_and_code_paths_is_found() {
    let g = synthetic(&[
        ("lib.rs", "pub mod a; pub mod b; pub mod c;"),
        ("a.rs", "use crate::{b::{self, X}, a as _};"),
        ("b.rs", "fn f() { let _ = crate::c::g(); }"),
        ("c.rs", "use super::a::Y;"),
    ]);
    let p = problems(&g);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].starts_with("import cycle among {a, b, c}"), "{}", p[0]);
    assert!(
        p[0].contains("a -> b (line 1), b -> c (line 1), c -> a (line 1)"),
        "{}",
        p[0]
    );
}

#[test]
fn a_two_module_cycle_in_a_directory_is_found() {
    // mod.rs is its directory's module; a child naming its parent's re-export
    // while the parent re-exports from the child is a cycle.
    let g = synthetic(&[
        ("lib.rs", "pub mod e;"),
        ("e/mod.rs", "pub mod r;\npub mod v;\npub use r::resolve;"),
        ("e/r.rs", "use super::v;\nfn f() { v::check(); }"),
        (
            "e/v.rs",
            "mod tests {\n use super::*;\n}\nfn g() { super::resolve(); }",
        ),
    ]);
    let p = problems(&g);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].contains("{e, e::r, e::v}"), "{}", p[0]);
}

#[test]
fn comments_strings_and_inline_tests_do_not_make_edges() {
    let g = synthetic(&[
        ("lib.rs", "pub mod a; pub mod b;"),
        (
            "a.rs",
            "//! [`crate::b`]\n/* crate::b::x /* nested */ crate::b */\nfn f() -> &'static str { \"crate::b::y\" }\nconst C: char = '\"';\nconst R: &str = r#\"crate::b\"#;\nmod tests { use super::*; use super::super::b as _; }",
        ),
        ("b.rs", "use crate::a;"),
    ]);
    // Only the test module's `super::super::b` names b: one cycle, at line 6.
    let p = problems(&g);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].contains("a -> b (line 6)"), "{}", p[0]);
    let g = synthetic(&[
        ("lib.rs", "pub mod a; pub mod b;"),
        (
            "a.rs",
            "//! crate::b\nfn f() { \"crate::b\"; }\nmod tests { use super::*; }",
        ),
        ("b.rs", "use crate::a;"),
    ]);
    assert!(problems(&g).is_empty(), "{:?}", problems(&g));
}

#[test]
fn a_neutral_module_naming_an_engine_is_found() {
    let g = synthetic(&[
        (
            "lib.rs",
            "pub mod engines; pub mod diagnostic; pub use engines::x::run;",
        ),
        ("engines/mod.rs", "pub mod x;"),
        ("engines/x/mod.rs", "pub mod stages;\npub fn run() {}"),
        ("engines/x/stages.rs", "use crate::diagnostic::Code;"),
        (
            "diagnostic.rs",
            "pub enum Code {}\nfn f() {\n crate::engines::x::stages::table();\n}",
        ),
    ]);
    let p = problems(&g);
    assert!(
        p.iter().any(|s| s
            == "engine-neutral module diagnostic names engine module engines::x::stages (line 3)"),
        "{p:?}"
    );
    // The crate root re-exports engines and is not neutral; the stage table
    // naming diagnostic back makes the cycle.
    assert!(
        p.iter()
            .any(|s| s.starts_with("import cycle among {diagnostic, engines::x::stages}")),
        "{p:?}"
    );
}
