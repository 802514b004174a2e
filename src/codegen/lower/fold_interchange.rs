//! Lowering of folds of folds of `addAt`s with their loops interchanged
//! (Note [Interchanged folds] in `codegen/passes/fold_interchange.rs`):
//! the guard, the nest as written when it fails, and the term-major
//! loops, four inner iterations per point.

use rustc_hash::FxHashSet as HashSet;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value, types};

use super::{Lower, R, Vals, args_of, offset};
use crate::anf::{Binding, Block as AnfBlock, Rhs};
use crate::codegen::layout::SLOT;
use crate::codegen::passes::fold_interchange::{self, At, Check, Length, Plan, Share};
use crate::ir::{Name, Type};

/// The inner iterations run together for every point (Note
/// [Interchanged folds]): four slots kept in registers per `addAt` that
/// adds into one slot per inner iteration.
const WIDTH: usize = 4;

/// The terms of the inner body: those that do not depend on the point,
/// once per inner iteration, and the others, per point.
struct Split<'b> {
    per_inner: Vec<&'b Binding>,
    per_point: Vec<&'b Binding>,
}

impl Lower<'_, '_> {
    /// The plan of the fold over `index` with state `s : st`, if it is a
    /// fold of folds of `addAt`s that runs interchanged.
    pub(super) fn fold_interchange_plan<'b>(
        &self,
        index: &Name,
        s: &Name,
        st: &Type,
        body: &'b AnfBlock,
    ) -> Option<Plan<'b>> {
        if self.plain || self.scratch.loops.contains_key(index) {
            return None;
        }
        let built = |a: &Name| !self.fused.contains_key(a) && self.env.contains_key(a);
        let in_place = |x: &Name| self.updates.in_place.contains(x);
        let plan = fold_interchange::plan((index, s, st), body, built, in_place)?;
        // The inner loop releases no scratch stack either.
        (!self.scratch.loops.contains_key(plan.inner)).then_some(plan)
    }

    /// The fold over `index` of `n ≥ 0` iterations (tested and charged)
    /// from `z`, run term-major behind its guard (Note [Interchanged
    /// folds]); as written, cold, when the guard fails.
    pub(super) fn interchanged_fold(
        &mut self,
        n: Value,
        z: &[Value],
        (s, index): (&Name, &Name),
        body: &AnfBlock,
        plan: &Plan<'_>,
    ) -> R<Vals> {
        let m = self.scalar(plan.m)?;
        let ok = self.interchange_guard(n, m, z, plan)?;
        let tys: Vec<types::Type> = z.iter().map(|v| self.b.func.dfg.value_type(*v)).collect();
        let (fast, slow, join) = self.diamond(ok, &tys);
        self.b.switch_to_block(fast);
        // The inner loops' n × m iterations, at once, at the inner loop's
        // site (Note [Native limits]).
        let inner = body
            .binds
            .iter()
            .find(|b| matches!(b.rhs, Rhs::Loop { .. }));
        let was = match inner {
            Some(b) => self.enter_site(&b.name),
            None => self.here,
        };
        self.charge_product(n, m);
        self.here = was;
        let before = std::mem::replace(&mut self.covered, plan.covered.clone());
        let r = self.term_major(n, m, z, index, plan);
        self.covered = before;
        r?;
        // The state's buffers are the same; a literal leaf is the
        // result's once an iteration has run.
        let mut out = z.to_vec();
        let some = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, n, 0);
        for (slot, lit) in &plan.literals {
            let v = self.scalar(lit)?;
            out[*slot] = self.b.ins().select(some, v, out[*slot]);
        }
        self.b.ins().jump(join, &args_of(&out));
        self.b.switch_to_block(slow);
        self.b.set_cold_block(slow);
        let was = std::mem::replace(&mut self.cold, true);
        let r = self.counted_loop(n, z, |l, i, st| l.fold_step((s, index), i, st, body));
        self.cold = was;
        let r = r?;
        self.b.ins().jump(join, &args_of(&r));
        self.b.switch_to_block(join);
        Ok(self.b.block_params(join).to_vec())
    }

    /// The guard of an interchanged fold (Note [Interchanged folds]): no
    /// point, or `m ≥ 0` and every check of the plan.
    fn interchange_guard(&mut self, n: Value, m: Value, z: &[Value], plan: &Plan<'_>) -> R<Value> {
        let flags = MemFlagsData::trusted();
        let mut ok = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, m, 0);
        // The tests of each inner iteration: (table, length, outer) of a
        // table index, rows, and orders.
        let mut tables: Vec<(Name, Value, bool)> = Vec::new();
        let mut rows: Vec<Name> = Vec::new();
        let mut orders: Vec<(Name, bool)> = Vec::new();
        for check in &plan.checks {
            let (length, at) = match check {
                Check::Access(length, at) => (length, at),
                Check::Rows(a) => {
                    rows.push(a.clone());
                    continue;
                }
                Check::Order { table, outer } => {
                    orders.push((table.clone(), *outer));
                    continue;
                }
            };
            let len = match length {
                Length::Outside(a) => self.length_of(a)?,
                Length::State(slot) => z[slot + 1],
            };
            // 0 ≤ c ≤ len − count (no overflow: both are ≥ 0).
            let below = |l: &mut Self, c: Option<Value>, count: Value| {
                let room = l.b.ins().isub(len, count);
                match c {
                    None => {
                        l.b.ins()
                            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, room, 0)
                    }
                    Some(c) => {
                        let nonneg = l.b.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, c, 0);
                        let fits = l.b.ins().icmp(IntCC::SignedLessThanOrEqual, c, room);
                        l.b.ins().band(nonneg, fits)
                    }
                }
            };
            let fits = match at {
                At::Outer(c) => {
                    let c = c.as_ref().map(|c| self.scalar(c)).transpose()?;
                    below(self, c, n)
                }
                At::Inner(c) => {
                    let c = c.as_ref().map(|c| self.scalar(c)).transpose()?;
                    below(self, c, m)
                }
                At::Const(c) => {
                    let c = self.scalar(c)?;
                    self.b.ins().icmp(IntCC::UnsignedLessThan, c, len)
                }
                At::Table(t) => {
                    tables.push((t.clone(), len, false));
                    continue;
                }
                At::TableOuter(t) => {
                    tables.push((t.clone(), len, true));
                    continue;
                }
            };
            ok = self.b.ins().band(ok, fits);
        }
        if !(tables.is_empty() && rows.is_empty() && orders.is_empty()) {
            // Per inner iteration, read only when the tests above (the
            // tables' and rows' own lengths among them) hold.
            let zero = self.iconst(0);
            let count = self.b.ins().select(ok, m, zero);
            let mut arrays = Vec::new();
            for (t, len, outer) in &tables {
                let p = self.atom_of(t)?[0];
                arrays.push((p, *len, *outer));
            }
            let rows: Vec<Value> = rows
                .iter()
                .map(|a| Ok(self.atom_of(a)?[0]))
                .collect::<R<_>>()?;
            let orders: Vec<(Value, bool)> = orders
                .iter()
                .map(|(t, outer)| Ok((self.atom_of(t)?[0], *outer)))
                .collect::<R<_>>()?;
            ok = self.counted_loop(count, &[ok], |l, s, st| {
                let mut all = st[0];
                for &(p, len, outer) in &arrays {
                    let at = l.element(p, s, SLOT);
                    let k = l.b.ins().load(types::I64, flags, at, 0);
                    let nonneg = l.b.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, k, 0);
                    let fits = if outer {
                        let room = l.b.ins().isub(len, n);
                        l.b.ins().icmp(IntCC::SignedLessThanOrEqual, k, room)
                    } else {
                        l.b.ins().icmp(IntCC::SignedLessThan, k, len)
                    };
                    all = l.b.ins().band(all, nonneg);
                    all = l.b.ins().band(all, fits);
                }
                for &p in &rows {
                    let d = l.element(p, s, 2 * SLOT);
                    let len = l.b.ins().load(types::I64, flags, d, offset(SLOT)?);
                    let fits = l.b.ins().icmp(IntCC::SignedLessThanOrEqual, n, len);
                    all = l.b.ins().band(all, fits);
                }
                for &(p, outer) in &orders {
                    // o[s] ≥ o[s − 1] + n (or > o[s − 1]) for s > 0; the
                    // tables' bounds above keep the sum from overflowing
                    // whenever they hold.
                    let first = l.b.ins().icmp_imm_s(IntCC::Equal, s, 0);
                    let prev = l.b.ins().iadd_imm_s(s, -1);
                    let prev = l.b.ins().select(first, s, prev);
                    let at = l.element(p, s, SLOT);
                    let k = l.b.ins().load(types::I64, flags, at, 0);
                    let at = l.element(p, prev, SLOT);
                    let before = l.b.ins().load(types::I64, flags, at, 0);
                    let after = if outer {
                        let end = l.b.ins().iadd(before, n);
                        l.b.ins().icmp(IntCC::SignedGreaterThanOrEqual, k, end)
                    } else {
                        l.b.ins().icmp(IntCC::SignedGreaterThan, k, before)
                    };
                    let after = l.b.ins().bor(first, after);
                    all = l.b.ins().band(all, after);
                }
                Ok(vec![all])
            })?[0];
        }
        let none = self.b.ins().icmp_imm_s(IntCC::Equal, n, 0);
        Ok(self.b.ins().bor(none, ok))
    }

    /// The fast path of an interchanged fold, inside its guard: for the
    /// inner iterations s < m (none without a point), four at a time,
    /// then two, then one, for every point i < n, the terms and `addAt`s of
    /// s, s + 1, … in order (Note [Interchanged folds]).
    fn term_major(
        &mut self,
        n: Value,
        m: Value,
        z: &[Value],
        index: &Name,
        plan: &Plan<'_>,
    ) -> R<()> {
        // A term depends on the point when it reads the index or an outer
        // term, directly or through another.
        let mut point: HashSet<&Name> = plan.outer_terms.iter().map(|b| &b.name).collect();
        point.insert(index);
        let mut split = Split {
            per_inner: Vec::new(),
            per_point: Vec::new(),
        };
        for b in &plan.inner_terms {
            let mut uses = false;
            b.rhs
                .for_each_atom(&mut |a| uses |= a.var().is_some_and(|x| point.contains(x)));
            if uses {
                point.insert(&b.name);
                split.per_point.push(b);
            } else {
                split.per_inner.push(b);
            }
        }
        let zero = self.iconst(0);
        let some = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, n, 0);
        let count = self.b.ins().select(some, m, zero);
        let blocks = self
            .b
            .ins()
            .sshr_imm_u(count, WIDTH.trailing_zeros() as i64);
        self.inner_blocks(n, (blocks, zero), WIDTH, z, index, plan, &split)?;
        let start = self
            .b
            .ins()
            .ishl_imm_u(blocks, WIDTH.trailing_zeros() as i64);
        // The last three at most: two together (two chains of additions
        // in flight rather than one), then one.
        let left = self.b.ins().isub(count, start);
        let two = self.b.ins().sshr_imm_u(left, 1);
        self.inner_blocks(n, (two, start), 2, z, index, plan, &split)?;
        let start = self.b.ins().iadd(start, two);
        let start = self.b.ins().iadd(start, two);
        let one = self.b.ins().band_imm_u(left, 1);
        self.inner_blocks(n, (one, start), 1, z, index, plan, &split)
    }

    /// `count` blocks of `width` inner iterations from `start`, each run
    /// for every point.
    #[allow(clippy::too_many_arguments)]
    fn inner_blocks(
        &mut self,
        n: Value,
        (count, start): (Value, Value),
        width: usize,
        z: &[Value],
        index: &Name,
        plan: &Plan<'_>,
        split: &Split<'_>,
    ) -> R<()> {
        let flags = MemFlagsData::trusted();
        self.counted_loop(count, &[], |l, b, _| {
            let s0 = l.b.ins().imul_imm_s(b, width as i64);
            let s0 = l.b.ins().iadd(start, s0);
            // The terms of each inner iteration that do not depend on the
            // point, kept by name to be put back per iteration.
            let mut snaps: Vec<Vec<(Name, Vals)>> = Vec::with_capacity(width);
            for q in 0..width {
                let s = l.b.ins().iadd_imm_s(s0, q as i64);
                l.env.insert(plan.inner.clone(), vec![s]);
                let mut snap = vec![(plan.inner.clone(), vec![s])];
                for t in &split.per_inner {
                    l.bind(t)?;
                    snap.push((t.name.clone(), l.env[&t.name].clone()));
                }
                snaps.push(snap);
            }
            let restore = |l: &mut Self, snap: &[(Name, Vals)]| {
                for (x, v) in snap {
                    l.env.insert(x.clone(), v.clone());
                }
            };
            // The slots added to once per inner iteration, in registers.
            let mut addrs = Vec::new();
            let mut regs = Vec::new();
            for add in plan.adds.iter().filter(|a| a.share == Share::PerInner) {
                for snap in &snaps {
                    restore(l, snap);
                    let k = l.scalar(&add.index)?;
                    let p = l.element(z[add.slot], k, 8);
                    addrs.push(p);
                    regs.push(l.b.ins().load(types::F64, flags, p, 0));
                }
            }
            let regs = l.counted_loop(n, &regs, |l, i, regs| {
                l.env.insert(index.clone(), vec![i]);
                for t in &plan.outer_terms {
                    l.bind(t)?;
                }
                let mut next = regs.to_vec();
                // Per add sharing one slot per point: (address, sum).
                let mut shared: Vec<Option<(Value, Value)>> = vec![None; plan.adds.len()];
                for (q, snap) in snaps.iter().enumerate() {
                    restore(l, snap);
                    for t in &split.per_point {
                        l.bind(t)?;
                    }
                    let mut r = 0;
                    for (k, add) in plan.adds.iter().enumerate() {
                        let v = l.scalar(&add.value)?;
                        match add.share {
                            Share::None => {
                                let at = l.scalar(&add.index)?;
                                let p = l.element(z[add.slot], at, 8);
                                let old = l.b.ins().load(types::F64, flags, p, 0);
                                let new = l.b.ins().fadd(old, v);
                                l.b.ins().store(flags, new, p, 0);
                            }
                            Share::PerOuter => {
                                let (p, old) = match shared[k] {
                                    Some(x) => x,
                                    None => {
                                        let at = l.scalar(&add.index)?;
                                        let p = l.element(z[add.slot], at, 8);
                                        (p, l.b.ins().load(types::F64, flags, p, 0))
                                    }
                                };
                                shared[k] = Some((p, l.b.ins().fadd(old, v)));
                            }
                            Share::PerInner => {
                                let at = r * width + q;
                                next[at] = l.b.ins().fadd(next[at], v);
                                r += 1;
                            }
                        }
                    }
                }
                for (p, sum) in shared.into_iter().flatten() {
                    l.b.ins().store(flags, sum, p, 0);
                }
                Ok(next)
            })?;
            for (p, v) in addrs.iter().zip(&regs) {
                l.b.ins().store(flags, *v, *p, 0);
            }
            Ok(Vec::new())
        })?;
        Ok(())
    }
}
