//! The invariants of ARCHITECTURE.md that a program can check, checked:
//! no import cycles between source files, layers that do not import what
//! sequences them, only the command line prints or reads files, only
//! `opt/` (and the rule checker) names egg, only `codegen/` names
//! Cranelift's code generator, and no source file over 1,200 lines
//! without a stated reason.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::common::root;

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("readable dir")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The source files of the library, by module path (`opt::check`;
/// `opt` for `opt/mod.rs`; `` for `lib.rs`), with their text, comments
/// left out.
fn modules() -> BTreeMap<String, String> {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .into_iter()
        .filter(|f| !f.ends_with("main.rs"))
        .map(|f| {
            let rel = f.strip_prefix(&src).expect("under src").with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
                parts.pop();
            }
            let text = std::fs::read_to_string(&f).expect("readable");
            let code: String = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .map(|l| format!("{l}\n"))
                .collect();
            (parts.join("::"), code)
        })
        .collect()
}

/// The modules `name`'s text refers to: `crate::a::b…` and `super::x…`
/// paths (in `use` items and inline), resolved to the longest known
/// module, and `use` groups `crate::a::{b, c::d}` one level deep.
fn imports(name: &str, text: &str, known: &BTreeSet<String>, is_dir: bool) -> BTreeSet<String> {
    let here: Vec<&str> = if name.is_empty() {
        Vec::new()
    } else {
        name.split("::").collect()
    };
    // A `mod.rs` is its module; a file `a/b.rs` is module `a::b`, whose
    // `super` is `a`.
    let parent: Vec<&str> = if is_dir {
        here.clone()
    } else {
        here[..here.len().saturating_sub(1)].to_vec()
    };
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent.clone())] {
        let mut from = 0;
        while let Some(i) = text[from..].find(prefix) {
            let at = from + i;
            from = at + prefix.len();
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
                continue;
            }
            // `super::super::`: one more level up.
            let mut base = base.clone();
            let mut rest = &text[from..];
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            let path: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':' || *c == '{')
                .collect();
            let mut heads = vec![path.trim_end_matches([':', '{']).to_string()];
            if let Some((head, _)) = path.split_once('{') {
                let group_text: String = rest[head.len() + 1..]
                    .chars()
                    .take_while(|c| *c != '}')
                    .collect();
                heads = group_text
                    .split(',')
                    .map(|g| format!("{head}{}", g.trim()))
                    .collect();
            }
            for h in heads {
                let mut segs: Vec<String> = base.iter().map(|s| s.to_string()).collect();
                segs.extend(h.split("::").filter(|s| !s.is_empty()).map(str::to_string));
                // The longest prefix that is a module.
                while !segs.is_empty() && !known.contains(&segs.join("::")) {
                    segs.pop();
                }
                let m = segs.join("::");
                if !segs.is_empty() && m != name {
                    out.insert(m);
                }
            }
        }
    }
    out
}

/// The import graph: module → the modules it imports, leaving out a
/// module's imports of its own descendants (a parent declares and
/// re-exports its children; that is its API, not a cycle).
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules();
    let known: BTreeSet<String> = mods.keys().cloned().collect();
    let src = root().join("src");
    mods.iter()
        .map(|(name, text)| {
            let is_dir = name.is_empty() || src.join(name.replace("::", "/")).is_dir();
            let deps = imports(name, text, &known, is_dir)
                .into_iter()
                .filter(|d| !(name.is_empty() || d.starts_with(&format!("{name}::"))))
                .collect();
            (name.clone(), deps)
        })
        .collect()
}

/// The cycles of `g` (strongly connected components of more than one
/// module), by Tarjan's algorithm.
fn cycles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'g> {
        g: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on: BTreeSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    impl<'g> T<'g> {
        fn visit(&mut self, v: &'g str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on.insert(v);
            for w in self.g.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.on.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    comp.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    self.out.push(comp);
                }
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
            t.visit(v);
        }
    }
    t.out
}

#[test]
fn the_import_graph_scanner_resolves_paths() {
    let known: BTreeSet<String> = ["opt", "opt::check", "opt::engine", "ir", "eval"]
        .into_iter()
        .map(str::to_string)
        .collect();
    let text = "use super::engine::{run, Phase};\nuse crate::ir::{Expr, build::Builder};\nlet x = crate::eval::Value::Double;";
    let got = imports("opt::check", text, &known, false);
    assert_eq!(
        got.into_iter().collect::<Vec<_>>(),
        vec!["eval", "ir", "opt::engine"]
    );
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    g.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(cycles(&g), vec![vec!["a".to_string(), "b".to_string()]]);
}

#[test]
fn no_import_cycles_between_source_files() {
    let g = graph();
    assert!(g.len() > 60, "only {} modules found", g.len());
    let found = cycles(&g);
    assert!(found.is_empty(), "import cycles: {found:?}");
}

/// Each layer imports only what it is built on: nothing imports the
/// command line; what the pipeline sequences does not import the
/// pipeline; the evaluator (the semantics) depends on nothing downstream.
#[test]
fn layers_do_not_import_what_sequences_them() {
    let g = graph();
    // (layer, modules it must not import)
    let rules: &[(&str, &[&str])] = &[
        ("", &[]),
        (
            "eval",
            &[
                "ad", "anf", "opt", "codegen", "pipeline", "gradient", "types", "syntax", "cli",
            ],
        ),
        (
            "anf",
            &[
                "ad", "opt", "codegen", "pipeline", "gradient", "eval", "cli",
            ],
        ),
        (
            "types",
            &[
                "ad", "anf", "opt", "codegen", "pipeline", "gradient", "eval", "cli",
            ],
        ),
        (
            "syntax",
            &[
                "ad", "anf", "opt", "codegen", "pipeline", "gradient", "eval", "types", "cli",
            ],
        ),
        ("ad", &["opt", "codegen", "pipeline", "gradient", "cli"]),
        ("opt", &["ad", "codegen", "pipeline", "gradient", "cli"]),
        (
            "codegen",
            &["ad", "opt", "pipeline", "gradient", "adbench", "cli"],
        ),
        (
            "pipeline",
            &["gradient", "adbench", "difftest", "rulecheck", "cli"],
        ),
        ("gradient", &["adbench", "difftest", "cli"]),
    ];
    let mut bad = Vec::new();
    for (module, deps) in &g {
        for (layer, banned) in rules {
            let inside = if layer.is_empty() {
                true
            } else {
                module == layer || module.starts_with(&format!("{layer}::"))
            };
            if !inside {
                continue;
            }
            let banned: Vec<&str> = if layer.is_empty() {
                vec!["cli"]
            } else {
                banned.to_vec()
            };
            for d in deps {
                let top = d.split("::").next().unwrap_or("");
                if banned.contains(&top) && !(module.starts_with("cli")) {
                    bad.push(format!("{module} imports {d}"));
                }
            }
        }
    }
    bad.sort();
    bad.dedup();
    assert!(bad.is_empty(), "layering violations: {bad:#?}");
}

/// Only `cli/` (and `main.rs`) prints or touches files and streams.
#[test]
fn only_the_command_line_prints_or_reads_files() {
    let mut bad = Vec::new();
    for (name, text) in modules() {
        if name == "cli" || name.starts_with("cli::") {
            continue;
        }
        for needle in [
            "println!",
            "eprintln!",
            "print!(",
            "eprint!(",
            "dbg!(",
            "std::fs::",
            "File::",
            "io::stdout",
            "io::stderr",
            "io::stdin",
            "read_dir",
        ] {
            if text.contains(needle) {
                bad.push(format!("{name}: {needle}"));
            }
        }
    }
    assert!(bad.is_empty(), "I/O outside the command line: {bad:?}");
}

/// Only `opt/`, the rule checker and the rule prover (which instantiate
/// and translate the rules' egg patterns) name egg; only `codegen/` names Cranelift's code generator
/// (`cranelift-entity`, the arena crate, is everyone's).
#[test]
fn only_opt_names_egg_and_only_codegen_names_cranelift() {
    let mut bad = Vec::new();
    for (name, text) in modules() {
        let in_opt = name == "opt"
            || name.starts_with("opt::")
            || name == "rulecheck"
            || name.starts_with("rulecheck::")
            || name == "prove"
            || name.starts_with("prove::");
        if !in_opt && text.contains("egg::") {
            bad.push(format!("{name} names egg"));
        }
        let in_codegen = name == "codegen" || name.starts_with("codegen::");
        for c in [
            "cranelift_codegen",
            "cranelift_frontend",
            "cranelift_jit",
            "cranelift_module",
            "cranelift_object",
            "cranelift_native",
        ] {
            if !in_codegen && text.contains(c) {
                bad.push(format!("{name} names {c}"));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:?}");
}

/// No source file over 1,200 lines unless its summary says why
/// (`//! Long because …` in its first paragraph).
#[test]
fn no_source_file_is_too_long_without_a_reason() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let mut bad = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("readable");
        let lines = text.lines().count();
        let reason = text
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .any(|l| l.contains("Long because"));
        if lines > 1200 && !reason {
            bad.push(format!("{} ({lines} lines)", f.display()));
        }
    }
    assert!(bad.is_empty(), "files over 1,200 lines: {bad:?}");
}
