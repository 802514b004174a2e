//! Lowering of the first-order normal form (`ad::anf`) to Cranelift IR,
//! one function per entry. A value is the vector of its slots' SSA values
//! (Note [Native layout] in `codegen/mod.rs`); names are fresh across the
//! whole normal form, so one map from names to slot values is the whole
//! environment, and every use is dominated by its definition.
//!
//! Control flow: `if` becomes a branch whose join block takes the result
//! as block parameters; `build`, `ifold` and `iscan` become counted loops,
//! rotated (a test before the loop, the next index tested at the bottom),
//! whose body block carries the index and the state as block parameters. No
//! `Variable`s are used, so block sealing order does not matter. Every ⊥
//! branches to one cold exit block (`fail`) that stores its details in the
//! context and returns the status code.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::rc::Rc;

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    AliasRegionData, Block, BlockArg, FuncRef, Function, InstBuilder, MemFlagsData, Value, types,
};
use cranelift_codegen::isa::TargetFrontendConfig;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};

use crate::ad::anf::{Atom, Binding, Block as AnfBlock, LoopKind, Normal, Rhs};
use crate::codegen::abi::{self, CTX_A, CTX_B, CTX_SCRATCH, ctx_window};
use crate::codegen::layout::{Leaf, SLOT, clif_types, elem_bytes, leaves, slots};
use crate::codegen::passes::fuse::{self, Fused, Index, Plan};
use crate::codegen::passes::{
    guard, hoist, horizontal, inplace, jam, loop_interchange, scratch, skip, twice, unroll,
    version, vertical, view,
};
use crate::codegen::{CodegenError, compile_error, unsupported};
use crate::ir::{Lit, Name, Prim, Type};

type R<T> = Result<T, CodegenError>;
type Vals = Vec<Value>;

/// The helper functions, as references usable in the function.
#[derive(Default)]
pub struct Imports {
    refs: HashMap<&'static str, FuncRef>,
}

impl Imports {
    pub fn insert(&mut self, name: &'static str, f: FuncRef) {
        self.refs.insert(name, f);
    }

    fn get(&self, name: &str) -> R<FuncRef> {
        self.refs
            .get(name)
            .copied()
            .ok_or_else(|| compile_error(format!("helper `{name}` not declared")))
    }
}

/// Lowers `normal` into `func`, whose signature is
/// `(ctx, args, out) -> status`. Returns where its arrays live and the
/// normal form as lowered (after fusion, unrolling and hoisting).
pub fn lower_function(
    func: &mut Function,
    fctx: &mut FunctionBuilderContext,
    normal: &Normal,
    imports: &Imports,
    target: TargetFrontendConfig,
) -> R<Lowered> {
    // Projections of pairs forwarded, so that fusion sees through tuples.
    let mut body = normal.body.clone();
    fuse::forward_projections(&mut body);
    // Producers computed in the loop that reads them (Note [Vertical
    // fusion]).
    vertical::fuse(&mut body);
    // Loops of two to four iterations as straight-line code (Note
    // [Unrolling]), their values forwarded to their readers.
    unroll::unroll(&mut body, &mut Default::default(), 'u');
    fuse::forward_projections(&mut body);
    // Loop invariants computed once (Note [Hoisting]).
    let mut speculative = hoist::hoist(&mut body);
    // Loops of a size their readers imply, in a copy of the rest of their
    // block where that size is a literal, unrolled (Note [Versioning]).
    if version::version(&mut body, &mut speculative) {
        unroll::unroll(&mut body, &mut speculative, 'w');
        fuse::forward_projections(&mut body);
    }
    let lowered = Normal {
        params: normal.params.clone(),
        body,
    };
    let normal = &lowered;
    let windows = func.dfg.alias_regions.insert(AliasRegionData {
        user_id: 1,
        description: "scratch windows".into(),
    });
    let mut b = FunctionBuilder::new(func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let (ctx, args, out) = {
        let p = b.block_params(entry);
        (p[0], p[1], p[2])
    };
    let fail = b.create_block();
    for _ in 0..3 {
        b.append_block_param(fail, types::I64);
    }
    b.set_cold_block(fail);
    // The accumulators that update in place (Note [In-place updates]).
    let updates = inplace::updates(&normal.body, &speculative);
    let plan = fuse::plan(normal);
    let fused_names: HashSet<Name> = plan.fused.keys().cloned().collect();
    let mut l = Lower {
        b,
        imports,
        env: HashMap::default(),
        ctx,
        fail,
        plan,
        fused: HashMap::default(),
        trusted: 0,
        speculative,
        length_of: HashMap::default(),
        in_bounds: Vec::new(),
        scratch: scratch::plan(&normal.body),
        into_scratch: None,
        in_place: None,
        updates,
        interchanged: Vec::new(),
        guarded: Vec::new(),
        paired: Vec::new(),
        skipping: Vec::new(),
        doubled: Vec::new(),
        jammed: Vec::new(),
        horizontal_groups: Vec::new(),
        plain: false,
        nonzero_divisors: false,
        cold: false,
        covered: Default::default(),
        unchecked: false,
        outlives_loops: normal
            .params
            .iter()
            .map(|(x, _)| x.clone())
            .chain(normal.body.binds.iter().map(|b| b.name.clone()))
            .filter(|x| !fused_names.contains(x))
            .collect(),
        windows: MemFlagsData::trusted().with_alias_region(Some(windows)),
        loop_indices: loop_indices(&normal.body),
        nonneg: HashSet::default(),
    };
    l.nonneg = l.loop_indices.clone();
    let mut off = 0i64;
    for (name, ty) in &normal.params {
        let v = l.load(ty, args, offset(off)?)?;
        l.env.insert(name.clone(), v);
        off += slots(ty)? as i64 * SLOT;
    }
    let r = l.block(&normal.body)?;
    l.store(normal.body.result.ty(), &r, out, 0)?;
    let ok = l.b.ins().iconst(types::I64, abi::OK);
    l.b.ins().return_(&[ok]);
    l.fail_block();
    l.b.seal_all_blocks();
    l.b.finalize(target);
    let scratch = l.scratch;
    Ok(Lowered {
        scratch,
        body: lowered.body,
        updates: l.updates,
        interchanged: l.interchanged,
        guarded: l.guarded,
        paired: l.paired,
        skipping: l.skipping,
        doubled: l.doubled,
        jammed: l.jammed,
        horizontal: l.horizontal_groups,
    })
}

/// What the lowering decided, for the listing (`fsmooth compile
/// --listing`).
pub struct Lowered {
    /// The scratch arrays (Note [Scratch arrays]).
    pub scratch: scratch::Scratch,
    /// The normal form as lowered (after fusion, unrolling and hoisting).
    pub body: AnfBlock,
    /// The `addAt`s in place (Note [In-place updates]).
    pub updates: inplace::Updates,
    /// The loop nests interchanged (Note [Interchange]).
    pub interchanged: Vec<Name>,
    /// The innermost loops behind a bounds guard (Note [Bounds guards]).
    pub guarded: Vec<Name>,
    /// The indices of the folds of `addAt`s run two iterations at a time
    /// (Note [Bounds guards], pairs of `addAt`s).
    pub paired: Vec<Name>,
    /// The indices of the folds that skip four iterations at a time when
    /// they keep their state (Note [Skipping folds] in `codegen/skip.rs`).
    pub skipping: Vec<Name>,
    /// The indices of the folds run two iterations per trip (Note [Two
    /// iterations per trip] in `codegen/twice.rs`).
    pub doubled: Vec<Name>,
    /// The indices of the loops run two iterations at a time with their
    /// inner folds jammed (Note [Jamming] in `codegen/jam.rs`).
    pub jammed: Vec<Name>,
    /// The members of each group run as one loop (Note [Horizontal
    /// fusion] in `codegen/horizontal.rs`).
    pub horizontal: Vec<Vec<Name>>,
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
fn loop_indices(b: &AnfBlock) -> HashSet<Name> {
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
                Rhs::Prim(..) | Rhs::Array(_) => {}
            }
        }
    }
    let mut out = HashSet::default();
    walk(b, &mut out);
    out
}

fn offset(bytes: i64) -> R<i32> {
    i32::try_from(bytes).map_err(|_| unsupported("values of more than 2 GiB of slots"))
}

fn args_of(vs: &[Value]) -> Vec<BlockArg> {
    vs.iter().map(|v| BlockArg::from(*v)).collect()
}

struct Lower<'a, 'f> {
    b: FunctionBuilder<'f>,
    imports: &'a Imports,
    env: HashMap<Name, Vals>,
    ctx: Value,
    fail: Block,
    /// The bindings not built (Note [Fusion] in `codegen/fuse.rs`) ...
    plan: Plan,
    /// ... and, once their binding is passed, how to read them.
    fused: HashMap<Name, Live>,
    /// Inside a fused body, whose reads the guard has checked.
    trusted: usize,
    /// The conditionals whose `then` branch is a speculation (Note
    /// [Hoisting], rule 3).
    speculative: HashSet<Name>,
    /// `x = length a`: x ↦ a.
    length_of: HashMap<Name, Name>,
    /// (loop index, array) of the enclosing loops that run over
    /// `0 .. length array`: reading that array at that index needs no
    /// bounds test (arrays are immutable).
    in_bounds: Vec<(Name, Name)>,
    /// The arrays that live one loop iteration (Note [Scratch arrays] in
    /// `codegen/scratch.rs`) and the loops that release them ...
    scratch: scratch::Scratch,
    /// ... and the stack of the next allocation when it is the scratch
    /// array of the binding being lowered.
    into_scratch: Option<usize>,
    /// Whether the `addAt` being lowered updates its array in place (Note
    /// [In-place updates] in `codegen/inplace.rs`).
    in_place: Option<bool>,
    /// Which `addAt` bindings update in place.
    updates: inplace::Updates,
    /// The loop nests lowered interchanged (Note [Interchange]).
    interchanged: Vec<Name>,
    /// The innermost loops behind a bounds guard (Note [Bounds guards] in
    /// `codegen/guard.rs`) ...
    guarded: Vec<Name>,
    /// ... the bindings whose tests the guard being lowered covers ...
    covered: HashSet<Name>,
    /// ... and whether the binding being lowered is one of them.
    unchecked: bool,
    /// The indices of the folds of `addAt`s run two iterations at a time.
    paired: Vec<Name>,
    /// See [`Lowered::skipping`].
    skipping: Vec<Name>,
    /// See [`Lowered::doubled`].
    doubled: Vec<Name>,
    /// The indices of the loops run two iterations at a time with their
    /// inner folds jammed (Note [Jamming] in `codegen/jam.rs`) ...
    jammed: Vec<Name>,
    /// The members of each group run as one loop (Note [Horizontal
    /// fusion] in `codegen/horizontal.rs`).
    horizontal_groups: Vec<Vec<Name>>,
    /// Whether the code being lowered is the slow version of a region
    /// (Note [Horizontal fusion]): loops without bounds guards.
    plain: bool,
    /// Whether the divisions being lowered divide by values a guard has
    /// tested (Note [Horizontal fusion]): no test of their own.
    nonzero_divisors: bool,
    /// ... except in the cold version of an interchanged nest, kept as
    /// written.
    cold: bool,
    /// The parameters and the names bound outside every loop: their
    /// buffers live as long as the call.
    outlives_loops: HashSet<Name>,
    /// Every loop's index, which is in `0 .. n` for a count `n ≤
    /// i64::MAX` (Note [Known counts]).
    loop_indices: HashSet<Name>,
    /// Index values known to be at least 0: loop indices, lengths, and
    /// successors `i + 1` of loop indices (Note [Known counts]).
    nonneg: HashSet<Name>,
    /// The alias region of the scratch windows in the call context: no
    /// array element is there, so moving a window does not keep Cranelift
    /// from reusing loads of array elements across it.
    windows: MemFlagsData,
}

/// A fused array past its binding.
#[derive(Clone)]
enum Live {
    Build {
        n: Value,
        index: Name,
        body: Rc<AnfBlock>,
    },
    Literal(Rc<[Atom]>),
    /// `concat parts`, read only by `accum`.
    Concat(Atom),
    /// A small `build`'s elements, computed at its binding.
    Unrolled(Rc<[Vals]>),
}

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
    // ----- plumbing -----------------------------------------------------------

    fn fail_block(&mut self) {
        self.b.switch_to_block(self.fail);
        let (code, a, bb) = {
            let p = self.b.block_params(self.fail);
            (p[0], p[1], p[2])
        };
        let flags = MemFlagsData::trusted();
        self.b.ins().store(flags, a, self.ctx, CTX_A);
        self.b.ins().store(flags, bb, self.ctx, CTX_B);
        self.b.ins().return_(&[code]);
    }

    fn iconst(&mut self, v: i64) -> Value {
        self.b.ins().iconst(types::I64, v)
    }

    /// Branches to the exit with status `code` when `cond` is non-zero.
    fn fail_if(&mut self, cond: Value, code: i64, a: Value, b: Value) {
        self.fail_with(cond, |l| (l.iconst(code), a, b));
    }

    fn fail_if_dyn(&mut self, cond: Value, code: Value, a: Value, b: Value) {
        self.fail_with(cond, |_| (code, a, b));
    }

    /// The test branches to a cold block of its own, which makes the
    /// details (`details`, emitted there) and passes them to the exit: the
    /// hot path moves no arguments into the exit's parameters (which
    /// pinned them to registers or stack slots at every test).
    fn fail_with(&mut self, cond: Value, details: impl FnOnce(&mut Self) -> (Value, Value, Value)) {
        let (cont, cold) = (self.b.create_block(), self.b.create_block());
        self.b.set_cold_block(cold);
        self.b.ins().brif(cond, cold, &[], cont, &[]);
        self.b.switch_to_block(cold);
        let (code, a, b) = details(self);
        let fail = self.fail;
        self.b.ins().jump(fail, &args_of(&[code, a, b]));
        self.b.switch_to_block(cont);
    }

    fn call(&mut self, helper: &str, args: &[Value]) -> R<Option<Value>> {
        let f = self.imports.get(helper)?;
        let inst = self.b.ins().call(f, args);
        Ok(self.b.inst_results(inst).first().copied())
    }

    fn call1(&mut self, helper: &str, args: &[Value]) -> R<Value> {
        self.call(helper, args)?
            .ok_or_else(|| compile_error(format!("helper `{helper}` returns nothing")))
    }

    fn load(&mut self, ty: &Type, base: Value, at: i32) -> R<Vals> {
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

    fn store(&mut self, ty: &Type, vals: &[Value], base: Value, at: i32) -> R<()> {
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
    fn element(&mut self, base: Value, i: Value, size: i64) -> Value {
        let off = self.b.ins().imul_imm_s(i, size);
        self.b.ins().iadd(base, off)
    }

    /// A buffer for `count ≥ 0` elements of `size` bytes from the arena,
    /// or from the scratch window when it is the binding's scratch array.
    fn alloc(&mut self, count: Value, size: i64) -> R<Value> {
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

    fn copy(&mut self, dst: Value, src: Value, count: Value, size: i64) -> R<()> {
        let bytes = self.b.ins().imul_imm_s(count, size);
        self.call("fsmooth_copy", &[dst, src, bytes])?;
        Ok(())
    }

    /// `for i in 0..n` threading `init` through `body`; returns the final
    /// state (`init` when `n ≤ 0`). The loop is rotated: one test before
    /// it, and the test of the next index at the bottom, so an iteration
    /// takes one branch back (a test at the top took a jump back to it and
    /// a branch into the body, two taken branches per iteration).
    fn counted_loop(
        &mut self,
        n: Value,
        init: &[Value],
        body: impl FnOnce(&mut Self, Value, &[Value]) -> R<Vals>,
    ) -> R<Vals> {
        let (head, exit) = self.loop_entry(n, init);
        let params = self.b.block_params(head).to_vec();
        let (i, state) = (params[0], &params[1..]);
        let next = body(self, i, state)?;
        let i1 = self.b.ins().iadd_imm_s(i, 1);
        self.loop_back((i1, n), &next, (head, exit));
        self.b.switch_to_block(exit);
        Ok(self.b.block_params(exit).to_vec())
    }

    /// A loop over `i < n` with state `init`: its header (parameters `i`
    /// and the state, current on return) and exit (the state), entered
    /// at `i = 0` when `0 < n`.
    fn loop_entry(&mut self, n: Value, init: &[Value]) -> (Block, Block) {
        let tys: Vec<types::Type> = init
            .iter()
            .map(|v| self.b.func.dfg.value_type(*v))
            .collect();
        let (head, exit) = (self.b.create_block(), self.b.create_block());
        self.b.append_block_param(head, types::I64);
        for t in &tys {
            self.b.append_block_param(head, *t);
            self.b.append_block_param(exit, *t);
        }
        let zero = self.iconst(0);
        let mut start = vec![zero];
        start.extend_from_slice(init);
        let any = self.b.ins().icmp(IntCC::SignedLessThan, zero, n);
        self.b
            .ins()
            .brif(any, head, &args_of(&start), exit, &args_of(init));
        self.b.switch_to_block(head);
        (head, exit)
    }

    /// The back edge of a [`loop_entry`] loop: to the header with index
    /// `next` and state `st` while `next < n`, else to the exit.
    ///
    /// [`loop_entry`]: Self::loop_entry
    fn loop_back(&mut self, (next, n): (Value, Value), st: &[Value], (head, exit): (Block, Block)) {
        let more = self.b.ins().icmp(IntCC::SignedLessThan, next, n);
        let mut back = vec![next];
        back.extend_from_slice(st);
        self.b
            .ins()
            .brif(more, head, &args_of(&back), exit, &args_of(st));
    }

    // ----- the normal form ------------------------------------------------------

    fn block(&mut self, blk: &AnfBlock) -> R<Vals> {
        // Note [Horizontal fusion].
        let groups = horizontal::groups(blk, &|x| self.plan.fused.contains_key(x));
        let mut groups = groups.iter().peekable();
        let mut p = 0;
        while let Some(bind) = blk.binds.get(p) {
            if let Some(g) = groups.next_if(|g| g.start == p) {
                self.horizontal(blk, g)?;
                p = g.end;
            } else {
                self.bind(bind)?;
                p += 1;
            }
        }
        self.atom(&blk.result)
    }

    // ----- horizontal fusion (Note [Horizontal fusion] in `codegen/horizontal.rs`)

    /// The region of group `g` of `blk`: the fast version (its other
    /// bindings, the guard, one loop for the members) with a bail exit to
    /// the slow one (the region as written); the names read after it meet
    /// at a join.
    fn horizontal(&mut self, blk: &AnfBlock, g: &horizontal::Group) -> R<()> {
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
        let go = self.b.create_block();
        let z = self.iconst(0);
        self.b.ins().brif(ok, go, &[], bail, &args_of(&[z, z, z]));
        self.b.switch_to_block(go);
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

    /// `for k < n` two elements at a time: `pair` at each even `k` below
    /// `n - 1`, then `one(count, k0)`, a loop over the last element when
    /// `n` is odd (`count` 1, from `k0 = n - 1`), else over none.
    fn by_twos(
        &mut self,
        n: Value,
        pair: impl FnOnce(&mut Self, Value) -> R<()>,
        one: impl FnOnce(&mut Self, Value, Value) -> R<Vals>,
    ) -> R<Vals> {
        let half = self.b.ins().sshr_imm_u(n, 1);
        self.counted_loop(half, &[], |l, h, _| {
            let k = l.b.ins().ishl_imm_u(h, 1);
            pair(l, k)?;
            Ok(Vec::new())
        })?;
        let odd = self.b.ins().band_imm_u(n, 1);
        let last = self.b.ins().iadd_imm_s(n, -1);
        one(self, odd, last)
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
            .all(|e| loop_interchange::pairs(&f.terms, e, &varying));
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

    fn bind(&mut self, bind: &Binding) -> R<()> {
        if let Some(f) = self.plan.fused.get(&bind.name).cloned() {
            return self.fuse(bind, f);
        }
        if let Rhs::Prim(Prim::Length, args) = &bind.rhs
            && let [Atom::Var(a, _)] = args.as_slice()
            && !self.fused.contains_key(a)
        {
            self.length_of.insert(bind.name.clone(), a.clone());
        }
        // Note [Known counts]
        match &bind.rhs {
            Rhs::Prim(Prim::Length, _) => {
                self.nonneg.insert(bind.name.clone());
            }
            Rhs::Prim(Prim::Add, args) if self.successor(args) => {
                self.nonneg.insert(bind.name.clone());
            }
            _ => {}
        }
        let v = self.binding(bind)?;
        self.env.insert(bind.name.clone(), v);
        Ok(())
    }

    // ----- fusion (Note [Fusion] in `codegen/fuse.rs`) ----------------------------

    /// The binding of a fused array: for a `build`, the guard, and the
    /// array built as usual (to its ⊥) when the guard fails.
    fn fuse(&mut self, bind: &Binding, f: Fused) -> R<()> {
        let live = match (&bind.rhs, f) {
            (Rhs::Array(items), Fused::Literal) => Live::Literal(items.clone().into()),
            (Rhs::Prim(Prim::Concat, args), Fused::Concat) => Live::Concat(args[0].clone()),
            (Rhs::Array(items), Fused::Unrolled) => {
                let elems = items.iter().map(|a| self.atom(a)).collect::<R<Vec<_>>>()?;
                Live::Unrolled(elems.into())
            }
            (
                Rhs::Loop {
                    n: Atom::Lit(Lit::Int(c), _),
                    index,
                    body,
                    ..
                },
                Fused::Unrolled,
            ) => {
                // E-Build, element by element in order (so its ⊥ is the
                // first failing element's, as in the loop).
                let mut elems = Vec::new();
                for k in 0..*c {
                    let i = self.iconst(k);
                    self.env.insert(index.clone(), vec![i]);
                    elems.push(self.block(body)?);
                }
                Live::Unrolled(elems.into())
            }
            (
                Rhs::Loop {
                    n: n_atom,
                    index,
                    body,
                    ..
                },
                Fused::Build { reads } | Fused::Parts { reads } | Fused::Records { reads },
            ) => {
                let n = self.scalar(n_atom)?;
                let mut all = self.b.ins().iconst(types::I8, 1);
                for r in &reads {
                    let len = self.length_of(&r.array)?;
                    let ok = match &r.index {
                        Index::Loop => self.b.ins().icmp(IntCC::SignedLessThanOrEqual, n, len),
                        // One unsigned test covers c < 0.
                        Index::Const(c) => {
                            let c = self.scalar(c)?;
                            self.b.ins().icmp(IntCC::UnsignedLessThan, c, len)
                        }
                        Index::Offset(c) => {
                            let c = self.scalar(c)?;
                            let fits = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, n, len);
                            let nonneg =
                                self.b
                                    .ins()
                                    .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, c, 0);
                            // len − n cannot overflow: both are ≥ 0 when `fits`.
                            let room = self.b.ins().isub(len, n);
                            let within = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, c, room);
                            let a = self.b.ins().band(fits, nonneg);
                            self.b.ins().band(a, within)
                        }
                    };
                    all = self.b.ins().band(all, ok);
                }
                let empty = self.b.ins().icmp_imm_s(IntCC::Equal, n, 0);
                let nonneg = self
                    .b
                    .ins()
                    .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, n, 0);
                let ok = self.b.ins().bor(empty, all);
                let ok = self.b.ins().band(ok, nonneg);
                let (cont, slow) = (self.b.create_block(), self.b.create_block());
                self.b.set_cold_block(slow);
                self.b.ins().brif(ok, cont, &[], slow, &[]);
                self.b.switch_to_block(slow);
                // Some element is ⊥ (Note [Fusion], exactness): the loop
                // stops there with E-Build's ⊥ and never reaches the jump.
                self.build(n_atom, index, body, &bind.ty, None)?;
                let (code, m1) = (self.iconst(abi::INDEX_OUT_OF_BOUNDS), self.iconst(-1));
                let fail = self.fail;
                self.b.ins().jump(fail, &args_of(&[code, m1, m1]));
                self.b.switch_to_block(cont);
                Live::Build {
                    n,
                    index: index.clone(),
                    body: Rc::new(body.clone()),
                }
            }
            _ => return Err(compile_error("a fused binding of the wrong kind")),
        };
        self.fused.insert(bind.name.clone(), live);
        Ok(())
    }

    /// `length a`, for a fused array or not.
    fn length_of(&mut self, a: &Name) -> R<Value> {
        Ok(match self.fused.get(a).cloned() {
            Some(Live::Build { n, .. }) => n,
            Some(Live::Literal(items)) => self.iconst(items.len() as i64),
            Some(Live::Concat(_)) => return Err(compile_error("the length of a fused `concat`")),
            Some(Live::Unrolled(elems)) => self.iconst(elems.len() as i64),
            None => {
                let v = self
                    .env
                    .get(a)
                    .cloned()
                    .ok_or_else(|| compile_error(format!("`{a}` is not bound")))?;
                v[1]
            }
        })
    }

    /// `x[k]` of a fused `x`: E-Get-Bot's test against its length, then its
    /// element, computed here.
    fn fused_get(&mut self, live: Live, k: &Atom) -> R<Vals> {
        match live {
            Live::Concat(_) => Err(compile_error("a read of a fused `concat`")),
            Live::Unrolled(elems) => {
                if let Atom::Lit(Lit::Int(k), _) = k
                    && let Some(v) = usize::try_from(*k).ok().and_then(|k| elems.get(k))
                {
                    return Ok(v.clone());
                }
                // E-Get / E-Get-Bot against the literal length, then the
                // element by a chain of selects.
                let j = self.scalar(k)?;
                let n = self.iconst(elems.len() as i64);
                if self.trusted == 0 {
                    let out = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, j, n);
                    self.fail_if(out, abi::INDEX_OUT_OF_BOUNDS, j, n);
                }
                let mut v = elems[0].clone();
                for (e, el) in elems.iter().enumerate().skip(1) {
                    let is = self.b.ins().icmp_imm_s(IntCC::Equal, j, e as i64);
                    for (slot, x) in v.iter_mut().zip(el.iter()) {
                        *slot = self.b.ins().select(is, *x, *slot);
                    }
                }
                Ok(v)
            }
            Live::Literal(items) => {
                let Atom::Lit(Lit::Int(k), _) = k else {
                    return Err(compile_error("a fused literal read at a variable index"));
                };
                let item = usize::try_from(*k)
                    .ok()
                    .and_then(|k| items.get(k))
                    .ok_or_else(|| compile_error("a fused literal read out of bounds"))?;
                self.atom(item)
            }
            Live::Build { n, index, body } => {
                let j = self.scalar(k)?;
                if self.trusted == 0 {
                    let out = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, j, n);
                    self.fail_if(out, abi::INDEX_OUT_OF_BOUNDS, j, n);
                }
                self.env.insert(index, vec![j]);
                self.trusted += 1;
                let r = self.block(&body);
                self.trusted -= 1;
                r
            }
        }
    }

    /// The slots of the built array `a` (not fused).
    fn atom_of(&mut self, a: &Name) -> R<Vals> {
        if self.fused.contains_key(a) {
            return Err(compile_error(format!("the buffer of fused `{a}`")));
        }
        self.env
            .get(a)
            .cloned()
            .ok_or_else(|| compile_error(format!("`{a}` is not bound")))
    }

    fn atom(&mut self, a: &Atom) -> R<Vals> {
        Ok(match a {
            Atom::Var(x, _) => self
                .env
                .get(x)
                .cloned()
                .ok_or_else(|| compile_error(format!("`{x}` is not bound")))?,
            Atom::Lit(Lit::Int(n), Type::Double) => vec![self.b.ins().f64const(*n as f64)],
            Atom::Lit(Lit::Int(n), _) => vec![self.iconst(*n)],
            Atom::Lit(Lit::Double(x), _) => vec![self.b.ins().f64const(*x)],
            Atom::Lit(Lit::Bool(v), _) => vec![self.b.ins().iconst(types::I8, i64::from(*v))],
        })
    }

    fn scalar(&mut self, a: &Atom) -> R<Value> {
        let v = self.atom(a)?;
        match v.as_slice() {
            [x] => Ok(*x),
            _ => Err(compile_error(format!("{a:?} is not a scalar"))),
        }
    }

    fn binding(&mut self, bind: &Binding) -> R<Vals> {
        // The first allocation of a scratch array's right side is its
        // buffer (Note [Scratch arrays]).
        self.into_scratch = self.scratch.arrays.get(&bind.name).map(|(_, k)| *k);
        self.in_place = Some(self.updates.in_place.contains(&bind.name));
        self.unchecked = self.covered.contains(&bind.name);
        let r = self.binding_rhs(bind);
        self.into_scratch = None;
        self.in_place = None;
        self.unchecked = false;
        r
    }

    fn binding_rhs(&mut self, bind: &Binding) -> R<Vals> {
        match &bind.rhs {
            Rhs::Prim(op, args) => self.prim(*op, args, &bind.ty),
            Rhs::Array(items) => self.array(items, &bind.ty),
            Rhs::If(c, t, e) => {
                let speculative = self.speculative.contains(&bind.name);
                self.if_(c, t, e, &bind.ty, speculative)
            }
            Rhs::Loop {
                kind,
                n,
                state,
                index,
                body,
            } => {
                // A loop over `0 .. length a` reads `a[index]` in bounds.
                let over = n.var().and_then(|x| self.length_of.get(x)).cloned();
                let pushed = over
                    .map(|a| self.in_bounds.push((index.clone(), a)))
                    .is_some();
                let r = match (kind, state) {
                    (LoopKind::Build, None) => {
                        let built = |a: &Name| !self.fused.contains_key(a);
                        let rows_built = |reads: &[loop_interchange::Read]| {
                            reads.iter().all(|r| match r {
                                loop_interchange::Read::Row(row) => built(&row.array),
                                _ => true,
                            })
                        };
                        let nest = (n, index, body, &bind.ty);
                        if let Some(plan) = loop_interchange::plan(index, body, &bind.ty)
                            && rows_built(&plan.reads)
                        {
                            // E-Build-Bot, then E-IFold-Bot of the first
                            // element's sum.
                            self.interchanged.push(bind.name.clone());
                            let code = abi::NEGATIVE_COUNT;
                            self.nest(nest, plan.m, code, &plan.reads, |this, n, m| {
                                this.sums_i_major(n, m, index, &plan)
                            })
                        } else if let Some(plan) = loop_interchange::transpose(index, body)
                            && rows_built(&plan.reads)
                        {
                            // E-Build-Bot of the nest, then of its first row.
                            self.interchanged.push(bind.name.clone());
                            let code = abi::NEGATIVE_SIZE;
                            self.nest(nest, plan.m, code, &plan.reads, |this, n, m| {
                                this.rows_i_major(n, m, index, &plan, &bind.ty)
                            })
                        } else {
                            let guard = self.guard_plan(&bind.name, index, None, body);
                            self.build(n, index, body, &bind.ty, guard.as_ref())
                        }
                    }
                    (LoopKind::IFold, Some((z, s, st))) => {
                        let guard = self.guard_plan(&bind.name, index, Some(s), body);
                        self.ifold(n, (z, s, st), index, body, guard.as_ref())
                    }
                    (LoopKind::IScan, Some((z, s, st))) => self.iscan(n, z, s, st, index, body),
                    _ => Err(compile_error("a loop without its state")),
                };
                if pushed {
                    self.in_bounds.pop();
                }
                r
            }
        }
    }

    /// Ends the current block with a branch on `cond` to two new blocks
    /// that meet again at a third, with one parameter per type of
    /// `join_params`: `(then, else, join)`. The builder stays where it was.
    fn diamond(&mut self, cond: Value, join_params: &[types::Type]) -> (Block, Block, Block) {
        let (then, els, join) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        for t in join_params {
            self.b.append_block_param(join, *t);
        }
        self.b.ins().brif(cond, then, &[], els, &[]);
        (then, els, join)
    }

    /// E-If-True / E-If-False: only the chosen branch runs. A
    /// `speculative` conditional (Note [Hoisting], rule 3) continues in
    /// its `else` branch when its `then` branch reaches ⊥.
    ///
    /// # Note [Selects]
    ///
    /// A conditional of type Double whose branches bind nothing, `if c
    /// then a else b` of two atoms, is a `select`: reading an atom is
    /// neither ⊥ nor an effect, so this is E-If-True / E-If-False
    /// exactly, without a branch. A running maximum `if x > s then x else
    /// s` (compared as `s < x`, the same test) becomes one `maxsd` (and `x
    /// < s`, `minsd`): Cranelift's patterns for `select (fcmp lt y x) x
    /// y`, whose IEEE behaviour (the second operand on NaN and on equal
    /// zeros) is the conditional's. A ReLU `build n (fun i -> if v[i] >
    /// 0.0 then v[i] else 0.0)` of random signs, whose branch was
    /// mispredicted half the time, went from 6.2 to 1.1–1.6 ms at n =
    /// 10⁶ (AOT, alternating), and 1.65–1.70 → 1.22–1.40 ms once paired
    /// (Note [Bounds guards], pairs: an order comparison is a lane mask
    /// and the conditional a `bitselect`, `maxpd` for the ReLU). Wider
    /// selects do not pay: the vector
    /// maximum's argmax, `if x > fst s then (x, i) else s`, as a `maxsd`
    /// and a `cmov` ran 15–20% slower than its branch, which is taken
    /// O(log n) times on random data and so predicted.
    fn if_(
        &mut self,
        c: &Atom,
        t: &AnfBlock,
        e: &AnfBlock,
        ty: &Type,
        speculative: bool,
    ) -> R<Vals> {
        let c = self.scalar(c)?;
        if !speculative && *ty == Type::Double && t.binds.is_empty() && e.binds.is_empty() {
            // Note [Selects].
            let (a, b) = (self.scalar(&t.result)?, self.scalar(&e.result)?);
            return Ok(vec![self.b.ins().select(c, a, b)]);
        }
        let (tb, eb, join) = self.diamond(c, &clif_types(ty)?);
        let exit = self.fail;
        let caught = speculative.then(|| {
            let blk = self.b.create_block();
            for _ in 0..3 {
                self.b.append_block_param(blk, types::I64);
            }
            self.b.set_cold_block(blk);
            blk
        });
        for (blk, body) in [(tb, t), (eb, e)] {
            self.b.switch_to_block(blk);
            if blk == tb
                && let Some(caught) = caught
            {
                self.fail = caught;
            }
            let r = self.block(body);
            self.fail = exit;
            let r = r?;
            self.b.ins().jump(join, &args_of(&r));
        }
        if let Some(caught) = caught {
            self.b.switch_to_block(caught);
            self.b.ins().jump(eb, &[]);
        }
        self.b.switch_to_block(join);
        Ok(self.b.block_params(join).to_vec())
    }

    /// E-Array: one buffer, elements stored left to right.
    fn array(&mut self, items: &[Atom], ty: &Type) -> R<Vals> {
        let el = array_elem(ty)?;
        let size = elem_bytes(el)?;
        let n = self.iconst(items.len() as i64);
        let p = self.alloc(n, size)?;
        for (k, it) in items.iter().enumerate() {
            let v = self.atom(it)?;
            self.store(el, &v, p, offset(k as i64 * size)?)?;
        }
        Ok(vec![p, n])
    }

    /// E-Build, E-Build-Elem, E-Build-Bot; behind its bounds guard when
    /// it has one (Note [Bounds guards]).
    fn build(
        &mut self,
        n: &Atom,
        index: &Name,
        body: &AnfBlock,
        ty: &Type,
        guard: Option<&guard::Plan>,
    ) -> R<Vals> {
        let count = self.scalar(n)?;
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
            // and details as here.
            let a = self.atom(src)?;
            let (from, len) = (a[0], a[1]);
            let short = self.b.ins().icmp(IntCC::SignedGreaterThan, n, len);
            self.fail_if(short, abi::INDEX_OUT_OF_BOUNDS, len, len);
            return Ok(vec![from, n]);
        }
        let p = self.alloc(n, size)?;
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
            let bits = self.b.ins().bitcast(types::I64, MemFlagsData::new(), cold);
            let zero = self.b.ins().icmp_imm_s(IntCC::Equal, bits, 0);
            let (zeroes, fills, filled) = self.diamond(zero, &[]);
            self.b.switch_to_block(zeroes);
            let bytes = self.b.ins().ishl_imm_u(n, 3);
            self.call("fsmooth_zero", &[p, bytes])?;
            self.b.ins().jump(filled, &[]);
            self.b.switch_to_block(fills);
            let lanes = self.b.ins().splat(types::F64X2, cold);
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
                l.b.ins().store(flags, cold, at, 0);
                Ok(Vec::new())
            })?;
            self.b.ins().jump(filled, &[]);
            self.b.switch_to_block(filled);
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
            let Some(varying) = l.pairable(index, body) else {
                return scalar(l, n, zero);
            };
            let pair =
                |l: &mut Self, k| l.pair(&body.binds, &body.result, &varying, index, k, (p, false));
            l.by_twos(n, pair, scalar)
        };
        self.versions(n, guard, None, run)?;
        Ok(vec![p, n])
    }

    /// The fast path of a `build` of sums with its loops interchanged
    /// (Note [Interchange] in `codegen/interchange.rs`), inside [`nest`]'s
    /// guard: the sums of `n` elements over `m` terms, i-major.
    ///
    /// [`nest`]: Self::nest
    fn sums_i_major(
        &mut self,
        n: Value,
        m: Value,
        j: &Name,
        plan: &loop_interchange::Plan<'_>,
    ) -> R<Value> {
        let zero = self.iconst(0);
        let out = self.alloc(n, 8)?;
        let z = self.scalar(plan.z)?;
        let flags = MemFlagsData::trusted();
        self.counted_loop(n, &[], |l, k, _| {
            let at = l.element(out, k, 8);
            l.b.ins().store(flags, z, at, 0);
            Ok(Vec::new())
        })?;
        // The terms that do not depend on j, once per i (only when there
        // is an element: a division by zero among them would otherwise be
        // a ⊥ the nest does not have); the others per element, two at a
        // time when they are arithmetic on Doubles and reads at j of
        // arrays of Doubles (Note [Interchange], pairs).
        let varying = loop_interchange::varying(plan.terms, j);
        let pairs = loop_interchange::pairs(plan.terms, plan.term, &varying)
            && plan.terms.iter().all(|b| match &b.rhs {
                Rhs::Prim(Prim::Get, args) if varying.contains(&b.name) => {
                    args[0].var().is_some_and(|a| !self.fused.contains_key(a))
                }
                _ => true,
            });
        let some = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, n, 0);
        let rows = self.b.ins().select(some, m, zero);
        self.counted_loop(rows, &[], |l, i, _| {
            l.env.insert(plan.index.clone(), vec![i]);
            l.trusted += 1;
            let r = plan
                .terms
                .iter()
                .filter(|b| !varying.contains(&b.name))
                .try_for_each(|b| l.bind(b));
            l.trusted -= 1;
            r?;
            let each = |l: &mut Self, k: Value| -> R<()> {
                l.env.insert(j.clone(), vec![k]);
                l.trusted += 1;
                let r = plan
                    .terms
                    .iter()
                    .filter(|b| varying.contains(&b.name))
                    .try_for_each(|b| l.bind(b));
                l.trusted -= 1;
                r?;
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
            let half = l.b.ins().sshr_imm_u(n, 1);
            l.counted_loop(half, &[], |l, p, _| {
                let k = l.b.ins().ishl_imm_u(p, 1);
                l.pair(plan.terms, plan.term, &varying, j, k, (out, true))?;
                Ok(Vec::new())
            })?;
            // The last element when n is odd.
            let odd = l.b.ins().band_imm_u(n, 1);
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

    /// Elements `k` and `k + 1` (Note [Interchange], pairs; Note [Bounds
    /// guards], pairs): the terms that depend on `j` in `f64x2` lanes, IEEE
    /// operation by operation as the scalar code (so the same bits),
    /// stored into `out[k]` and `out[k + 1]`, or added to them when
    /// `accumulate` (an interchanged sum's row). A division tests both
    /// divisors (E-Arith-Bot, the same ⊥ from any element).
    fn pair(
        &mut self,
        terms: &[Binding],
        term: &Atom,
        varying: &HashSet<Name>,
        j: &Name,
        k: Value,
        (out, accumulate): (Value, bool),
    ) -> R<()> {
        let lanes = types::F64X2;
        // Unaligned: an element pair starts at any 8-byte boundary.
        let flags = MemFlagsData::new().with_notrap();
        let vals = self.lanes(terms, varying, j, k)?;
        let e = self.vector(&vals, term)?;
        let at = self.element(out, k, 8);
        let e = if accumulate {
            let old = self.b.ins().load(lanes, flags, at, 0);
            self.b.ins().fadd(old, e)
        } else {
            e
        };
        self.b.ins().store(flags, e, at, 0);
        Ok(())
    }

    /// An atom in `f64x2` lanes: a paired term's, or a scalar in both.
    fn vector(&mut self, vals: &HashMap<&Name, Value>, a: &Atom) -> R<Value> {
        if let Some(x) = a.var()
            && let Some(v) = vals.get(x)
        {
            return Ok(*v);
        }
        let x = self.scalar(a)?;
        Ok(self.b.ins().splat(types::F64X2, x))
    }

    /// The terms in `varying` for elements `k` and `k + 1` of the loop over
    /// `j`, in `f64x2` lanes, IEEE operation by operation as the scalar
    /// code (Note [Bounds guards], pairs).
    fn lanes<'t>(
        &mut self,
        terms: &'t [Binding],
        varying: &HashSet<Name>,
        j: &Name,
        k: Value,
    ) -> R<HashMap<&'t Name, Value>> {
        let lanes = types::F64X2;
        let flags = MemFlagsData::new().with_notrap();
        let mut vals: HashMap<&Name, Value> = HashMap::default();
        let vector = |l: &mut Self, vals: &HashMap<&Name, Value>, a: &Atom| l.vector(vals, a);
        for bind in terms.iter().filter(|b| varying.contains(&b.name)) {
            if let Rhs::If(c, t, e) = &bind.rhs {
                // A lane-wise select (Note [Selects]): the comparison's
                // lanes are all ones or all zeros.
                let c = c
                    .var()
                    .and_then(|c| vals.get(c))
                    .copied()
                    .ok_or_else(|| compile_error("a paired select without its comparison"))?;
                let (t, e) = (
                    vector(self, &vals, &t.result)?,
                    vector(self, &vals, &e.result)?,
                );
                let mask = self.b.ins().bitcast(lanes, MemFlagsData::new(), c);
                let v = self.b.ins().bitselect(mask, t, e);
                vals.insert(&bind.name, v);
                continue;
            }
            let Rhs::Prim(op, args) = &bind.rhs else {
                return Err(compile_error("a paired term that is not a primitive"));
            };
            let v = match op {
                Prim::Get => {
                    let Some(a) = args[0].var() else {
                        return Err(compile_error("a paired read of a literal"));
                    };
                    if args[1].var() != Some(j) {
                        return Err(compile_error("a paired read not at j"));
                    }
                    let p = self.atom_of(a)?[0];
                    let at = self.element(p, k, 8);
                    self.b.ins().load(lanes, flags, at, 0)
                }
                Prim::Neg => {
                    let x = vector(self, &vals, &args[0])?;
                    self.b.ins().fneg(x)
                }
                Prim::Lt | Prim::Gt | Prim::Le | Prim::Ge => {
                    // As the scalar comparison (Note [Selects]).
                    let x = vector(self, &vals, &args[0])?;
                    let y = vector(self, &vals, &args[1])?;
                    let (cc, swap) = float_cc(*op);
                    let (x, y) = if swap { (y, x) } else { (x, y) };
                    self.b.ins().fcmp(cc, x, y)
                }
                Prim::Add | Prim::Sub | Prim::Mul | Prim::Div => {
                    let x = vector(self, &vals, &args[0])?;
                    let y = vector(self, &vals, &args[1])?;
                    match op {
                        Prim::Add => self.b.ins().fadd(x, y),
                        Prim::Sub => self.b.ins().fsub(x, y),
                        Prim::Mul => self.b.ins().fmul(x, y),
                        _ if self.nonzero_divisors => self.b.ins().fdiv(x, y),
                        _ => {
                            // Either lane zero: one compare, its lanes'
                            // sign bits (movmskpd).
                            let zero = self.b.ins().f64const(0.0);
                            let zeros = self.b.ins().splat(lanes, zero);
                            let is_zero = self.b.ins().fcmp(FloatCC::Equal, y, zeros);
                            let bits = self.b.ins().vhigh_bits(types::I8, is_zero);
                            let any = self.b.ins().icmp_imm_s(IntCC::NotEqual, bits, 0);
                            let z = self.iconst(0);
                            self.fail_if(any, abi::DIVISION_BY_ZERO, z, z);
                            self.b.ins().fdiv(x, y)
                        }
                    }
                }
                _ => return Err(compile_error("a paired term that is not arithmetic")),
            };
            vals.insert(&bind.name, v);
        }
        Ok(vals)
    }

    /// The plan of a fold over `index` with state `s` that skips four
    /// iterations at a time where they keep the state (Note [Skipping
    /// folds]); its reads at `index` need no test, as for [`pairable`].
    ///
    /// [`pairable`]: Self::pairable
    fn skip_plan(&self, index: &Name, s: &Name, body: &AnfBlock) -> Option<skip::Plan> {
        if self.scratch.loops.contains_key(index) {
            return None;
        }
        skip::plan(index, s, body, |b| self.untested_read(index, b))
    }

    /// Whether `b` is a read `a[index]` that needs no bounds test in the
    /// innermost loop over `index`: of a built array whose test the loop's
    /// guard covers, or of the array the loop runs over (Note [Bounds
    /// guards]).
    fn untested_read(&self, index: &Name, b: &Binding) -> bool {
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

    /// The fold of `n ≥ 0` iterations from `z` by `plan` (Note [Skipping
    /// folds]): four at a time, each four's tests in two pairs of lanes
    /// with the state they start from, then the four as written if a lane
    /// says the state changes; the last `n mod 4` as written.
    fn skipping_fold(
        &mut self,
        n: Value,
        z: &[Value],
        (s, index): (&Name, &Name),
        body: &AnfBlock,
        plan: &skip::Plan,
    ) -> R<Vals> {
        let prefix = &body.binds[..plan.prefix];
        let tys: Vec<types::Type> = z.iter().map(|v| self.b.func.dfg.value_type(*v)).collect();
        // Iterations `from + t` for t < m, as written.
        let as_written = |l: &mut Self, m: Value, from: Value, st: &[Value]| {
            l.counted_loop(m, st, |l, t, st| {
                let i = l.b.ins().iadd(from, t);
                l.fold_step((s, index), i, st, body)
            })
        };
        let quads = self.b.ins().sshr_imm_u(n, 2);
        let st = self.counted_loop(quads, z, |l, q, st| {
            let i = l.b.ins().ishl_imm_u(q, 2);
            l.env.insert(s.clone(), st.to_vec());
            for b in prefix.iter().filter(|b| !plan.varying.contains(&b.name)) {
                l.bind(b)?;
            }
            let lo = l.lanes(prefix, &plan.varying, index, i)?[&plan.test];
            let i2 = l.b.ins().iadd_imm_s(i, 2);
            let hi = l.lanes(prefix, &plan.varying, index, i2)?[&plan.test];
            let changes = if plan.keep_when {
                let all = l.b.ins().band(lo, hi);
                let kept = l.b.ins().vall_true(all);
                l.b.ins().icmp_imm_s(IntCC::Equal, kept, 0)
            } else {
                let any = l.b.ins().bor(lo, hi);
                l.b.ins().vany_true(any)
            };
            let (run, keep, join) = l.diamond(changes, &tys);
            l.b.switch_to_block(keep);
            l.b.ins().jump(join, &args_of(st));
            l.b.switch_to_block(run);
            let four = l.iconst(4);
            let r = as_written(l, four, i, st)?;
            l.b.ins().jump(join, &args_of(&r));
            l.b.switch_to_block(join);
            Ok(l.b.block_params(join).to_vec())
        })?;
        let done = self.b.ins().ishl_imm_u(quads, 2);
        let rest = self.b.ins().isub(n, done);
        as_written(self, rest, done, &st)
    }

    /// Whether the innermost `build` over `index` can run two elements at
    /// a time in its guarded version (Note [Bounds guards], pairs): every
    /// binding depends on `index` and is Double arithmetic or a read at
    /// `index` of an array of Doubles whose test the guard covers (or that
    /// the loop runs over), and the element is a Double. Then the set of
    /// those bindings (all of them).
    fn pairable(&self, index: &Name, body: &AnfBlock) -> Option<HashSet<Name>> {
        let varying = loop_interchange::varying(&body.binds, index);
        let ok = varying.len() == body.binds.len()
            && loop_interchange::pairs(&body.binds, &body.result, &varying)
            && body.binds.iter().all(|b| match &b.rhs {
                Rhs::Prim(Prim::Get, _) => self.untested_read(index, b),
                _ => true,
            });
        ok.then_some(varying)
    }

    /// Whether the innermost `ifold` over `index` with state `s : st` can
    /// run two iterations at a time in its guarded version (Note [Bounds
    /// guards], pairs of `addAt`s): its body only projects the state,
    /// reads arrays of Doubles at `index` (tests covered), computes Double
    /// arithmetic on them, and adds into state arrays of Doubles at
    /// `index + c` with `addAt`s that update in place and whose tests the
    /// guard covers, each state array at most once and for nothing else;
    /// the result is the state with each array replaced by its `addAt`
    /// (other leaves kept, or a literal).
    fn fold_pairs(&self, index: &Name, s: &Name, st: &Type, body: &AnfBlock) -> Option<FoldPairs> {
        if self.scratch.loops.contains_key(index) {
            return None;
        }
        let varying = loop_interchange::varying(&body.binds, index);
        let mut paths: HashMap<&Name, Vec<bool>> = HashMap::default();
        let mut offsets: HashMap<&Name, &Atom> = HashMap::default();
        let mut tuples: HashMap<&Name, (&Atom, &Atom)> = HashMap::default();
        let mut lanes = HashSet::default();
        let mut adds: Vec<PairedAdd> = Vec::new();
        let mut added: HashMap<&Name, Vec<bool>> = HashMap::default();
        // Bound before the loop (or a literal): the same in every lane.
        let bound: HashSet<&Name> = body.binds.iter().map(|b| &b.name).collect();
        let outside = |a: &Atom| {
            a.var()
                .is_none_or(|x| !bound.contains(x) && x != index && x != s)
        };
        let path_of = |paths: &HashMap<&Name, Vec<bool>>, a: &Atom| -> Option<Vec<bool>> {
            let x = a.var()?;
            if x == s {
                return Some(Vec::new());
            }
            paths.get(x).cloned()
        };
        for b in &body.binds {
            match &b.rhs {
                Rhs::Prim(op @ (Prim::Fst | Prim::Snd), args) => {
                    let mut p = path_of(&paths, &args[0])?;
                    p.push(*op == Prim::Snd);
                    paths.insert(&b.name, p);
                }
                Rhs::Prim(Prim::Get, args) => {
                    let a = args[0].var()?;
                    let ok = args[1].var() == Some(index)
                        && b.ty == Type::Double
                        && !bound.contains(a)
                        && !self.fused.contains_key(a)
                        && self.env.contains_key(a)
                        && (self.covered.contains(&b.name)
                            || self.in_bounds.iter().any(|(k, x)| k == index && x == a));
                    if !ok {
                        return None;
                    }
                    lanes.insert(b.name.clone());
                }
                Rhs::Prim(Prim::Add | Prim::Sub | Prim::Mul | Prim::Div | Prim::Neg, args)
                    if b.ty == Type::Double =>
                {
                    let operand = |a: &Atom| {
                        *a.ty() == Type::Double
                            && (outside(a) || a.var().is_some_and(|x| lanes.contains(x)))
                    };
                    if !varying.contains(&b.name) || !args.iter().all(operand) {
                        return None;
                    }
                    lanes.insert(b.name.clone());
                }
                Rhs::Prim(Prim::Add, args) if b.ty == Type::Index => {
                    let c = match (&args[0], &args[1]) {
                        (i, c) | (c, i) if i.var() == Some(index) && outside(c) => c,
                        _ => return None,
                    };
                    offsets.insert(&b.name, c);
                }
                Rhs::Prim(Prim::Pair, args) => {
                    tuples.insert(&b.name, (&args[0], &args[1]));
                }
                Rhs::Prim(Prim::AddAt, args) => {
                    let acc = path_of(&paths, &args[0])?;
                    let at = match args[1].var() {
                        Some(i) if i == index => None,
                        Some(x) => Some(*offsets.get(x)?),
                        None => return None,
                    };
                    let v = &args[2];
                    let ok = *args[0].ty() == Type::array(Type::Double)
                        && (outside(v) || v.var().is_some_and(|x| lanes.contains(x)))
                        && self.updates.in_place.contains(&b.name)
                        && self.covered.contains(&b.name)
                        && !added.values().any(|p| *p == acc);
                    if !ok {
                        return None;
                    }
                    added.insert(&b.name, acc.clone());
                    adds.push(PairedAdd {
                        slot: state_slot(st, &acc).ok()?,
                        at: at.cloned(),
                        value: v.clone(),
                    });
                }
                _ => return None,
            }
        }
        // A state array is only the first operand of its one `addAt`.
        let mut uses: HashMap<Name, usize> = HashMap::default();
        for b in &body.binds {
            b.rhs.for_each_atom(&mut |a| {
                if let Some(x) = a.var() {
                    *uses.entry(x.clone()).or_default() += 1;
                }
            });
        }
        if let Some(x) = body.result.var() {
            *uses.entry(x.clone()).or_default() += 1;
        }
        for (x, p) in &paths {
            let arrays = matches!(state_type(st, p), Some(Type::Array(_)));
            if arrays && uses.get(*x).copied().unwrap_or(0) > 1 {
                return None;
            }
        }
        // The result: the state, leaf by leaf.
        let mut literals = Vec::new();
        let mut stack = vec![(body.result.clone(), Vec::new())];
        while let Some((a, p)) = stack.pop() {
            let ty = state_type(st, &p)?;
            if let Type::Pair(..) = ty
                && let Some((l, r)) = a.var().and_then(|x| tuples.get(x))
            {
                let (mut pl, mut pr) = (p.clone(), p);
                pl.push(false);
                pr.push(true);
                stack.push(((*l).clone(), pl));
                stack.push(((*r).clone(), pr));
                continue;
            }
            if path_of(&paths, &a).as_deref() == Some(&p[..]) {
                continue;
            }
            match (&a, ty) {
                (Atom::Var(x, _), Type::Array(_)) if added.get(x) == Some(&p) => {}
                (Atom::Lit(..), Type::Double | Type::Index | Type::Bool) => {
                    literals.push((state_slot(st, &p).ok()?, a.clone()));
                }
                _ => return None,
            }
        }
        // Every `addAt` is in the result at its array's place: that leaf is
        // an array, so it is that `addAt` (checked above), or else the
        // array's projection, whose second use was refused above.
        Some(FoldPairs {
            lanes,
            adds,
            literals,
        })
    }

    /// [`fold_pairs`]'s loop: the state's buffers are updated in place
    /// and keep their slots, so two iterations at a time need no state;
    /// the last iteration when `n` is odd runs as written, and a literal
    /// leaf of the result is the state's after the first iteration. Each
    /// slot an `addAt` writes is written by one iteration (its index is
    /// `i + c`), and no array the body reads is one it writes (the `addAt`s
    /// are in place: nothing reads their old arrays), so the same bits.
    ///
    /// [`fold_pairs`]: Self::fold_pairs
    fn paired_fold(
        &mut self,
        n: Value,
        z: &[Value],
        (s, index): (&Name, &Name),
        body: &AnfBlock,
        plan: &FoldPairs,
    ) -> R<Vals> {
        let flags = MemFlagsData::new().with_notrap();
        let half = self.b.ins().sshr_imm_u(n, 1);
        self.counted_loop(half, &[], |l, h, _| {
            let k = l.b.ins().ishl_imm_u(h, 1);
            l.env.insert(s.clone(), z.to_vec());
            let vals = l.lanes(&body.binds, &plan.lanes, index, k)?;
            for add in &plan.adds {
                let at = match &add.at {
                    None => k,
                    Some(c) => {
                        let c = l.scalar(c)?;
                        l.b.ins().iadd(k, c)
                    }
                };
                let v = l.vector(&vals, &add.value)?;
                let p = l.element(z[add.slot], at, 8);
                let old = l.b.ins().load(types::F64X2, flags, p, 0);
                let new = l.b.ins().fadd(old, v);
                l.b.ins().store(flags, new, p, 0);
            }
            Ok(Vec::new())
        })?;
        // The last iteration when n is odd.
        let odd = self.b.ins().band_imm_u(n, 1);
        let last = self.b.ins().iadd_imm_s(n, -1);
        let mut out =
            self.counted_loop(odd, z, |l, _, st| l.fold_step((s, index), last, st, body))?;
        let some = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, n, 0);
        for (slot, lit) in &plan.literals {
            let v = self.scalar(lit)?;
            out[*slot] = self.b.ins().select(some, v, out[*slot]);
        }
        Ok(out)
    }

    /// The fast path of a `build` of `build`s transposed (Note
    /// [Interchange], builds of builds), inside [`nest`]'s guard: the `n`
    /// rows of `m` elements allocated first, then filled i-major.
    ///
    /// [`nest`]: Self::nest
    fn rows_i_major(
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
            l.trusted += 1;
            let r = per_i.iter().try_for_each(|b| l.bind(b));
            l.trusted -= 1;
            r?;
            l.counted_loop(n, &[], |l, k, _| {
                l.env.insert(j.clone(), vec![k]);
                l.trusted += 1;
                let r = per_ij.iter().try_for_each(|b| l.bind(b));
                l.trusted -= 1;
                r?;
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

    /// The frame of an interchanged nest `build n (fun j -> outer)` (Note
    /// [Interchange]): E-Build-Bot of `n`, then, when `n > 0`, the inner
    /// loop's count `m` tested (⊥ with `inner_code` when negative), then
    /// the guard over `reads`. When it holds, `fast` builds the array
    /// (its buffer returned) with the loops interchanged; when not, the
    /// nest runs as written (cold) and stops with the evaluator's ⊥.
    fn nest(
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
        self.fail_if(bad, inner_code, m, zero);
        let ok = self.nest_guard(reads, n, m)?;
        let (fast_b, slow, join) = self.diamond(ok, &[types::I64]);
        self.b.switch_to_block(fast_b);
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

    /// One iteration of the loop over `index`: its body, between a mark
    /// and a release of the scratch region when it binds scratch arrays
    /// (Note [Scratch arrays]). The body's values are in registers, or
    /// point to buffers outside the scratch region.
    fn iteration(&mut self, index: &Name, body: &AnfBlock) -> R<Vals> {
        let Some(stacks) = self.scratch.loops.get(index).cloned() else {
            return self.block(body);
        };
        let flags = self.windows;
        let marks: Vec<Value> = stacks
            .iter()
            .map(|&k| {
                let cur_at = ctx_window(k)[1];
                self.b.ins().load(types::I64, flags, self.ctx, cur_at)
            })
            .collect();
        let v = self.block(body)?;
        for (&k, &mark) in stacks.iter().zip(&marks) {
            self.release(k, mark)?;
        }
        Ok(v)
    }

    /// Iteration `i` of a fold or scan with state `st` (E-IFold-Succ):
    /// the state and the index bound, then the body.
    fn fold_step(
        &mut self,
        (s, index): (&Name, &Name),
        i: Value,
        st: &[Value],
        body: &AnfBlock,
    ) -> R<Vals> {
        self.env.insert(s.clone(), st.to_vec());
        self.env.insert(index.clone(), vec![i]);
        self.iteration(index, body)
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

    /// Whether the Index `a` is known to be at least 0 (Note [Known
    /// counts]): a literal, a loop index, a length, or a successor.
    fn known_nonneg(&self, a: &Atom) -> bool {
        match a {
            Atom::Lit(Lit::Int(c), _) => *c >= 0,
            Atom::Var(x, _) => self.nonneg.contains(x),
            _ => false,
        }
    }

    /// Whether `args` of an Index `+` are a loop index and 1, in either
    /// order: `i ≤ n − 1` for a count `n ≤ i64::MAX`, so `i + 1` cannot
    /// overflow (Note [Known counts]).
    fn successor(&self, args: &[Atom]) -> bool {
        let index = |a: &Atom| a.var().is_some_and(|x| self.loop_indices.contains(x));
        let one = |a: &Atom| matches!(a, Atom::Lit(Lit::Int(1), _));
        matches!(args, [a, b] if (index(a) && one(b)) || (one(a) && index(b)))
    }

    /// E-Build-Bot, E-IFold-Bot, E-Accum-Bot: `n < 0` is ⊥ with `code`,
    /// tested unless the count `a` is known to be at least 0 (Note [Known
    /// counts]).
    fn check_count_of(&mut self, a: &Atom, n: Value, code: i64) {
        if !self.known_nonneg(a) {
            self.check_count(n, code);
        }
    }

    /// E-Build-Bot, E-IFold-Bot, E-Accum-Bot: `n < 0` is ⊥ with `code`.
    fn check_count(&mut self, n: Value, code: i64) {
        let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, n, 0);
        let zero = self.iconst(0);
        self.fail_if(neg, code, n, zero);
    }

    /// E-IFold-Zero, E-IFold-Succ, E-IFold-Done, E-IFold-Bot; behind its
    /// bounds guard when it has one (Note [Bounds guards]).
    fn ifold(
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
            // Note [Two iterations per trip].
            if twice::doubled(st, body) {
                l.doubled.push(index.clone());
                return l.doubled_fold(n, &z, (s, index), body);
            }
            l.counted_loop(n, &z, |l, i, st| l.fold_step((s, index), i, st, body))
        };
        self.versions(n, guard, Some((&z, st)), run)
    }

    /// The fold of `n ≥ 0` iterations from `z`, iterations `2k` and `2k +
    /// 1` per trip, then the last one alone when `n` is odd (Note [Two
    /// iterations per trip] in `codegen/twice.rs`).
    fn doubled_fold(
        &mut self,
        n: Value,
        z: &[Value],
        (s, index): (&Name, &Name),
        body: &AnfBlock,
    ) -> R<Vals> {
        let step = |l: &mut Self, i: Value, st: &[Value]| l.fold_step((s, index), i, st, body);
        let half = self.b.ins().sshr_imm_u(n, 1);
        let trips = self.counted_loop(half, z, |l, k, st| {
            // 2k + 1 < n: neither index overflows.
            let i = l.b.ins().ishl_imm_u(k, 1);
            let st = step(l, i, st)?;
            let i1 = l.b.ins().iadd_imm_s(i, 1);
            step(l, i1, &st)
        })?;
        // The last iteration alone when n is odd: a conditional, not a
        // loop (no back edge).
        let odd = self.b.ins().band_imm_u(n, 1);
        let tys: Vec<types::Type> = trips
            .iter()
            .map(|v| self.b.func.dfg.value_type(*v))
            .collect();
        let (one, none, join) = self.diamond(odd, &tys);
        self.b.switch_to_block(one);
        let last = self.b.ins().iadd_imm_s(n, -1);
        let st = step(self, last, &trips)?;
        self.b.ins().jump(join, &args_of(&st));
        self.b.switch_to_block(none);
        self.b.ins().jump(join, &args_of(&trips));
        self.b.switch_to_block(join);
        Ok(self.b.block_params(join).to_vec())
    }

    /// The guard of the innermost loop `name` over `index`, if it has one
    /// (Note [Bounds guards] in `codegen/guard.rs`).
    fn guard_plan(
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
    fn guard_holds(
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
                    z[state_slot(ty, path)? + 1]
                }
            };
            let fits = match &check.at {
                guard::At::Loop => self.b.ins().icmp(IntCC::SignedLessThanOrEqual, m, len),
                guard::At::Const(c) => {
                    let c = self.scalar(c)?;
                    self.b.ins().icmp(IntCC::UnsignedLessThan, c, len)
                }
                guard::At::Offset(c) => {
                    // 0 ≤ c ≤ length a − m (no overflow: both are ≥ 0).
                    let c = self.scalar(c)?;
                    let nonneg = self
                        .b
                        .ins()
                        .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, c, 0);
                    let room = self.b.ins().isub(len, m);
                    let below = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, c, room);
                    self.b.ins().band(nonneg, below)
                }
            };
            ok = self.b.ins().band(ok, fits);
        }
        let none = self.b.ins().icmp_imm_s(IntCC::Equal, m, 0);
        Ok(self.b.ins().bor(none, ok))
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

    /// E-IScan-Zero, E-IScan-Succ, E-IScan-Done, E-IScan-Bot: the n + 1
    /// states in one buffer.
    fn iscan(
        &mut self,
        n: &Atom,
        z: &Atom,
        s: &Name,
        st_ty: &Type,
        index: &Name,
        body: &AnfBlock,
    ) -> R<Vals> {
        let count = self.scalar(n)?;
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

    // ----- jamming (Note [Jamming] in `codegen/jam.rs`) ------------------------------

    /// The jamming plan of the loop over `index` (Note [Jamming]),
    /// when its iterations keep nothing on a scratch stack, the fold's
    /// inputs are not fused, and the code is not a cold version.
    fn jam_plan(
        &mut self,
        index: &Name,
        state: Option<&Name>,
        body: &AnfBlock,
    ) -> Option<jam::Plan> {
        if self.cold || self.scratch.loops.contains_key(index) {
            return None;
        }
        let plan = jam::plan(state, body)?;
        if plan
            .pre
            .iter()
            .any(|&k| self.plan.fused.contains_key(&body.binds[k].name))
        {
            return None;
        }
        self.jammed.push(index.clone());
        Some(plan)
    }

    /// The loop over `index < n` with state `init` (none for a `build`)
    /// two iterations at a time, their inner folds jammed (Note
    /// [Jamming]). `finish` ends iteration i with the body's value: it
    /// stores what the loop keeps and returns the next state.
    fn jammed(
        &mut self,
        n: Value,
        init: &[Value],
        (index, state): (&Name, Option<&Name>),
        body: &AnfBlock,
        plan: &jam::Plan,
        finish: impl Fn(&mut Self, Value, &[Value]) -> R<Vals>,
    ) -> R<Vals> {
        let (head, exit) = self.loop_entry(n, init);
        let params = self.b.block_params(head).to_vec();
        let (i, st) = (params[0], &params[1..]);
        let i1 = self.b.ins().iadd_imm_s(i, 1);
        let two = self.b.ins().icmp(IntCC::SignedLessThan, i1, n);
        let (both, one) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(two, both, &[], one, &[]);
        // Iterations i and i + 1: pre[i] as the iteration would start ...
        self.b.switch_to_block(both);
        let pre = jam::picked(body, &plan.pre);
        let enter = |l: &mut Self, at: Value, st: &[Value]| {
            l.env.insert(index.clone(), vec![at]);
            if let Some(s) = state {
                l.env.insert(s.clone(), st.to_vec());
            }
        };
        enter(self, i, st);
        let lane0 = self.lane((index, i), &pre)?;
        // ... then pre[i + 1] and both folds, any ⊥ abandoning the step.
        let bail = self.b.create_block();
        for _ in 0..3 {
            self.b.append_block_param(bail, types::I64);
        }
        self.b.set_cold_block(bail);
        let exit_fail = std::mem::replace(&mut self.fail, bail);
        enter(self, i1, st);
        let folds = self.lane((index, i1), &pre).and_then(|lane1| {
            Ok((
                self.jam_folds(&body.binds[plan.fold], [&lane0, &lane1])?,
                lane1,
            ))
        });
        self.fail = exit_fail;
        let (xs, lane1) = folds?;
        // post[i], then post[i + 1].
        let fold = &body.binds[plan.fold].name;
        let mut next = st.to_vec();
        for ((at, lane), x) in [(i, &lane0), (i1, &lane1)].into_iter().zip(xs) {
            enter(self, at, &next);
            self.restore(lane);
            self.env.insert(fold.clone(), x);
            for k in &plan.post {
                self.bind(&body.binds[*k])?;
            }
            let v = self.atom(&body.result)?;
            next = finish(self, at, &v)?;
        }
        let i2 = self.b.ins().iadd_imm_s(i, 2);
        self.loop_back((i2, n), &next, (head, exit));
        self.b.switch_to_block(bail);
        self.b.ins().jump(one, &[]);
        // Iteration i alone, as written.
        self.b.switch_to_block(one);
        enter(self, i, st);
        let v = self.iteration(index, body)?;
        let next = finish(self, i, &v)?;
        let i1 = self.b.ins().iadd_imm_s(i, 1);
        self.loop_back((i1, n), &next, (head, exit));
        self.b.switch_to_block(exit);
        Ok(self.b.block_params(exit).to_vec())
    }

    /// One iteration's index and bindings `pre`, and their values (the
    /// inner fold may read both).
    fn lane(&mut self, (index, at): (&Name, Value), pre: &[&Binding]) -> R<Vec<(Name, Vals)>> {
        let mut out = vec![(index.clone(), vec![at])];
        for b in pre {
            self.bind(b)?;
            out.push((b.name.clone(), self.env[&b.name].clone()));
        }
        Ok(out)
    }

    /// One iteration's values back in the environment.
    fn restore(&mut self, lane: &[(Name, Vals)]) {
        for (x, v) in lane {
            self.env.insert(x.clone(), v.clone());
        }
    }

    /// The inner folds of two iterations (Note [Jamming]), each with its
    /// iteration's values `lanes`: E-IFold-Bot's test and the bounds guard
    /// of each (failing to `self.fail`), then one loop over both up to the
    /// shorter count, then the rest of the longer one. Their final states.
    fn jam_folds(&mut self, fold: &Binding, lanes: [&[(Name, Vals)]; 2]) -> R<[Vals; 2]> {
        let Rhs::Loop {
            n: m,
            state: Some((z, t, st)),
            index: j,
            body: inner,
            ..
        } = &fold.rhs
        else {
            return Err(compile_error("a jammed loop without its fold"));
        };
        let over = m.var().and_then(|x| self.length_of.get(x)).cloned();
        let pushed = over.map(|a| self.in_bounds.push((j.clone(), a))).is_some();
        let known = |a: &Name| self.in_bounds.iter().any(|(k, b)| k == j && b == a);
        let guard = guard::plan(j, Some(t), inner, |a| self.fused.contains_key(a), known);
        let mut counts = [self.iconst(0); 2];
        let mut inits: [Vals; 2] = Default::default();
        for (k, lane) in lanes.iter().enumerate() {
            self.restore(lane);
            let mk = self.scalar(m)?;
            self.check_count_of(m, mk, abi::NEGATIVE_COUNT);
            let zk = self.atom(z)?;
            if let Some(g) = &guard {
                let ok = self.guard_holds(mk, g, Some((&zk, st)))?;
                let fails = self.b.ins().icmp_imm_s(IntCC::Equal, ok, 0);
                let none = self.iconst(0);
                self.fail_if(fails, abi::INDEX_OUT_OF_BOUNDS, none, none);
            }
            counts[k] = mk;
            inits[k] = zk;
        }
        let before = std::mem::take(&mut self.covered);
        if let Some(g) = &guard {
            self.covered = g.covered.clone();
        }
        let r = self.jam_loops(lanes, counts, inits, (t, j, inner));
        self.covered = before;
        if pushed {
            self.in_bounds.pop();
        }
        r
    }

    /// [`jam_folds`]' loops, inside the guards.
    ///
    /// [`jam_folds`]: Self::jam_folds
    fn jam_loops(
        &mut self,
        lanes: [&[(Name, Vals)]; 2],
        [m0, m1]: [Value; 2],
        [z0, z1]: [Vals; 2],
        (t, j, inner): (&Name, &Name, &AnfBlock),
    ) -> R<[Vals; 2]> {
        let iterate = |l: &mut Self, lane: &[(Name, Vals)], at: Value, st: &[Value]| {
            l.restore(lane);
            l.env.insert(t.clone(), st.to_vec());
            l.env.insert(j.clone(), vec![at]);
            l.block(inner)
        };
        let shorter = self.b.ins().smin(m0, m1);
        let width = z0.len();
        let init = [z0, z1].concat();
        let both = self.counted_loop(shorter, &init, |l, at, st| {
            let mut next = iterate(l, lanes[0], at, &st[..width])?;
            next.extend(iterate(l, lanes[1], at, &st[width..])?);
            Ok(next)
        })?;
        let mut out: [Vals; 2] = [both[..width].to_vec(), both[width..].to_vec()];
        for (k, m) in [m0, m1].into_iter().enumerate() {
            let rest = self.b.ins().isub(m, shorter);
            out[k] = self.counted_loop(rest, &out[k], |l, at, st| {
                let at = l.b.ins().iadd(at, shorter);
                iterate(l, lanes[k], at, st)
            })?;
        }
        Ok(out)
    }

    // ----- primitives -------------------------------------------------------------

    fn prim(&mut self, op: Prim, args: &[Atom], ty: &Type) -> R<Vals> {
        if args.len() != op.arity() {
            return Err(compile_error(format!(
                "`{}` with {} arguments",
                op.name(),
                args.len()
            )));
        }
        let at = args[0].ty().clone();
        // A test the bounds guard covers (Note [Bounds guards]).
        let unchecked = std::mem::take(&mut self.unchecked);
        match op {
            Prim::Add | Prim::Sub | Prim::Mul | Prim::Div | Prim::Pow => {
                let (x, y) = (self.scalar(&args[0])?, self.scalar(&args[1])?);
                let r = match at {
                    Type::Double => self.arith_double(op, x, y)?,
                    // `i + c` where the guard proved `c + m ≤ length a`.
                    Type::Index if unchecked && op == Prim::Add => self.b.ins().iadd(x, y),
                    // `i + 1` of a loop index (Note [Known counts]).
                    Type::Index if op == Prim::Add && self.successor(args) => {
                        self.b.ins().iadd(x, y)
                    }
                    Type::Index => self.arith_index(op, x, y)?,
                    _ => return Err(compile_error(format!("`{}` on {at}", op.name()))),
                };
                Ok(vec![r])
            }
            Prim::Neg => {
                let x = self.scalar(&args[0])?;
                Ok(vec![self.neg(x, &at)])
            }
            Prim::Lt | Prim::Gt | Prim::Le | Prim::Ge | Prim::Eq | Prim::Ne => {
                let (x, y) = (self.scalar(&args[0])?, self.scalar(&args[1])?);
                Ok(vec![self.compare(op, x, y, &at)])
            }
            Prim::Not => {
                // E-Not
                let x = self.scalar(&args[0])?;
                Ok(vec![self.b.ins().icmp_imm_s(IntCC::Equal, x, 0)])
            }
            Prim::Sin | Prim::Cos | Prim::Tan | Prim::Log | Prim::Exp | Prim::Sqrt => {
                let x = self.scalar(&args[0])?;
                Ok(vec![self.math(op, x)?])
            }
            Prim::ToDouble => {
                // E-ToDouble: round to nearest, like Rust's `as`.
                let x = self.scalar(&args[0])?;
                Ok(vec![self.b.ins().fcvt_from_sint(types::F64, x)])
            }
            Prim::Pair => {
                // E-Pair: a pair is its components' slots side by side.
                let mut v = self.atom(&args[0])?;
                v.extend(self.atom(&args[1])?);
                Ok(v)
            }
            Prim::Fst | Prim::Snd => {
                // E-Fst, E-Snd
                let Type::Pair(a, _) = &at else {
                    return Err(compile_error("projection of a non-pair"));
                };
                let k = slots(a)?;
                let mut v = self.atom(&args[0])?;
                Ok(if op == Prim::Fst {
                    v.truncate(k);
                    v
                } else {
                    v.split_off(k)
                })
            }
            Prim::Length => {
                // E-Length
                if let Atom::Var(x, _) = &args[0]
                    && self.fused.contains_key(x)
                {
                    return Ok(vec![self.length_of(x)?]);
                }
                let v = self.atom(&args[0])?;
                Ok(vec![v[1]])
            }
            Prim::Get => {
                if let Atom::Var(x, _) = &args[0]
                    && let Some(live) = self.fused.get(x).cloned()
                {
                    return self.fused_get(live, &args[1]);
                }
                self.get(&args[0], &args[1], unchecked)
            }
            Prim::Concat => self.concat(&args[0], ty),
            Prim::Accum => self.accum(&args[0], &args[1], &args[2]),
            Prim::AddAt => {
                let in_place = self.in_place.take().unwrap_or(false);
                self.add_at(&args[0], &args[1], &args[2], in_place, unchecked)
            }
            Prim::Build | Prim::IFold | Prim::IScan => Err(compile_error(format!(
                "`{}` outside a loop of the normal form",
                op.name()
            ))),
        }
    }

    /// E-Arith / E-Arith-Bot on Doubles.
    fn arith_double(&mut self, op: Prim, x: Value, y: Value) -> R<Value> {
        Ok(match op {
            Prim::Add => self.b.ins().fadd(x, y),
            Prim::Sub => self.b.ins().fsub(x, y),
            Prim::Mul => self.b.ins().fmul(x, y),
            Prim::Div if self.nonzero_divisors => self.b.ins().fdiv(x, y),
            Prim::Div => {
                let zero = self.b.ins().f64const(0.0);
                let is_zero = self.b.ins().fcmp(FloatCC::Equal, y, zero);
                let z = self.iconst(0);
                self.fail_if(is_zero, abi::DIVISION_BY_ZERO, z, z);
                self.b.ins().fdiv(x, y)
            }
            Prim::Pow => {
                self.pow_domain(x, y);
                self.call1("fsmooth_pow", &[x, y])?
            }
            _ => return Err(compile_error("not an arithmetic operator")),
        })
    }

    /// E-Arith-Bot for Double `**`: defined when x > 0, or x = 0 and
    /// y ≥ 0, or x < 0 and y is an integer (y − trunc y = 0, false for ±∞).
    fn pow_domain(&mut self, x: Value, y: Value) {
        let zero = self.b.ins().f64const(0.0);
        let pos = self.b.ins().fcmp(FloatCC::GreaterThan, x, zero);
        let x0 = self.b.ins().fcmp(FloatCC::Equal, x, zero);
        let ynn = self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, y, zero);
        let zero_case = self.b.ins().band(x0, ynn);
        let neg = self.b.ins().fcmp(FloatCC::LessThan, x, zero);
        let t = self.b.ins().trunc(y);
        let fract = self.b.ins().fsub(y, t);
        let int = self.b.ins().fcmp(FloatCC::Equal, fract, zero);
        let neg_case = self.b.ins().band(neg, int);
        let ok = self.b.ins().bor(pos, zero_case);
        let ok = self.b.ins().bor(ok, neg_case);
        let bad = self.b.ins().icmp_imm_s(IntCC::Equal, ok, 0);
        let xb = self.b.ins().bitcast(types::I64, MemFlagsData::new(), x);
        let yb = self.b.ins().bitcast(types::I64, MemFlagsData::new(), y);
        self.fail_if(bad, abi::DOMAIN_POW, xb, yb);
    }

    /// E-Arith / E-Arith-Bot on Indices: exact, or `integer-overflow`.
    fn arith_index(&mut self, op: Prim, x: Value, y: Value) -> R<Value> {
        let z = self.iconst(0);
        let checked = |l: &mut Self, (r, of): (Value, Value), k: i64| {
            let k = l.iconst(k);
            l.fail_if(of, abi::OVERFLOW, k, z);
            r
        };
        Ok(match op {
            Prim::Add => {
                let r = self.b.ins().sadd_overflow(x, y);
                checked(self, r, 0)
            }
            Prim::Sub => {
                let r = self.b.ins().ssub_overflow(x, y);
                checked(self, r, 1)
            }
            Prim::Mul => {
                let r = self.b.ins().smul_overflow(x, y);
                checked(self, r, 2)
            }
            Prim::Div => {
                // Division truncates toward zero (`sdiv`), which would trap
                // on these two cases: test them first.
                let y0 = self.b.ins().icmp_imm_s(IntCC::Equal, y, 0);
                self.fail_if(y0, abi::DIVISION_BY_ZERO, z, z);
                let xmin = self.b.ins().icmp_imm_s(IntCC::Equal, x, i64::MIN);
                let ym1 = self.b.ins().icmp_imm_s(IntCC::Equal, y, -1);
                let of = self.b.ins().band(xmin, ym1);
                let k = self.iconst(3);
                self.fail_if(of, abi::OVERFLOW, k, z);
                self.b.ins().sdiv(x, y)
            }
            Prim::Pow => {
                let status = self.call1("fsmooth_ipow", &[self.ctx, x, y])?;
                let flags = MemFlagsData::trusted();
                let a = self.b.ins().load(types::I64, flags, self.ctx, CTX_A);
                let b = self.b.ins().load(types::I64, flags, self.ctx, CTX_B);
                let bad = self.b.ins().icmp_imm_s(IntCC::NotEqual, status, 0);
                self.fail_if_dyn(bad, status, a, b);
                self.b.ins().load(types::I64, flags, self.ctx, CTX_SCRATCH)
            }
            _ => return Err(compile_error("not an arithmetic operator")),
        })
    }

    /// E-Neg: the sign bit of a Double; exact negation of an Index.
    fn neg(&mut self, x: Value, ty: &Type) -> Value {
        if *ty == Type::Double {
            return self.b.ins().fneg(x);
        }
        let min = self.b.ins().icmp_imm_s(IntCC::Equal, x, i64::MIN);
        let (k, z) = (self.iconst(1), self.iconst(0));
        self.fail_if(min, abi::OVERFLOW, k, z);
        self.b.ins().ineg(x)
    }

    /// E-Cmp: IEEE comparisons (false on NaN except `<>`), integer order.
    fn compare(&mut self, op: Prim, x: Value, y: Value, ty: &Type) -> Value {
        if *ty == Type::Double {
            let (cc, swap) = float_cc(op);
            let (x, y) = if swap { (y, x) } else { (x, y) };
            return self.b.ins().fcmp(cc, x, y);
        }
        let cc = match op {
            Prim::Lt => IntCC::SignedLessThan,
            Prim::Gt => IntCC::SignedGreaterThan,
            Prim::Le => IntCC::SignedLessThanOrEqual,
            Prim::Ge => IntCC::SignedGreaterThanOrEqual,
            Prim::Eq => IntCC::Equal,
            _ => IntCC::NotEqual,
        };
        self.b.ins().icmp(cc, x, y)
    }

    /// E-Math / E-Math-Bot, with the evaluator's domain tests.
    fn math(&mut self, op: Prim, x: Value) -> R<Value> {
        let zero = self.b.ins().f64const(0.0);
        let domain = |l: &mut Self, bad: Value, code: i64| {
            let xb = l.b.ins().bitcast(types::I64, MemFlagsData::new(), x);
            let z = l.iconst(0);
            l.fail_if(bad, code, xb, z);
        };
        Ok(match op {
            Prim::Sin => self.call1("fsmooth_sin", &[x])?,
            Prim::Cos => self.call1("fsmooth_cos", &[x])?,
            Prim::Exp => self.call1("fsmooth_exp", &[x])?,
            Prim::Tan => {
                // Dom(tan): x finite and cos x ≠ 0 (spec/semantics.md §4);
                // cos x is NaN exactly when x is not finite.
                let c = self.call1("fsmooth_cos", &[x])?;
                let bad = self.b.ins().fcmp(FloatCC::UnorderedOrEqual, c, zero);
                domain(self, bad, abi::DOMAIN_TAN);
                self.call1("fsmooth_tan", &[x])?
            }
            Prim::Log => {
                let bad = self
                    .b
                    .ins()
                    .fcmp(FloatCC::UnorderedOrLessThanOrEqual, x, zero);
                domain(self, bad, abi::DOMAIN_LOG);
                self.call1("fsmooth_log", &[x])?
            }
            Prim::Sqrt => {
                let bad = self.b.ins().fcmp(FloatCC::UnorderedOrLessThan, x, zero);
                domain(self, bad, abi::DOMAIN_SQRT);
                self.b.ins().sqrt(x)
            }
            _ => return Err(compile_error("not a math function")),
        })
    }

    /// E-Get / E-Get-Bot: one unsigned comparison covers i < 0 and i ≥ n
    /// (none when a bounds guard covers it, `unchecked`).
    fn get(&mut self, arr: &Atom, i: &Atom, unchecked: bool) -> R<Vals> {
        let el = array_elem(arr.ty())?.clone();
        let known = match (arr, i) {
            (Atom::Var(a, _), Atom::Var(k, _)) => {
                self.in_bounds.iter().any(|(ki, ai)| ki == k && ai == a)
            }
            _ => false,
        };
        let a = self.atom(arr)?;
        let i = self.scalar(i)?;
        let (p, n) = (a[0], a[1]);
        if self.trusted == 0 && !known && !unchecked {
            let out = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, i, n);
            self.fail_if(out, abi::INDEX_OUT_OF_BOUNDS, i, n);
        }
        let size = elem_bytes(&el)?;
        let at = self.element(p, i, size);
        self.load(&el, at, 0)
    }

    /// E-Concat: sum the lengths, then copy each part's buffer.
    fn concat(&mut self, parts: &Atom, ty: &Type) -> R<Vals> {
        let size = elem_bytes(array_elem(ty)?)?;
        let a = self.atom(parts)?;
        let (pp, pn) = (a[0], a[1]);
        let desc = 2 * SLOT;
        let flags = MemFlagsData::trusted();
        let zero = self.iconst(0);
        let total = self.counted_loop(pn, &[zero], |l, k, st| {
            let d = l.element(pp, k, desc);
            let len = l.b.ins().load(types::I64, flags, d, SLOT as i32);
            Ok(vec![l.b.ins().iadd(st[0], len)])
        })?[0];
        let dst = self.alloc(total, size)?;
        self.counted_loop(pn, &[zero], |l, k, st| {
            let d = l.element(pp, k, desc);
            let src = l.b.ins().load(types::I64, flags, d, 0);
            let len = l.b.ins().load(types::I64, flags, d, SLOT as i32);
            let to = l.element(dst, st[0], size);
            l.copy(to, src, len, size)?;
            Ok(vec![l.b.ins().iadd(st[0], len)])
        })?;
        Ok(vec![dst, total])
    }

    /// E-AddAt / E-AddAt-Bot: slot `i` of `a` ⊕ `c`, in `a`'s own buffer
    /// when `in_place` (Note [In-place updates] in `codegen/inplace.rs`:
    /// nothing can read the old array), else in a copy.
    /// The bounds test is left out when a bounds guard covers it
    /// (`unchecked`, Note [Bounds guards]).
    fn add_at(&mut self, a: &Atom, i: &Atom, c: &Atom, in_place: bool, unchecked: bool) -> R<Vals> {
        let el = array_elem(a.ty())?.clone();
        let size = elem_bytes(&el)?;
        let av = self.atom(a)?;
        let (p, n) = (av[0], av[1]);
        let i = self.scalar(i)?;
        let cv = self.atom(c)?;
        if !unchecked {
            let out = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, i, n);
            self.fail_if(out, abi::INDEX_OUT_OF_BOUNDS, i, n);
        }
        let dst = if in_place {
            p
        } else {
            let d = self.alloc(n, size)?;
            self.copy(d, p, n, size)?;
            d
        };
        let at = self.element(dst, i, size);
        let old = self.load(&el, at, 0)?;
        let new = self.cotangent_add(&el, &old, &cv)?;
        self.store(&el, &new, at, 0)?;
        Ok(vec![dst, n])
    }

    /// `x ⊕ y` on the slots of two values of type `ty` (spec/semantics.md
    /// §3.7a): Doubles add, arrays concatenate into a new buffer, pairs
    /// componentwise, Index and Bool keep `x`'s.
    fn cotangent_add(&mut self, ty: &Type, x: &[Value], y: &[Value]) -> R<Vals> {
        let mut ls = Vec::new();
        leaves(ty, 0, &mut ls)?;
        let mut out = Vec::with_capacity(x.len());
        let mut k = 0;
        for leaf in ls {
            match leaf {
                Leaf::Double(_) => {
                    out.push(self.b.ins().fadd(x[k], y[k]));
                    k += 1;
                }
                Leaf::Index(_) | Leaf::Bool(_) => {
                    out.push(x[k]);
                    k += 1;
                }
                Leaf::Array(_, e) => {
                    let (xp, xn, yp, yn) = (x[k], x[k + 1], y[k], y[k + 1]);
                    let total = self.b.ins().iadd(xn, yn);
                    let d = self.alloc(total, e)?;
                    self.copy(d, xp, xn, e)?;
                    let tail = self.element(d, xn, e);
                    self.copy(tail, yp, yn, e)?;
                    out.extend([d, total]);
                    k += 2;
                }
            }
        }
        Ok(out)
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

    /// E-Accum / E-Accum-Bot: every slot starts as `zero`; contributions
    /// are added in order (Doubles add, Index and Bool keep `zero`'s,
    /// arrays concatenate: counted first, then copied).
    fn accum(&mut self, zero: &Atom, n: &Atom, cs: &Atom) -> R<Vals> {
        let zt = zero.ty().clone();
        let z = self.atom(zero)?;
        let n = self.scalar(n)?;
        let src = self.accum_source(cs)?;
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

/// The first slot of the component at `path` (`false` for `fst`, `true`
/// for `snd`) of a value of type `ty`.
/// The type of the state component at `path` (false: `fst`).
/// The Double comparison `op` as a Cranelift condition, and whether its
/// operands swap: `x > y` is `y < x` (the same IEEE test, false on NaN),
/// the form of Cranelift's `maxsd`/`maxpd` patterns (Note [Selects]).
fn float_cc(op: Prim) -> (FloatCC, bool) {
    match op {
        Prim::Lt => (FloatCC::LessThan, false),
        Prim::Gt => (FloatCC::LessThan, true),
        Prim::Le => (FloatCC::LessThanOrEqual, false),
        Prim::Ge => (FloatCC::LessThanOrEqual, true),
        Prim::Eq => (FloatCC::Equal, false),
        _ => (FloatCC::NotEqual, false),
    }
}

fn state_type<'t>(ty: &'t Type, path: &[bool]) -> Option<&'t Type> {
    let mut ty = ty;
    for &second in path {
        let Type::Pair(a, b) = ty else {
            return None;
        };
        ty = if second { b } else { a };
    }
    Some(ty)
}

/// An `addAt` of a paired fold (Note [Bounds guards], pairs of `addAt`s):
/// the state slot of its array's pointer, the offset `c` of its index
/// `i + c` (none: `i`), and the Double it adds.
struct PairedAdd {
    slot: usize,
    at: Option<Atom>,
    value: Atom,
}

/// How a fold runs two iterations at a time ([`Lower::fold_pairs`]): the
/// bindings computed in lanes, the `addAt`s, and the literal leaves of its
/// result (state slot, literal).
struct FoldPairs {
    lanes: HashSet<Name>,
    adds: Vec<PairedAdd>,
    literals: Vec<(usize, Atom)>,
}

fn state_slot(ty: &Type, path: &[bool]) -> R<usize> {
    let mut at = 0;
    let mut ty = ty;
    for &second in path {
        let Type::Pair(a, b) = ty else {
            return Err(compile_error("a state path through a non-pair"));
        };
        if second {
            at += slots(a)?;
            ty = b;
        } else {
            ty = a;
        }
    }
    Ok(at)
}

fn array_elem(t: &Type) -> R<&Type> {
    match t {
        Type::Array(e) => Ok(e),
        other => Err(compile_error(format!(
            "expected an array type, found {other}"
        ))),
    }
}
