//! What runs an [`Entry`]: the reference evaluator or its native code
//! ([`Engine`]), with one error type for both ([`RunError`]), and the fast
//! path that calls native code on slices of Doubles without converting
//! them to and from [`Value`]s.

use thiserror::Error;

use super::Entry;
use crate::codegen::{Arg, CodegenError, NativeLimits, Out, Outputs};
use crate::diagnostic::{Diagnose, Span};
use crate::eval::{EvalError, Limits, Stats, Value};
use crate::ir::Type;

/// What runs a program.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub enum Engine {
    /// The reference evaluator (the semantics; has fuel, --trace, --stats).
    #[default]
    Eval,
    /// Native code through Cranelift (JIT): same results and ⊥ codes.
    Native,
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

/// Whether an error code is a resource limit's, `out-of-fuel` (E-Fuel) or
/// `array-too-large` (E-Limit): not an observation of the program, so a
/// checker that meets one on either side has no verdict (spec/semantics.md
/// §9, "Resource limits").
pub fn is_resource_limit(code: &str) -> bool {
    matches!(code, "out-of-fuel" | "array-too-large")
}

impl RunError {
    /// The run met a resource limit (E-Fuel, E-Limit): no verdict on the
    /// program (spec/semantics.md §9, "Resource limits").
    pub fn is_resource_limit(&self) -> bool {
        is_resource_limit(self.code())
    }

    /// The evaluator's error back from a run on [`Engine::Eval`].
    pub fn into_eval(self) -> EvalError {
        match self {
            RunError::Eval(e) => e,
            RunError::Native(n) => EvalError::Internal {
                message: n.to_string(),
                span: Span::generated(),
            },
        }
    }
}

impl Entry {
    /// Runs the entry on `args` with `engine` (native code is compiled on
    /// first use). Native runs report no steps or ops.
    pub fn run_on(
        &self,
        engine: Engine,
        args: Vec<Value>,
        limits: Limits,
    ) -> Result<(Value, Stats), RunError> {
        self.run_engine(engine, args, limits)
            .map_err(|e| self.locate(e))
    }

    /// A run-time error with no span of its own, located at the entry (the
    /// user's function a derived program comes from): every error points
    /// into the user's program.
    pub fn locate(&self, e: RunError) -> RunError {
        if e.span() != Span::generated() || self.span == Span::generated() {
            return e;
        }
        match e {
            RunError::Native(error) => RunError::Native(CodegenError::Located {
                error: Box::new(error),
                span: self.span,
            }),
            RunError::Eval(mut error) => {
                error.set_span(self.span);
                RunError::Eval(error)
            }
        }
    }

    fn run_engine(
        &self,
        engine: Engine,
        args: Vec<Value>,
        limits: Limits,
    ) -> Result<(Value, Stats), RunError> {
        match engine {
            Engine::Eval => Ok(self.run(args, limits, &mut |_, _| {})?),
            Engine::Native => {
                let v = self.native()?.call_with(&args, NativeLimits::of(limits))?;
                Ok((v, Stats::default()))
            }
        }
    }

    /// [`Entry::run_slices`] with the result's Doubles flattened in order
    /// (a matrix row by row).
    pub fn run_flat(
        &self,
        engine: Engine,
        args: &[Value],
        limits: Limits,
    ) -> Option<Result<Vec<f64>, RunError>> {
        self.run_slices(engine, args, limits, flat_of)
    }

    /// The result as a [`Value`] through [`Entry::run_slices`].
    pub fn run_value(
        &self,
        engine: Engine,
        args: &[Value],
        limits: Limits,
    ) -> Option<Result<Value, RunError>> {
        self.run_slices(engine, args, limits, |o| value_of(&self.result, o, &mut 0))
    }

    /// Runs the entry natively through `Native::call_slices`, without
    /// converting its arguments and result to and from [`Value`]s, and
    /// reads the result with `read`: when the engine is native and every
    /// parameter and leaf of the result is a Double, a vector or a matrix
    /// of Doubles (a parameter may also be an Index or a Bool). `None`
    /// otherwise.
    pub fn run_slices<T>(
        &self,
        engine: Engine,
        args: &[Value],
        limits: Limits,
        read: impl FnOnce(&Outputs<'_>) -> T,
    ) -> Option<Result<T, RunError>> {
        if engine != Engine::Native {
            return None;
        }
        self.with_slices(args, |native, call| {
            native
                .call_slices_with(call, NativeLimits::of(limits))
                .map(|o| read(&o))
                .map_err(|e| self.locate(RunError::from(e)))
        })
    }

    /// The fastest of `n` native calls on `args` in milliseconds, the
    /// arguments converted for `Native::call_slices` once, before the
    /// first (what `--repeat` reports: compiled code, not the conversion
    /// of [`Value`]s). `None` as for [`Entry::run_slices`].
    pub fn time_native(
        &self,
        args: &[Value],
        limits: Limits,
        n: u32,
    ) -> Option<Result<f64, RunError>> {
        self.with_slices(args, |native, call| {
            let mut best = f64::INFINITY;
            for _ in 0..n.max(1) {
                let start = std::time::Instant::now();
                native
                    .call_slices_with(call, NativeLimits::of(limits))
                    .map_err(|e| self.locate(RunError::from(e)))?;
                best = best.min(start.elapsed().as_secs_f64() * 1e3);
            }
            Ok(best)
        })
    }

    /// `f` of the compiled entry and `args` as `Native::call_slices`
    /// takes them, when every parameter and leaf of the result is a
    /// Double, a vector or a matrix of Doubles (a parameter may also be an
    /// Index or a Bool); `None` otherwise.
    fn with_slices<T>(
        &self,
        args: &[Value],
        f: impl FnOnce(&crate::codegen::Native, &[Arg<'_>]) -> Result<T, RunError>,
    ) -> Option<Result<T, RunError>> {
        if !double_leaves(&self.result) || self.params.len() != args.len() {
            return None;
        }
        let owned: Vec<Slices> = self
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
        Some(match self.native() {
            Ok(native) => f(&native, &call),
            Err(e) => Err(e.into()),
        })
    }
}

/// A parameter of `Native::call_slices`, owned: a scalar, or the
/// elements of an array (or the rows of a matrix) of Doubles.
enum Slices {
    Scalar(Arg<'static>),
    Flat(Vec<f64>),
    Rows(Vec<Vec<f64>>),
}

/// `v` as a parameter of type `t` for `Native::call_slices`, when `t`
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
/// (what `Native::call_slices` returns as `F64`, `F64s`, `F64Rows`).
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
