//! Lowering of interchanged loop nests (Note [Interchange] in
//! `codegen/passes/loop_interchange.rs`): the frame (the counts' ⊥s, the
//! guard that every read is in bounds, and the nest as written when it
//! fails), and the i-major fast paths of a `build` of sums and of a
//! transposed `build` of `build`s.

use rustc_hash::FxHashSet as HashSet;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value, types};

use super::{Lower, R, Vals, args_of, array_elem, offset};
use crate::anf::{Atom, Binding, Block as AnfBlock, Rhs};
use crate::codegen::abi;
use crate::codegen::layout::{SLOT, elem_bytes};
use crate::codegen::passes::loop_interchange;
use crate::ir::{Name, Prim, Type};

/// The elements of an interchanged sum's block (Note [Interchange],
/// blocks): four `f64x2` sums in registers.
const BLOCK: usize = 8;

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
        // The fast path allocates first: a scratch array's buffer is its.
        let out = fast(self, n, m)?;
        self.b.ins().jump(join, &args_of(&[out]));
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
        ok = self.b.ins().bor(empty, ok);
        if !rows.is_empty() {
            // Every row in `a[i]`, i < m, at least n long (read only when
            // the reads of the arrays themselves are in bounds).
            let count = self.b.ins().select(ok, m, zero);
            let flags = MemFlagsData::trusted();
            let mut arrays = Vec::new();
            for row in &rows {
                let a = self.atom_of(&row.array)?;
                arrays.push((a[0], row.stride as i64 * SLOT, (row.at as i64 + 1) * SLOT));
            }
            ok = self.counted_loop(count, &[ok], |l, i, st| {
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
        Ok(ok)
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
        let flags = MemFlagsData::trusted();
        self.fill(out, n, z)?;
        // The terms that do not depend on j, once per i (only when there
        // is an element: a division by zero among them would otherwise be
        // a ⊥ the nest does not have); the others per element, two at a
        // time when they are arithmetic on Doubles and reads at j of
        // arrays of Doubles (Note [Interchange], pairs).
        let varying = loop_interchange::varying(plan.terms, j);
        let pairs = loop_interchange::pairs(plan.terms, plan.term, &varying, false)
            && plan.terms.iter().all(|b| match &b.rhs {
                Rhs::Prim(Prim::Get, args) if varying.contains(&b.name) => {
                    args[0].var().is_some_and(|a| !self.fused.contains_key(a))
                }
                _ => true,
            });
        // Whole blocks of BLOCK elements first, each sum in a register
        // over all i (Note [Interchange], blocks); the rest, from `start`,
        // as below.
        let start = if pairs && loop_interchange::blocks(plan.terms, &varying) {
            if !self.cold && !self.blocked.contains(x) {
                self.blocked.push(x.clone());
            }
            self.sum_blocks(n, m, j, plan, &varying, out)?
        } else {
            zero
        };
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
                l.pair(plan.terms, plan.term, &varying, j, k, (out, true))?;
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
        Ok(out)
    }

    /// The whole blocks of [`BLOCK`] elements of an interchanged `build` of
    /// sums (Note [Interchange], blocks), their elements already `z`: per
    /// tile of [`TILE`] values of i and per block, the sums are loaded
    /// into `f64x2` registers, every i of the tile adds its terms to them
    /// in order (the terms that do not depend on j again per block,
    /// [`blocks`]), and they are stored. Returns where the elements left
    /// start.
    ///
    /// [`blocks`]: loop_interchange::blocks
    fn sum_blocks(
        &mut self,
        n: Value,
        m: Value,
        j: &Name,
        plan: &loop_interchange::Plan<'_>,
        varying: &HashSet<Name>,
        out: Value,
    ) -> R<Value> {
        let flags = MemFlagsData::new().with_notrap();
        let count = self.b.ins().sshr_imm_u(n, BLOCK.trailing_zeros() as i64);
        // ⌈m / TILE⌉ without overflow (m near 2⁶³ with the limits off);
        // none when m ≤ 0.
        let whole = self.b.ins().sshr_imm_u(m, TILE.trailing_zeros() as i64);
        let part = self.b.ins().band_imm_u(m, TILE as i64 - 1);
        let part = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, part, 0);
        let part = self.b.ins().uextend(types::I64, part);
        let tiles = self.b.ins().iadd(whole, part);
        self.counted_loop(tiles, &[], |l, t, _| {
            let i0 = l.b.ins().ishl_imm_u(t, TILE.trailing_zeros() as i64);
            let rest = l.b.ins().isub(m, i0);
            let tile = l.iconst(TILE as i64);
            let len = l.b.ins().smin(rest, tile);
            l.counted_loop(count, &[], |l, b, _| {
                let k0 = l.b.ins().ishl_imm_u(b, BLOCK.trailing_zeros() as i64);
                let mut sums = Vec::with_capacity(BLOCK / 2);
                for p in 0..BLOCK / 2 {
                    let k = l.b.ins().iadd_imm_s(k0, 2 * p as i64);
                    let at = l.element(out, k, 8);
                    sums.push(l.b.ins().load(types::F64X2, flags, at, 0));
                }
                let sums = l.counted_loop(len, &sums, |l, di, sums| {
                    let i = l.b.ins().iadd(i0, di);
                    l.env.insert(plan.index.clone(), vec![i]);
                    l.bind_trusted(plan.terms.iter().filter(|b| !varying.contains(&b.name)))?;
                    let mut next = Vec::with_capacity(BLOCK / 2);
                    for (p, sum) in sums.iter().enumerate() {
                        let k = l.b.ins().iadd_imm_s(k0, 2 * p as i64);
                        let vals = l.lanes(plan.terms, varying, j, k)?;
                        let e = l.vector(&vals, plan.term)?;
                        next.push(l.b.ins().fadd(*sum, e));
                    }
                    Ok(next)
                })?;
                for (p, sum) in sums.iter().enumerate() {
                    let k = l.b.ins().iadd_imm_s(k0, 2 * p as i64);
                    let at = l.element(out, k, 8);
                    l.b.ins().store(flags, *sum, at, 0);
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
