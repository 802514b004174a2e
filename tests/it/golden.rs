//! Golden files in the manner of Cranelift's filetests: every
//! `tests/golden/**/*.fsm` is a program whose comments carry expectations.
//!
//! ```text
//! // check: NAME : TYPE          the inferred type of a definition
//! // run: EXPR => JSON           EXPR evaluates to JSON (or `error[code]`)
//! // rules: EXPR => E-A E-B ...  the set of E-* rules evaluating EXPR uses
//! // error: CODE                 the file itself fails to load with CODE
//! // grad: F P INPUT => JSON       the gradient of F w.r.t. its parameter P
//! //                              at INPUT (JSON), by reverse mode; forward
//! //                              mode and the tape must agree (ρ ≤ 1e-10)
//! ```
//!
//! Every file that loads is also printed and re-parsed (round trip).
//! `FSMOOTH_BLESS=1 cargo test golden` rewrites the expectations in place.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use fsmooth::eval::Limits;
use fsmooth::pipeline;
use fsmooth::syntax::print_program;

use crate::common;

fn golden_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("tests/golden exists")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            golden_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "fsm") {
            out.push(p);
        }
    }
}

/// Evaluates `expr` in the context of `src`, as a new last definition.
fn with_expr(src: &str, expr: &str) -> String {
    format!("{src}\nlet golden'expr = {expr}\n")
}

fn eval_text(src: &str, expr: &str) -> String {
    common::run_text(&with_expr(src, expr), "golden'expr", None)
}

fn rules_used(src: &str, expr: &str) -> String {
    let full = with_expr(src, expr);
    let loaded = match pipeline::load(&full) {
        Ok(l) => l,
        Err(d) => return format!("error[{}]", d.code),
    };
    let entry = match pipeline::entry(&loaded, "golden'expr") {
        Ok(e) => e,
        Err(d) => return format!("error[{}]", d.code),
    };
    let mut rules = BTreeSet::new();
    let last = entry.program.defs.len() - 1;
    let r = entry.run(Vec::new(), Limits::default(), &mut |ev, snap| {
        if snap.current_def() == Some(last) {
            rules.insert(ev.rule);
        }
    });
    let mut s = rules.into_iter().collect::<Vec<_>>().join(" ");
    if let Err(e) = r {
        s.push_str(&format!(
            " error[{}]",
            fsmooth::diagnostic::Diagnose::code(&e)
        ));
    }
    s
}

/// `F P INPUT`: the gradient by reverse mode, checked against forward
/// mode and the tape.
fn gradient_text(src: &str, spec: &str) -> String {
    use fsmooth::gradient;
    let mut parts = spec.splitn(3, ' ');
    let (Some(f), Some(p), Some(input)) = (parts.next(), parts.next(), parts.next()) else {
        return "malformed: want `F P INPUT`".to_string();
    };
    let rev = match pipeline::reverse_derivative(src, f, p) {
        Ok(r) => r,
        Err(d) => return format!("error[{}]", d.code),
    };
    let args = match rev.base.read_input(Some(input)) {
        Ok(a) => a,
        Err(d) => return format!("error[{}]", d.code),
    };
    let like = args[rev.wrt].clone();
    let limits = Limits::default();
    let r = match gradient::reverse(&rev, args.clone(), limits) {
        Ok(c) => c.gradient(&like),
        Err(e) => return format!("error[{}]", fsmooth::diagnostic::Diagnose::code(&e)),
    };
    let fwd = pipeline::derivative(src, f, p)
        .ok()
        .and_then(|d| gradient::forward(&d, args.clone(), limits).ok())
        .map(|c| c.gradient(&like));
    let tape = gradient::tape(&rev.base, rev.wrt, args, limits)
        .ok()
        .map(|c| c.gradient(&like));
    for (mode, other) in [("forward", fwd), ("tape", tape)] {
        match other.and_then(|o| o.max_rho(&r).map(|rho| (o, rho))) {
            Some((_, rho)) if rho <= 1e-10 => {}
            Some((o, _)) => return format!("{r} (but {mode} mode gives {o})"),
            None => return format!("{r} (but {mode} mode fails)"),
        }
    }
    r.to_string()
}

/// Checks one file; returns its failures and the blessed text.
fn check_file(path: &Path) -> (Vec<String>, String) {
    let src = std::fs::read_to_string(path).expect("golden file readable");
    let mut failures = Vec::new();
    let mut lines: Vec<String> = src.lines().map(str::to_string).collect();
    let name = path.display();
    let expect_error = lines
        .iter()
        .find_map(|l| l.strip_prefix("// error:").map(|c| c.trim().to_string()));
    let loaded = pipeline::load(&src);
    match (&expect_error, &loaded) {
        (Some(code), Err(d)) if d.code == code => {}
        (Some(code), Err(d)) => failures.push(format!(
            "{name}: expected error[{code}], got error[{}]: {}",
            d.code, d.message
        )),
        (Some(code), Ok(_)) => {
            failures.push(format!("{name}: expected error[{code}], but it loads"))
        }
        (None, Err(d)) => failures.push(format!(
            "{name}: does not load: error[{}]: {}",
            d.code, d.message
        )),
        (None, Ok(_)) => {}
    }
    let Ok(loaded) = loaded else {
        return (failures, src);
    };
    // Round trip: parse(print(p)) == p.
    let printed = print_program(loaded.program());
    match pipeline::parse(&printed) {
        Ok(again) if again.same_program(loaded.program()) => {}
        Ok(_) => failures.push(format!(
            "{name}: printing and re-parsing changes the program:\n{printed}"
        )),
        Err(d) => failures.push(format!(
            "{name}: printed program does not parse ({d}):\n{printed}"
        )),
    }
    for line in lines.iter_mut() {
        if let Some(rest) = line.strip_prefix("// check:") {
            let Some((def, expected)) = rest.split_once(" : ") else {
                failures.push(format!("{name}: malformed check line `{line}`"));
                continue;
            };
            let def = def.trim();
            let actual = match loaded.program().defs.iter().rposition(|d| &*d.name == def) {
                Some(i) => loaded.typing().scheme_string(i),
                None => format!("<no definition `{def}`>"),
            };
            if actual != expected.trim() {
                failures.push(format!(
                    "{name}: `{def}` has type {actual}, expected {}",
                    expected.trim()
                ));
            }
            *line = format!("// check: {def} : {actual}");
        } else if let Some((kind, rest)) = line
            .strip_prefix("// run:")
            .map(|r| ("run", r))
            .or_else(|| line.strip_prefix("// rules:").map(|r| ("rules", r)))
            .or_else(|| line.strip_prefix("// grad:").map(|r| ("grad", r)))
        {
            let Some((expr, expected)) = rest.rsplit_once(" => ") else {
                failures.push(format!("{name}: malformed {kind} line `{line}`"));
                continue;
            };
            let expr = expr.trim();
            let actual = match kind {
                "run" => eval_text(&src, expr),
                "grad" => gradient_text(&src, expr),
                _ => rules_used(&src, expr),
            };
            if actual != expected.trim() {
                failures.push(format!(
                    "{name}: {kind} `{expr}` gave {actual}, expected {}",
                    expected.trim()
                ));
            }
            *line = format!("// {kind}: {expr} => {actual}");
        }
    }
    let mut blessed = lines.join("\n");
    blessed.push('\n');
    (failures, blessed)
}

#[test]
fn golden_files_hold() {
    let mut files = Vec::new();
    golden_files(&common::root().join("tests/golden"), &mut files);
    let bless = std::env::var_os("FSMOOTH_BLESS").is_some();
    let mut all = Vec::new();
    for f in &files {
        let (failures, blessed) = check_file(f);
        if bless && !failures.is_empty() {
            std::fs::write(f, blessed).expect("bless writes");
        }
        all.extend(failures);
    }
    assert!(
        all.is_empty() || bless,
        "{} golden failure(s) (FSMOOTH_BLESS=1 rewrites expectations):\n{}",
        all.len(),
        all.join("\n")
    );
    assert!(files.len() >= 10, "only {} golden files found", files.len());
}
