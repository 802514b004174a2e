//! Reading derivative columns out of the results of derivative programs:
//! dual results (one per element of the variable), tangent-only results,
//! the Jacobian's rows, and reverse mode's (value, cotangent) pairs.

use super::{Columns, Plan};
use crate::eval::{EvalError, Limits, Stats, Value, flatten, unflatten};
use crate::ir::Type;
use crate::pipeline::{Engine, Entry, RunError};

/// The primal part of a value of type DT[`t`].
pub fn primal(v: &Value, t: &Type) -> Value {
    match (t, v) {
        (Type::Double, Value::Pair(p)) => p.0.clone(),
        (Type::Array(e), Value::Array(items)) => {
            Value::array(items.iter().map(|x| primal(x, e)).collect())
        }
        (Type::Pair(a, b), Value::Pair(p)) => Value::pair(primal(&p.0, a), primal(&p.1, b)),
        _ => v.clone(),
    }
}

/// The tangent part of a value of type DT[`t`] (zero for Index and Bool).
pub fn tangent(v: &Value, t: &Type) -> Value {
    match (t, v) {
        (Type::Double, Value::Pair(p)) => p.1.clone(),
        (Type::Index, _) => Value::Index(0),
        (Type::Bool, _) => Value::Bool(false),
        (Type::Array(e), Value::Array(items)) => {
            Value::array(items.iter().map(|x| tangent(x, e)).collect())
        }
        (Type::Pair(a, b), Value::Pair(p)) => Value::pair(tangent(&p.0, a), tangent(&p.1, b)),
        _ => v.clone(),
    }
}

/// The wrapper's result split into one entry per element of an
/// independent variable of type `wt` (Double, Vector or Matrix, row-major).
fn per_element(wt: &Type, res: &Value) -> Vec<Value> {
    match (wt, res) {
        (Type::Double, _) => vec![res.clone()],
        (Type::Array(e), Value::Array(rows)) if **e == Type::Double => rows.to_vec(),
        (_, Value::Array(rows)) => rows
            .iter()
            .flat_map(|r| match r {
                Value::Array(cs) => cs.to_vec(),
                other => vec![other.clone()],
            })
            .collect(),
        _ => vec![res.clone()],
    }
}

fn add(stats: &mut Stats, s: Stats) {
    stats.steps += s.steps;
    stats.ops += s.ops;
}

/// The flattened Doubles of each value.
fn flat_each(vs: &[Value]) -> Vec<Vec<f64>> {
    vs.iter()
        .map(|t| {
            let mut xs = Vec::new();
            flatten(t, &mut xs);
            xs
        })
        .collect()
}

/// Forward mode: one run of the `deriv` wrapper, whose dual results give
/// the value and the tangents.
pub(super) fn duals(
    plan: &Plan,
    wrapper: &Entry,
    args: Vec<Value>,
    engine: Engine,
    limits: Limits,
) -> Result<Columns, RunError> {
    let wt = &plan.base.params[plan.wrt].1;
    let rt = &plan.base.result;
    let (res, mut stats) = wrapper.run_on(engine, args.clone(), limits)?;
    let duals = per_element(wt, &res);
    let value = match duals.first() {
        Some(first) => primal(first, rt),
        None => {
            // An empty independent variable: evaluate the function itself.
            let (v, s) = plan.base.run_on(engine, args, limits)?;
            add(&mut stats, s);
            v
        }
    };
    let tangents: Vec<Value> = duals.iter().map(|du| tangent(du, rt)).collect();
    Ok(Columns {
        value,
        columns: flat_each(&tangents),
        stats,
    })
}

/// Forward mode's tangent-only wrapper, then the function for the value
/// (the wrapper first, as [`duals`] runs it: the first ⊥ is the same). On
/// native code both run on slices of Doubles where their types allow.
pub(super) fn tangents(
    plan: &Plan,
    wrapper: &Entry,
    args: Vec<Value>,
    engine: Engine,
    limits: Limits,
) -> Result<Columns, RunError> {
    if let Some(flat) = wrapper.run_flat(engine, &args, limits)
        && let Some(value) = plan.base.run_value(engine, &args, limits)
    {
        // One tangent shaped like the result per element of the variable,
        // flattened in order: columns of the result's length.
        let (flat, value) = (flat?, value?);
        let mut r = Vec::new();
        flatten(&value, &mut r);
        if !r.is_empty() {
            let columns = flat.chunks(r.len()).map(<[f64]>::to_vec).collect();
            return Ok(Columns {
                value,
                columns,
                stats: Stats::default(),
            });
        }
    }
    let wt = &plan.base.params[plan.wrt].1;
    let (res, mut stats) = wrapper.run_on(engine, args.clone(), limits)?;
    let per = per_element(wt, &res);
    let (value, s) = plan.base.run_on(engine, args, limits)?;
    add(&mut stats, s);
    // The tangent-only wrapper gives an Index or Bool part of the result
    // a Double tangent (0.0); a column has an entry for each Double of
    // the result only, as the other modes' columns do.
    let columns = per
        .iter()
        .map(|t| {
            let mut xs = Vec::new();
            tangents_of_doubles(&value, t, &mut xs);
            xs
        })
        .collect();
    Ok(Columns {
        value,
        columns,
        stats,
    })
}

/// The Doubles of `tangent` (shaped like `value`) at the places where
/// `value` has a Double, in order.
fn tangents_of_doubles(value: &Value, tangent: &Value, out: &mut Vec<f64>) {
    match (value, tangent) {
        (Value::Double(_), t) => flatten(t, out),
        (Value::Index(_) | Value::Bool(_) | Value::Closure(_), _) => {}
        (Value::Pair(v), Value::Pair(t)) => {
            tangents_of_doubles(&v.0, &t.0, out);
            tangents_of_doubles(&v.1, &t.1, out);
        }
        (Value::Persistent(_), t) => tangents_of_doubles(&value.frozen(), t, out),
        (v, Value::Persistent(_)) => tangents_of_doubles(v, &tangent.frozen(), out),
        (Value::Array(vs), Value::Array(ts)) => {
            for (v, t) in vs.iter().zip(ts.iter()) {
                tangents_of_doubles(v, t, out);
            }
        }
        // Shapes that do not match: every Double of the tangent.
        (_, t) => flatten(t, out),
    }
}

/// The value and derivative columns from the Jacobian's rows (D-Vec-Rows,
/// `--mode fwd-rows`): the rows program first, then the function, as
/// [`duals`] runs its wrapper. Every Double of the rows program's result
/// is a vector over the n elements of the variable, so its flattening is
/// leaf-major: column r takes element r of each.
pub(super) fn rows(
    plan: &Plan,
    rows: &Entry,
    args: Vec<Value>,
    engine: Engine,
    limits: Limits,
) -> Result<Columns, RunError> {
    let n = match args.get(plan.wrt) {
        Some(Value::Array(xs)) => xs.len(),
        _ => 0,
    };
    let (flat, mut stats) = match rows.run_flat(engine, &args, limits) {
        Some(flat) => (flat?, Stats::default()),
        None => {
            let (res, stats) = rows.run_on(engine, args.clone(), limits)?;
            let mut flat = Vec::new();
            flatten(&res, &mut flat);
            (flat, stats)
        }
    };
    let value = match plan.base.run_value(engine, &args, limits) {
        Some(v) => v?,
        None => {
            let (v, s) = plan.base.run_on(engine, args, limits)?;
            add(&mut stats, s);
            v
        }
    };
    let leaves = flat.len().checked_div(n).unwrap_or(0);
    let columns = (0..n)
        .map(|r| (0..leaves).map(|i| flat[i * n + r]).collect())
        .collect();
    Ok(Columns {
        value,
        columns,
        stats,
    })
}

/// The value and the cotangent of the variable from a run of `rev'entry`.
pub(super) fn value_and_gradient(res: Value, rev: &Entry) -> Result<(Value, Value), RunError> {
    match res {
        Value::Pair(p) => Ok((p.0.clone(), p.1.clone())),
        other => Err(RunError::Eval(EvalError::Internal {
            message: format!("reverse program returned {other}"),
            span: rev.span,
        })),
    }
}

/// Source-to-source reverse mode: one run per output element (one in all
/// for a Double result).
pub(super) fn reverse(
    plan: &Plan,
    rev: &Entry,
    seeded: bool,
    args: Vec<Value>,
    engine: Engine,
    limits: Limits,
) -> Result<Columns, RunError> {
    let run = |extra: Option<Value>| -> Result<(Value, Value, Stats), RunError> {
        let mut a = args.clone();
        a.extend(extra);
        let (r, s) = rev.run_on(engine, a, limits)?;
        let (v, g) = value_and_gradient(r, rev)?;
        Ok((v, g, s))
    };
    if !seeded {
        let (value, g, stats) = run(None)?;
        let mut xs = Vec::new();
        flatten(&g, &mut xs);
        return Ok(Columns {
            value,
            columns: xs.into_iter().map(|x| vec![x]).collect(),
            stats,
        });
    }
    let (value, mut stats) = plan.base.run_on(engine, args.clone(), limits)?;
    let mut outs = Vec::new();
    flatten(&value, &mut outs);
    let mut rows = Vec::new();
    for i in 0..outs.len() {
        let (_, g, s) = run(Some(one_hot(&value, i)))?;
        add(&mut stats, s);
        let mut row = Vec::new();
        flatten(&g, &mut row);
        rows.push(row);
    }
    let n = rows.first().map(Vec::len).unwrap_or(0);
    let columns = (0..n)
        .map(|j| rows.iter().map(|r| r[j]).collect())
        .collect();
    Ok(Columns {
        value,
        columns,
        stats,
    })
}

/// `like` with its `i`-th Double 1 and the others 0: the cotangent seed
/// of output element `i`.
pub(super) fn one_hot(like: &Value, i: usize) -> Value {
    let mut k = 0;
    unflatten(
        like,
        &mut std::iter::from_fn(|| {
            k += 1;
            Some(if k - 1 == i { 1.0 } else { 0.0 })
        }),
    )
}
