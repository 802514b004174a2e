//! Lowering of folds of folds of `addAt`s with their loops interchanged
//! (Note [Interchanged folds] in `codegen/passes/fold_interchange.rs`):
//! the guard, the nest as written when it fails, and the term-major
//! loops, four inner iterations per point.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value, types};

use super::{Lower, R, Vals, args_of, offset};
use crate::anf::{Atom, Binding, Block as AnfBlock, Rhs};
use crate::codegen::abi::ROW_TERMS;
use crate::codegen::compile_error;
use crate::codegen::layout::SLOT;
use crate::codegen::passes::fold_interchange::{self, At, Check, Length, Plan, Share};
use crate::ir::{Name, Prim, Type};

/// The inner iterations run together for every point (Note
/// [Interchanged folds]): four slots kept in registers per `addAt` that
/// adds into one slot per inner iteration.
const WIDTH: usize = 4;

/// The fold kernel's helper (Note [Row kernels], folds).
const FOLD_ROWS: &str = "fsmooth_fold_rows";

/// An interchanged fold the fold kernel runs (Note [Row kernels], folds
/// in `codegen/backend/kernels.rs`): per point, `t = a[c + i]` (`c`
/// none for `a[i]`); per inner iteration, the coefficient `coef` and the
/// row `row`; an `addAt` of `t · coef` at `o + i` into the state's
/// `dest.0`, `o = dest.1`, and one of `t · row[i]` at `sum.1` into the
/// state's `sum.0`, kept in a register.
struct FoldKernel<'b> {
    t: (&'b Name, Option<&'b Atom>),
    coef: &'b Atom,
    row: &'b Name,
    dest: (usize, &'b Atom),
    sum: (usize, &'b Atom),
}

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
            let fits = match at {
                At::Outer(c) => {
                    let c = c.as_ref().map(|c| self.scalar(c)).transpose()?;
                    self.span_fits(c, n, len)
                }
                At::Inner(c) => {
                    let c = c.as_ref().map(|c| self.scalar(c)).transpose()?;
                    self.span_fits(c, m, len)
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
        if let Some(kernel) = self.fold_kernel(index, plan, &split) {
            return self.fold_rows(n, count, z, plan, &split, &kernel);
        }
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

    /// The fold kernel's plan for an interchanged fold (Note [Row
    /// kernels], folds): relaxed JIT code on a host with FMA3, not the
    /// nest as written, and a nest that is just GMM's reverse products:
    /// the point's terms `t = a[c + i]` (or `a[i]`), and per inner
    /// iteration and point `y = row[i]`, `t · coef`, `t · y` and `o + i`
    /// (either order each), `coef` and `o` not depending on the point;
    /// two `addAt`s, `t · coef` at `o + i` (a slot per pair) and `t · y`
    /// at a slot per inner iteration.
    fn fold_kernel<'p, 'b: 'p>(
        &self,
        index: &Name,
        plan: &'p Plan<'b>,
        split: &Split<'b>,
    ) -> Option<FoldKernel<'p>> {
        if !(self.fma && self.avx2) || self.cold || self.plain || !self.imports.has(FOLD_ROWS) {
            return None;
        }
        let [a, b] = plan.adds.as_slice() else {
            return None;
        };
        let (dest, sum) = match (a.share, b.share) {
            (Share::None, Share::PerInner) => (a, b),
            (Share::PerInner, Share::None) => (b, a),
            _ => return None,
        };
        let is = |a: &Atom, x: &Name| a.var() == Some(x);
        let prim = |x: &Name, binds: &[&'b Binding]| -> Option<(Prim, &'b [Atom])> {
            let b = binds.iter().find(|b| b.name == *x)?;
            match &b.rhs {
                Rhs::Prim(op, args) => Some((*op, args.as_slice())),
                _ => None,
            }
        };
        // The other operand of a commutative `op` bound to `x` whose one
        // operand satisfies `one`.
        let other = |x: &Name, op: Prim, binds: &[&'b Binding], one: &dyn Fn(&Atom) -> bool| {
            let (o, args) = prim(x, binds)?;
            if o != op {
                return None;
            }
            match args {
                [p, q] if one(p) => Some(q),
                [p, q] if one(q) => Some(p),
                _ => None,
            }
        };
        // The point's term: `t = a[c + i]` or `a[i]`, and nothing else.
        let t = match plan.outer_terms.as_slice() {
            [t] => t,
            [_, t] => t,
            _ => return None,
        };
        let (Prim::Get, [array, at]) = prim(&t.name, &plan.outer_terms)? else {
            return None;
        };
        let array = array.var()?;
        let c = match at.var() {
            Some(x) if x == index => None,
            Some(x) => {
                let c = other(x, Prim::Add, &plan.outer_terms, &|a| is(a, index))?;
                (c.var().is_none_or(|c| c != index && c != &t.name)).then_some(c)
            }
            None => return None,
        };
        if plan.outer_terms.len() == 2 && c.is_none() {
            return None;
        }
        if t.ty != Type::Double {
            return None;
        }
        let point: HashSet<&Name> = split.per_point.iter().map(|b| &b.name).collect();
        let fixed = |a: &Atom| {
            a.var()
                .is_none_or(|x| !point.contains(x) && x != index && x != &t.name)
        };
        // The per-point terms: y, the two products and the index.
        if split.per_point.len() != 4 {
            return None;
        }
        let coef = other(dest.value.var()?, Prim::Mul, &split.per_point, &|a| {
            is(a, &t.name)
        })?;
        let y = other(sum.value.var()?, Prim::Mul, &split.per_point, &|a| {
            is(a, &t.name)
        })?;
        let (Prim::Get, [row, yi]) = prim(y.var()?, &split.per_point)? else {
            return None;
        };
        let o = other(dest.index.var()?, Prim::Add, &split.per_point, &|a| {
            is(a, index)
        })?;
        let row = row.var()?;
        let ok = is(yi, index)
            && fixed(coef)
            && *coef.ty() == Type::Double
            && fixed(o)
            && fixed(&sum.index)
            && !point.contains(row);
        ok.then_some(FoldKernel {
            t: (array, c),
            coef,
            row,
            dest: (dest.slot, o),
            sum: (sum.slot, &sum.index),
        })
    }

    /// An interchanged fold by the fold kernel (Note [Row kernels],
    /// folds): per chunk of up to [`ROW_TERMS`] inner iterations in order
    /// (`count` of them, none without a point), their terms that do not
    /// depend on the point, then `(coef, dest, row, slot)` into a buffer
    /// on the stack, then one call that runs them over every point.
    fn fold_rows(
        &mut self,
        n: Value,
        count: Value,
        z: &[Value],
        plan: &Plan<'_>,
        split: &Split<'_>,
        k: &FoldKernel<'_>,
    ) -> R<()> {
        let kernel = self.imports.get(FOLD_ROWS)?;
        let flags = MemFlagsData::trusted();
        let entry = 32;
        let buf = self.stack_buffer(entry * ROW_TERMS)?;
        let mut t = self.atom_of(k.t.0)?[0];
        if let Some(c) = k.t.1 {
            let c = self.scalar(c)?;
            let c = self.b.ins().ishl_imm_u(c, 3);
            t = self.b.ins().iadd(t, c);
        }
        let shift = ROW_TERMS.trailing_zeros() as i64;
        let chunks = self.chunk_count(count, ROW_TERMS);
        self.counted_loop(chunks, &[], |l, c, _| {
            let s0 = l.b.ins().ishl_imm_u(c, shift);
            let left = l.b.ins().isub(count, s0);
            let most = l.iconst(ROW_TERMS as i64);
            let len = l.b.ins().smin(left, most);
            l.counted_loop(len, &[], |l, ds, _| {
                let s = l.b.ins().iadd(s0, ds);
                l.env.insert(plan.inner.clone(), vec![s]);
                for b in &split.per_inner {
                    l.bind(b)?;
                }
                let at = l.b.ins().imul_imm_s(ds, entry as i64);
                let at = l.b.ins().iadd(buf, at);
                let coef = l.scalar(k.coef)?;
                let o = l.scalar(k.dest.1)?;
                let o = l.b.ins().ishl_imm_u(o, 3);
                let dest = l.b.ins().iadd(z[k.dest.0], o);
                let row = l.atom_of(k.row)?[0];
                let x = l.scalar(k.sum.1)?;
                let x = l.b.ins().ishl_imm_u(x, 3);
                let sum = l.b.ins().iadd(z[k.sum.0], x);
                for (v, off) in [(coef, 0), (dest, 8), (row, 16), (sum, 24)] {
                    l.b.ins().store(flags, v, at, off);
                }
                Ok(Vec::new())
            })?;
            l.b.ins().call(kernel, &[n, t, buf, len]);
            Ok(Vec::new())
        })?;
        Ok(())
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
        let pairs = pairable(index, plan, split);
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
            // The slots added to once per inner iteration, in registers.
            let mut addrs = Vec::new();
            let mut regs = Vec::new();
            for add in plan.adds.iter().filter(|a| a.share == Share::PerInner) {
                for snap in &snaps {
                    l.restore(snap);
                    let k = l.scalar(&add.index)?;
                    let p = l.element(z[add.slot], k, 8);
                    addrs.push(p);
                    regs.push(l.b.ins().load(types::F64, flags, p, 0));
                }
            }
            let step = Step {
                z,
                index,
                plan,
                split,
                snaps: &snaps,
                width,
            };
            // Two points at a time in `f64x2` lanes where the terms allow,
            // then the last point alone when n is odd; else one at a time.
            let regs = if pairs {
                let half = l.b.ins().sshr_imm_u(n, 1);
                // Under the relaxed contract each slot in a register sums
                // its points two at a time in lanes, the even and the odd
                // points apart from −0.0, then adds lane 0 and lane 1 to
                // its value (Note [Interchanged folds], relaxed).
                let lanes = l.relaxed;
                let init = if lanes {
                    let minus_zero = l.b.ins().f64const(-0.0);
                    let zeros = l.b.ins().splat(types::F64X2, minus_zero);
                    vec![zeros; regs.len()]
                } else {
                    regs.clone()
                };
                let sums = l.counted_loop(half, &init, |l, h, sums| {
                    let k = l.b.ins().ishl_imm_u(h, 1);
                    l.point_pair(&step, k, sums, lanes)
                })?;
                let regs = if lanes {
                    regs.iter()
                        .zip(&sums)
                        .map(|(r, v)| {
                            let even = l.b.ins().extractlane(*v, 0);
                            let odd = l.b.ins().extractlane(*v, 1);
                            let r = l.b.ins().fadd(*r, even);
                            l.b.ins().fadd(r, odd)
                        })
                        .collect()
                } else {
                    sums
                };
                let odd = l.b.ins().band_imm_u(n, 1);
                let last = l.b.ins().iadd_imm_s(n, -1);
                l.counted_loop(odd, &regs, |l, _, regs| l.point(&step, last, regs))?
            } else {
                l.counted_loop(n, &regs, |l, i, regs| l.point(&step, i, regs))?
            };
            for (p, v) in addrs.iter().zip(&regs) {
                l.b.ins().store(flags, *v, *p, 0);
            }
            Ok(Vec::new())
        })?;
        Ok(())
    }

    /// Point `i` of a block: the outer terms, then for each inner
    /// iteration of the block in order its terms and `addAt`s; `regs` are
    /// the slots kept in registers (per `addAt` sharing a slot per inner
    /// iteration, per iteration of the block).
    fn point(&mut self, step: &Step<'_, '_>, i: Value, regs: &[Value]) -> R<Vals> {
        let flags = MemFlagsData::trusted();
        self.env.insert(step.index.clone(), vec![i]);
        for t in &step.plan.outer_terms {
            self.bind(t)?;
        }
        let mut next = regs.to_vec();
        // Per add sharing one slot per point: (address, sum).
        let mut shared: Vec<Option<(Value, Value)>> = vec![None; step.plan.adds.len()];
        for (q, snap) in step.snaps.iter().enumerate() {
            self.restore(snap);
            for t in &step.split.per_point {
                self.bind(t)?;
            }
            let mut r = 0;
            for (k, add) in step.plan.adds.iter().enumerate() {
                let v = self.scalar(&add.value)?;
                match add.share {
                    Share::None => {
                        let at = self.scalar(&add.index)?;
                        let p = self.element(step.z[add.slot], at, 8);
                        let old = self.b.ins().load(types::F64, flags, p, 0);
                        let new = self.b.ins().fadd(old, v);
                        self.b.ins().store(flags, new, p, 0);
                    }
                    Share::PerOuter => {
                        let (p, old) = match shared[k] {
                            Some(x) => x,
                            None => {
                                let at = self.scalar(&add.index)?;
                                let p = self.element(step.z[add.slot], at, 8);
                                (p, self.b.ins().load(types::F64, flags, p, 0))
                            }
                        };
                        shared[k] = Some((p, self.b.ins().fadd(old, v)));
                    }
                    Share::PerInner => {
                        let at = r * step.width + q;
                        next[at] = self.b.ins().fadd(next[at], v);
                        r += 1;
                    }
                }
            }
        }
        for (p, sum) in shared.into_iter().flatten() {
            self.b.ins().store(flags, sum, p, 0);
        }
        Ok(next)
    }

    /// Points `k` and `k + 1` of a block in the lanes of `f64x2`s: each
    /// term the scalar IEEE operation per lane, an `addAt` at a slot per
    /// point a load, addition and store of both, and a slot kept in a
    /// register added to lane 0 then lane 1 (the points in order) — or,
    /// with `lanes`, `regs` are the slots' partial sums in lanes, and
    /// each adds its two points lane by lane.
    fn point_pair(
        &mut self,
        step: &Step<'_, '_>,
        k: Value,
        regs: &[Value],
        lanes: bool,
    ) -> R<Vals> {
        let flags = MemFlagsData::new().with_notrap();
        let mut vals: HashMap<Name, Pair> = HashMap::default();
        vals.insert(step.index.clone(), Pair::Index(k));
        self.pair_terms(&step.plan.outer_terms, &mut vals)?;
        let mut next = regs.to_vec();
        let mut shared: Vec<Option<(Value, Value)>> = vec![None; step.plan.adds.len()];
        for (q, snap) in step.snaps.iter().enumerate() {
            self.restore(snap);
            self.pair_terms(&step.split.per_point, &mut vals)?;
            let mut r = 0;
            for (a, add) in step.plan.adds.iter().enumerate() {
                let v = self.pair_value(&vals, &add.value)?;
                match add.share {
                    Share::None | Share::PerOuter => {
                        let at = match add.index.var().and_then(|x| vals.get(x)) {
                            Some(Pair::Index(at)) => *at,
                            _ => return Err(compile_error("a paired addAt not at a point")),
                        };
                        let (p, old) = match shared[a] {
                            Some(x) => x,
                            None => {
                                let p = self.element(step.z[add.slot], at, 8);
                                (p, self.b.ins().load(types::F64X2, flags, p, 0))
                            }
                        };
                        let new = self.b.ins().fadd(old, v);
                        if add.share == Share::None {
                            self.b.ins().store(flags, new, p, 0);
                        } else {
                            shared[a] = Some((p, new));
                        }
                    }
                    Share::PerInner if lanes => {
                        let at = r * step.width + q;
                        next[at] = self.b.ins().fadd(next[at], v);
                        r += 1;
                    }
                    Share::PerInner => {
                        let at = r * step.width + q;
                        let first = self.b.ins().extractlane(v, 0);
                        let second = self.b.ins().extractlane(v, 1);
                        let sum = self.b.ins().fadd(next[at], first);
                        next[at] = self.b.ins().fadd(sum, second);
                        r += 1;
                    }
                }
            }
        }
        for (p, sum) in shared.into_iter().flatten() {
            self.b.ins().store(flags, sum, p, 0);
        }
        Ok(next)
    }

    /// `terms` for two points (see [`pairable`]), into `vals`.
    fn pair_terms(&mut self, terms: &[&Binding], vals: &mut HashMap<Name, Pair>) -> R<()> {
        let flags = MemFlagsData::new().with_notrap();
        for b in terms {
            let Rhs::Prim(op, args) = &b.rhs else {
                return Err(compile_error("a paired term that is not a primitive"));
            };
            let v = match op {
                Prim::Get => {
                    let at = match args[1].var().and_then(|x| vals.get(x)) {
                        Some(Pair::Index(at)) => *at,
                        _ => return Err(compile_error("a paired read not at a point")),
                    };
                    let base = self.atom(&args[0])?[0];
                    let p = self.element(base, at, 8);
                    Pair::Lanes(self.b.ins().load(types::F64X2, flags, p, 0))
                }
                Prim::Add if b.ty == Type::Index => {
                    let (x, c) = match args[0].var().and_then(|x| vals.get(x)) {
                        Some(Pair::Index(x)) => (*x, &args[1]),
                        _ => match args[1].var().and_then(|x| vals.get(x)) {
                            Some(Pair::Index(x)) => (*x, &args[0]),
                            _ => return Err(compile_error("a paired index not at a point")),
                        },
                    };
                    let c = self.scalar(c)?;
                    Pair::Index(self.b.ins().iadd(x, c))
                }
                Prim::Neg => {
                    let x = self.pair_value(vals, &args[0])?;
                    Pair::Lanes(self.b.ins().fneg(x))
                }
                Prim::Add | Prim::Sub | Prim::Mul => {
                    let x = self.pair_value(vals, &args[0])?;
                    let y = self.pair_value(vals, &args[1])?;
                    Pair::Lanes(match op {
                        Prim::Add => self.b.ins().fadd(x, y),
                        Prim::Sub => self.b.ins().fsub(x, y),
                        _ => self.b.ins().fmul(x, y),
                    })
                }
                _ => return Err(compile_error("a paired term that is not arithmetic")),
            };
            vals.insert(b.name.clone(), v);
        }
        Ok(())
    }

    /// A Double of a paired term: its lanes, or a value of one inner
    /// iteration or bound outside in both.
    fn pair_value(&mut self, vals: &HashMap<Name, Pair>, a: &Atom) -> R<Value> {
        match a.var().and_then(|x| vals.get(x)) {
            Some(Pair::Lanes(v)) => Ok(*v),
            Some(Pair::Index(_)) => Err(compile_error("an index as a paired Double")),
            None => {
                let x = self.scalar(a)?;
                Ok(self.b.ins().splat(types::F64X2, x))
            }
        }
    }
}

/// What every point of a block shares.
struct Step<'a, 'b> {
    z: &'a [Value],
    index: &'a Name,
    plan: &'a Plan<'b>,
    split: &'a Split<'b>,
    snaps: &'a [Vec<(Name, Vals)>],
    width: usize,
}

/// A term of two points: its `f64x2` lanes, or an index (the first
/// point's; the second's is one more).
#[derive(Clone, Copy)]
enum Pair {
    Lanes(Value),
    Index(Value),
}

/// Whether the terms of two points can run in lanes: every outer term and
/// every term of the inner body that depends on the point is a read of
/// Doubles at the point's index (`i`, `c + i`, `o[s] + i`), such an index,
/// or Double `+ - *` or negation; every `addAt` that adds at the point's
/// index adds at such an index.
fn pairable(index: &Name, plan: &Plan<'_>, split: &Split<'_>) -> bool {
    let mut lanes: HashSet<&Name> = HashSet::default();
    let mut at: HashSet<&Name> = HashSet::default();
    at.insert(index);
    let point = |a: &Atom, at: &HashSet<&Name>| a.var().is_some_and(|x| at.contains(x));
    for b in plan.outer_terms.iter().chain(&split.per_point) {
        let Rhs::Prim(op, args) = &b.rhs else {
            return false;
        };
        let double = |a: &Atom| *a.ty() == Type::Double && !point(a, &at);
        let ok = match op {
            Prim::Get => point(&args[1], &at) && b.ty == Type::Double,
            Prim::Add if b.ty == Type::Index => {
                let (x, c) = (point(&args[0], &at), point(&args[1], &at));
                if x != c {
                    at.insert(&b.name);
                    continue;
                }
                false
            }
            Prim::Add | Prim::Sub | Prim::Mul | Prim::Neg => {
                b.ty == Type::Double && args.iter().all(double)
            }
            _ => false,
        };
        if !ok {
            return false;
        }
        lanes.insert(&b.name);
    }
    plan.adds.iter().all(|a| match a.share {
        Share::PerInner => true,
        _ => point(&a.index, &at),
    })
}
