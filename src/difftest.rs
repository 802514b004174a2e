//! Differential testing of the AD modes (`fsmooth difftest`, and the
//! property tests of `tests/it/props.rs`): on a random differentiable
//! function `fun (p: Double) -> e` (`testgen::function`), forward mode
//! (D[[·]]), source-to-source reverse mode and the tape must agree on the
//! value and the derivative (ρ ≤ 1e-9) wherever all three are defined,
//! and central finite differences must agree within their error bound
//! wherever the stencil is smooth.
//!
//! Where the primal is defined but a mode is not (`division-by-zero`,
//! `domain-error`), or a derivative is not finite, or the modes differ,
//! the point must be explained, or it is a failure: either the run passes
//! through a singular point of a primitive — the tape oracle saw a
//! non-finite partial derivative at a finite result, such as `sqrt` at 0,
//! where the chain rule multiplies ∞ by the other factors and the modes
//! legitimately differ (counted as `singular`, not compared) — or some
//! intermediate overflowed (IEEE, not the reals; counted as `ieee`). Two
//! NaN derivatives are not an agreement. Points where the primal is not
//! finite are outside the contract and skipped; running out of fuel is
//! not compared.
//!
//! The other properties a campaign can check ([`Property`]): optimised
//! forward mode = forward mode, eval(opt p) refines eval(p), the
//! dot-product test, and `native`: the JIT (`codegen`) gives the
//! evaluator's value or ⊥ code on the function and on its fwd, fwd-opt and
//! rev gradient programs ([`check_native`], ρ ≤ 1e-12).

use std::hash::{DefaultHasher, Hash, Hasher};

use crate::diagnostic::Diagnose;
use crate::eval::{Limits, Value};
use crate::gradient::{Mode, Plan, step};
use crate::ir::{Expr, Lit};
use crate::numeric::rho;
use crate::pipeline::{Artefact, Checkpointing, Engine, Entry, OptOptions, Session};
use crate::syntax::print_program;
use crate::testgen::{self, GenType};

/// The points every generated function is differentiated at.
pub const POINTS: [f64; 3] = [0.7, -1.3, 2.9];

/// The session of a generated program.
fn load(src: &str) -> Result<Session, String> {
    Session::load(src).map_err(|d| format!("load: {}", d.message))
}

/// The plan of `mode` for `main` with respect to `p`.
fn plan(s: &Session, mode: Mode, engine: Engine) -> Result<Plan, String> {
    Plan::new(s, "main", "p", mode, engine, Checkpointing::default())
        .map_err(|d| format!("{}: {}", mode.name(), d.message))
}

/// What one program's check compared.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Points where the primal is defined and finite.
    pub defined: usize,
    /// Points where fwd, rev and tape were all defined and compared.
    pub compared: usize,
    /// Points where finite differences were compared too.
    pub fd: usize,
    /// Points where one mode's derivative is non-finite and another's is
    /// not, explained by an overflowed intermediate (IEEE, not the reals).
    pub ieee: usize,
    /// Points where the optimised derivative differs from forward mode's
    /// by more than the tolerance but the optimiser without its
    /// `ieee-inexact` rules agrees: rounding of rules exact only over the
    /// reals (the `fwd-opt` property, [`check_optimised`]).
    pub rounding: usize,
    /// Comparisons where both sides were ⊥ with the same error code
    /// (the `native` property: native code against the evaluator).
    pub bottoms: usize,
    /// Points where a mode is ⊥ or a derivative is not finite, or the
    /// modes differ, and the run passes through a singular point of a
    /// primitive (a non-finite partial at a finite result, `tape::Taped::
    /// singular`): the modes may differ there; not compared.
    pub singular: usize,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.defined += o.defined;
        self.compared += o.compared;
        self.fd += o.fd;
        self.ieee += o.ieee;
        self.rounding += o.rounding;
        self.bottoms += o.bottoms;
        self.singular += o.singular;
    }
}

/// Checks property (a) on the program `src` (an entry `main` of type
/// Double → Double with parameter `p`). `Err` describes the disagreement.
pub fn check_scalar(src: &str, limits: Limits) -> Result<Counts, String> {
    let s = load(src)?;
    let fwd = plan(&s, Mode::Fwd, Engine::Eval)?;
    let rev = plan(&s, Mode::Rev, Engine::Eval)?;
    let mut counts = Counts::default();
    for x in POINTS {
        let args = vec![Value::Double(x)];
        let Ok((primal, _)) = fwd.base.run(args.clone(), limits, &mut |_, _| {}) else {
            continue;
        };
        let Some(f) = primal.as_f64().filter(|f| f.is_finite()) else {
            continue;
        };
        counts.defined += 1;
        // The tape says whether the run passes through a point where some
        // primitive is not differentiable (a non-finite partial at a
        // finite result): there, and only there, the modes may differ on
        // definedness and on NaN (spec/ad-forward.md §7.2, "Singular points").
        let taped = crate::tape::vjp(
            &rev.base.program,
            &rev.base.name_in_program(),
            args.clone(),
            0,
            None,
            limits,
        );
        let singular = taped.as_ref().is_ok_and(|t| t.singular);
        let modes = [
            ("fwd", fwd.columns(args.clone(), Engine::Eval, limits)),
            ("rev", rev.columns(args.clone(), Engine::Eval, limits)),
            (
                "tape",
                crate::gradient::tape(&rev.base, 0, args.clone(), limits).map_err(Into::into),
            ),
        ];
        let mut ok = Vec::new();
        let mut bottom = None;
        for (name, r) in modes {
            match r {
                Ok(c) => ok.push((name, c.value, c.columns[0][0])),
                Err(e) if e.is_resource_limit() => bottom = Some((name, e)),
                Err(e) => {
                    let code = e.code();
                    if !(singular && matches!(code, "division-by-zero" | "domain-error")) {
                        return Err(format!(
                            "{name} at p = {x}: {e} ({code}) where the primal is {primal} and no primitive is singular"
                        ));
                    }
                    bottom = Some((name, e));
                }
            }
        }
        if let Some((_, e)) = &bottom {
            if !e.is_resource_limit() {
                counts.singular += 1;
            }
            continue;
        }
        let (_, v0, d0) = &ok[0];
        for (name, v, _) in &ok[1..] {
            if !v0.max_rho(v).is_some_and(|r| r <= 1e-9) {
                return Err(format!("value at p = {x}: fwd {v0}, {name} {v}"));
            }
        }
        // A non-finite derivative, or a disagreement, needs an explanation:
        // an overflowed intermediate (IEEE, not the reals: `0·∞` or `∞/∞` is
        // NaN in one mode's formula and not in another's), or a singular
        // point. Two NaNs are not an agreement.
        let finite = ok.iter().all(|(_, _, d)| d.is_finite());
        let agree = ok[1..].iter().all(|(_, _, d)| rho(*d0, *d) <= 1e-9);
        if !(finite && agree) {
            if !finite && overflows(&fwd.base, args.clone(), limits) {
                counts.ieee += 1;
                continue;
            }
            if singular {
                counts.singular += 1;
                continue;
            }
            let all: Vec<String> = ok.iter().map(|(n, _, d)| format!("{n} {d}")).collect();
            return Err(format!(
                "derivative at p = {x}: {} (no overflow, no singular primitive)",
                all.join(", ")
            ));
        }
        // Where the derivative the modes agree on says the function changes
        // by more than its own scale over the stencil, a central
        // difference samples an oscillation, not a slope (`cos (exp (p **
        // p))` at 2.9: d ≈ −3·10¹⁰, fd −1.7·10⁴): not compared, as
        // `smooth_fd` rejects such stencils by the estimate's own size.
        let sampled = d0.abs() * step(x) <= f.abs().max(1.0);
        if let Some((fd, truncation)) = smooth_fd(&fwd.base, x, limits).filter(|_| sampled) {
            let h = step(x);
            // Twice the estimated truncation error, plus rounding
            // (ε·|f|/h at the smallest step), plus ρ ≤ 1e-6.
            let bound = 1e-6 * (1.0f64).max(fd.abs() + d0.abs())
                + 2.0 * truncation
                + 256.0 * f64::EPSILON * (f.abs() + 1.0) / h;
            if (fd - d0).abs() > bound {
                return Err(format!(
                    "derivative at p = {x}: fwd {d0}, finite differences {fd} (bound {bound:e})"
                ));
            }
            counts.fd += 1;
        }
        counts.compared += 1;
    }
    Ok(counts)
}

/// Every Double literal of every state of evaluating `entry` on `args`
/// (read back), to `visit` until it returns false.
fn state_doubles(
    entry: &Entry,
    args: Vec<Value>,
    limits: Limits,
    mut visit: impl FnMut(f64) -> bool,
) {
    let mut going = true;
    let _ = entry.run(args, limits, &mut |_, snap| {
        if going {
            let rb = snap.readback("state'rb");
            going = rb.exprs.values().all(|e| match e {
                Expr::Lit(Lit::Double(x)) => visit(*x),
                _ => true,
            });
        }
    });
}

/// Whether some state of evaluating `entry` on `args` holds a non-finite
/// Double (read back as a literal): an IEEE overflow the reals do not have.
pub fn overflows(entry: &Entry, args: Vec<Value>, limits: Limits) -> bool {
    let mut found = false;
    state_doubles(entry, args, limits, |x| {
        found = !x.is_finite();
        !found
    });
    found
}

/// The largest magnitude of a finite Double in any state of evaluating
/// `entry` on `args` (read back as a literal): what bounds the rounding
/// of a finite difference through that run (an input of 1.8e308 added to
/// the one varied absorbs the step, whatever the result's size).
pub fn largest_magnitude(entry: &Entry, args: Vec<Value>, limits: Limits) -> f64 {
    let mut largest = 0.0f64;
    state_doubles(entry, args, limits, |x| {
        if x.is_finite() {
            largest = largest.max(x.abs());
        }
        true
    });
    largest
}

/// The central difference of `entry` (Double → Double) at `x` with its
/// truncation error, or None where finite differences do not estimate the
/// derivative. Conditions: the evaluations at x and x ± h·2⁻ᵏ (k = 0, 1, 2)
/// succeed and take the same path (the same sequence of reduction rules),
/// so no branch boundary lies within the stencil; the function changes by
/// less than its own scale over the step; and the estimates converge like
/// a smooth function's (E(h) ≈ Ch²: successive differences shrink by a
/// factor between 2 and 8). The truncation error is then ≈ 4/3·|D(h) − D(h/2)|.
pub fn smooth_fd(entry: &Entry, x: f64, limits: Limits) -> Option<(f64, f64)> {
    let path = |at: f64| -> Option<(f64, u64)> {
        let mut h = DefaultHasher::new();
        let (v, _) = entry
            .run(vec![Value::Double(at)], limits, &mut |ev, _| {
                ev.rule.hash(&mut h)
            })
            .ok()?;
        let v = v.as_f64()?;
        v.is_finite().then_some((v, h.finish()))
    };
    let h = step(x);
    let (f, at) = path(x)?;
    let mut d = [0.0; 3];
    for (k, s) in [h, h / 2.0, h / 4.0].into_iter().enumerate() {
        let (plus, p) = path(x + s)?;
        let (minus, m) = path(x - s)?;
        if p != at || m != at {
            return None;
        }
        d[k] = (plus - minus) / (2.0 * s);
    }
    if d[0].abs() * h > f.abs().max(1.0) {
        return None;
    }
    let (e0, e1) = ((d[0] - d[1]).abs(), (d[1] - d[2]).abs());
    // Differences at the rounding level say nothing about convergence.
    let noise = 1e3 * f64::EPSILON * (f.abs() + 1.0) / h;
    if e0 > noise && !(2.0 * e1 <= e0 && e0 <= 8.0 * e1) {
        return None;
    }
    Some((d[0], 4.0 / 3.0 * e0))
}

/// A campaign's settings (`fsmooth difftest`).
#[derive(Copy, Clone, Debug)]
pub struct Campaign {
    pub cases: u64,
    pub seed: u64,
    /// Maximum nesting depth of generated expressions.
    pub max_size: u32,
    pub limits: Limits,
    pub property: Property,
    /// Skip the programs without a `while` loop.
    pub only_while: bool,
    /// Skip the programs that apply no derivative operator to a function
    /// value.
    pub only_operators: bool,
}

/// The properties of issue 6 a campaign can check at scale (`check_*`
/// below, one per property).
#[derive(clap::ValueEnum, Copy, Clone, Debug, PartialEq, Eq)]
pub enum Property {
    /// fwd = rev = tape = finite differences.
    Ad,
    /// optimised forward mode = forward mode.
    FwdOpt,
    /// eval(opt p) refines eval(p).
    Opt,
    /// the dot-product test <J u, w> = <u, J^T w> on Vector -> Vector (and
    /// fwd-vec, fwd-rows = fwd bit for bit).
    Dot,
    /// native code = the evaluator: the value and the fwd, fwd-opt and rev
    /// gradients (equal, or ⊥ with the same error code).
    Native,
}

impl Property {
    pub const ALL: [Property; 5] = [
        Property::Ad,
        Property::FwdOpt,
        Property::Opt,
        Property::Dot,
        Property::Native,
    ];

    /// The name `--property` takes and saved cases record (`// property: NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Property::Ad => "ad",
            Property::FwdOpt => "fwd-opt",
            Property::Opt => "opt",
            Property::Dot => "dot",
            Property::Native => "native",
        }
    }

    /// The property a saved case names in a `// property: NAME` line
    /// ([`Property::Ad`] when there is none).
    pub fn of_saved(src: &str) -> Option<Property> {
        match src.lines().find_map(|l| l.strip_prefix("// property: ")) {
            None => Some(Property::Ad),
            Some(n) => Property::ALL.into_iter().find(|p| p.name() == n.trim()),
        }
    }

    /// The program of a campaign case: `fun (p: Double) -> e`, or
    /// `fun (p: Vector) -> e : Vector` for the dot-product test.
    pub fn source(self, choices: &[u32], depth: u32) -> String {
        match self {
            Property::Dot => print_program(&testgen::function(
                choices,
                depth,
                GenType::Vector,
                GenType::Vector,
            )),
            _ => source(choices, depth),
        }
    }

    /// Checks the property on one program.
    pub fn check(self, src: &str, limits: Limits) -> Result<Counts, String> {
        match self {
            Property::Ad => check_scalar(src, limits),
            Property::FwdOpt => check_optimised_counts(src, limits),
            Property::Opt => check_opt_refines_counts(src, limits),
            Property::Dot => check_dot_product(src, limits).map(compared),
            Property::Native => check_native(src, limits),
        }
    }
}

fn compared(n: usize) -> Counts {
    Counts {
        defined: n,
        compared: n,
        ..Counts::default()
    }
}

/// The session of a generated program whose every optimisation is
/// replayed against the rules (`opt --check`).
fn load_checked(src: &str) -> Result<Session, String> {
    Ok(load(src)?.with_options(OptOptions {
        check: true,
        ..Default::default()
    }))
}

/// Property (b), the property at the centre of dF̃: where forward mode is
/// defined, the optimised forward-mode derivative of `main` w.r.t. `p` is
/// defined and equal (ρ ≤ 1e-9). Returns the points compared.
pub fn check_optimised(src: &str, limits: Limits) -> Result<usize, String> {
    check_optimised_counts(src, limits).map(|c| c.compared)
}

/// [`check_optimised`], counting apart the points where the values differ
/// by rounding only (`Counts::rounding`): an `ieee-inexact` rule is exact
/// over the reals, not in binary64 (`(a / b) / c = a / (b * c)` rounds
/// differently, and near a singularity, `sqrt` of a cancellation that is
/// exactly 0 in one form and 1e-17 in the other, the difference is
/// amplified past any tolerance), so such a disagreement is a failure
/// only if the optimiser without those rules disagrees too. The steps of
/// both optimisations are verified (`opt --check`) either way.
pub fn check_optimised_counts(src: &str, limits: Limits) -> Result<Counts, String> {
    let s = load_checked(src)?;
    let fwd = plan(&s, Mode::Fwd, Engine::Eval)?;
    let tangents = Mode::Fwd
        .tangent_program("main".into(), fwd.wrt)
        .ok_or("fwd has a tangent program")?;
    let optimise = |exact_only: bool| -> Result<_, String> {
        let o = s
            .optimise(&tangents, exact_only)
            .map_err(|d| format!("opt: {}", d.message))?;
        let printed = print_program(&o.entry.program);
        let d = Plan {
            base: fwd.base.clone(),
            wrt: fwd.wrt,
            how: crate::gradient::How::Tangents(o.entry.clone()),
        };
        Ok((d, printed))
    };
    let run = |d: &Plan, args: Vec<Value>| {
        d.columns(args, Engine::Eval, limits)
            .map(|j| j.columns[0][0])
            .map_err(|e| e.to_string())
    };
    compare_optimised(
        optimise,
        |args| run(&fwd, args).ok(),
        run,
        |da: &f64, db: &f64| rho(*da, *db) <= 1e-9 || (da.is_nan() && db.is_nan()),
        Wording {
            bottom: |x, _, err, exact| {
                if exact {
                    format!("p = {x}: fwd-opt without ieee-inexact rules is ⊥ ({err})")
                } else {
                    format!("p = {x}: fwd-opt is ⊥ ({err})")
                }
            },
            differ: |x, da, db, de| {
                format!("p = {x}: fwd {da}, fwd-opt {db} (without ieee-inexact rules {de})")
            },
        },
    )
}

/// Property (c): where `main` is defined at `p`, the optimised program is
/// defined and gives the same value (ρ ≤ 1e-9). Returns the points compared.
pub fn check_opt_refines(src: &str, limits: Limits) -> Result<usize, String> {
    check_opt_refines_counts(src, limits).map(|c| c.compared)
}

/// [`check_opt_refines`], counting apart the points where the values
/// differ by rounding only, as [`check_optimised_counts`] does: a
/// difference is a failure only if the optimiser without its
/// `ieee-inexact` rules gives one too.
pub fn check_opt_refines_counts(src: &str, limits: Limits) -> Result<Counts, String> {
    let s = load_checked(src)?;
    let e = s
        .entry("main")
        .map_err(|d| format!("entry: {}", d.message))?;
    let optimise = |exact_only: bool| -> Result<_, String> {
        let o = s
            .optimise(&Artefact::entry("main"), exact_only)
            .map_err(|d| format!("opt: {}", d.message))?;
        let printed = print_program(&o.entry.program);
        Ok((o.entry.clone(), printed))
    };
    let run = |entry: &std::rc::Rc<Entry>, args: Vec<Value>| {
        entry
            .run(args, limits, &mut |_, _| {})
            .map(|(v, _)| v)
            .map_err(|err| err.to_string())
    };
    compare_optimised(
        optimise,
        |args| run(&e, args).ok(),
        run,
        |a: &Value, b: &Value| a.max_rho(b).is_some_and(|r| r <= 1e-9) || a.same(b),
        Wording {
            bottom: |x, a, err, exact| {
                if exact {
                    format!("p = {x}: {a} became ⊥ without ieee-inexact rules ({err})")
                } else {
                    format!("p = {x}: {a} became ⊥ ({err})")
                }
            },
            differ: |x, a, b, c| {
                format!("p = {x}: {a} became {b} (without ieee-inexact rules {c})")
            },
        },
    )
}

/// How [`compare_optimised`] words a failure at the point `x` where the
/// reference gives `a`: the optimised program is ⊥ (`exact`: the one made
/// without the `ieee-inexact` rules), or both optimised programs give
/// values that differ from `a`.
struct Wording<V> {
    bottom: fn(f64, &V, &str, bool) -> String,
    differ: fn(f64, &V, &V, &V) -> String,
}

/// The comparison of the two optimiser properties ((b) and (c)): at each
/// of [`POINTS`] where `reference` is defined, the program `optimise`
/// makes with every rule must be defined and `agree` with it; where it
/// is ⊥ or does not agree, the program made without the `ieee-inexact`
/// rules (once, at the first such point) must, and the point counts as
/// rounding (spec/rules-format.md §7.1). Each failure prints the optimised program it concerns.
fn compare_optimised<P, V: std::fmt::Display>(
    optimise: impl Fn(bool) -> Result<(P, String), String>,
    reference: impl Fn(Vec<Value>) -> Option<V>,
    run: impl Fn(&P, Vec<Value>) -> Result<V, String>,
    agree: impl Fn(&V, &V) -> bool,
    words: Wording<V>,
) -> Result<Counts, String> {
    let (opt, printed) = optimise(false)?;
    let mut exact = None;
    let mut counts = Counts::default();
    for x in POINTS {
        let args = vec![Value::Double(x)];
        let Some(a) = reference(args.clone()) else {
            continue;
        };
        let b = run(&opt, args.clone());
        counts.defined += 1;
        if b.as_ref().is_ok_and(|b| agree(&a, b)) {
            counts.compared += 1;
            continue;
        }
        if exact.is_none() {
            exact = Some(optimise(true)?);
        }
        let (exact, exact_printed) = exact.as_ref().expect("just made");
        let c = run(exact, args).map_err(|err| {
            format!(
                "{}\noptimised:\n{exact_printed}",
                (words.bottom)(x, &a, &err, true)
            )
        })?;
        match (&b, agree(&a, &c)) {
            // Rounding, or a ⊥ only binary64 has (an intermediate of an
            // `ieee-inexact` rule's right side underflowing to a zero
            // divisor): spec/rules-format.md §7.1.
            (_, true) => counts.rounding += 1,
            (Ok(b), false) => {
                return Err(format!(
                    "{}\noptimised:\n{printed}",
                    (words.differ)(x, &a, b, &c)
                ));
            }
            (Err(err), false) => {
                return Err(format!(
                    "{}\noptimised:\n{printed}",
                    (words.bottom)(x, &a, err, false)
                ));
            }
        }
    }
    Ok(counts)
}

/// Property (e), the dot-product test, on `fun (p: Vector) -> e : Vector`
/// at p = [0.7, -1.3, 2.9, 0.4]: ⟨J u, w⟩ from forward mode's Jacobian
/// equals ⟨u, Jᵀ w⟩ from one run of the reverse program seeded with w
/// (ρ ≤ 1e-9), the tape's Jacobian equals forward mode's, and vector
/// forward mode's equals it bit for bit, as columns (D-Vec-Deriv) and as
/// rows (D-Vec-Rows, on both engines). Returns 1 when
/// compared, 0 when the primal or a mode is ⊥ or not finite there.
pub fn check_dot_product(src: &str, limits: Limits) -> Result<usize, String> {
    let vector = |xs: &[f64]| Value::array(xs.iter().map(|x| Value::Double(*x)).collect());
    let s = load(src)?;
    let fwd = plan(&s, Mode::Fwd, Engine::Eval)?;
    let rev = plan(&s, Mode::Rev, Engine::Eval)?;
    let x = [0.7, -1.3, 2.9, 0.4];
    let args = vec![vector(&x)];
    let Ok((primal, _)) = fwd.base.run(args.clone(), limits, &mut |_, _| {}) else {
        return Ok(0);
    };
    let mut ys = Vec::new();
    crate::eval::flatten(&primal, &mut ys);
    if ys.iter().any(|y| !y.is_finite()) {
        return Ok(0);
    }
    let (Ok(j), Ok(t)) = (
        fwd.columns(args.clone(), Engine::Eval, limits),
        crate::gradient::tape(&rev.base, 0, args.clone(), limits),
    ) else {
        return Ok(0);
    };
    // Vector forward mode rejects `accum` and `addAt` of Doubles
    // (spec/ad-forward.md §4.6), which a `vjp` in the program expands to:
    // then only the scalar modes are compared.
    match Plan::new(
        &s,
        "main",
        "p",
        Mode::FwdVec,
        Engine::Eval,
        Checkpointing::default(),
    ) {
        Err(d) if d.code == "ad-unsupported" => {}
        Err(d) => return Err(format!("fwd-vec: {}", d.message)),
        Ok(vec) => vector_modes_agree(&s, vec, &j, &args, limits)?,
    }
    let u = [0.3, -0.8, 1.1, 0.25];
    let w: Vec<f64> = (0..ys.len()).map(|i| 1.0 - 0.37 * i as f64).collect();
    let seed = crate::eval::unflatten(&primal, &mut w.iter().copied());
    let Some(rev) = rev.program() else {
        return Err("rev has a program".to_string());
    };
    let Ok((r, _)) = rev.run(vec![vector(&x), seed], limits, &mut |_, _| {}) else {
        return Ok(0);
    };
    let Value::Pair(r) = r else {
        return Err(format!("the reverse program returned {r}"));
    };
    let mut jtw = Vec::new();
    crate::eval::flatten(&r.1, &mut jtw);
    if jtw.len() != u.len() {
        return Err(format!(
            "Jᵀw has {} elements, the input {}",
            jtw.len(),
            u.len()
        ));
    }
    let ju_w: f64 = (0..ys.len())
        .map(|i| (0..u.len()).map(|k| j.columns[k][i] * u[k]).sum::<f64>() * w[i])
        .sum();
    let u_jtw: f64 = u.iter().zip(&jtw).map(|(a, b)| a * b).sum();
    if !(ju_w.is_finite() && u_jtw.is_finite()) {
        return Ok(0);
    }
    if rho(ju_w, u_jtw) > 1e-9 {
        return Err(format!("<Ju, w> = {ju_w} but <u, J^T w> = {u_jtw}"));
    }
    // The same test between the language's operators (D-Jvp, R-Vjp):
    // <jvp main x u, w> = <u, vjp main x w>, and both equal the above.
    let ops = format!(
        "{src}\nlet dot'ops = fun (x: Vector) (u: Vector) (w: Vector) ->\n  \
         (vectorDot (snd (jvp main x u)) w, vectorDot u (snd (vjp main x w)))\n"
    );
    let e = load(&ops)?.entry("dot'ops").map_err(|d| d.message)?;
    let seed = crate::eval::unflatten(&primal, &mut w.iter().copied());
    let flat_w = {
        let mut out = Vec::new();
        crate::eval::flatten(&seed, &mut out);
        vector(&out)
    };
    if let Ok((v, _)) = e.run(vec![vector(&x), vector(&u), flat_w], limits, &mut |_, _| {}) {
        let mut d = Vec::new();
        crate::eval::flatten(&v, &mut d);
        let (a, b) = (d[0], d[1]);
        if a.is_finite() && b.is_finite() {
            if rho(a, b) > 1e-9 {
                return Err(format!(
                    "<jvp main x u, w> = {a} but <u, vjp main x w> = {b}"
                ));
            }
            if rho(a, ju_w) > 1e-9 {
                return Err(format!(
                    "<jvp main x u, w> = {a} but fwd's <Ju, w> = {ju_w}"
                ));
            }
        }
    } else {
        return Err("the operators' dot-product program is ⊥ where fwd and rev are not".into());
    }
    for k in 0..u.len() {
        for i in 0..ys.len() {
            let (a, b) = (j.columns[k][i], t.columns[k][i]);
            if rho(a, b) > 1e-9 {
                return Err(format!("J[{i}][{k}]: fwd {a} vs tape {b}"));
            }
        }
    }
    Ok(1)
}

/// The dot-product property's vector forward modes: fwd-vec's columns and
/// fwd-rows' rows (on both engines) equal forward mode's bit for bit.
fn vector_modes_agree(
    s: &Session,
    vec: Plan,
    j: &crate::gradient::Columns,
    args: &[Value],
    limits: Limits,
) -> Result<(), String> {
    let args = args.to_vec();
    let v = vec
        .columns(args.clone(), Engine::Eval, limits)
        .map_err(|e| format!("fwd-vec is ⊥ ({e}) where fwd is not"))?;
    let same = |a: &f64, b: &f64| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
    let differ = |a: &Vec<f64>, b: &Vec<f64>| {
        a.len() != b.len() || !a.iter().zip(b).all(|(x, y)| same(x, y))
    };
    for (k, (a, b)) in j.columns.iter().zip(&v.columns).enumerate() {
        if differ(a, b) {
            return Err(format!("column {k}: fwd {a:?} vs fwd-vec {b:?}"));
        }
    }
    // D-Vec-Rows: the same Jacobian read out by rows.
    let rows = plan(s, Mode::FwdRows, Engine::Eval)?;
    let r = rows
        .columns(args.clone(), Engine::Eval, limits)
        .map_err(|e| format!("fwd-rows is ⊥ ({e}) where fwd is not"))?;
    if r.columns.len() != j.columns.len() {
        return Err(format!(
            "fwd-rows has {} columns, fwd {}",
            r.columns.len(),
            j.columns.len()
        ));
    }
    // Natively too (the rows program through `call_slices`).
    let n = rows
        .columns(args.clone(), Engine::Native, limits)
        .map_err(|e| format!("fwd-rows is ⊥ natively ({e}) where the evaluator is not"))?;
    for (k, ((a, b), c)) in j.columns.iter().zip(&r.columns).zip(&n.columns).enumerate() {
        if differ(a, b) {
            return Err(format!("column {k}: fwd {a:?} vs fwd-rows {b:?}"));
        }
        if differ(c, b) {
            return Err(format!("column {k}: fwd-rows {b:?} vs native {c:?}"));
        }
    }
    Ok(())
}

/// The `native` property: native code agrees with the evaluator on `main`
/// and on its gradients in modes fwd, fwd-opt and rev (each mode's
/// derivative programs run on both engines, `pipeline::Engine`) at
/// [`POINTS`]: both give values equal within ρ ≤ 1e-12 (or bit for bit,
/// NaN and infinities included), or both are ⊥ with the same error code.
/// A run where the evaluator is out of fuel is not compared, and native
/// code does not run it (it has no fuel). `defined` counts the points
/// where the evaluator's `main` is a value; `compared` the (point,
/// program) pairs where both engines gave equal values, `bottoms` those
/// where both gave the same ⊥ — four programs per point: `main`, fwd,
/// fwd-opt, rev. `main` also runs under the relaxed floating-point
/// contract on two threads (spec/semantics.md §7: sums regrouped, `log`
/// and `exp` in lanes): the same ⊥ code, or values within the validation
/// gate's relaxed ρ ≤ 1e-9 (not counted apart).
pub fn check_native(src: &str, limits: Limits) -> Result<Counts, String> {
    use crate::gradient::Columns;
    use crate::pipeline::RunError;
    // The optimiser's soundness is property `fwd-opt`'s business: here
    // its output is just another program to run on both engines (its
    // steps verified all the same, as everywhere in the tests).
    let s = load_checked(src)?;
    let base = s
        .entry("main")
        .map_err(|d| format!("entry: {}", d.message))?;
    let relaxed = load_checked(src)?
        .with_native(crate::codegen::NativeOptions {
            fp: crate::codegen::FpContract::Relaxed,
            threads: 2,
        })
        .entry("main")
        .map_err(|d| format!("entry: {}", d.message))?;
    let fwd = plan(&s, Mode::Fwd, Engine::Eval)?;
    let opt = plan(&s, Mode::FwdOpt, Engine::Eval)?;
    let rev = plan(&s, Mode::Rev, Engine::Eval)?;
    let (eval, native) = (Engine::Eval, Engine::Native);
    let mut counts = Counts::default();
    // One comparison: `Ok(())` after counting it, `Err` on a disagreement.
    let mut judge = |what: &str,
                     x: f64,
                     e: Result<Option<String>, RunError>,
                     n: Result<Option<String>, RunError>|
     -> Result<(), String> {
        match (e, n) {
            (Ok(None), Ok(None)) => counts.compared += 1,
            (Err(a), Err(b)) if a.code() == b.code() => counts.bottoms += 1,
            (Ok(Some(m)), _) | (_, Ok(Some(m))) => {
                return Err(format!("{what} at p = {x}: {m}"));
            }
            (a, b) => {
                let show = |r: &Result<Option<String>, RunError>| match r {
                    Ok(_) => "a value".to_string(),
                    Err(e) => format!("⊥ {} ({e})", e.code()),
                };
                return Err(format!(
                    "{what} at p = {x}: the evaluator gives {}, native code {}",
                    show(&a),
                    show(&b)
                ));
            }
        }
        Ok(())
    };
    for x in POINTS {
        let args = vec![Value::Double(x)];
        let e = base.run_on(eval, args.clone(), limits).map(|(v, _)| v);
        if out_of_fuel(&e) {
            continue;
        }
        if e.is_ok() {
            counts.defined += 1;
        }
        let n = base.run_on(native, args.clone(), limits).map(|(v, _)| v);
        let differ = |a: &Value, b: &Value| {
            (!values_agree(a, b, NATIVE_RHO))
                .then(|| format!("the evaluator gives {a}, native code {b}"))
        };
        let r = relaxed.run_on(native, args.clone(), limits).map(|(v, _)| v);
        let show = |r: &Result<Value, RunError>| match r {
            Ok(v) => v.to_string(),
            Err(e) => format!("⊥ {} ({e})", e.code()),
        };
        let agree = match (&e, &r) {
            (Ok(a), Ok(b)) => values_agree(a, b, RELAXED_RHO),
            (Err(a), Err(b)) => a.code() == b.code(),
            _ => false,
        };
        if !agree {
            return Err(format!(
                "main under the relaxed contract at p = {x}: the evaluator gives {}, native code {}",
                show(&e),
                show(&r)
            ));
        }
        let (e, n) = match (e, n) {
            (Ok(a), Ok(b)) => (Ok(differ(&a, &b)), Ok(None)),
            (a, b) => (a.map(|_| None), b.map(|_| None)),
        };
        judge("main", x, e, n)?;
        for (mode, plan) in [("fwd", &fwd), ("fwd-opt", &opt), ("rev", &rev)] {
            let run = |en: Engine| -> Result<Columns, RunError> {
                plan.columns(args.clone(), en, limits)
            };
            let e = run(eval);
            if out_of_fuel(&e) {
                continue;
            }
            let n = run(native);
            let (e, n) = match (e, n) {
                (Ok(a), Ok(b)) => (Ok(columns_differ(&a, &b)), Ok(None)),
                (a, b) => (a.map(|_| None), b.map(|_| None)),
            };
            judge(mode, x, e, n)?;
        }
    }
    Ok(counts)
}

fn out_of_fuel<T>(r: &Result<T, crate::pipeline::RunError>) -> bool {
    matches!(r, Err(e) if e.is_resource_limit())
}

/// How far native code's Doubles may be from the evaluator's for the
/// `native` property (ρ; the strict contract gives the same bits).
pub const NATIVE_RHO: f64 = 1e-12;

/// The tolerance of native code under the relaxed floating-point contract
/// against the evaluator (spec/semantics.md §7), the validation gate's
/// and the `native` property's.
pub const RELAXED_RHO: f64 = 1e-9;

/// Whether two values agree: the same shape, equal Index and Bool parts,
/// Doubles bit for bit, both NaN, or within ρ ≤ `tol` (the `native`
/// property, the validation gate and the fuzzing oracles).
pub fn values_agree(a: &Value, b: &Value, tol: f64) -> bool {
    match (a, b) {
        (Value::Double(x), Value::Double(y)) => doubles_agree(*x, *y, tol),
        (Value::Pair(p), Value::Pair(q)) => {
            values_agree(&p.0, &q.0, tol) && values_agree(&p.1, &q.1, tol)
        }
        _ => match (
            a.with_elements(|xs| xs.to_vec()),
            b.with_elements(|ys| ys.to_vec()),
        ) {
            (Some(xs), Some(ys)) => {
                xs.len() == ys.len()
                    && xs
                        .iter()
                        .zip(ys.iter())
                        .all(|(x, y)| values_agree(x, y, tol))
            }
            _ => a.same(b),
        },
    }
}

/// [`values_agree`] for two Doubles.
pub fn doubles_agree(x: f64, y: f64, tol: f64) -> bool {
    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()) || rho(x, y) <= tol
}

/// How two gradients (value and derivative columns) differ, if they do.
fn columns_differ(a: &crate::gradient::Columns, b: &crate::gradient::Columns) -> Option<String> {
    if !values_agree(&a.value, &b.value, NATIVE_RHO) {
        return Some(format!(
            "value: the evaluator gives {}, native code {}",
            a.value, b.value
        ));
    }
    let agree = a.columns.len() == b.columns.len()
        && a.columns.iter().zip(&b.columns).all(|(c, d)| {
            c.len() == d.len()
                && c.iter()
                    .zip(d)
                    .all(|(x, y)| doubles_agree(*x, *y, NATIVE_RHO))
        });
    (!agree).then(|| {
        format!(
            "derivative: the evaluator gives {:?}, native code {:?}",
            a.columns, b.columns
        )
    })
}

/// A failing program, shrunk.
#[derive(Debug)]
pub struct Failure {
    /// Which case (0-based) of the campaign failed first.
    pub case: u64,
    pub program: String,
    pub message: String,
    /// Successful shrinking steps.
    pub shrinks: usize,
}

/// A campaign's result.
#[derive(Debug, Default)]
pub struct Summary {
    pub programs: u64,
    /// Programs that contain a `while` loop (testgen's terminating loops).
    pub with_while: u64,
    /// Programs that apply `jvp`, `vjp`, `derivative` or `gradient` to a
    /// function value (testgen's operators).
    pub with_operators: u64,
    pub counts: Counts,
    pub failure: Option<Failure>,
}

/// Runs `c.cases` random programs through the property's check; stops at the
/// first failure and shrinks it (fewer and smaller choices give smaller
/// programs, see `testgen`).
pub fn run(c: Campaign) -> Summary {
    let mut rng = c.seed ^ 0x9e37_79b9_7f4a_7c15;
    let mut summary = Summary::default();
    for case in 0..c.cases {
        let len = (next(&mut rng) % (50 * u64::from(c.max_size.max(1)))) as usize;
        let choices: Vec<u32> = (0..len).map(|_| next(&mut rng) as u32).collect();
        let src = c.property.source(&choices, c.max_size);
        let with_while = src.contains("while (fun ");
        let with_operators = ["jvp ", "vjp ", "derivative ", "gradient "]
            .iter()
            .any(|op| src.contains(op));
        if (c.only_while && !with_while) || (c.only_operators && !with_operators) {
            continue;
        }
        summary.programs += 1;
        summary.with_while += u64::from(with_while);
        summary.with_operators += u64::from(with_operators);
        match c.property.check(&src, c.limits) {
            Ok(k) => summary.counts += k,
            Err(message) => {
                let (choices, message, shrinks) = shrink(choices, message, c);
                summary.failure = Some(Failure {
                    case,
                    program: c.property.source(&choices, c.max_size),
                    message,
                    shrinks,
                });
                break;
            }
        }
    }
    summary
}

/// Greedy shrinking of a failing campaign case with its property's check.
fn shrink(cs: Vec<u32>, message: String, c: Campaign) -> (Vec<u32>, String, usize) {
    shrink_with(cs, message, |t| {
        c.property
            .check(&c.property.source(t, c.max_size), c.limits)
            .err()
    })
}

/// Greedy shrinking: drop chunks of choices, then make single choices
/// smaller, keeping any change after which `fails` still reports a
/// failure. Returns the smallest failing choices found, its message, and
/// the number of successful steps (at most about 500 rounds).
pub fn shrink_with(
    mut cs: Vec<u32>,
    mut message: String,
    fails: impl Fn(&[u32]) -> Option<String>,
) -> (Vec<u32>, String, usize) {
    let mut shrinks = 0;
    let mut progress = true;
    while progress && shrinks < 500 {
        progress = false;
        let mut chunk = cs.len().max(1);
        while chunk >= 1 {
            let mut i = 0;
            while i + chunk <= cs.len() {
                let mut t = cs.clone();
                t.drain(i..i + chunk);
                if let Some(m) = fails(&t) {
                    (cs, message, shrinks, progress) = (t, m, shrinks + 1, true);
                } else {
                    i += chunk;
                }
            }
            chunk /= 2;
        }
        for i in 0..cs.len() {
            for smaller in [0, cs[i] / 2, cs[i].saturating_sub(1)] {
                if smaller >= cs[i] {
                    continue;
                }
                let mut t = cs.clone();
                t[i] = smaller;
                if let Some(m) = fails(&t) {
                    (cs, message, shrinks, progress) = (t, m, shrinks + 1, true);
                    break;
                }
            }
        }
    }
    (cs, message, shrinks)
}

/// The source text of the campaign program decoded from `choices`.
pub fn source(choices: &[u32], depth: u32) -> String {
    print_program(&testgen::function(
        choices,
        depth,
        GenType::Double,
        GenType::Double,
    ))
}

/// SplitMix64: a fixed, seedable sequence (campaigns are reproducible
/// from `--seed`).
pub fn next(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
