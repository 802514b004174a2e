//! The gradient modes of the `adbench` workloads, shared by GMM, BA, LSTM
//! and hand tracking: [`Differentiator::new`] builds, once, the derivative programs a
//! mode needs for one entry and one independent variable; [`Differentiator::columns`]
//! runs them on an argument list, on either engine, as often as the caller
//! likes (once per ADBench observation for BA).
//!
//! Input: an F̃ source, an entry and the name of its Double/Vector/Matrix
//! parameter. Output: [`Columns`] (the value, one derivative column per
//! element of the variable). Modes `tape` and `fd` run only on the
//! evaluator; the caller rejects them with `--engine native` (they then
//! run on the evaluator with default limits).

use crate::diagnostic::Diagnostic;
use crate::eval::{Limits, Value};
use crate::gradient::{self, Columns, Engine, RunError};
use crate::pipeline::{self, Derivative, Entry, OptOptions, ReverseDerivative, RowsDerivative};

/// How a workload's derivative is computed (README, "Using the command line").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forward mode, D[[·]].
    Fwd,
    /// Forward mode after the optimiser.
    FwdOpt,
    /// Vector forward mode: one pass carrying every direction.
    FwdVec,
    /// Vector forward mode returning the Jacobian's rows (D-Vec-Rows).
    FwdRows,
    /// Source-to-source reverse mode.
    Rev,
    /// Reverse mode by taping (evaluator only).
    Tape,
    /// Central finite differences (evaluator only).
    Fd,
}

impl Mode {
    /// Whether the mode's derivative is a program that `--engine native`
    /// can compile.
    pub fn runs_natively(self) -> bool {
        matches!(
            self,
            Mode::Fwd | Mode::FwdOpt | Mode::FwdVec | Mode::FwdRows | Mode::Rev
        )
    }
}

/// The derivative programs of one mode for one entry, built once.
pub struct Differentiator {
    mode: Mode,
    /// The forward derivative: its `base` is the entry itself.
    fwd: Derivative,
    fwd_opt: Option<Derivative>,
    /// Modes `fwd-vec` and `fwd`: the tangent-only wrapper, whose Doubles,
    /// vectors and matrices run through `call_slices` on native code
    /// (`fwd-vec` per call, both in [`Differentiator::tangents`]).
    tangent_only: Option<Derivative>,
    /// Mode `fwd-rows`: the Jacobian's rows.
    rows: Option<RowsDerivative>,
    rev: Option<ReverseDerivative>,
}

impl Differentiator {
    /// Builds the programs of `mode` for `entry` with respect to `wrt`.
    /// `opt` configures the optimiser of mode `fwd-opt`, `checkpointing`
    /// reverse mode's tapes.
    pub fn new(
        src: &str,
        entry: &str,
        wrt: &str,
        mode: Mode,
        opt: &OptOptions,
        checkpointing: crate::ad::Checkpointing,
    ) -> Result<Differentiator, Diagnostic> {
        let forward = if matches!(mode, Mode::FwdVec | Mode::FwdRows) {
            crate::ad::ForwardMode::Vector
        } else {
            crate::ad::ForwardMode::Scalar
        };
        let fwd = pipeline::derivative_with(src, entry, wrt, forward)?;
        let fwd_opt = match mode {
            Mode::FwdOpt => Some(pipeline::optimised_derivative(src, entry, wrt, opt)?),
            _ => None,
        };
        let tangent_only = match mode {
            Mode::FwdVec => Some(pipeline::tangent_derivative_with(
                src,
                entry,
                wrt,
                crate::ad::ForwardMode::Vector,
            )?),
            Mode::Fwd => Some(pipeline::tangent_derivative(src, entry, wrt)?),
            _ => None,
        };
        let rows = match mode {
            Mode::FwdRows => Some(pipeline::rows_derivative(src, entry, wrt)?),
            _ => None,
        };
        let rev = match mode {
            Mode::Rev => Some(pipeline::reverse_derivative_with(
                src,
                entry,
                wrt,
                checkpointing,
            )?),
            _ => None,
        };
        Ok(Differentiator {
            mode,
            fwd,
            fwd_opt,
            tangent_only,
            rows,
            rev,
        })
    }

    /// The tangent-only derivative of modes `fwd`, `fwd-opt` and
    /// `fwd-vec`: one program for the tangents, the entry for the value.
    pub fn tangents(&self) -> Option<&Derivative> {
        match self.mode {
            Mode::FwdOpt => self.fwd_opt.as_ref(),
            Mode::Fwd | Mode::FwdVec => self.tangent_only.as_ref(),
            _ => None,
        }
    }

    /// The Jacobian's rows of mode `fwd-rows`.
    pub fn rows(&self) -> Option<&RowsDerivative> {
        self.rows.as_ref()
    }

    /// The entry itself (for running the objective alone).
    pub fn base(&self) -> &Entry {
        &self.fwd.base
    }

    /// The value and derivative columns at `args`.
    pub fn columns(&self, args: Vec<Value>, engine: &Engine) -> Result<Columns, RunError> {
        let limits = match engine {
            Engine::Eval(l) => *l,
            Engine::Native(_) => Limits::default(),
        };
        let wrt = self.fwd.wrt;
        if let Some(r) = &self.rows {
            return gradient::rows_on(r, args, engine);
        }
        match (self.mode, &self.fwd_opt, &self.rev) {
            (Mode::FwdOpt, Some(f), _) => gradient::forward_on(f, args, engine),
            (Mode::FwdVec, ..) if matches!(engine, Engine::Native(_)) => {
                let d = self.tangent_only.as_ref().unwrap_or(&self.fwd);
                gradient::forward_on(d, args, engine)
            }
            (Mode::Rev, _, Some(r)) => gradient::reverse_on(r, args, engine),
            (Mode::Tape, ..) => Ok(gradient::tape(&self.fwd.base, wrt, args, limits)?),
            (Mode::Fd, ..) => Ok(gradient::finite_differences(
                &self.fwd.base,
                wrt,
                args,
                limits,
            )?),
            _ => gradient::forward_on(&self.fwd, args, engine),
        }
    }
}
