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
//! // opt: F                      what `fsmooth opt --entry F --check`
//! //| …                          prints, one `//|` line per line
//! // opt: grad F wrt P           the same for F's optimised tangent-only
//! //| …                          forward derivative (`ad --mode fwd-opt`)
//! // fired: SPEC => FAMILY: RULE …; …   the rewrite rules in the
//! //                              optimiser's explanation of `opt: SPEC`,
//! //                              by family (`rewrite-rules/FAMILY.rules`)
//! // listing: F                  the `compile --entry F --listing` text of
//! //| …                          F up to its machine code
//! ```
//!
//! Every file that loads is also printed and re-parsed (round trip).
//! `FSMOOTH_BLESS=1 cargo test golden` rewrites the expectations in place.
//! Files are checked on as many threads as the machine has cores: the
//! optimiser in a debug build takes seconds on the paper's examples.
//!
//! The listing stops before the machine code, which depends on the host's
//! CPU features (AVX or not); the normal form and the Cranelift IR as
//! lowered do not (the IR names the host's default calling convention,
//! `system_v` on Linux).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Mutex;
use std::time::Duration;

use fsmooth::codegen::{AotOptions, default_symbol};
use fsmooth::eval::Limits;
use fsmooth::gradient::Mode;
use fsmooth::opt::OptLimits;
use fsmooth::pipeline::{self, Artefact, Engine, Session};
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
    let loaded = match Session::load(&full) {
        Ok(l) => l,
        Err(d) => return format!("error[{}]", d.code),
    };
    let entry = match loaded.entry("golden'expr") {
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
    let rev = match common::plan(src, f, p, Mode::Rev) {
        Ok(r) => r,
        Err(d) => return format!("error[{}]", d.code),
    };
    let args = match rev.base.read_input(Some(input)) {
        Ok(a) => a,
        Err(d) => return format!("error[{}]", d.code),
    };
    let like = args[rev.wrt].clone();
    let limits = Limits::default();
    let r = match rev.columns(args.clone(), Engine::Eval, limits) {
        Ok(c) => c.gradient(&like),
        Err(e) => return format!("error[{}]", fsmooth::diagnostic::Diagnose::code(&e)),
    };
    let fwd = common::plan(src, f, p, Mode::Fwd)
        .ok()
        .and_then(|d| d.columns(args.clone(), Engine::Eval, limits).ok())
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

/// The optimiser's options in golden files: `opt --check`, with the
/// explanation kept where a `fired:` line reads it (it costs a quarter
/// more), and a time limit no phase reaches, so that what a phase does
/// depends on its node and iteration limits only, never on how loaded the
/// machine is (the default of 3 s per phase is close to what the paper's
/// examples take in a debug build).
fn golden_opt_options(explain: bool) -> pipeline::OptOptions {
    pipeline::OptOptions {
        explain,
        limits: OptLimits {
            time: Duration::from_secs(600),
            ..OptLimits::default()
        },
        ..common::checked()
    }
}

/// An `opt:` or `fired:` line's optimisation, or the error it gave.
type Optimised = Result<Rc<pipeline::Optimised>, String>;

/// `F` optimised, or `grad F wrt P`: F's tangent-only forward derivative
/// optimised (what `ad --mode fwd-opt` prints, with the report kept).
fn optimise(src: &str, spec: &str, explain: bool) -> Optimised {
    let code = |d: fsmooth::diagnostic::Diagnostic| format!("error[{}]", d.code);
    let words: Vec<&str> = spec.split_whitespace().collect();
    let (f, wrt) = match words[..] {
        [f] => (f, None),
        ["grad", f, "wrt", p] => (f, Some(p)),
        _ => return Err("malformed: want `F` or `grad F wrt P`".to_string()),
    };
    let session = Session::load(src)
        .map_err(code)?
        .with_options(golden_opt_options(explain));
    let artefact = match wrt {
        None => Artefact::entry(f),
        Some(p) => {
            let k = session.param(f, p).map_err(code)?;
            Mode::Fwd
                .tangent_program(Rc::from(f), k)
                .expect("forward mode has a tangent-only program")
        }
    };
    session.optimise(&artefact, false).map_err(code)
}

/// What `opt: SPEC` prints.
fn opt_text(o: &Optimised) -> String {
    match o {
        Ok(o) => print_program(&o.entry.program),
        Err(e) => e.clone(),
    }
}

/// The rules named in the explanation of `opt: SPEC` (the steps of the
/// phases that lowered the cost), by family: `cond: if-div sub-if; …`.
fn fired_text(o: &Optimised) -> String {
    let o = match o {
        Ok(o) => o,
        Err(e) => return e.clone(),
    };
    let mut families: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (_, steps) in &o.report.explanation {
        for step in steps {
            // As `opt --explain` reads them: `(Rewrite=> NAME …`.
            let rule = step.split("Rewrite").nth(1).and_then(|r| {
                r.trim_start_matches(['=', '<', '>'])
                    .split([' ', ')'])
                    .find(|w| !w.is_empty())
            });
            if let Some(d) = rule.and_then(|r| o.rules.iter().find(|d| d.name == r)) {
                families.entry(&d.family).or_default().insert(&d.name);
            }
        }
    }
    let parts: Vec<String> = families
        .iter()
        .map(|(f, rules)| {
            format!(
                "{f}: {}",
                rules.iter().copied().collect::<Vec<_>>().join(" ")
            )
        })
        .collect();
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join("; ")
    }
}

/// What `compile --entry F --listing` writes for `F`, up to its machine
/// code (see the summary above).
fn listing_text(src: &str, f: &str) -> String {
    let entry = match Session::load(src).and_then(|l| l.entry(f)) {
        Ok(e) => e,
        Err(d) => return format!("error[{}]", d.code),
    };
    let options = AotOptions {
        symbol: default_symbol(f, ""),
        origin: "golden".into(),
        listing: true,
        fp: fsmooth::codegen::FpContract::Strict,
    };
    match entry.object(&entry.params, &options) {
        Ok(code) => {
            let listing = code.listing.unwrap_or_default();
            let ir = listing.split(";; machine code").next().unwrap_or_default();
            ir.trim_end().to_string()
        }
        Err(e) => format!("error[{}]", fsmooth::diagnostic::Diagnose::code(&e)),
    }
}

/// A block of `//|` lines from `text`: one per line, `//|` alone for an
/// empty one.
fn block(text: &str) -> Vec<String> {
    text.trim_end()
        .lines()
        .map(|l| {
            if l.is_empty() {
                "//|".to_string()
            } else {
                format!("//| {l}")
            }
        })
        .collect()
}

/// Checks one file; returns its failures and the blessed text.
fn check_file(path: &Path) -> (Vec<String>, String) {
    let src = std::fs::read_to_string(path).expect("golden file readable");
    let mut failures = Vec::new();
    let lines: Vec<String> = src.lines().map(str::to_string).collect();
    let name = path.display();
    let expect_error = lines
        .iter()
        .find_map(|l| l.strip_prefix("// error:").map(|c| c.trim().to_string()));
    let loaded = Session::load(&src);
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
    // Each optimisation once, for its `opt:` and `fired:` lines; explained
    // only for a `fired:` line.
    let fired: BTreeSet<String> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("// fired:")?.rsplit_once(" => "))
        .map(|(spec, _)| spec.trim().to_string())
        .collect();
    let mut optimised: BTreeMap<String, Optimised> = BTreeMap::new();
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    let mut rest_of_file = lines.into_iter().peekable();
    while let Some(mut line) = rest_of_file.next() {
        if let Some((kind, spec)) = line
            .strip_prefix("// opt:")
            .map(|r| ("opt", r))
            .or_else(|| line.strip_prefix("// listing:").map(|r| ("listing", r)))
        {
            let spec = spec.trim().to_string();
            let actual = match kind {
                "opt" => opt_text(
                    optimised
                        .entry(spec.clone())
                        .or_insert_with(|| optimise(&src, &spec, fired.contains(&spec))),
                ),
                _ => listing_text(&src, &spec),
            };
            let mut expected = Vec::new();
            while let Some(l) = rest_of_file.next_if(|l| l.starts_with("//|")) {
                expected.push(l);
            }
            let want = block(&actual);
            if let Some(k) =
                (0..expected.len().max(want.len())).find(|&k| expected.get(k) != want.get(k))
            {
                // A listing is long: its first difference says enough.
                let printed = match kind {
                    "opt" => format!("; it printed:\n{actual}"),
                    _ => String::new(),
                };
                failures.push(format!(
                    "{name}: {kind} `{spec}`, line {} of its output: expected {:?}, got {:?}{printed}",
                    k + 1,
                    expected.get(k).map_or("<end>", |l| l.as_str()),
                    want.get(k).map_or("<end>", |l| l.as_str()),
                ));
            }
            out.push(format!("// {kind}: {spec}"));
            out.extend(want);
            continue;
        }
        if let Some(rest) = line.strip_prefix("// check:") {
            let Some((def, expected)) = rest.split_once(" : ") else {
                failures.push(format!("{name}: malformed check line `{line}`"));
                out.push(line);
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
            line = format!("// check: {def} : {actual}");
        } else if let Some((kind, rest)) = line
            .strip_prefix("// run:")
            .map(|r| ("run", r))
            .or_else(|| line.strip_prefix("// rules:").map(|r| ("rules", r)))
            .or_else(|| line.strip_prefix("// grad:").map(|r| ("grad", r)))
            .or_else(|| line.strip_prefix("// fired:").map(|r| ("fired", r)))
        {
            let Some((expr, expected)) = rest.rsplit_once(" => ") else {
                failures.push(format!("{name}: malformed {kind} line `{line}`"));
                out.push(line);
                continue;
            };
            let expr = expr.trim();
            let actual = match kind {
                "run" => eval_text(&src, expr),
                "grad" => gradient_text(&src, expr),
                "fired" => fired_text(
                    optimised
                        .entry(expr.to_string())
                        .or_insert_with(|| optimise(&src, expr, true)),
                ),
                _ => rules_used(&src, expr),
            };
            if actual != expected.trim() {
                failures.push(format!(
                    "{name}: {kind} `{expr}` gave {actual}, expected {}",
                    expected.trim()
                ));
            }
            line = format!("// {kind}: {expr} => {actual}");
        }
        out.push(line);
    }
    let mut blessed = out.join("\n");
    blessed.push('\n');
    (failures, blessed)
}

#[test]
fn golden_files_hold() {
    let mut files = Vec::new();
    golden_files(&common::root().join("tests/golden"), &mut files);
    let bless = std::env::var_os("FSMOOTH_BLESS").is_some();
    // A queue of files shared by one thread per core, the optimiser's
    // first (the slowest, seconds each); failures are reported in file
    // order.
    let mut order: Vec<usize> = (0..files.len()).collect();
    order.sort_by_key(|&k| {
        let text = std::fs::read_to_string(&files[k]).unwrap_or_default();
        !text.contains("\n// opt:")
    });
    let next = Mutex::new(order.into_iter());
    let results = Mutex::new(vec![Vec::new(); files.len()]);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads.min(files.len()) {
            s.spawn(|| {
                while let Some(k) = next.lock().expect("queue").next() {
                    let (failures, blessed) = check_file(&files[k]);
                    if bless && !failures.is_empty() {
                        std::fs::write(&files[k], blessed).expect("bless writes");
                    }
                    results.lock().expect("results")[k] = failures;
                }
            });
        }
    });
    let all: Vec<String> = results.into_inner().expect("results").concat();
    assert!(
        all.is_empty() || bless,
        "{} golden failure(s) (FSMOOTH_BLESS=1 rewrites expectations):\n{}",
        all.len(),
        all.join("\n")
    );
    assert!(files.len() >= 10, "only {} golden files found", files.len());
}
