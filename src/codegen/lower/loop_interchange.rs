//! Lowering of interchanged loop nests (Note [Interchange] in
//! `codegen/passes/loop_interchange.rs`): the frame (the counts' ⊥s, the
//! guard that every read is in bounds, and the nest as written when it
//! fails), and the i-major fast paths of a `build` of sums and of a
//! transposed `build` of `build`s.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value, types};

use super::{Lower, R, Vals, args_of, array_elem, offset};
use crate::anf::{Atom, Binding, Block as AnfBlock, Rhs};
use crate::codegen::abi::{self, ROW_TERMS};
use crate::codegen::layout::{SLOT, elem_bytes};
use crate::codegen::passes::{self, loop_interchange};
use crate::ir::{Name, Prim, Type};

/// The row kernel's helpers (Note [Row kernels]): one row, and two
/// rows that read the same rows; fused (relaxed, FMA3), and exact.
const ROW_SUMS: &str = "fsmooth_row_sums";
const ROW_SUMS2: &str = "fsmooth_row_sums2";
const ROW_SUMS_EXACT: &str = "fsmooth_row_sums_exact";
const ROW_SUMS2_EXACT: &str = "fsmooth_row_sums2_exact";

/// The elements of an interchanged sum's block (Note [Interchange],
/// blocks): four `f64x2` sums in registers.
const BLOCK: usize = 8;

/// A row of sums run in blocks with another (Note [Interchange], pairs of
/// rows): its elements, and the values of its `pre` (none for a row
/// alone).
type RowSums<'a> = (Value, Option<&'a [(Name, Vals)]>);

/// The values of i a block's sums take in registers before they are
/// stored (Note [Interchange], blocks): the rows a tile reads stay in
/// the first-level cache and TLB from one block to the next.
const TILE: usize = 32;

impl Lower<'_, '_> {
    /// `binds` bound inside an interchanged nest's guard (Note
    /// [Interchange]): their reads are in bounds.
    fn bind_trusted<'b>(&mut self, binds: impl IntoIterator<Item = &'b Binding>) -> R<()> {
        self.trusted += 1;
        let r = binds.into_iter().try_for_each(|b| self.bind(b));
        self.trusted -= 1;
        r
    }

    /// The frame of an interchanged nest `build n (fun j -> outer)` (Note
    /// [Interchange]): E-Build-Bot of `n`, then, when `n > 0`, the inner
    /// loop's count `m` tested (⊥ with `inner_code` when negative), then
    /// the guard over `reads`. When it holds, `fast` builds the array
    /// (its buffer returned) with the loops interchanged; when not, the
    /// nest runs as written (cold) and stops with the evaluator's ⊥.
    pub(super) fn nest(
        &mut self,
        (n_atom, j, outer, ty): (&Atom, &Name, &AnfBlock, &Type),
        m_atom: &Atom,
        inner_code: i64,
        reads: &[loop_interchange::Read],
        fast: impl FnOnce(&mut Self, Value, Value) -> R<Value>,
    ) -> R<Vals> {
        let n = self.scalar(n_atom)?;
        self.check_count_of(n_atom, n, abi::NEGATIVE_SIZE);
        let m = self.scalar(m_atom)?;
        let some = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, n, 0);
        let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, m, 0);
        let bad = self.b.ins().band(some, neg);
        let zero = self.iconst(0);
        // At the inner loop's site, as the nest as written would fail.
        let was = match outer.binds.first() {
            Some(inner) => self.enter_site(&inner.name),
            None => self.here,
        };
        self.fail_if(bad, inner_code, m, zero);
        let ok = self.nest_guard(reads, n, m)?;
        // E-Limit of the nest and of its rows (Note [Native limits]): past
        // it, the nest runs as written and stops there.
        let ok = self.and_fits(ok, n);
        let ok = self.and_fits(ok, m);
        let (fast_b, slow, join) = self.diamond(ok, &[types::I64]);
        self.b.switch_to_block(fast_b);
        // The inner loops' iterations, all at once (Note [Native limits]):
        // n × m, at most 2⁶³ − 1 (m ≥ 0 here when n > 0), at their site.
        self.charge_product(n, m);
        self.here = was;
        // With two divisions, a divisor of zero in the interchanged order
        // may be the other division's (Note [Failure sites]): the nest
        // runs again as written, which stops at the evaluator's ⊥ (the
        // fast path only wrote its own buffer).
        let rerun = (passes::divisions(outer) > 1).then(|| {
            let r = self.b.create_block();
            for _ in 0..3 {
                self.b.append_block_param(r, types::I64);
            }
            self.b.set_cold_block(r);
            std::mem::replace(&mut self.fail, r)
        });
        // The fast path allocates first: a scratch array's buffer is its.
        let out = fast(self, n, m);
        let rerun = rerun.map(|fail| std::mem::replace(&mut self.fail, fail));
        self.b.ins().jump(join, &args_of(&[out?]));
        if let Some(r) = rerun {
            self.b.switch_to_block(r);
            // The fast path's iterations given back: the nest as written
            // charges its own (Note [Native limits]).
            if self.limits {
                let total = self.count_product(n, m);
                self.refund(total);
            }
            self.b.ins().jump(slow, &[]);
        }
        self.b.switch_to_block(slow);
        self.b.set_cold_block(slow);
        let was = std::mem::replace(&mut self.cold, true);
        let built = self.build(n_atom, j, outer, ty, None);
        self.cold = was;
        let built = built?;
        self.b.ins().jump(join, &args_of(&built[..1]));
        self.b.switch_to_block(join);
        let p = self.b.block_params(join)[0];
        Ok(vec![p, n])
    }

    /// The guard of an interchanged nest (Note [Interchange]): every read
    /// in bounds for every `i < m` and `j < n` (trivially, with no
    /// iteration).
    fn nest_guard(&mut self, reads: &[loop_interchange::Read], n: Value, m: Value) -> R<Value> {
        let zero = self.iconst(0);
        // The guard: every read in bounds (trivially, with no element or
        // no term).
        let mut ok = self.b.ins().iconst(types::I8, 1);
        let mut rows: Vec<&loop_interchange::Row> = Vec::new();
        for read in reads {
            let cond = match read {
                loop_interchange::Read::Outer(a) => {
                    let len = self.length_of(a)?;
                    self.b.ins().icmp(IntCC::SignedLessThanOrEqual, m, len)
                }
                loop_interchange::Read::Inner(a) => {
                    let len = self.length_of(a)?;
                    self.b.ins().icmp(IntCC::SignedLessThanOrEqual, n, len)
                }
                loop_interchange::Read::Const(a, c) => {
                    let len = self.length_of(a)?;
                    let c = self.scalar(c)?;
                    self.b.ins().icmp(IntCC::UnsignedLessThan, c, len)
                }
                loop_interchange::Read::Row(row) => {
                    if !rows.contains(&row) {
                        rows.push(row);
                    }
                    continue;
                }
            };
            ok = self.b.ins().band(ok, cond);
        }
        let n0 = self.b.ins().icmp_imm_s(IntCC::Equal, n, 0);
        let m0 = self.b.ins().icmp_imm_s(IntCC::Equal, m, 0);
        let empty = self.b.ins().bor(n0, m0);
        let mut reads = ok;
        if !rows.is_empty() {
            // Every row in `a[i]`, i < m, at least n long — its descriptors
            // read only when there is an element and a term, the reads of
            // the arrays themselves are in bounds and each row's array has
            // m elements (a review found n = 0 with m past `a`'s end
            // reading, and faulting on, descriptors beyond it).
            let flags = MemFlagsData::trusted();
            let mut arrays = Vec::new();
            for row in &rows {
                let len = self.length_of(&row.array)?;
                let fits = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, m, len);
                reads = self.b.ins().band(reads, fits);
                let a = self.atom_of(&row.array)?;
                arrays.push((a[0], row.stride as i64 * SLOT, (row.at as i64 + 1) * SLOT));
            }
            let some = self.b.ins().bxor_imm_u(empty, 1);
            let scan = self.b.ins().band(some, reads);
            let count = self.b.ins().select(scan, m, zero);
            reads = self.counted_loop(count, &[reads], |l, i, st| {
                let mut all = st[0];
                for &(p, stride, len_at) in &arrays {
                    let d = l.element(p, i, stride);
                    let len = l.b.ins().load(types::I64, flags, d, offset(len_at)?);
                    let fits = l.b.ins().icmp(IntCC::SignedLessThanOrEqual, n, len);
                    all = l.b.ins().band(all, fits);
                }
                Ok(vec![all])
            })?[0];
        }
        Ok(self.b.ins().bor(empty, reads))
    }

    /// The fast path of a `build` of sums with its loops interchanged (Note
    /// [Interchange] in `codegen/passes/loop_interchange.rs`), inside
    /// [`nest`]'s guard: the sums of `n` elements over `m` terms, i-major.
    ///
    /// [`nest`]: Self::nest
    pub(super) fn sums_i_major(
        &mut self,
        n: Value,
        m: Value,
        (x, j): (&Name, &Name),
        plan: &loop_interchange::Plan<'_>,
    ) -> R<Value> {
        let zero = self.iconst(0);
        let out = self.alloc(n, 8)?;
        let z = self.scalar(plan.z)?;
        self.fill(out, n, z)?;
        // The terms that do not depend on j, once per i (only when there
        // is an element: a division by zero among them would otherwise be
        // a ⊥ the nest does not have); the others per element, two at a
        // time when they are arithmetic on Doubles and reads at j of
        // arrays of Doubles (Note [Interchange], pairs).
        let varying = loop_interchange::varying(plan.terms, j);
        if let Some(kernel) = self.row_kernel(plan, &varying) {
            let none = HashSet::default();
            self.row_sums(
                n,
                (zero, m),
                (plan, &varying, &none),
                kernel,
                &[(out, None)],
            )?;
            return Ok(out);
        }
        let pairs = self.sum_pairs(plan, &varying);
        // Whole blocks of BLOCK elements first, each sum in a register
        // over all i (Note [Interchange], blocks); the rest, from `start`,
        // as below.
        let start = if pairs && loop_interchange::blocks(plan.terms, &varying) {
            if !self.cold && !self.blocked.contains(x) {
                self.blocked.push(x.clone());
            }
            self.sum_blocks(n, (zero, m), j, plan, &varying, out)?
        } else {
            zero
        };
        self.sums_rest(n, m, j, plan, (&varying, pairs), (start, out))?;
        Ok(out)
    }

    /// The coefficient and the row of an interchanged sum whose JIT code
    /// calls the row kernel (Note [Row kernels] in
    /// `codegen/backend/kernels.rs`; fused under the relaxed contract,
    /// exact under the strict one): a host with AVX2 and FMA3, a module
    /// that has the kernels, not the nest as written; the nest
    /// runs in blocks ([`blocks`]: no division, no ⊥ among the terms that
    /// do not depend on j); and the terms that depend on j are just
    /// `g = r[j]` and the added `g · c` (or `c · g`), with the row `r`, an
    /// array built, and the Double `c` not depending on j.
    ///
    /// [`blocks`]: loop_interchange::blocks
    pub(super) fn row_kernel<'p>(
        &self,
        plan: &loop_interchange::Plan<'p>,
        varying: &HashSet<Name>,
    ) -> Option<(&'p Atom, &'p Name)> {
        if !self.avx2 || self.cold || self.plain || !self.imports.has(ROW_SUMS_EXACT) {
            return None;
        }
        if !loop_interchange::blocks(plan.terms, varying) {
            return None;
        }
        let mut moving = plan.terms.iter().filter(|b| varying.contains(&b.name));
        let (Some(read), Some(product), None) = (moving.next(), moving.next(), moving.next())
        else {
            return None;
        };
        let Rhs::Prim(Prim::Get, args) = &read.rhs else {
            return None;
        };
        let row = args[0].var()?;
        let fixed = |a: &Atom| a.var().is_none_or(|x| !varying.contains(x));
        if read.ty != Type::Double || !fixed(&args[0]) || self.fused.contains_key(row) {
            return None;
        }
        let Rhs::Prim(Prim::Mul, args) = &product.rhs else {
            return None;
        };
        if plan.term.var() != Some(&product.name) {
            return None;
        }
        let coef = match (args[0].var(), args[1].var()) {
            (Some(x), _) if *x == read.name => &args[1],
            (_, Some(y)) if *y == read.name => &args[0],
            _ => return None,
        };
        (*coef.ty() == Type::Double && fixed(coef)).then_some((coef, row))
    }

    /// Terms `from .. to` of one interchanged sum, or of two rows' sums
    /// that read the same rows (Note [Interchange], pairs of rows), by the
    /// row kernel (Note [Row kernels]): their elements hold the terms
    /// before `from`; when there is an element, per chunk of up to
    /// [`ROW_TERMS`] values of i in order, the terms that do not depend on
    /// j (those in `own`, which depend on the row, per row, in the row's
    /// `pre`), then each row's `c` and the shared `r` into a buffer on the
    /// stack, then one call that adds the chunk's terms to every element.
    fn row_sums(
        &mut self,
        n: Value,
        (from, to): (Value, Value),
        (plan, varying, own): (&loop_interchange::Plan<'_>, &HashSet<Name>, &HashSet<Name>),
        (coef, row): (&Atom, &Name),
        rows: &[RowSums<'_>],
    ) -> R<()> {
        let (helper, entry) = match (rows.len(), self.fma) {
            (1, true) => (ROW_SUMS, 16i64),
            (1, false) => (ROW_SUMS_EXACT, 16),
            (_, true) => (ROW_SUMS2, 24),
            (_, false) => (ROW_SUMS2_EXACT, 24),
        };
        let kernel = self.imports.get(helper)?;
        let flags = MemFlagsData::trusted();
        let buf = self.stack_buffer(entry as usize * ROW_TERMS)?;
        // The terms that do not depend on j only when there is an element
        // (Note [Interchange], terms once per i).
        let zero = self.iconst(0);
        let some = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, n, 0);
        let span = self.b.ins().isub(to, from);
        let span = self.b.ins().smax(span, zero);
        let count = self.b.ins().select(some, span, zero);
        let shift = ROW_TERMS.trailing_zeros() as i64;
        let chunks = self.chunk_count(count, ROW_TERMS);
        let nonj = |b: &&Binding| !varying.contains(&b.name);
        self.counted_loop(chunks, &[], |l, t, _| {
            let i0 = l.b.ins().ishl_imm_u(t, shift);
            let left = l.b.ins().isub(count, i0);
            let most = l.iconst(ROW_TERMS as i64);
            let len = l.b.ins().smin(left, most);
            let i0 = l.b.ins().iadd(from, i0);
            l.counted_loop(len, &[], |l, di, _| {
                let i = l.b.ins().iadd(i0, di);
                l.env.insert(plan.index.clone(), vec![i]);
                l.bind_trusted(
                    plan.terms
                        .iter()
                        .filter(nonj)
                        .filter(|b| !own.contains(&b.name)),
                )?;
                let at = l.b.ins().imul_imm_s(di, entry);
                let at = l.b.ins().iadd(buf, at);
                for (k, (_, lane)) in rows.iter().enumerate() {
                    if let Some(lane) = lane {
                        l.restore(lane);
                    }
                    l.bind_trusted(
                        plan.terms
                            .iter()
                            .filter(nonj)
                            .filter(|b| own.contains(&b.name)),
                    )?;
                    let c = l.scalar(coef)?;
                    l.b.ins().store(flags, c, at, 8 * k as i32);
                }
                let r = l.atom_of(row)?[0];
                l.b.ins().store(flags, r, at, 8 * rows.len() as i32);
                Ok(Vec::new())
            })?;
            let mut args: Vec<Value> = rows.iter().map(|(out, _)| *out).collect();
            args.extend([n, buf, len]);
            l.b.ins().call(kernel, &args);
            Ok(Vec::new())
        })?;
        Ok(())
    }

    /// Whether an interchanged sum's elements run two at a time (Note
    /// [Interchange], pairs): its terms pair, and no term that depends on
    /// j reads a fused array.
    fn sum_pairs(&self, plan: &loop_interchange::Plan<'_>, varying: &HashSet<Name>) -> bool {
        loop_interchange::pairs(plan.terms, plan.term, varying, false)
            && plan.terms.iter().all(|b| match &b.rhs {
                Rhs::Prim(Prim::Get, args) if varying.contains(&b.name) => {
                    args[0].var().is_some_and(|a| !self.fused.contains_key(a))
                }
                _ => true,
            })
    }

    /// The elements of an interchanged sum from `start` on, over all `m`
    /// terms: per i, its terms that do not depend on j once, then the
    /// elements two at a time (`pairs`) and the last alone, or one at a
    /// time.
    fn sums_rest(
        &mut self,
        n: Value,
        m: Value,
        j: &Name,
        plan: &loop_interchange::Plan<'_>,
        (varying, pairs): (&HashSet<Name>, bool),
        (start, out): (Value, Value),
    ) -> R<()> {
        let zero = self.iconst(0);
        let flags = MemFlagsData::trusted();
        let left = self.b.ins().isub(n, start);
        let some = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, left, 0);
        let rows = self.b.ins().select(some, m, zero);
        self.counted_loop(rows, &[], |l, i, _| {
            l.env.insert(plan.index.clone(), vec![i]);
            l.bind_trusted(plan.terms.iter().filter(|b| !varying.contains(&b.name)))?;
            let each = |l: &mut Self, k: Value| -> R<()> {
                l.env.insert(j.clone(), vec![k]);
                l.bind_trusted(plan.terms.iter().filter(|b| varying.contains(&b.name)))?;
                let e = l.scalar(plan.term)?;
                let at = l.element(out, k, 8);
                let old = l.b.ins().load(types::F64, flags, at, 0);
                let sum = l.b.ins().fadd(old, e);
                l.b.ins().store(flags, sum, at, 0);
                Ok(())
            };
            if !pairs {
                l.counted_loop(n, &[], |l, k, _| {
                    each(l, k)?;
                    Ok(Vec::new())
                })?;
                return Ok(Vec::new());
            }
            let half = l.b.ins().sshr_imm_u(left, 1);
            l.counted_loop(half, &[], |l, p, _| {
                let k = l.b.ins().ishl_imm_u(p, 1);
                let k = l.b.ins().iadd(start, k);
                l.pair(plan.terms, plan.term, varying, j, k, (out, true))?;
                Ok(Vec::new())
            })?;
            // The last element when n - start is odd.
            let odd = l.b.ins().band_imm_u(left, 1);
            let (tail, done) = (l.b.create_block(), l.b.create_block());
            l.b.ins().brif(odd, tail, &[], done, &[]);
            l.b.switch_to_block(tail);
            let k = l.b.ins().iadd_imm_s(n, -1);
            each(l, k)?;
            l.b.ins().jump(done, &[]);
            l.b.switch_to_block(done);
            Ok(Vec::new())
        })?;
        Ok(())
    }

    /// The whole blocks of [`BLOCK`] elements of an interchanged `build` of
    /// sums (Note [Interchange], blocks), their elements already holding
    /// the terms before `from`: per tile of [`TILE`] values of i in `from ..
    /// m` and per block, the sums are loaded into `f64x2` registers, every
    /// i of the tile adds its terms to them in order (the terms that do not
    /// depend on j again per block, [`blocks`]), and they are stored.
    /// Returns where the elements left start.
    ///
    /// [`blocks`]: loop_interchange::blocks
    fn sum_blocks(
        &mut self,
        n: Value,
        (from, m): (Value, Value),
        j: &Name,
        plan: &loop_interchange::Plan<'_>,
        varying: &HashSet<Name>,
        out: Value,
    ) -> R<Value> {
        let none = HashSet::default();
        self.sum_blocks_of(n, (from, m), (j, plan, varying), &[(out, None)], &none)
    }

    /// [`sum_blocks`] of one row, or of two rows together (Note
    /// [Interchange], pairs of rows): `rows` are each row's elements and
    /// the values of its `pre` (none for one row), `own` the terms that
    /// depend on the row, computed per row; the others, once for both.
    ///
    /// [`sum_blocks`]: Self::sum_blocks
    fn sum_blocks_of(
        &mut self,
        n: Value,
        (from, m): (Value, Value),
        (j, plan, varying): (&Name, &loop_interchange::Plan<'_>, &HashSet<Name>),
        rows: &[RowSums<'_>],
        own: &HashSet<Name>,
    ) -> R<Value> {
        let flags = MemFlagsData::new().with_notrap();
        let count = self.b.ins().sshr_imm_u(n, BLOCK.trailing_zeros() as i64);
        let shared: HashSet<Name> = varying.difference(own).cloned().collect();
        let mine: HashSet<Name> = varying.intersection(own).cloned().collect();
        let half = BLOCK / 2;
        // ⌈(m − from) / TILE⌉ without overflow (m near 2⁶³ with the limits
        // off; from ≥ 0); none when m ≤ from.
        let span = self.b.ins().isub(m, from);
        let tiles = self.chunk_count(span, TILE);
        self.counted_loop(tiles, &[], |l, t, _| {
            let i0 = l.b.ins().ishl_imm_u(t, TILE.trailing_zeros() as i64);
            let i0 = l.b.ins().iadd(from, i0);
            let rest = l.b.ins().isub(m, i0);
            let tile = l.iconst(TILE as i64);
            let len = l.b.ins().smin(rest, tile);
            l.counted_loop(count, &[], |l, b, _| {
                let k0 = l.b.ins().ishl_imm_u(b, BLOCK.trailing_zeros() as i64);
                let mut sums = Vec::with_capacity(half * rows.len());
                for (out, _) in rows {
                    for p in 0..half {
                        let k = l.b.ins().iadd_imm_s(k0, 2 * p as i64);
                        let at = l.element(*out, k, 8);
                        sums.push(l.b.ins().load(types::F64X2, flags, at, 0));
                    }
                }
                let sums = l.counted_loop(len, &sums, |l, di, sums| {
                    let i = l.b.ins().iadd(i0, di);
                    l.env.insert(plan.index.clone(), vec![i]);
                    let nonj = |b: &&Binding| !varying.contains(&b.name);
                    l.bind_trusted(
                        plan.terms
                            .iter()
                            .filter(nonj)
                            .filter(|b| !own.contains(&b.name)),
                    )?;
                    // Each row's own terms that do not depend on j.
                    let mut snaps = Vec::with_capacity(rows.len());
                    for (_, lane) in rows {
                        if let Some(lane) = lane {
                            l.restore(lane);
                        }
                        let mine_nonj: Vec<&Binding> = plan
                            .terms
                            .iter()
                            .filter(nonj)
                            .filter(|b| own.contains(&b.name))
                            .collect();
                        l.bind_trusted(mine_nonj.iter().copied())?;
                        let snap: Vec<(Name, Vals)> = mine_nonj
                            .iter()
                            .map(|b| (b.name.clone(), l.env[&b.name].clone()))
                            .collect();
                        snaps.push(snap);
                    }
                    let mut next = sums.to_vec();
                    for p in 0..half {
                        let k = l.b.ins().iadd_imm_s(k0, 2 * p as i64);
                        let mut common = HashMap::default();
                        l.lanes_into(plan.terms, &shared, j, k, &mut common)?;
                        for (r, (_, lane)) in rows.iter().enumerate() {
                            if let Some(lane) = lane {
                                l.restore(lane);
                            }
                            l.restore(&snaps[r]);
                            let mut vals = common.clone();
                            l.lanes_into(plan.terms, &mine, j, k, &mut vals)?;
                            let e = l.vector(&vals, plan.term)?;
                            let at = r * half + p;
                            next[at] = l.b.ins().fadd(sums[at], e);
                        }
                    }
                    Ok(next)
                })?;
                for (r, (out, _)) in rows.iter().enumerate() {
                    for p in 0..half {
                        let k = l.b.ins().iadd_imm_s(k0, 2 * p as i64);
                        let at = l.element(*out, k, 8);
                        l.b.ins().store(flags, sums[r * half + p], at, 0);
                    }
                }
                Ok(Vec::new())
            })?;
            Ok(Vec::new())
        })?;
        Ok(self
            .b
            .ins()
            .ishl_imm_u(count, BLOCK.trailing_zeros() as i64))
    }

    /// The plan of `build d (fun r -> body)` over `index` to run two rows
    /// at a time (Note [Interchange], pairs of rows): not in cold code,
    /// nothing on a scratch stack, `pre` not fused, and each row's nest
    /// run in blocks.
    pub(super) fn rows_plan<'b>(
        &self,
        index: &Name,
        body: &'b AnfBlock,
    ) -> Option<loop_interchange::Rows<'b>> {
        if self.cold || self.plain || self.scratch.loops.contains_key(index) {
            return None;
        }
        let rows = loop_interchange::rows(body)?;
        let built = |a: &Name| !self.fused.contains_key(a) && !self.plan.fused.contains_key(a);
        let ok = rows.pre.iter().all(|b| built(&b.name))
            && rows.plan.reads.iter().all(|r| match r {
                loop_interchange::Read::Row(row) => built(&row.array),
                _ => true,
            });
        let varying = loop_interchange::varying(rows.plan.terms, rows.j);
        // Rows the row kernel sums pair when they read the same rows
        // (Note [Row kernels], pairs): the row neither bound in `pre` nor
        // computed from it (a review found `let v = a[r]` in `pre` paired,
        // and row r summing row r + 1's `v`).
        let shared = match self.row_kernel(&rows.plan, &varying) {
            Some((_, row)) => {
                let names = row_names(index, &rows);
                !names.contains(row)
                    && !loop_interchange::depending(rows.plan.terms, &names).contains(row)
            }
            None => true,
        };
        (ok && shared
            && self.sum_pairs(&rows.plan, &varying)
            && loop_interchange::blocks(rows.plan.terms, &varying))
        .then_some(rows)
    }

    /// `build d (fun r -> body)` into `p` (its `d` rows allocated), rows r
    /// and r + 1 together (Note [Interchange], pairs of rows): `pre` of
    /// both, their nests' counts, guards and limits with a bail exit (any
    /// ⊥ or failing guard runs row r alone as written), then both rows'
    /// blocks over the terms they both have, each row's remaining terms
    /// and elements, and their descriptors stored. The last row when `d`
    /// is odd runs as written.
    pub(super) fn paired_rows(
        &mut self,
        d: Value,
        p: Value,
        (index, body, ty): (&Name, &AnfBlock, &Type),
        rows: &loop_interchange::Rows<'_>,
    ) -> R<()> {
        let desc = 2 * SLOT;
        let el = array_elem(ty)?.clone();
        let flags = MemFlagsData::trusted();
        let plan = &rows.plan;
        let varying = loop_interchange::varying(plan.terms, rows.j);
        let own = loop_interchange::depending(plan.terms, &row_names(index, rows));
        let (head, exit) = self.loop_entry(d, &[]);
        let r = self.b.block_params(head)[0];
        let r1 = self.b.ins().iadd_imm_s(r, 1);
        let two = self.b.ins().icmp(IntCC::SignedLessThan, r1, d);
        let (both, one) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(two, both, &[], one, &[]);
        self.b.switch_to_block(both);
        // pre[r] as the row would start ...
        self.env.insert(index.clone(), vec![r]);
        let lane0 = self.lane((index, r), &rows.pre)?;
        // ... then pre[r + 1], the counts and the guards, any ⊥ or failing
        // guard abandoning the pair.
        let bail = self.b.create_block();
        for _ in 0..3 {
            self.b.append_block_param(bail, types::I64);
        }
        self.b.set_cold_block(bail);
        let exit_fail = std::mem::replace(&mut self.fail, bail);
        let checked = (|| -> R<_> {
            self.env.insert(index.clone(), vec![r1]);
            let lane1 = self.lane((index, r1), &rows.pre)?;
            let zero = self.iconst(0);
            self.restore(&lane0);
            let n = self.scalar(rows.n)?;
            self.restore(&lane1);
            let n1 = self.scalar(rows.n)?;
            let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, n, 0);
            self.fail_if(neg, abi::NEGATIVE_SIZE, n, zero);
            let some = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, n, 0);
            let mut ok = self.b.ins().icmp(IntCC::Equal, n, n1);
            let mut ms = Vec::with_capacity(2);
            for lane in [&lane0, &lane1] {
                self.restore(lane);
                let m = self.scalar(plan.m)?;
                let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, m, 0);
                let bad = self.b.ins().band(some, neg);
                self.fail_if(bad, abi::NEGATIVE_COUNT, m, zero);
                let g = self.nest_guard(&plan.reads, n, m)?;
                ok = self.b.ins().band(ok, g);
                ok = self.and_fits(ok, n);
                ok = self.and_fits(ok, m);
                ms.push(m);
            }
            let bad = self.b.ins().icmp_imm_s(IntCC::Equal, ok, 0);
            self.fail_if(bad, abi::INDEX_OUT_OF_BOUNDS, zero, zero);
            Ok((lane1, n, ms))
        })();
        self.fail = exit_fail;
        let (lane1, n, ms) = checked?;
        // Both nests' iterations, at their site (Note [Native limits]).
        let was = self.enter_site(&rows.nest.name);
        for &m in &ms {
            self.charge(n);
            self.charge_product(n, m);
        }
        self.here = was;
        let lanes = [&lane0[..], &lane1[..]];
        let mut outs = Vec::with_capacity(2);
        for lane in lanes {
            self.restore(lane);
            let out = self.alloc(n, 8)?;
            let z = self.scalar(plan.z)?;
            self.fill(out, n, z)?;
            outs.push(out);
        }
        let zero = self.iconst(0);
        let common = self.b.ins().smin(ms[0], ms[1]);
        let both_rows = [(outs[0], Some(lanes[0])), (outs[1], Some(lanes[1]))];
        if let Some(kernel) = self.row_kernel(plan, &varying) {
            // Both rows' common terms in one call per chunk, then each
            // row's own (Note [Row kernels], pairs).
            let terms = (plan, &varying, &own);
            self.row_sums(n, (zero, common), terms, kernel, &both_rows)?;
            let none = HashSet::default();
            for (k, lane) in lanes.into_iter().enumerate() {
                self.restore(lane);
                let terms = (plan, &varying, &none);
                self.row_sums(n, (common, ms[k]), terms, kernel, &[(outs[k], None)])?;
            }
        } else {
            let start = self.sum_blocks_of(
                n,
                (zero, common),
                (rows.j, plan, &varying),
                &both_rows,
                &own,
            )?;
            for (k, lane) in lanes.into_iter().enumerate() {
                self.restore(lane);
                self.sum_blocks(n, (common, ms[k]), rows.j, plan, &varying, outs[k])?;
                self.sums_rest(n, ms[k], rows.j, plan, (&varying, true), (start, outs[k]))?;
            }
        }
        for (at, out) in [(r, outs[0]), (r1, outs[1])] {
            let d = self.element(p, at, desc);
            self.b.ins().store(flags, out, d, 0);
            self.b.ins().store(flags, n, d, SLOT as i32);
        }
        let r2 = self.b.ins().iadd_imm_s(r, 2);
        self.loop_back((r2, d), &[], (head, exit));
        self.b.switch_to_block(bail);
        self.b.ins().jump(one, &[]);
        // Row r alone, as written.
        self.b.switch_to_block(one);
        self.env.insert(index.clone(), vec![r]);
        let v = self.iteration(index, body)?;
        let at = self.element(p, r, desc);
        self.store(&el, &v, at, 0)?;
        let r1 = self.b.ins().iadd_imm_s(r, 1);
        self.loop_back((r1, d), &[], (head, exit));
        self.b.switch_to_block(exit);
        Ok(())
    }

    /// The fast path of a `build` of `build`s transposed (Note
    /// [Interchange], builds of builds), inside [`nest`]'s guard: the `n`
    /// rows of `m` elements allocated first, then filled i-major.
    ///
    /// [`nest`]: Self::nest
    pub(super) fn rows_i_major(
        &mut self,
        n: Value,
        m: Value,
        j: &Name,
        plan: &loop_interchange::Transpose<'_>,
        ty: &Type,
    ) -> R<Value> {
        let desc = 2 * SLOT;
        let out = self.alloc(n, desc)?;
        let row_ty = array_elem(ty)?;
        let el = array_elem(row_ty)?.clone();
        let size = elem_bytes(&el)?;
        let flags = MemFlagsData::trusted();
        // E-Build's order of the rows' allocations: row 0 first.
        self.counted_loop(n, &[], |l, k, _| {
            let row = l.alloc(m, size)?;
            let at = l.element(out, k, desc);
            l.b.ins().store(flags, row, at, 0);
            l.b.ins().store(flags, m, at, SLOT as i32);
            Ok(Vec::new())
        })?;
        // The terms that do not depend on `j` (reading `a[i]`, projecting
        // it) once per `i`, when there are rows (`n > 0`): the guard
        // tested their reads only for elements that exist.
        let varying = loop_interchange::varying(&plan.body.binds, j);
        let (per_i, per_ij): (Vec<&Binding>, Vec<&Binding>) = plan
            .body
            .binds
            .iter()
            .partition(|b| !varying.contains(&b.name));
        let rows = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, n, 0);
        let none = self.iconst(0);
        let m = self.b.ins().select(rows, m, none);
        self.counted_loop(m, &[], |l, i, _| {
            l.env.insert(plan.index.clone(), vec![i]);
            l.bind_trusted(per_i.iter().copied())?;
            l.counted_loop(n, &[], |l, k, _| {
                l.env.insert(j.clone(), vec![k]);
                l.bind_trusted(per_ij.iter().copied())?;
                let v = l.atom(&plan.body.result)?;
                let d = l.element(out, k, desc);
                let row = l.b.ins().load(types::I64, flags, d, 0);
                let at = l.element(row, i, size);
                l.store(&el, &v, at, 0)?;
                Ok(Vec::new())
            })?;
            Ok(Vec::new())
        })?;
        Ok(out)
    }
}

/// The names that depend on the row of a `build` over rows (Note
/// [Interchange], pairs of rows): its index and its `pre`.
fn row_names(index: &Name, rows: &loop_interchange::Rows<'_>) -> HashSet<Name> {
    let mut names: HashSet<Name> = rows.pre.iter().map(|b| b.name.clone()).collect();
    names.insert(index.clone());
    names
}
