//! The one place passes are sequenced. A command loads its program once
//! into a [`Session`] — the prelude and the program parsed, inferred and
//! kept — and asks it for the programs it needs, each named by what it is
//! ([`Artefact`]): an entry, its forward or reverse derivative, the
//! optimiser's output, a batch. The session builds each artefact once, from
//! the loaded program and from other artefacts, and keeps it; an [`Entry`]
//! in turn computes its normal form and its native code once. Nothing here
//! prints, reads files, or prints a program to parse it again.
//!
//! ```text
//! source ─parse─▶ Program ─infer─▶ Typing                    (once per session)
//!   Entry(f)         ─monomorphise─▶ (─forward─▶ ─check─▶ ─monomorphise─▶) ─check─▶ Entry
//!   Forward{f, k, …}  wrapper `deriv (f p'1 … p'n) p'k` appended ─infer-appended─▶ as Entry(…)
//!   Reverse{f, k, …}  Entry(f) ─normalise─▶ ─reverse─▶ ─check─▶ ─monomorphise─▶ ─check─▶ Entry
//!   Optimised{a, …}   a ─normalise─▶ ─optimise─▶ ─check─▶ … ─normalise─▶ CSE ─check─▶ Entry
//!   Batched(a)        `build (length xs1) (fun i -> a xs1[i] …)` appended to a ─check─▶ Entry
//! Entry ─normalise─▶ anf::Normal ─compile─▶ Native          (once per entry, on first use)
//! ```
//!
//! [`passes`] counts every pass run, so a test can assert that a command
//! parses its program once.

mod batch;
mod engine;
mod entry;
mod forward;
mod optimise;
pub mod passes;
mod session;
mod typed;

use std::rc::Rc;

use crate::diagnostic::{Diagnostic, SourceId};
use crate::ir::Program;
use crate::syntax::parse_into;

pub use crate::ad::{Checkpointing, ForwardMode};
pub use engine::{Engine, RunError, is_resource_limit};
pub use entry::Entry;
pub use optimise::{OptOptions, Optimised};
pub use passes::Pass;
pub use session::Session;

/// The M̃ library, written in the language and available to every program.
pub const PRELUDE: &str = include_str!("../prelude.fsm");

/// What a program of a [`Session`] is: the key it is built and cached
/// under. Two equal artefacts of one session are one program.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Artefact {
    /// A definition of the program, monomorphised, its `deriv`s expanded
    /// in `mode` (spec/ad-forward.md §4.6; the command line's entries use
    /// scalar mode, §4.3).
    Entry { name: Rc<str>, mode: ForwardMode },
    /// The forward-mode wrapper of an entry with respect to its parameter
    /// `wrt` (spec/ad-forward.md, "The command line").
    Forward {
        entry: Rc<str>,
        wrt: usize,
        form: Form,
    },
    /// The reverse-mode program of an entry with respect to its parameter
    /// `wrt` (spec/ad-reverse.md): `rev'entry p₁ … pₙ [w]` returns the
    /// value and the cotangent of the parameter, for the result cotangent
    /// `w` (a last parameter unless the result is a Double; 1.0 then).
    Reverse {
        entry: Rc<str>,
        wrt: usize,
        checkpointing: Checkpointing,
    },
    /// Another artefact after the optimiser; `exact_only` leaves out the
    /// rules tagged `ieee-inexact`.
    Optimised { of: Rc<Artefact>, exact_only: bool },
    /// Another artefact run on every element of arrays of its arguments,
    /// in one program ([`batch`]).
    Batched(Rc<Artefact>),
}

/// What a forward-mode wrapper returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Form {
    /// `deriv'entry p'1 … p'n = deriv (F p'1 … p'n) p'k`: the dual result,
    /// one per element of a Vector or Matrix variable.
    Duals(ForwardMode),
    /// Only the tangents of the dual result, shaped like the variable
    /// around the result: what the optimiser needs to drop the primal
    /// computation (`--mode fwd-opt`).
    Tangents(ForwardMode),
    /// The Jacobian's rows (D-Vec-Rows, spec/ad-forward.md §4.6): the
    /// entry's result with every Double replaced by its gradient with
    /// respect to the Vector variable; for a Vector result, row `i` of the
    /// Jacobian is element `i`. One run of vector forward mode and no
    /// transposition.
    Rows,
}

impl Artefact {
    /// The entry named `name`.
    pub fn entry(name: &str) -> Artefact {
        Artefact::Entry {
            name: Rc::from(name),
            mode: ForwardMode::Scalar,
        }
    }

    /// This artefact after the optimiser (all rules).
    pub fn optimised(self) -> Artefact {
        Artefact::Optimised {
            of: Rc::new(self),
            exact_only: false,
        }
    }

    /// This artefact over arrays of its arguments.
    pub fn batched(self) -> Artefact {
        Artefact::Batched(Rc::new(self))
    }

    /// The user's entry this artefact derives from.
    pub fn base(&self) -> &Rc<str> {
        match self {
            Artefact::Entry { name: e, .. } | Artefact::Forward { entry: e, .. } => e,
            Artefact::Reverse { entry: e, .. } => e,
            Artefact::Optimised { of, .. } | Artefact::Batched(of) => of.base(),
        }
    }
}

/// Parses the prelude and `src` only, for printing and round trips.
pub fn parse(src: &str) -> Result<Program, Diagnostic> {
    passes::timed(Pass::Parse, || {
        let mut program = Program::new();
        parse_into(&mut program, PRELUDE, SourceId::PRELUDE, true)
            .map_err(|e| Diagnostic::from(&e))?;
        parse_into(&mut program, src, SourceId::MAIN, false).map_err(|e| Diagnostic::from(&e))?;
        Ok(program)
    })
}

/// An error in code a pass generated is a bug in that pass.
fn generated(mut d: Diagnostic) -> Diagnostic {
    d.notes.push(
        "this is an error in code generated by fsmooth, not in your program; please report it"
            .to_string(),
    );
    d
}

/// `names(q)` for the fewest primes `q` ("", "'", "''", …) such that no
/// name equals `taken`: binders of generated code that must not shadow
/// the definition it calls.
fn avoiding(taken: &str, names: impl Fn(&str) -> Vec<String>) -> Vec<String> {
    let mut q = String::new();
    loop {
        let ns = names(&q);
        if ns.iter().all(|n| n != taken) {
            return ns;
        }
        q.push('\'');
    }
}
