//! Lowering of a loop that runs on several threads (Note [Parallel loops]
//! in `codegen/passes/parallel.rs`): when its count is large enough, the
//! chunks' arguments are written to the arena, the runtime's
//! `fsmooth_parallel` runs the chunk function once per thread, and the
//! chunks' results are added to a fold's initial state in chunk order, or
//! a build's elements copied side by side; with fewer iterations, the
//! loop runs as written.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value, types};

use super::{Lower, R, Vals, args_of};
use crate::anf::Atom;
use crate::codegen::abi::{self, CTX_A, CTX_B, CTX_SITE};
use crate::codegen::compile_error;
use crate::codegen::layout::{SLOT, slots};
use crate::codegen::passes::parallel::{Kind, Leaf, MIN_SCALAR, Parallel};
use crate::ir::{Name, Type};

impl Lower<'_, '_> {
    /// The loop bound to `name` (`n` iterations; a fold's initial state
    /// and its type), on several threads when the plan says so, else
    /// `serial`, which lowers it as written.
    pub(super) fn maybe_parallel(
        &mut self,
        name: &Name,
        n: &Atom,
        state: Option<(&Atom, &Type)>,
        serial: impl FnOnce(&mut Self) -> R<Vals>,
    ) -> R<Vals> {
        let Some(plan) = self.parallel.remove(name) else {
            return serial(self);
        };
        let chunk = self.chunks.len() as i64;
        let count = self.scalar(n)?;
        let tys: Vec<types::Type> = match state {
            Some((z, _)) => {
                let z = self.atom(z)?;
                z.iter().map(|v| self.b.func.dfg.value_type(*v)).collect()
            }
            None => vec![types::I64, types::I64],
        };
        // Too few iterations (a negative count among them, whose ⊥ the
        // loop reports): as written (Note [Parallel loops], cost).
        let least = (self.threads as i64).max(plan.min_count);
        let mut few = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, count, least);
        if !plan.work.is_empty() {
            // Fewer iterations, but enough work in their loops: the count
            // times the loops' counts (saturated), at least MIN_SCALAR,
            // with an iteration per thread.
            let mut est = count;
            for w in &plan.work {
                let w = self.scalar(w)?;
                est = self.count_product(est, w);
            }
            let big = self
                .b
                .ins()
                .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, est, MIN_SCALAR);
            let threads = self.threads as i64;
            let each = self
                .b
                .ins()
                .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, count, threads);
            let worth = self.b.ins().band(big, each);
            let not_worth = self.b.ins().bxor_imm_u(worth, 1);
            few = self.b.ins().band(few, not_worth);
        }
        let (ser, par, join) = self.diamond(few, &tys);
        self.b.switch_to_block(ser);
        let v = serial(self)?;
        self.b.ins().jump(join, &args_of(&v));
        self.b.switch_to_block(par);
        let v = match (&plan.kind, state) {
            (Kind::Fold(leaves), Some((z, st))) => {
                self.fold_chunks((count, z, st), &plan, leaves, chunk)?
            }
            (Kind::Build(elem), None) => self.build_chunks(count, elem, &plan, chunk)?,
            _ => return Err(compile_error("a parallel plan for another kind of loop")),
        };
        self.b.ins().jump(join, &args_of(&v));
        self.b.switch_to_block(join);
        self.chunks.push(plan.chunk);
        Ok(self.b.block_params(join).to_vec())
    }

    /// A build's chunks, their elements copied side by side, in order.
    fn build_chunks(&mut self, count: Value, elem: &Type, plan: &Parallel, chunk: i64) -> R<Vals> {
        // E-Limit of the whole array, then its count charged, as the build
        // would (Note [Native limits]).
        self.within_limit(count, 0);
        self.charge(count);
        let arrays = elem.has_array();
        let zero = self.iconst(0);
        let (outs, spans) = self.run_chunks(count, &[], &plan.free, (chunk, 2, arrays), zero)?;
        let size = crate::codegen::layout::elem_bytes(elem)?;
        let p = self.alloc(count, size)?;
        let flags = MemFlagsData::trusted();
        for (t, (lo, cnt)) in spans.into_iter().enumerate() {
            let at = (t as i64 * 2 * SLOT) as i32;
            let src = self.b.ins().load(types::I64, flags, outs, at);
            let dst = self.element(p, lo, size);
            let bytes = self.b.ins().imul_imm_s(cnt, size);
            self.call("fsmooth_copy", &[dst, src, bytes])?;
        }
        Ok(vec![p, count])
    }

    /// Writes each chunk's arguments (`lo`, `count`, `extra`, the values
    /// of `free`), runs chunk function `chunk` on every thread through
    /// `fsmooth_parallel` (which keeps the other threads' arenas for the
    /// rest of the call when `keep`), and stops at the first chunk's ⊥.
    /// Returns the buffer of the chunks' results (`out_words` slots each)
    /// and each chunk's `lo` and `count`.
    fn run_chunks(
        &mut self,
        count: Value,
        extra: &[(Type, Vals)],
        free: &[(crate::ir::Name, Type)],
        (chunk, out_words, keep): (i64, usize, bool),
        zero_len: Value,
    ) -> R<(Value, Vec<(Value, Value)>)> {
        let threads = self.threads as i64;
        let mut arg_tys = vec![Type::Index, Type::Index];
        let mut shared = Vec::new();
        for (t, v) in extra {
            arg_tys.push(t.clone());
            shared.extend_from_slice(v);
        }
        for (x, t) in free {
            arg_tys.push(t.clone());
            let v = self.atom(&Atom::Var(x.clone(), t.clone()))?;
            shared.extend(v);
        }
        let arg_words: usize = arg_tys.iter().map(slots).sum::<R<usize>>()?;
        let (arg_bytes, out_bytes) = (arg_words as i64 * SLOT, out_words.max(1) as i64 * SLOT);
        let n_args = self.iconst(threads * arg_words as i64);
        let args = self.alloc(n_args, SLOT)?;
        let n_outs = self.iconst(threads * out_words.max(1) as i64);
        let outs = self.alloc(n_outs, SLOT)?;
        // Chunk t: lo_t = q t + min(t, r), count_t = q + [t < r], where
        // count = q T + r (count ≥ T > 0).
        let q = self.b.ins().sdiv_imm_s(count, threads);
        let qt = self.b.ins().imul_imm_s(q, threads);
        let r = self.b.ins().isub(count, qt);
        let flags = MemFlagsData::trusted();
        let rest = arg_tys[2..]
            .iter()
            .cloned()
            .rev()
            .reduce(|acc, t| Type::Pair(t.into(), acc.into()));
        let mut spans = Vec::new();
        for t in 0..threads {
            let base = self.b.ins().iadd_imm_s(args, t * arg_bytes);
            let tc = self.iconst(t);
            let before = self.b.ins().smin(tc, r);
            let qt = self.b.ins().imul_imm_s(q, t);
            let lo = self.b.ins().iadd(qt, before);
            let longer = self.b.ins().icmp(IntCC::SignedLessThan, tc, r);
            let longer = self.b.ins().uextend(types::I64, longer);
            let cnt = self.b.ins().iadd(q, longer);
            self.b.ins().store(flags, lo, base, 0);
            self.b.ins().store(flags, cnt, base, SLOT as i32);
            if let Some(rest) = &rest {
                self.store(rest, &shared, base, 2 * SLOT as i32)?;
            }
            spans.push((lo, cnt));
        }
        let k = self.iconst(chunk);
        let (ab, ob, tn, kp) = (
            self.iconst(arg_bytes),
            self.iconst(out_bytes),
            self.iconst(threads),
            self.iconst(i64::from(keep)),
        );
        let status = self.call1(
            "fsmooth_parallel",
            &[self.ctx, k, args, ab, outs, ob, tn, kp, zero_len],
        )?;
        // The first failing chunk's ⊥, its details and site already in
        // the context.
        let failed = self.b.ins().icmp_imm_s(IntCC::NotEqual, status, abi::OK);
        let (cont, cold) = (self.b.create_block(), self.b.create_block());
        self.b.set_cold_block(cold);
        self.b.ins().brif(failed, cold, &[], cont, &[]);
        self.b.switch_to_block(cold);
        if self.limits {
            // A ⊥ without a site (the threads together overdrew the fuel:
            // `fsmooth_parallel`) is this loop's (Note [Failure sites]).
            let was = self.b.ins().load(types::I64, flags, self.ctx, CTX_SITE);
            let unlocated = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, was, 0);
            let mine = self.site_here();
            let site = self.b.ins().select(unlocated, mine, was);
            self.b.ins().store(flags, site, self.ctx, CTX_SITE);
        }
        let a = self.b.ins().load(types::I64, flags, self.ctx, CTX_A);
        let bb = self.b.ins().load(types::I64, flags, self.ctx, CTX_B);
        let fail = self.fail;
        self.b.ins().jump(fail, &args_of(&[status, a, bb]));
        self.b.switch_to_block(cont);
        Ok((outs, spans))
    }

    /// A fold's chunks, their results added to `z` leaf by leaf, in order.
    fn fold_chunks(
        &mut self,
        (count, z, st): (Value, &Atom, &Type),
        plan: &Parallel,
        leaves: &[(Leaf, Type)],
        chunk: i64,
    ) -> R<Vals> {
        let threads = self.threads as i64;
        let z = self.atom(z)?;
        // The slots of each leaf of z, in order.
        let mut leaf_vals: Vec<&[Value]> = Vec::new();
        let mut at = 0;
        for (_, ty) in leaves {
            let k = slots(ty)?;
            leaf_vals.push(&z[at..at + k]);
            at += k;
        }
        // One chunk's arguments: lo, count, per leaf a length or an
        // initial value, the free variables.
        let mut extra = Vec::new();
        for (j, (leaf, ty)) in leaves.iter().enumerate() {
            match leaf {
                Leaf::Sum => {}
                // The length slot of the array.
                Leaf::SumArray => extra.push((Type::Index, vec![leaf_vals[j][1]])),
                Leaf::Keep | Leaf::Last => extra.push((ty.clone(), leaf_vals[j].to_vec())),
            }
        }
        let out_words = slots(st)?;
        let out_bytes = out_words.max(1) as i64 * SLOT;
        // The fold's count charged as the serial fold would (Note [Native
        // limits]); each chunk's zero accumulators are not the program's
        // work.
        self.charge(count);
        let mut zero_len = self.iconst(0);
        for (j, (leaf, _)) in leaves.iter().enumerate() {
            if *leaf == Leaf::SumArray {
                zero_len = self.b.ins().iadd(zero_len, leaf_vals[j][1]);
            }
        }
        let (outs, _) = self.run_chunks(
            count,
            &extra,
            &plan.free,
            (chunk, out_words, false),
            zero_len,
        )?;
        let flags = MemFlagsData::trusted();
        // z plus the chunks' results, leaf by leaf, in chunk order.
        let mut results: Vec<Vals> = Vec::new();
        for t in 0..threads {
            results.push(self.load(st, outs, (t * out_bytes) as i32)?);
        }
        let mut out = Vec::new();
        let mut at = 0;
        for (j, (leaf, ty)) in leaves.iter().enumerate() {
            let width = slots(ty)?;
            let of = |t: usize| &results[t][at..at + width];
            match leaf {
                Leaf::Sum => {
                    let mut acc = leaf_vals[j][0];
                    for t in 0..threads as usize {
                        acc = self.b.ins().fadd(acc, of(t)[0]);
                    }
                    out.push(acc);
                }
                Leaf::SumArray => {
                    let len = leaf_vals[j][1];
                    let p = self.alloc(len, 8)?;
                    let srcs: Vec<Value> = std::iter::once(leaf_vals[j][0])
                        .chain((0..threads as usize).map(|t| of(t)[0]))
                        .collect();
                    self.counted_loop(len, &[], |l, i, _| {
                        let mut acc = None;
                        for src in &srcs {
                            let at = l.element(*src, i, 8);
                            let x = l.b.ins().load(types::F64, flags, at, 0);
                            acc = Some(match acc {
                                None => x,
                                Some(a) => l.b.ins().fadd(a, x),
                            });
                        }
                        let at = l.element(p, i, 8);
                        let v = acc.expect("at least z");
                        l.b.ins().store(flags, v, at, 0);
                        Ok(Vec::new())
                    })?;
                    out.extend([p, len]);
                }
                Leaf::Keep => out.extend_from_slice(leaf_vals[j]),
                Leaf::Last => out.extend_from_slice(of(threads as usize - 1)),
            }
            at += width;
        }
        Ok(out)
    }
}
