//! The passes of native code generation: rewrites and analyses of the
//! first-order normal form (`ad::anf`) that decide *what* the lowering
//! emits, kept apart from the lowering (`codegen/lower/`), which decides
//! *how* in Cranelift IR, and from the backends (`codegen/backend/`),
//! which turn that IR into a JIT function or an object file.
//!
//! A pass here reads and writes only the normal form (and the flat layout
//! of `codegen/layout.rs`): none names Cranelift, so each can be read,
//! and tested, as a function from normal forms to normal forms or to a
//! plan. Every one keeps the evaluator's values and its first ⊥ (the
//! exactness argument is in the pass's own Note); a resource limit is not
//! an observation (spec/semantics.md §3.8: native code meets
//! `--max-elements` only where the evaluator does, and an array a pass
//! removes is not checked). A pass that copies a binding under a fresh
//! name records the copy ([`Copies`]), so that its ⊥ keeps its source
//! location. `lower::lower_function`
//! sequences them; there are three kinds.
//!
//! Rewrites of the whole function, in this order: projections of pairs
//! forwarded (`fuse::forward_projections`), vertical fusion
//! (`vertical.rs`), unrolling of loops of two to four iterations
//! (`unroll.rs`), loop-invariant hoisting (`hoist.rs`), and versioning of
//! loops on the size their readers imply (`version.rs`, unrolled again).
//!
//! Analyses of the rewritten function, whose results the lowering keeps
//! for the whole function: which `addAt`s update in place (`inplace.rs`),
//! which arrays are never built (`fuse.rs`), and which live one loop
//! iteration on a scratch stack (`scratch.rs`). `view.rs` is the one shape
//! that the in-place analysis and the lowering must agree on.
//!
//! Plans the lowering asks for one loop or block at a time, where it knows
//! what is fused and which reads are in bounds: loop interchange
//! (`loop_interchange.rs`, and `fold_interchange.rs` for reverse mode's
//! folds of folds of `addAt`s), bounds guards (`guard.rs`), jamming
//! (`jam.rs`), skipping folds (`skip.rs`), folds two iterations per trip
//! (`twice.rs`), and horizontal fusion (`horizontal.rs`).
//!
//! With more than one thread, `parallel.rs` decides which folds of the
//! function's own block run on several (Note [Parallel loops]) and makes
//! their chunk functions, which the backend compiles beside the entry.

use std::collections::HashMap;

use crate::anf::{Block, Rhs};
use crate::diagnostic::Span;
use crate::ir::{Name, Prim};

pub(super) mod fold_interchange;
pub(super) mod fuse;
pub(super) mod guard;
pub(super) mod hoist;
pub(super) mod horizontal;
pub(super) mod inplace;
pub(super) mod jam;
pub(super) mod loop_interchange;
pub(super) mod parallel;
pub(super) mod scratch;
pub(super) mod skip;
pub(super) mod twice;
pub(super) mod unroll;
pub(super) mod version;
pub(super) mod vertical;
pub(super) mod view;

/// The copies of bindings the rewrites make under fresh names, each with
/// the name it copies, in the order they are made (a copy of a copy
/// after its original): the lowering gives each copy its original's
/// span, so that a failure in a hoisted, unrolled or versioned binding is
/// reported at the source of the binding it copies (Note [Failure sites]).
pub type Copies = Vec<(Name, Name)>;

/// Gives every copy in `copies` the span of the name it copies.
pub fn carry_spans(spans: &mut HashMap<Name, Span>, copies: &Copies) {
    for (copy, original) in copies {
        if let Some(s) = spans.get(original).copied() {
            spans.insert(copy.clone(), s);
        }
    }
}

/// The divisions of `b`, nested blocks included. A loop run in another
/// order than the evaluator's (in pairs, interchanged) meets a divisor of
/// zero first at another element; with one division that is the same ⊥
/// (E-Arith-Bot's details name no element), with two it may be the other
/// division's, at another site (Note [Failure sites]).
pub fn divisions(b: &Block) -> usize {
    b.binds
        .iter()
        .map(|bind| match &bind.rhs {
            Rhs::Prim(Prim::Div, _) => 1,
            Rhs::Prim(..) | Rhs::Array(_) => 0,
            Rhs::If(_, t, e) => divisions(t) + divisions(e),
            Rhs::Loop { body, .. } => divisions(body),
            Rhs::While { cond, step, .. } => divisions(cond) + divisions(step),
        })
        .sum()
}
