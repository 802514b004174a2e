//! Gradients, Jacobians and vector–Jacobian products of an entry as values,
//! in every mode: the one place a gradient mode ([`Mode`]) is mapped to
//! the programs that compute it ([`Mode::program`], [`Plan::new`]) and
//! their results are read back as derivative columns ([`Plan::columns`]).
//! The CLI's `grad`, `jacobian`, `vjp`, `ad`, `compile` and `adbench`, and
//! differential testing, all go through it.
//!
//! Shapes: the gradient of a Double-valued entry has the shape of the
//! independent variable; the Jacobian of a Vector-valued entry is a matrix
//! J[i][j] = ∂outᵢ/∂inⱼ over the elements of the independent variable
//! (row-major for a Matrix variable).

mod oracles;
mod reading;

use std::rc::Rc;

use crate::diagnostic::Diagnostic;
use crate::eval::{EvalError, Limits, Stats, Value};
pub use crate::eval::{flatten, unflatten};
use crate::interchange::InputError;
use crate::pipeline::Engine as Runner;
use crate::pipeline::{Artefact, Checkpointing, Entry, Form, ForwardMode, RunError, Session};

pub use oracles::{finite_differences, finite_differences_scaled, kink, step, tape};
pub use reading::{primal, tangent};

/// How a derivative is computed (README, "Using the command line").
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Forward mode: D[[·]] of seed 001, one pass per input element.
    Fwd,
    /// Central finite differences on the reference evaluator.
    Fd,
    /// Reverse mode by taping: an interpreter that records every scalar
    /// operation, then one backward sweep per output.
    Tape,
    /// Source-to-source reverse mode: the program's adjoint, one run per
    /// output.
    Rev,
    /// Forward mode after the optimiser (dF̃).
    FwdOpt,
    /// Vector forward mode: one pass of D[[·]] carrying a tangent per
    /// element of a Vector variable (spec/ad-forward.md §4.6); the same
    /// results as fwd.
    FwdVec,
    /// Vector forward mode returning the Jacobian's rows (D-Vec-Rows,
    /// spec/ad-forward.md §4.6): every Double of the result carries its
    /// gradient; no transposition. A Vector variable only.
    FwdRows,
}

impl Mode {
    /// The mode's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Fwd => "fwd",
            Mode::Fd => "fd",
            Mode::Tape => "tape",
            Mode::Rev => "rev",
            Mode::FwdOpt => "fwd-opt",
            Mode::FwdVec => "fwd-vec",
            Mode::FwdRows => "fwd-rows",
        }
    }

    /// Whether the mode's derivative is a program that native code can
    /// run (`tape` and `fd` are interpreters on the evaluator).
    pub fn runs_natively(self) -> bool {
        self.program(Rc::from(""), 0, Checkpointing::default())
            .is_some()
    }

    /// The derivative program of this mode for `entry` with respect to its
    /// parameter `wrt`: what `fsmooth ad` prints and `fsmooth compile`
    /// compiles. `None` for the interpreters `tape` and `fd`.
    pub fn program(
        self,
        entry: Rc<str>,
        wrt: usize,
        checkpointing: Checkpointing,
    ) -> Option<Artefact> {
        let forward = |form| Artefact::Forward {
            entry: entry.clone(),
            wrt,
            form,
        };
        Some(match self {
            Mode::Fwd => forward(Form::Duals(ForwardMode::Scalar)),
            Mode::FwdVec => forward(Form::Duals(ForwardMode::Vector)),
            Mode::FwdOpt => forward(Form::Tangents(ForwardMode::Scalar)).optimised(),
            Mode::FwdRows => forward(Form::Rows),
            Mode::Rev => Artefact::Reverse {
                entry,
                wrt,
                checkpointing,
            },
            Mode::Tape | Mode::Fd => return None,
        })
    }

    /// The program of this mode that returns only derivatives (no primal
    /// values), which native code runs on slices of Doubles
    /// (`Entry::run_slices`) and batches (`Artefact::Batched`): the
    /// tangent-only wrapper of the forward modes, the optimised one of
    /// `fwd-opt`, the rows of `fwd-rows`. `None` for the other modes.
    pub fn tangent_program(self, entry: Rc<str>, wrt: usize) -> Option<Artefact> {
        let tangents = |m| Artefact::Forward {
            entry: entry.clone(),
            wrt,
            form: Form::Tangents(m),
        };
        match self {
            Mode::Fwd => Some(tangents(ForwardMode::Scalar)),
            Mode::FwdVec => Some(tangents(ForwardMode::Vector)),
            Mode::FwdOpt | Mode::FwdRows => self.program(entry, wrt, Checkpointing::default()),
            Mode::Rev | Mode::Tape | Mode::Fd => None,
        }
    }
}

/// The value of the entry and, for each element of the independent
/// variable, the derivative of the (flattened) result along it.
pub struct Columns {
    pub value: Value,
    pub columns: Vec<Vec<f64>>,
    pub stats: Stats,
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

/// The programs one mode runs for one entry and variable on one engine,
/// built once (by the session) and run as often as the caller likes (once
/// per ADBench observation for BA).
pub struct Plan {
    /// The entry itself: its value, and the function of `tape` and `fd`.
    pub base: Rc<Entry>,
    /// Which parameter is the independent variable.
    pub wrt: usize,
    pub how: How,
}

/// How a [`Plan`] computes its columns.
pub enum How {
    /// One dual result per element of the variable (`deriv'entry`).
    Duals(Rc<Entry>),
    /// One tangent shaped like the result per element of the variable.
    Tangents(Rc<Entry>),
    /// The Jacobian's rows (D-Vec-Rows).
    Rows(Rc<Entry>),
    /// The reverse-mode program, one run per output element (one in all
    /// for a Double result, whose seed 1 is built in: not `seeded`).
    Reverse { rev: Rc<Entry>, seeded: bool },
    /// Reverse mode by taping, on the evaluator.
    Tape,
    /// Central finite differences, on the evaluator.
    FiniteDifferences,
}

impl Plan {
    /// The plan of `mode` for `entry` with respect to its parameter `wrt`
    /// on `engine`: the mode's program ([`Mode::program`]), except that on
    /// native code `fwd-vec` reads its tangents from its tangent-only
    /// program ([`Mode::tangent_program`]), which native code runs on
    /// slices of Doubles.
    pub fn new(
        session: &Session,
        entry: &str,
        wrt: &str,
        mode: Mode,
        engine: Runner,
        checkpointing: Checkpointing,
    ) -> Result<Plan, Diagnostic> {
        let base = session.entry(entry)?;
        let k = session.param(entry, wrt)?;
        let name: Rc<str> = Rc::from(entry);
        let program = if mode == Mode::FwdVec && engine == Runner::Native {
            mode.tangent_program(name, k)
        } else {
            mode.program(name, k, checkpointing)
        };
        let how = match (mode, program) {
            (Mode::Tape, _) => How::Tape,
            (Mode::Fd, _) => How::FiniteDifferences,
            (_, None) => How::FiniteDifferences,
            (_, Some(a)) => {
                let p = session.get(&a)?;
                match a {
                    Artefact::Reverse { .. } => How::Reverse {
                        seeded: base.result != crate::ir::Type::Double,
                        rev: p,
                    },
                    Artefact::Forward {
                        form: Form::Rows, ..
                    } => How::Rows(p),
                    Artefact::Forward {
                        form: Form::Duals(_),
                        ..
                    } => How::Duals(p),
                    _ => How::Tangents(p),
                }
            }
        };
        Ok(Plan { base, wrt: k, how })
    }

    /// The derivative program the plan runs, if it runs one.
    pub fn program(&self) -> Option<&Rc<Entry>> {
        match &self.how {
            How::Duals(p) | How::Tangents(p) | How::Rows(p) => Some(p),
            How::Reverse { rev, .. } => Some(rev),
            How::Tape | How::FiniteDifferences => None,
        }
    }

    /// The value and derivative columns at `args`. `tape` and `fd` run on
    /// the evaluator whatever the engine.
    pub fn columns(
        &self,
        args: Vec<Value>,
        engine: Runner,
        limits: Limits,
    ) -> Result<Columns, RunError> {
        match &self.how {
            How::Duals(w) => reading::duals(self, w, args, engine, limits),
            How::Tangents(w) => reading::tangents(self, w, args, engine, limits),
            How::Rows(r) => reading::rows(self, r, args, engine, limits),
            How::Reverse { rev, seeded } => {
                reading::reverse(self, rev, *seeded, args, engine, limits)
            }
            How::Tape => Ok(tape(&self.base, self.wrt, args, limits)?),
            How::FiniteDifferences => Ok(finite_differences(&self.base, self.wrt, args, limits)?),
        }
    }

    /// The vector–Jacobian product wᵀJ at `args`, shaped like the
    /// variable, with the value: reverse mode and the tape run backwards
    /// once from `w`; the other modes take the columns' dot products with
    /// `w`. `w` must be shaped like the result.
    pub fn vjp(
        &self,
        args: Vec<Value>,
        w: &Value,
        engine: Runner,
        limits: Limits,
    ) -> Result<(Value, Value, Stats), VjpError> {
        // The cotangent must have the result's shape, not just its type.
        let (result, _) = self.base.run(args.clone(), limits, &mut |_, _| {})?;
        if !same_shape(&result, w) {
            return Err(VjpError::Input(InputError::Shape {
                path: "cotangent".to_string(),
                expected: format!("a value shaped like the result {result}"),
                found: w.to_string(),
                span: self.base.span,
            }));
        }
        let like = args[self.wrt].clone();
        match &self.how {
            How::Reverse { rev, seeded } => {
                let mut a = args;
                if *seeded {
                    a.push(w.clone());
                }
                let (res, stats) = rev.run_on(engine, a, limits)?;
                let (value, mut g) = reading::value_and_gradient(res, rev)?;
                if !seeded {
                    // A Double result: the program used the seed 1.
                    let s = if let Value::Double(s) = w { *s } else { 1.0 };
                    let mut xs = Vec::new();
                    flatten(&g, &mut xs);
                    g = unflatten(&g, &mut xs.into_iter().map(|x| x * s));
                }
                Ok((value, g, stats))
            }
            How::Tape => {
                let name = self.base.name_in_program();
                let t =
                    crate::tape::vjp(&self.base.program, &name, args, self.wrt, Some(w), limits)?;
                Ok((t.value, t.gradient, t.stats))
            }
            _ => {
                let cols = self.columns(args, engine, limits)?;
                let mut ws = Vec::new();
                flatten(w, &mut ws);
                let dots = cols
                    .columns
                    .iter()
                    .map(|c| c.iter().zip(&ws).map(|(a, b)| a * b).sum::<f64>());
                let g = unflatten(&like, &mut dots.collect::<Vec<_>>().into_iter());
                Ok((cols.value, g, cols.stats))
            }
        }
    }
}

/// Why a vector–Jacobian product failed: a run, or a cotangent not shaped
/// like the result.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum VjpError {
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Input(#[from] InputError),
}

impl From<EvalError> for VjpError {
    fn from(e: EvalError) -> VjpError {
        VjpError::Run(RunError::Eval(e))
    }
}

impl crate::diagnostic::Diagnose for VjpError {
    fn code(&self) -> &'static str {
        match self {
            VjpError::Run(e) => e.code(),
            VjpError::Input(e) => e.code(),
        }
    }
    fn span(&self) -> crate::diagnostic::Span {
        match self {
            VjpError::Run(e) => e.span(),
            VjpError::Input(e) => e.span(),
        }
    }
    fn notes(&self) -> Vec<String> {
        match self {
            VjpError::Run(e) => e.notes(),
            VjpError::Input(e) => e.notes(),
        }
    }
}

/// Same structure: array lengths and tuple nesting agree.
fn same_shape(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| same_shape(p, q))
        }
        (Value::Pair(x), Value::Pair(y)) => same_shape(&x.0, &y.0) && same_shape(&x.1, &y.1),
        (Value::Array(_) | Value::Pair(_), _) | (_, Value::Array(_) | Value::Pair(_)) => false,
        _ => true,
    }
}
