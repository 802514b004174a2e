//! Folds that do not simply run one iteration per trip: the fold step
//! (E-IFold-Succ) every fold strategy shares; folds that skip four
//! iterations at a time where they keep their state (Note [Skipping
//! folds] in `codegen/passes/skip.rs`); and folds of a few scalar
//! operations, two iterations per trip (Note [Two iterations per trip] in
//! `codegen/passes/twice.rs`).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value, types};

use super::{Lower, R, Vals, args_of};
use crate::anf::Block as AnfBlock;
use crate::codegen::passes::skip;
use crate::ir::Name;

impl Lower<'_, '_> {
    /// Iteration `i` of a fold or scan with state `st` (E-IFold-Succ):
    /// the state and the index bound, then the body.
    pub(super) fn fold_step(
        &mut self,
        (s, index): (&Name, &Name),
        i: Value,
        st: &[Value],
        body: &AnfBlock,
    ) -> R<Vals> {
        self.env.insert(s.clone(), st.to_vec());
        self.env.insert(index.clone(), vec![i]);
        self.iteration(index, body)
    }

    /// The plan of a fold over `index` with state `s` that skips four
    /// iterations at a time where they keep the state (Note [Skipping
    /// folds]); its reads at `index` need no test, as for [`pairable`].
    ///
    /// [`pairable`]: Self::pairable
    pub(super) fn skip_plan(&self, index: &Name, s: &Name, body: &AnfBlock) -> Option<skip::Plan> {
        if self.scratch.loops.contains_key(index) {
            return None;
        }
        skip::plan(index, s, body, |b| self.untested_read(index, b))
    }

    /// The fold of `n ≥ 0` iterations from `z` by `plan` (Note [Skipping
    /// folds]): four at a time, each four's tests in two pairs of lanes
    /// with the state they start from, then the four as written if a lane
    /// says the state changes; the last `n mod 4` as written.
    pub(super) fn skipping_fold(
        &mut self,
        n: Value,
        z: &[Value],
        (s, index): (&Name, &Name),
        body: &AnfBlock,
        plan: &skip::Plan,
    ) -> R<Vals> {
        let prefix = &body.binds[..plan.prefix];
        let tys: Vec<types::Type> = z.iter().map(|v| self.b.func.dfg.value_type(*v)).collect();
        // Iterations `from + t` for t < m, as written.
        let as_written = |l: &mut Self, m: Value, from: Value, st: &[Value]| {
            l.counted_loop(m, st, |l, t, st| {
                let i = l.b.ins().iadd(from, t);
                l.fold_step((s, index), i, st, body)
            })
        };
        let quads = self.b.ins().sshr_imm_u(n, 2);
        let st = self.counted_loop(quads, z, |l, q, st| {
            let i = l.b.ins().ishl_imm_u(q, 2);
            l.env.insert(s.clone(), st.to_vec());
            for b in prefix.iter().filter(|b| !plan.varying.contains(&b.name)) {
                l.bind(b)?;
            }
            let lo = l.lanes(prefix, &plan.varying, index, i)?[&plan.test];
            let i2 = l.b.ins().iadd_imm_s(i, 2);
            let hi = l.lanes(prefix, &plan.varying, index, i2)?[&plan.test];
            let changes = if plan.keep_when {
                let all = l.b.ins().band(lo, hi);
                let kept = l.b.ins().vall_true(all);
                l.b.ins().icmp_imm_s(IntCC::Equal, kept, 0)
            } else {
                let any = l.b.ins().bor(lo, hi);
                l.b.ins().vany_true(any)
            };
            let (run, keep, join) = l.diamond(changes, &tys);
            l.b.switch_to_block(keep);
            l.b.ins().jump(join, &args_of(st));
            l.b.switch_to_block(run);
            let four = l.iconst(4);
            let r = as_written(l, four, i, st)?;
            l.b.ins().jump(join, &args_of(&r));
            l.b.switch_to_block(join);
            Ok(l.b.block_params(join).to_vec())
        })?;
        let done = self.b.ins().ishl_imm_u(quads, 2);
        let rest = self.b.ins().isub(n, done);
        as_written(self, rest, done, &st)
    }

    /// The fold of `n ≥ 0` iterations from `z`, iterations `2k` and `2k +
    /// 1` per trip, then the last one alone when `n` is odd (Note [Two
    /// iterations per trip] in `codegen/passes/twice.rs`).
    pub(super) fn doubled_fold(
        &mut self,
        n: Value,
        z: &[Value],
        (s, index): (&Name, &Name),
        body: &AnfBlock,
    ) -> R<Vals> {
        let step = |l: &mut Self, i: Value, st: &[Value]| l.fold_step((s, index), i, st, body);
        let half = self.b.ins().sshr_imm_u(n, 1);
        let trips = self.counted_loop(half, z, |l, k, st| {
            // 2k + 1 < n: neither index overflows.
            let i = l.b.ins().ishl_imm_u(k, 1);
            let st = step(l, i, st)?;
            let i1 = l.b.ins().iadd_imm_s(i, 1);
            step(l, i1, &st)
        })?;
        // The last iteration alone when n is odd: a conditional, not a
        // loop (no back edge).
        let odd = self.b.ins().band_imm_u(n, 1);
        let tys: Vec<types::Type> = trips
            .iter()
            .map(|v| self.b.func.dfg.value_type(*v))
            .collect();
        let (one, none, join) = self.diamond(odd, &tys);
        self.b.switch_to_block(one);
        let last = self.b.ins().iadd_imm_s(n, -1);
        let st = step(self, last, &trips)?;
        self.b.ins().jump(join, &args_of(&st));
        self.b.switch_to_block(none);
        self.b.ins().jump(join, &args_of(&trips));
        self.b.switch_to_block(join);
        Ok(self.b.block_params(join).to_vec())
    }
}
