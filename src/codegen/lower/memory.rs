//! Buffers in the lowering: loads and stores of a value's slots (Note
//! [Native layout] in `codegen/mod.rs`), element addresses, and
//! allocation, from the call's arena through `fsmooth_alloc` or, for the
//! scratch array of the binding being lowered, from its stack's window in
//! the call context (Note [Scratch arrays] in `codegen/passes/scratch.rs`),
//! which a loop iteration that binds scratch arrays releases when it ends.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value, types};

use super::{Lower, R, Vals, args_of};
use crate::anf::Block as AnfBlock;
use crate::codegen::abi::{self, ctx_window};
use crate::codegen::compile_error;
use crate::codegen::layout::{Leaf, SLOT, leaves};
use crate::ir::{Name, Type};

impl Lower<'_, '_> {
    pub(super) fn load(&mut self, ty: &Type, base: Value, at: i32) -> R<Vals> {
        let mut ls = Vec::new();
        leaves(ty, at, &mut ls)?;
        let flags = MemFlagsData::trusted();
        let mut out = Vec::new();
        for l in ls {
            match l {
                Leaf::Double(o) => out.push(self.b.ins().load(types::F64, flags, base, o)),
                Leaf::Index(o) => out.push(self.b.ins().load(types::I64, flags, base, o)),
                Leaf::Bool(o) => out.push(self.b.ins().load(types::I8, flags, base, o)),
                Leaf::Array(o, _) => {
                    out.push(self.b.ins().load(types::I64, flags, base, o));
                    out.push(self.b.ins().load(types::I64, flags, base, o + SLOT as i32));
                }
            }
        }
        Ok(out)
    }

    pub(super) fn store(&mut self, ty: &Type, vals: &[Value], base: Value, at: i32) -> R<()> {
        let mut ls = Vec::new();
        leaves(ty, at, &mut ls)?;
        let flags = MemFlagsData::trusted();
        let mut vs = vals.iter().copied();
        let mut next = || {
            vs.next()
                .ok_or_else(|| compile_error("too few slot values"))
        };
        for l in ls {
            match l {
                Leaf::Double(o) | Leaf::Index(o) | Leaf::Bool(o) => {
                    let v = next()?;
                    self.b.ins().store(flags, v, base, o);
                }
                Leaf::Array(o, _) => {
                    let (p, n) = (next()?, next()?);
                    self.b.ins().store(flags, p, base, o);
                    self.b.ins().store(flags, n, base, o + SLOT as i32);
                }
            }
        }
        Ok(())
    }

    /// `base + i · size`.
    pub(super) fn element(&mut self, base: Value, i: Value, size: i64) -> Value {
        let off = self.b.ins().imul_imm_s(i, size);
        self.b.ins().iadd(base, off)
    }

    /// A buffer for `count ≥ 0` elements of `size` bytes from the arena,
    /// or from the scratch window when it is the binding's scratch array.
    pub(super) fn alloc(&mut self, count: Value, size: i64) -> R<Value> {
        let too_big =
            self.b
                .ins()
                .icmp_imm_s(IntCC::SignedGreaterThan, count, i64::MAX / size.max(1));
        let (max, zero) = (self.iconst(i64::MAX), self.iconst(0));
        self.fail_if(too_big, abi::OUT_OF_MEMORY, max, zero);
        let bytes = self.b.ins().imul_imm_s(count, size);
        if let Some(k) = self.into_scratch.take() {
            return self.alloc_scratch(k, bytes);
        }
        let p = self.call1("fsmooth_alloc", &[self.ctx, bytes])?;
        let null = self.b.ins().icmp_imm_s(IntCC::Equal, p, 0);
        self.fail_if(null, abi::OUT_OF_MEMORY, bytes, zero);
        Ok(p)
    }

    /// `0 ≤ bytes` bytes from the scratch window (Note [Scratch arrays]):
    /// the bump pointer moves when the rounded size fits (zero bytes always
    /// fit, possibly at the null window), else `fsmooth_scratch` opens a
    /// new window; its null is the out-of-memory status.
    fn alloc_scratch(&mut self, k: usize, bytes: Value) -> R<Value> {
        let flags = self.windows;
        let [_, cur_at, end_at] = ctx_window(k);
        // bytes ≤ i64::MAX, so bytes + 7 does not wrap as unsigned.
        let r = self.b.ins().iadd_imm_s(bytes, 7);
        let rounded = self.b.ins().band_imm_s(r, !7);
        let cur = self.b.ins().load(types::I64, flags, self.ctx, cur_at);
        let end = self.b.ins().load(types::I64, flags, self.ctx, end_at);
        let room = self.b.ins().isub(end, cur);
        let fits = self
            .b
            .ins()
            .icmp(IntCC::UnsignedLessThanOrEqual, rounded, room);
        let (fast, slow, join) = self.diamond(fits, &[types::I64]);
        self.b.switch_to_block(fast);
        let next = self.b.ins().iadd(cur, rounded);
        self.b.ins().store(flags, next, self.ctx, cur_at);
        self.b.ins().jump(join, &args_of(&[cur]));
        self.b.switch_to_block(slow);
        self.b.set_cold_block(slow);
        let kv = self.iconst(k as i64);
        let p = self.call1("fsmooth_scratch", &[self.ctx, bytes, kv])?;
        let null = self.b.ins().icmp_imm_s(IntCC::Equal, p, 0);
        let zero = self.iconst(0);
        self.fail_if(null, abi::OUT_OF_MEMORY, bytes, zero);
        self.b.ins().jump(join, &args_of(&[p]));
        self.b.switch_to_block(join);
        Ok(self.b.block_params(join)[0])
    }

    pub(super) fn copy(&mut self, dst: Value, src: Value, count: Value, size: i64) -> R<()> {
        let bytes = self.b.ins().imul_imm_s(count, size);
        self.call("fsmooth_copy", &[dst, src, bytes])?;
        Ok(())
    }

    /// One iteration of the loop over `index`: its body, between a mark
    /// and a release of the scratch region when it binds scratch arrays
    /// (Note [Scratch arrays]). The body's values are in registers, or
    /// point to buffers outside the scratch region.
    pub(super) fn iteration(&mut self, index: &Name, body: &AnfBlock) -> R<Vals> {
        let marks = self.mark(index);
        let v = self.block(body)?;
        self.release_marks(&marks)?;
        Ok(v)
    }

    /// At the start of an iteration of the loop named `l`, the mark of
    /// each scratch stack it releases (none when it releases none).
    pub(super) fn mark(&mut self, l: &Name) -> Vec<(usize, Value)> {
        let stacks = self.scratch.loops.get(l).cloned().unwrap_or_default();
        let flags = self.windows;
        stacks
            .into_iter()
            .map(|k| {
                let cur_at = ctx_window(k)[1];
                (k, self.b.ins().load(types::I64, flags, self.ctx, cur_at))
            })
            .collect()
    }

    /// At the end of an iteration, each stack back to its [`mark`](Self::mark).
    pub(super) fn release_marks(&mut self, marks: &[(usize, Value)]) -> R<()> {
        marks
            .iter()
            .try_for_each(|&(k, mark)| self.release(k, mark))
    }

    /// Scratch stack `k` back to `mark`: in the window's chunk, the bump
    /// pointer moves back; in an earlier one, `fsmooth_release` frees the
    /// chunks since.
    fn release(&mut self, k: usize, mark: Value) -> R<()> {
        let flags = self.windows;
        let [base_at, cur_at, _] = ctx_window(k);
        let base = self.b.ins().load(types::I64, flags, self.ctx, base_at);
        let cur = self.b.ins().load(types::I64, flags, self.ctx, cur_at);
        let above = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, mark, base);
        let below = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, mark, cur);
        let here = self.b.ins().band(above, below);
        let (fast, slow, join) = self.diamond(here, &[]);
        self.b.switch_to_block(fast);
        self.b.ins().store(flags, mark, self.ctx, cur_at);
        self.b.ins().jump(join, &[]);
        self.b.switch_to_block(slow);
        self.b.set_cold_block(slow);
        let kv = self.iconst(k as i64);
        self.call("fsmooth_release", &[self.ctx, mark, kv])?;
        self.b.ins().jump(join, &[]);
        self.b.switch_to_block(join);
        Ok(())
    }
}
