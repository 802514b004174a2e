//! Ahead-of-time output: an entry compiled by cranelift-object into a
//! relocatable, position-independent object file for the host, plus the C
//! header that describes it (`codegen/backend/header.rs`). The object needs
//! only libc and libm (`gcc main.c out.o -lm`).
//!
//! The object holds, for an entry compiled under the symbol `S`:
//!
//! - `S_slots`, the slot-level entry (`codegen/backend/module.rs`), lowered by
//!   the same `lower_function` as the JIT's;
//! - `S`, a typed C-ABI wrapper: one C parameter per scalar leaf of the
//!   parameters (an array is a pointer and a length), one out-pointer per
//!   leaf of the result; it packs the slots on its stack and calls `S_slots`;
//! - the helpers, as local functions written in Cranelift IR:
//!   `fsmooth_alloc` (the context's arena, below), `fsmooth_scratch` and
//!   `fsmooth_release` (the scratch stacks' blocks), `fsmooth_copy`
//!   (`memcpy`) and `fsmooth_ipow`; the math helpers are libm's `sin`,
//!   `cos`, `tan`, `log`, `exp` and `pow`, the functions the evaluator's
//!   Rust `f64` methods call on this host;
//! - `fsmooth_ctx_release`, which frees every block of a context, and
//!   `fsmooth_ctx_reset`, which keeps them for later calls. They are weak
//!   symbols, so several fsmooth objects link into one program.
//!
//! # Note [AOT memory]
//!
//! The caller owns a `fsmooth_ctx` (initialised with `FSMOOTH_CTX_INIT`).
//! Each call allocates the arrays it builds from the context and never
//! frees them itself: result arrays point into the context (or into the
//! caller's own argument arrays, which a result may share) and stay valid
//! until `fsmooth_ctx_release(&ctx)`, which frees all of them at once and
//! leaves the context ready for reuse, or `fsmooth_ctx_reset(&ctx)`.
//!
//! The arena is a list of `malloc`ed blocks. The newest is a *chunk* of
//! [`CHUNK`] bytes (64 KiB) from which arrays are bumped, 8-byte aligned;
//! an array of more than a quarter of a chunk gets a block of its own,
//! linked behind the chunk so that the chunk's room stays in use (the
//! JIT's `runtime::Arena` does the same with 1 MiB chunks). One `malloc`
//! per array, as before, spent more time in `malloc` and `free` than in
//! the code on ADBench GMM's reverse-mode gradient (`perf`: 55% of the
//! cycles in `malloc_consolidate`, `_int_malloc`, `free` and the release).
//! Chunks stay under glibc's threshold for `mmap` (128 KiB): 256 KiB and
//! 1 MiB chunks came from `mmap` and were unmapped by every release, and
//! the next call faulted all its pages in again (GMM 90 ms a call against
//! 43 ms with 64 KiB chunks). `fsmooth_ctx_reset` avoids the system
//! altogether: the arena's blocks join the context's *spare* list, and a
//! new chunk or block is the first spare that holds it and at most twice
//! as much, if any (GMM: 32 ms a call, about the JIT's 30–32 ms).
//!
//! `ctx.used` counts the chunks and blocks in use (not the spares) and the
//! scratch blocks; `ctx.limit` (bytes, 0 for none) bounds it, spares included
//! when one is taken, so whether a call runs out of memory does not depend on
//! earlier calls. Arrays that do not outlive a loop iteration (Note [Scratch
//! arrays] in `codegen/passes/scratch.rs`) come from two more lists of blocks
//! of at least 64 KiB, the scratch stacks, which the loops release as they go
//! (a stack keeps one block between iterations and between calls); what a ⊥
//! leaves there is freed by `fsmooth_ctx_release` too. A released scratch
//! block joins the spares, and a new one is a spare when one fits, as the
//! arena's blocks are: a loop whose iterations each need more than one block
//! takes no memory from the system after its first iteration. (Freed and
//! allocated again, such blocks — glibc maps the large ones — faulted their
//! pages in at every iteration: BA's `fwd-opt` Jacobian took 8 000 page faults
//! and 88 ms a call, 58 ms with spares.)

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    AbiParam, BlockArg, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind, UserFuncName,
    Value, types,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{FuncId, Linkage, Module, default_libcall_names};
use cranelift_object::{ObjectBuilder, ObjectModule};

use super::c_signature::{CParam, c_identifier, c_params, c_results, is_c_reserved};
use super::header;
use super::module::{
    HELPERS, define_entry, define_lane_constants, entry_signature, host_fma, host_isa, signature,
};
use crate::anf::Normal;
use crate::codegen::abi::{
    self, CTX_A, CTX_ARENA, CTX_B, CTX_LIMIT, CTX_SCRATCH, CTX_SPARE, CTX_TEMPS, CTX_USED,
};
use crate::codegen::layout::{Leaf, SLOT, leaves, slots};
use crate::codegen::{CodegenError, compile_error};
use crate::ir::Type;

/// Bytes before each block's data: the link to the previous block and the
/// block's size in bytes (what it adds to `ctx.used`), which keeps
/// `malloc`'s 16-byte alignment.
const BLOCK_HEADER: i64 = 16;

/// What the object file is built from and called.
#[derive(Clone, Debug)]
pub struct AotOptions {
    /// The C symbol of the typed entry; the slot-level one is `{symbol}_slots`.
    pub symbol: String,
    /// One line for the header's opening comment (source, entry, mode).
    pub origin: String,
    /// Also return the slot-level entry's Cranelift IR and machine code.
    pub listing: bool,
    /// The floating-point contract of the object's code (spec/semantics.md
    /// §7); single-threaded under either.
    pub fp: crate::codegen::FpContract,
}

/// A compiled object file and its header.
#[derive(Clone, Debug)]
pub struct ObjectCode {
    pub object: Vec<u8>,
    pub header: String,
    /// With `AotOptions::listing`: the IR as lowered, then the machine code.
    pub listing: Option<String>,
}

/// Names an exported symbol must not take: what the object imports (libc,
/// libm) and what every C program defines.
const LINKED_NAMES: [&str; 11] = [
    "main", "malloc", "free", "memcpy", "memset", "sin", "cos", "tan", "log", "exp", "pow",
];

/// The default exported symbol of an entry: its C identifier, with
/// `suffix`, and `_entry` after it when that is a name it may not take
/// (the entry `main`, say).
pub fn default_symbol(entry: &str, suffix: &str) -> String {
    let s = format!("{}{suffix}", c_identifier(entry));
    if is_c_reserved(&s) || LINKED_NAMES.contains(&s.as_str()) || s.starts_with("fsmooth_") {
        format!("{s}_entry")
    } else {
        s
    }
}

/// Compiles the normal form of an entry whose parameters are `params`
/// (names for the header, and types) into an object file exporting
/// `options.symbol` and `{symbol}_slots`, with its C header.
pub fn compile_object(
    normal: &Normal,
    params: &[(String, Type)],
    options: &AotOptions,
) -> Result<ObjectCode, CodegenError> {
    let symbol = &options.symbol;
    let reason = if c_identifier(symbol) != *symbol {
        Some("use letters, digits and `_`, not starting with a digit")
    } else if symbol.starts_with("fsmooth_") {
        Some("the prefix `fsmooth_` is reserved for the runtime")
    } else if is_c_reserved(symbol) || LINKED_NAMES.contains(&symbol.as_str()) {
        Some("it is a C keyword or a name the object or a C program links against")
    } else {
        None
    };
    if let Some(reason) = reason {
        return Err(CodegenError::InvalidSymbol {
            symbol: symbol.clone(),
            reason,
        });
    }
    let params: Vec<(String, Type)> = params.to_vec();
    let result = normal.body.result.ty().clone();
    let builder = ObjectBuilder::new(host_isa(true)?, symbol.as_bytes(), default_libcall_names())
        .map_err(compile_error)?;
    let mut module = ObjectModule::new(builder);
    let helpers = define_helpers(&mut module)?;
    let relaxed = options.fp == crate::codegen::FpContract::Relaxed;
    let constants = define_lane_constants(&mut module, relaxed)?;
    let fma = host_fma(module.isa());
    let mut listing = options.listing.then(String::new);
    let (raw, _) = define_entry(
        &mut module,
        &format!("{symbol}_slots"),
        Linkage::Export,
        normal,
        (&helpers, constants),
        listing.as_mut(),
        crate::codegen::lower::LowerOptions {
            limits: false,
            threads: 1,
            relaxed,
            fma,
            avx2: false,
            first_site: 0,
        },
    )?;
    let cps = c_params(&params)?;
    let crs = c_results(&result)?;
    define_wrapper(&mut module, symbol, raw, &params, &result, &cps, &crs)?;
    define_release(&mut module)?;
    define_reset(&mut module)?;
    let object = module
        .finish()
        .emit()
        .map_err(|e| compile_error(format!("object file: {e}")))?;
    let header = header::header(symbol, &options.origin, &params, &result, &cps, &crs)?;
    Ok(ObjectCode {
        object,
        header,
        listing,
    })
}

fn import<M: Module>(
    m: &mut M,
    name: &str,
    ps: &[types::Type],
    rs: &[types::Type],
) -> Result<FuncId, CodegenError> {
    let sig = signature(m, ps, rs);
    m.declare_function(name, Linkage::Import, &sig)
        .map_err(compile_error)
}

/// Provides every helper of [`HELPERS`]: libm for the math functions, local
/// Cranelift functions for the rest.
fn define_helpers(m: &mut ObjectModule) -> Result<Vec<(&'static str, FuncId)>, CodegenError> {
    let mut out = Vec::new();
    for h in &HELPERS {
        let id = match h.name {
            "fsmooth_alloc" => define_arena_alloc(m, h.name)?,
            "fsmooth_scratch" => {
                let block = define_alloc(m, "fsmooth_temp_block")?;
                define_scratch(m, h.name, block)?
            }
            "fsmooth_release" => define_release_to(m, h.name)?,
            "fsmooth_copy" => define_copy(m, h.name)?,
            "fsmooth_zero" => define_zero(m, h.name)?,
            "fsmooth_ipow" => define_ipow(m, h.name)?,
            other => {
                // fsmooth_sin → sin, …: libm computes what Rust's f64
                // methods compute (they call it).
                let libm = match other {
                    "fsmooth_sin" => "sin",
                    "fsmooth_cos" => "cos",
                    "fsmooth_tan" => "tan",
                    "fsmooth_log" => "log",
                    "fsmooth_exp" => "exp",
                    "fsmooth_pow" => "pow",
                    _ => return Err(compile_error(format!("no provider for helper `{other}`"))),
                };
                import(m, libm, h.params, h.results)?
            }
        };
        out.push((h.name, id));
    }
    Ok(out)
}

/// Declares `name` with `ps → rs` and builds its body with `body`.
fn define_fn(
    m: &mut ObjectModule,
    name: &str,
    linkage: Linkage,
    sig: cranelift_codegen::ir::Signature,
    body: impl FnOnce(
        &mut ObjectModule,
        &mut FunctionBuilder<'_>,
        &[cranelift_codegen::ir::Value],
    ) -> Result<(), CodegenError>,
) -> Result<FuncId, CodegenError> {
    let id = m
        .declare_function(name, linkage, &sig)
        .map_err(compile_error)?;
    let mut ctx = m.make_context();
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(0, id.as_u32());
    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let params = b.block_params(entry).to_vec();
        body(m, &mut b, &params)?;
        b.seal_all_blocks();
        b.finalize(m.target_config());
    }
    m.define_function(id, &mut ctx)
        .map_err(|e| compile_error(format!("{e:?}")))?;
    m.clear_context(&mut ctx);
    Ok(id)
}

fn barg(v: cranelift_codegen::ir::Value) -> BlockArg {
    BlockArg::from(v)
}

/// `fsmooth_temp_block(ctx, bytes, head)`: a block of at least `bytes`, a
/// spare or `16 + bytes` from `malloc`, linked in front of the list whose
/// head is at the address `head` (a scratch stack's, for
/// `fsmooth_scratch`); null past `ctx.limit` (when non-zero) or when
/// `malloc` fails.
fn define_alloc(m: &mut ObjectModule, name: &str) -> Result<FuncId, CodegenError> {
    use types::I64;
    let malloc = import(m, "malloc", &[I64], &[I64])?;
    let sig = signature(m, &[I64, I64, I64], &[I64]);
    define_fn(m, name, Linkage::Local, sig, |m, b, p| {
        let (ctx, bytes, head_at) = (p[0], p[1], p[2]);
        let malloc = m.declare_func_in_func(malloc, b.func);
        let flags = MemFlagsData::trusted();
        let null = b.create_block();
        let get = b.create_block();
        let neg = b.ins().icmp_imm_s(IntCC::SignedLessThan, bytes, 0);
        let check = b.create_block();
        b.ins().brif(neg, null, &[], check, &[]);
        b.switch_to_block(check);
        within_limit(b, ctx, bytes, BLOCK_HEADER, null, get);
        b.switch_to_block(get);
        // A spare that holds `bytes`, at most twice as many and within the
        // limit (the first such, as `fsmooth_alloc` takes them); its
        // capacity as a block of this list is the arena's plus the chunk
        // header's extra words. Else `malloc`.
        let link = b.create_block();
        b.append_block_param(link, I64); // the block
        b.append_block_param(link, I64); // its capacity
        let new = take_spare(b, ctx, bytes, CHUNK_HEADER - BLOCK_HEADER, link);
        b.switch_to_block(new);
        let size = b.ins().iadd_imm_s(bytes, BLOCK_HEADER);
        let call = b.ins().call(malloc, &[size]);
        let blk = b.inst_results(call)[0];
        let failed = b.ins().icmp_imm_s(IntCC::Equal, blk, 0);
        b.ins()
            .brif(failed, null, &[], link, &[barg(blk), barg(bytes)]);
        b.switch_to_block(link);
        let (blk, cap) = {
            let ps = b.block_params(link);
            (ps[0], ps[1])
        };
        let head = b.ins().load(I64, flags, head_at, 0);
        b.ins().store(flags, head, blk, 0);
        b.ins().store(flags, cap, blk, 8);
        b.ins().store(flags, blk, head_at, 0);
        // A spare may hold more than asked for: count what it holds.
        let used = b.ins().load(I64, flags, ctx, CTX_USED);
        let total = b.ins().iadd(used, cap);
        b.ins().store(flags, total, ctx, CTX_USED);
        let data = b.ins().iadd_imm_s(blk, BLOCK_HEADER);
        b.ins().return_(&[data]);
        b.switch_to_block(null);
        let z = b.ins().iconst(I64, 0);
        b.ins().return_(&[z]);
        Ok(())
    })
}

/// Branches to `ok` with `ctx.used + bytes` (returned) when it neither
/// overflows (with `slack` more) nor passes `ctx.limit` (when non-zero),
/// else to `null`.
fn within_limit(
    b: &mut FunctionBuilder,
    ctx: Value,
    bytes: Value,
    slack: i64,
    null: cranelift_codegen::ir::Block,
    ok: cranelift_codegen::ir::Block,
) -> Value {
    use types::I64;
    let flags = MemFlagsData::trusted();
    let limited = b.create_block();
    let used = b.ins().load(I64, flags, ctx, CTX_USED);
    let (total, of) = b.ins().sadd_overflow(used, bytes);
    let big = b
        .ins()
        .icmp_imm_s(IntCC::SignedGreaterThan, bytes, i64::MAX - slack);
    let bad = b.ins().bor(of, big);
    b.ins().brif(bad, null, &[], limited, &[]);
    b.switch_to_block(limited);
    let limit = b.ins().load(I64, flags, ctx, CTX_LIMIT);
    let has = b.ins().icmp_imm_s(IntCC::NotEqual, limit, 0);
    let over = b.ins().icmp(IntCC::SignedGreaterThan, total, limit);
    let refuse = b.ins().band(has, over);
    b.ins().brif(refuse, null, &[], ok, &[]);
    total
}

/// Takes a spare block for `want` bytes (Note [AOT memory]): the first on
/// the context's spare list whose capacity plus `extra` (the bytes a block
/// of the caller's list holds beyond an arena block of that capacity)
/// holds `want`, at most twice as many, and fits under `ctx.limit` (as
/// `Arena::chunk`). It leaves the list and `link` gets it and that
/// capacity plus `extra`; the returned block, not yet filled, is where the
/// walk ends without one.
fn take_spare(
    b: &mut FunctionBuilder,
    ctx: Value,
    want: Value,
    extra: i64,
    link: cranelift_codegen::ir::Block,
) -> cranelift_codegen::ir::Block {
    use types::I64;
    let flags = MemFlagsData::trusted();
    let [walk, look, take, skip, none] = [(); 5].map(|_| b.create_block());
    b.append_block_param(walk, I64); // the address of the link to `blk`
    let used = b.ins().load(I64, flags, ctx, CTX_USED);
    let limit = b.ins().load(I64, flags, ctx, CTX_LIMIT);
    let left = b.ins().isub(limit, used);
    let unlimited = b.ins().icmp_imm_s(IntCC::Equal, limit, 0);
    let most = b.ins().iconst(I64, i64::MAX);
    let room = b.ins().select(unlimited, most, left);
    let spare_at = b.ins().iadd_imm_s(ctx, i64::from(CTX_SPARE));
    b.ins().jump(walk, &[barg(spare_at)]);
    b.switch_to_block(walk);
    let at = b.block_params(walk)[0];
    let blk = b.ins().load(I64, flags, at, 0);
    let end = b.ins().icmp_imm_s(IntCC::Equal, blk, 0);
    b.ins().brif(end, none, &[], look, &[]);
    b.switch_to_block(look);
    let cap = b.ins().load(I64, flags, blk, 8);
    let have = b.ins().iadd_imm_s(cap, extra);
    let enough = b.ins().icmp(IntCC::SignedGreaterThanOrEqual, have, want);
    let twice = b.ins().ishl_imm_u(want, 1);
    let not_more = b.ins().icmp(IntCC::SignedLessThanOrEqual, have, twice);
    let allowed = b.ins().icmp(IntCC::SignedLessThanOrEqual, have, room);
    let fit = b.ins().band(enough, not_more);
    let fit = b.ins().band(fit, allowed);
    b.ins().brif(fit, take, &[], skip, &[]);
    b.switch_to_block(skip);
    b.ins().jump(walk, &[barg(blk)]);
    b.switch_to_block(take);
    let after = b.ins().load(I64, flags, blk, 0);
    b.ins().store(flags, after, at, 0);
    b.ins().jump(link, &[barg(blk), barg(have)]);
    none
}

/// The size of a chunk of the context's arena: arrays up to a quarter of
/// it share one. Under glibc's `mmap` threshold (Note [AOT memory]).
const CHUNK: i64 = 1 << 16;
/// Bytes before an arena chunk's arrays: the block header, then the
/// chunk's bump pointer and a word that keeps 16-byte alignment.
const CHUNK_HEADER: i64 = BLOCK_HEADER + 16;

/// `fsmooth_alloc(ctx, bytes)`: `bytes` (rounded up to 8) from the
/// context's arena (Note [AOT memory]). The arena is the list of blocks
/// at `ctx.arena`; its head is a chunk of [`CHUNK`] bytes whose bump
/// pointer, after the block header, says how much of it is taken. A
/// request that does not fit takes a new chunk, which becomes the head;
/// one of more than a quarter of a chunk gets a block of its own, linked
/// behind the head so that the head's room stays in use. A new chunk or
/// block is a spare (`fsmooth_ctx_reset`) when one fits. `ctx.used` counts
/// the chunks' and blocks' bytes, as the JIT's arena counts its chunks.
/// Zero bytes take nothing (the pointer is never read). Null past
/// `ctx.limit` or when `malloc` fails.
fn define_arena_alloc(m: &mut ObjectModule, name: &str) -> Result<FuncId, CodegenError> {
    use types::I64;
    let malloc = import(m, "malloc", &[I64], &[I64])?;
    let sig = signature(m, &[I64, I64], &[I64]);
    define_fn(m, name, Linkage::Local, sig, |m, b, p| {
        let (ctx, bytes) = (p[0], p[1]);
        let malloc = m.declare_func_in_func(malloc, b.func);
        let flags = MemFlagsData::trusted();
        let [
            null,
            empty,
            sized,
            has_head,
            bump,
            fresh,
            get,
            link,
            behind,
            front,
        ] = [(); 10].map(|_| b.create_block());
        // Negative and huge requests fail; zero bytes take nothing.
        let bad = b
            .ins()
            .icmp_imm_s(IntCC::UnsignedGreaterThan, bytes, i64::MAX - 64);
        let nothing = b.ins().icmp_imm_s(IntCC::Equal, bytes, 0);
        let go = b.create_block();
        b.ins().brif(bad, null, &[], go, &[]);
        b.switch_to_block(go);
        b.ins().brif(nothing, empty, &[], sized, &[]);
        b.switch_to_block(empty);
        b.ins().return_(&[ctx]);
        b.switch_to_block(sized);
        let r = b.ins().iadd_imm_s(bytes, 7);
        let rounded = b.ins().band_imm_s(r, !7);
        let head = b.ins().load(I64, flags, ctx, CTX_ARENA);
        let none = b.ins().icmp_imm_s(IntCC::Equal, head, 0);
        b.ins().brif(none, fresh, &[], has_head, &[]);
        // The head chunk's room: from its bump pointer to its end.
        b.switch_to_block(has_head);
        let cur = b.ins().load(I64, flags, head, BLOCK_HEADER as i32);
        let cap = b.ins().load(I64, flags, head, 8);
        let end = b.ins().iadd(head, cap);
        let end = b.ins().iadd_imm_s(end, CHUNK_HEADER);
        let room = b.ins().isub(end, cur);
        let fits = b.ins().icmp(IntCC::UnsignedLessThanOrEqual, rounded, room);
        b.ins().brif(fits, bump, &[], fresh, &[]);
        b.switch_to_block(bump);
        let next = b.ins().iadd(cur, rounded);
        b.ins().store(flags, next, head, BLOCK_HEADER as i32);
        b.ins().return_(&[cur]);
        // A new chunk, or a block of its own for a large request.
        b.switch_to_block(fresh);
        let large = b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThan, rounded, CHUNK / 4);
        let chunk = b.ins().iconst(I64, CHUNK);
        let cap = b.ins().select(large, rounded, chunk);
        within_limit(b, ctx, cap, CHUNK_HEADER, null, get);
        b.switch_to_block(get);
        // A spare block that holds `cap` bytes, at most twice as many, if
        // any; else `malloc`.
        b.append_block_param(link, I64); // the block
        b.append_block_param(link, I64); // its capacity
        let new = take_spare(b, ctx, cap, 0, link);
        b.switch_to_block(new);
        let size = b.ins().iadd_imm_s(cap, CHUNK_HEADER);
        let call = b.ins().call(malloc, &[size]);
        let blk = b.inst_results(call)[0];
        let failed = b.ins().icmp_imm_s(IntCC::Equal, blk, 0);
        b.ins()
            .brif(failed, null, &[], link, &[barg(blk), barg(cap)]);
        b.switch_to_block(link);
        let (blk, cap) = {
            let ps = b.block_params(link);
            (ps[0], ps[1])
        };
        // A spare may be larger than asked for: count what it holds.
        let used = b.ins().load(I64, flags, ctx, CTX_USED);
        let total = b.ins().iadd(used, cap);
        b.ins().store(flags, cap, blk, 8);
        b.ins().store(flags, total, ctx, CTX_USED);
        let data = b.ins().iadd_imm_s(blk, CHUNK_HEADER);
        let taken = b.ins().iadd(data, rounded);
        b.ins().store(flags, taken, blk, BLOCK_HEADER as i32);
        let some = b.ins().icmp_imm_s(IntCC::NotEqual, head, 0);
        let keep = b.ins().band(large, some);
        b.ins().brif(keep, behind, &[], front, &[]);
        b.switch_to_block(behind);
        let after = b.ins().load(I64, flags, head, 0);
        b.ins().store(flags, after, blk, 0);
        b.ins().store(flags, blk, head, 0);
        b.ins().return_(&[data]);
        b.switch_to_block(front);
        b.ins().store(flags, head, blk, 0);
        b.ins().store(flags, blk, ctx, CTX_ARENA);
        b.ins().return_(&[data]);
        b.switch_to_block(null);
        let z = b.ins().iconst(I64, 0);
        b.ins().return_(&[z]);
        Ok(())
    })
}

/// The least size of a scratch block (Note [Scratch arrays] in
/// `codegen/passes/scratch.rs`), a window many iterations' arrays share.
const TEMP_BLOCK: i64 = 1 << 16;

/// The addresses of scratch stack `k`'s list head and window in `ctx`.
fn stack_fields(b: &mut FunctionBuilder, ctx: Value, k: Value) -> (Value, Value) {
    let k8 = b.ins().imul_imm_s(k, 8);
    let head = b.ins().iadd(ctx, k8);
    let head = b.ins().iadd_imm_s(head, i64::from(CTX_TEMPS));
    let k24 = b.ins().imul_imm_s(k, 24);
    let win = b.ins().iadd(ctx, k24);
    let win = b.ins().iadd_imm_s(win, i64::from(abi::ctx_window(0)[0]));
    (head, win)
}

/// `fsmooth_scratch(ctx, bytes, k)`: a new block of scratch stack `k` of
/// at least [`TEMP_BLOCK`] bytes (from `block`, `fsmooth_alloc` on the
/// stack's list), which becomes the stack's window with its first `bytes`
/// (rounded up to 8) taken; null when memory runs out.
fn define_scratch(m: &mut ObjectModule, name: &str, block: FuncId) -> Result<FuncId, CodegenError> {
    use types::I64;
    let sig = signature(m, &[I64, I64, I64], &[I64]);
    define_fn(m, name, Linkage::Local, sig, |m, b, p| {
        let (ctx, bytes, k) = (p[0], p[1], p[2]);
        let (head_at, win) = stack_fields(b, ctx, k);
        let block = m.declare_func_in_func(block, b.func);
        let flags = MemFlagsData::trusted();
        let (get, window, null) = (b.create_block(), b.create_block(), b.create_block());
        let huge = b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThan, bytes, i64::MAX - 64);
        b.ins().brif(huge, null, &[], get, &[]);
        b.switch_to_block(get);
        let r = b.ins().iadd_imm_s(bytes, 7);
        let rounded = b.ins().band_imm_s(r, !7);
        let least = b.ins().iconst(I64, TEMP_BLOCK);
        let small = b.ins().icmp(IntCC::SignedLessThan, rounded, least);
        let want = b.ins().select(small, least, rounded);
        let call = b.ins().call(block, &[ctx, want, head_at]);
        let base = b.inst_results(call)[0];
        let failed = b.ins().icmp_imm_s(IntCC::Equal, base, 0);
        b.ins().brif(failed, null, &[], window, &[]);
        b.switch_to_block(window);
        let cur = b.ins().iadd(base, rounded);
        let end = b.ins().iadd(base, want);
        b.ins().store(flags, base, win, 0);
        b.ins().store(flags, cur, win, 8);
        b.ins().store(flags, end, win, 16);
        b.ins().return_(&[base]);
        b.switch_to_block(null);
        let z = b.ins().iconst(I64, 0);
        b.ins().return_(&[z]);
        Ok(())
    })
}

/// `fsmooth_release(ctx, mark, k)`: moves the blocks of scratch stack `k`
/// allocated after `mark` to the context's spares (Note [AOT memory]),
/// taking their bytes off `ctx.used`, and sets the
/// window as `Arena::release_scratch` does: the block that holds `mark`
/// (its end included) from `mark` on; all of the block after one that ends
/// at `mark`; all of the oldest block when none holds it (`mark` is 0).
fn define_release_to(m: &mut ObjectModule, name: &str) -> Result<FuncId, CodegenError> {
    use types::I64;
    let sig = signature(m, &[I64, I64, I64], &[]);
    define_fn(m, name, Linkage::Local, sig, |_, b, p| {
        let (ctx, mark, k) = (p[0], p[1], p[2]);
        let (head_at, win) = stack_fields(b, ctx, k);
        let flags = MemFlagsData::trusted();
        let [header, test, older, prev, drop, keep, done] = [(); 7].map(|_| b.create_block());
        b.append_block_param(keep, I64);
        b.append_block_param(keep, I64);
        let head = b.ins().load(I64, flags, head_at, 0);
        b.append_block_param(header, I64);
        b.ins().jump(header, &[barg(head)]);
        // header(blk): the newest block left; none left → done.
        b.switch_to_block(header);
        let blk = b.block_params(header)[0];
        let empty = b.ins().icmp_imm_s(IntCC::Equal, blk, 0);
        b.ins().brif(empty, done, &[], test, &[]);
        b.switch_to_block(test);
        let base = b.ins().iadd_imm_s(blk, BLOCK_HEADER);
        let size = b.ins().load(I64, flags, blk, 8);
        let end = b.ins().iadd(base, size);
        let above = b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, mark, base);
        let below = b.ins().icmp(IntCC::UnsignedLessThanOrEqual, mark, end);
        let holds = b.ins().band(above, below);
        b.ins()
            .brif(holds, keep, &[barg(blk), barg(mark)], older, &[]);
        b.switch_to_block(older);
        let next = b.ins().load(I64, flags, blk, 0);
        let oldest = b.ins().icmp_imm_s(IntCC::Equal, next, 0);
        b.ins()
            .brif(oldest, keep, &[barg(blk), barg(base)], prev, &[]);
        b.switch_to_block(prev);
        let prev_size = b.ins().load(I64, flags, next, 8);
        let prev_end = b.ins().iadd(next, prev_size);
        let prev_end = b.ins().iadd_imm_s(prev_end, BLOCK_HEADER);
        let after = b.ins().icmp(IntCC::Equal, prev_end, mark);
        b.ins()
            .brif(after, keep, &[barg(blk), barg(base)], drop, &[]);
        // The dropped block becomes a spare (Note [AOT memory]), in the
        // arena's format: its capacity counted after a chunk's header.
        b.switch_to_block(drop);
        let used = b.ins().load(I64, flags, ctx, CTX_USED);
        let left = b.ins().isub(used, size);
        b.ins().store(flags, left, ctx, CTX_USED);
        b.ins().store(flags, next, head_at, 0);
        let cap = b.ins().iadd_imm_s(size, BLOCK_HEADER - CHUNK_HEADER);
        b.ins().store(flags, cap, blk, 8);
        let spare = b.ins().load(I64, flags, ctx, CTX_SPARE);
        b.ins().store(flags, spare, blk, 0);
        b.ins().store(flags, blk, ctx, CTX_SPARE);
        b.ins().jump(header, &[barg(next)]);
        b.switch_to_block(keep);
        let (blk, cur) = {
            let ps = b.block_params(keep);
            (ps[0], ps[1])
        };
        let base = b.ins().iadd_imm_s(blk, BLOCK_HEADER);
        let size = b.ins().load(I64, flags, blk, 8);
        let end = b.ins().iadd(base, size);
        b.ins().store(flags, base, win, 0);
        b.ins().store(flags, cur, win, 8);
        b.ins().store(flags, end, win, 16);
        b.ins().return_(&[]);
        b.switch_to_block(done);
        let z = b.ins().iconst(I64, 0);
        for at in [0, 8, 16] {
            b.ins().store(flags, z, win, at);
        }
        b.ins().return_(&[]);
        Ok(())
    })
}

/// `fsmooth_copy(dst, src, bytes)`: `memcpy` when `bytes > 0` (an empty
/// array may come with a null pointer from C).
fn define_copy(m: &mut ObjectModule, name: &str) -> Result<FuncId, CodegenError> {
    define_bytes_call(m, name, "memcpy", 3, |_, p| vec![p[0], p[1], p[2]])
}

/// `fsmooth_zero(dst, bytes)`: `memset(dst, 0, bytes)` when `bytes > 0`,
/// as `runtime::fsmooth_zero`.
fn define_zero(m: &mut ObjectModule, name: &str) -> Result<FuncId, CodegenError> {
    define_bytes_call(m, name, "memset", 2, |b, p| {
        vec![p[0], b.ins().iconst(types::I64, 0), p[1]]
    })
}

/// A helper of `params` `i64` parameters, the last a byte count, that
/// calls libc's three-argument `libc` with the arguments `args` makes of
/// them when the count is positive, and does nothing otherwise.
fn define_bytes_call(
    m: &mut ObjectModule,
    name: &str,
    libc: &str,
    params: usize,
    args: impl FnOnce(
        &mut FunctionBuilder<'_>,
        &[cranelift_codegen::ir::Value],
    ) -> Vec<cranelift_codegen::ir::Value>,
) -> Result<FuncId, CodegenError> {
    use types::I64;
    let callee = import(m, libc, &[I64, I64, I64], &[I64])?;
    let sig = signature(m, &vec![I64; params], &[]);
    define_fn(m, name, Linkage::Local, sig, |m, b, p| {
        let callee = m.declare_func_in_func(callee, b.func);
        let (call, done) = (b.create_block(), b.create_block());
        let pos = b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThan, p[params - 1], 0);
        b.ins().brif(pos, call, &[], done, &[]);
        b.switch_to_block(call);
        let a = args(b, p);
        b.ins().call(callee, &a);
        b.ins().jump(done, &[]);
        b.switch_to_block(done);
        b.ins().return_(&[]);
        Ok(())
    })
}

/// `fsmooth_ipow(ctx, x, y)`: Index `**` as `runtime::fsmooth_ipow`
/// computes it (E-Arith, E-Arith-Bot): the exact power in `ctx.scratch`,
/// or a domain error for y < 0, or `integer-overflow` (operator 4).
/// For |x| ≤ 1 the power is closed-form; otherwise |x|ʸ overflows for
/// y ≥ 64, and below that a loop of checked products decides.
fn define_ipow(m: &mut ObjectModule, name: &str) -> Result<FuncId, CodegenError> {
    use types::I64;
    let sig = signature(m, &[I64, I64, I64], &[I64]);
    define_fn(m, name, Linkage::Local, sig, |_, b, p| {
        let (ctx, x, y) = (p[0], p[1], p[2]);
        let flags = MemFlagsData::trusted();
        let domain = b.create_block();
        let nonneg = b.create_block();
        let small = b.create_block();
        let large = b.create_block();
        let header = b.create_block();
        let body = b.create_block();
        let ok = b.create_block();
        let overflow = b.create_block();
        b.append_block_param(ok, I64);
        let neg = b.ins().icmp_imm_s(IntCC::SignedLessThan, y, 0);
        b.ins().brif(neg, domain, &[], nonneg, &[]);
        // y < 0: the domain error, with both operands.
        b.switch_to_block(domain);
        b.ins().store(flags, x, ctx, CTX_A);
        b.ins().store(flags, y, ctx, CTX_B);
        let code = b.ins().iconst(I64, abi::DOMAIN_IPOW);
        b.ins().return_(&[code]);
        // |x| ≤ 1 ⟺ x + 1 ≤ 2 unsigned.
        b.switch_to_block(nonneg);
        let one = b.ins().iconst(I64, 1);
        let x1 = b.ins().iadd_imm_s(x, 1);
        let is_small = b.ins().icmp_imm_s(IntCC::UnsignedLessThanOrEqual, x1, 2);
        b.ins().brif(is_small, small, &[], large, &[]);
        b.switch_to_block(small);
        let minus_one = b.ins().iconst(I64, -1);
        let odd = b.ins().band_imm_s(y, 1);
        let sign = b.ins().select(odd, minus_one, one);
        let is_m1 = b.ins().icmp_imm_s(IntCC::Equal, x, -1);
        let r = b.ins().select(is_m1, sign, x);
        let y0 = b.ins().icmp_imm_s(IntCC::Equal, y, 0);
        let r = b.ins().select(y0, one, r);
        b.ins().jump(ok, &[barg(r)]);
        // |x| ≥ 2.
        b.switch_to_block(large);
        let huge = b.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, y, 64);
        let zero = b.ins().iconst(I64, 0);
        b.append_block_param(header, I64);
        b.append_block_param(header, I64);
        b.ins()
            .brif(huge, overflow, &[], header, &[barg(zero), barg(one)]);
        b.switch_to_block(header);
        let (k, acc) = {
            let hp = b.block_params(header);
            (hp[0], hp[1])
        };
        let more = b.ins().icmp(IntCC::SignedLessThan, k, y);
        b.ins().brif(more, body, &[], ok, &[barg(acc)]);
        b.switch_to_block(body);
        let (acc1, of) = b.ins().smul_overflow(acc, x);
        let k1 = b.ins().iadd_imm_s(k, 1);
        let cont = b.create_block();
        b.ins().brif(of, overflow, &[], cont, &[]);
        b.switch_to_block(cont);
        b.ins().jump(header, &[barg(k1), barg(acc1)]);
        b.switch_to_block(ok);
        let r = b.block_params(ok)[0];
        b.ins().store(flags, r, ctx, CTX_SCRATCH);
        let z = b.ins().iconst(I64, abi::OK);
        b.ins().return_(&[z]);
        b.switch_to_block(overflow);
        let op = b.ins().iconst(I64, 4);
        b.ins().store(flags, op, ctx, CTX_A);
        let code = b.ins().iconst(I64, abi::OVERFLOW);
        b.ins().return_(&[code]);
        Ok(())
    })
}

/// `fsmooth_ctx_release(ctx)`: frees every block of the context and resets
/// it (null is allowed). Weak, so objects of several entries link together.
fn define_release(m: &mut ObjectModule) -> Result<FuncId, CodegenError> {
    use types::I64;
    let free = import(m, "free", &[I64], &[])?;
    let sig = signature(m, &[I64], &[]);
    define_fn(
        m,
        "fsmooth_ctx_release",
        Linkage::Preemptible,
        sig,
        |m, b, p| {
            let ctx = p[0];
            let free = m.declare_func_in_func(free, b.func);
            let flags = MemFlagsData::trusted();
            let (start, reset, done) = (b.create_block(), b.create_block(), b.create_block());
            let is_null = b.ins().icmp_imm_s(IntCC::Equal, ctx, 0);
            b.ins().brif(is_null, done, &[], start, &[]);
            b.switch_to_block(start);
            // The arrays' list, the scratch blocks a ⊥ left behind, and
            // the blocks `fsmooth_ctx_reset` kept.
            for list in [CTX_ARENA, CTX_TEMPS, CTX_TEMPS + 8, CTX_SPARE] {
                let (header, body, next_list) =
                    (b.create_block(), b.create_block(), b.create_block());
                let head = b.ins().load(I64, flags, ctx, list);
                b.append_block_param(header, I64);
                b.ins().jump(header, &[barg(head)]);
                b.switch_to_block(header);
                let blk = b.block_params(header)[0];
                let end = b.ins().icmp_imm_s(IntCC::Equal, blk, 0);
                b.ins().brif(end, next_list, &[], body, &[]);
                b.switch_to_block(body);
                let next = b.ins().load(I64, flags, blk, 0);
                b.ins().call(free, &[blk]);
                b.ins().jump(header, &[barg(next)]);
                b.switch_to_block(next_list);
            }
            b.ins().jump(reset, &[]);
            b.switch_to_block(reset);
            let z = b.ins().iconst(I64, 0);
            let windows = (0..abi::STACKS).flat_map(abi::ctx_window);
            for at in [CTX_ARENA, CTX_TEMPS, CTX_TEMPS + 8, CTX_SPARE, CTX_USED]
                .into_iter()
                .chain(windows)
            {
                b.ins().store(flags, z, ctx, at);
            }
            b.ins().jump(done, &[]);
            b.switch_to_block(done);
            b.ins().return_(&[]);
            Ok(())
        },
    )
}

/// `fsmooth_ctx_reset(ctx)`: every block of the context's arena joins the
/// spare list, its bytes leave `ctx.used`, and the arena is empty: the
/// arrays of earlier calls are gone, their memory serves the next calls
/// (Note [AOT memory]). Scratch blocks stay as they are. A weak symbol,
/// like `fsmooth_ctx_release`.
fn define_reset(m: &mut ObjectModule) -> Result<FuncId, CodegenError> {
    use types::I64;
    let sig = signature(m, &[I64], &[]);
    define_fn(
        m,
        "fsmooth_ctx_reset",
        Linkage::Preemptible,
        sig,
        |_, b, p| {
            let ctx = p[0];
            let flags = MemFlagsData::trusted();
            let [start, header, body, done] = [(); 4].map(|_| b.create_block());
            let is_null = b.ins().icmp_imm_s(IntCC::Equal, ctx, 0);
            b.ins().brif(is_null, done, &[], start, &[]);
            b.switch_to_block(start);
            let head = b.ins().load(I64, flags, ctx, CTX_ARENA);
            b.append_block_param(header, I64);
            b.ins().jump(header, &[barg(head)]);
            b.switch_to_block(header);
            let blk = b.block_params(header)[0];
            let end = b.ins().icmp_imm_s(IntCC::Equal, blk, 0);
            b.ins().brif(end, done, &[], body, &[]);
            b.switch_to_block(body);
            let next = b.ins().load(I64, flags, blk, 0);
            let spare = b.ins().load(I64, flags, ctx, CTX_SPARE);
            b.ins().store(flags, spare, blk, 0);
            b.ins().store(flags, blk, ctx, CTX_SPARE);
            let cap = b.ins().load(I64, flags, blk, 8);
            let used = b.ins().load(I64, flags, ctx, CTX_USED);
            let left = b.ins().isub(used, cap);
            b.ins().store(flags, left, ctx, CTX_USED);
            b.ins().store(flags, next, ctx, CTX_ARENA);
            b.ins().jump(header, &[barg(next)]);
            b.switch_to_block(done);
            b.ins().return_(&[]);
            Ok(())
        },
    )
}

/// The typed entry: `(ctx, parameter leaves…, result out-pointers…) ->
/// status`. It stores the leaves into a slot buffer on its stack, calls the
/// slot-level entry, and on success stores the result's slots through the
/// out-pointers (which it leaves untouched on ⊥).
#[allow(clippy::too_many_arguments, reason = "the parts of one signature")]
fn define_wrapper(
    m: &mut ObjectModule,
    symbol: &str,
    raw: FuncId,
    params: &[(String, Type)],
    result: &Type,
    cps: &[CParam],
    crs: &[CParam],
) -> Result<FuncId, CodegenError> {
    use types::I64;
    let mut sig = m.make_signature();
    sig.params.push(AbiParam::new(I64));
    for p in cps.iter().chain(crs) {
        sig.params.push(AbiParam::new(p.clif));
    }
    sig.returns.push(AbiParam::new(I64));
    let raw_sig = entry_signature(m);
    debug_assert_eq!(raw_sig.params.len(), 3);
    let in_slots: usize = params
        .iter()
        .map(|(_, t)| slots(t))
        .sum::<Result<usize, _>>()?;
    let out_slots = slots(result)?;
    let mut in_leaves = Vec::new();
    let mut at = 0i32;
    for (_, t) in params {
        leaves(t, at, &mut in_leaves)?;
        at += (slots(t)? as i64 * SLOT) as i32;
    }
    let mut out_leaves = Vec::new();
    leaves(result, 0, &mut out_leaves)?;
    define_fn(m, symbol, Linkage::Export, sig, |m, b, p| {
        let raw = m.declare_func_in_func(raw, b.func);
        let flags = MemFlagsData::trusted();
        let bytes = |n: usize| u32::try_from((n.max(1) as i64 * SLOT) as u64).unwrap_or(u32::MAX);
        let ins = b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            bytes(in_slots),
            3,
        ));
        let outs = b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            bytes(out_slots),
            3,
        ));
        let ctx = p[0];
        let mut args = p[1..].iter().copied();
        let mut next = || {
            args.next()
                .ok_or_else(|| compile_error("too few wrapper parameters"))
        };
        for leaf in &in_leaves {
            match *leaf {
                Leaf::Double(o) | Leaf::Index(o) | Leaf::Bool(o) => {
                    let v = next()?;
                    b.ins().stack_store(I64, v, ins, o);
                }
                Leaf::Array(o, _) => {
                    let (ptr, len) = (next()?, next()?);
                    b.ins().stack_store(I64, ptr, ins, o);
                    b.ins().stack_store(I64, len, ins, o + SLOT as i32);
                }
            }
        }
        let in_addr = b.ins().stack_addr(I64, ins, 0);
        let out_addr = b.ins().stack_addr(I64, outs, 0);
        let call = b.ins().call(raw, &[ctx, in_addr, out_addr]);
        let status = b.inst_results(call)[0];
        let (store, done) = (b.create_block(), b.create_block());
        b.ins().brif(status, done, &[], store, &[]);
        b.switch_to_block(store);
        for leaf in &out_leaves {
            match *leaf {
                Leaf::Double(o) => {
                    let v = b.ins().stack_load(I64, types::F64, outs, o);
                    let dst = next()?;
                    b.ins().store(flags, v, dst, 0);
                }
                Leaf::Index(o) => {
                    let v = b.ins().stack_load(I64, I64, outs, o);
                    let dst = next()?;
                    b.ins().store(flags, v, dst, 0);
                }
                Leaf::Bool(o) => {
                    let v = b.ins().stack_load(I64, types::I8, outs, o);
                    let dst = next()?;
                    b.ins().store(flags, v, dst, 0);
                }
                Leaf::Array(o, _) => {
                    let ptr = b.ins().stack_load(I64, I64, outs, o);
                    let len = b.ins().stack_load(I64, I64, outs, o + SLOT as i32);
                    let (pd, ld) = (next()?, next()?);
                    b.ins().store(flags, ptr, pd, 0);
                    b.ins().store(flags, len, ld, 0);
                }
            }
        }
        b.ins().jump(done, &[]);
        b.switch_to_block(done);
        b.ins().return_(&[status]);
        Ok(())
    })
}
