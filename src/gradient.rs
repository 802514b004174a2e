//! Gradients and Jacobians of an entry as values, for the command line and
//! for tests: from forward mode (reading the tangents out of `deriv`'s dual
//! result) or from central finite differences on the reference evaluator
//! (a baseline any user can compare with).
//!
//! Shapes: the gradient of a Double-valued entry has the shape of the
//! independent variable; the Jacobian of a Vector-valued entry is a matrix
//! J[i][j] = ∂outᵢ/∂inⱼ over the elements of the independent variable
//! (row-major for a Matrix variable).

use std::cell::RefCell;
use std::collections::HashMap;

use thiserror::Error;

use crate::codegen::{Arg, CodegenError, Native, Out, Outputs};
use crate::diagnostic::{Diagnose, Span};
use crate::eval::{EvalError, Limits, Stats, Value};
use crate::ir::Type;
use crate::pipeline::{Derivative, Entry, RowsDerivative};

/// What runs the programs of a derivative: the reference evaluator, or
/// native code (each entry compiled once, on first use).
pub enum Engine {
    Eval(Limits),
    Native(RefCell<HashMap<usize, Native>>),
}

impl Engine {
    pub fn native() -> Engine {
        Engine::Native(RefCell::new(HashMap::new()))
    }

    /// Runs `entry` on `args`. Native runs report no steps or ops.
    pub fn run(&self, entry: &Entry, args: Vec<Value>) -> Result<(Value, Stats), RunError> {
        match self {
            Engine::Eval(limits) => Ok(entry.run(args, *limits, &mut |_, _| {})?),
            Engine::Native(cache) => {
                let v = compiled(cache, entry, |native| native.call(&args))??;
                Ok((v, Stats::default()))
            }
        }
    }

    /// [`Engine::run_slices`] with the result's Doubles flattened in order
    /// (a matrix row by row).
    pub fn run_flat(&self, entry: &Entry, args: &[Value]) -> Option<Result<Vec<f64>, RunError>> {
        self.run_slices(entry, args, flat_of)
    }

    /// Runs `entry` natively through [`Native::call_slices`], without
    /// converting its arguments and result to and from [`Value`]s, and
    /// reads the result with `read`: when the engine is native and every
    /// parameter and leaf of the result is a Double, a vector or a matrix
    /// of Doubles (a parameter may also be an Index or a Bool). `None`
    /// otherwise.
    fn run_slices<T>(
        &self,
        entry: &Entry,
        args: &[Value],
        read: impl FnOnce(&Outputs<'_>) -> T,
    ) -> Option<Result<T, RunError>> {
        let Engine::Native(cache) = self else {
            return None;
        };
        if !double_leaves(&entry.result) || entry.params.len() != args.len() {
            return None;
        }
        let owned: Vec<Slices> = entry
            .params
            .iter()
            .zip(args)
            .map(|((_, t), v)| slices(t, v))
            .collect::<Option<_>>()?;
        let rows: Vec<Vec<&[f64]>> = owned
            .iter()
            .map(|o| match o {
                Slices::Rows(rs) => rs.iter().map(Vec::as_slice).collect(),
                _ => Vec::new(),
            })
            .collect();
        let call: Vec<Arg<'_>> = owned
            .iter()
            .zip(&rows)
            .map(|(o, r)| match o {
                Slices::Scalar(a) => *a,
                Slices::Flat(xs) => Arg::F64s(xs),
                Slices::Rows(_) => Arg::F64Rows(r),
            })
            .collect();
        let r = compiled(cache, entry, |native| {
            native.call_slices(&call).map(|o| read(&o))
        });
        Some(r.and_then(|r| r).map_err(RunError::from))
    }
}

/// `f` of `entry` compiled, once per engine: keyed by address, as the
/// entries of one derivative outlive the engine's use.
fn compiled<T>(
    cache: &RefCell<HashMap<usize, Native>>,
    entry: &Entry,
    f: impl FnOnce(&Native) -> T,
) -> Result<T, CodegenError> {
    let key = entry as *const Entry as usize;
    let mut cache = cache.borrow_mut();
    let native = match cache.entry(key) {
        std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
        std::collections::hash_map::Entry::Vacant(v) => v.insert(Native::compile(entry)?),
    };
    Ok(f(native))
}

/// A parameter of [`Native::call_slices`], owned: a scalar, or the
/// elements of an array (or the rows of a matrix) of Doubles.
enum Slices {
    Scalar(Arg<'static>),
    Flat(Vec<f64>),
    Rows(Vec<Vec<f64>>),
}

/// `v` as a parameter of type `t` for [`Native::call_slices`], when `t`
/// is a scalar, a vector or a matrix of Doubles.
fn slices(t: &Type, v: &Value) -> Option<Slices> {
    let doubles = |xs: &[Value]| -> Option<Vec<f64>> {
        xs.iter()
            .map(|x| match x {
                Value::Double(d) => Some(*d),
                _ => None,
            })
            .collect()
    };
    Some(match (t, v) {
        (Type::Double, Value::Double(x)) => Slices::Scalar(Arg::F64(*x)),
        (Type::Index, Value::Index(i)) => Slices::Scalar(Arg::I64(*i)),
        (Type::Bool, Value::Bool(b)) => Slices::Scalar(Arg::Bool(*b)),
        (Type::Array(e), Value::Array(xs)) if **e == Type::Double => Slices::Flat(doubles(xs)?),
        (Type::Array(e), Value::Array(rows)) if **e == Type::array(Type::Double) => Slices::Rows(
            rows.iter()
                .map(|r| match r {
                    Value::Array(xs) => doubles(xs),
                    _ => None,
                })
                .collect::<Option<_>>()?,
        ),
        _ => return None,
    })
}

/// Whether every leaf of `t` is a Double, a vector or a matrix of Doubles
/// (what [`Native::call_slices`] returns as `F64`, `F64s`, `F64Rows`).
fn double_leaves(t: &Type) -> bool {
    match t {
        Type::Double => true,
        Type::Array(e) => **e == Type::Double || **e == Type::array(Type::Double),
        Type::Pair(a, b) => double_leaves(a) && double_leaves(b),
        _ => false,
    }
}

/// The value of type `t` from the result's leaves, from leaf `k` on.
fn value_of(t: &Type, outs: &Outputs<'_>, k: &mut usize) -> Value {
    let doubles = |xs: &[f64]| Value::array(xs.iter().map(|&x| Value::Double(x)).collect());
    if let Type::Pair(a, b) = t {
        let a = value_of(a, outs, k);
        return Value::pair(a, value_of(b, outs, k));
    }
    let leaf = outs.get(*k);
    *k += 1;
    match leaf {
        Some(Out::F64(x)) => Value::Double(x),
        Some(Out::F64s(xs)) => doubles(xs),
        Some(Out::F64Rows(rows)) => Value::array(rows.iter().map(doubles).collect()),
        // `double_leaves` admits no other leaf.
        _ => Value::array(Vec::new()),
    }
}

/// The result's leaves flattened: Doubles in order, arrays and matrix
/// rows element by element.
fn flat_of(outs: &Outputs<'_>) -> Vec<f64> {
    let mut xs = Vec::new();
    for k in 0..outs.len() {
        match outs.get(k) {
            Some(Out::F64(x)) => xs.push(x),
            Some(Out::F64s(s)) => xs.extend_from_slice(s),
            Some(Out::F64Rows(rows)) => rows.iter().for_each(|r| xs.extend_from_slice(r)),
            _ => {}
        }
    }
    xs
}

/// An error of either engine, with its own stable code.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum RunError {
    #[error(transparent)]
    Eval(#[from] EvalError),
    #[error(transparent)]
    Native(#[from] CodegenError),
}

impl Diagnose for RunError {
    fn code(&self) -> &'static str {
        match self {
            RunError::Eval(e) => e.code(),
            RunError::Native(e) => e.code(),
        }
    }
    fn span(&self) -> Span {
        match self {
            RunError::Eval(e) => e.span(),
            RunError::Native(e) => e.span(),
        }
    }
    fn notes(&self) -> Vec<String> {
        match self {
            RunError::Eval(e) => e.notes(),
            RunError::Native(e) => e.notes(),
        }
    }
}

/// The evaluator's error back from a run on [`Engine::Eval`].
fn eval_error(e: RunError) -> EvalError {
    match e {
        RunError::Eval(e) => e,
        RunError::Native(n) => EvalError::Internal {
            message: n.to_string(),
            span: Span::generated(),
        },
    }
}

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

/// The doubles of a value, in order (Index and Bool parts have no
/// derivatives and are skipped, consistently with [`unflatten`]).
pub fn flatten(v: &Value, out: &mut Vec<f64>) {
    match v {
        Value::Double(x) => out.push(*x),
        Value::Index(_) => {}
        Value::Array(items) => items.iter().for_each(|x| flatten(x, out)),
        Value::Persistent(_) => flatten(&v.frozen(), out),
        Value::Pair(p) => {
            flatten(&p.0, out);
            flatten(&p.1, out);
        }
        Value::Bool(_) | Value::Closure(_) => {}
    }
}

/// `v` with its doubles replaced, in order, by `xs`.
pub fn unflatten(v: &Value, xs: &mut impl Iterator<Item = f64>) -> Value {
    match v {
        Value::Double(_) => Value::Double(xs.next().unwrap_or(f64::NAN)),
        Value::Array(items) => Value::array(items.iter().map(|x| unflatten(x, xs)).collect()),
        Value::Pair(p) => {
            let a = unflatten(&p.0, xs);
            let b = unflatten(&p.1, xs);
            Value::pair(a, b)
        }
        other => other.clone(),
    }
}

/// The value of the entry and, for each element of the independent
/// variable, the derivative of the (flattened) result along it.
pub struct Columns {
    pub value: Value,
    pub columns: Vec<Vec<f64>>,
    pub stats: Stats,
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

/// Forward mode: one run of the `deriv` wrapper.
pub fn forward(d: &Derivative, args: Vec<Value>, limits: Limits) -> Result<Columns, EvalError> {
    forward_on(d, args, &Engine::Eval(limits)).map_err(eval_error)
}

/// [`forward`] on either engine.
pub fn forward_on(d: &Derivative, args: Vec<Value>, engine: &Engine) -> Result<Columns, RunError> {
    let wt = d.base.params[d.wrt].1.clone();
    let rt = d.base.result.clone();
    // The wrapper first, then the function, as below: the first ⊥ is the
    // same.
    if d.tangent_only
        && let Some(flat) = engine.run_slices(&d.wrapper, &args, flat_of)
        && let Some(value) = engine.run_slices(&d.base, &args, |o| value_of(&rt, o, &mut 0))
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
    let (res, mut stats) = engine.run(&d.wrapper, args.clone())?;
    if d.tangent_only {
        // One tangent (shaped like the result) per element of the variable.
        let per = per_element(&wt, &res);
        let (value, s) = engine.run(&d.base, args)?;
        stats.steps += s.steps;
        stats.ops += s.ops;
        let columns = per
            .iter()
            .map(|t| {
                let mut xs = Vec::new();
                flatten(t, &mut xs);
                xs
            })
            .collect();
        return Ok(Columns {
            value,
            columns,
            stats,
        });
    }
    // One dual result per element of the independent variable.
    let duals = per_element(&wt, &res);
    let value = match duals.first() {
        Some(first) => primal(first, &rt),
        None => {
            // An empty independent variable: evaluate the function itself.
            let (v, s) = engine.run(&d.base, args)?;
            stats.steps += s.steps;
            stats.ops += s.ops;
            v
        }
    };
    let columns = duals
        .iter()
        .map(|du| {
            let mut xs = Vec::new();
            flatten(&tangent(du, &rt), &mut xs);
            xs
        })
        .collect();
    Ok(Columns {
        value,
        columns,
        stats,
    })
}

/// The value and derivative columns from the Jacobian's rows (D-Vec-Rows,
/// `--mode fwd-rows`): the rows program first, then the function, as
/// [`forward_on`] runs its wrapper. Every Double of the rows program's
/// result is a vector over the n elements of the variable, so its
/// flattening is leaf-major: column r takes element r of each.
pub fn rows_on(d: &RowsDerivative, args: Vec<Value>, engine: &Engine) -> Result<Columns, RunError> {
    let n = match args.get(d.wrt) {
        Some(Value::Array(xs)) => xs.len(),
        _ => 0,
    };
    let rt = d.base.result.clone();
    let (flat, mut stats) = match engine.run_slices(&d.rows, &args, flat_of) {
        Some(flat) => (flat?, Stats::default()),
        None => {
            let (res, stats) = engine.run(&d.rows, args.clone())?;
            let mut flat = Vec::new();
            flatten(&res, &mut flat);
            (flat, stats)
        }
    };
    let value = match engine.run_slices(&d.base, &args, |o| value_of(&rt, o, &mut 0)) {
        Some(v) => v?,
        None => {
            let (v, s) = engine.run(&d.base, args)?;
            stats.steps += s.steps;
            stats.ops += s.ops;
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

/// Central finite differences: (f(x + h eⱼ) − f(x − h eⱼ)) / 2h with
/// h = ε^(1/3) · max(1, |xⱼ|), on the reference evaluator.
pub fn finite_differences(
    base: &Entry,
    wrt: usize,
    args: Vec<Value>,
    limits: Limits,
) -> Result<Columns, EvalError> {
    let (value, mut stats) = base.run(args.clone(), limits, &mut |_, _| {})?;
    let mut xs = Vec::new();
    flatten(&args[wrt], &mut xs);
    let mut columns = Vec::with_capacity(xs.len());
    for j in 0..xs.len() {
        let h = f64::EPSILON.cbrt() * xs[j].abs().max(1.0);
        let mut eval_at = |delta: f64| -> Result<Vec<f64>, EvalError> {
            let mut p = xs.clone();
            p[j] += delta;
            let mut a = args.clone();
            a[wrt] = unflatten(&args[wrt], &mut p.into_iter());
            let (v, s) = base.run(a, limits, &mut |_, _| {})?;
            stats.steps += s.steps;
            stats.ops += s.ops;
            let mut out = Vec::new();
            flatten(&v, &mut out);
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

impl Columns {
    /// The gradient of a scalar function, shaped like the variable `like`.
    pub fn gradient(&self, like: &Value) -> Value {
        let mut it = self
            .columns
            .iter()
            .map(|c| c.first().copied().unwrap_or(0.0));
        unflatten(like, &mut it)
    }

    /// J[i][j] = ∂outᵢ/∂inⱼ.
    pub fn jacobian(&self) -> Value {
        let rows = self.columns.first().map(Vec::len).unwrap_or(0);
        Value::array(
            (0..rows)
                .map(|i| Value::array(self.columns.iter().map(|c| Value::Double(c[i])).collect()))
                .collect(),
        )
    }
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
        let mut k = 0;
        let seed = unflatten(
            &value,
            &mut std::iter::from_fn(|| {
                k += 1;
                Some(if k - 1 == i { 1.0 } else { 0.0 })
            }),
        );
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

/// Source-to-source reverse mode: one run per output element (one in all
/// for a Double result).
pub fn reverse(
    d: &crate::pipeline::ReverseDerivative,
    args: Vec<Value>,
    limits: Limits,
) -> Result<Columns, EvalError> {
    reverse_on(d, args, &Engine::Eval(limits)).map_err(eval_error)
}

/// [`reverse`] on either engine.
pub fn reverse_on(
    d: &crate::pipeline::ReverseDerivative,
    args: Vec<Value>,
    engine: &Engine,
) -> Result<Columns, RunError> {
    let run = |extra: Option<Value>| -> Result<(Value, Value, Stats), RunError> {
        let mut a = args.clone();
        a.extend(extra);
        let (r, s) = engine.run(&d.rev, a)?;
        match r {
            Value::Pair(p) => Ok((p.0.clone(), p.1.clone(), s)),
            other => Err(RunError::Eval(EvalError::Internal {
                message: format!("reverse program returned {other}"),
                span: d.rev.span,
            })),
        }
    };
    if !d.seeded {
        let (value, g, stats) = run(None)?;
        let mut xs = Vec::new();
        flatten(&g, &mut xs);
        return Ok(Columns {
            value,
            columns: xs.into_iter().map(|x| vec![x]).collect(),
            stats,
        });
    }
    let (value, mut stats) = engine.run(&d.base, args.clone())?;
    let mut outs = Vec::new();
    flatten(&value, &mut outs);
    let mut rows = Vec::new();
    for i in 0..outs.len() {
        let mut k = 0;
        let seed = unflatten(
            &value,
            &mut std::iter::from_fn(|| {
                k += 1;
                Some(if k - 1 == i { 1.0 } else { 0.0 })
            }),
        );
        let (_, g, s) = run(Some(seed))?;
        stats.steps += s.steps;
        stats.ops += s.ops;
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
