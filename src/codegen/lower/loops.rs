//! Lowering of the loops of the normal form: `build` (with two shapes of
//! its own: a view of an array, `codegen/passes/view.rs`, and a one-hot
//! fill), `ifold` and `iscan`, each choosing among the strategies of the
//! sibling files; their counts (Note [Known counts]); and their bounds
//! guards, under which an innermost loop runs in two versions (Note
//! [Bounds guards] in `codegen/passes/guard.rs`).

use rustc_hash::FxHashSet as HashSet;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value, types};

use super::{Lower, R, Vals, args_of, array_elem};
use crate::anf::{Atom, Binding, Block as AnfBlock, Rhs};
use crate::codegen::abi;
use crate::codegen::compile_error;
use crate::codegen::layout::{component_slot, elem_bytes};
use crate::codegen::passes::{self, guard, twice, view};
use crate::ir::{Lit, Name, Prim, Type};

/// The Doubles from which a +0.0 fill calls `memset` (Note [Scratch
/// arrays]'s chunks are 64 KiB or more; below 64 elements the call costs
/// more than the stores).
const LARGE_FILL: i64 = 64;

impl Lower<'_, '_> {
    /// E-Build, E-Build-Elem, E-Build-Bot; behind its bounds guard when
    /// it has one (Note [Bounds guards]).
    pub(super) fn build(
        &mut self,
        n: &Atom,
        index: &Name,
        body: &AnfBlock,
        ty: &Type,
        guard: Option<&guard::Plan>,
    ) -> R<Vals> {
        let count = self.scalar(n)?;
        // E-Build-Bot, then E-Limit, then the iterations charged.
        self.within_limit(count, 0);
        self.check_count_of(n, count, abi::NEGATIVE_SIZE);
        let n = count;
        let el = array_elem(ty)?;
        let size = elem_bytes(el)?;
        if let Some(src) = view::copied(body, index)
            && src
                .var()
                .is_some_and(|a| self.outlives_loops.contains(a) && !self.fused.contains_key(a))
        {
            // `build n (fun i -> a[i])` (the optimised gradient of the dot
            // product, Example 7) is `a`'s first n elements: arrays are
            // immutable, so the same buffer (Note [Native layout]; the
            // in-place analysis counts such a build as not owned, Note
            // [In-place updates]), when `a` is a parameter or bound
            // outside every loop, so that its buffer is never a scratch
            // array (Note [Scratch arrays]: a buffer a name bound outside
            // every loop may point to stays in the main arena) and lives
            // as long as the call. The loop would read a[i] for i = 0, 1,
            // …: every read is in bounds when n ≤ length a, and otherwise
            // the first ⊥ is E-Get-Bot at i = length a, with the same code
            // and details as here, at the read's site (Note [Failure
            // sites]).
            let a = self.atom(src)?;
            let (from, len) = (a[0], a[1]);
            let short = self.b.ins().icmp(IntCC::SignedGreaterThan, n, len);
            let was = self.enter_site(&body.binds[0].name);
            self.fail_if(short, abi::INDEX_OUT_OF_BOUNDS, len, len);
            self.here = was;
            return Ok(vec![from, n]);
        }
        let p = self.alloc(n, size)?;
        if *el == Type::Double
            && body.binds.is_empty()
            && let Atom::Lit(..) = &body.result
        {
            // `build n (fun i -> c)`, reverse mode's zero cotangents: no
            // element can be ⊥, so a fill (paired as a map, the zero was
            // spilled and reloaded every iteration). A short one without
            // a call: `memset` for BA's 11-element tangent seed made its
            // `fwd-vec` 29.3–30.5 ms instead of 26.7–28.0.
            let x = self.scalar(&body.result)?;
            let zero = match &body.result {
                Atom::Lit(Lit::Double(v), _) => v.to_bits() == 0,
                Atom::Lit(Lit::Int(v), _) => *v == 0,
                _ => false,
            };
            if zero {
                // `memset` for a large +0.0 fill (GMM's batched gradient
                // zeroes n × d cotangents: 1.30 → 1.15 ms at d = 20, K = 5).
                let large = self
                    .b
                    .ins()
                    .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, n, LARGE_FILL);
                self.memset_or_stores(large, p, n, x)?;
            } else {
                self.fill_stores(p, n, x)?;
            }
            return Ok(vec![p, n]);
        }
        if let Some((k, hot, cold)) = one_hot(body, index)
            && *el == Type::Double
        {
            // `build n (fun i -> if i = k then hot else cold)` (forward
            // mode's one-hot seed, the vector maximum's gradient): every
            // element is `cold` but element k (when 0 ≤ k < n). No element
            // can be ⊥ (a comparison and atoms), so fill, then one store.
            // A fill of +0.0 (all bits zero) is `memset`, which writes a
            // large buffer without reading it first (with Note [Skipping
            // folds], the vector maximum's gradient at n = 10⁶, AOT, best
            // and median of 10 alternating rounds: 1.27, 1.41 → 0.86,
            // 0.99 ms; `memset` is a fifth of its samples).
            let cold = self.scalar(cold)?;
            self.fill(p, n, cold)?;
            let flags = MemFlagsData::trusted();
            let k = self.scalar(k)?;
            let hot = self.scalar(hot)?;
            let inside = self.b.ins().icmp(IntCC::UnsignedLessThan, k, n);
            let (one, none) = (self.iconst(1), self.iconst(0));
            let count = self.b.ins().select(inside, one, none);
            self.counted_loop(count, &[], |l, _, _| {
                let at = l.element(p, k, 8);
                l.b.ins().store(flags, hot, at, 0);
                Ok(Vec::new())
            })?;
            return Ok(vec![p, n]);
        }
        // Two rows at a time where every row is an interchanged nest run in
        // blocks (Note [Interchange], pairs of rows).
        if guard.is_none()
            && let Some(rows) = self.rows_plan(index, body)
        {
            self.rows_paired.push(index.clone());
            self.paired_rows(n, p, (index, body, ty), &rows)?;
            return Ok(vec![p, n]);
        }
        if guard.is_none()
            && let Some(plan) = self.jam_plan(index, None, body)
        {
            self.jammed(n, &[], (index, None), body, &plan, |l, i, v| {
                let at = l.element(p, i, size);
                l.store(el, v, at, 0)?;
                Ok(Vec::new())
            })?;
            return Ok(vec![p, n]);
        }
        let scalar = |l: &mut Self, n: Value, i0: Value| {
            l.counted_loop(n, &[], |l, i, _| {
                let i = l.b.ins().iadd(i, i0);
                l.env.insert(index.clone(), vec![i]);
                let v = l.iteration(index, body)?;
                let at = l.element(p, i, size);
                l.store(el, &v, at, 0)?;
                Ok(Vec::new())
            })
        };
        let run = |l: &mut Self| {
            let zero = l.iconst(0);
            // Two elements at a time where no read needs its test (Note
            // [Bounds guards], pairs).
            let Some(paired) = l.pairable(index, body) else {
                return scalar(l, n, zero);
            };
            let terms = &body.binds[..paired.terms];
            // Two divisions that can fail: a pair tests the first for
            // both elements before the second, where the evaluator's
            // first ⊥ may be the second's in the first element (Note
            // [Failure sites]); with its tests deferred, a failing pair
            // runs as written.
            if l.relaxed || (passes::divisions(body) > 1 && !l.nonzero_divisors) {
                // With its tests deferred (Note [Lane sums]).
                return l.lane_build(n, (terms, &paired), (index, p, size), scalar);
            }
            let pair = |l: &mut Self, k| {
                let vals = l.lanes(terms, &paired.varying, index, k)?;
                l.store_pair((p, k, size), &paired.leaves, &vals)
            };
            l.by_twos(n, pair, scalar)
        };
        self.versions(n, guard, None, run)?;
        Ok(vec![p, n])
    }

    /// Every one of the `n` Doubles at `p` set to `x`: `memset` when `x`
    /// is +0.0 (all bits zero), which writes a large buffer without
    /// reading it first, else two at a time.
    pub(super) fn fill(&mut self, p: Value, n: Value, x: Value) -> R<()> {
        let bits = self.b.ins().bitcast(types::I64, MemFlagsData::new(), x);
        let zero = self.b.ins().icmp_imm_s(IntCC::Equal, bits, 0);
        self.memset_or_stores(zero, p, n, x)
    }

    /// The `n` Doubles at `p` set to `x`: by `memset` (`x` must be +0.0
    /// then) when `call` holds, else by [`fill_stores`].
    ///
    /// [`fill_stores`]: Self::fill_stores
    fn memset_or_stores(&mut self, call: Value, p: Value, n: Value, x: Value) -> R<()> {
        let (zeroes, fills, filled) = self.diamond(call, &[]);
        self.b.switch_to_block(zeroes);
        let bytes = self.b.ins().ishl_imm_u(n, 3);
        self.call("fsmooth_zero", &[p, bytes])?;
        self.b.ins().jump(filled, &[]);
        self.b.switch_to_block(fills);
        self.fill_stores(p, n, x)?;
        self.b.ins().jump(filled, &[]);
        self.b.switch_to_block(filled);
        Ok(())
    }

    /// Every one of the `n` Doubles at `p` set to `x`, two at a time.
    pub(super) fn fill_stores(&mut self, p: Value, n: Value, x: Value) -> R<()> {
        let lanes = self.b.ins().splat(types::F64X2, x);
        let unaligned = MemFlagsData::new().with_notrap();
        let half = self.b.ins().sshr_imm_u(n, 1);
        self.counted_loop(half, &[], |l, h, _| {
            let at = l.element(p, h, 16);
            l.b.ins().store(unaligned, lanes, at, 0);
            Ok(Vec::new())
        })?;
        let flags = MemFlagsData::trusted();
        let odd = self.b.ins().band_imm_u(n, 1);
        let last = self.b.ins().iadd_imm_s(n, -1);
        self.counted_loop(odd, &[], |l, _, _| {
            let at = l.element(p, last, 8);
            l.b.ins().store(flags, x, at, 0);
            Ok(Vec::new())
        })?;
        Ok(())
    }

    /// E-IFold-Zero, E-IFold-Succ, E-IFold-Done, E-IFold-Bot; behind its
    /// bounds guard when it has one (Note [Bounds guards]).
    pub(super) fn ifold(
        &mut self,
        n: &Atom,
        (z, s, st): (&Atom, &Name, &Type),
        index: &Name,
        body: &AnfBlock,
        guard: Option<&guard::Plan>,
    ) -> R<Vals> {
        let count = self.scalar(n)?;
        self.check_count_of(n, count, abi::NEGATIVE_COUNT);
        let n = count;
        let z = self.atom(z)?;
        // Term-major, when it is a fold of folds of `addAt`s (Note
        // [Interchanged folds]).
        if guard.is_none()
            && let Some(plan) = self.fold_interchange_plan(index, s, st, body)
        {
            if !self.cold {
                self.folds_interchanged.push(index.clone());
            }
            return self.interchanged_fold(n, &z, (s, index), body, &plan);
        }
        if guard.is_none()
            && let Some(plan) = self.jam_plan(index, Some(s), body)
        {
            let keep = |_: &mut Self, _: Value, v: &[Value]| Ok(v.to_vec());
            return self.jammed(n, &z, (index, Some(s)), body, &plan, keep);
        }
        let run = |l: &mut Self| {
            // Four iterations skipped at a time where they keep the state
            // (Note [Skipping folds]).
            if let Some(plan) = l.skip_plan(index, s, body) {
                l.skipping.push(index.clone());
                return l.skipping_fold(n, &z, (s, index), body, &plan);
            }
            // Two iterations at a time where only in-place `addAt`s change
            // the state (Note [Bounds guards], pairs of `addAt`s).
            if let Some(plan) = l.fold_pairs(index, s, st, body) {
                l.paired.push(index.clone());
                return l.paired_fold(n, &z, (s, index), body, &plan);
            }
            // Two iterations at a time in lanes under the relaxed
            // contract (Note [Lane sums]).
            if let Some(plan) = l.lane_sum(index, s, st, body) {
                return l.lane_sum_fold(n, &z, (s, index), body, &plan);
            }
            // Note [Two iterations per trip].
            if twice::doubled(st, body) {
                l.doubled.push(index.clone());
                return l.doubled_fold(n, &z, (s, index), body);
            }
            l.counted_loop(n, &z, |l, i, st| l.fold_step((s, index), i, st, body))
        };
        self.versions(n, guard, Some((&z, st)), run)
    }

    /// E-While, E-While-Step, E-While-Done: the state tested before every
    /// step, in a loop whose length the data decides; each step is one
    /// iteration of fuel (Note [Native limits]), the only loop charged as
    /// it runs, since its count is not known when it starts.
    pub(super) fn while_(
        &mut self,
        init: &Atom,
        state: &Name,
        cond: &AnfBlock,
        step: &AnfBlock,
    ) -> R<Vals> {
        let z = self.atom(init)?;
        let tys: Vec<types::Type> = z.iter().map(|v| self.b.func.dfg.value_type(*v)).collect();
        let (head, go, exit) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        for t in &tys {
            self.b.append_block_param(head, *t);
            self.b.append_block_param(exit, *t);
        }
        self.b.ins().jump(head, &args_of(&z));
        self.b.switch_to_block(head);
        let s = self.b.block_params(head).to_vec();
        self.env.insert(state.clone(), s.clone());
        // An iteration is the test and the step after it (Note [Scratch
        // arrays]); the state is named once for both.
        let marks = self.mark(state);
        let test = self.block(cond)?;
        let test = *test
            .first()
            .ok_or_else(|| compile_error("a `while` test without a value"))?;
        // The last test's arrays are released on the way out too (an
        // enclosing loop may release nothing else); the state is not
        // among them.
        let leave = self.b.create_block();
        self.b.ins().brif(test, go, &[], leave, &[]);
        self.b.switch_to_block(leave);
        self.release_marks(&marks)?;
        self.b.ins().jump(exit, &args_of(&s));
        self.b.switch_to_block(go);
        let one = self.iconst(1);
        self.charge(one);
        let next = self.block(step)?;
        self.release_marks(&marks)?;
        self.b.ins().jump(head, &args_of(&next));
        self.b.switch_to_block(exit);
        Ok(self.b.block_params(exit).to_vec())
    }

    /// E-IScan-Zero, E-IScan-Succ, E-IScan-Done, E-IScan-Bot: the n + 1
    /// states in one buffer.
    pub(super) fn iscan(
        &mut self,
        n: &Atom,
        z: &Atom,
        s: &Name,
        st_ty: &Type,
        index: &Name,
        body: &AnfBlock,
    ) -> R<Vals> {
        let count = self.scalar(n)?;
        // E-IScan-Bot, then E-Limit of the n + 1 states.
        self.within_limit(count, 1);
        self.check_count_of(n, count, abi::NEGATIVE_COUNT);
        let n = count;
        let z = self.atom(z)?;
        let size = elem_bytes(st_ty)?;
        let count = self.b.ins().iadd_imm_s(n, 1);
        let p = self.alloc(count, size)?;
        self.store(st_ty, &z, p, 0)?;
        if let Some(plan) = self.jam_plan(index, Some(s), body) {
            self.jammed(n, &z, (index, Some(s)), body, &plan, |l, i, v| {
                let i1 = l.b.ins().iadd_imm_s(i, 1);
                let at = l.element(p, i1, size);
                l.store(st_ty, v, at, 0)?;
                Ok(v.to_vec())
            })?;
            return Ok(vec![p, count]);
        }
        self.counted_loop(n, &z, |l, i, st| {
            let v = l.fold_step((s, index), i, st, body)?;
            let i1 = l.b.ins().iadd_imm_s(i, 1);
            let at = l.element(p, i1, size);
            l.store(st_ty, &v, at, 0)?;
            Ok(v)
        })?;
        Ok(vec![p, count])
    }
}

/// `(k, hot, cold)` if `body` (of a `build` over `index`) is `if index =
/// k then hot else cold` (either order of the comparison), with `k`,
/// `hot` and `cold` atoms bound outside it.
fn one_hot<'b>(body: &'b AnfBlock, index: &Name) -> Option<(&'b Atom, &'b Atom, &'b Atom)> {
    let [test, choice] = body.binds.as_slice() else {
        return None;
    };
    let Rhs::Prim(Prim::Eq, args) = &test.rhs else {
        return None;
    };
    let k = match (args[0].var(), args[1].var()) {
        (Some(x), _) if x == index => &args[1],
        (_, Some(y)) if y == index => &args[0],
        _ => return None,
    };
    let Rhs::If(Atom::Var(c, _), t, e) = &choice.rhs else {
        return None;
    };
    let outside = |a: &Atom| a.var().is_none_or(|x| x != index && x != &test.name);
    (c == &test.name
        && t.binds.is_empty()
        && e.binds.is_empty()
        && body.result.var() == Some(&choice.name)
        && outside(k)
        && outside(&t.result)
        && outside(&e.result))
    .then_some((k, &t.result, &e.result))
}

/// # Note [Known counts]
///
/// A loop's index is in `0 .. n` for a count `n` that E-Build-Bot /
/// E-IFold-Bot have let through, so `n ≤ i64::MAX` and `i ≤ i64::MAX −
/// 1`: `i + 1` cannot overflow (E-Arith-Bot never fires), and it is at
/// least 1. Lengths and Index literals are at least 0 too. A `build`,
/// `ifold` or `iscan` whose count is one of these skips its E-Build-Bot /
/// E-IFold-Bot test, and such an `i + 1` is a plain addition: the tests
/// could not fire, so every value and every ⊥ is the same. The rows of a
/// triangle, `ifold … (r + 1)` inside a loop over `r` (GMM's `(Q y)_r`
/// and its reverse), are such counts.
///
/// Every loop index of `b`, nested blocks included.
pub(super) fn loop_indices(b: &AnfBlock) -> HashSet<Name> {
    fn walk(b: &AnfBlock, out: &mut HashSet<Name>) {
        for bind in &b.binds {
            match &bind.rhs {
                Rhs::Loop { index, body, .. } => {
                    out.insert(index.clone());
                    walk(body, out);
                }
                Rhs::If(_, t, e) => {
                    walk(t, out);
                    walk(e, out);
                }
                Rhs::While { cond, step, .. } => {
                    walk(cond, out);
                    walk(step, out);
                }
                Rhs::Prim(..) | Rhs::Array(_) => {}
            }
        }
    }
    let mut out = HashSet::default();
    walk(b, &mut out);
    out
}

impl Lower<'_, '_> {
    /// Whether the Index `a` is known to be at least 0 (Note [Known
    /// counts]): a literal, a loop index, a length, or a successor.
    pub(super) fn known_nonneg(&self, a: &Atom) -> bool {
        match a {
            Atom::Lit(Lit::Int(c), _) => *c >= 0,
            Atom::Var(x, _) => self.nonneg.contains(x),
            _ => false,
        }
    }

    /// Whether `args` of an Index `+` are a loop index and 1, in either
    /// order: `i ≤ n − 1` for a count `n ≤ i64::MAX`, so `i + 1` cannot
    /// overflow (Note [Known counts]).
    pub(super) fn successor(&self, args: &[Atom]) -> bool {
        let index = |a: &Atom| a.var().is_some_and(|x| self.loop_indices.contains(x));
        let one = |a: &Atom| matches!(a, Atom::Lit(Lit::Int(1), _));
        matches!(args, [a, b] if (index(a) && one(b)) || (one(a) && index(b)))
    }

    /// E-Build-Bot, E-IFold-Bot, E-Accum-Bot: `n < 0` is ⊥ with `code`,
    /// tested unless the count `a` is known to be at least 0 (Note [Known
    /// counts]).
    pub(super) fn check_count_of(&mut self, a: &Atom, n: Value, code: i64) {
        if !self.known_nonneg(a) {
            let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, n, 0);
            let zero = self.iconst(0);
            self.fail_if(neg, code, n, zero);
        }
        self.charge(n);
    }

    /// E-Build-Bot, E-IFold-Bot, E-Accum-Bot: `n < 0` is ⊥ with `code`;
    /// then the loop's `n` iterations are charged (Note [Native limits]).
    pub(super) fn check_count(&mut self, n: Value, code: i64) {
        let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, n, 0);
        let zero = self.iconst(0);
        self.fail_if(neg, code, n, zero);
        self.charge(n);
    }
}

// Note [Native limits]
// ~~~~~~~~~~~~~~~~~~~~
// The evaluator stops after `--fuel` steps (E-Fuel) and at an array of
// more than `--max-elements` elements (E-Limit); native code run by the
// command line honours both, with the same error codes, from the JIT's
// call context (`abi::CTX_FUEL`, `abi::CTX_ELEMENTS`):
//
// - Fuel counts loop iterations, charged when a loop starts: its count n
//   (known then, for every loop of F̃) is taken from the budget, and a
//   loop that would overdraw it stops with `out-of-fuel` before its
//   first iteration. So the innermost loop bodies pay nothing, and an
//   `ifold` of 2⁶³ iterations ends at once. An iteration takes at least
//   one evaluator step, so a program that returns a value within `--fuel
//   N` on the evaluator returns it natively too. One that stops at a ⊥
//   early in a loop may not: the loop's whole count is charged first, so
//   `build 1000 (fun i -> 1.0 / v[i])` with `v[0] = 0` and `--fuel 50`
//   is `division-by-zero` on the evaluator and `out-of-fuel` natively
//   (spec/semantics.md §3.8 states the exception; charging per
//   iteration would cost the hot loops a test each). An interchanged nest
//   (Note [Interchange]) charges its inner loops' n × m iterations at
//   once, at the inner loop's site, before it runs them.
// - Every array native code makes with `build`, `iscan`, `accum` and
//   `concat` is at most the limit, tested where the evaluator tests
//   E-Limit (`length (build n f)` with n past the limit is ⊥ in both
//   engines). It makes no array larger than one the evaluator makes in
//   the same run — an invariant array moves before its loop only when
//   the loop runs (Note [Hoisting], "Limits") — so a run that ends within
//   `--max-elements N` on the evaluator ends within it natively. An array
//   it never makes (a `build` fused into the fold that reads it, merged
//   into its reader by vertical fusion, unrolled into registers) is not
//   tested: it takes no memory, and like fuel the limit is not an
//   observation (spec/semantics.md §3.8 and §9, "Resource limits"), so
//   `vectorSum (build n f)` with n past the limit may be its sum natively.
//
// Code compiled for an object file reads neither (`limits` is off): its
// memory is bounded by `fsmooth_ctx.limit`, and its loops, like C's, run
// to the end.
impl Lower<'_, '_> {
    /// Charges a loop of `n ≥ 0` iterations to the call's fuel.
    pub(super) fn charge(&mut self, n: Value) {
        if !self.limits {
            return;
        }
        let flags = MemFlagsData::trusted();
        let fuel = self
            .b
            .ins()
            .load(types::I64, flags, self.ctx, abi::CTX_FUEL);
        // fuel ≥ 0 and n ≥ 0: no overflow.
        let left = self.b.ins().isub(fuel, n);
        let out = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, left, 0);
        self.fail_if(out, abi::OUT_OF_FUEL, n, fuel);
        self.b.ins().store(flags, left, self.ctx, abi::CTX_FUEL);
    }

    /// Gives back `n` iterations [`charge`] took: a loop charged whole
    /// that then runs again as written, which charges its own.
    ///
    /// [`charge`]: Self::charge
    pub(super) fn refund(&mut self, n: Value) {
        if !self.limits {
            return;
        }
        let flags = MemFlagsData::trusted();
        let fuel = self
            .b
            .ins()
            .load(types::I64, flags, self.ctx, abi::CTX_FUEL);
        // What was taken is given back: no overflow.
        let back = self.b.ins().iadd(fuel, n);
        self.b.ins().store(flags, back, self.ctx, abi::CTX_FUEL);
    }

    /// [`charge`] of `n × m` iterations (`n` ≥ 0; a negative `m` counts
    /// as none), the product saturated at 2⁶³ − 1.
    ///
    /// [`charge`]: Self::charge
    pub(super) fn charge_product(&mut self, n: Value, m: Value) {
        if !self.limits {
            return;
        }
        let total = self.count_product(n, m);
        self.charge(total);
    }

    /// `a × b` of two counts, each negative one taken as 0, saturated at
    /// 2⁶³ − 1: the iterations of a nest, which cannot overflow.
    pub(super) fn count_product(&mut self, a: Value, b: Value) -> Value {
        let zero = self.iconst(0);
        let a = self.b.ins().smax(a, zero);
        let b = self.b.ins().smax(b, zero);
        let low = self.b.ins().imul(a, b);
        let high = self.b.ins().umulhi(a, b);
        let wide = self.b.ins().icmp_imm_s(IntCC::NotEqual, high, 0);
        let sign = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, low, 0);
        let over = self.b.ins().bor(wide, sign);
        let max = self.iconst(i64::MAX);
        self.b.ins().select(over, max, low)
    }

    /// The guard `ok`, and an array of `n ≥ 0` elements within the call's
    /// limit (`ok` itself when the limits are off).
    pub(super) fn and_fits(&mut self, ok: Value, n: Value) -> Value {
        if !self.limits {
            return ok;
        }
        let flags = MemFlagsData::trusted();
        let limit = self
            .b
            .ins()
            .load(types::I64, flags, self.ctx, abi::CTX_ELEMENTS);
        let fits = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, n, limit);
        self.b.ins().band(ok, fits)
    }

    /// E-Limit: an array of `n + extra` elements is ⊥ past the call's
    /// limit (tested as `n > limit - extra`, which cannot overflow; a
    /// negative `n` passes, for E-Build-Bot to catch).
    pub(super) fn within_limit(&mut self, n: Value, extra: i64) {
        if !self.limits {
            return;
        }
        let flags = MemFlagsData::trusted();
        let limit = self
            .b
            .ins()
            .load(types::I64, flags, self.ctx, abi::CTX_ELEMENTS);
        let room = self.b.ins().iadd_imm_s(limit, -extra);
        let big = self.b.ins().icmp(IntCC::SignedGreaterThan, n, room);
        // n + extra, saturating as the evaluator's count does (a review
        // found `iscan` of 2⁶³ − 1 iterations reporting −2⁶³ elements).
        let sum = self.b.ins().iadd_imm_s(n, extra);
        let over = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThan, n, i64::MAX - extra);
        let max = self.iconst(i64::MAX);
        let total = self.b.ins().select(over, max, sum);
        self.fail_if(big, abi::TOO_LARGE, total, limit);
    }
}

// The bounds guards of innermost loops (Note [Bounds guards] in
// `codegen/passes/guard.rs`): the plan, its test, and the two versions.
impl Lower<'_, '_> {
    /// The guard of the innermost loop `name` over `index`, if it has one
    /// (Note [Bounds guards] in `codegen/passes/guard.rs`).
    pub(super) fn guard_plan(
        &mut self,
        name: &Name,
        index: &Name,
        state: Option<&Name>,
        body: &AnfBlock,
    ) -> Option<guard::Plan> {
        if self.plain {
            return None;
        }
        let known = |a: &Name| self.in_bounds.iter().any(|(k, b)| k == index && b == a);
        let plan = guard::plan(index, state, body, |a| self.fused.contains_key(a), known)?;
        self.guarded.push(name.clone());
        Some(plan)
    }

    /// Whether the guard `plan` of a loop of `m ≥ 0` iterations holds
    /// (Note [Bounds guards]): `m = 0`, or every check. `state` is a fold's
    /// initial state and its type.
    pub(super) fn guard_holds(
        &mut self,
        m: Value,
        plan: &guard::Plan,
        state: Option<(&[Value], &Type)>,
    ) -> R<Value> {
        let mut ok = self.b.ins().iconst(types::I8, 1);
        for check in &plan.checks {
            let len = match &check.length {
                guard::Length::Outside(a) => self.length_of(a)?,
                guard::Length::State(path) => {
                    let (z, ty) =
                        state.ok_or_else(|| compile_error("a state check without state"))?;
                    z[component_slot(ty, path)? + 1]
                }
            };
            let fits = match &check.at {
                guard::At::Loop => self.span_fits(None, m, len),
                guard::At::Const(c) => {
                    let c = self.scalar(c)?;
                    self.b.ins().icmp(IntCC::UnsignedLessThan, c, len)
                }
                guard::At::Offset(c) => {
                    let c = self.scalar(c)?;
                    self.span_fits(Some(c), m, len)
                }
            };
            ok = self.b.ins().band(ok, fits);
        }
        let none = self.b.ins().icmp_imm_s(IntCC::Equal, m, 0);
        Ok(self.b.ins().bor(none, ok))
    }

    /// Whether indices `c + k` (`k` when `c` is none) for every
    /// `k < count` are in bounds of an array of `len ≥ 0` elements, for
    /// `count ≥ 0`: `count ≤ len`, or `0 ≤ c ≤ len − count` (no overflow:
    /// both are ≥ 0; and `c + k` cannot overflow when it holds).
    pub(super) fn span_fits(&mut self, c: Option<Value>, count: Value, len: Value) -> Value {
        let Some(c) = c else {
            return self.b.ins().icmp(IntCC::SignedLessThanOrEqual, count, len);
        };
        let nonneg = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, c, 0);
        let room = self.b.ins().isub(len, count);
        let below = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, c, room);
        self.b.ins().band(nonneg, below)
    }

    /// The loop `run` over `m ≥ 0` iterations behind its bounds guard
    /// (Note [Bounds guards]): without the tests the guard covers when it
    /// holds, as written (and bound to fail, so cold) when not. `state` is
    /// a fold's initial state and its type.
    fn versions(
        &mut self,
        m: Value,
        guard: Option<&guard::Plan>,
        state: Option<(&[Value], &Type)>,
        run: impl Fn(&mut Self) -> R<Vals>,
    ) -> R<Vals> {
        let Some(plan) = guard else {
            return run(self);
        };
        let ok = self.guard_holds(m, plan, state)?;
        let tys: Vec<types::Type> = state
            .map(|(z, _)| z.iter().map(|v| self.b.func.dfg.value_type(*v)).collect())
            .unwrap_or_default();
        let (fast, slow, join) = self.diamond(ok, &tys);
        self.b.switch_to_block(fast);
        let before = std::mem::take(&mut self.covered);
        self.covered = plan.covered.clone();
        let r = run(self);
        self.covered = before;
        let r = r?;
        self.b.ins().jump(join, &args_of(&r));
        self.b.switch_to_block(slow);
        self.b.set_cold_block(slow);
        let r = run(self)?;
        self.b.ins().jump(join, &args_of(&r));
        self.b.switch_to_block(join);
        Ok(self.b.block_params(join).to_vec())
    }

    /// Whether `b` is a read `a[index]` that needs no bounds test in the
    /// innermost loop over `index`: of a built array whose test the loop's
    /// guard covers, or of the array the loop runs over (Note [Bounds
    /// guards]).
    pub(super) fn untested_read(&self, index: &Name, b: &Binding) -> bool {
        let Rhs::Prim(Prim::Get, args) = &b.rhs else {
            return false;
        };
        let Some(a) = args[0].var() else {
            return false;
        };
        args[1].var() == Some(index)
            && !self.fused.contains_key(a)
            && self.env.contains_key(a)
            && (self.covered.contains(&b.name)
                || self.in_bounds.iter().any(|(k, x)| k == index && x == a))
    }
}
