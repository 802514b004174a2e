//! The binary interface between compiled code and whoever calls it (the
//! JIT's wrapper, `backend/jit.rs`, or a C program through an object
//! file, `backend/aot.rs`): the status codes an entry returns, and the
//! byte offsets of the fields of the call context that compiled code
//! reads and writes (`backend/runtime.rs`'s `Ctx`, the C `fsmooth_ctx` of
//! `backend/header.rs`). The lowering emits these numbers and the backends
//! interpret them, so they live in neither (Note [Native layout] in
//! `codegen/mod.rs` is the other half of the interface: how values lie in
//! slots).

/// Status codes returned by compiled code (0 is success). A domain error
/// is `DOMAIN + k` for the operation `DOMAIN_OPS[k]`.
pub const OK: i64 = 0;
pub const INDEX_OUT_OF_BOUNDS: i64 = 1;
pub const NEGATIVE_SIZE: i64 = 2;
pub const NEGATIVE_COUNT: i64 = 3;
pub const DIVISION_BY_ZERO: i64 = 4;
pub const OVERFLOW: i64 = 5;
pub const OUT_OF_MEMORY: i64 = 6;
/// The call's loop budget is spent (Note [Native limits] in
/// `codegen/lower/loops.rs`): `a` the iterations asked for, `b` the budget
/// left.
pub const OUT_OF_FUEL: i64 = 7;
/// An array larger than the call's element limit: `a` its size, `b` the
/// limit.
pub const TOO_LARGE: i64 = 8;
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

/// Byte offsets of the fields of the call context (`backend/runtime.rs`'s
/// `Ctx`), for compiled code.
pub const CTX_A: i32 = 8;
pub const CTX_B: i32 = 16;
pub const CTX_SCRATCH: i32 = 24;
/// The scratch stacks (Note [Scratch arrays]): 0 for the arrays of one
/// iteration of their innermost loop, 1 for the others.
pub const STACKS: usize = 2;
/// The byte offsets of stack `k`'s window's base, cursor and end.
pub const fn ctx_window(k: usize) -> [i32; 3] {
    let at = 64 + 24 * k as i32;
    [at, at + 8, at + 16]
}

/// Byte offsets of the fields of the C `fsmooth_ctx` beyond the JIT's
/// `runtime::Ctx` prefix (`arena`, `a`, `b`, `scratch`): in an object file
/// `arena` is the head of the list of blocks.
pub const CTX_ARENA: i32 = 0;
pub const CTX_LIMIT: i32 = 32;
pub const CTX_USED: i32 = 40;
/// The heads of the lists of blocks of the two scratch stacks (Note [Scratch
/// arrays] in `codegen/passes/scratch.rs`), at `CTX_TEMPS + 8 k`; their
/// windows follow ([`ctx_window`]).
pub const CTX_TEMPS: i32 = 48;
/// The head of the list of blocks `fsmooth_ctx_reset` kept for later calls
/// (after the scratch windows).
pub const CTX_SPARE: i32 = ctx_window(STACKS)[0];
/// The JIT's limits (Note [Native limits] in `codegen/lower/loops.rs`),
/// after the C context's fields: the loop iterations the call may still
/// run, and the most elements an array may have. Code compiled for an
/// object file reads neither.
pub const CTX_FUEL: i32 = CTX_SPARE + 8;
pub const CTX_ELEMENTS: i32 = CTX_FUEL + 8;
/// The JIT's failure site: which test failed, an index into the sites the
/// lowering returns (`lower::Lowered::sites`), so that the wrapper reports
/// the source span of the operation (Note [Failure sites] in `lower/mod.rs`).
pub const CTX_SITE: i32 = CTX_ELEMENTS + 8;

/// The terms the lowering hands the row kernel per call (Note [Row
/// kernels] in `codegen/backend/kernels.rs`): a buffer on its stack of
/// `ROW_TERMS` entries of 16 bytes, each a Double coefficient at offset 0
/// and the address of its row's Doubles at offset 8
/// (`kernels::RowTerm`).
pub const ROW_TERMS: usize = 64;

/// The iterations of a lane sum's block whose `log`s and `exp`s the math
/// kernels compute (Note [Math kernels] in `codegen/backend/math.rs`):
/// the buffer on the lowered code's stack holds `MATH_BLOCK` Doubles per
/// `log` or `exp` of the term.
pub const MATH_BLOCK: usize = 256;
