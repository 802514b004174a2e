//! Automatic differentiation as source-to-source transformations.
//!
//! - [`derivatives`]: the one table of primitive partial derivatives;
//! - [`forward`]: D[[·]], forward mode (spec/ad-forward.md);
//! - `expand`: `deriv` (and so `diff`, `grad`, `jacob`, …) in terms of D[[·]].
//!
//! [`expand_program`] is the entry point: it takes a monomorphic program
//! with its type table and returns the program without `deriv`, plus the
//! translated definitions `name'D`. Its output is ordinary core IR; the
//! pipeline type-checks it again.

mod accum;
mod atom;
pub mod derivatives;
mod expand;
mod forward;
pub mod reverse;
mod specialise;

use std::collections::HashMap;

use cranelift_entity::SecondaryMap;
use thiserror::Error;

use crate::anf::AnfError;
use crate::diagnostic::{Diagnose, Span};
use crate::ir::build::Builder;
use crate::ir::{Expr, ExprId, Program, Type};

pub use atom::Atom;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum AdError {
    #[error("`deriv` of an expression whose free variable `{name}` is a function ({ty})")]
    FunctionFreeVariable {
        name: String,
        ty: String,
        span: Span,
    },
    #[error(
        "a function value of type {ty} that takes a function cannot be resolved to first-order code"
    )]
    Unresolved { ty: String, span: Span },
    #[error("{what} is not supported yet")]
    Unsupported { what: String, span: Span },
    #[error("internal error in AD: {message} (please report this)")]
    Internal { message: String },
}

/// Normalisation is reverse mode's first step: its (internal) errors are
/// reverse mode's.
impl From<AnfError> for AdError {
    fn from(e: AnfError) -> AdError {
        match e {
            AnfError::Internal { message } => AdError::Internal { message },
        }
    }
}

impl Diagnose for AdError {
    fn code(&self) -> &'static str {
        match self {
            AdError::FunctionFreeVariable { .. } => "deriv-free-function",
            AdError::Unresolved { .. } => "unresolved-function",
            AdError::Unsupported { .. } => "ad-unsupported",
            AdError::Internal { .. } => "internal-error",
        }
    }

    fn span(&self) -> Span {
        match self {
            AdError::FunctionFreeVariable { span, .. }
            | AdError::Unresolved { span, .. }
            | AdError::Unsupported { span, .. } => *span,
            AdError::Internal { .. } => Span::generated(),
        }
    }

    fn notes(&self) -> Vec<String> {
        match self {
            AdError::FunctionFreeVariable { .. } => vec![
                "differentiated code may use functions defined at top level or inside it, but its free variables must be data (seed 001 §4.1); pass a top-level function or a lambda instead of a function-valued variable".to_string(),
            ],
            AdError::Unresolved { .. } => vec![
                "specialisation (spec/ad-forward.md §10.2) resolves every function value by inlining; only the entry's parameters and the argument of a differentiated function must be data".to_string(),
            ],
            AdError::Internal { .. } | AdError::Unsupported { .. } => Vec::new(),
        }
    }
}

/// How `deriv` with respect to a Vector is expanded (spec/ad-forward.md
/// §4.3, §4.6). Both give the same values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ForwardMode {
    /// D-Deriv-Vector: one run of D[[e]] per element of the vector.
    #[default]
    Scalar,
    /// D-Vec-Deriv: one run carrying a tangent vector per Double.
    Vector,
}

/// Whether the program contains `deriv`, `jvp` or `vjp` anywhere.
pub fn has_deriv(prog: &Program) -> bool {
    prog.exprs
        .values()
        .any(|e| matches!(e, Expr::Deriv { .. } | Expr::Diff { .. }))
}

/// Whether the program contains `jvp` or `vjp`: operators on function
/// values, which need specialisation first.
pub fn has_operators(prog: &Program) -> bool {
    prog.exprs.values().any(|e| matches!(e, Expr::Diff { .. }))
}

/// Specialises a monomorphic program for its entry `entry` (in place):
/// every function value inlined, so that each `jvp`, `vjp` and `deriv`
/// differentiates a lambda over data (spec/ad-forward.md §10.2).
pub fn specialise_program(
    prog: &mut Program,
    types: &mut SecondaryMap<ExprId, Option<Type>>,
    entry: &str,
) -> Result<(), AdError> {
    let mut b = Builder::new(prog, types);
    specialise::specialise_program(&mut b, entry)
}

/// Expands every `deriv` in `prog` (in place), translating the definitions
/// the differentiated code uses. `types` must give every node a ground
/// type (as `types::monomorphise` produces); new nodes get theirs. The
/// outermost `deriv`s of the definition named `rows`, when with respect
/// to a Vector, give the Jacobian's rows (D-Vec-Rows; the definition's
/// type changes, so the caller type-checks the program again).
pub fn expand_program(
    prog: &mut Program,
    types: &mut SecondaryMap<ExprId, Option<Type>>,
    mode: ForwardMode,
    rows: Option<&str>,
) -> Result<(), AdError> {
    let names: Vec<_> = prog.defs.iter().map(|d| d.name.clone()).collect();
    let mut duals = HashMap::new();
    let mut vduals = HashMap::new();
    let mut b = Builder::new(prog, types);
    for name in names {
        let idx = b
            .prog
            .defs
            .iter()
            .position(|d| d.name == name)
            .expect("original definitions stay");
        let body = b.prog.defs[idx].body;
        let by_rows = rows.is_some_and(|r| *r == *name);
        let mut ex = expand::Expander::new(&mut b, &mut duals, &mut vduals, mode, by_rows);
        let nb = ex.expand(body)?;
        let idx = b
            .prog
            .defs
            .iter()
            .position(|d| d.name == name)
            .expect("original definitions stay");
        b.prog.defs[idx].body = nb;
    }
    Ok(())
}

/// How reverse mode trades time for memory (spec/ad-reverse.md §4.4).
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Checkpointing {
    /// R-Checkpoint: the entry's own maps and linear folds whose bodies
    /// hold loops keep no tape; their iterations are computed again.
    #[default]
    Loops,
    /// Every loop keeps its tape (R-Defer still applies to untaped folds).
    Off,
    /// R-Checkpoint-Sqrt: as `loops`, and every fold of the entry's own
    /// block whose state is not linear (a `while`'s among them) runs as
    /// ⌈√n⌉ segments and keeps only the states between them; each
    /// segment's tapes exist while it runs backwards. Memory O(√n)
    /// states and tapes instead of n tapes, for one more forward run.
    Sqrt,
}

/// The reverse-mode program of an entry, given as its first-order normal
/// form (monomorphic, `deriv`-free), with respect to parameter `wrt`: a
/// one-definition program `rev'entry` (see `reverse::reverse_program`);
/// with `seed`, it takes the result's cotangent as a last argument (a
/// vector–Jacobian product).
pub fn reverse_program(
    normal: &crate::anf::Normal,
    wrt: usize,
    seed: bool,
    checkpointing: Checkpointing,
) -> Result<(Program, SecondaryMap<ExprId, Option<Type>>), AdError> {
    let mut out = Program::new();
    let mut out_types = SecondaryMap::new();
    let mut b = Builder::new(&mut out, &mut out_types);
    let def = reverse::reverse_program(
        &mut b,
        normal,
        &[wrt],
        seed,
        "rev'entry",
        checkpointing,
        true,
    )?;
    out.defs.push(def);
    Ok((out, out_types))
}
