//! Lowering of jammed loops (Note [Jamming] in `codegen/passes/jam.rs`): a
//! `build`, `ifold` or `iscan` two iterations at a time with their inner
//! scalar folds in one loop, and a bail exit to the iteration as written.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value, types};

use super::{Lower, R, Vals, lane_sums};
use crate::anf::{Binding, Block as AnfBlock, Rhs};
use crate::codegen::abi;
use crate::codegen::compile_error;
use crate::codegen::passes::{guard, jam};
use crate::ir::Name;

impl Lower<'_, '_> {
    /// The jamming plan of the loop over `index` (Note [Jamming]),
    /// when its iterations keep nothing on a scratch stack, the fold's
    /// inputs are not fused, and the code is not a cold version.
    pub(super) fn jam_plan(
        &mut self,
        index: &Name,
        state: Option<&Name>,
        body: &AnfBlock,
    ) -> Option<jam::Plan> {
        if self.cold || self.scratch.loops.contains_key(index) {
            return None;
        }
        let plan = jam::plan(state, body)?;
        // Under the relaxed contract a fold that sums `log`s or `exp`s in
        // lanes does so rather than jam (Note [Lane sums]).
        if self.relaxed
            && let Rhs::Loop {
                state: Some((_, s, st)),
                index: j,
                body: inner,
                ..
            } = &body.binds[plan.fold].rhs
            && lane_sums::shape(j, s, st, inner).is_some_and(|p| p.math)
        {
            return None;
        }
        if plan
            .pre
            .iter()
            .any(|&k| self.plan.fused.contains_key(&body.binds[k].name))
        {
            return None;
        }
        self.jammed.push(index.clone());
        Some(plan)
    }

    /// The loop over `index < n` with state `init` (none for a `build`)
    /// two iterations at a time, their inner folds jammed (Note
    /// [Jamming]). `finish` ends iteration i with the body's value: it
    /// stores what the loop keeps and returns the next state.
    pub(super) fn jammed(
        &mut self,
        n: Value,
        init: &[Value],
        (index, state): (&Name, Option<&Name>),
        body: &AnfBlock,
        plan: &jam::Plan,
        finish: impl Fn(&mut Self, Value, &[Value]) -> R<Vals>,
    ) -> R<Vals> {
        let (head, exit) = self.loop_entry(n, init);
        let params = self.b.block_params(head).to_vec();
        let (i, st) = (params[0], &params[1..]);
        let i1 = self.b.ins().iadd_imm_s(i, 1);
        let two = self.b.ins().icmp(IntCC::SignedLessThan, i1, n);
        let (both, one) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(two, both, &[], one, &[]);
        // Iterations i and i + 1: pre[i] as the iteration would start ...
        self.b.switch_to_block(both);
        let pre = jam::picked(body, &plan.pre);
        let enter = |l: &mut Self, at: Value, st: &[Value]| {
            l.env.insert(index.clone(), vec![at]);
            if let Some(s) = state {
                l.env.insert(s.clone(), st.to_vec());
            }
        };
        enter(self, i, st);
        let lane0 = self.lane((index, i), &pre)?;
        // ... then pre[i + 1] and both folds, any ⊥ abandoning the step.
        let bail = self.b.create_block();
        for _ in 0..3 {
            self.b.append_block_param(bail, types::I64);
        }
        self.b.set_cold_block(bail);
        let exit_fail = std::mem::replace(&mut self.fail, bail);
        enter(self, i1, st);
        let folds = self.lane((index, i1), &pre).and_then(|lane1| {
            Ok((
                self.jam_folds(&body.binds[plan.fold], [&lane0, &lane1])?,
                lane1,
            ))
        });
        self.fail = exit_fail;
        let (xs, lane1) = folds?;
        // post[i], then post[i + 1].
        let fold = &body.binds[plan.fold].name;
        let mut next = st.to_vec();
        for ((at, lane), x) in [(i, &lane0), (i1, &lane1)].into_iter().zip(xs) {
            enter(self, at, &next);
            self.restore(lane);
            self.env.insert(fold.clone(), x);
            for k in &plan.post {
                self.bind(&body.binds[*k])?;
            }
            let v = self.atom(&body.result)?;
            next = finish(self, at, &v)?;
        }
        let i2 = self.b.ins().iadd_imm_s(i, 2);
        self.loop_back((i2, n), &next, (head, exit));
        self.b.switch_to_block(bail);
        self.b.ins().jump(one, &[]);
        // Iteration i alone, as written.
        self.b.switch_to_block(one);
        enter(self, i, st);
        let v = self.iteration(index, body)?;
        let next = finish(self, i, &v)?;
        let i1 = self.b.ins().iadd_imm_s(i, 1);
        self.loop_back((i1, n), &next, (head, exit));
        self.b.switch_to_block(exit);
        Ok(self.b.block_params(exit).to_vec())
    }

    /// One iteration's index and bindings `pre`, and their values (the
    /// inner fold may read both).
    pub(super) fn lane(
        &mut self,
        (index, at): (&Name, Value),
        pre: &[&Binding],
    ) -> R<Vec<(Name, Vals)>> {
        let mut out = vec![(index.clone(), vec![at])];
        for b in pre {
            self.bind(b)?;
            out.push((b.name.clone(), self.env[&b.name].clone()));
        }
        Ok(out)
    }

    /// One iteration's values back in the environment.
    pub(super) fn restore(&mut self, lane: &[(Name, Vals)]) {
        for (x, v) in lane {
            self.env.insert(x.clone(), v.clone());
        }
    }

    /// The inner folds of two iterations (Note [Jamming]), each with its
    /// iteration's values `lanes`: E-IFold-Bot's test and the bounds guard
    /// of each (failing to `self.fail`), then one loop over both up to the
    /// shorter count, then the rest of the longer one. Their final states.
    fn jam_folds(&mut self, fold: &Binding, lanes: [&[(Name, Vals)]; 2]) -> R<[Vals; 2]> {
        let Rhs::Loop {
            n: m,
            state: Some((z, t, st)),
            index: j,
            body: inner,
            ..
        } = &fold.rhs
        else {
            return Err(compile_error("a jammed loop without its fold"));
        };
        let over = m.var().and_then(|x| self.length_of.get(x)).cloned();
        let pushed = over.map(|a| self.in_bounds.push((j.clone(), a))).is_some();
        let known = |a: &Name| self.in_bounds.iter().any(|(k, b)| k == j && b == a);
        let guard = guard::plan(j, Some(t), inner, |a| self.fused.contains_key(a), known);
        let mut counts = [self.iconst(0); 2];
        let mut inits: [Vals; 2] = Default::default();
        for (k, lane) in lanes.iter().enumerate() {
            self.restore(lane);
            let mk = self.scalar(m)?;
            self.check_count_of(m, mk, abi::NEGATIVE_COUNT);
            let zk = self.atom(z)?;
            if let Some(g) = &guard {
                let ok = self.guard_holds(mk, g, Some((&zk, st)))?;
                let fails = self.b.ins().icmp_imm_s(IntCC::Equal, ok, 0);
                let none = self.iconst(0);
                self.fail_if(fails, abi::INDEX_OUT_OF_BOUNDS, none, none);
            }
            counts[k] = mk;
            inits[k] = zk;
        }
        let before = std::mem::take(&mut self.covered);
        if let Some(g) = &guard {
            self.covered = g.covered.clone();
        }
        let r = self.jam_loops(lanes, counts, inits, (t, j, inner));
        self.covered = before;
        if pushed {
            self.in_bounds.pop();
        }
        r
    }

    /// [`jam_folds`]' loops, inside the guards.
    ///
    /// [`jam_folds`]: Self::jam_folds
    fn jam_loops(
        &mut self,
        lanes: [&[(Name, Vals)]; 2],
        [m0, m1]: [Value; 2],
        [z0, z1]: [Vals; 2],
        (t, j, inner): (&Name, &Name, &AnfBlock),
    ) -> R<[Vals; 2]> {
        let iterate = |l: &mut Self, lane: &[(Name, Vals)], at: Value, st: &[Value]| {
            l.restore(lane);
            l.env.insert(t.clone(), st.to_vec());
            l.env.insert(j.clone(), vec![at]);
            l.block(inner)
        };
        let shorter = self.b.ins().smin(m0, m1);
        let width = z0.len();
        let init = [z0, z1].concat();
        let both = self.counted_loop(shorter, &init, |l, at, st| {
            let mut next = iterate(l, lanes[0], at, &st[..width])?;
            next.extend(iterate(l, lanes[1], at, &st[width..])?);
            Ok(next)
        })?;
        let mut out: [Vals; 2] = [both[..width].to_vec(), both[width..].to_vec()];
        for (k, m) in [m0, m1].into_iter().enumerate() {
            let rest = self.b.ins().isub(m, shorter);
            out[k] = self.counted_loop(rest, &out[k], |l, at, st| {
                let at = l.b.ins().iadd(at, shorter);
                iterate(l, lanes[k], at, st)
            })?;
        }
        Ok(out)
    }
}
