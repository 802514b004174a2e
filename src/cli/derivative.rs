//! `grad`, `jacobian`, `vjp`, `ad` and `compile`: derivatives of an entry in
//! a gradient mode, as values, as printed programs, or as object files.
//! Each loads the program once into a session and asks `gradient` for the
//! mode's programs.

use std::path::Path;
use std::rc::Rc;
use std::time::Instant;

use super::args::{CheckpointArg, CompileArgs, CompileMode, DerivArgs, GateArgs, RulesArg};
use super::{Failure, Sources, input_text, out, out_json, rule_files, stats_line, write};
use crate::diagnostic::{Diagnostic, Span};
use crate::eval::Limits;
use crate::eval::Value;
use crate::gradient::{How, Mode, Plan};
use crate::ir::Type;
use crate::pipeline::{Engine, OptOptions, RunError, Session};

/// The session of a command: the program loaded once, with the
/// optimiser's options for `--mode fwd-opt` (`--rules DIR`;
/// `FSMOOTH_OPT_CHECK=1` turns on `opt --check` for every optimisation,
/// as the test suite does, and so does the validation gate).
pub(super) fn session(src: &Sources, rules: &RulesArg) -> Result<Session, Failure> {
    checked_session(src, rules, false)
}

fn checked_session(src: &Sources, rules: &RulesArg, check: bool) -> Result<Session, Failure> {
    let opts = OptOptions {
        rules: rule_files(rules.dir.as_deref())?,
        check: check || check_from_env(),
        ..OptOptions::default()
    };
    let s = Session::load(&src.main_src).map_err(|d| src.fail(&d))?;
    Ok(s.with_options(opts))
}

/// `FSMOOTH_OPT_CHECK=1`.
pub(super) fn check_from_env() -> bool {
    std::env::var_os("FSMOOTH_OPT_CHECK").is_some_and(|v| v == "1")
}

/// The validation gate (`crate::gate`) for `entry` or its derivative, before
/// native code is emitted (`what`: "emitted") or run: an error that names
/// the inputs and values when it fails, a warning when no input could be
/// checked.
struct Gate<'a> {
    src: &'a Sources,
    session: &'a Session,
    entry: &'a str,
    checkpoint: &'a CheckpointArg,
    args: &'a GateArgs,
}

impl<'a> Gate<'a> {
    /// The gate of a derivative command (`grad`, `jacobian`, `vjp`).
    fn of(src: &'a Sources, session: &'a Session, args: &'a DerivArgs) -> Gate<'a> {
        Gate {
            src,
            session,
            entry: &args.entry,
            checkpoint: &args.checkpoint,
            args: &args.gate,
        }
    }

    fn check(
        &self,
        derivative: Option<(Mode, &str)>,
        input: Option<&[Value]>,
        limits: crate::eval::Limits,
        what: &str,
    ) -> Result<(), Failure> {
        let Gate {
            src,
            session,
            entry,
            checkpoint,
            args,
        } = *self;
        let base = session.entry(entry).map_err(|d| src.fail(&d))?;
        let mut samples = Vec::new();
        // The command's own input, when it is small enough for the evaluator
        // and finite differences to be cheap. Where it is ⊥, the command's run
        // says so: no warning then.
        let mut own_input = false;
        if let Some(values) = input {
            let mut xs = Vec::new();
            for v in values {
                crate::eval::flatten(v, &mut xs);
            }
            if xs.len() <= 256 {
                samples.push(("the input".to_string(), values.to_vec()));
                own_input = true;
            }
        }
        for (k, s) in args.sample_inputs.iter().enumerate() {
            let text = if s.trim_start().starts_with(['{', '[']) {
                s.clone()
            } else {
                std::fs::read_to_string(s)
                    .map_err(|e| Failure::Error(format!("error[io]: --sample-input {s}: {e}\n")))?
            };
            let values = base.read_input(Some(&text)).map_err(|d| src.fail(&d))?;
            samples.push((format!("--sample-input {}", k + 1), values));
        }
        let subject = crate::gate::Subject {
            session,
            entry,
            derivative,
            checkpointing: checkpoint.policy,
        };
        let opts = crate::gate::Options {
            samples,
            generated: args.gate_samples,
            // The gate's own budget: a sample the evaluator cannot finish in
            // it is left unchecked, however much fuel the command has.
            limits: crate::eval::Limits {
                fuel: limits.fuel.min(crate::gate::Options::default().limits.fuel),
                ..limits
            },
            native_rho: match session.native_options().fp {
                crate::codegen::FpContract::Strict => crate::difftest::NATIVE_RHO,
                crate::codegen::FpContract::Relaxed => crate::difftest::RELAXED_RHO,
            },
            ..crate::gate::Options::default()
        };
        // Under the relaxed contract a sum that cancels may differ by more
        // than the gate's ρ and still be within §7's bound.
        let relaxed = if session.native_options().fp == crate::codegen::FpContract::Relaxed {
            "\n  = note: under --fp relaxed a regrouped sum may differ from the evaluator's by up to 2γₙ Σ|t| (spec/semantics.md §7), which the gate's ρ ≤ 1e-9 does not allow where the sum cancels; --fp strict gives the evaluator's bits"
        } else {
            ""
        };
        match crate::gate::check(&subject, &opts) {
            Err(why) => Err(Failure::Error(format!(
                "error[gate-failed]: {why}\n  = note: native code was not {what}; the optimiser's steps were replayed and the derivative checked on sample inputs (README, \"The validation gate\"); --no-gate skips the gate{relaxed}\n"
            ))),
            Ok(p) => {
                if p.checked == 0 && !own_input {
                    let mut why = p.undefined.join("; ");
                    if why.is_empty() {
                        why = "no input could be generated for the parameter types".into();
                    }
                    eprintln!(
                        "warning[gate-unchecked]: the validation gate compared nothing for `{entry}`: {why}; give inputs in its domain with --sample-input"
                    );
                }
                Ok(())
            }
        }
    }
}

/// `--engine native` with a mode that has no program is a usage error.
pub(super) fn native_runs(mode: Mode, engine: Engine) -> Result<(), Failure> {
    if engine == Engine::Native && !mode.runs_natively() {
        return Err(Failure::usage(format!(
            "--engine native runs the derivative programs of modes fwd, fwd-opt, fwd-vec, fwd-rows and rev; `{}` is an interpreter on the evaluator",
            mode.name()
        )));
    }
    Ok(())
}

/// `grad` (`jacobian`: the whole Jacobian).
pub fn grad(args: DerivArgs, jacobian: bool) -> Result<(), Failure> {
    let native = args.engine.native();
    let src = Sources::read(&args.file)?;
    let fail = |d: &Diagnostic| src.fail(d);
    let input = input_text(&args.input)?;
    let engine = args.engine.engine;
    let gated = engine == Engine::Native && !args.gate.no_gate;
    let session = checked_session(&src, &args.rules, gated)?.with_native(native);
    // Several independent variables (`--wrt a,b`): one plan each, the
    // derivatives printed as an object keyed by parameter.
    let names: Vec<&str> = args.wrt.split(',').map(str::trim).collect();
    let mut plans = Vec::new();
    for name in &names {
        plans.push(
            Plan::new(
                &session,
                &args.entry,
                name,
                args.mode,
                engine,
                args.checkpoint.policy,
            )
            .map_err(|d| fail(&d))?,
        );
    }
    let plan = &plans[0];
    if !jacobian && plan.base.result != Type::Double {
        return Err(fail(&Diagnostic {
            code: "not-scalar",
            message: format!(
                "`grad` needs a Double-valued entry; `{}` returns {} (use `jacobian`)",
                args.entry, plan.base.result
            ),
            span: plan.base.span,
            notes: Vec::new(),
        }));
    }
    let values = plan
        .base
        .read_input(input.as_deref())
        .map_err(|d| fail(&d))?;
    native_runs(args.mode, engine)?;
    if gated {
        let gate = Gate::of(&src, &session, &args);
        for name in &names {
            gate.check(
                Some((args.mode, name)),
                Some(&values),
                args.engine.limits(),
                "run",
            )?;
        }
    }
    let start = Instant::now();
    let key = if jacobian { "jacobian" } else { "gradient" };
    let mut value = serde_json::Value::Null;
    let mut derivs = serde_json::Map::new();
    let mut stats = crate::eval::Stats::default();
    for (name, plan) in names.iter().zip(&plans) {
        let like = values[plan.wrt].clone();
        let cols = plan
            .columns(values.clone(), engine, args.engine.limits())
            .map_err(|e| fail(&Diagnostic::from(&e)))?;
        stats.steps += cols.stats.steps;
        stats.ops += cols.stats.ops;
        let d = if jacobian {
            serde_json::json!(cols.jacobian())
        } else {
            serde_json::json!(cols.gradient(&like))
        };
        value = serde_json::json!(cols.value);
        derivs.insert((*name).to_string(), d);
    }
    let elapsed = start.elapsed();
    let derivs = if names.len() == 1 {
        derivs.remove(names[0]).expect("one derivative")
    } else {
        serde_json::Value::Object(derivs)
    };
    out_json(&serde_json::json!({"value": value, key: derivs}))?;
    if args.stats {
        stats_line(stats, elapsed);
    }
    if let Some(n) = args.repeat {
        let limits = args.engine.limits();
        let timed = time_program(plan, engine, &values, limits, n);
        let (best, what) = match timed {
            Some(t) => (
                t.map_err(|e| fail(&Diagnostic::from(&e)))?,
                "derivative program",
            ),
            None => (
                super::min_ms(n, &mut || {
                    plan.columns(values.clone(), engine, limits)
                        .map(|_| ())
                        .map_err(|e| fail(&Diagnostic::from(&e)))
                })?,
                "columns",
            ),
        };
        super::repeat_line(n, best, what);
    }
    Ok(())
}

/// The fastest of `n` native runs of `plan`'s derivative program alone,
/// on `values` converted once (`Entry::time_native`), when it takes the
/// entry's arguments; `None` otherwise (then the caller times everything
/// the command computes).
pub(super) fn time_program(
    plan: &Plan,
    engine: Engine,
    values: &[Value],
    limits: Limits,
    n: u32,
) -> Option<Result<f64, RunError>> {
    let program = match &plan.how {
        How::Duals(p) | How::Tangents(p) | How::Rows(p) => Some(p),
        How::Reverse { rev, seeded: false } => Some(rev),
        _ => None,
    };
    program
        .filter(|_| engine == Engine::Native)
        .and_then(|p| p.time_native(values, limits, n))
}

/// `vjp`: wᵀJ for the cotangent `w` given as JSON.
pub fn vjp(args: DerivArgs, cotangent: &str) -> Result<(), Failure> {
    let native = args.engine.native();
    let src = Sources::read(&args.file)?;
    let fail = |d: &Diagnostic| src.fail(d);
    let input = input_text(&args.input)?;
    let engine = args.engine.engine;
    let gated = engine == Engine::Native && !args.gate.no_gate;
    let session = checked_session(&src, &args.rules, gated)?.with_native(native);
    let plan = Plan::new(
        &session,
        &args.entry,
        &args.wrt,
        args.mode,
        engine,
        args.checkpoint.policy,
    )
    .map_err(|d| fail(&d))?;
    let values = plan
        .base
        .read_input(input.as_deref())
        .map_err(|d| fail(&d))?;
    native_runs(args.mode, engine)?;
    if gated {
        Gate::of(&src, &session, &args).check(
            Some((args.mode, &args.wrt)),
            Some(&values),
            args.engine.limits(),
            "run",
        )?;
    }
    let w = serde_json::from_str::<serde_json::Value>(cotangent)
        .map_err(|e| {
            fail(&Diagnostic {
                code: "invalid-json",
                message: format!("--cotangent is not valid JSON: {e}"),
                span: Span::whole_file(),
                notes: Vec::new(),
            })
        })
        .and_then(|j| {
            crate::interchange::value_from_json(&j, &plan.base.result, "cotangent", plan.base.span)
                .map_err(|e| fail(&Diagnostic::from(&e)))
        })?;
    let start = Instant::now();
    let (value, g, stats) = plan
        .vjp(values, &w, engine, args.engine.limits())
        .map_err(|e| fail(&Diagnostic::from(&e)))?;
    let elapsed = start.elapsed();
    out_json(&serde_json::json!({"value": value, "vjp": g}))?;
    if args.stats {
        stats_line(stats, elapsed);
    }
    Ok(())
}

/// `ad`: the mode's derivative program, printed.
pub fn ad(
    file: &Path,
    entry: &str,
    wrt: &str,
    mode: Mode,
    rules: RulesArg,
    checkpoint: CheckpointArg,
) -> Result<(), Failure> {
    let src = Sources::read(file)?;
    let fail = |d: &Diagnostic| src.fail(d);
    let session = session(&src, &rules)?;
    let k = session.param(entry, wrt).map_err(|d| fail(&d))?;
    let Some(a) = mode.program(Rc::from(entry), k, checkpoint.policy) else {
        return Err(Failure::usage(
            "`ad` prints source-to-source programs: --mode fwd, fwd-opt, fwd-vec, fwd-rows or rev",
        ));
    };
    let program = session.get(&a).map_err(|d| fail(&d))?;
    out(&crate::syntax::print_program(&program.program))
}

/// `compile`: the entry, or the program of a mode, as an object file and a
/// C header.
pub fn compile(args: CompileArgs) -> Result<(), Failure> {
    let src = Sources::read(&args.file)?;
    let fail = |d: &Diagnostic| src.fail(d);
    let mode_name = clap::ValueEnum::to_possible_value(&args.mode)
        .map(|v| v.get_name().to_string())
        .unwrap_or_default();
    let wrt = match (args.mode.mode(), &args.wrt) {
        (None, None) => "",
        (None, Some(_)) => {
            return Err(Failure::usage(
                "--wrt needs --mode fwd, fwd-opt, fwd-vec, fwd-rows or rev",
            ));
        }
        (Some(_), Some(w)) => w.as_str(),
        (Some(_), None) => {
            return Err(Failure::usage(format!(
                "--mode {mode_name} needs --wrt NAME (the independent variable)"
            )));
        }
    };
    // The gate checks the JIT's code under the object's contract, one
    // thread as the object.
    let session = checked_session(&src, &args.rules, !args.gate.no_gate)?.with_native(
        crate::codegen::NativeOptions {
            fp: args.fp,
            threads: 1,
        },
    );
    let base = session.entry(&args.entry).map_err(|d| fail(&d))?;
    let program = match args.mode.mode() {
        None => base.clone(),
        Some(mode) => {
            let k = session.param(&args.entry, wrt).map_err(|d| fail(&d))?;
            let a = mode
                .program(Rc::from(args.entry.as_str()), k, args.checkpoint.policy)
                .ok_or_else(|| Failure::usage("this mode has no program"))?;
            session.get(&a).map_err(|d| fail(&d))?
        }
    };
    let suffix = match args.mode {
        CompileMode::Objective => "",
        CompileMode::Fwd => "_fwd",
        CompileMode::FwdOpt => "_fwd_opt",
        CompileMode::FwdVec => "_fwd_vec",
        CompileMode::FwdRows => "_fwd_rows",
        CompileMode::Rev => "_rev",
    };
    // The derivative programs take the entry's parameters (reverse mode
    // then the result's cotangent): give them the entry's names.
    let params: Vec<(String, Type)> = program
        .params
        .iter()
        .enumerate()
        .map(|(k, (_, t))| {
            let name = base
                .params
                .get(k)
                .map_or_else(|| "cotangent".to_string(), |(n, _)| n.clone());
            (name, t.clone())
        })
        .collect();
    let symbol = args
        .symbol
        .clone()
        .unwrap_or_else(|| crate::codegen::default_symbol(&args.entry, suffix));
    let mut origin = format!(
        "{}, entry `{}`, mode {mode_name}",
        args.file.display(),
        args.entry
    );
    if !wrt.is_empty() {
        origin.push_str(&format!(" with respect to `{wrt}`"));
    }
    if args.fp == crate::codegen::FpContract::Relaxed {
        origin.push_str(
            "; the relaxed floating-point contract (spec/semantics.md section 7: sums regrouped, log and exp within 2 ulp)",
        );
    }
    let options = crate::codegen::AotOptions {
        symbol,
        origin,
        listing: args.listing.is_some(),
        fp: args.fp,
    };
    if !args.gate.no_gate {
        let gate = Gate {
            src: &src,
            session: &session,
            entry: &args.entry,
            checkpoint: &args.checkpoint,
            args: &args.gate,
        };
        gate.check(
            args.mode.mode().map(|m| (m, wrt)),
            None,
            crate::gate::Options::default().limits,
            "emitted",
        )?;
    }
    let code = program
        .object(&params, &options)
        .map_err(|e| fail(&Diagnostic::from(&e)))?;
    write(&args.output, &code.object)?;
    if let Some(h) = &args.header {
        write(h, code.header.as_bytes())?;
    }
    if let (Some(path), Some(text)) = (&args.listing, &code.listing) {
        write(path, text.as_bytes())?;
    }
    Ok(())
}
