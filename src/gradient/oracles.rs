//! The two gradient oracles that are not programs: central finite
//! differences and reverse mode by taping (`tape.rs`), both on the
//! reference evaluator. Independent of the source-to-source modes, they
//! are what those are checked against.

use super::Columns;
use super::reading::one_hot;
use crate::eval::{EvalError, Limits, Stats, Value, flatten, unflatten};
use crate::pipeline::Entry;

/// Central finite differences: (f(x + h eⱼ) − f(x − h eⱼ)) / 2h with
/// h = ε^(1/3) · max(1, |xⱼ|), on the reference evaluator.
pub fn finite_differences(
    base: &Entry,
    wrt: usize,
    args: Vec<Value>,
    limits: Limits,
) -> Result<Columns, EvalError> {
    finite_differences_scaled(base, wrt, args, limits, 1.0)
}

/// [`finite_differences`] with the step h scaled by `scale` (the
/// validation gate compares h with h/2 to judge the stencil's smoothness).
pub fn finite_differences_scaled(
    base: &Entry,
    wrt: usize,
    args: Vec<Value>,
    limits: Limits,
    scale: f64,
) -> Result<Columns, EvalError> {
    let (value, mut stats) = base.run(args.clone(), limits, &mut |_, _| {})?;
    let mut xs = Vec::new();
    flatten(&args[wrt], &mut xs);
    let mut columns = Vec::with_capacity(xs.len());
    for j in 0..xs.len() {
        let h = scale * step(xs[j]);
        let mut eval_at = |delta: f64| -> Result<Vec<f64>, EvalError> {
            let (out, s) = outputs_at(base, (wrt, &args, &xs), (j, delta), limits)?;
            stats.steps += s.steps;
            stats.ops += s.ops;
            Ok(out)
        };
        let plus = eval_at(h)?;
        let minus = eval_at(-h)?;
        if plus.len() != minus.len() {
            return Err(EvalError::Domain {
                op: "central finite differences",
                arg: format!("input element {j}: the result changes shape within ±{h:e}"),
                span: base.span,
            });
        }
        columns.push(
            plus.iter()
                .zip(&minus)
                .map(|(a, b)| (a - b) / (2.0 * h))
                .collect(),
        );
    }
    Ok(Columns {
        value,
        columns,
        stats,
    })
}

/// The finite-difference step at `x`: ε^(1/3) · max(1, |x|), which
/// balances truncation (O(h²)) against rounding (O(ε/h)).
pub fn step(x: f64) -> f64 {
    f64::EPSILON.cbrt() * x.abs().max(1.0)
}

/// The entry's outputs, flattened, with element `j` of parameter `wrt`
/// (whose elements are `xs`) moved by `delta`.
fn outputs_at(
    base: &Entry,
    (wrt, args, xs): (usize, &[Value], &[f64]),
    (j, delta): (usize, f64),
    limits: Limits,
) -> Result<(Vec<f64>, Stats), EvalError> {
    let mut p = xs.to_vec();
    p[j] += delta;
    let mut a = args.to_vec();
    a[wrt] = unflatten(&args[wrt], &mut p.into_iter());
    let (v, stats) = base.run(a, limits, &mut |_, _| {})?;
    let mut out = Vec::new();
    flatten(&v, &mut out);
    Ok((out, stats))
}

/// Whether output `i` of the entry has a kink in input element `j` of
/// parameter `wrt` at `args`: its second difference f(x + h) − 2 f(x) +
/// f(x − h), which is O(h²) where f is smooth, is larger than 1e-3 · h ·
/// (1 + |central difference|) (h as in [`finite_differences`]: [`step`]). At a kink
/// (`abs` at 0, `max` at a tie, a branch's boundary) the central
/// difference is the mean of the two one-sided slopes, which no
/// derivative need equal; `abs` at 0 has a central difference of 0 at
/// every step, so comparing two steps does not see it. `None` when a run
/// is ⊥ or the elements are not there.
pub fn kink(
    base: &Entry,
    wrt: usize,
    args: &[Value],
    (j, i): (usize, usize),
    limits: Limits,
) -> Option<bool> {
    let mut xs = Vec::new();
    flatten(args.get(wrt)?, &mut xs);
    let h = step(*xs.get(j)?);
    let out_at = |delta: f64| -> Option<f64> {
        let (out, _) = outputs_at(base, (wrt, args, &xs), (j, delta), limits).ok()?;
        out.get(i).copied()
    };
    let (plus, mid, minus) = (out_at(h)?, out_at(0.0)?, out_at(-h)?);
    let slope = (plus - minus) / (2.0 * h);
    let second = plus - 2.0 * mid + minus;
    Some(second.abs() > 1e-3 * h * (1.0 + slope.abs()))
}

/// Reverse mode by taping (`tape`): one backward sweep per output element.
pub fn tape(
    base: &Entry,
    wrt: usize,
    args: Vec<Value>,
    limits: Limits,
) -> Result<Columns, EvalError> {
    let name = base.name_in_program();
    let (value, mut stats) = base.run(args.clone(), limits, &mut |_, _| {})?;
    let mut outs = Vec::new();
    flatten(&value, &mut outs);
    let mut rows = Vec::with_capacity(outs.len());
    for i in 0..outs.len() {
        let seed = one_hot(&value, i);
        let t = crate::tape::vjp(&base.program, &name, args.clone(), wrt, Some(&seed), limits)?;
        stats.steps += t.stats.steps;
        stats.ops += t.stats.ops;
        let mut row = Vec::new();
        flatten(&t.gradient, &mut row);
        rows.push(row);
    }
    let n = rows.first().map(Vec::len).unwrap_or_else(|| {
        let mut xs = Vec::new();
        flatten(&args[wrt], &mut xs);
        xs.len()
    });
    let columns = (0..n)
        .map(|j| rows.iter().map(|r| r[j]).collect())
        .collect();
    Ok(Columns {
        value,
        columns,
        stats,
    })
}
