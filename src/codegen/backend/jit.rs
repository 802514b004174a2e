//! The JIT: one [`JITModule`] per compiled entry, the helpers of
//! `runtime` registered as symbols, and [`Native`], which owns the module
//! (so the function pointer stays valid) and calls the compiled entry on
//! [`Value`]s.
//!
//! The compiled entry is the slot-level entry of `codegen/backend/module.rs`:
//! `fn(ctx: *mut Ctx, args: *const u64, out: *mut u64) -> i64`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cranelift_codegen::ir::types::I64;
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module, default_libcall_names};

use super::module::{
    HELPERS, define_entry, define_lane_constants, host_avx2_fma, host_fma, host_isa, signature,
};
use super::runtime::{self, Arena, Ctx, EntryFn};
use crate::anf::Normal;
use crate::codegen::layout::{Leaf, SLOT, leaves, slots};
use crate::codegen::lower::LowerOptions;
use crate::codegen::{CodegenError, compile_error};
use crate::diagnostic::Span;
use crate::eval::Value;
use crate::ir::Type;

/// The floating-point contract of native code (spec/semantics.md §7).
#[derive(clap::ValueEnum, Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum FpContract {
    /// Every operation the evaluator's, in its order: native results are
    /// the evaluator's bits.
    #[default]
    Strict,
    /// Sums may be regrouped (innermost sums in SIMD lanes, Note [Lane
    /// sums]; with --threads, folds that only add to their state, Note
    /// [Parallel loops]) and `log`/`exp` in lanes are within 2 ulp of the
    /// evaluator's; results agree within the bound of spec/semantics.md
    /// §7.
    Relaxed,
}

/// How an entry is compiled for the JIT.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct NativeOptions {
    pub fp: FpContract,
    /// The threads a loop may run on (Note [Parallel loops]): `build`s
    /// under either contract, folds under the relaxed one.
    pub threads: usize,
}

impl Default for NativeOptions {
    fn default() -> NativeOptions {
        NativeOptions {
            fp: FpContract::Strict,
            threads: 1,
        }
    }
}

impl NativeOptions {
    /// Whether the relaxed contract holds (folds may run on several
    /// threads).
    pub fn relaxed(&self) -> bool {
        self.fp == FpContract::Relaxed
    }
}

/// Resource limits of a native call (Note [Native limits] in
/// `codegen/lower/loops.rs`).
#[derive(Copy, Clone, Debug)]
pub struct NativeLimits {
    /// The most bytes one call may allocate (arguments included).
    pub memory_bytes: usize,
    /// The loop iterations one call may run (the evaluator's `--fuel`
    /// counts steps; each iteration takes at least one).
    pub fuel: u64,
    /// The most elements of an array (the evaluator's E-Limit).
    pub elements: u64,
}

impl NativeLimits {
    /// The evaluator's limits, for native code.
    pub fn of(limits: crate::eval::Limits) -> NativeLimits {
        NativeLimits {
            fuel: limits.fuel,
            elements: limits.elements,
            ..NativeLimits::default()
        }
    }
}

impl Default for NativeLimits {
    fn default() -> NativeLimits {
        let l = crate::eval::Limits::default();
        NativeLimits {
            memory_bytes: 8 << 30,
            fuel: l.fuel,
            elements: l.elements,
        }
    }
}

/// A compiled entry.
pub struct Native {
    /// Owns the code `func` points into; freed on drop.
    module: Option<JITModule>,
    func: EntryFn,
    /// The chunk functions of its parallel folds (Note [Parallel loops]).
    chunks: Vec<EntryFn>,
    /// The other threads' arenas and the threads, kept between calls.
    workers: Mutex<runtime::Parallel>,
    /// The source span of each failure site (Note [Failure sites]).
    sites: Vec<Span>,
    params: Vec<Type>,
    result: Type,
    compile_time: Duration,
    pub limits: NativeLimits,
    /// Arenas of finished calls, kept with their chunks for the next
    /// calls (`Arena::reset`); shared with the [`Outputs`] that return
    /// theirs when dropped.
    pool: ArenaPool,
}

/// At most this many idle arenas are kept (a call's own, and those of
/// the other threads of its parallel loops that held rows of its result).
const POOL: usize = 8;

/// At most this many idle arenas a call with parallel loops takes from
/// the pool before it starts, for the loops after a build whose threads'
/// arenas hold rows of its result (`runtime::Parallel::spare`).
const SPARE_ARENAS: usize = 2;

#[derive(Clone, Default)]
struct ArenaPool(Arc<Mutex<Vec<Arena>>>);

impl ArenaPool {
    /// An arena for one call: a kept one (its chunks reused) or a new one.
    fn take(&self, limit: usize) -> Box<Arena> {
        let kept = self.0.lock().ok().and_then(|mut p| p.pop());
        // Boxed: compiled code holds the arena's address during a call.
        match kept {
            Some(mut a) => {
                a.set_limit(limit);
                Box::new(a)
            }
            None => Box::new(Arena::new(limit)),
        }
    }

    /// Gives back the arena of a finished call; nothing it allocated may
    /// be read any more.
    /// A kept arena, if there is one.
    fn take_idle(&self) -> Option<Arena> {
        self.0.lock().ok().and_then(|mut p| p.pop())
    }

    fn give(&self, mut arena: Arena) {
        arena.reset();
        if let Ok(mut p) = self.0.lock()
            && p.len() < POOL
        {
            p.push(arena);
        }
    }
}

/// The address of the Rust function that provides a helper of
/// [`HELPERS`] to JIT-compiled code.
fn address(name: &str) -> Result<*const u8, CodegenError> {
    Ok(match name {
        "fsmooth_alloc" => runtime::fsmooth_alloc as *const u8,
        "fsmooth_scratch" => runtime::fsmooth_scratch as *const u8,
        "fsmooth_release" => runtime::fsmooth_release as *const u8,
        "fsmooth_copy" => runtime::fsmooth_copy as *const u8,
        "fsmooth_zero" => runtime::fsmooth_zero as *const u8,
        "fsmooth_ipow" => runtime::fsmooth_ipow as *const u8,
        "fsmooth_sin" => runtime::fsmooth_sin as *const u8,
        "fsmooth_cos" => runtime::fsmooth_cos as *const u8,
        "fsmooth_tan" => runtime::fsmooth_tan as *const u8,
        "fsmooth_log" => runtime::fsmooth_log as *const u8,
        "fsmooth_exp" => runtime::fsmooth_exp as *const u8,
        "fsmooth_pow" => runtime::fsmooth_pow as *const u8,
        "fsmooth_parallel" => runtime::fsmooth_parallel as *const u8,
        "fsmooth_row_sums" => super::kernels::fsmooth_row_sums as *const u8,
        "fsmooth_row_sums2" => super::kernels::fsmooth_row_sums2 as *const u8,
        "fsmooth_row_sums_exact" => super::kernels::fsmooth_row_sums_exact as *const u8,
        "fsmooth_row_sums2_exact" => super::kernels::fsmooth_row_sums2_exact as *const u8,
        "fsmooth_fold_rows" => super::kernels::fsmooth_fold_rows as *const u8,
        "fsmooth_vlog" => super::math::fsmooth_vlog as *const u8,
        "fsmooth_vexp" => super::math::fsmooth_vexp as *const u8,
        other => return Err(compile_error(format!("no JIT symbol for helper `{other}`"))),
    })
}

fn new_module() -> Result<JITModule, CodegenError> {
    let mut jb = JITBuilder::with_isa(host_isa(false)?, default_libcall_names());
    for h in HELPERS.iter().chain(&JIT_HELPERS) {
        jb.symbol(h.name, address(h.name)?);
    }
    Ok(JITModule::new(jb))
}

fn declare_helpers(module: &mut JITModule) -> Result<Vec<(&'static str, FuncId)>, CodegenError> {
    let mut out = Vec::new();
    for h in HELPERS.iter().chain(&JIT_HELPERS) {
        let sig = signature(module, h.params, h.results);
        let id = module
            .declare_function(h.name, Linkage::Import, &sig)
            .map_err(compile_error)?;
        out.push((h.name, id));
    }
    Ok(out)
}

/// The helpers only JIT code calls: the threads of parallel folds (object
/// files run single-threaded, Note [Parallel loops]), the kernels of
/// interchanged sums (Note [Row kernels]) and of `log` and `exp` (Note
/// [Math kernels]); object files need only libc and libm.
const JIT_HELPERS: [super::module::Helper; 8] = [
    super::module::Helper {
        name: "fsmooth_parallel",
        params: &[I64, I64, I64, I64, I64, I64, I64, I64, I64],
        results: &[I64],
    },
    super::module::Helper {
        name: "fsmooth_row_sums",
        params: &[I64, I64, I64, I64],
        results: &[],
    },
    super::module::Helper {
        name: "fsmooth_row_sums2",
        params: &[I64, I64, I64, I64, I64],
        results: &[],
    },
    super::module::Helper {
        name: "fsmooth_row_sums_exact",
        params: &[I64, I64, I64, I64],
        results: &[],
    },
    super::module::Helper {
        name: "fsmooth_row_sums2_exact",
        params: &[I64, I64, I64, I64, I64],
        results: &[],
    },
    super::module::Helper {
        name: "fsmooth_fold_rows",
        params: &[I64, I64, I64, I64],
        results: &[],
    },
    super::module::Helper {
        name: "fsmooth_vlog",
        params: &[I64, I64],
        results: &[I64],
    },
    super::module::Helper {
        name: "fsmooth_vexp",
        params: &[I64, I64],
        results: &[I64],
    },
];

impl Native {
    /// Compiles a first-order normal form (strict, one thread).
    pub fn compile(normal: &Normal) -> Result<Native, CodegenError> {
        Native::compile_with(normal, NativeOptions::default())
    }

    /// Compiles a first-order normal form under `options`.
    pub fn compile_with(normal: &Normal, options: NativeOptions) -> Result<Native, CodegenError> {
        let start = Instant::now();
        let mut module = new_module()?;
        match Native::define(&mut module, normal, options) {
            Ok((func, chunks, sites)) => Ok(Native {
                module: Some(module),
                func,
                chunks,
                workers: Mutex::new(runtime::Parallel::default()),
                sites,
                params: normal.params.iter().map(|(_, t)| t.clone()).collect(),
                result: normal.body.result.ty().clone(),
                compile_time: start.elapsed(),
                limits: NativeLimits::default(),
                pool: ArenaPool::default(),
            }),
            Err(e) => {
                // SAFETY: no pointer into the module's code was taken.
                unsafe { module.free_memory() };
                Err(e)
            }
        }
    }

    fn define(
        module: &mut JITModule,
        normal: &Normal,
        options: NativeOptions,
    ) -> Result<(EntryFn, Vec<EntryFn>, Vec<Span>), CodegenError> {
        let helpers = declare_helpers(module)?;
        let constants = define_lane_constants(module, options.relaxed())?;
        let (fma, avx2) = (host_fma(module.isa()), host_avx2_fma(module.isa()));
        let lower = |threads, first_site| LowerOptions {
            limits: true,
            threads,
            relaxed: options.relaxed(),
            fma,
            avx2,
            first_site,
        };
        let (id, defined) = define_entry(
            module,
            "fsmooth_entry",
            Linkage::Export,
            normal,
            (&helpers, constants),
            None,
            lower(options.threads.max(1), 0),
        )?;
        let mut sites = defined.sites;
        // The chunk functions, one thread each, their failure sites
        // numbered after the entry's.
        let mut chunk_ids = Vec::new();
        for (k, chunk) in defined.chunks.iter().enumerate() {
            let (cid, d) = define_entry(
                module,
                &format!("fsmooth_chunk{k}"),
                Linkage::Local,
                chunk,
                (&helpers, constants),
                None,
                lower(1, sites.len()),
            )?;
            sites.extend(d.sites);
            chunk_ids.push(cid);
        }
        module.finalize_definitions().map_err(compile_error)?;
        // SAFETY: each function was compiled with exactly this signature
        // (three pointer-sized arguments, one i64 result, the host's
        // default calling convention, which is the C one).
        let entry = |id| unsafe {
            std::mem::transmute::<*const u8, EntryFn>(module.get_finalized_function(id))
        };
        Ok((entry(id), chunk_ids.into_iter().map(entry).collect(), sites))
    }

    /// The parameter types, in order.
    pub fn params(&self) -> &[Type] {
        &self.params
    }

    /// The result type.
    pub fn result(&self) -> &Type {
        &self.result
    }

    /// How many loops run on several threads (Note [Parallel loops]).
    pub fn parallel_loops(&self) -> usize {
        self.chunks.len()
    }

    /// How many times, over every call so far, a loop ran as chunks on
    /// several threads (rather than as written, too small to be worth it:
    /// Note [Parallel loops], cost).
    pub fn parallel_runs(&self) -> u64 {
        self.workers.lock().map(|w| w.runs).unwrap_or(0)
    }

    /// Time from the normal form (or the entry) to callable code.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// Runs the compiled entry on `args` (checked against the parameter
    /// types), returning its result or the ⊥ it reached.
    pub fn call(&self, args: &[Value]) -> Result<Value, CodegenError> {
        self.call_with(args, self.limits)
    }

    /// [`Native::call`] within `limits` instead of the compiled entry's own.
    pub fn call_with(&self, args: &[Value], limits: NativeLimits) -> Result<Value, CodegenError> {
        self.check_arity(args.len())?;
        let mut arena = self.pool.take(limits.memory_bytes);
        let result = self.call_in(&mut arena, args, &limits);
        self.pool.give(*arena);
        result
    }

    fn call_in(
        &self,
        arena: &mut Arena,
        args: &[Value],
        limits: &NativeLimits,
    ) -> Result<Value, CodegenError> {
        let total: usize = self
            .params
            .iter()
            .map(slots)
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .sum();
        let mut input = vec![0u64; total.max(1)];
        let mut at = 0;
        for (v, t) in args.iter().zip(&self.params) {
            // SAFETY: `input` has room for every parameter's slots.
            unsafe { runtime::write_value(v, t, arena, input.as_mut_ptr().add(at))? };
            at += slots(t)?;
        }
        let mut out = vec![0u64; slots(&self.result)?];
        // SAFETY: the buffers have the sizes the compiled code assumes.
        let kept = unsafe { self.invoke(arena, &input, &mut out, limits)? };
        // SAFETY: on success compiled code wrote a value of the result type
        // whose arrays live in `arena`, `kept` or `input`'s arrays, all
        // alive.
        let v = unsafe { runtime::read_value(&self.result, out.as_ptr()) };
        for a in kept {
            self.pool.give(a);
        }
        v
    }
}

/// An argument of [`Native::call_slices`]: a scalar, or a flat array
/// passed by reference (compiled code reads the caller's buffer in place),
/// or a matrix (`Array<Array<Double>>`) as rows passed by reference (only
/// the row descriptors are written, one pair of words per row).
#[derive(Copy, Clone, Debug)]
pub enum Arg<'a> {
    F64(f64),
    I64(i64),
    Bool(bool),
    F64s(&'a [f64]),
    I64s(&'a [i64]),
    F64Rows(&'a [&'a [f64]]),
}

/// One scalar leaf of a result of [`Native::call_slices`] (Note [Native
/// layout]: a tuple is its components' leaves in order).
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Out<'r> {
    F64(f64),
    I64(i64),
    Bool(bool),
    F64s(&'r [f64]),
    I64s(&'r [i64]),
    F64Rows(Rows<'r>),
}

/// A matrix (`Array<Array<Double>>`) result of [`Native::call_slices`]:
/// the row descriptors compiled code wrote, each row read in place.
#[derive(Copy, Clone)]
pub struct Rows<'r> {
    /// (`ptr`, `len`) per row.
    descs: &'r [[u64; 2]],
}

impl<'r> Rows<'r> {
    /// The number of rows.
    pub fn len(&self) -> usize {
        self.descs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.descs.is_empty()
    }

    /// Row `i` (panics past the end, like slice indexing).
    pub fn row(&self, i: usize) -> &'r [f64] {
        let [ptr, len] = self.descs[i];
        if len == 0 {
            return &[];
        }
        // SAFETY: compiled code wrote a descriptor of a live array of
        // `len` Doubles (in the arena the `Outputs` owns, or in an argument
        // that outlives it).
        unsafe { std::slice::from_raw_parts(ptr as *const f64, len as usize) }
    }

    /// The rows in order.
    pub fn iter(&self) -> impl Iterator<Item = &'r [f64]> + '_ {
        (0..self.len()).map(|i| self.row(i))
    }
}

impl PartialEq for Rows<'_> {
    fn eq(&self, other: &Rows<'_>) -> bool {
        self.len() == other.len() && self.iter().zip(other.iter()).all(|(a, b)| a == b)
    }
}

impl std::fmt::Debug for Rows<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The result of [`Native::call_slices`]: it owns the call's arena, so the
/// arrays it hands out are the buffers compiled code wrote (or the
/// caller's argument slices, which a result may share: hence `'a`).
pub struct Outputs<'a> {
    /// Always `Some` until dropped, when it goes back to `pool`.
    arena: Option<Box<Arena>>,
    /// The other threads' arenas that hold rows of the result (Note
    /// [Parallel loops]), back to `pool` too.
    kept: Vec<Arena>,
    pool: ArenaPool,
    /// The row descriptors of matrix arguments, which a result may share.
    _rows: Vec<Vec<[u64; 2]>>,
    out: Vec<u64>,
    leaves: Vec<(Leaf, Type)>,
    _args: std::marker::PhantomData<&'a [u8]>,
}

impl Drop for Outputs<'_> {
    fn drop(&mut self) {
        // The result's slices borrow `self`, so none outlives this.
        for a in self.kept.drain(..) {
            self.pool.give(a);
        }
        if let Some(a) = self.arena.take() {
            self.pool.give(*a);
        }
    }
}

impl Outputs<'_> {
    /// The number of leaves of the result.
    pub fn len(&self) -> usize {
        self.leaves.len()
    }

    pub fn is_empty(&self) -> bool {
        self.leaves.is_empty()
    }

    /// The bytes of the chunks the call's arena used, reused from earlier
    /// calls or new: the peak of the call's own memory, since an arena
    /// frees nothing before the call's result is dropped (argument buffers
    /// read in place are not counted).
    pub fn arena_bytes(&self) -> usize {
        self.arena.as_ref().map_or(0, |a| a.reserved())
    }

    /// Leaf `k` of the result (None past the end).
    pub fn get(&self, k: usize) -> Option<Out<'_>> {
        let (leaf, ty) = self.leaves.get(k)?;
        let word = |off: i32| self.out[off as usize / SLOT as usize];
        Some(match (*leaf, ty) {
            (Leaf::Double(o), _) => Out::F64(f64::from_bits(word(o))),
            (Leaf::Index(o), _) => Out::I64(word(o) as i64),
            (Leaf::Bool(o), _) => Out::Bool(word(o).to_ne_bytes()[0] != 0),
            (Leaf::Array(o, _), Type::Array(e)) if matches!(**e, Type::Array(_)) => {
                let (ptr, len) = (word(o), word(o + SLOT as i32) as usize);
                let descs = if len == 0 {
                    &[][..]
                } else {
                    // SAFETY: compiled code wrote `len` row descriptors of
                    // two words each (`flat_leaves` checked the type), in
                    // the arena or a matrix argument `self` keeps alive.
                    unsafe { std::slice::from_raw_parts(ptr as *const [u64; 2], len) }
                };
                Out::F64Rows(Rows { descs })
            }
            (Leaf::Array(o, _), Type::Array(e)) => {
                let (ptr, len) = (word(o), word(o + SLOT as i32) as usize);
                if len == 0 {
                    return Some(if **e == Type::Double {
                        Out::F64s(&[])
                    } else {
                        Out::I64s(&[])
                    });
                }
                // SAFETY: compiled code wrote an array of `len` elements of
                // one slot each (checked by `flat_leaves`), living in the
                // arena `self` owns or in an argument slice that outlives
                // `'a`, hence `self`.
                unsafe {
                    if **e == Type::Double {
                        Out::F64s(std::slice::from_raw_parts(ptr as *const f64, len))
                    } else {
                        Out::I64s(std::slice::from_raw_parts(ptr as *const i64, len))
                    }
                }
            }
            (Leaf::Array(..), _) => return None,
        })
    }
}

/// The leaves of `t` when each is a scalar, an array of Double or Index,
/// or an array of arrays of Double, with their types; else an argument
/// error naming `what`.
fn flat_leaves(t: &Type, what: &str) -> Result<Vec<(Leaf, Type)>, CodegenError> {
    let mut ls = Vec::new();
    leaves(t, 0, &mut ls)?;
    let mut tys = Vec::new();
    scalar_types(t, &mut tys);
    for ty in &tys {
        if let Type::Array(e) = ty
            && !matches!(**e, Type::Double | Type::Index)
            && **e != Type::array(Type::Double)
        {
            return Err(CodegenError::Argument {
                message: format!(
                    "{what} has type {t}: `call_slices` takes scalars, flat arrays of Double or Index, and arrays of arrays of Double (use `call`)"
                ),
            });
        }
    }
    Ok(ls.into_iter().zip(tys).collect())
}

/// The types of the leaves of `t`, in slot order.
fn scalar_types(t: &Type, out: &mut Vec<Type>) {
    match t {
        Type::Pair(a, b) => {
            scalar_types(a, out);
            scalar_types(b, out);
        }
        other => out.push(other.clone()),
    }
}

impl Native {
    fn check_arity(&self, given: usize) -> Result<(), CodegenError> {
        if given == self.params.len() {
            return Ok(());
        }
        Err(CodegenError::Argument {
            message: format!(
                "the entry takes {} argument(s), {given} given",
                self.params.len()
            ),
        })
    }

    /// Calls the compiled entry on parameter slots `input`, writing the
    /// result's slots to `out`, and turns a non-zero status into its error.
    ///
    /// # Safety
    ///
    /// `input` holds the slots of every parameter (array slots pointing to
    /// live buffers of the right layout) and `out` has room for the
    /// result's slots.
    unsafe fn invoke(
        &self,
        arena: &mut Arena,
        input: &[u64],
        out: &mut [u64],
        limits: &NativeLimits,
    ) -> Result<Vec<Arena>, CodegenError> {
        let mut ctx = Ctx::new(arena, limits.fuel, limits.elements);
        // The chunk functions and the other threads' arenas (Note
        // [Parallel loops]).
        let mut par = runtime::Parallel::default();
        if !self.chunks.is_empty() {
            if let Ok(mut w) = self.workers.lock() {
                par = std::mem::take(&mut *w);
            }
            par.chunks = self.chunks.clone();
            // Idle arenas of earlier calls, for loops after a build that
            // keeps its threads' arenas.
            while par.spare.len() < SPARE_ARENAS {
                match self.pool.take_idle() {
                    Some(a) => par.spare.push(a),
                    None => break,
                }
            }
            ctx.parallel = &mut par;
        }
        // SAFETY: `func` lives as long as `self.module`; the caller
        // guarantees the buffers; the arena outlives the call.
        let status = unsafe { (self.func)(&mut ctx, input.as_ptr(), out.as_mut_ptr()) };
        // The arenas the result's rows may live in, held as long as it.
        let kept = std::mem::take(&mut par.kept);
        if !self.chunks.is_empty()
            && let Ok(mut w) = self.workers.lock()
        {
            // Nothing compiled code returns lives in the others (the
            // folds copied their results out).
            for a in &mut par.arenas {
                a.reset();
            }
            *w = par;
        }
        match runtime::status_error(status, &ctx) {
            // Note [Failure sites]: the span of the test that failed.
            Some(e) => Err(
                match usize::try_from(ctx.site)
                    .ok()
                    .and_then(|k| self.sites.get(k))
                {
                    Some(span) if *span != Span::generated() => CodegenError::Located {
                        error: Box::new(e),
                        span: *span,
                    },
                    _ => e,
                },
            ),
            None => Ok(kept),
        }
    }

    /// Runs the compiled entry without converting to and from [`Value`]:
    /// scalars and flat arrays go in as they are (array arguments are read
    /// in place), and the result's leaves come back as scalars and slices
    /// of the buffers compiled code wrote. Each parameter must be a scalar
    /// or a flat array of Double or Index, and so must each component of
    /// the result; the ⊥ codes are [`Native::call`]'s.
    pub fn call_slices<'a>(&self, args: &[Arg<'a>]) -> Result<Outputs<'a>, CodegenError> {
        self.call_slices_with(args, self.limits)
    }

    /// [`Native::call_slices`] within `limits`.
    pub fn call_slices_with<'a>(
        &self,
        args: &[Arg<'a>],
        limits: NativeLimits,
    ) -> Result<Outputs<'a>, CodegenError> {
        self.check_arity(args.len())?;
        let leaves = flat_leaves(&self.result, "the result")?;
        let mut input = Vec::with_capacity(2 * args.len() + 1);
        let mut rows = Vec::new();
        for (k, (a, t)) in args.iter().zip(&self.params).enumerate() {
            match (a, t) {
                (Arg::F64(x), Type::Double) => input.push(x.to_bits()),
                (Arg::I64(i), Type::Index) => input.push(*i as u64),
                (Arg::Bool(b), Type::Bool) => input.push(u64::from(*b)),
                (Arg::F64s(xs), Type::Array(e)) if **e == Type::Double => {
                    input.extend([xs.as_ptr() as u64, xs.len() as u64]);
                }
                (Arg::I64s(xs), Type::Array(e)) if **e == Type::Index => {
                    input.extend([xs.as_ptr() as u64, xs.len() as u64]);
                }
                (Arg::F64Rows(rs), Type::Array(e)) if **e == Type::array(Type::Double) => {
                    let descs: Vec<[u64; 2]> = rs
                        .iter()
                        .map(|r| [r.as_ptr() as u64, r.len() as u64])
                        .collect();
                    input.extend([descs.as_ptr() as u64, descs.len() as u64]);
                    // Moving the Vec into `rows` keeps its heap buffer.
                    rows.push(descs);
                }
                _ => {
                    return Err(CodegenError::Argument {
                        message: format!("argument {} is {a:?}, the parameter has type {t}", k + 1),
                    });
                }
            }
        }
        input.push(0);
        let mut arena = self.pool.take(limits.memory_bytes);
        let mut out = vec![0u64; slots(&self.result)?.max(1)];
        // SAFETY: as in `call`; the argument slices are only read and
        // outlive the call (and the returned `Outputs`, through `'a`).
        let kept = match unsafe { self.invoke(&mut arena, &input, &mut out, &limits) } {
            Ok(kept) => kept,
            Err(e) => {
                self.pool.give(*arena);
                return Err(e);
            }
        };
        Ok(Outputs {
            arena: Some(arena),
            kept,
            pool: self.pool.clone(),
            _rows: rows,
            out,
            leaves,
            _args: std::marker::PhantomData,
        })
    }
}

impl std::fmt::Debug for Native {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Native")
            .field("params", &self.params)
            .field("result", &self.result)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Drop for Native {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: `func` is dropped with `self` and never called again.
            unsafe { m.free_memory() };
        }
    }
}
