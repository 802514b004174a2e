//! Lowering of horizontal fusion (Note [Horizontal fusion] in
//! `codegen/passes/horizontal.rs`): a group's region as a fast version
//! (its other bindings, the guard, then one loop that computes every
//! member's element, two at a time in `f64x2` lanes where they can) with
//! a bail exit to the region as written.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{Block, InstBuilder, MemFlagsData, Value, types};

use super::{Lower, R, Vals, args_of};
use crate::anf::{Binding, Block as AnfBlock, Rhs};
use crate::codegen::layout::clif_types;
use crate::codegen::passes::{horizontal, loop_interchange};
use crate::ir::{Name, Prim};

impl Lower<'_, '_> {
    /// The region of group `g` of `blk`: the fast version (its other
    /// bindings, the guard, one loop for the members) with a bail exit to
    /// the slow one (the region as written); the names read after it meet
    /// at a join.
    pub(super) fn horizontal(&mut self, blk: &AnfBlock, g: &horizontal::Group) -> R<()> {
        let region = &blk.binds[g.start..g.end];
        let live: Vec<&Binding> = g.live.iter().map(|&p| &blk.binds[p]).collect();
        let tys: Vec<Vec<types::Type>> =
            live.iter().map(|b| clif_types(&b.ty)).collect::<R<_>>()?;
        let (fast, slow, join) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        for t in tys.iter().flatten() {
            self.b.append_block_param(join, *t);
        }
        let bail = self.b.create_block();
        for _ in 0..3 {
            self.b.append_block_param(bail, types::I64);
        }
        self.b.set_cold_block(bail);
        self.b.set_cold_block(slow);
        self.b.ins().jump(fast, &[]);
        let members: Vec<&Binding> = g.members.iter().map(|&p| &blk.binds[p]).collect();
        // A kept member is built in both versions: the code after the
        // region reads its buffer (a fused one has none, and a block
        // lowered once per version may have fused it the first time).
        for (b, &kept) in members.iter().zip(&g.kept) {
            if kept {
                self.plan.fused.remove(&b.name);
                self.fused.remove(&b.name);
            }
        }
        let names: Vec<Name> = members.iter().map(|b| b.name.clone()).collect();
        if !self.horizontal_groups.contains(&names) {
            self.horizontal_groups.push(names);
        }

        self.b.switch_to_block(fast);
        let exit = self.fail;
        self.fail = bail;
        let r = self.horizontal_fast(blk, g, bail);
        self.fail = exit;
        r?;
        let vals = self.live_values(&live)?;
        self.b.ins().jump(join, &args_of(&vals));

        self.b.switch_to_block(bail);
        self.b.ins().jump(slow, &[]);
        self.b.switch_to_block(slow);
        // The slow version runs only when the fast one bails: its loops as
        // written, without their guards' versions (less code to compile).
        let was = std::mem::replace(&mut self.plain, true);
        let r = region.iter().try_for_each(|bind| self.bind(bind));
        self.plain = was;
        r?;
        let vals = self.live_values(&live)?;
        self.b.ins().jump(join, &args_of(&vals));

        self.b.switch_to_block(join);
        let params = self.b.block_params(join).to_vec();
        let mut at = 0;
        for (b, t) in live.iter().zip(&tys) {
            self.env
                .insert(b.name.clone(), params[at..at + t.len()].to_vec());
            at += t.len();
        }
        Ok(())
    }

    fn live_values(&mut self, live: &[&Binding]) -> R<Vals> {
        let mut vals = Vec::new();
        for b in live {
            vals.extend(self.atom_of(&b.name)?);
        }
        Ok(vals)
    }

    /// The fast version of group `g`'s region: everything but the members
    /// and the deferred bindings in order, the guard (to `bail` when it
    /// fails), the members' loop, which stores the kept ones, then the
    /// deferred bindings.
    fn horizontal_fast(&mut self, blk: &AnfBlock, g: &horizontal::Group, bail: Block) -> R<()> {
        for (p, bind) in blk.binds[g.start..g.end].iter().enumerate() {
            let p = g.start + p;
            if !g.members.contains(&p) && !g.deferred.contains(&p) {
                self.bind(bind)?;
            }
        }
        let f = horizontal::fused_loop(blk, g);
        // The guard: equal counts, n ≥ 0, every read in bounds, and no
        // divisor zero when the loop runs.
        let n = self.scalar(&f.counts[0])?;
        let mut ok = self.b.ins().iconst(types::I8, 1);
        for c in &f.counts[1..] {
            let m = self.scalar(c)?;
            let same = self.b.ins().icmp(IntCC::Equal, m, n);
            ok = self.b.ins().band(ok, same);
        }
        if !self.known_nonneg(&f.counts[0]) {
            let nonneg = self
                .b
                .ins()
                .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, n, 0);
            ok = self.b.ins().band(ok, nonneg);
        }
        for a in &f.reads {
            let len = self.atom_of(a)?[1];
            let fits = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, n, len);
            ok = self.b.ins().band(ok, fits);
        }
        if !f.divisors.is_empty() {
            let idle = self.b.ins().icmp_imm_s(IntCC::SignedLessThanOrEqual, n, 0);
            let zero = self.b.ins().f64const(0.0);
            for d in &f.divisors {
                let d = self.scalar(d)?;
                let nonzero = self.b.ins().fcmp(FloatCC::NotEqual, d, zero);
                let fine = self.b.ins().bor(nonzero, idle);
                ok = self.b.ins().band(ok, fine);
            }
        }
        // E-Limit (Note [Native limits]): past it, the members run as
        // written and stop there.
        ok = self.and_fits(ok, n);
        let go = self.b.create_block();
        let z = self.iconst(0);
        self.b.ins().brif(ok, go, &[], bail, &args_of(&[z, z, z]));
        self.b.switch_to_block(go);
        self.charge(n);
        // The kept members' buffers, each where its binding would put it.
        let mut bufs = Vec::new();
        for (&p, &kept) in g.members.iter().zip(&g.kept) {
            let name = &blk.binds[p].name;
            bufs.push(if kept {
                self.into_scratch = self.scratch.arrays.get(name).map(|(_, k)| *k);
                let buf = self.alloc(n, 8);
                self.into_scratch = None;
                Some(buf?)
            } else {
                None
            });
        }
        // The reads need no test (the guard), nor do the divisions: every
        // divisor is bound outside the members, and the guard tested it.
        let reads: Vec<Name> = f
            .terms
            .iter()
            .filter(|t| matches!(t.rhs, Rhs::Prim(Prim::Get, _)))
            .map(|t| t.name.clone())
            .collect();
        self.covered.extend(reads.iter().cloned());
        self.nonzero_divisors = true;
        let r = self.horizontal_loop(&f, n, &bufs);
        self.nonzero_divisors = false;
        for x in &reads {
            self.covered.remove(x);
        }
        r?;
        for (&p, buf) in g.members.iter().zip(bufs) {
            if let Some(buf) = buf {
                self.env.insert(blk.binds[p].name.clone(), vec![buf, n]);
            }
        }
        for &p in &g.deferred {
            self.bind(&blk.binds[p])?;
        }
        Ok(())
    }

    /// The members' loop over `k < n`: two elements at a time in `f64x2`
    /// lanes when every term that depends on `k` can (Note [Bounds
    /// guards], pairs), the last one (or all) one at a time.
    fn horizontal_loop(&mut self, f: &horizontal::Loop, n: Value, bufs: &[Option<Value>]) -> R<()> {
        let index = &f.index;
        let scalar = |l: &mut Self, count: Value, i0: Value| {
            l.counted_loop(count, &[], |l, i, _| {
                let i = l.b.ins().iadd(i, i0);
                l.env.insert(index.clone(), vec![i]);
                for t in &f.terms {
                    l.bind(t)?;
                }
                for (e, buf) in f.elements.iter().zip(bufs) {
                    if let Some(p) = buf {
                        let v = l.scalar(e)?;
                        let at = l.element(*p, i, 8);
                        l.b.ins().store(MemFlagsData::trusted(), v, at, 0);
                    }
                }
                Ok(Vec::new())
            })
        };
        let varying = loop_interchange::varying(&f.terms, index);
        let pairable = f
            .elements
            .iter()
            .all(|e| loop_interchange::pairs(&f.terms, e, &varying, false));
        if !pairable {
            let zero = self.iconst(0);
            scalar(self, n, zero)?;
            return Ok(());
        }
        let pair = |l: &mut Self, k: Value| {
            for t in f.terms.iter().filter(|t| !varying.contains(&t.name)) {
                l.bind(t)?;
            }
            let vals = l.lanes(&f.terms, &varying, index, k)?;
            // Unaligned: an element pair starts at any 8-byte boundary.
            let flags = MemFlagsData::new().with_notrap();
            for (e, buf) in f.elements.iter().zip(bufs) {
                if let Some(p) = buf {
                    let v = l.vector(&vals, e)?;
                    let at = l.element(*p, k, 8);
                    l.b.ins().store(flags, v, at, 0);
                }
            }
            Ok(())
        };
        self.by_twos(n, pair, scalar)?;
        Ok(())
    }
}
