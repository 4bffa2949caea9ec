//! No function in the core over about 120 lines without a reason (issue 24;
//! the project guide: "a function in the core over ~120 lines needs a reason
//! in its comment (better: split it)").
//!
//! Every `src/**/*.rs` of `hisparse-core` is read as text. A function is the
//! `fn` keyword followed by its name, and its length is the lines from the
//! line of `fn` to the line of the `}` that closes its body, both counted.
//! Comments, string literals (raw ones too) and char literals are skipped
//! (the lexer is module_graph.rs's, rust_lex/), so a brace in them does not
//! open or close anything. A function whose length
//! is over [`LIMIT`] fails the test unless the comment just above it (its doc
//! comment and plain comments, with attributes between) has a line that
//! starts with `// long:` or `/// long:` and gives the reason. Functions
//! nested in a function (and those in inline test modules) are measured too.

mod rust_lex;

use rust_lex::{lex, Tok};
use std::path::Path;

/// The most lines a function may have without a `// long:` reason.
const LIMIT: usize = 120;

/// One function: its name, first line (of `fn`), and length in lines.
#[derive(Debug, Clone, PartialEq)]
struct Func {
    name: String,
    line: usize,
    lines: usize,
}

/// Every function with a body in `text`, in order of its `fn`.
fn functions(text: &str) -> Vec<Func> {
    let toks = lex(text);
    let mut out = Vec::new();
    for (k, (tok, line)) in toks.iter().enumerate() {
        if *tok != Tok::Ident("fn".to_string()) {
            continue;
        }
        // `fn(u32) -> u32` is a type, not a function.
        let Some((Tok::Ident(name), _)) = toks.get(k + 1) else {
            continue;
        };
        // The body opens at the first `{` before any `;` (a declaration).
        let Some(open) = toks[k + 2..]
            .iter()
            .position(|(t, _)| matches!(t, Tok::Open | Tok::Semi))
            .map(|p| k + 2 + p)
        else {
            continue;
        };
        if toks[open].0 == Tok::Semi {
            continue;
        }
        let mut depth = 0usize;
        for (t, end) in &toks[open..] {
            match t {
                Tok::Open => depth += 1,
                Tok::Close => {
                    depth -= 1;
                    if depth == 0 {
                        out.push(Func {
                            name: name.clone(),
                            line: *line,
                            lines: end - line + 1,
                        });
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// Whether the comment just above line `line` (1-based) gives a `long:`
/// reason: the lines above it that are comments or attributes, up to the
/// first that is neither.
fn has_reason(text: &str, line: usize) -> bool {
    let lines: Vec<&str> = text.lines().collect();
    lines[..line - 1]
        .iter()
        .rev()
        .map(|l| l.trim())
        .take_while(|l| l.starts_with("//") || l.starts_with("#["))
        .any(|l| l.starts_with("// long:") || l.starts_with("/// long:"))
}

/// The functions of `text` over [`LIMIT`] lines without a reason, as
/// `file:line name (n lines)`.
fn too_long(file: &str, text: &str) -> Vec<String> {
    functions(text)
        .into_iter()
        .filter(|f| f.lines > LIMIT && !has_reason(text, f.line))
        .map(|f| format!("{file}:{} fn {} ({} lines)", f.line, f.name, f.lines))
        .collect()
}

fn read_tree(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read src dir")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            read_tree(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).expect("under root");
            let text = std::fs::read_to_string(&path).expect("read source");
            out.push((format!("src/{}", rel.display()), text));
        }
    }
}

#[test]
fn no_core_function_is_over_120_lines_without_a_reason() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut sources = Vec::new();
    read_tree(&root, &root, &mut sources);
    assert!(sources.len() > 50, "read the core's src/");
    let bad: Vec<String> = sources
        .iter()
        .flat_map(|(file, text)| too_long(file, text))
        .collect();
    assert!(
        bad.is_empty(),
        "functions over {LIMIT} lines with no `// long:` reason in the comment above \
         them (split them into named steps, or give the reason):\n{}",
        bad.join("\n")
    );
}

/// A function of `n` lines (`fn` line, n - 2 body lines, `}`), its body
/// holding braces in strings, chars and comments that must not count.
fn sample(name: &str, n: usize) -> String {
    let mut s = format!("fn {name}(x: fn(u32) -> u32) -> &'static str {{\n");
    for k in 0..n - 2 {
        s.push_str(match k % 4 {
            0 => "    let _ = \"}\"; let _ = '}'; // }\n",
            1 => "    let _ = r#\"}\"#; /* } */\n",
            2 => "    if true { let _ = b\"{\"; }\n",
            _ => "    let _ = '\\''; let _: &'static str = \"\\\"}\";\n",
        });
    }
    s.push_str("}\n");
    s
}

#[test]
fn the_measure_counts_fn_to_closing_brace_and_skips_literals() {
    let text = format!(
        "trait T {{ fn decl(&self); }}\n{}{}",
        sample("short", 120),
        sample("long", 121)
    );
    let fs = functions(&text);
    assert_eq!(
        fs,
        vec![
            Func {
                name: "short".into(),
                line: 2,
                lines: 120
            },
            Func {
                name: "long".into(),
                line: 122,
                lines: 121
            },
        ]
    );
}

#[test]
fn a_long_function_fails_unless_the_comment_above_gives_a_reason() {
    let bare = sample("big", 130);
    assert_eq!(
        too_long("src/x.rs", &bare),
        vec!["src/x.rs:1 fn big (130 lines)".to_string()]
    );
    let doc = format!("/// Reads the table.\n///\n/// long: a table of rules read top to bottom.\n#[allow(clippy::too_many_lines)]\n{bare}");
    assert!(too_long("src/x.rs", &doc).is_empty());
    let plain = format!("// long: one match, one arm a code.\npub {bare}");
    // `pub fn` on the line: the comment is still just above it.
    assert!(too_long("src/x.rs", &plain).is_empty());
    // A reason separated by code does not count, nor one not at the line's start.
    let far = format!("// long: elsewhere\nconst A: u8 = 1;\n{bare}");
    assert_eq!(too_long("src/x.rs", &far).len(), 1);
    let mid = format!("/// not long: here\n{bare}");
    assert_eq!(too_long("src/x.rs", &mid).len(), 1);
    assert!(too_long("src/x.rs", &sample("ok", 120)).is_empty());
}
