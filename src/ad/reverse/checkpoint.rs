//! A loop iteration's values for its reverse (spec/ad-reverse.md §4.3,
//! §4.4): restored from the loop's sub-tape, or, for a checkpointed loop
//! (R-Checkpoint), computed again by the forward sweep's own lets, just
//! before the iteration runs backwards.

use super::analysis::untaped;
use super::{Lets, Reverse};
use crate::anf::{Atom, Binding, Block, Rhs};
use crate::ir::{Expr, ExprId, Lit, Name, Prim, Type};

/// A loop binding's parts that its iterations' reverse needs.
pub(super) struct Iteration<'a> {
    pub(super) bd: &'a Binding,
    pub(super) body: &'a Block,
    pub(super) n: &'a Atom,
    pub(super) index: &'a Name,
    /// What the sub-tape carries besides each iteration's tape: the
    /// element type (`build`) or the state type (folds).
    pub(super) carried: &'a Type,
    /// Where iteration i's tape is in the sub-tape: `i + offset`.
    pub(super) offset: i64,
}

impl Reverse<'_, '_> {
    /// Iteration `per.index`'s values in `l`, for its reverse: restored
    /// from the loop's sub-tape (§4.3), or, for a checkpointed loop,
    /// computed again (R-Checkpoint).
    pub(super) fn restore_iteration(&mut self, per: &Iteration<'_>, l: &mut Lets) {
        if self.checkpointed.contains(&per.bd.name) {
            self.recompute(per.body, l);
        } else {
            let tape = self.iteration_tape(per.bd, per.carried, per.body, per.index, per.offset);
            self.restore(per.body, tape, l);
        }
    }

    /// R-Checkpoint: the lets of fwd(B) (§4.2) without the tape tuple, so
    /// that B's variables are bound as `restore` would bind them, and each
    /// compound binding's sub-tape is the second half of its entry. None
    /// of them can be ⊥ (the forward sweep evaluated the same bindings on
    /// the same values), so, like restored values, each is left out where
    /// nothing mentions it — among them the bindings on a linear state's
    /// path, which mention the state the reverse sweep does not have.
    pub(super) fn recompute(&mut self, blk: &Block, lets: &mut Lets) {
        let start = lets.0.len();
        for bd in &blk.binds {
            let Some(en) = self.fwd_binding(bd, lets) else {
                continue;
            };
            if matches!(bd.rhs, Rhs::Prim(..) | Rhs::Array(_)) || self.unrecorded(bd) {
                continue;
            }
            let et = self.entry_type(bd);
            let ev = self.b.var(&en, et);
            let sub = self.b.snd(ev);
            let (sn, _) = self.bind(lets, "st", sub);
            self.subtapes.insert(bd.name.clone(), sn);
        }
        for (n, _) in &lets.0[start..] {
            self.restored.insert(n.clone());
        }
    }

    /// The tape of iteration `index` of the loop `bd`, whose sub-tape holds
    /// `(carried, tape of body)` pairs: `snd st[index + offset]` (offset 1
    /// for folds, whose `st[0]` is the initial state), or the placeholder
    /// `false` for an untaped loop, whose body restores from nothing.
    pub(super) fn iteration_tape(
        &mut self,
        bd: &Binding,
        carried: &Type,
        body: &Block,
        index: &Name,
        offset: i64,
    ) -> ExprId {
        if untaped(bd) {
            return self.b.add(Expr::Lit(Lit::Bool(false)), Type::Bool);
        }
        let st = self.subtapes[&bd.name].clone();
        let stt = Type::array(Type::pair(carried.clone(), self.tape_type(body)));
        let sv = self.b.var(&st, stt);
        let mut at = self.b.var(index, Type::Index);
        if offset != 0 {
            let o = self.b.index(offset);
            at = self.b.prim(Prim::Add, vec![at, o], Type::Index);
        }
        let e = self.b.get(sv, at);
        self.b.snd(e)
    }
}
