//! Type inference (spec/types.md) and monomorphisation.
//!
//! [`infer_program`] runs Hindley–Milner inference with two kinds of
//! constraint on type variables: *numeric* (Double or Index; T-Lit-Int and
//! the overloaded operators) and *data* (any type without functions, the
//! paper's `M`; array elements, pair components, `if` branches, `ifold`
//! state). Top-level definitions are generalised (T-Def); local `let`s are
//! not (T-Let). [`monomorphise`] then copies every definition reachable
//! from an entry once per instantiation, so later passes see only ground
//! types, and integer literals of type Double become Double literals.

mod infer;
mod mono;

use thiserror::Error;

use crate::diagnostic::{Diagnose, Span};

pub use infer::{Scheme, Typing, infer_appended, infer_program};
pub use mono::{Monomorphic, monomorphise};

#[derive(Debug, Error, Clone, PartialEq)]
pub enum TypeError {
    #[error("unbound variable `{name}`")]
    Unbound {
        name: String,
        span: Span,
        recursive: bool,
    },
    #[error("type mismatch: expected {expected}, found {found}{context}")]
    Mismatch {
        expected: String,
        found: String,
        context: String,
        span: Span,
        missing_args: bool,
    },
    #[error(
        "this expression has type {ty} and is applied to an argument, but it is not a function"
    )]
    NotAFunction { ty: String, span: Span },
    #[error("type {ty} is not numeric: arithmetic and comparisons work on Double and Index")]
    NotNumeric { ty: String, span: Span },
    #[error(
        "a function (type {ty}) cannot be stored here: {place} hold only data (Double, Index, Bool, arrays, tuples)"
    )]
    FunctionAsData {
        ty: String,
        place: &'static str,
        span: Span,
    },
    #[error("infinite type: {var} occurs in {ty}")]
    Infinite { var: String, ty: String, span: Span },
    #[error(
        "`deriv` differentiates with respect to Double, Vector or Matrix variables; `{name}` has type {ty}"
    )]
    BadWrt {
        name: String,
        ty: String,
        span: Span,
    },
    #[error("`deriv` needs an expression of a data type, found {ty}")]
    DerivOfFunction { ty: String, span: Span },
    #[error("no definition named `{name}`")]
    NoEntry {
        name: String,
        available: Vec<String>,
        span: Span,
    },
    #[error("entry `{name}` has type {ty}; {why}")]
    BadEntry {
        name: String,
        ty: String,
        why: &'static str,
        span: Span,
    },
}

impl Diagnose for TypeError {
    fn code(&self) -> &'static str {
        match self {
            TypeError::Unbound { .. } => "unbound-variable",
            TypeError::Mismatch { .. } => "type-mismatch",
            TypeError::NotAFunction { .. } => "not-a-function",
            TypeError::NotNumeric { .. } => "not-numeric",
            TypeError::FunctionAsData { .. } => "function-as-data",
            TypeError::Infinite { .. } => "infinite-type",
            TypeError::BadWrt { .. } => "deriv-bad-variable",
            TypeError::DerivOfFunction { .. } => "deriv-of-function",
            TypeError::NoEntry { .. } => "no-entry",
            TypeError::BadEntry { .. } => "bad-entry",
        }
    }

    fn span(&self) -> Span {
        match self {
            TypeError::Unbound { span, .. }
            | TypeError::Mismatch { span, .. }
            | TypeError::NotAFunction { span, .. }
            | TypeError::NotNumeric { span, .. }
            | TypeError::FunctionAsData { span, .. }
            | TypeError::Infinite { span, .. }
            | TypeError::BadWrt { span, .. }
            | TypeError::DerivOfFunction { span, .. }
            | TypeError::NoEntry { span, .. }
            | TypeError::BadEntry { span, .. } => *span,
        }
    }

    fn notes(&self) -> Vec<String> {
        match self {
            TypeError::Unbound {
                recursive: true, ..
            } => vec![
                "definitions are not recursive: a definition cannot refer to itself; iterate with `ifold` or `build`".to_string(),
            ],
            TypeError::Mismatch {
                missing_args: true,
                ..
            } => vec!["a function is missing arguments (or has too many)".to_string()],
            TypeError::NotAFunction { .. } => {
                vec!["is a function applied to too many arguments?".to_string()]
            }
            TypeError::NoEntry { available, .. } if !available.is_empty() => {
                vec![format!("definitions in this file: {}", available.join(", "))]
            }
            _ => Vec::new(),
        }
    }
}
