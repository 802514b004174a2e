//! The JIT's runtime, what compiled code calls and what one call needs
//! around it: the call context ([`Ctx`]), the arena every array is
//! allocated from, the `extern "C"` helpers registered with the JIT
//! (allocation, copying, the transcendental functions, Index `**`), the
//! error a returned status code stands for (the codes themselves are
//! `codegen/abi.rs`'s), and the copying of [`Value`]s into and out of the
//! flat layout (Note [Native layout] in `codegen/mod.rs`).
//!
//! The helpers must never unwind into compiled code: none of them panics.
//! The math helpers call the same Rust functions as the evaluator, so
//! native results are bit-identical to the evaluator's.

use std::alloc::{Layout, alloc, dealloc};
use std::ptr::NonNull;

use super::pool::{Pool, Task};
use crate::codegen::CodegenError;
use crate::codegen::abi::{
    DIVISION_BY_ZERO, DOMAIN, DOMAIN_IPOW, DOMAIN_OPS, DOMAIN_POW, INDEX_OUT_OF_BOUNDS,
    NEGATIVE_COUNT, NEGATIVE_SIZE, OK, OUT_OF_FUEL, OUT_OF_MEMORY, OVERFLOW, OVERFLOW_OPS, STACKS,
    TOO_LARGE,
};
use crate::codegen::layout::{SLOT, slots};
use crate::eval::Value;
use crate::ir::Type;
use crate::ir::prim::{Bottom, Compute, Prim};

/// The context of one call, passed to compiled code as its first argument.
/// Compiled code reads `arena` only through the helpers, writes `a`, `b`
/// (error details) and `scratch` (Index `**` results), and allocates scratch
/// arrays (Note [Scratch arrays] in `codegen/passes/scratch.rs`) from the
/// window `base ≤ cur ≤ end` of their stack in `windows` itself, calling
/// `fsmooth_scratch` only when it is full. The layout is the C `fsmooth_ctx`'s
/// (`codegen/backend/header.rs`); `c_only` are the fields only an object file
/// uses (`limit`, `used`, and the two stacks' block lists).
#[repr(C)]
pub struct Ctx {
    pub arena: *mut Arena,
    pub a: i64,
    pub b: i64,
    pub scratch: i64,
    pub c_only: [i64; 4],
    /// Per scratch stack: (base, cur, end).
    pub windows: [[usize; 3]; STACKS],
    /// The C context's `spare` (unused by the JIT).
    pub spare: i64,
    /// Loop iterations the call may still run (`abi::CTX_FUEL`).
    pub fuel: i64,
    /// The most elements an array may have (`abi::CTX_ELEMENTS`).
    pub elements: i64,
    /// The failure site of a non-zero status (`abi::CTX_SITE`).
    pub site: i64,
    /// The chunk functions and the other threads' arenas of the call's
    /// parallel folds (Note [Parallel loops]); null when it has none.
    /// Compiled code never reads it: only `fsmooth_parallel` does.
    pub parallel: *mut Parallel,
}

/// A compiled entry or chunk function: `(ctx, args, out) -> status`.
pub type EntryFn = unsafe extern "C" fn(*mut Ctx, *const u64, *mut u64) -> i64;

/// What a call's parallel folds need (Note [Parallel loops] in
/// `codegen/passes/parallel.rs`): the chunk functions, by number, an
/// arena per thread beyond the calling one, and the threads. A fold's
/// combination copies everything out of the other threads' arenas before
/// the next fold starts, so each fold resets and reuses them.
#[derive(Default)]
pub struct Parallel {
    pub chunks: Vec<EntryFn>,
    /// Pushed to only between loops: no context points into the vector
    /// when it grows.
    pub arenas: Vec<Arena>,
    /// The arenas of the other threads of builds whose elements hold
    /// arrays: the result's rows live there until the call's result is
    /// dropped.
    pub kept: Vec<Arena>,
    /// Idle arenas of earlier calls (their chunks mapped already), taken
    /// before new ones when a loop needs more arenas: a build that keeps
    /// its threads' arenas would otherwise make every later loop of every
    /// call start on fresh pages.
    pub spare: Vec<Arena>,
    pub pool: Pool,
    /// How many loops ran as chunks, over every call so far.
    pub runs: u64,
}

/// One chunk's call.
#[derive(Clone, Copy)]
struct Job {
    f: EntryFn,
    ctx: *mut Ctx,
    args: *const u64,
    out: *mut u64,
}

// SAFETY: a job's context, arguments and output are used by the thread
// that runs it only, until its status is back; the arguments are
// read-only and outlive the job.
unsafe impl Send for Job {}

impl Job {
    fn run(self) -> i64 {
        // SAFETY: `fsmooth_parallel`'s caller passes buffers of the chunk
        // function's layout; the context and its arena are this job's.
        unsafe { (self.f)(self.ctx, self.args, self.out) }
    }

    fn task(self) -> Task {
        // The whole job moves to the thread (a method call captures it
        // whole, not its fields).
        Box::new(move || self.run())
    }
}

/// `fsmooth_parallel(ctx, k, args, arg_bytes, outs, out_bytes, threads,
/// keep, zero_len)`: runs chunk function `k` on `threads` threads, thread
/// t on the arguments at `args + t · arg_bytes` (whose second word is its
/// count) writing to `outs + t · out_bytes`, thread 0 the calling one
/// with the call's context (Note [Parallel loops]).
///
/// Fuel: compiled code has charged the whole loop's count before this
/// call, as the serial loop would. Each thread starts with the call's
/// remaining fuel plus what its chunk charges again for work the serial
/// loop does not do (its own count, and `zero_len` iterations of the
/// fold's zero accumulators); after, the call's fuel pays only for the
/// rest, each thread's inner loops, and `out-of-fuel` ends a call whose
/// threads together overdrew it. The status is that of the first chunk
/// that failed, its details and site copied into `ctx`. With `keep`, the
/// other threads' arenas hold the chunks' results for the rest of the
/// call (a build's rows); otherwise the next loop reuses them.
#[allow(clippy::too_many_arguments)]
pub extern "C" fn fsmooth_parallel(
    ctx: *mut Ctx,
    k: i64,
    args: *const u64,
    arg_bytes: i64,
    outs: *mut u64,
    out_bytes: i64,
    threads: i64,
    keep: i64,
    zero_len: i64,
) -> i64 {
    // SAFETY: compiled code passes the call's context.
    let ctx = unsafe { &mut *ctx };
    // SAFETY: set by the JIT's wrapper for the whole call when the entry
    // has chunk functions, and compiled code calls this only then.
    let Some(par) = (unsafe { ctx.parallel.as_mut() }) else {
        return OUT_OF_MEMORY;
    };
    let (Some(&f), Ok(threads), Ok(ab), Ok(ob)) = (
        usize::try_from(k).ok().and_then(|k| par.chunks.get(k)),
        usize::try_from(threads),
        usize::try_from(arg_bytes),
        usize::try_from(out_bytes),
    ) else {
        return OUT_OF_MEMORY;
    };
    par.runs += 1;
    // SAFETY: the call's arena outlives the call.
    let limit = unsafe { (*ctx.arena).limit() };
    while par.arenas.len() + 1 < threads {
        let a = match par.spare.pop() {
            Some(mut a) => {
                a.set_limit(limit);
                a
            }
            None => Arena::new(limit),
        };
        par.arenas.push(a);
    }
    // What chunk t charges beyond the serial loop's work.
    let extra = |t: usize| {
        // SAFETY: each chunk's arguments start with `lo` and `count`.
        let count = unsafe { *args.byte_add(t * ab).add(1) } as i64;
        count.saturating_add(zero_len.max(0))
    };
    let left = ctx.fuel;
    let mut ctxs: Vec<Ctx> = par.arenas[..threads - 1]
        .iter_mut()
        .enumerate()
        .map(|(t, a)| {
            a.rewind();
            a.set_limit(limit);
            let mut c = Ctx::new(a, 0, 0);
            c.fuel = left.saturating_add(extra(t + 1));
            c.elements = ctx.elements;
            c
        })
        .collect();
    let jobs: Vec<Job> = ctxs
        .iter_mut()
        .enumerate()
        .map(|(t, c)| Job {
            f,
            ctx: c,
            // SAFETY: the caller allocated `threads` chunks' buffers.
            args: unsafe { args.byte_add((t + 1) * ab) },
            out: unsafe { outs.byte_add((t + 1) * ob) },
        })
        .collect();
    ctx.fuel = left.saturating_add(extra(0));
    let first = Job {
        f,
        ctx,
        args,
        out: outs,
    };
    let statuses = par
        .pool
        .run(first.task(), jobs.into_iter().map(Job::task).collect());
    // Each thread's inner work: what it spent beyond its extra.
    let inner = |t: usize, end: i64| left.saturating_add(extra(t)) - end - extra(t);
    let spent: i64 = inner(0, ctx.fuel)
        + ctxs
            .iter()
            .enumerate()
            .map(|(t, c)| inner(t + 1, c.fuel))
            .sum::<i64>();
    let details: Vec<(i64, i64, i64, i64)> =
        ctxs.iter().map(|c| (c.a, c.b, c.site, c.scratch)).collect();
    drop(ctxs);
    if keep != 0 {
        // The chunks' rows stay where they are; the next loop takes
        // fresh arenas.
        let used: Vec<Arena> = par.arenas.drain(..threads - 1).collect();
        par.kept.extend(used);
    }
    ctx.fuel = left.saturating_sub(spent).max(0);
    if let Some(t) = statuses.iter().position(|&s| s != OK) {
        if t > 0 {
            let c = &details[t - 1];
            (ctx.a, ctx.b, ctx.site, ctx.scratch) = *c;
        }
        return statuses[t];
    }
    if spent > left {
        // The threads' inner loops together: the call's entry is the site.
        (ctx.a, ctx.b, ctx.site) = (spent, left, -1);
        return OUT_OF_FUEL;
    }
    OK
}

impl Ctx {
    pub fn new(arena: *mut Arena, fuel: u64, elements: u64) -> Ctx {
        let clamp = |x: u64| i64::try_from(x).unwrap_or(i64::MAX);
        Ctx {
            arena,
            a: 0,
            b: 0,
            scratch: 0,
            c_only: [0; 4],
            windows: [[0; 3]; STACKS],
            spare: 0,
            fuel: clamp(fuel),
            elements: clamp(elements),
            site: -1,
            parallel: std::ptr::null_mut(),
        }
    }
}

/// A bump allocator over large chunks, all freed together on drop.
/// Requests larger than a quarter chunk get a chunk of their own.
///
/// Besides these chunks it holds two stacks of *scratch* chunks, for the
/// arrays that do not outlive an iteration of a loop (Note [Scratch arrays] in
/// `codegen/passes/scratch.rs`). Compiled code allocates from the last chunk
/// of a stack through the stack's window in [`Ctx`] and, when an iteration
/// ends, moves the window back to where it was when the iteration began
/// ([`Arena::release_scratch`] when that is in an earlier chunk, whose later
/// chunks become spares), so the next iteration reuses the memory.
///
/// [`Arena::reset`] keeps the chunks for the next call instead of freeing
/// them: a chunk the system allocator hands out anew is mapped and zeroed
/// page by page on first touch, which took 59% of the time of GMM's
/// reverse-mode gradient (`perf`, benches/README.md). After a reset, a
/// small request reuses a spare whole chunk, a large one the smallest
/// spare chunk that holds it.
///
/// A thread's arena of parallel loops (Note [Parallel loops]) is
/// [`Arena::rewind`]ed before each loop of a call and reset when the call
/// ends. A rewind frees nothing: what the call's loops used stays until
/// the reset, which keeps every chunk the call used (up to its limit) and
/// frees only those it did not. Freeing at every loop what that loop did
/// not take, as a reset did, freed a large chunk of one loop before the
/// next loop of the same size in the next call took a fresh one: the
/// batched GMM gradient at d2_K200 on two threads faulted in 6 MB of new
/// pages per call, and took 6.5 ms instead of 4.2.
pub struct Arena {
    main: Region,
    /// Each scratch stack's chunks, oldest first.
    scratch: [Vec<(NonNull<u8>, Layout)>; STACKS],
    /// Chunks kept from earlier calls, free, that this call has not
    /// taken.
    spare: Vec<(NonNull<u8>, Layout)>,
    /// Chunks this call used and gave back (released scratch, rewound
    /// loops), free: taken before `spare`, and kept by the reset.
    recent: Vec<(NonNull<u8>, Layout)>,
    /// The bytes of both regions' chunks.
    total: usize,
    /// The most `total` has been during this call.
    peak: usize,
    limit: usize,
}

/// Chunks and a bump pointer into the last whole chunk.
#[derive(Default)]
struct Region {
    chunks: Vec<(NonNull<u8>, Layout)>,
    cur: usize,
    end: usize,
}

const CHUNK: usize = 1 << 20;
/// The least size of a scratch chunk: most iterations need far less than
/// a main chunk, and a small call should not hold two more megabytes.
const SCRATCH_CHUNK: usize = 1 << 16;

impl Arena {
    pub fn new(limit: usize) -> Arena {
        Arena {
            main: Region::default(),
            scratch: Default::default(),
            spare: Vec::new(),
            recent: Vec::new(),
            total: 0,
            peak: 0,
            limit,
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The most bytes of chunks one call may take from now on.
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    /// The most bytes of chunks this call has held at once (whole chunks,
    /// reused or new): the peak of the call's own memory.
    pub fn reserved(&self) -> usize {
        self.peak
    }

    /// Ends a call: every chunk it used becomes a spare for the next one,
    /// up to the limit, and the spares it did not take are freed. Nothing
    /// allocated before may be read afterwards.
    pub fn reset(&mut self) {
        for (p, layout) in self.spare.drain(..) {
            // SAFETY: allocated by `alloc` with this layout, freed once.
            unsafe { dealloc(p.as_ptr(), layout) };
        }
        self.rewind();
        // At most the limit's worth (a call's loops, rewound, may have
        // used more than that in all), the chunks given back last first.
        let mut kept = 0;
        for (p, layout) in self.recent.drain(..).rev() {
            if kept + layout.size() <= self.limit {
                kept += layout.size();
                self.spare.push((p, layout));
            } else {
                // SAFETY: allocated by `alloc` with this layout, freed once.
                unsafe { dealloc(p.as_ptr(), layout) };
            }
        }
        self.peak = 0;
    }

    /// Starts a loop of a call (Note [Parallel loops]): every chunk
    /// becomes free for the loop and stays the call's. Nothing allocated
    /// before may be read afterwards.
    pub fn rewind(&mut self) {
        self.recent.append(&mut self.main.chunks);
        for stack in &mut self.scratch {
            self.recent.append(stack);
        }
        self.main.cur = 0;
        self.main.end = 0;
        self.total = 0;
    }

    /// `bytes` bytes aligned to 8, or None beyond the limit or when the
    /// system allocator fails. Zero bytes give a dangling, aligned,
    /// non-null pointer (never read).
    pub fn alloc(&mut self, bytes: usize) -> Option<NonNull<u8>> {
        if bytes == 0 {
            return Some(NonNull::<u64>::dangling().cast());
        }
        let bytes = bytes.checked_add(7)? & !7;
        let main = &mut self.main;
        if bytes <= main.end - main.cur {
            let p = main.cur;
            main.cur += bytes;
            return NonNull::new(p as *mut u8);
        }
        let size = if bytes > CHUNK / 4 { bytes } else { CHUNK };
        let (p, layout) = self.chunk(size)?;
        self.main.chunks.push((p, layout));
        if size == CHUNK {
            self.main.cur = p.as_ptr() as usize + bytes;
            self.main.end = p.as_ptr() as usize + CHUNK;
        }
        Some(p)
    }

    /// A chunk of `size` bytes, counted: a spare (up to twice the size)
    /// only if it fits the limit; else a new chunk of the size asked for,
    /// so that whether a call runs out of memory does not depend on
    /// earlier calls.
    fn chunk(&mut self, size: usize) -> Option<(NonNull<u8>, Layout)> {
        let room = self.limit.saturating_sub(self.total);
        let taken = take_spare(&mut self.recent, size, room)
            .or_else(|| take_spare(&mut self.spare, size, room));
        let (p, layout) = match taken {
            Some(c) => c,
            None => {
                if self.total.checked_add(size)? > self.limit {
                    return None;
                }
                let layout = Layout::from_size_align(size, 8).ok()?;
                // SAFETY: `layout` has a non-zero size.
                (NonNull::new(unsafe { alloc(layout) })?, layout)
            }
        };
        self.total += layout.size();
        self.peak = self.peak.max(self.total);
        Some((p, layout))
    }

    /// A new chunk of scratch stack `k` for at least `bytes` bytes, and
    /// of at least [`SCRATCH_CHUNK`]: its start and end.
    pub fn scratch_chunk(&mut self, k: usize, bytes: usize) -> Option<(usize, usize)> {
        let size = (bytes.checked_add(7)? & !7).max(SCRATCH_CHUNK);
        let (p, layout) = self.chunk(size)?;
        self.scratch[k].push((p, layout));
        let start = p.as_ptr() as usize;
        Some((start, start + layout.size()))
    }

    /// Frees the chunks of scratch stack `k` allocated after the address
    /// `m`; they become spares. The new window (base, cur, end): the chunk
    /// that holds `m` (its end included) from `m` on; or, when `m` is the
    /// end of a chunk (the window was full at the mark, as after a large
    /// array, which gets a chunk of its own), all of the chunk after it,
    /// which is kept, so that a loop whose iterations each need a new
    /// chunk does not free and take one per iteration; or, when no chunk
    /// holds `m` (it is 0: the iteration began with no chunk), all of the
    /// first chunk, kept for the same reason. (0, 0, 0) when the stack has
    /// no chunk.
    pub fn release_scratch(&mut self, k: usize, m: usize) -> (usize, usize, usize) {
        let stack = &mut self.scratch[k];
        let bounds = |(p, layout): &(NonNull<u8>, Layout)| {
            let start = p.as_ptr() as usize;
            (start, start + layout.size())
        };
        while let Some(last) = stack.last() {
            let (start, end) = bounds(last);
            if (start..=end).contains(&m) {
                return (start, m, end);
            }
            let before = stack.len().checked_sub(2).map(|i| bounds(&stack[i]));
            if before.is_none_or(|(_, prev_end)| prev_end == m) {
                return (start, start, end);
            }
            let (p, layout) = stack.pop().expect("a last chunk");
            self.total -= layout.size();
            self.recent.push((p, layout));
        }
        (0, 0, 0)
    }
}

/// A spare chunk for a request of `size` bytes, of at most `room` bytes: a
/// whole chunk for a small request, else the smallest spare of at least
/// `size` bytes (at most twice as large, so a small request keeps its
/// chunk).
fn take_spare(
    spare: &mut Vec<(NonNull<u8>, Layout)>,
    size: usize,
    room: usize,
) -> Option<(NonNull<u8>, Layout)> {
    let k = spare
        .iter()
        .enumerate()
        .filter(|(_, (_, l))| {
            if l.size() > room {
                false
            } else if size == CHUNK {
                l.size() == CHUNK
            } else {
                l.size() >= size && l.size() / 2 <= size
            }
        })
        .min_by_key(|(_, (_, l))| l.size())
        .map(|(k, _)| k)?;
    Some(spare.swap_remove(k))
}

impl Drop for Arena {
    fn drop(&mut self) {
        let [s0, s1] = &mut self.scratch;
        let chunks = self
            .main
            .chunks
            .drain(..)
            .chain(s0.drain(..))
            .chain(s1.drain(..));
        for (p, layout) in chunks
            .chain(self.spare.drain(..))
            .chain(self.recent.drain(..))
        {
            // SAFETY: allocated by `alloc` with this layout, freed once.
            unsafe { dealloc(p.as_ptr(), layout) };
        }
    }
}

// ----- helpers called from compiled code ------------------------------------

/// `fsmooth_alloc(ctx, bytes)`: a buffer from the call's arena, or null.
pub extern "C" fn fsmooth_alloc(ctx: *mut Ctx, bytes: i64) -> *mut u8 {
    let Ok(bytes) = usize::try_from(bytes) else {
        return std::ptr::null_mut();
    };
    // SAFETY: compiled code passes the context the wrapper gave it, whose
    // arena outlives the call.
    let arena = unsafe { &mut *(*ctx).arena };
    arena
        .alloc(bytes)
        .map_or(std::ptr::null_mut(), NonNull::as_ptr)
}

/// `fsmooth_scratch(ctx, bytes, k)`: `bytes` bytes in a new chunk of
/// scratch stack `k`, which becomes the stack's window (Note [Scratch
/// arrays]), or null. Compiled code calls it when the window has no room.
pub extern "C" fn fsmooth_scratch(ctx: *mut Ctx, bytes: i64, k: i64) -> *mut u8 {
    let (Ok(bytes), Ok(k @ 0..STACKS)) = (usize::try_from(bytes), usize::try_from(k)) else {
        return std::ptr::null_mut();
    };
    // SAFETY: as in `fsmooth_alloc`; the context is the call's.
    let ctx = unsafe { &mut *ctx };
    let arena = unsafe { &mut *ctx.arena };
    match arena.scratch_chunk(k, bytes) {
        Some((start, end)) => {
            ctx.windows[k] = [start, start + ((bytes + 7) & !7), end];
            start as *mut u8
        }
        None => std::ptr::null_mut(),
    }
}

/// `fsmooth_release(ctx, mark, k)`: the end of a loop iteration that began
/// with stack `k`'s window at `mark` outside the window's chunk: the
/// chunks since are freed and the window is back at `mark`
/// ([`Arena::release_scratch`]).
pub extern "C" fn fsmooth_release(ctx: *mut Ctx, mark: i64, k: i64) {
    let Ok(k @ 0..STACKS) = usize::try_from(k) else {
        return;
    };
    // SAFETY: as in `fsmooth_alloc`; the context is the call's.
    let ctx = unsafe { &mut *ctx };
    let arena = unsafe { &mut *ctx.arena };
    let (base, cur, end) = arena.release_scratch(k, mark as usize);
    ctx.windows[k] = [base, cur, end];
}

/// `fsmooth_copy(dst, src, bytes)`: copies between arena buffers (or from
/// argument buffers); regions never overlap.
pub extern "C" fn fsmooth_copy(dst: *mut u8, src: *const u8, bytes: i64) {
    if bytes > 0 {
        // SAFETY: compiled code copies whole elements of live arrays into
        // a fresh buffer large enough for them.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, bytes as usize) };
    }
}

/// `fsmooth_zero(dst, bytes)`: zero bits into an arena buffer (a one-hot
/// `build`'s fill of `+0.0`, `Lowerer::build`); `memset`, which writes
/// large buffers without reading them first.
pub extern "C" fn fsmooth_zero(dst: *mut u8, bytes: i64) {
    if bytes > 0 {
        // SAFETY: compiled code zeroes a fresh buffer of at least `bytes`.
        unsafe { std::ptr::write_bytes(dst, 0, bytes as usize) };
    }
}

/// Index `**` (E-Arith, E-Arith-Bot) with the evaluator's own arithmetic
/// (the table's): the status; the result goes to `ctx.scratch`.
pub extern "C" fn fsmooth_ipow(ctx: *mut Ctx, x: i64, y: i64) -> i64 {
    let Some(Compute::Arith { index: pow, .. }) = Prim::Pow.info().eval.compute else {
        unreachable!("`**` is arithmetic")
    };
    // SAFETY: the context outlives the call.
    unsafe {
        match pow(x, y) {
            Ok(v) => {
                (*ctx).scratch = v;
                OK
            }
            Err(Bottom::Domain) => {
                (*ctx).a = x;
                (*ctx).b = y;
                DOMAIN_IPOW
            }
            Err(_) => {
                (*ctx).a = 4;
                OVERFLOW
            }
        }
    }
}

pub extern "C" fn fsmooth_sin(x: f64) -> f64 {
    x.sin()
}
pub extern "C" fn fsmooth_cos(x: f64) -> f64 {
    x.cos()
}
pub extern "C" fn fsmooth_tan(x: f64) -> f64 {
    x.tan()
}
pub extern "C" fn fsmooth_log(x: f64) -> f64 {
    x.ln()
}
pub extern "C" fn fsmooth_exp(x: f64) -> f64 {
    x.exp()
}
pub extern "C" fn fsmooth_pow(x: f64, y: f64) -> f64 {
    x.powf(y)
}

/// The status returned by compiled code as an error (None for success).
pub fn status_error(code: i64, ctx: &Ctx) -> Option<CodegenError> {
    let (a, b) = (ctx.a, ctx.b);
    Some(match code {
        OK => return None,
        INDEX_OUT_OF_BOUNDS => CodegenError::IndexOutOfBounds { index: a, len: b },
        NEGATIVE_SIZE => CodegenError::NegativeSize { n: a },
        NEGATIVE_COUNT => CodegenError::NegativeCount { n: a },
        DIVISION_BY_ZERO => CodegenError::DivisionByZero,
        OVERFLOW => CodegenError::Overflow {
            op: OVERFLOW_OPS.get(a as usize).copied().unwrap_or("?"),
        },
        OUT_OF_FUEL => CodegenError::OutOfFuel { asked: a, left: b },
        TOO_LARGE => CodegenError::TooLarge { n: a, limit: b },
        OUT_OF_MEMORY => CodegenError::OutOfMemory {
            bytes: a,
            // SAFETY: the wrapper's arena is alive while it reads the status.
            limit: unsafe { (*ctx.arena).limit() },
        },
        DOMAIN_IPOW => CodegenError::Domain {
            op: "**",
            arg: format!("({a}, {b}) on Index"),
        },
        c if (DOMAIN..DOMAIN + DOMAIN_OPS.len() as i64).contains(&c) => {
            let (x, y) = (f64::from_bits(a as u64), f64::from_bits(b as u64));
            let op = DOMAIN_OPS[(c - DOMAIN) as usize];
            let arg = if c == DOMAIN_POW {
                format!("({x:?}, {y:?})")
            } else {
                format!("{x:?}")
            };
            CodegenError::Domain { op, arg }
        }
        other => CodegenError::Compile {
            message: format!("compiled code returned unknown status {other}"),
        },
    })
}

// ----- values in and out ------------------------------------------------------

/// Writes `v` of type `t` as slots at `dst`, copying arrays into `arena`.
///
/// # Safety
/// `dst` must be valid for writing `slots(t)` words.
pub unsafe fn write_value(
    v: &Value,
    t: &Type,
    arena: &mut Arena,
    dst: *mut u64,
) -> Result<(), CodegenError> {
    let bad = || CodegenError::Argument {
        message: format!("the value {v} does not have type {t}"),
    };
    // SAFETY (all writes): the caller guarantees room for `slots(t)` words.
    match (t, v) {
        (Type::Double, Value::Double(x)) => unsafe { dst.write(x.to_bits()) },
        (Type::Index, Value::Index(i)) => unsafe { dst.write(*i as u64) },
        (Type::Bool, Value::Bool(b)) => unsafe { dst.write(u64::from(*b)) },
        (Type::Pair(a, b), Value::Pair(p)) => unsafe {
            write_value(&p.0, a, arena, dst)?;
            write_value(&p.1, b, arena, dst.add(slots(a)?))?;
        },
        (Type::Array(e), Value::Array(items)) => {
            let k = slots(e)?;
            let bytes = items.len() * k * SLOT as usize;
            let Some(base) = arena.alloc(bytes) else {
                return Err(CodegenError::OutOfMemory {
                    bytes: bytes as i64,
                    limit: arena.limit(),
                });
            };
            let base = base.as_ptr().cast::<u64>();
            for (i, item) in items.iter().enumerate() {
                // SAFETY: element `i` lies inside the `bytes` just allocated.
                unsafe { write_value(item, e, arena, base.add(i * k))? };
            }
            // SAFETY: an array takes two slots.
            unsafe {
                dst.write(base as u64);
                dst.add(1).write(items.len() as u64);
            }
        }
        _ => return Err(bad()),
    }
    Ok(())
}

/// Reads a value of type `t` from slots at `src`.
///
/// # Safety
/// `src` must point to a value of type `t` written by compiled code or by
/// [`write_value`], whose arrays are still alive.
pub unsafe fn read_value(t: &Type, src: *const u64) -> Result<Value, CodegenError> {
    // SAFETY (all reads): the caller guarantees a value of type `t`; a Bool
    // slot is read through its first byte only (compiled code writes one).
    Ok(match t {
        Type::Double => Value::Double(f64::from_bits(unsafe { src.read() })),
        Type::Index => Value::Index(unsafe { src.read() } as i64),
        Type::Bool => Value::Bool(unsafe { src.cast::<u8>().read() } != 0),
        Type::Pair(a, b) => unsafe {
            let x = read_value(a, src)?;
            let y = read_value(b, src.add(slots(a)?))?;
            Value::pair(x, y)
        },
        Type::Array(e) => {
            let (base, len) = unsafe { (src.read() as *const u64, src.add(1).read() as usize) };
            let k = slots(e)?;
            let mut items = Vec::with_capacity(len);
            for i in 0..len {
                items.push(unsafe { read_value(e, base.add(i * k))? });
            }
            Value::array(items)
        }
        Type::Fun(..) => return Err(crate::codegen::unsupported("a function-valued result")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arena_serves_small_and_large_requests_within_its_limit() {
        let mut a = Arena::new(4 * CHUNK);
        let p = a.alloc(24).unwrap();
        let q = a.alloc(8).unwrap();
        assert_eq!(q.as_ptr() as usize - p.as_ptr() as usize, 24);
        assert!(a.alloc(2 * CHUNK).is_some());
        assert!(a.alloc(2 * CHUNK).is_none(), "over the limit");
        assert!(a.alloc(0).is_some());
    }

    /// Reuse does not change which calls fit the limit: a 2 MiB spare
    /// is not taken for 2.5 MiB plus 1.1 MiB under 4 MiB when a fresh
    /// arena would fit both (found in review).
    #[test]
    fn a_reused_arena_fits_what_a_fresh_one_fits() {
        let mut a = Arena::new(4 * CHUNK);
        assert!(a.alloc(2 * CHUNK).is_some());
        a.reset();
        assert!(a.alloc(5 * CHUNK / 2).is_some());
        assert!(a.alloc(11 * CHUNK / 10).is_some());
        assert!(a.reserved() <= 4 * CHUNK);
    }

    /// What an arena keeps between calls is what the last call used:
    /// growing requests do not pile up spares (found in review).
    #[test]
    fn an_arena_keeps_only_the_last_calls_chunks() {
        let mut a = Arena::new(1 << 30);
        let mut last = 0;
        for k in 0..100 {
            assert!(a.alloc(CHUNK + 8192 * k).is_some());
            last = a.reserved();
            a.reset();
        }
        let kept: usize = a.spare.iter().map(|(_, l)| l.size()).sum();
        assert!(kept <= last, "{kept} bytes kept, the last call used {last}");
        // And the next call of that size reuses it.
        assert!(a.alloc(CHUNK + 8192 * 99).is_some());
        assert!(a.spare.is_empty());
    }

    /// Note [Parallel loops]: rewinding a thread's arena between the
    /// loops of a call frees nothing, so each loop of the next call finds
    /// the chunks it used; the reset frees only what the call did not use
    /// (a reset per loop freed the first loop's large chunk at the second
    /// loop, and every call faulted it in again).
    #[test]
    fn rewinds_keep_every_loops_chunks_for_the_next_call() {
        let mut a = Arena::new(1 << 30);
        let call = |a: &mut Arena| {
            let big = a.alloc(8 * CHUNK).unwrap();
            a.rewind();
            let small = a.alloc(64).unwrap();
            a.rewind();
            (big, small)
        };
        let first = call(&mut a);
        a.reset();
        assert_eq!(call(&mut a), first, "the same chunks, none new");
        a.reset();
        let kept: usize = a.spare.iter().map(|(_, l)| l.size()).sum();
        assert_eq!(kept, 9 * CHUNK);
        // A call that uses neither frees both.
        a.reset();
        assert!(a.spare.is_empty() && a.recent.is_empty());
    }

    /// The reset keeps at most the limit's worth of what the call's loops
    /// used.
    #[test]
    fn a_reset_keeps_at_most_the_limit() {
        let mut a = Arena::new(4 * CHUNK);
        for _ in 0..3 {
            assert!(a.alloc(3 * CHUNK).is_some());
            a.rewind();
            assert!(a.alloc(CHUNK / 2).is_some());
            assert!(a.alloc(CHUNK).is_some());
            a.rewind();
        }
        a.reset();
        let kept: usize = a.spare.iter().map(|(_, l)| l.size()).sum();
        assert!(kept <= 4 * CHUNK, "{kept} bytes kept");
    }

    /// Note [Scratch arrays]: releasing a scratch stack frees the chunks
    /// taken since the mark, keeps the one after a mark at a chunk's end
    /// (a large array's own chunk) and the first for a mark of 0, and
    /// counts the chunks it frees out of the peak's running total.
    #[test]
    fn scratch_release_frees_what_came_after_the_mark() {
        let mut a = Arena::new(16 * CHUNK);
        // A mark of 0 (no chunk yet): the first chunk stays, all free.
        let (s0, e0) = a.scratch_chunk(0, 64).unwrap();
        assert_eq!(a.release_scratch(0, 0), (s0, s0, e0));
        // A mark inside the chunk: later chunks are freed.
        assert_eq!(e0 - s0, SCRATCH_CHUNK);
        let m = s0 + 64;
        let (s1, e1) = a.scratch_chunk(0, 64).unwrap();
        let (s2, e2) = a.scratch_chunk(0, 2 * CHUNK).unwrap();
        assert_eq!(e2 - s2, 2 * CHUNK);
        let held = a.total;
        assert_eq!(a.release_scratch(0, m), (s0, m, e0));
        assert_eq!(a.total, held - (e1 - s1) - (e2 - s2));
        assert_eq!(a.reserved(), held, "the peak is kept");
        // A mark at the end of a large array's chunk: the next chunk is
        // kept as the window, whole.
        let (_, big_end) = a.scratch_chunk(0, CHUNK).unwrap();
        let (s3, e3) = a.scratch_chunk(0, 8).unwrap();
        assert_eq!(a.release_scratch(0, big_end), (s3, s3, e3));
        // The other stack is untouched.
        let (s4, e4) = a.scratch_chunk(1, 8).unwrap();
        assert_eq!(a.release_scratch(1, s4 + 8), (s4, s4 + 8, e4));
        assert_eq!(a.release_scratch(0, m), (s0, m, e0));
        assert_eq!(a.scratch[1].len(), 1);
        a.reset();
        assert!(a.scratch.iter().all(Vec::is_empty));
        assert_eq!(a.reserved(), 0);
    }

    #[test]
    fn values_round_trip_through_the_flat_layout() {
        let t = Type::pair(
            Type::array(Type::pair(Type::Index, Type::Bool)),
            Type::Double,
        );
        let v = Value::pair(
            Value::array(vec![
                Value::pair(Value::Index(-3), Value::Bool(true)),
                Value::pair(Value::Index(7), Value::Bool(false)),
            ]),
            Value::Double(-0.5),
        );
        let mut arena = Arena::new(CHUNK);
        let mut buf = vec![0u64; slots(&t).unwrap()];
        unsafe { write_value(&v, &t, &mut arena, buf.as_mut_ptr()).unwrap() };
        let back = unsafe { read_value(&t, buf.as_ptr()).unwrap() };
        assert!(back.same(&v), "{back}");
    }
}
