//! `check`, `print` and `run`: a program's types, its core form, and its
//! value on the reference evaluator or native code.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use super::args::RunArgs;
use super::{Failure, Sources, err_json, input_text, json, out, out_json, stats_line};
use crate::diagnostic::Diagnostic;
use crate::pipeline::{self, Engine, Session};
use crate::syntax::print_expr;

/// `check`: the type of every definition.
pub fn check(file: &Path, prelude: bool) -> Result<(), Failure> {
    let src = Sources::read(file)?;
    let session = Session::load(&src.main_src).map_err(|d| src.fail(&d))?;
    let mut text = String::new();
    for (i, d) in session.program().defs.iter().enumerate() {
        if prelude || !d.prelude {
            text.push_str(&format!(
                "{} : {}\n",
                d.name,
                session.typing().scheme_string(i)
            ));
        }
    }
    out(&text)
}

/// `print`: the desugared core program.
pub fn print(file: &Path) -> Result<(), Failure> {
    let src = Sources::read(file)?;
    let prog = pipeline::parse(&src.main_src).map_err(|d| src.fail(&d))?;
    out(&crate::syntax::print_program(&prog))
}

/// `run`: the entry's value.
pub fn run(args: RunArgs) -> Result<(), Failure> {
    let native = args.engine.native();
    let src = Sources::read(&args.file)?;
    let fail = |d: &Diagnostic| src.fail(d);
    let input = input_text(&args.input)?;
    let session = Session::load(&src.main_src)
        .map_err(|d| fail(&d))?
        .with_native(native);
    let entry = session.entry(&args.entry).map_err(|d| fail(&d))?;
    let values = entry.read_input(input.as_deref()).map_err(|d| fail(&d))?;
    if args.engine.engine == Engine::Native {
        let native = entry.native().map_err(|e| fail(&Diagnostic::from(&e)))?;
        let start = Instant::now();
        let limits = crate::codegen::NativeLimits::of(args.engine.limits());
        // An error with no failure site of its own is located at the
        // entry (`Entry::locate`), as on every other path.
        let v = native.call_with(&values, limits).map_err(|e| {
            let e = entry.locate(crate::pipeline::RunError::from(e));
            fail(&Diagnostic::from(&e))
        })?;
        let run = start.elapsed();
        out_json(&v)?;
        if args.stats {
            err_json(&serde_json::json!({
                "engine": "native",
                "compile_ms": json::rounded(native.compile_time().as_secs_f64() * 1e3, 3),
                "run_ms": json::rounded(run.as_secs_f64() * 1e3, 3),
                "parallel_loops": native.parallel_loops(),
                "parallel_runs": native.parallel_runs(),
            }));
        }
        if let Some(n) = args.repeat {
            // Compiled code alone when its arguments convert once.
            let (best, what) = match entry.time_native(&values, args.engine.limits(), n) {
                Some(t) => (t.map_err(|e| fail(&Diagnostic::from(&e)))?, "native call"),
                None => (
                    super::min_ms(n, &mut || {
                        native.call_with(&values, limits).map(|_| ()).map_err(|e| {
                            let e = entry.locate(crate::pipeline::RunError::from(e));
                            fail(&Diagnostic::from(&e))
                        })
                    })?,
                    "native call with its arguments converted",
                ),
            };
            super::repeat_line(n, best, what);
        }
        return Ok(());
    }
    let limits = args.engine.limits();
    let start = Instant::now();
    let result = if args.trace {
        let stderr = std::io::stderr();
        let mut lock = stderr.lock();
        let prog = &entry.program;
        entry.run(values.clone(), limits, &mut |ev, _| {
            let focus = ev
                .focus
                .map(|e| one_line(&print_expr(prog, e), 100))
                .unwrap_or_default();
            let _ = writeln!(lock, "{:>8}  {:<14} {}", ev.step, ev.rule, focus);
        })
    } else {
        entry.run(values.clone(), limits, &mut |_, _| {})
    };
    let elapsed = start.elapsed();
    let (v, stats) = result.map_err(|e| fail(&Diagnostic::from(&e)))?;
    out_json(&v)?;
    if args.stats {
        stats_line(stats, elapsed);
    }
    if let Some(n) = args.repeat {
        let best = super::min_ms(n, &mut || {
            entry
                .run(values.clone(), limits, &mut |_, _| {})
                .map(|_| ())
                .map_err(|e| fail(&Diagnostic::from(&e)))
        })?;
        super::repeat_line(n, best, "evaluator run");
    }
    Ok(())
}

/// `s` on one line, cut to `max` characters.
fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        let mut t: String = flat.chars().take(max).collect();
        t.push_str(" …");
        t
    } else {
        flat
    }
}
