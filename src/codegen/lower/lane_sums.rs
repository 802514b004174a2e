//! Pairs in lanes under the relaxed floating-point contract: sums two
//! iterations at a time, and `log` and `exp` in lanes (Note [Lane sums]).
//!
//! # Note [Lane sums]
//!
//! Under `--fp relaxed` (spec/semantics.md §7, "Native code's contract")
//! an innermost `ifold` over `i < n` whose state is a Double `s` and whose
//! body is `let … in s + t` (or `t + s`), where every binding before the
//! sum that depends on `i` is one a pair can compute in lanes (Note
//! [Bounds guards], pairs: Double arithmetic, reads at `i`, comparisons
//! and selects) or `log` or `exp` of a Double, every other one is Double
//! `+ - *`, negation or a read whose test the loop's guard covers (so it
//! cannot be ⊥), and `s` appears only in the sum, runs two iterations at
//! a time:
//!
//! - the bindings that do not depend on `i` once, before the first pair
//!   (a row `a[i]` of NNMF's sum over `j`: loaded once per row, not per
//!   pair, 4.09 → 3.90 ms), then per pair the terms
//!   `t(2k)` and `t(2k + 1)` in the lanes of an `f64x2`, added to two
//!   partial sums, lane by lane, each starting from −0.0 (the additive
//!   identity, so a zero sum keeps its sign);
//! - then `(z + lane 0) + lane 1`, and the last iteration as written when
//!   `n` is odd.
//!
//! That regroups the sum (the even terms and the odd terms apart), which
//! the relaxed contract allows; its bound, 2γₙ Σ|t|, covers any grouping.
//! `log` and `exp` in lanes are fdlibm's methods (`vmath.rs`), within 1
//! ulp of the function where the evaluator's (glibc's) is within about
//! half of one, so within 2 ulp of the evaluator's; §7 states the bound
//! with them.
//!
//! ⊥, and the arguments the lanes' `log` and `exp` do not cover, are not
//! decided in lanes. The pair's tests — a divisor of 0 in either lane, a
//! read past the end of its array (a row bound in the body, which the
//! guard cannot test), a `log` argument that is not a normal positive
//! finite Double, an `exp` argument that is NaN or over 708 in magnitude
//! — are *deferred*: collected into one flag (`Lower::deferred`) instead
//! of failing. When it is set the loop leaves the lanes, adds up what it
//! has, and runs the rest from that pair as written. So the ⊥ is the
//! evaluator's first (its code, details and site), and `log` of a
//! subnormal, `exp` of −1000, are the evaluator's values. The lanes'
//! values of that pair are discarded; nothing they computed has been
//! stored. The loop of pairs calls nothing, so its constants (the
//! polynomials') can stay in registers; the first version ran the pair
//! as written inside the loop, which calls `log`, and reloaded every
//! constant from the stack in every trip (a sum of 10⁶ `log`s: 5.7 ms,
//! against 4.0 ms now and 8.7 ms as written).
//!
//! A fold that is also the inner fold of a loop that jams (Note
//! [Jamming]) jams, which keeps two chains of one lane each busy, unless
//! a term takes a `log` or an `exp`, which gain most from the lanes:
//! GMM's short triangular rows do not gain from lanes over jamming. That
//! choice is made on the fold's shape alone; if its lowering then refuses
//! the lane sum (a loop-invariant read its guard does not cover), the fold
//! runs as written, neither jammed nor in lanes.
//!
//! On a host with AVX2 and FMA3, JIT code runs a lane sum with a `log`
//! in blocks whose `log`s and `exp`s a kernel computes four or eight at
//! a time (Note [Math kernels] in `codegen/backend/math.rs`;
//! `Lower::math_blocks`): NNMF's objective 3.50 → 1.61 ms.
//!
//! An innermost `build` that can run in pairs does so under the relaxed
//! contract too with its tests deferred, and may then also take `log` and
//! `exp`. (The strict contract keeps the pairs of Note [Bounds guards]:
//! no `log` or `exp`, whose lanes are not the evaluator's bits. It defers
//! the tests too when the element has two divisions that can fail: a
//! pair tests the first division for both elements before the second,
//! so failing at once would report element 1's first division where the
//! evaluator reports element 0's second — the same code, another site.)

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value, types};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::lanes::PairedBuild;
use super::{Lower, MathLanes, R, Vals, args_of};
use crate::anf::{Atom, Binding, Block as AnfBlock, Rhs};
use crate::codegen::abi::MATH_BLOCK;
use crate::codegen::compile_error;
use crate::codegen::passes::loop_interchange;
use crate::ir::{Name, Prim, Type};

/// The math kernels' helpers (Note [Math kernels]).
const VLOG: &str = "fsmooth_vlog";
const VEXP: &str = "fsmooth_vexp";

/// A lane sum's `log`s and `exp`s by the math kernels (Note [Math
/// kernels]): each one's kernel, in the order of the terms, and the
/// names their arguments need (the `log`s and `exp`s included).
struct MathPlan<'t> {
    kernels: Vec<&'static str>,
    arguments: HashSet<Name>,
    _terms: std::marker::PhantomData<&'t ()>,
}

/// How a fold runs as a lane sum ([`Lower::lane_sum`]): the bindings
/// before the sum, all in lanes, and the term added.
pub(super) struct LaneSum {
    varying: HashSet<Name>,
    term: Atom,
    /// Whether a term takes a `log` or an `exp` (in lanes: the most the
    /// pair gains).
    pub(super) math: bool,
}

impl Lower<'_, '_> {
    /// Whether the innermost `ifold` over `index` with state `s : st` is a
    /// lane sum (Note [Lane sums]) here, and how: its [`shape`], under
    /// the relaxed contract, with no scratch arrays, and its reads
    /// possible in lanes where it is lowered.
    pub(super) fn lane_sum(
        &self,
        index: &Name,
        s: &Name,
        st: &Type,
        body: &AnfBlock,
    ) -> Option<LaneSum> {
        if !self.relaxed || self.scratch.loops.contains_key(index) {
            return None;
        }
        let plan = shape(index, s, st, body)?;
        let terms = &body.binds[..body.binds.len() - 1];
        // The bindings that do not depend on the index run once, before the
        // pairs: only those that cannot be ⊥ there — Double
        // `+ - *` and negation, and reads whose test the guard covers.
        let invariant_ok = terms
            .iter()
            .filter(|b| !plan.varying.contains(&b.name))
            .all(|b| match &b.rhs {
                Rhs::Prim(Prim::Get, _) => self.covered.contains(&b.name),
                _ => true,
            });
        // A read in lanes is of an array that is not fused; its bounds
        // test, when it has one, is deferred.
        let reads_ok = terms
            .iter()
            .filter(|b| plan.varying.contains(&b.name))
            .all(|b| match &b.rhs {
                Rhs::Prim(Prim::Get, args) => {
                    args[0].var().is_some_and(|a| !self.fused.contains_key(a))
                }
                _ => true,
            });
        (invariant_ok && reads_ok).then_some(plan)
    }

    /// The terms in `varying` of elements `k` and `k + 1` in lanes with
    /// the pair's tests deferred (Note [Lane sums]), and `finish` of them:
    /// the `i8` that says the pair must run as written, and what `finish`
    /// returned.
    fn deferred_pair(
        &mut self,
        (binds, varying): (&[Binding], &HashSet<Name>),
        (index, k): (&Name, Value),
        finish: impl FnOnce(&mut Self, &HashMap<&Name, Value>) -> R<Vals>,
    ) -> R<(Value, Vals)> {
        let none = self.b.ins().iconst(types::I8, 0);
        let outer = self.deferred.replace(none);
        let index_was = self.lane_index.replace(k);
        let r = self
            .lanes(binds, varying, index, k)
            .and_then(|vals| finish(self, &vals));
        self.lane_index = index_was;
        let flag = std::mem::replace(&mut self.deferred, outer).expect("deferred tests");
        Ok((flag, r?))
    }

    /// [`lane_sum`]'s loop over `n ≥ 0` iterations from `z` (Note [Lane
    /// sums]).
    ///
    /// [`lane_sum`]: Self::lane_sum
    pub(super) fn lane_sum_fold(
        &mut self,
        n: Value,
        z: &[Value],
        (s, index): (&Name, &Name),
        body: &AnfBlock,
        plan: &LaneSum,
    ) -> R<Vals> {
        let f64x2 = types::F64X2;
        let terms = &body.binds[..body.binds.len() - 1];
        let minus_zero = self.b.ins().f64const(-0.0);
        let zeros = self.b.ins().splat(f64x2, minus_zero);
        // The bindings that do not depend on the index, once before the
        // pairs (none can be ⊥, and the guard covers their reads when
        // there is a pair).
        let pre = |l: &mut Self| {
            for b in terms.iter().filter(|b| !plan.varying.contains(&b.name)) {
                l.bind(b)?;
            }
            Ok(())
        };
        let step = |l: &mut Self, k| {
            let term =
                |l: &mut Self, vals: &HashMap<&Name, Value>| Ok(vec![l.vector(vals, &plan.term)?]);
            l.deferred_pair((terms, &plan.varying), (index, k), term)
        };
        let add =
            |l: &mut Self, _, t: &[Value], acc: &[Value]| Ok(vec![l.b.ins().fadd(acc[0], t[0])]);
        // Whole blocks by the math kernels first, where they run (Note
        // [Math kernels]); the pairs from where they stop.
        let (start, acc) = match self.math_plan(terms, plan) {
            Some(math) => self.math_blocks(n, zeros, pre, (terms, plan, &math), index)?,
            None => (self.iconst(0), zeros),
        };
        let (from, sums) = self.pair_loop((start, n), &[acc], (pre, step), add)?;
        let even = self.b.ins().extractlane(sums[0], 0);
        let odd = self.b.ins().extractlane(sums[0], 1);
        let r = self.b.ins().fadd(z[0], even);
        let r = self.b.ins().fadd(r, odd);
        // The rest as written: the last iteration when n is odd, or from
        // the pair whose tests failed.
        let rest = self.b.ins().isub(n, from);
        self.counted_loop(rest, &[r], |l, t, st| {
            let i = l.b.ins().iadd(from, t);
            l.fold_step((s, index), i, st, body)
        })
    }

    /// The `log`s and `exp`s of a lane sum that the math kernels compute
    /// (Note [Math kernels] in `backend/math.rs`): JIT code on a host with
    /// AVX2 and FMA3, one to four of them, a `log` among them, their
    /// arguments computed from no other `log` or `exp`; with the names
    /// their arguments need.
    fn math_plan<'t>(&self, terms: &'t [Binding], plan: &LaneSum) -> Option<MathPlan<'t>> {
        if !(plan.math && self.avx2 && self.imports.has(VLOG) && self.imports.has(VEXP)) {
            return None;
        }
        let maths: Vec<&Binding> = terms
            .iter()
            .filter(|b| plan.varying.contains(&b.name))
            .filter(|b| matches!(b.rhs, Rhs::Prim(Prim::Log | Prim::Exp, _)))
            .collect();
        // A sum with a `log` (only `exp`s: GMM's log-sum-exp over its K
        // components, where a loop with the kernels' calls in it kept the
        // lanes' hoisted constants on the stack even when no block ran:
        // d2_K200's relaxed objective 1.52 → 1.72 ms).
        let logs = maths
            .iter()
            .any(|b| matches!(b.rhs, Rhs::Prim(Prim::Log, _)));
        if !logs || maths.len() > 4 {
            return None;
        }
        // The names the arguments need, back from the last `log` or `exp`.
        let mut needed: HashSet<Name> = maths.iter().map(|b| b.name.clone()).collect();
        for b in terms.iter().rev() {
            let math = matches!(b.rhs, Rhs::Prim(Prim::Log | Prim::Exp, _));
            if !needed.contains(&b.name) || !plan.varying.contains(&b.name) {
                continue;
            }
            let mut inner_math = false;
            b.rhs.for_each_atom(&mut |a| {
                if let Some(x) = a.var()
                    && plan.varying.contains(x)
                {
                    inner_math |= maths.iter().any(|m| m.name == *x);
                    needed.insert(x.clone());
                }
            });
            if inner_math && math {
                return None;
            }
        }
        // An argument computed from a `log` or an `exp`: refused.
        let from_math = terms.iter().any(|b| {
            needed.contains(&b.name) && !maths.iter().any(|m| m.name == b.name) && {
                let mut uses = false;
                b.rhs.for_each_atom(&mut |a| {
                    uses |= a.var().is_some_and(|x| maths.iter().any(|m| m.name == *x))
                });
                uses
            }
        });
        (!from_math).then(|| MathPlan {
            kernels: maths
                .iter()
                .map(|b| match b.rhs {
                    Rhs::Prim(Prim::Log, _) => VLOG,
                    _ => VEXP,
                })
                .collect(),
            arguments: needed,
            _terms: std::marker::PhantomData,
        })
    }

    /// The pairs of a lane sum from 0 in blocks of [`MATH_BLOCK`]
    /// iterations (the last block may be shorter), by the math kernels
    /// (Note [Math kernels]): `pre` once when
    /// there is a block, then per block the arguments of its `log`s and
    /// `exp`s in lanes into a buffer on the stack, the kernels on it,
    /// and, when every argument was one they cover, the block's pairs in
    /// lanes with their `log`s and `exp`s read from the buffer and their
    /// other tests deferred, added to the partial sums `acc`. Returns
    /// where the pairs go on — after the last block, or at a block whose
    /// kernel refused an argument, or at a pair whose tests failed — and
    /// the partial sums there.
    fn math_blocks(
        &mut self,
        n: Value,
        acc: Value,
        pre: impl Fn(&mut Self) -> R<()>,
        (terms, plan, math): (&[Binding], &LaneSum, &MathPlan<'_>),
        index: &Name,
    ) -> R<(Value, Value)> {
        // −0.0 in both lanes: where the sums start.
        let zeros = acc;
        let shift = MATH_BLOCK.trailing_zeros() as i64;
        // ⌈(n − n mod 2) / MATH_BLOCK⌉ blocks: whole ones, then the
        // pairs left (the last iteration when n is odd is the pairs'
        // loop's).
        let even = self.b.ins().band_imm_u(n, -2);
        let blocks = self.chunk_count(even, MATH_BLOCK);
        // Only a sum of a whole block or more: over fewer iterations (a
        // log-sum-exp over GMM's K = 5 or 200 components) the calls and
        // the buffer's round trip cost more than the lanes save
        // (d2_K200's objective: 1.52 → 1.66 ms).
        let big = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, even, MATH_BLOCK as i64);
        let zero = self.iconst(0);
        let blocks = self.b.ins().select(big, blocks, zero);
        let rest = self.b.create_block();
        self.b.append_block_param(rest, types::I64);
        self.b.append_block_param(rest, types::F64X2);
        let (some, none) = (self.b.create_block(), self.b.create_block());
        let any = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, blocks, 0);
        self.b.ins().brif(any, some, &[], none, &[]);
        self.b.switch_to_block(none);
        self.b.ins().jump(rest, &args_of(&[zero, acc]));
        self.b.switch_to_block(some);
        pre(self)?;
        let buf = self.stack_buffer(8 * MATH_BLOCK * math.kernels.len())?;
        let (head, exit) = self.loop_entry(blocks, &[acc]);
        let params = self.b.block_params(head).to_vec();
        let (h, acc) = (params[0], params[1]);
        let k0 = self.b.ins().ishl_imm_u(h, shift);
        let left = self.b.ins().isub(even, k0);
        let most = self.iconst(MATH_BLOCK as i64);
        let len = self.b.ins().smin(left, most);
        let pairs = self.b.ins().sshr_imm_u(len, 1);
        // The arguments, pair by pair.
        self.counted_loop(pairs, &[], |l, p, _| {
            let k = l.b.ins().ishl_imm_u(p, 1);
            let k = l.b.ins().iadd(k0, k);
            let at = l.b.ins().ishl_imm_u(p, 4);
            let at = l.b.ins().iadd(buf, at);
            l.with_math((at, MathLanes::Arguments), |l| {
                l.deferred_pair((terms, &math.arguments), (index, k), |_, _| Ok(Vec::new()))
            })?;
            Ok(Vec::new())
        })?;
        // The kernels, each on its part of the buffer.
        let mut bad = self.iconst(0);
        for (q, kernel) in math.kernels.iter().enumerate() {
            let f = self.imports.get(kernel)?;
            let at = self.b.ins().iadd_imm_s(buf, (8 * MATH_BLOCK * q) as i64);
            let call = self.b.ins().call(f, &[at, len]);
            let r = self.b.inst_results(call)[0];
            bad = self.b.ins().bor(bad, r);
        }
        let go = self.b.create_block();
        self.b.ins().brif(bad, rest, &args_of(&[k0, acc]), go, &[]);
        self.b.switch_to_block(go);
        // The block's pairs, their `log`s and `exp`s from the buffer, into
        // partial sums of the block's own (from −0.0) added to `acc`
        // after it: nothing the pairs' loop keeps in a register lives
        // across the kernels' calls (kept across, the sums stayed in a
        // stack slot, stored and loaded again every pair). The bindings
        // that do not depend on the index again, for the same reason.
        pre(self)?;
        let (phead, pexit) = self.loop_entry(pairs, &[zeros]);
        let pp = self.b.block_params(phead).to_vec();
        let (p, sum) = (pp[0], pp[1]);
        let k = self.b.ins().ishl_imm_u(p, 1);
        let k = self.b.ins().iadd(k0, k);
        let at = self.b.ins().ishl_imm_u(p, 4);
        let at = self.b.ins().iadd(buf, at);
        let (failed, t) = self.with_math((at, MathLanes::Values), |l| {
            let term =
                |l: &mut Self, vals: &HashMap<&Name, Value>| Ok(vec![l.vector(vals, &plan.term)?]);
            l.deferred_pair((terms, &plan.varying), (index, k), term)
        })?;
        let (next, stop) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(failed, stop, &[], next, &[]);
        self.b.switch_to_block(stop);
        self.b.set_cold_block(stop);
        let upto = self.b.ins().fadd(acc, sum);
        self.b.ins().jump(rest, &args_of(&[k, upto]));
        self.b.switch_to_block(next);
        let sum = self.b.ins().fadd(sum, t[0]);
        let p1 = self.b.ins().iadd_imm_s(p, 1);
        self.loop_back((p1, pairs), &[sum], (phead, pexit));
        self.b.switch_to_block(pexit);
        let block = self.b.block_params(pexit)[0];
        let acc = self.b.ins().fadd(acc, block);
        let h1 = self.b.ins().iadd_imm_s(h, 1);
        self.loop_back((h1, blocks), &[acc], (head, exit));
        self.b.switch_to_block(exit);
        let acc = self.b.block_params(exit)[0];
        self.b.ins().jump(rest, &args_of(&[even, acc]));
        self.b.switch_to_block(rest);
        let r = self.b.block_params(rest).to_vec();
        Ok((r[0], r[1]))
    }

    /// `f` with the pair's `log`s and `exp`s going to or coming from the
    /// math kernels' buffer at `at` (Note [Math kernels]).
    fn with_math<T>(&mut self, at: (Value, MathLanes), f: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        let was = (
            self.math.replace(at),
            std::mem::replace(&mut self.math_seen, 0),
        );
        let r = f(self);
        (self.math, self.math_seen) = was;
        r
    }

    /// A paired `build` into `out` (elements of `size` bytes) under the
    /// relaxed contract (Note [Lane sums]): its elements in lanes with
    /// their tests deferred, then `written(count, from)` for the rest.
    pub(super) fn lane_build(
        &mut self,
        n: Value,
        (terms, paired): (&[Binding], &PairedBuild),
        (index, out, size): (&Name, Value, i64),
        written: impl FnOnce(&mut Self, Value, Value) -> R<Vals>,
    ) -> R<Vals> {
        // The leaves in lanes, in order: what the pair keeps until its
        // tests pass.
        let in_lanes: Vec<&Name> = paired
            .leaves
            .iter()
            .filter_map(|(_, a)| a.var().filter(|x| paired.varying.contains(*x)))
            .collect();
        let step = |l: &mut Self, k| {
            let finish = |_: &mut Self, vals: &HashMap<&Name, Value>| {
                in_lanes
                    .iter()
                    .map(|x| {
                        vals.get(x)
                            .copied()
                            .ok_or_else(|| compile_error("a leaf not in lanes"))
                    })
                    .collect()
            };
            l.deferred_pair((terms, &paired.varying), (index, k), finish)
        };
        let store = |l: &mut Self, k, e: &[Value], _: &[Value]| {
            let vals: HashMap<&Name, Value> =
                in_lanes.iter().copied().zip(e.iter().copied()).collect();
            l.store_pair((out, k, size), &paired.leaves, &vals)?;
            Ok(Vec::new())
        };
        let zero = self.iconst(0);
        let (from, _) = self.pair_loop((zero, n), &[], (|_: &mut Self| Ok(()), step), store)?;
        let rest = self.b.ins().isub(n, from);
        written(self, rest, from)
    }

    /// Pairs `k = 0, 2, 4, …` while `k + 1 < n`, with state `init`:
    /// `pre` once when there is a pair, then per pair `step` computes it
    /// in lanes and its deferred tests, and when they pass, `commit` uses
    /// it (stores it, or adds it to the state). Returns the first
    /// iteration not done and the state: `n − n mod 2` when every pair
    /// passed, else the failing pair's `k`. The loop has no call in it
    /// (the iterations as written come after it), so its constants can
    /// stay in registers.
    fn pair_loop(
        &mut self,
        (start, n): (Value, Value),
        init: &[Value],
        (pre, step): (
            impl FnOnce(&mut Self) -> R<()>,
            impl FnOnce(&mut Self, Value) -> R<(Value, Vals)>,
        ),
        commit: impl FnOnce(&mut Self, Value, &[Value], &[Value]) -> R<Vals>,
    ) -> R<(Value, Vals)> {
        let left = self.b.ins().isub(n, start);
        let half = self.b.ins().sshr_imm_u(left, 1);
        let tys: Vec<types::Type> = init
            .iter()
            .map(|v| self.b.func.dfg.value_type(*v))
            .collect();
        let rest = self.b.create_block();
        self.b.append_block_param(rest, types::I64);
        for t in &tys {
            self.b.append_block_param(rest, *t);
        }
        // No pair: none done.
        let (pairs, none) = (self.b.create_block(), self.b.create_block());
        let any = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, half, 0);
        self.b.ins().brif(any, pairs, &[], none, &[]);
        self.b.switch_to_block(none);
        let mut nothing = vec![start];
        nothing.extend_from_slice(init);
        self.b.ins().jump(rest, &args_of(&nothing));
        self.b.switch_to_block(pairs);
        pre(self)?;
        let (head, exit) = self.loop_entry(half, init);
        let params = self.b.block_params(head).to_vec();
        let (h, st) = (params[0], &params[1..]);
        let k = self.b.ins().ishl_imm_u(h, 1);
        let k = self.b.ins().iadd(start, k);
        let (bad, pair) = step(self, k)?;
        let go = self.b.create_block();
        let mut stop = vec![k];
        stop.extend_from_slice(st);
        self.b.ins().brif(bad, rest, &args_of(&stop), go, &[]);
        self.b.switch_to_block(go);
        let next = commit(self, k, &pair, st)?;
        let h1 = self.b.ins().iadd_imm_s(h, 1);
        self.loop_back((h1, half), &next, (head, exit));
        self.b.switch_to_block(exit);
        let pairs = self.b.ins().ishl_imm_u(half, 1);
        let mut done = vec![self.b.ins().iadd(start, pairs)];
        done.extend_from_slice(self.b.block_params(exit));
        self.b.ins().jump(rest, &args_of(&done));
        self.b.switch_to_block(rest);
        let p = self.b.block_params(rest).to_vec();
        Ok((p[0], p[1..].to_vec()))
    }
}

/// The shape of a lane sum (Note [Lane sums]): the fold over `index` with
/// state `s : st` has a Double state and the body `let … in s + t` (or
/// `t + s`) with `s` in the sum only; the bindings before the sum that
/// depend on `index` can run in lanes (with `log` and `exp`; reads at
/// `index`), and the others are Double `+ - *`, negation or reads (which
/// cannot be ⊥ once a guard covers them).
pub(super) fn shape(index: &Name, s: &Name, st: &Type, body: &AnfBlock) -> Option<LaneSum> {
    if *st != Type::Double {
        return None;
    }
    let (sum, terms) = body.binds.split_last()?;
    if body.result.var() != Some(&sum.name) {
        return None;
    }
    let Rhs::Prim(Prim::Add, args) = &sum.rhs else {
        return None;
    };
    let term = match (&args[0], &args[1]) {
        (a, t) | (t, a) if a.var() == Some(s) && t.var() != Some(s) => t,
        _ => return None,
    };
    let uses_state = terms.iter().any(|b| loop_interchange::mentions(b, s));
    let varying = loop_interchange::varying(terms, index);
    let invariant = terms
        .iter()
        .filter(|b| !varying.contains(&b.name))
        .all(|b| match &b.rhs {
            Rhs::Prim(Prim::Add | Prim::Sub | Prim::Mul | Prim::Neg, _) => b.ty == Type::Double,
            Rhs::Prim(Prim::Get, _) => true,
            _ => false,
        });
    let reads = terms
        .iter()
        .filter(|b| varying.contains(&b.name))
        .all(|b| match &b.rhs {
            Rhs::Prim(Prim::Get, args) => args[1].var() == Some(index),
            _ => true,
        });
    let ok =
        !uses_state && invariant && reads && loop_interchange::pairs(terms, term, &varying, true);
    let math = terms
        .iter()
        .any(|b| matches!(b.rhs, Rhs::Prim(Prim::Log | Prim::Exp, _)));
    ok.then(|| LaneSum {
        varying,
        term: term.clone(),
        math,
    })
}
