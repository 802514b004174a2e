//! The first-order A-normal form of an entry (spec/ad-reverse.md,
//! "Normal form"): every function inlined, what is left a [`Block`] of
//! bindings whose right-hand sides apply one primitive to atoms, or are
//! `if`, `build`, `ifold` or `iscan` with nested blocks. Every bound name
//! is fresh, so blocks never shadow. Reverse mode, the optimiser and the
//! native backend all work on it, so it belongs to none of them: this
//! module depends on the core IR and diagnostics only.
//!
//! - [`normalise`] (`normalise.rs`): an entry of a monomorphic,
//!   `deriv`-free program to its [`Normal`] form;
//! - [`to_ir`]: the normal form back to core IR, and
//!   [`normal_program`], normalisation then conversion back (the
//!   optimiser's input; a check of normalisation against the original);
//! - `display.rs`: the normal form as indented text, a debugging view;
//! - [`fresh_copy`] (`rename.rs`): a block with its binders renamed.

mod display;
mod normalise;
mod rename;
pub mod to_ir;

use std::collections::HashMap;

use thiserror::Error;

use crate::diagnostic::{Diagnose, Span};
use crate::ir::{Lit, Name, Prim, Type};

pub use normalise::{Normaliser, normalise, normalise_projecting};
pub use rename::fresh_copy;
pub use to_ir::normal_program;

/// Normalisation fails only on programs the earlier passes should have
/// rejected or rewritten (data applied, a function where data was
/// expected, `deriv` not expanded): every error is an internal one.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum AnfError {
    #[error("internal error in normalisation: {message} (please report this)")]
    Internal { message: String },
}

impl Diagnose for AnfError {
    fn code(&self) -> &'static str {
        match self {
            AnfError::Internal { .. } => "internal-error",
        }
    }

    fn span(&self) -> Span {
        Span::generated()
    }
}

#[derive(Clone, Debug)]
pub enum Atom {
    Var(Name, Type),
    Lit(Lit, Type),
}

impl Atom {
    pub fn ty(&self) -> &Type {
        match self {
            Atom::Var(_, t) | Atom::Lit(_, t) => t,
        }
    }
    pub fn var(&self) -> Option<&Name> {
        match self {
            Atom::Var(n, _) => Some(n),
            Atom::Lit(..) => None,
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LoopKind {
    Build,
    IFold,
    IScan,
}

#[derive(Clone, Debug)]
pub enum Rhs {
    Prim(Prim, Vec<Atom>),
    Array(Vec<Atom>),
    If(Atom, Block, Block),
    /// `build n (fun i -> body)`, `ifold (fun s i -> body) z n`,
    /// `iscan (fun s i -> body) z n`.
    Loop {
        kind: LoopKind,
        n: Atom,
        /// The initial state and the state variable (folds and scans).
        state: Option<(Atom, Name, Type)>,
        index: Name,
        body: Block,
    },
    /// `while (fun s -> cond) (fun s -> step) init`: both blocks over the
    /// state variable `state` (of type `ty`); `cond`'s result is a Bool,
    /// `step`'s the next state.
    While {
        init: Atom,
        state: Name,
        ty: Type,
        cond: Block,
        step: Block,
    },
}

impl Rhs {
    /// The blocks nested in `self`, in order.
    pub fn blocks(&self) -> Vec<&Block> {
        match self {
            Rhs::Prim(..) | Rhs::Array(_) => Vec::new(),
            Rhs::If(_, t, e) => vec![t, e],
            Rhs::Loop { body, .. } => vec![body],
            Rhs::While { cond, step, .. } => vec![cond, step],
        }
    }

    /// [`Rhs::blocks`], mutably.
    pub fn blocks_mut(&mut self) -> Vec<&mut Block> {
        match self {
            Rhs::Prim(..) | Rhs::Array(_) => Vec::new(),
            Rhs::If(_, t, e) => vec![t, e],
            Rhs::Loop { body, .. } => vec![body],
            Rhs::While { cond, step, .. } => vec![cond, step],
        }
    }

    /// Every atom `self` uses, nested blocks (and their results) included.
    pub fn for_each_atom(&self, f: &mut impl FnMut(&Atom)) {
        match self {
            Rhs::Prim(_, args) | Rhs::Array(args) => args.iter().for_each(f),
            Rhs::If(c, t, e) => {
                f(c);
                t.for_each_atom(f);
                e.for_each_atom(f);
            }
            Rhs::Loop { n, state, body, .. } => {
                f(n);
                if let Some((z, _, _)) = state {
                    f(z);
                }
                body.for_each_atom(f);
            }
            Rhs::While {
                init, cond, step, ..
            } => {
                f(init);
                cond.for_each_atom(f);
                step.for_each_atom(f);
            }
        }
    }

    /// [`Rhs::for_each_atom`], mutably.
    pub fn for_each_atom_mut(&mut self, f: &mut impl FnMut(&mut Atom)) {
        match self {
            Rhs::Prim(_, args) | Rhs::Array(args) => args.iter_mut().for_each(f),
            Rhs::If(c, t, e) => {
                f(c);
                t.for_each_atom_mut(f);
                e.for_each_atom_mut(f);
            }
            Rhs::Loop { n, state, body, .. } => {
                f(n);
                if let Some((z, _, _)) = state {
                    f(z);
                }
                body.for_each_atom_mut(f);
            }
            Rhs::While {
                init, cond, step, ..
            } => {
                f(init);
                cond.for_each_atom_mut(f);
                step.for_each_atom_mut(f);
            }
        }
    }

    /// Every name bound inside `self`: the bindings of nested blocks, loop
    /// indices and states.
    pub fn for_each_binder_mut(&mut self, f: &mut impl FnMut(&mut Name)) {
        match self {
            Rhs::Prim(..) | Rhs::Array(_) => {}
            Rhs::If(_, t, e) => {
                t.for_each_binder_mut(f);
                e.for_each_binder_mut(f);
            }
            Rhs::Loop {
                state, index, body, ..
            } => {
                if let Some((_, s, _)) = state {
                    f(s);
                }
                f(index);
                body.for_each_binder_mut(f);
            }
            Rhs::While {
                state, cond, step, ..
            } => {
                f(state);
                cond.for_each_binder_mut(f);
                step.for_each_binder_mut(f);
            }
        }
    }
}

impl Block {
    /// Every atom the block uses, its result included.
    pub fn for_each_atom(&self, f: &mut impl FnMut(&Atom)) {
        for bind in &self.binds {
            bind.rhs.for_each_atom(f);
        }
        f(&self.result);
    }

    /// [`Block::for_each_atom`], mutably.
    pub fn for_each_atom_mut(&mut self, f: &mut impl FnMut(&mut Atom)) {
        for bind in &mut self.binds {
            bind.rhs.for_each_atom_mut(f);
        }
        f(&mut self.result);
    }

    /// Every name bound in the block, nested blocks included.
    pub fn for_each_binder_mut(&mut self, f: &mut impl FnMut(&mut Name)) {
        for bind in &mut self.binds {
            f(&mut bind.name);
            bind.rhs.for_each_binder_mut(f);
        }
    }
}

#[derive(Clone, Debug)]
pub struct Binding {
    pub name: Name,
    pub ty: Type,
    pub rhs: Rhs,
}

#[derive(Clone, Debug)]
pub struct Block {
    pub binds: Vec<Binding>,
    pub result: Atom,
}

/// The entry as a first-order function: parameters and body.
pub struct Normal {
    pub params: Vec<(Name, Type)>,
    pub body: Block,
    /// The source span of each binding, by its (unique) name: where a ⊥
    /// of the binding is reported. Passes that make bindings of their own
    /// may leave them out; a reader falls back to an enclosing binding's.
    pub spans: HashMap<Name, Span>,
}
