//! What compiled code calls and what one call needs around it: the call
//! context ([`Ctx`]), the arena every array is allocated from, the
//! `extern "C"` helpers registered with the JIT (allocation, copying, the
//! transcendental functions, Index `**`), the status codes compiled code
//! returns, and the copying of [`Value`]s into and out of the flat layout
//! (Note [Native layout] in `codegen/mod.rs`).
//!
//! The helpers must never unwind into compiled code: none of them panics.
//! The math helpers call the same Rust functions as the evaluator, so
//! native results are bit-identical to the evaluator's.

use std::alloc::{Layout, alloc, dealloc};
use std::ptr::NonNull;

use super::CodegenError;
use super::layout::{SLOT, slots};
use crate::eval::Value;
use crate::ir::Type;

/// Status codes returned by compiled code (0 is success). A domain error
/// is `DOMAIN + k` for the operation `DOMAIN_OPS[k]`.
pub const OK: i64 = 0;
pub const INDEX_OUT_OF_BOUNDS: i64 = 1;
pub const NEGATIVE_SIZE: i64 = 2;
pub const NEGATIVE_COUNT: i64 = 3;
pub const DIVISION_BY_ZERO: i64 = 4;
pub const OVERFLOW: i64 = 5;
pub const OUT_OF_MEMORY: i64 = 6;
pub const DOMAIN: i64 = 16;
/// The operations with domain errors: Double `**`, Index `**`, `log`,
/// `sqrt`, `tan`.
pub const DOMAIN_OPS: [&str; 5] = ["**", "** on Index", "log", "sqrt", "tan"];
pub const DOMAIN_POW: i64 = DOMAIN;
pub const DOMAIN_IPOW: i64 = DOMAIN + 1;
pub const DOMAIN_LOG: i64 = DOMAIN + 2;
pub const DOMAIN_SQRT: i64 = DOMAIN + 3;
pub const DOMAIN_TAN: i64 = DOMAIN + 4;
/// Operations that can overflow on Index, by the number stored with
/// [`OVERFLOW`].
pub const OVERFLOW_OPS: [&str; 5] = ["+", "-", "*", "/", "**"];

/// The context of one call, passed to compiled code as its first
/// argument. Compiled code reads `arena` only through the helpers and
/// writes `a`, `b` (error details) and `scratch` (Index `**` results).
#[repr(C)]
pub struct Ctx {
    pub arena: *mut Arena,
    pub a: i64,
    pub b: i64,
    pub scratch: i64,
}

/// Byte offsets of [`Ctx`]'s fields, for compiled code.
pub const CTX_A: i32 = 8;
pub const CTX_B: i32 = 16;
pub const CTX_SCRATCH: i32 = 24;

/// A bump allocator over large chunks, all freed together on drop.
/// Requests larger than a quarter chunk get a chunk of their own.
///
/// [`Arena::reset`] keeps the chunks for the next call instead of freeing
/// them: a chunk the system allocator hands out anew is mapped and zeroed
/// page by page on first touch, which took 59% of the time of GMM's
/// reverse-mode gradient (`perf`, benches/README.md). After a reset, a
/// small request reuses a spare whole chunk, a large one the smallest
/// spare chunk that holds it.
pub struct Arena {
    /// The chunks of the current call.
    chunks: Vec<(NonNull<u8>, Layout)>,
    /// Chunks kept from earlier calls, free.
    spare: Vec<(NonNull<u8>, Layout)>,
    cur: usize,
    end: usize,
    /// The bytes of `chunks`.
    total: usize,
    limit: usize,
}

const CHUNK: usize = 1 << 20;

impl Arena {
    pub fn new(limit: usize) -> Arena {
        Arena {
            chunks: Vec::new(),
            spare: Vec::new(),
            cur: 0,
            end: 0,
            total: 0,
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

    /// The bytes of the chunks this call has taken (whole chunks, reused
    /// or new): the peak of the call's own memory.
    pub fn reserved(&self) -> usize {
        self.total
    }

    /// Ends a call: every chunk becomes a spare for the next one. Nothing
    /// allocated before may be read afterwards.
    pub fn reset(&mut self) {
        // Spares this call did not take are freed: what is kept is what the
        // last call used, at most its limit.
        for (p, layout) in self.spare.drain(..) {
            // SAFETY: allocated by `alloc` with this layout, freed once.
            unsafe { dealloc(p.as_ptr(), layout) };
        }
        self.spare.append(&mut self.chunks);
        self.cur = 0;
        self.end = 0;
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
        if bytes <= self.end - self.cur {
            let p = self.cur;
            self.cur += bytes;
            return NonNull::new(p as *mut u8);
        }
        let size = if bytes > CHUNK / 4 { bytes } else { CHUNK };
        // A spare (up to twice the size) only if it fits the limit; else a
        // new chunk of the size asked for, so that whether a call runs out
        // of memory does not depend on earlier calls.
        let room = self.limit.saturating_sub(self.total);
        let (p, layout) = match self.take_spare(size, room) {
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
        self.chunks.push((p, layout));
        self.total += layout.size();
        if size == CHUNK {
            self.cur = p.as_ptr() as usize + bytes;
            self.end = p.as_ptr() as usize + CHUNK;
        }
        Some(p)
    }

    /// A spare chunk for a request of `size` bytes, of at most `room`
    /// bytes: a whole chunk for a small request, else the smallest spare of
    /// at least `size` bytes (at most twice as large, so a small request
    /// keeps its chunk).
    fn take_spare(&mut self, size: usize, room: usize) -> Option<(NonNull<u8>, Layout)> {
        let k = self
            .spare
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
        Some(self.spare.swap_remove(k))
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for (p, layout) in self.chunks.drain(..).chain(self.spare.drain(..)) {
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

/// `fsmooth_copy(dst, src, bytes)`: copies between arena buffers (or from
/// argument buffers); regions never overlap.
pub extern "C" fn fsmooth_copy(dst: *mut u8, src: *const u8, bytes: i64) {
    if bytes > 0 {
        // SAFETY: compiled code copies whole elements of live arrays into
        // a fresh buffer large enough for them.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, bytes as usize) };
    }
}

/// Index `**` (E-Arith, E-Arith-Bot): the status; the result goes to
/// `ctx.scratch`.
pub extern "C" fn fsmooth_ipow(ctx: *mut Ctx, x: i64, y: i64) -> i64 {
    if y < 0 {
        // SAFETY: the context outlives the call.
        unsafe {
            (*ctx).a = x;
            (*ctx).b = y;
        }
        return DOMAIN_IPOW;
    }
    let r = match u32::try_from(y) {
        Ok(y) => x.checked_pow(y),
        // Huge exponents: only 0, 1 and -1 stay in range.
        Err(_) => match x {
            0 | 1 => Some(x),
            -1 => Some(if y % 2 == 0 { 1 } else { -1 }),
            _ => None,
        },
    };
    // SAFETY: the context outlives the call.
    unsafe {
        match r {
            Some(v) => {
                (*ctx).scratch = v;
                OK
            }
            None => {
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
        Type::Fun(..) => return Err(super::unsupported("a function-valued result")),
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
