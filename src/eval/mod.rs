//! The reference evaluator: the executable form of spec/semantics.md.
//!
//! A CEK-style machine ([`machine`]) whose every transition is one named
//! `E-*` rule. It runs on monomorphised programs (see `types::monomorphise`)
//! so it never needs types, and it depends on nothing downstream of the
//! type checker: it *is* the semantics that every other pass is checked
//! against.

mod machine;
mod readback;
mod scalar;
mod value;

use thiserror::Error;

use crate::diagnostic::{Diagnose, Span};

pub use machine::{Evaluator, Limits, Snapshot, Stats, TraceEvent, eval_def};
pub use scalar::scalar;
pub use value::{Closure, Env, PArray, Value, flatten, unflatten};

/// ⊥: the ways evaluation can fail (spec/semantics.md, "Errors").
#[derive(Debug, Error, Clone, PartialEq)]
pub enum EvalError {
    #[error("index {index} is out of bounds for an array of length {len}")]
    IndexOutOfBounds { index: i64, len: usize, span: Span },
    #[error("`build` with negative size {n}")]
    NegativeSize { n: i64, span: Span },
    #[error("`ifold` with negative iteration count {n}")]
    NegativeCount { n: i64, span: Span },
    #[error("division by zero")]
    DivisionByZero { span: Span },
    #[error("{op} is undefined at {arg}")]
    Domain {
        op: &'static str,
        arg: String,
        span: Span,
    },
    #[error("integer overflow in `{op}`")]
    Overflow { op: &'static str, span: Span },
    #[error("evaluation ran out of fuel after {steps} steps")]
    OutOfFuel { steps: u64, span: Span },
    #[error("an array of {n} elements is larger than the limit of {limit}")]
    TooLarge { n: i64, limit: u64, span: Span },
    #[error("out of memory growing an array to {n} elements")]
    OutOfMemory { n: u64, span: Span },
    #[error("internal error: {message} (the program was not well typed; please report this)")]
    Internal { message: String, span: Span },
}

impl EvalError {
    /// The error at `span` instead of its own.
    pub fn set_span(&mut self, to: Span) {
        match self {
            EvalError::IndexOutOfBounds { span, .. }
            | EvalError::NegativeSize { span, .. }
            | EvalError::NegativeCount { span, .. }
            | EvalError::DivisionByZero { span }
            | EvalError::Domain { span, .. }
            | EvalError::Overflow { span, .. }
            | EvalError::OutOfFuel { span, .. }
            | EvalError::TooLarge { span, .. }
            | EvalError::OutOfMemory { span, .. }
            | EvalError::Internal { span, .. } => *span = to,
        }
    }
}

impl Diagnose for EvalError {
    fn code(&self) -> &'static str {
        match self {
            EvalError::IndexOutOfBounds { .. } => "index-out-of-bounds",
            EvalError::NegativeSize { .. } => "negative-size",
            EvalError::NegativeCount { .. } => "negative-count",
            EvalError::DivisionByZero { .. } => "division-by-zero",
            EvalError::Domain { .. } => "domain-error",
            EvalError::Overflow { .. } => "integer-overflow",
            EvalError::OutOfFuel { .. } => "out-of-fuel",
            EvalError::TooLarge { .. } => "array-too-large",
            EvalError::OutOfMemory { .. } => "out-of-memory",
            EvalError::Internal { .. } => "internal-error",
        }
    }

    fn span(&self) -> Span {
        match self {
            EvalError::IndexOutOfBounds { span, .. }
            | EvalError::NegativeSize { span, .. }
            | EvalError::NegativeCount { span, .. }
            | EvalError::DivisionByZero { span }
            | EvalError::Domain { span, .. }
            | EvalError::Overflow { span, .. }
            | EvalError::OutOfFuel { span, .. }
            | EvalError::TooLarge { span, .. }
            | EvalError::OutOfMemory { span, .. }
            | EvalError::Internal { span, .. } => *span,
        }
    }

    fn notes(&self) -> Vec<String> {
        match self {
            EvalError::OutOfFuel { .. } => {
                vec!["raise the limit with --fuel N (steps of the reference evaluator)".to_string()]
            }
            EvalError::TooLarge { .. } => {
                vec!["raise the limit with --max-elements N".to_string()]
            }
            _ => Vec::new(),
        }
    }
}
