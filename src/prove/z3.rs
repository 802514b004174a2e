//! The solver, as a subprocess: `z3 -in` reads one query (SMT-LIB 2) on
//! standard input and answers `sat` with a model's values, `unsat`, or
//! `unknown` (its time limit). A subprocess rather than bindings: each
//! rule is one short query, text is what a reader can rerun by hand
//! (`fsmooth rules prove --smt`), and the build needs no C library.

use std::io::Write;
use std::process::{Command, Stdio};

/// What the solver said.
pub enum Answer {
    /// The negated claim is unsatisfiable: proved.
    Unsat,
    /// A model: each queried name with its value, as S-expressions.
    Sat(Vec<(String, Sexp)>),
    Unknown(String),
}

/// Whether `z3` can be run.
pub fn available() -> bool {
    Command::new("z3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `query` with a time limit of `timeout_ms` per query.
pub fn solve(query: &str, timeout_ms: u64) -> Result<Answer, String> {
    let mut child = Command::new("z3")
        .args(["-in", "-smt2", &format!("-t:{timeout_ms}")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run z3: {e}"))?;
    child
        .stdin
        .take()
        .ok_or("z3's standard input")?
        .write_all(query.as_bytes())
        .map_err(|e| format!("writing to z3: {e}"))?;
    let out = child.wait_with_output().map_err(|e| format!("z3: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut lines = text.trim_start().splitn(2, '\n');
    let first = lines.next().unwrap_or("").trim();
    match first {
        "unsat" => Ok(Answer::Unsat),
        "sat" => {
            let rest = lines.next().unwrap_or("");
            let model = match parse(rest) {
                Some(Sexp::List(items)) => items
                    .into_iter()
                    .filter_map(|p| match p {
                        Sexp::List(mut kv) if kv.len() == 2 => {
                            let v = kv.pop()?;
                            match kv.pop()? {
                                Sexp::Atom(k) => Some((k, v)),
                                _ => None,
                            }
                        }
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            Ok(Answer::Sat(model))
        }
        "unknown" | "timeout" => Ok(Answer::Unknown(first.to_string())),
        _ => Err(format!(
            "z3 answered {:?}{}",
            text.trim(),
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

/// An S-expression of the solver's output.
#[derive(Clone, Debug, PartialEq)]
pub enum Sexp {
    Atom(String),
    List(Vec<Sexp>),
}

/// The first S-expression of `text`.
pub fn parse(text: &str) -> Option<Sexp> {
    let mut tokens = Vec::new();
    let mut cur = String::new();
    for ch in text.chars() {
        match ch {
            '(' | ')' => {
                if !cur.is_empty() {
                    tokens.push(std::mem::take(&mut cur));
                }
                tokens.push(ch.to_string());
            }
            c if c.is_whitespace() => {
                if !cur.is_empty() {
                    tokens.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        tokens.push(cur);
    }
    fn go(tokens: &[String], at: &mut usize) -> Option<Sexp> {
        let t = tokens.get(*at)?;
        *at += 1;
        if t == "(" {
            let mut items = Vec::new();
            while tokens.get(*at)? != ")" {
                items.push(go(tokens, at)?);
            }
            *at += 1;
            Some(Sexp::List(items))
        } else if t == ")" {
            None
        } else {
            Some(Sexp::Atom(t.clone()))
        }
    }
    go(&tokens, &mut 0)
}
