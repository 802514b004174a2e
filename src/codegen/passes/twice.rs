//! Folds with a small scalar body, two iterations per trip of their loop
//! (Note [Two iterations per trip]).
//!
//! # Note [Two iterations per trip]
//!
//! A fold whose body is a few scalar operations spends as much on its
//! loop as on its work: the vector maximum's `ifold (fun s i -> if v[i] >
//! s then v[i] else s) v[0] n` is a load, a `maxsd`, and an increment, a
//! compare and a branch, and where the loop lands in the code decides
//! whether the front end keeps up with the one-cycle `maxsd` chain (the
//! same five instructions ran in 0.38 ms 32-byte aligned and 0.66 ms
//! straddling a boundary, `benches/aot/align.c`; Cranelift 0.135 aligns
//! no block). So an innermost fold
//!
//! - whose state is scalars (Double, Index, Bool and pairs of them),
//! - whose body binds at most [`BUDGET`] values, each a scalar, by
//!   primitives or by conditionals whose branches are such blocks (no
//!   loop, no array built, nothing written),
//!
//! and that no other plan takes (jamming, skipping, pairs of `addAt`s)
//! runs `⌊n / 2⌋` trips of iterations `2k` then `2k + 1`, then iteration
//! `n − 1` when `n` is odd (`Lower::doubled_fold`).
//!
//! Exactness. The iterations run in the evaluator's order (E-IFold-Succ),
//! each as written, with its own tests where the bounds guard covers none
//! (Note [Bounds guards]): the same operations on the same values in the
//! same order, so every bit, and the first ⊥ with its code and details,
//! are the evaluator's. Only the loop's own increment and test run half
//! as often.

use super::jam::scalars;
use crate::anf::{Block, Rhs};
use crate::ir::Type;

/// The most bindings a body run twice per trip may have (its branches'
/// included): beyond a few operations the loop's own cost is noise.
pub const BUDGET: usize = 8;

/// Whether a fold with state type `state` and body `body` runs two
/// iterations per trip (Note [Two iterations per trip]).
pub fn doubled(state: &Type, body: &Block) -> bool {
    let mut budget = BUDGET;
    scalars(state) && small(body, &mut budget)
}

/// Every binding of `b` a scalar by a primitive or a conditional of such
/// blocks, within `budget` bindings in all.
fn small(b: &Block, budget: &mut usize) -> bool {
    b.binds.iter().all(|x| {
        let Some(left) = budget.checked_sub(1) else {
            return false;
        };
        *budget = left;
        scalars(&x.ty)
            && match &x.rhs {
                Rhs::Prim(..) => true,
                Rhs::If(_, t, e) => small(t, budget) && small(e, budget),
                Rhs::Array(..) | Rhs::Loop { .. } | Rhs::While { .. } => false,
            }
    })
}
