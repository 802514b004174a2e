//! The validation gate before native code (README, "The validation
//! gate"): before `fsmooth compile` emits an object, and before `grad`,
//! `jacobian` and `vjp` run a derivative on `--engine native`, the
//! derivative is checked on sample inputs — the user's (`--sample-input`)
//! or generated from the parameter types — against reverse mode (reverse
//! mode itself against forward mode) and central finite differences (where
//! the stencil is smooth), all on the reference evaluator, and native code is
//! checked against the evaluator on the same inputs. The optimiser's
//! steps are replayed too (`opt --check`): the caller's session has
//! `OptOptions::check` on. A disagreement stops the emission with a report
//! that names the inputs and the values.
//!
//! Note [What the gate catches]. The replay catches a step that is not an
//! instance of its rule; the comparisons catch an unsound rule (its steps
//! are valid instances: only the values show it), a wrong AD rule, and a
//! lowering bug. The derivatives are compared with ρ ≤ 1e-9 among
//! themselves (they compute the same reals in different orders) and with
//! finite differences within ten times the stencil's own truncation
//! estimate (|D(h) − D(h/2)|) plus 1e-6; native code with the evaluator
//! within ρ ≤ 1e-12 (strict mode gives the same bits; 1e-9 under the
//! relaxed contract, spec/semantics.md §7).

use std::rc::Rc;

use crate::diagnostic::Diagnose;
use crate::difftest::{largest_magnitude, values_agree};
use crate::eval::{Limits, Value};
use crate::gradient::{Columns, Mode, Plan, finite_differences_scaled, kink, step};
use crate::ir::Type;
use crate::numeric::rho;
use crate::pipeline::{Checkpointing, Engine, Entry, RunError, Session};

/// What the gate checks: `entry` itself, or its derivative in `mode` with
/// respect to `wrt`.
pub struct Subject<'a> {
    pub session: &'a Session,
    pub entry: &'a str,
    pub derivative: Option<(Mode, &'a str)>,
    pub checkpointing: Checkpointing,
}

/// The gate's settings.
#[derive(Clone, Debug)]
pub struct Options {
    /// Inputs to check at, besides the generated ones, each with how a
    /// report names it.
    pub samples: Vec<(String, Vec<Value>)>,
    /// How many inputs to generate from the parameter types.
    pub generated: usize,
    pub seed: u64,
    pub limits: Limits,
    /// How far native results may be from the evaluator's (ρ): 1e-12
    /// under the strict floating-point contract, which gives the same
    /// bits; the relaxed contract's reassociated sums need more
    /// (spec/semantics.md §7).
    pub native_rho: f64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            samples: Vec::new(),
            generated: 3,
            seed: 0x5eed,
            limits: Limits {
                fuel: 2_000_000,
                elements: Limits::ELEMENTS,
            },
            native_rho: crate::difftest::NATIVE_RHO,
        }
    }
}

/// A gate that let the code through: what it compared.
#[derive(Debug, Default)]
pub struct Passed {
    /// Inputs at which everything was compared.
    pub checked: usize,
    /// Inputs at which the entry is ⊥ (on both engines, with one code), or
    /// too long for the evaluator: nothing to differentiate there. With
    /// the reason.
    pub undefined: Vec<String>,
}

/// Runs the gate.
pub fn check(subject: &Subject<'_>, opts: &Options) -> Result<Passed, String> {
    let base = subject
        .session
        .entry(subject.entry)
        .map_err(|d| d.message)?;
    let mut inputs: Vec<(String, Vec<Value>)> = opts.samples.clone();
    let types = base.param_types();
    if types.iter().all(generable) {
        let mut state = opts.seed;
        for k in 0..opts.generated {
            // Every array of one sample has the same length, so that the
            // shapes of matrix–vector programs agree.
            let len = [3, 2, 4, 1][k % 4];
            let args = types.iter().map(|t| sample(t, len, &mut state)).collect();
            inputs.push((format!("generated sample {}", k + 1), args));
        }
    }
    let mut passed = Passed::default();
    for (what, args) in &inputs {
        let at = || {
            let shown: Vec<String> = base
                .params
                .iter()
                .zip(args)
                .map(|(p, v)| format!("{} = {v}", p.0))
                .collect();
            format!("{what} ({})", shown.join(", "))
        };
        // The entry on both engines.
        let e = base.run_on(Engine::Eval, args.clone(), opts.limits);
        if matches!(&e, Err(e) if e.is_resource_limit()) {
            // The evaluator is slower than native code: too long to check.
            passed
                .undefined
                .push(format!("{what}: the evaluator runs out of fuel"));
            continue;
        }
        // Native code for the entry itself is what `compile` emits without
        // `--mode`; for a derivative it is the derivative's that matters,
        // and the entry's value on the evaluator says where it is defined.
        let n = if subject.derivative.is_none() {
            base.run_on(Engine::Native, args.clone(), opts.limits)
        } else {
            e.clone()
        };
        match (&e, &n) {
            (Ok((a, _)), Ok((b, _))) => {
                if !values_agree(a, b, opts.native_rho) {
                    return Err(format!(
                        "native code for `{}` disagrees with the evaluator at {}: the evaluator gives {a}, native code {b}",
                        subject.entry,
                        at()
                    ));
                }
            }
            (Err(a), Err(b)) if a.code() == b.code() => {
                passed.undefined.push(format!("{what}: ⊥ ({})", a.code()));
                continue;
            }
            _ => {
                let show = |r: &Result<(Value, _), RunError>| match r {
                    Ok((v, _)) => v.to_string(),
                    Err(e) => format!("⊥ {} ({e})", e.code()),
                };
                return Err(format!(
                    "native code for `{}` disagrees with the evaluator at {}: the evaluator gives {}, native code {}",
                    subject.entry,
                    at(),
                    show(&e),
                    show(&n)
                ));
            }
        }
        if let Some((mode, wrt)) = subject.derivative
            && let Some(why) = derivative(subject, &base, mode, wrt, args, opts)
                .map_err(|why| format!("{why} at {}", at()))?
        {
            passed.undefined.push(format!("{what}: {why}"));
            continue;
        }
        passed.checked += 1;
    }
    Ok(passed)
}

/// The derivative checks at one input: the mode on native code against
/// the evaluator; the mode against reverse mode (or forward mode); and
/// against finite differences where they are smooth. `Some(why)` — no
/// verdict at this input — where the modes may differ (spec/ad-forward.md
/// §7.2): the run passes through a singular point of a primitive (the
/// tape says so: `sqrt` at 0, the norm of a zero vector, also where the
/// value is not used; `log` at a subnormal) and the derivative is ⊥ by a
/// division by zero or outside a primitive's domain, or the modes
/// disagree; or an input or the result is not finite. The command's own
/// run then reports its result or ⊥. Any other ⊥ of the derivative is a
/// failure.
fn derivative(
    subject: &Subject<'_>,
    base: &Rc<Entry>,
    mode: Mode,
    wrt: &str,
    args: &[Value],
    opts: &Options,
) -> Result<Option<String>, String> {
    let limits = opts.limits;
    // Err: the reason, and the code of a ⊥.
    let run = |m: Mode, engine: Engine| -> Result<Option<Columns>, (String, Option<String>)> {
        let plan = Plan::new(
            subject.session,
            subject.entry,
            wrt,
            m,
            engine,
            subject.checkpointing,
        );
        let p = match plan {
            Ok(p) => p,
            // This mode cannot differentiate with respect to this
            // variable (a forward mode and a tuple): nothing to compare.
            Err(_) if m != mode => return Ok(None),
            Err(d) => return Err((d.message, None)),
        };
        match p.columns(args.to_vec(), engine, limits) {
            Ok(c) => Ok(Some(c)),
            // Too long to check on the evaluator: no verdict.
            Err(e) if e.is_resource_limit() => Ok(None),
            Err(e) => Err((
                format!(
                    "{} on {} is ⊥ ({}: {e}) where the entry is defined",
                    m.name(),
                    if engine == Engine::Native {
                        "native code"
                    } else {
                        "the evaluator"
                    },
                    e.code()
                ),
                Some(e.code().to_string()),
            )),
        }
    };
    // One independent derivative to compare with: reverse mode, or, for
    // reverse mode itself, forward mode (not the optimised one, whose
    // optimisation would cost more than the compilation it guards).
    let reference = if mode == Mode::Rev {
        Mode::Fwd
    } else {
        Mode::Rev
    };
    let k = base
        .params
        .iter()
        .position(|(n, _)| n == wrt)
        .ok_or_else(|| format!("no parameter `{wrt}`"))?;
    // Whether the run passes through a singular point of a primitive
    // (spec/ad-forward.md §7.2): a partial that is not finite where the
    // result is — `sqrt` at 0, or `log` at a subnormal, whose 1/x
    // overflows — where the modes may differ (asked only on a
    // disagreement: a taped run).
    let singular = || {
        crate::tape::vjp(
            &base.program,
            &base.name_in_program(),
            args.to_vec(),
            k,
            None,
            limits,
        )
        .is_ok_and(|t| t.singular)
    };
    // Mode `m`'s derivative ⊥ on the evaluator: no verdict when it is a
    // division by zero or outside a domain at a singular point, else a
    // failure.
    let bottom = |m: Mode, (why, code): (String, Option<String>)| match code.as_deref() {
        Some(c @ ("division-by-zero" | "domain-error")) if singular() => Ok(Some(format!(
            "the {} derivative is ⊥ ({c}) at a singular point of a primitive",
            m.name()
        ))),
        _ => Err(why),
    };
    let ours = match run(mode, Engine::Eval) {
        Ok(Some(c)) => c,
        Ok(None) => return Ok(None),
        Err(e) => return bottom(mode, e),
    };
    if mode.runs_natively()
        && let Some(native) = run(mode, Engine::Native).map_err(|e| e.0)?
        && let Some(diff) = native_differs(&ours, &native, opts.native_rho)
    {
        return Err(format!(
            "native code for the {} derivative disagrees with the evaluator: {diff}",
            mode.name()
        ));
    }
    // Where an input or the result is NaN or infinite, the modes may
    // differ on NaN (spec/ad-forward.md §7.2, "Non-finite points"): only
    // native code against the evaluator, above, is compared there.
    let mut doubles = Vec::new();
    for a in args {
        crate::eval::flatten(a, &mut doubles);
    }
    crate::eval::flatten(&ours.value, &mut doubles);
    if doubles.iter().any(|x| !x.is_finite()) {
        return Ok(Some(
            "an input or the result is not finite: the modes may differ on NaN".to_string(),
        ));
    }
    // Central differences at steps h and h/2 (None where a run is ⊥ or
    // changes the result's shape).
    let [fd_h, fd_h2] = [1.0, 0.5].map(|scale| {
        finite_differences_scaled(base, k, args.to_vec(), limits, scale)
            .ok()
            .map(|c| c.columns)
    });
    let theirs = match run(reference, Engine::Eval) {
        Ok(c) => c,
        Err(e) => return bottom(reference, e),
    };
    if let Some(c) = theirs
        && let Some((j, i, a, b)) = columns_disagree(&ours.columns, &c.columns, 1e-9)
    {
        if singular() {
            return Ok(Some(format!(
                "the {} and {} derivatives differ at a singular point of a primitive",
                mode.name(),
                reference.name()
            )));
        }
        let fd = fd_h2
            .as_ref()
            .and_then(|d| d.get(j).and_then(|c| c.get(i)))
            .map_or_else(String::new, |d| {
                format!(", central finite differences {d:?}")
            });
        return Err(format!(
            "the {} derivative disagrees with {}: ∂out[{i}]/∂{wrt}[{j}] is {a:?} in {}, {b:?} in {}{fd}",
            mode.name(),
            reference.name(),
            mode.name(),
            reference.name(),
        ));
    }
    // Finite differences, element by element, where the stencil is smooth:
    // the two steps agree, and there is no kink (`kink`: `abs` at 0).
    if let (Some(d1), Some(d2)) = (&fd_h, &fd_h2) {
        let mut outs = Vec::new();
        crate::eval::flatten(&ours.value, &mut outs);
        let mut ins = Vec::new();
        crate::eval::flatten(&args[k], &mut ins);
        // The largest value the run passes through, once, when asked.
        let largest = std::cell::OnceCell::new();
        for (j, col) in ours.columns.iter().enumerate() {
            // The smaller step (`finite_differences_scaled` at 0.5).
            let h = 0.5 * step(ins.get(j).copied().unwrap_or(0.0));
            for (i, &x) in col.iter().enumerate() {
                let (Some(&a), Some(&b)) = (
                    d1.get(j).and_then(|c| c.get(i)),
                    d2.get(j).and_then(|c| c.get(i)),
                ) else {
                    continue;
                };
                let trunc = (a - b).abs();
                // Not smooth, or not converging: no verdict.
                if !a.is_finite() || !b.is_finite() || trunc > 1e-3 * (1.0 + b.abs()) {
                    continue;
                }
                // Rounding: the difference of two values of magnitude
                // |f|, each within a few ulp, over the step — or of the
                // largest value the run passes through, asked only on a
                // disagreement (an input of 1.8e308 summed with the one
                // varied absorbs the step, whatever the result's size).
                let f = outs.get(i).map_or(0.0, |f| f.abs());
                let rounding = |m: f64| 256.0 * f64::EPSILON * (m + 1.0) / h;
                let bound = 10.0 * trunc + 1e-6 * (1.0 + b.abs());
                if (x - b).abs() > bound + rounding(f)
                    && (x - b).abs()
                        > bound
                            + rounding(
                                *largest
                                    .get_or_init(|| largest_magnitude(base, args.to_vec(), limits)),
                            )
                    && kink(base, k, args, (j, i), limits) == Some(false)
                {
                    return Err(format!(
                        "the {} derivative disagrees with finite differences: ∂out[{i}]/∂{wrt}[{j}] is {x:?}, central differences give {b:?} (step h: {a:?})",
                        mode.name()
                    ));
                }
            }
        }
    }
    Ok(None)
}

/// The first element where two sets of columns differ by more than
/// `tol` in ρ: (column, row, a, b).
fn columns_disagree(a: &[Vec<f64>], b: &[Vec<f64>], tol: f64) -> Option<(usize, usize, f64, f64)> {
    // A result with no Double has an empty Jacobian, however a mode lays
    // out its (empty) columns.
    if a.iter().all(Vec::is_empty) && b.iter().all(Vec::is_empty) {
        return None;
    }
    if a.len() != b.len() {
        return Some((a.len().min(b.len()), 0, f64::NAN, f64::NAN));
    }
    for (j, (c, d)) in a.iter().zip(b).enumerate() {
        if c.len() != d.len() {
            return Some((j, c.len().min(d.len()), f64::NAN, f64::NAN));
        }
        for (i, (&x, &y)) in c.iter().zip(d).enumerate() {
            if !(x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()) || rho(x, y) <= tol) {
                return Some((j, i, x, y));
            }
        }
    }
    None
}

fn native_differs(e: &Columns, n: &Columns, tol: f64) -> Option<String> {
    if !values_agree(&e.value, &n.value, tol) {
        return Some(format!(
            "value: the evaluator gives {}, native code {}",
            e.value, n.value
        ));
    }
    columns_disagree(&e.columns, &n.columns, tol).map(|(j, i, a, b)| {
        format!("element [{i}] of column {j}: the evaluator gives {a:?}, native code {b:?}")
    })
}

/// Whether the gate can make values of this type.
fn generable(t: &Type) -> bool {
    match t {
        Type::Double | Type::Index | Type::Bool => true,
        Type::Array(e) => generable(e),
        Type::Pair(a, b) => generable(a) && generable(b),
        Type::Fun(..) => false,
    }
}

/// A value of type `t`: Doubles in ±[0.25, 1.25] (away from 0, where
/// `sqrt`, `log` and division have their boundaries), Indices 1…len,
/// arrays of `len` elements.
fn sample(t: &Type, len: usize, state: &mut u64) -> Value {
    match t {
        Type::Double => {
            let u = crate::difftest::next(state) as f64 / u64::MAX as f64;
            let m = 0.25 + (2.0 * u).fract();
            Value::Double(if u < 0.5 { m } else { -m })
        }
        Type::Index => Value::Index(1 + (crate::difftest::next(state) % len as u64) as i64),
        Type::Bool => Value::Bool(crate::difftest::next(state).is_multiple_of(2)),
        Type::Array(e) => Value::array((0..len).map(|_| sample(e, len, state)).collect()),
        Type::Pair(a, b) => Value::pair(sample(a, len, state), sample(b, len, state)),
        Type::Fun(..) => unreachable!("generable"),
    }
}
