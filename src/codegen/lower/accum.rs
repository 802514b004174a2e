//! Lowering of `accum` (E-Accum, E-Accum-Bot): the contributions read from
//! a list, from the parts of a fused `concat` in place, or computed where
//! they are added from a fused `build` of records (Note [Fusion],
//! accumulations), then added into the slots in one pass, and a second
//! for array leaves.

use std::rc::Rc;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value, types};

use super::{Live, Lower, R, Vals};
use crate::anf::{Atom, Block as AnfBlock, Rhs};
use crate::codegen::abi;
use crate::codegen::compile_error;
use crate::codegen::layout::{Leaf, SLOT, elem_bytes, leaves};
use crate::ir::{Name, Prim, Type};

/// Where an `accum` reads its contributions.
enum Source {
    /// A list in memory: pointer and length.
    Flat(Value, Value),
    /// The parts of a fused `concat`, an array of lists in memory.
    Parts(Value, Value),
    /// The parts of a fused `concat`, a fused `build`: each part computed
    /// in place, a literal one not built.
    Fused {
        n: Value,
        index: Name,
        body: Rc<AnfBlock>,
    },
    /// A fused `build` of contributions: each computed where it is added.
    Records {
        n: Value,
        index: Name,
        body: Rc<AnfBlock>,
    },
}

impl Lower<'_, '_> {
    /// E-Accum / E-Accum-Bot: every slot starts as `zero`; contributions
    /// are added in order (Doubles add, Index and Bool keep `zero`'s,
    /// arrays concatenate: counted first, then copied).
    pub(super) fn accum(&mut self, zero: &Atom, n: &Atom, cs: &Atom) -> R<Vals> {
        let zt = zero.ty().clone();
        let z = self.atom(zero)?;
        let n = self.scalar(n)?;
        let src = self.accum_source(cs)?;
        self.within_limit(n, 0);
        self.check_count(n, abi::NEGATIVE_SIZE);
        let size = elem_bytes(&zt)?;
        let rec_ty = Type::pair(Type::Index, zt.clone());
        let out = self.alloc(n, size)?;
        let flags = MemFlagsData::trusted();
        // Records at their own loop's index, as many as the slots (reverse
        // mode's map-like loops, `accum 0.0 n (build n (fun i -> (i, c)))`):
        // slot i is z + c_i, written once, in one pass. Otherwise the
        // general passes below, which add the same way.
        let mut done = None;
        if zt == Type::Double
            && let Source::Records { n: rn, index, body } = &src
            && records_at_index(body, index)
        {
            let same = self.b.ins().icmp(IntCC::Equal, *rn, n);
            let (fast, general, join) = self.diamond(same, &[]);
            self.b.switch_to_block(fast);
            let zv = z[0];
            self.guarded_loop(*rn, index, |l| {
                let v = l.block(body)?;
                let i = l.env[index][0];
                let s = l.b.ins().fadd(zv, v[1]);
                let at = l.element(out, i, size);
                l.b.ins().store(flags, s, at, 0);
                Ok(())
            })?;
            self.b.ins().jump(join, &[]);
            self.b.switch_to_block(general);
            done = Some(join);
        }
        self.counted_loop(n, &[], |l, j, _| {
            let at = l.element(out, j, size);
            l.store(&zt, &z, at, 0)?;
            Ok(Vec::new())
        })?;
        let mut ls = Vec::new();
        leaves(&zt, 0, &mut ls)?;
        // The slot of a leaf at byte offset `o` of `zero`, in a record.
        let slot = |o: i32| 1 + o as usize / SLOT as usize;
        // Pass 1: bounds, Double sums, array lengths.
        let ls_ref = &ls;
        self.for_each_record(&src, &rec_ty, &mut |l, v| {
            let j = v[0];
            let bad = l.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, j, n);
            l.fail_if(bad, abi::INDEX_OUT_OF_BOUNDS, j, n);
            let dst = l.element(out, j, size);
            for leaf in ls_ref {
                match *leaf {
                    Leaf::Double(o) => {
                        let x = l.b.ins().load(types::F64, flags, dst, o);
                        let s = l.b.ins().fadd(x, v[slot(o)]);
                        l.b.ins().store(flags, s, dst, o);
                    }
                    Leaf::Array(o, _) => {
                        let len = o + SLOT as i32;
                        let x = l.b.ins().load(types::I64, flags, dst, len);
                        let s = l.b.ins().iadd(x, v[slot(o) + 1]);
                        l.b.ins().store(flags, s, dst, len);
                    }
                    Leaf::Index(_) | Leaf::Bool(_) => {}
                }
            }
            Ok(())
        })?;
        if ls.iter().any(|l| matches!(l, Leaf::Array(..))) {
            self.accum_arrays(&ls, &z, out, n, size, &src, &rec_ty)?;
        }
        if let Some(join) = done {
            self.b.ins().jump(join, &[]);
            self.b.switch_to_block(join);
        }
        Ok(vec![out, n])
    }

    /// Where `accum` reads its contributions: a list, or the parts of a
    /// fused `concat` (Note [Fusion], accumulations).
    fn accum_source(&mut self, cs: &Atom) -> R<Source> {
        if let Atom::Var(c, _) = cs
            && let Some(live) = self.fused.get(c).cloned()
        {
            let parts = match live {
                Live::Concat(parts) => parts,
                Live::Build { n, index, body } => return Ok(Source::Records { n, index, body }),
                Live::Literal(_) | Live::Unrolled(_) => {
                    return Err(compile_error("`accum` of a fused literal"));
                }
            };
            if let Atom::Var(p, _) = &parts
                && let Some(Live::Build { n, index, body }) = self.fused.get(p).cloned()
            {
                return Ok(Source::Fused { n, index, body });
            }
            let a = self.atom(&parts)?;
            return Ok(Source::Parts(a[0], a[1]));
        }
        let c = self.atom(cs)?;
        Ok(Source::Flat(c[0], c[1]))
    }

    /// Calls `f` on the slots of every contribution `(j, c)` of `src`, in
    /// order.
    fn for_each_record(
        &mut self,
        src: &Source,
        rec_ty: &Type,
        f: &mut dyn FnMut(&mut Self, &[Value]) -> R<()>,
    ) -> R<()> {
        let rsize = elem_bytes(rec_ty)?;
        let flags = MemFlagsData::trusted();
        match src {
            Source::Flat(p, cn) => {
                let p = *p;
                self.counted_loop(*cn, &[], |l, k, _| {
                    let rec = l.element(p, k, rsize);
                    let v = l.load(rec_ty, rec, 0)?;
                    f(l, &v)?;
                    Ok(Vec::new())
                })?;
            }
            Source::Parts(pp, pn) => {
                let pp = *pp;
                self.counted_loop(*pn, &[], |l, k, _| {
                    let d = l.element(pp, k, 2 * SLOT);
                    let p = l.b.ins().load(types::I64, flags, d, 0);
                    let cn = l.b.ins().load(types::I64, flags, d, SLOT as i32);
                    l.for_each_record(&Source::Flat(p, cn), rec_ty, f)?;
                    Ok(Vec::new())
                })?;
            }
            Source::Records { n, index, body } => self.guarded_loop(*n, index, |l| {
                let v = l.block(body)?;
                f(l, &v)
            })?,
            Source::Fused { n, index, body } => {
                self.guarded_loop(*n, index, |l| l.part(body, rec_ty, f))?
            }
        }
        Ok(())
    }

    /// A loop over `index` < `n` through the elements of a fused `build`,
    /// whose reads the guard at its binding checked (Note [Fusion]).
    fn guarded_loop(
        &mut self,
        n: Value,
        index: &Name,
        each: impl FnOnce(&mut Self) -> R<()>,
    ) -> R<()> {
        self.counted_loop(n, &[], |l, i, _| {
            l.env.insert(index.clone(), vec![i]);
            l.trusted += 1;
            let r = each(l);
            l.trusted -= 1;
            r?;
            Ok(Vec::new())
        })?;
        Ok(())
    }

    /// One part of a fused `concat`: its body, but a literal result is not
    /// built — its items are the contributions.
    fn part(
        &mut self,
        body: &AnfBlock,
        rec_ty: &Type,
        f: &mut dyn FnMut(&mut Self, &[Value]) -> R<()>,
    ) -> R<()> {
        let literal = body.result.var().and_then(|x| {
            body.binds.iter().find_map(|b| match &b.rhs {
                Rhs::Array(items) if &b.name == x => Some((&b.name, items)),
                _ => None,
            })
        });
        for bind in &body.binds {
            if literal.is_some_and(|(x, _)| *x == bind.name) {
                continue;
            }
            self.bind(bind)?;
        }
        if let Some((_, items)) = literal {
            for it in items {
                let v = self.atom(it)?;
                f(self, &v)?;
            }
            return Ok(());
        }
        let a = self.atom(&body.result)?;
        self.for_each_record(&Source::Flat(a[0], a[1]), rec_ty, f)
    }

    /// Pass 2 of `accum` for array leaves: allocate each slot's buffer,
    /// copy `zero`'s elements, then append every contribution in order.
    #[allow(clippy::too_many_arguments, reason = "the loop state of one pass")]
    fn accum_arrays(
        &mut self,
        ls: &[Leaf],
        z: &[Value],
        out: Value,
        n: Value,
        size: i64,
        src: &Source,
        rec_ty: &Type,
    ) -> R<()> {
        let flags = MemFlagsData::trusted();
        // The zero's (ptr, len) for each array leaf, by its slot index.
        let mut arrays = Vec::new();
        let mut slot = 0;
        for leaf in ls {
            if let Leaf::Array(o, e) = *leaf {
                arrays.push((o, e, z[slot], z[slot + 1]));
                slot += 2;
            } else {
                slot += 1;
            }
        }
        let arrays_ref = &arrays;
        self.counted_loop(n, &[], |l, j, _| {
            let dst = l.element(out, j, size);
            for &(o, e, zp, zl) in arrays_ref {
                let total = l.b.ins().load(types::I64, flags, dst, o + SLOT as i32);
                let p = l.alloc(total, e)?;
                l.copy(p, zp, zl, e)?;
                l.b.ins().store(flags, p, dst, o);
                l.b.ins().store(flags, zl, dst, o + SLOT as i32);
            }
            Ok(Vec::new())
        })?;
        let at = |o: i32| 1 + o as usize / SLOT as usize;
        self.for_each_record(src, rec_ty, &mut |l, v| {
            let j = v[0];
            let dst = l.element(out, j, size);
            for &(o, e, _, _) in arrays_ref {
                let len_at = o + SLOT as i32;
                let (from, cl) = (v[at(o)], v[at(o) + 1]);
                let dp = l.b.ins().load(types::I64, flags, dst, o);
                let cur = l.b.ins().load(types::I64, flags, dst, len_at);
                let to = l.element(dp, cur, e);
                l.copy(to, from, cl, e)?;
                let s = l.b.ins().iadd(cur, cl);
                l.b.ins().store(flags, s, dst, len_at);
            }
            Ok(())
        })
    }
}

/// Whether the records a fused `build` over `index` computes are
/// `(index, c)`: each at its own iteration's slot.
fn records_at_index(body: &AnfBlock, index: &Name) -> bool {
    let Some(r) = body.result.var() else {
        return false;
    };
    body.binds.iter().any(|b| {
        &b.name == r
            && matches!(&b.rhs, Rhs::Prim(Prim::Pair, args) if args[0].var() == Some(index))
    })
}
