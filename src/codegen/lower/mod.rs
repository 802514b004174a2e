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
//!
//! The passes (`codegen/passes/`) decide what to emit; this module emits
//! it. [`lower_function`] runs the rewrites and whole-function analyses,
//! then one `Lower` walks the rewritten normal form. `Lower` is one state
//! (the builder, the environment, and what the analyses and the
//! enclosing code have established) with one `impl` block per concept:
//! this file holds the core (the function's frame, failure exits, counted
//! loops, blocks, bindings and atoms, conditionals with Note [Selects],
//! array literals), and each child module one way of lowering something:
//!
//! - `memory.rs`: loads and stores of slots, the arena, scratch windows;
//! - `loops.rs`: `build`, `ifold`, `iscan`, their counts (Note [Known
//!   counts]) and bounds guards;
//! - `folds.rs`: the fold step, skipping folds, folds two iterations per
//!   trip;
//! - `lanes.rs`: two elements or iterations at a time in `f64x2` lanes;
//! - `lane_sums.rs`: sums two iterations at a time in `f64x2` lanes
//!   under the relaxed contract (Note [Lane sums]);
//! - `vmath.rs`: `log` and `exp` in `f64x2` lanes, for the relaxed
//!   contract;
//! - `loop_interchange.rs`: loop nests run i-major;
//! - `fold_interchange.rs`: folds of folds of `addAt`s run term-major;
//! - `jam.rs`: loops two iterations at a time with their inner folds
//!   jammed;
//! - `horizontal.rs`: sibling `build`s of one count as one loop;
//! - `fused.rs`: arrays that are never built, and reads of them;
//! - `prim.rs`: primitive applications;
//! - `accum.rs`: `accum`;
//! - `parallel.rs`: folds run on several threads (Note [Parallel loops]).
//!
//! A child's methods are `pub(super)` so that its siblings can call them;
//! `Lower`'s fields are private to this module, which already makes them
//! visible to every child and to nothing else.

mod accum;
mod fold_interchange;
mod folds;
mod fused;
mod horizontal;
mod jam;
mod lane_sums;
mod lanes;
mod loop_interchange;
mod loops;
mod memory;
mod parallel;
mod prim;
pub(crate) mod vmath;

pub use vmath::LANE_CONSTANTS;

use fused::Live;
use loops::loop_indices;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    AliasRegionData, Block, BlockArg, FuncRef, Function, GlobalValue, InstBuilder, MemFlagsData,
    StackSlotData, StackSlotKind, Value, types,
};
use cranelift_codegen::isa::TargetFrontendConfig;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};

use crate::anf::{Atom, Binding, Block as AnfBlock, LoopKind, Normal, Rhs};
use crate::codegen::abi::{self, CTX_A, CTX_B};
use crate::codegen::layout::{SLOT, clif_types, elem_bytes, slots};
use crate::codegen::passes::fuse::{self, Plan};
use crate::codegen::passes::{self, Copies, hoist, inplace, scratch, unroll, version, vertical};
use crate::codegen::{CodegenError, compile_error, unsupported};
use crate::diagnostic::Span;
use crate::ir::{Lit, Name, Prim, Type};

type R<T> = Result<T, CodegenError>;
type Vals = Vec<Value>;

/// The helper functions, as references usable in the function, and the
/// module's table of lane constants (Note [Lane constants]).
#[derive(Default)]
pub struct Imports {
    refs: HashMap<&'static str, FuncRef>,
    lane_constants: Option<GlobalValue>,
}

impl Imports {
    pub fn insert(&mut self, name: &'static str, f: FuncRef) {
        self.refs.insert(name, f);
    }

    /// The address of [`LANE_CONSTANTS`]' table in this function.
    pub fn set_lane_constants(&mut self, table: GlobalValue) {
        self.lane_constants = Some(table);
    }

    fn lane_constants(&self) -> Option<GlobalValue> {
        self.lane_constants
    }

    /// Whether this module provides the helper `name` (the JIT's own,
    /// such as the row kernels of Note [Row kernels], are not in object
    /// files).
    fn has(&self, name: &str) -> bool {
        self.refs.contains_key(name)
    }

    fn get(&self, name: &str) -> R<FuncRef> {
        self.refs
            .get(name)
            .copied()
            .ok_or_else(|| compile_error(format!("helper `{name}` not declared")))
    }
}

/// What a pair's `log` and `exp` in lanes do in a block of a lane sum
/// that the math kernels run (Note [Math kernels]).
#[derive(Clone, Copy, Debug, PartialEq)]
enum MathLanes {
    /// Store the argument into the block's buffer.
    Arguments,
    /// Load the value the kernel left there.
    Values,
}

/// How a function is lowered.
#[derive(Clone, Copy, Debug)]
pub struct LowerOptions {
    /// Whether the call context holds the JIT's limits and failure site
    /// (Note [Native limits] in `loops.rs`, Note [Failure sites]).
    pub limits: bool,
    /// The threads a loop may run on (Note [Parallel loops]); 1 for
    /// object files and for the chunk functions themselves.
    pub threads: usize,
    /// The relaxed floating-point contract (spec/semantics.md §7): folds
    /// may run on several threads too, not only `build`s.
    pub relaxed: bool,
    /// Whether the host has fused multiply–add (x86-64's FMA3;
    /// `backend::module::host_fma`). Under the relaxed contract the
    /// polynomials of `log` and `exp` in lanes are then evaluated with
    /// it (Note [Fused polynomials] in `vmath.rs`); strict code never
    /// fuses.
    pub fma: bool,
    /// Whether the host has AVX2 and FMA3 (`backend::module::host_avx2_fma`):
    /// JIT code may then call the row kernels (Note [Row kernels] in
    /// `backend/kernels.rs`), which object files do not have.
    pub avx2: bool,
    /// The number of this function's first failure site: the sites of a
    /// JIT module's functions are numbered in one sequence.
    pub first_site: usize,
}

/// Lowers `normal` into `func`, whose signature is
/// `(ctx, args, out) -> status`. Returns where its arrays live, the
/// normal form as lowered (after fusion, unrolling and hoisting), and the
/// chunk functions its parallel folds call (Note [Parallel loops]), to be
/// compiled in the same module.
pub fn lower_function(
    func: &mut Function,
    fctx: &mut FunctionBuilderContext,
    normal: &Normal,
    imports: &Imports,
    target: TargetFrontendConfig,
    options: LowerOptions,
) -> R<Lowered> {
    let limits = options.limits;
    // Projections of pairs forwarded, so that fusion sees through tuples.
    let mut body = normal.body.clone();
    fuse::forward_projections(&mut body);
    // Producers computed in the loop that reads them (Note [Vertical
    // fusion]).
    let merged = vertical::fuse(&mut body);
    // The copies the rewrites make, to report at their originals' spans.
    let mut copies = Copies::new();
    // Loops of two to four iterations as straight-line code (Note
    // [Unrolling]), their values forwarded to their readers.
    unroll::unroll(&mut body, &mut Default::default(), 'u', &mut copies);
    fuse::forward_projections(&mut body);
    // Loop invariants computed once (Note [Hoisting]).
    let mut speculative = hoist::hoist(&mut body, limits, &mut copies);
    // Loops of a size their readers imply, in a copy of the rest of their
    // block where that size is a literal, unrolled (Note [Versioning]).
    if version::version(&mut body, &mut speculative, &mut copies) {
        unroll::unroll(&mut body, &mut speculative, 'w', &mut copies);
        fuse::forward_projections(&mut body);
    }
    let mut spans = normal.spans.clone();
    // A merged consumer's size fails where its producer's did (Note
    // [Vertical fusion], exactness), the producer's own where that was
    // a consumer too.
    for (t, d) in &merged {
        let mut first = d;
        while let Some(p) = merged.get(first) {
            first = p;
        }
        if let Some(s) = normal.spans.get(first) {
            spans.insert(t.clone(), *s);
        }
    }
    passes::carry_spans(&mut spans, &copies);
    let lowered = Normal {
        params: normal.params.clone(),
        body,
        spans,
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
    // Folds on several threads (Note [Parallel loops]), whose free
    // variables are then built, not fused: a chunk is passed values.
    let mut parallel = if options.threads > 1 {
        passes::parallel::plan(normal, options.relaxed)
    } else {
        HashMap::default()
    };
    let built: HashSet<Name> = parallel
        .values()
        .flat_map(|p| p.free.iter().map(|(x, _)| x.clone()))
        .collect();
    let plan = fuse::plan(normal, &built);
    let fused_names: HashSet<Name> = plan.fused.keys().cloned().collect();
    parallel.retain(|_, p| !p.free.iter().any(|(x, _)| fused_names.contains(x)));
    let mut l = Lower {
        limits,
        threads: options.threads,
        parallel,
        chunks: Vec::new(),
        first_site: options.first_site,
        spans: normal.spans.clone(),
        here: Span::generated(),
        sites: Vec::new(),
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
        blocked: Vec::new(),
        folds_interchanged: Vec::new(),
        rows_paired: Vec::new(),
        guarded: Vec::new(),
        paired: Vec::new(),
        skipping: Vec::new(),
        doubled: Vec::new(),
        jammed: Vec::new(),
        horizontal_groups: Vec::new(),
        plain: false,
        nonzero_divisors: false,
        relaxed: options.relaxed,
        fma: options.relaxed && options.fma,
        avx2: options.avx2,
        math: None,
        math_seen: 0,
        deferred: None,
        lane_index: None,
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
        sites: l.sites,
        chunks: l.chunks,
        scratch,
        body: lowered.body,
        updates: l.updates,
        interchanged: l.interchanged,
        blocked: l.blocked,
        folds_interchanged: l.folds_interchanged,
        rows_paired: l.rows_paired,
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
    /// The source span of each failure site (Note [Failure sites]), from
    /// [`LowerOptions::first_site`] on.
    pub sites: Vec<Span>,
    /// The chunk functions of the parallel folds, by number (Note
    /// [Parallel loops]).
    pub chunks: Vec<Normal>,
    /// The scratch arrays (Note [Scratch arrays]).
    pub scratch: scratch::Scratch,
    /// The normal form as lowered (after fusion, unrolling and hoisting).
    pub body: AnfBlock,
    /// The `addAt`s in place (Note [In-place updates]).
    pub updates: inplace::Updates,
    /// The loop nests interchanged (Note [Interchange]).
    pub interchanged: Vec<Name>,
    /// The interchanged sums run in blocks (Note [Interchange], blocks).
    pub blocked: Vec<Name>,
    /// The indices of the folds of folds of `addAt`s run term-major
    /// (Note [Interchanged folds]).
    pub folds_interchanged: Vec<Name>,
    /// The indices of the `build`s of interchanged rows run two rows at a
    /// time (Note [Interchange], pairs of rows).
    pub rows_paired: Vec<Name>,
    /// The innermost loops behind a bounds guard (Note [Bounds guards]).
    pub guarded: Vec<Name>,
    /// The indices of the folds of `addAt`s run two iterations at a time
    /// (Note [Bounds guards], pairs of `addAt`s).
    pub paired: Vec<Name>,
    /// The indices of the folds that skip four iterations at a time when they
    /// keep their state (Note [Skipping folds] in `codegen/passes/skip.rs`).
    pub skipping: Vec<Name>,
    /// The indices of the folds run two iterations per trip (Note [Two
    /// iterations per trip] in `codegen/passes/twice.rs`).
    pub doubled: Vec<Name>,
    /// The indices of the loops run two iterations at a time with their
    /// inner folds jammed (Note [Jamming] in `codegen/passes/jam.rs`).
    pub jammed: Vec<Name>,
    /// The members of each group run as one loop (Note [Horizontal
    /// fusion] in `codegen/passes/horizontal.rs`).
    pub horizontal: Vec<Vec<Name>>,
}

fn offset(bytes: i64) -> R<i32> {
    i32::try_from(bytes).map_err(|_| unsupported("values of more than 2 GiB of slots"))
}

fn args_of(vs: &[Value]) -> Vec<BlockArg> {
    vs.iter().map(|v| BlockArg::from(*v)).collect()
}

struct Lower<'a, 'f> {
    /// Whether the call context holds the JIT's limits (Note [Native
    /// limits] in `loops.rs`) and failure site (Note [Failure sites]).
    limits: bool,
    /// See [`LowerOptions::threads`].
    threads: usize,
    /// The folds that run on several threads, by the name they bind ...
    parallel: HashMap<Name, passes::parallel::Parallel>,
    /// ... and their chunk functions, by number.
    chunks: Vec<Normal>,
    /// See [`LowerOptions::first_site`].
    first_site: usize,
    /// The source spans of the normal form's bindings.
    spans: std::collections::HashMap<Name, Span>,
    /// The span of the binding being lowered.
    here: Span,
    /// The span of each failure site, by its number.
    sites: Vec<Span>,
    b: FunctionBuilder<'f>,
    imports: &'a Imports,
    env: HashMap<Name, Vals>,
    ctx: Value,
    fail: Block,
    /// The bindings not built (Note [Fusion] in `codegen/passes/fuse.rs`) ...
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
    /// `codegen/passes/scratch.rs`) and the loops that release them ...
    scratch: scratch::Scratch,
    /// ... and the stack of the next allocation when it is the scratch
    /// array of the binding being lowered.
    into_scratch: Option<usize>,
    /// Whether the `addAt` being lowered updates its array in place (Note
    /// [In-place updates] in `codegen/passes/inplace.rs`).
    in_place: Option<bool>,
    /// Which `addAt` bindings update in place.
    updates: inplace::Updates,
    /// The loop nests lowered interchanged (Note [Interchange]).
    interchanged: Vec<Name>,
    /// The indices of the folds run term-major (Note [Interchanged folds]).
    folds_interchanged: Vec<Name>,
    /// The indices of the `build`s run two rows at a time (Note
    /// [Interchange], pairs of rows).
    rows_paired: Vec<Name>,
    /// ... and of those, the sums run in blocks (Note [Interchange],
    /// blocks).
    blocked: Vec<Name>,
    /// The innermost loops behind a bounds guard (Note [Bounds guards] in
    /// `codegen/passes/guard.rs`) ...
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
    /// inner folds jammed (Note [Jamming] in `codegen/passes/jam.rs`) ...
    jammed: Vec<Name>,
    /// The members of each group run as one loop (Note [Horizontal
    /// fusion] in `codegen/passes/horizontal.rs`).
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
    /// See [`LowerOptions::relaxed`].
    relaxed: bool,
    /// Relaxed code on a host with FMA3 (Note [Fused polynomials] in
    /// `vmath.rs`).
    fma: bool,
    /// See [`LowerOptions::avx2`].
    avx2: bool,
    /// In a block of a lane sum run by the math kernels (Note [Math
    /// kernels] in `backend/math.rs`): where the pair's `log`s and `exp`s
    /// go (their arguments, before the kernels) or come from (after),
    /// and how many the pair has met.
    math: Option<(Value, MathLanes)>,
    math_seen: usize,
    /// In the pair being lowered in lanes under the relaxed contract
    /// (Note [Lane sums]): whether a lane needs the scalar code — a
    /// division by zero, or a `log` outside the normal positive finite
    /// Doubles. Its tests are collected here rather than failing, and
    /// the pair runs as written when it is set.
    deferred: Option<Value>,
    /// The index of the pair being lowered in lanes under the relaxed
    /// contract, on which the loads of lane constants depend (Note [Lane
    /// constants]).
    lane_index: Option<Value>,
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

impl Lower<'_, '_> {
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
    // Note [Failure sites]
    // ~~~~~~~~~~~~~~~~~~~~~
    // The evaluator reports a ⊥ at the expression whose rule failed; native
    // code reports it at the same place. The normal form keeps each
    // binding's source span (`anf::Normal::spans`; AD passes on the span
    // of what they differentiate, `ir::build::Builder::at`), the lowering
    // knows which binding it is lowering (`here`), and each failure test
    // of JIT code stores its number into the call context
    // (`abi::CTX_SITE`) on the way to the exit; the wrapper turns the
    // number back into the span (`CodegenError::Located`). A copy a pass
    // makes of a binding under a fresh name (unrolled, hoisted, versioned)
    // has its original's span (`passes::Copies`); a binding a pass makes
    // of its own has none and reports the enclosing binding's, and a
    // parallel loop's threads that together overdraw the fuel report the
    // loop's (`lower/parallel.rs`). A loop run in another order than the
    // evaluator's (in pairs, interchanged) meets a zero divisor first at
    // another element: the same ⊥ with one division, but with two
    // (`passes::divisions`) possibly the other's, so such a loop defers
    // its tests and runs as written from the failing pair or nest, or
    // keeps the evaluator's order. The store is in the
    // cold block, so the fast path pays nothing; object files, whose
    // caller has no spans, store nothing.
    fn fail_with(&mut self, cond: Value, details: impl FnOnce(&mut Self) -> (Value, Value, Value)) {
        let (cont, cold) = (self.b.create_block(), self.b.create_block());
        self.b.set_cold_block(cold);
        self.b.ins().brif(cond, cold, &[], cont, &[]);
        self.b.switch_to_block(cold);
        let (code, a, b) = details(self);
        if self.limits {
            // Note [Failure sites]
            let site = self.site_here();
            let flags = MemFlagsData::trusted();
            self.b.ins().store(flags, site, self.ctx, abi::CTX_SITE);
        }
        let fail = self.fail;
        self.b.ins().jump(fail, &args_of(&[code, a, b]));
        self.b.switch_to_block(cont);
    }

    /// A new failure site at the binding being lowered (Note [Failure
    /// sites]): its number.
    fn site_here(&mut self) -> Value {
        let site = self.iconst((self.first_site + self.sites.len()) as i64);
        self.sites.push(self.here);
        site
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
    /// ⌈count / size⌉ for a power of two `size` without overflow: the
    /// chunks of at most `size` a loop over `count` iterations takes (none
    /// for a count ≤ 0).
    fn chunk_count(&mut self, count: Value, size: usize) -> Value {
        debug_assert!(size.is_power_of_two());
        let whole = self.b.ins().sshr_imm_u(count, size.trailing_zeros() as i64);
        let part = self.b.ins().band_imm_u(count, size as i64 - 1);
        let part = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, part, 0);
        let part = self.b.ins().uextend(types::I64, part);
        self.b.ins().iadd(whole, part)
    }

    /// The address of a new buffer of `bytes` bytes in the function's
    /// frame, 16-byte aligned.
    fn stack_buffer(&mut self, bytes: usize) -> R<Value> {
        let bytes = u32::try_from(bytes).map_err(|_| compile_error("a stack buffer too large"))?;
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            bytes,
            4,
        ));
        Ok(self.b.ins().stack_addr(types::I64, slot, 0))
    }

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

    fn block(&mut self, blk: &AnfBlock) -> R<Vals> {
        // Note [Horizontal fusion].
        let groups = passes::horizontal::groups(blk, &|x| self.plan.fused.contains_key(x));
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

    fn bind(&mut self, bind: &Binding) -> R<()> {
        let was = self.enter_site(&bind.name);
        let r = self.bind_here(bind);
        self.here = was;
        r
    }

    /// Makes `name`'s binding the site of the failures lowered next (Note
    /// [Failure sites]), when it has a span; returns the site before.
    fn enter_site(&mut self, name: &Name) -> Span {
        let was = self.here;
        if let Some(s) = self.spans.get(name) {
            self.here = *s;
        }
        was
    }

    fn bind_here(&mut self, bind: &Binding) -> R<()> {
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
            Rhs::While {
                init,
                state,
                cond,
                step,
                ..
            } => self.while_(init, state, cond, step),
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
                        let serial = |this: &mut Self| -> R<Vals> {
                            let built = |a: &Name| !this.fused.contains_key(a);
                            let rows_built = |reads: &[passes::loop_interchange::Read]| {
                                reads.iter().all(|r| match r {
                                    passes::loop_interchange::Read::Row(row) => built(&row.array),
                                    _ => true,
                                })
                            };
                            let nest = (n, index, body, &bind.ty);
                            if let Some(plan) =
                                passes::loop_interchange::plan(index, body, &bind.ty)
                                && rows_built(&plan.reads)
                            {
                                // E-Build-Bot, then E-IFold-Bot of the first
                                // element's sum.
                                this.interchanged.push(bind.name.clone());
                                let code = abi::NEGATIVE_COUNT;
                                this.nest(nest, plan.m, code, &plan.reads, |this, n, m| {
                                    this.sums_i_major(n, m, (&bind.name, index), &plan)
                                })
                            } else if let Some(plan) =
                                passes::loop_interchange::transpose(index, body)
                                && rows_built(&plan.reads)
                            {
                                // E-Build-Bot of the nest, then of its first row.
                                this.interchanged.push(bind.name.clone());
                                let code = abi::NEGATIVE_SIZE;
                                this.nest(nest, plan.m, code, &plan.reads, |this, n, m| {
                                    this.rows_i_major(n, m, index, &plan, &bind.ty)
                                })
                            } else {
                                let guard = this.guard_plan(&bind.name, index, None, body);
                                this.build(n, index, body, &bind.ty, guard.as_ref())
                            }
                        };
                        self.maybe_parallel(&bind.name, n, None, serial)
                    }
                    (LoopKind::IFold, Some((z, s, st))) => {
                        let guard = self.guard_plan(&bind.name, index, Some(s), body);
                        let serial =
                            |l: &mut Self| l.ifold(n, (z, s, st), index, body, guard.as_ref());
                        self.maybe_parallel(&bind.name, n, Some((z, st)), serial)
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
}

fn array_elem(t: &Type) -> R<&Type> {
    match t {
        Type::Array(e) => Ok(e),
        other => Err(compile_error(format!(
            "expected an array type, found {other}"
        ))),
    }
}
