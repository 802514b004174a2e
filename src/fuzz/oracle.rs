//! The in-process oracles: each [`Command`] done through the library as
//! the command line does it, judged. The campaign runs [`judge`] under
//! `catch_unwind` on a worker thread with a large stack and a wall-clock
//! limit, so a panic or a hang is a verdict too.
//!
//! What is checked, per input:
//! - every error is *clean* ([`clean`]): a stable kebab-case code, no
//!   internal error (`internal-error`, "please report"), and, when it
//!   concerns the program, a location — a span into the program or the
//!   prelude, or for a rule file a `file:line:col` with a line;
//! - `check`: the printer round-trips what parses (print ∘ parse is
//!   idempotent, spec/syntax.md §4.3);
//! - `native`: native code gives the evaluator's value (bit for bit or
//!   ρ ≤ 1e-12, NaN = NaN) or the same ⊥ code, on the entry and on its
//!   derivative programs; a run the evaluator ends at a resource limit
//!   (out of fuel, or an array past `--max-elements`) is not compared
//!   (spec/semantics.md §9). The entry runs twice: with the default
//!   limits, and with a limit of three elements, under which native code
//!   must end wherever the evaluator does (spec/semantics.md §3.8);
//! - `opt`: the optimised entry refines the entry — where the entry is
//!   defined on the input, the optimised one is defined and equal
//!   (ρ ≤ 1e-9; an `ieee-inexact` rounding difference is excused when the
//!   optimiser without those rules agrees, as `difftest` does).
//!
//! Note [Known defects]: a class of unclean errors the reliability
//! attack reported — a runtime error of native code, of a derivative
//! program or of `deriv`'s expansion without a source location — was
//! counted apart ([`Outcome::Known`]) while it was being fixed. It is
//! fixed (every runtime error is located, from either engine and every
//! AD mode), so [`KNOWN_UNLOCATED`] is false and such an error is
//! unclean again; the switch stays for the next class a campaign finds
//! before its fix lands.

use std::rc::Rc;

use crate::diagnostic::{Diagnose, Diagnostic, SourceId};
use crate::difftest::{doubles_agree, values_agree};
use crate::eval::{Limits, Value};
use crate::gradient::{Columns, Mode, Plan};
use crate::opt::RuleFile;
use crate::pipeline::{Artefact, Checkpointing, Engine, Entry, OptOptions, RunError, Session};

use super::case::{Case, Command, GradKind};
use super::{Outcome, Verdict};

/// Whether runtime errors of native code and of derivative programs
/// without a location are excused as known (Note [Known defects]).
pub const KNOWN_UNLOCATED: bool = false;

/// What an error is about: what location it needs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    /// The user's program (or its input): a span into it or the prelude.
    Program,
    /// A run of the user's program that uses `deriv` or the
    /// differentiation API (Note [Known defects]).
    Expanded,
    /// A run of a derivative program on the evaluator.
    Derived,
    /// A run of native code.
    Native,
    /// A rule file: `file:line:col` with a line in the message.
    Rules,
    /// The command line's usage: no location.
    Usage,
}

/// Limits of a run: the case's fuel (other limits at their defaults).
fn limits(fuel: u64) -> Limits {
    Limits {
        fuel,
        ..Limits::default()
    }
}

/// Whether `code` is a stable kebab-case identifier.
pub fn is_code(code: &str) -> bool {
    !code.is_empty()
        && code.starts_with(|c: char| c.is_ascii_lowercase())
        && !code.ends_with('-')
        && !code.contains("--")
        && code
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Whether a message admits an internal failure.
pub fn is_internal(code: &str, text: &str) -> bool {
    code == "internal-error" || text.contains("please report") || text.contains("panicked at")
}

/// Judges an error: clean, known (Note [Known defects]) or unclean.
pub fn clean(d: &Diagnostic, subject: Subject) -> Verdict {
    let text = format!("{} {}", d.message, d.notes.join(" "));
    let what = format!("error[{}]: {}", d.code, first_line(&d.message));
    if !is_code(d.code) {
        return Verdict::new(Outcome::Unclean, format!("no stable code: {what}"));
    }
    if is_internal(d.code, &text) {
        return Verdict::new(Outcome::Unclean, format!("internal error: {what}"));
    }
    let located = matches!(d.span.source, SourceId::MAIN | SourceId::PRELUDE);
    match subject {
        Subject::Usage => Verdict::new(Outcome::CleanError, d.code),
        Subject::Rules => {
            if matches!(d.code, "rules-dir" | "rules-file") || rule_location(&d.message) {
                Verdict::new(Outcome::CleanError, d.code)
            } else {
                Verdict::new(Outcome::Unclean, format!("no rule-file location: {what}"))
            }
        }
        _ if located => Verdict::new(Outcome::CleanError, d.code),
        Subject::Derived | Subject::Native | Subject::Expanded if KNOWN_UNLOCATED => {
            let whose = match subject {
                Subject::Native => "native-code",
                Subject::Derived => "derivative-program",
                _ => "deriv-expansion",
            };
            Verdict::new(
                Outcome::Known,
                format!("{whose} error without a location: {what}"),
            )
        }
        _ => Verdict::new(Outcome::Unclean, format!("no location: {what}")),
    }
}

/// Whether a rendered rule error starts `file:LINE:COL: error[` with a
/// line of at least 1.
fn rule_location(message: &str) -> bool {
    let Some(head) = message.split(": error[").next() else {
        return false;
    };
    let mut parts = head.rsplitn(3, ':');
    let (Some(col), Some(line)) = (parts.next(), parts.next()) else {
        return false;
    };
    matches!(line.parse::<u64>(), Ok(l) if l >= 1) && col.parse::<u64>().is_ok()
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

fn fail(d: Diagnostic, subject: Subject) -> Verdict {
    clean(&d, subject)
}

/// The subject of a runtime error of the user's entry in `src`.
fn run_subject(e: &RunError, src: &str) -> Subject {
    match e {
        RunError::Native(_) => Subject::Native,
        RunError::Eval(_) => program_subject(src),
    }
}

/// What a runtime error in the user's program `src` is about: the
/// program, or code `deriv` expanded to when the program uses it.
pub fn program_subject(src: &str) -> Subject {
    if uses_derivatives(src) {
        Subject::Expanded
    } else {
        Subject::Program
    }
}

/// Whether `src` names `deriv` or a name of the differentiation API.
pub fn uses_derivatives(src: &str) -> bool {
    src.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '\''))
        .any(|w| {
            matches!(
                w,
                "deriv" | "diff" | "vdiff" | "mdiff" | "grad" | "jacob" | "mgrad"
            )
        })
}

/// The verdict on one case, computed in process.
pub fn judge(case: &Case) -> Verdict {
    match &case.command {
        Command::RulesOpt | Command::RulesCheck { .. } | Command::RulesList => rules(case),
        _ => {
            let Ok(src) = std::str::from_utf8(&case.program) else {
                // The command line rejects it, located (`invalid-utf8`).
                return Verdict::new(Outcome::CleanError, "invalid-utf8");
            };
            let input = match &case.input {
                None => None,
                Some(b) => match std::str::from_utf8(b) {
                    Ok(s) => Some(s),
                    Err(_) => return Verdict::new(Outcome::CleanError, "invalid-utf8"),
                },
            };
            match &case.command {
                Command::Check => check(src),
                Command::Run { engine } => run(src, case, input, *engine),
                Command::Grad {
                    kind,
                    wrt,
                    mode,
                    engine,
                } => grad(src, case, input, kind, wrt, *mode, *engine),
                Command::Opt { check } => opt(src, case, input, *check),
                Command::Native { wrt } => native(src, case, input, wrt.as_ref()),
                _ => unreachable!("handled above"),
            }
        }
    }
}

/// `check`, and the printer's round trip.
fn check(src: &str) -> Verdict {
    if let Err(d) = Session::load(src) {
        return fail(d, Subject::Program);
    }
    let Ok(p1) = crate::pipeline::parse(src) else {
        return Verdict::new(Outcome::Disagree, "loads but does not parse");
    };
    let t1 = crate::syntax::print_program(&p1);
    let p2 = match crate::pipeline::parse(&t1) {
        Ok(p) => p,
        Err(d) => {
            return Verdict::new(
                Outcome::Disagree,
                format!("the printed program does not parse: error[{}]", d.code),
            );
        }
    };
    let t2 = crate::syntax::print_program(&p2);
    if t1 != t2 {
        return Verdict::new(Outcome::Disagree, "print ∘ parse is not idempotent");
    }
    Verdict::ok()
}

/// The entry and its arguments, or the verdict on why not.
fn entry_and_args(
    session: &Session,
    name: &str,
    input: Option<&str>,
) -> Result<(Rc<Entry>, Vec<Value>), Verdict> {
    let entry = session.entry(name).map_err(|d| fail(d, Subject::Program))?;
    let args = entry
        .read_input(input)
        .map_err(|d| fail(d, Subject::Program))?;
    Ok((entry, args))
}

fn run(src: &str, case: &Case, input: Option<&str>, engine: Engine) -> Verdict {
    let session = match Session::load(src) {
        Ok(s) => s,
        Err(d) => return fail(d, Subject::Program),
    };
    let (entry, args) = match entry_and_args(&session, &case.entry, input) {
        Ok(x) => x,
        Err(v) => return v,
    };
    match entry.run_on(engine, args, limits(case.fuel)) {
        Ok(_) => Verdict::ok(),
        Err(e) => fail(Diagnostic::from(&e), run_subject(&e, src)),
    }
}

/// The session of a derivative command (`grad`, …): no rule files, the
/// optimiser's steps not replayed (as the command line runs it).
fn grad(
    src: &str,
    case: &Case,
    input: Option<&str>,
    kind: &GradKind,
    wrt: &str,
    mode: Mode,
    engine: Engine,
) -> Verdict {
    let session = match Session::load(src) {
        Ok(s) => s,
        Err(d) => return fail(d, Subject::Program),
    };
    let plan = match Plan::new(
        &session,
        &case.entry,
        wrt,
        mode,
        engine,
        Checkpointing::default(),
    ) {
        Ok(p) => p,
        Err(d) => return fail(d, Subject::Program),
    };
    if *kind == GradKind::Grad && plan.base.result != crate::ir::Type::Double {
        // `not-scalar`, at the entry's span.
        return Verdict::new(Outcome::CleanError, "not-scalar");
    }
    let args = match plan.base.read_input(input) {
        Ok(a) => a,
        Err(d) => return fail(d, Subject::Program),
    };
    if engine == Engine::Native && !mode.runs_natively() {
        return Verdict::new(Outcome::CleanError, "usage");
    }
    let lim = limits(case.fuel);
    if let GradKind::Vjp(w) = kind {
        let w = match serde_json::from_str::<serde_json::Value>(w) {
            Ok(j) => j,
            Err(_) => return Verdict::new(Outcome::CleanError, "invalid-json"),
        };
        let w = match crate::interchange::value_from_json(
            &w,
            &plan.base.result,
            "cotangent",
            plan.base.span,
        ) {
            Ok(w) => w,
            Err(e) => return fail(Diagnostic::from(&e), Subject::Program),
        };
        return match plan.vjp(args, &w, engine, lim) {
            Ok(_) => Verdict::ok(),
            Err(e) => fail(Diagnostic::from(&e), derived(&Diagnostic::from(&e), engine)),
        };
    }
    let got = plan.columns(args.clone(), engine, lim);
    if engine == Engine::Native {
        // Native code must give the evaluator's columns.
        let reference = Plan::new(
            &session,
            &case.entry,
            wrt,
            mode,
            Engine::Eval,
            Checkpointing::default(),
        )
        .map(|p| p.columns(args, Engine::Eval, lim));
        if let Ok(e) = reference
            && let Some(v) = compare_columns("gradient", &e, &got)
        {
            return v;
        }
    }
    match got {
        Ok(_) => Verdict::ok(),
        Err(e) => {
            let d = Diagnostic::from(&e);
            let s = derived(&d, engine);
            fail(d, s)
        }
    }
}

/// The subject of an error of a derivative computation: native code's,
/// or the evaluator's (in the user's program when located there, else in
/// a derivative program).
fn derived(d: &Diagnostic, engine: Engine) -> Subject {
    if matches!(d.span.source, SourceId::MAIN | SourceId::PRELUDE) {
        Subject::Program
    } else if engine == Engine::Native {
        Subject::Native
    } else {
        Subject::Derived
    }
}

/// A disagreement between the evaluator's result `e` and native code's
/// `n`, if there is one (`None` also when the evaluator ran out of fuel).
fn compare_columns(
    what: &str,
    e: &Result<Columns, RunError>,
    n: &Result<Columns, RunError>,
) -> Option<Verdict> {
    match (e, n) {
        (Err(a), _) if a.is_resource_limit() => None,
        (Ok(a), Ok(b)) => {
            if !values_agree(&a.value, &b.value, 1e-12) {
                return Some(Verdict::new(
                    Outcome::Disagree,
                    format!(
                        "{what} value: the evaluator gives {}, native code {}",
                        a.value, b.value
                    ),
                ));
            }
            let same = a.columns.len() == b.columns.len()
                && a.columns.iter().zip(&b.columns).all(|(c, d)| {
                    c.len() == d.len() && c.iter().zip(d).all(|(x, y)| doubles_agree(*x, *y, 1e-12))
                });
            (!same).then(|| {
                Verdict::new(
                    Outcome::Disagree,
                    format!(
                        "{what}: the evaluator gives {:?}, native code {:?}",
                        a.columns, b.columns
                    ),
                )
            })
        }
        (Err(a), Err(b)) if a.code() == b.code() => None,
        (a, b) => Some(Verdict::new(
            Outcome::Disagree,
            format!(
                "{what}: the evaluator gives {}, native code {}",
                show(a),
                show(b)
            ),
        )),
    }
}

fn show<T>(r: &Result<T, RunError>) -> String {
    match r {
        Ok(_) => "a value".to_string(),
        Err(e) => format!("⊥ {} ({e})", e.code()),
    }
}

/// `opt`, and refinement: where the entry is defined on the input, the
/// optimised entry is defined and equal.
fn opt(src: &str, case: &Case, input: Option<&str>, check: bool) -> Verdict {
    let session = match Session::load(src) {
        Ok(s) => s.with_options(OptOptions {
            check,
            ..OptOptions::default()
        }),
        Err(d) => return fail(d, Subject::Program),
    };
    let artefact = Artefact::entry(&case.entry);
    let o = match session.optimise(&artefact, false) {
        Ok(o) => o,
        Err(d) => return fail(d, Subject::Program),
    };
    let Ok((entry, args)) = entry_and_args(&session, &case.entry, input) else {
        // No input for it: the optimisation itself was the test.
        return Verdict::ok();
    };
    let lim = limits(case.fuel);
    let Ok((a, _)) = entry.run(args.clone(), lim, &mut |_, _| {}) else {
        return Verdict::ok();
    };
    // A non-finite result is an IEEE overflow, outside the contract
    // (reals in the specification; `difftest` skips such points too).
    let mut xs = Vec::new();
    crate::eval::flatten(&a, &mut xs);
    if xs.iter().any(|x| !x.is_finite()) {
        return Verdict::ok();
    }
    // The optimised program may take other steps: more fuel.
    let more = limits(case.fuel.saturating_mul(10));
    let b = o.entry.run(args.clone(), more, &mut |_, _| {});
    if let Ok((b, _)) = &b
        && values_agree(&a, b, 1e-9)
    {
        return Verdict::ok();
    }
    // Rounding of the `ieee-inexact` rules: the optimiser without them.
    let exact = match session.optimise(&artefact, true) {
        Ok(o) => o,
        Err(d) => return fail(d, Subject::Program),
    };
    let c = exact.entry.run(args, more, &mut |_, _| {});
    match (&b, &c) {
        // Rounding, or a ⊥ only binary64 has (a zero divisor that is an
        // underflow of an `ieee-inexact` rule's right side): the
        // optimiser without those rules agrees (spec/rules-format.md §7.1).
        (_, Ok((c, _))) if values_agree(&a, c, 1e-9) => Verdict::ok(),
        (Ok((b, _)), _) => Verdict::new(
            Outcome::Disagree,
            format!("the program gives {a}, the optimised program {b}"),
        ),
        (Err(e), _) => Verdict::new(
            Outcome::Disagree,
            format!(
                "the optimised program is ⊥ {} ({e}) where the program gives {a}",
                e.code()
            ),
        ),
    }
}

/// Native code against the evaluator, on the entry or on a derivative.
fn native(src: &str, case: &Case, input: Option<&str>, wrt: Option<&(String, Mode)>) -> Verdict {
    let session = match Session::load(src) {
        Ok(s) => s,
        Err(d) => return fail(d, Subject::Program),
    };
    let lim = limits(case.fuel);
    if let Some((w, mode)) = wrt {
        let plans = (
            Plan::new(
                &session,
                &case.entry,
                w,
                *mode,
                Engine::Eval,
                Checkpointing::default(),
            ),
            Plan::new(
                &session,
                &case.entry,
                w,
                *mode,
                Engine::Native,
                Checkpointing::default(),
            ),
        );
        let (pe, pn) = match plans {
            (Ok(a), Ok(b)) => (a, b),
            (Err(d), _) | (_, Err(d)) => return fail(d, Subject::Program),
        };
        let args = match pe.base.read_input(input) {
            Ok(a) => a,
            Err(d) => return fail(d, Subject::Program),
        };
        let e = pe.columns(args.clone(), Engine::Eval, lim);
        let n = pn.columns(args, Engine::Native, lim);
        if let Some(v) = compare_columns(&format!("{} derivative", mode.name()), &e, &n) {
            return v;
        }
        return match n {
            Ok(_) => Verdict::ok(),
            Err(e) => {
                let d = Diagnostic::from(&e);
                let s = derived(&d, Engine::Native);
                fail(d, s)
            }
        };
    }
    let (entry, args) = match entry_and_args(&session, &case.entry, input) {
        Ok(x) => x,
        Err(v) => return v,
    };
    let e = entry.run_on(Engine::Eval, args.clone(), lim);
    if matches!(&e, Err(x) if x.code() == "out-of-fuel") {
        return Verdict::new(Outcome::CleanError, "out-of-fuel");
    }
    let n = entry.run_on(Engine::Native, args.clone(), lim);
    let verdict = compare_runs(&e, &n, src);
    if verdict.outcome > Outcome::CleanError {
        return verdict;
    }
    // Again under a small `--max-elements` (E-Limit), which most generated
    // programs' arrays pass: where the evaluator is not stopped by it,
    // native code must not be either (spec/semantics.md §3.8).
    let small = Limits {
        elements: SMALL_ELEMENTS,
        ..lim
    };
    let e = entry.run_on(Engine::Eval, args.clone(), small);
    if matches!(&e, Err(x) if x.code() == "out-of-fuel") {
        return verdict;
    }
    let n = entry.run_on(Engine::Native, args, small);
    std::cmp::max_by_key(verdict, compare_runs(&e, &n, src), |v| v.outcome)
}

/// The element limit of the native oracle's second run.
const SMALL_ELEMENTS: u64 = 3;

/// The evaluator's run `e` of the user's entry in `src` against native
/// code's `n`: the same value, or the same ⊥ code, both clean. Where the
/// evaluator meets a resource limit (`array-too-large` here: the caller
/// does not run native code when it is out of fuel), there is no verdict
/// on the values (spec/semantics.md §9, "Resource limits"): native code
/// may return the program's value (an array it fuses is never made, so
/// never too large) or stop, cleanly. Where the evaluator stops at a ⊥,
/// native code may run out of fuel instead (§3.8); where it returns a
/// value, native code must too.
fn compare_runs<T>(
    e: &Result<(Value, T), RunError>,
    n: &Result<(Value, T), RunError>,
    src: &str,
) -> Verdict {
    match (e, n) {
        (Ok((a, _)), Ok((b, _))) => {
            if values_agree(a, b, 1e-12) {
                Verdict::ok()
            } else {
                Verdict::new(
                    Outcome::Disagree,
                    format!("the evaluator gives {a}, native code {b}"),
                )
            }
        }
        (Err(a), Ok(_)) if a.is_resource_limit() => Verdict::new(Outcome::CleanError, a.code()),
        // A loop charged whole when it starts: where the evaluator stops at
        // a ⊥ early in it, native code may refuse to start it
        // (spec/semantics.md §3.8; Note [Native limits]).
        (Err(_), Err(b)) if b.code() == "out-of-fuel" => {
            Verdict::new(Outcome::CleanError, b.code())
        }
        (Err(a), Err(b)) if a.code() == b.code() || a.is_resource_limit() => {
            // Both must be clean (with a location, Note [Known defects]).
            let va = fail(Diagnostic::from(a), run_subject(a, src));
            let vb = fail(Diagnostic::from(b), run_subject(b, src));
            std::cmp::max_by_key(va, vb, |v| v.outcome)
        }
        _ => Verdict::new(
            Outcome::Disagree,
            format!("the evaluator gives {}, native code {}", show(e), show(n)),
        ),
    }
}

/// The rule-file commands: `rules list`, `rules check`, `opt --rules`.
fn rules(case: &Case) -> Verdict {
    let Some((name, bytes)) = &case.rules else {
        return Verdict::new(Outcome::Unclean, "a rules case without a rule file");
    };
    let Ok(text) = std::str::from_utf8(bytes) else {
        // The command line cannot read it as text: `rules-file`.
        return Verdict::new(Outcome::CleanError, "rules-file");
    };
    let files = vec![RuleFile {
        path: format!("{}/{name}", super::case::RULES_DIR),
        text: text.to_string(),
    }];
    let loaded = match crate::opt::load(Some(&files)) {
        Ok(r) => r,
        Err(e) => {
            let d = Diagnostic {
                code: e.code,
                message: e.render(),
                span: crate::diagnostic::Span::generated(),
                notes: Vec::new(),
            };
            return fail(d, Subject::Rules);
        }
    };
    match &case.command {
        Command::RulesList => Verdict::ok(),
        Command::RulesCheck { family } => {
            let chosen: Vec<_> = loaded.into_iter().filter(|r| &r.family == family).collect();
            let opts = crate::rulecheck::Options {
                cases: 3,
                seed: 0,
                depth: 2,
                fuel: case.fuel,
            };
            // Mutated rules may well be unsound: only a panic or a hang
            // is a failure here.
            let _ = crate::rulecheck::check_rules(&chosen, &opts);
            Verdict::ok()
        }
        _ => {
            let Ok(src) = std::str::from_utf8(&case.program) else {
                return Verdict::new(Outcome::CleanError, "invalid-utf8");
            };
            let session = match Session::load(src) {
                Ok(s) => s.with_options(OptOptions {
                    rules: Some(files),
                    check: true,
                    ..OptOptions::default()
                }),
                Err(d) => return fail(d, Subject::Program),
            };
            match session.optimise(&Artefact::entry(&case.entry), false) {
                Ok(_) => Verdict::ok(),
                Err(d) => {
                    // Errors of the optimiser with a mutated rule set
                    // concern the rules unless located in the program.
                    let s = if matches!(d.span.source, SourceId::MAIN | SourceId::PRELUDE) {
                        Subject::Program
                    } else {
                        Subject::Rules
                    };
                    let v = fail(d.clone(), s);
                    if v.outcome == Outcome::Unclean && s == Subject::Rules && is_code(d.code) {
                        // The optimiser's own errors (`opt-check-failed`,
                        // …) concern the whole rule set: no line.
                        if !is_internal(d.code, &d.message) && d.code.starts_with("opt-") {
                            return Verdict::new(Outcome::CleanError, d.code);
                        }
                    }
                    v
                }
            }
        }
    }
}
