//! Native code: the first-order normal form (`anf`) lowered to
//! Cranelift IR and compiled in memory by cranelift-jit, or ahead of time
//! into an object file by cranelift-object ([`compile_object`], the
//! `fsmooth compile` command). Only `codegen/` names Cranelift.
//!
//! Input: an [`anf::Normal`] (the pipeline normalises an entry once,
//! `pipeline::Entry::normal`, and asks for its code):
//! every function is already inlined and every bound name is fresh, so
//! the lowering never sees a closure and needs no scoping. Output: a
//! [`Native`] whose [`Native::call`] takes and returns evaluator
//! [`Value`]s and agrees with the evaluator (spec/semantics.md), ⊥ codes
//! included, with three differences: it has no fuel (E-Fuel never fires);
//! it can run out of memory (`out-of-memory`, see [`NativeLimits`]); and,
//! like every pass built on the normal form, it computes only the data
//! definitions the entry uses, so a ⊥ in an unused top-level definition
//! is not reached (native code refines the evaluator there, §9).
//!
//! [`anf::Normal`]: crate::anf::Normal
//!
//! # Layout
//!
//! Three layers, each depending only on the ones before it:
//!
//! - `passes/`: the rewrites and analyses of the normal form (vertical
//!   fusion, unrolling, hoisting, versioning, fusion, scratch arrays,
//!   in-place updates, loop interchange, bounds guards, jamming, skipping
//!   and doubled folds, horizontal fusion). They decide what native code
//!   does and never name Cranelift, so each one's exactness argument is
//!   about the normal form alone;
//! - `lower/`: the one lowering of a normal form to Cranelift IR, which
//!   runs the passes and emits what they planned;
//! - `backend/`: what makes the IR run: the JIT with its Rust runtime, the
//!   object file with its C signature and header, and `module.rs`, which
//!   both share.
//!
//! Beside them, `layout.rs` (Note [Native layout], below) and `abi.rs` (the
//! status codes and the call context's byte offsets) are what lowered code and
//! its callers agree on. They depend on nothing in `codegen/` but
//! [`CodegenError`], so neither the passes nor the lowering depend on a
//! backend. This file holds the public API, re-exported from `backend/`, and
//! [`CodegenError`].
//!
//! # Representation (Note [Native layout])
//!
//! A value of type `T` is a fixed number of machine words, its *slots*
//! (see `codegen/layout.rs`): Double is one `f64`, Index one `i64`, Bool
//! one `i8` (kept in an 8-byte slot in memory), an array two (`ptr`,
//! `len`), and a pair the slots of its first component followed by those
//! of its second. Tuples are therefore never boxed: in registers they are
//! just several SSA values.
//!
//! An array of `n` elements of type `T` is one contiguous buffer of
//! `n × slots(T)` words, element `i` at `ptr + 8·slots(T)·i` (an array of
//! structures). So an array of scalars is a plain `f64`/`i64` buffer; an
//! array of pairs interleaves their components; an array of arrays is a
//! buffer of (`ptr`, `len`) descriptors, each pointing to its own buffer.
//! Arrays are immutable once built, so descriptors may share buffers.
//! Arrays of tuples stay arrays of structures: seed 001 §5.3's structure
//! of arrays pays when only one side of an array of duals is read over
//! many elements, and in the benchmark programs every array of tuples
//! that is built is read a whole element at a time (tapes, duals) or has
//! two or three elements; the unzips `build n (fun i -> snd a[i])` are
//! fused or views (benches/README.md, "Structures of arrays, surveyed").
//!
//! # Memory
//!
//! A pull array read only by `get` and `length`, with a simple body, is not
//! built at all: each read computes its element (Note [Fusion] in
//! `codegen/passes/fuse.rs`; the dot product's `vectorEMul`, a slice of a
//! difference, BA's chains of small vector maps), and an `accum` of a `concat`
//! reads the parts in place, computing them there when they are such a `build`
//! (reverse mode's scatter-adds). Every other buffer comes from an arena owned
//! by the Rust wrapper of one call (`backend/runtime.rs`, `Arena`): the
//! compiled code calls `fsmooth_alloc` once per array, never per element, and
//! the whole arena is freed when the call returns, after the result has been
//! copied out into [`Value`]s. An array that cannot outlive an iteration of
//! some loop comes instead from one of two scratch stacks, by moving a
//! pointer, and is freed when that iteration ends (Note [Scratch arrays] in
//! `codegen/passes/scratch.rs`); a `build` whose elements the next loop reads
//! one per iteration is computed in that loop, so that its elements become
//! such arrays (Note [Vertical fusion] in `codegen/passes/vertical.rs`).
//! [`Native::call_slices`] skips the conversion for scalars, flat arrays of
//! Double or Index, and matrices of Double (rows): argument slices are read in
//! place, and the result's arrays are slices of the arena, which the returned
//! [`Outputs`] owns (on the dot product of 10⁶ elements, in the test profile:
//! 1.4 ms against 21 ms through `call`).
//!
//! # Ahead of time
//!
//! [`compile_object`] feeds the same `lower::lower_function` (through
//! `backend::module::define_entry`, generic over `cranelift_module::Module`)
//! into an `ObjectModule` for the host ISA, position-independent, and adds a
//! typed C-ABI wrapper and a header (`backend/aot.rs`,
//! `backend/c_signature.rs`, `backend/header.rs`). The object needs only libc
//! and libm: `fsmooth_alloc`, `fsmooth_copy` and `fsmooth_ipow` are emitted
//! into it as local Cranelift functions (over `malloc`, `memcpy`), and the
//! math helpers are libm's `sin`, `cos`, `tan`, `log`, `exp`, `pow`, which the
//! JIT's Rust shims call too. There the arena is the caller's `fsmooth_ctx`:
//! arrays bumped out of 64 KiB chunks, all freed by `fsmooth_ctx_release` or
//! kept for the next call by `fsmooth_ctx_reset` (Note [AOT memory] in
//! `backend/aot.rs`). The status codes are the ones below, named in the header
//! after the error codes.
//!
//! # Errors
//!
//! Compiled code never traps and never panics. Every ⊥ of the semantics
//! (E-Get-Bot, E-Build-Bot, E-IFold-Bot, E-Arith-Bot, E-Math-Bot, E-Accum-Bot)
//! is an explicit test that branches to one exit block, which stores the
//! details in the call context and returns a non-zero status; the wrapper
//! turns it into a [`CodegenError`] with the evaluator's error code
//! (inside a speculated loop invariant, Note [Hoisting] in
//! `codegen/passes/hoist.rs`, the test branches to code that redoes the binding
//! in the loop instead, which then exits as above). A
//! test is left out only where it cannot fire: a read `a[i]` in a loop
//! over `0 .. length a`, the reads inside a fused body, which the
//! fusion guard checked (Note [Fusion]), and the reads and updates of an
//! innermost loop that its bounds guard checked (Note [Bounds guards] in
//! `codegen/passes/guard.rs`).

mod abi;
mod backend;
mod layout;
mod lower;
mod passes;

use thiserror::Error;

use crate::diagnostic::{Diagnose, Span};

pub use backend::aot::{AotOptions, ObjectCode, compile_object, default_symbol};
pub use backend::c_signature::c_identifier;
pub use backend::jit::{Arg, FpContract, Native, NativeLimits, NativeOptions, Out, Outputs, Rows};

/// Why native compilation or a native call failed. The run-time variants
/// carry the same stable codes as `eval::EvalError`.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CodegenError {
    #[error("native code generation does not support {what} yet")]
    Unsupported { what: String },
    #[error("native code generation failed: {message} (please report this)")]
    Compile { message: String },
    #[error("`{symbol}` cannot be the C symbol of an entry: {reason}")]
    InvalidSymbol {
        symbol: String,
        reason: &'static str,
    },
    #[error("bad argument for the native entry: {message}")]
    Argument { message: String },
    #[error("index {index} is out of bounds for an array of length {len}")]
    IndexOutOfBounds { index: i64, len: i64 },
    #[error("`build` with negative size {n}")]
    NegativeSize { n: i64 },
    #[error("`ifold` with negative iteration count {n}")]
    NegativeCount { n: i64 },
    #[error("division by zero")]
    DivisionByZero,
    #[error("{op} is undefined at {arg}")]
    Domain { op: &'static str, arg: String },
    #[error("integer overflow in `{op}`")]
    Overflow { op: &'static str },
    #[error("native code ran out of memory asking for {bytes} bytes (limit {limit} bytes)")]
    OutOfMemory { bytes: i64, limit: usize },
    #[error("native code ran out of fuel: a loop of {asked} iterations with {left} left")]
    OutOfFuel { asked: i64, left: i64 },
    #[error("an array of {n} elements is larger than the limit of {limit}")]
    TooLarge { n: i64, limit: i64 },
    /// A run-time error with the source span of the operation that failed
    /// (Note [Failure sites] in `codegen/lower/mod.rs`).
    #[error("{error}")]
    Located {
        error: Box<CodegenError>,
        span: Span,
    },
}

impl CodegenError {
    /// The error without its source location (`Located`'s inner error).
    pub fn unlocated(self) -> CodegenError {
        match self {
            CodegenError::Located { error, .. } => error.unlocated(),
            e => e,
        }
    }
}

impl Diagnose for CodegenError {
    fn code(&self) -> &'static str {
        match self {
            CodegenError::Unsupported { .. } => "native-unsupported",
            CodegenError::Compile { .. } => "internal-error",
            CodegenError::InvalidSymbol { .. } => "invalid-symbol",
            CodegenError::Argument { .. } => "native-argument",
            CodegenError::IndexOutOfBounds { .. } => "index-out-of-bounds",
            CodegenError::NegativeSize { .. } => "negative-size",
            CodegenError::NegativeCount { .. } => "negative-count",
            CodegenError::DivisionByZero => "division-by-zero",
            CodegenError::Domain { .. } => "domain-error",
            CodegenError::Overflow { .. } => "integer-overflow",
            CodegenError::OutOfMemory { .. } => "out-of-memory",
            CodegenError::OutOfFuel { .. } => "out-of-fuel",
            CodegenError::TooLarge { .. } => "array-too-large",
            CodegenError::Located { error, .. } => error.code(),
        }
    }

    fn span(&self) -> Span {
        match self {
            CodegenError::Located { span, .. } => *span,
            _ => Span::generated(),
        }
    }

    fn notes(&self) -> Vec<String> {
        match self {
            CodegenError::Located { error, .. } => error.notes(),
            CodegenError::Unsupported { .. } => {
                vec!["run the program with the reference evaluator instead".to_string()]
            }
            CodegenError::OutOfMemory { .. } => {
                vec!["raise the limit with `NativeLimits::memory_bytes`".to_string()]
            }
            CodegenError::OutOfFuel { .. } => vec![
                "native code counts loop iterations against --fuel N (Note [Native limits])"
                    .to_string(),
            ],
            CodegenError::TooLarge { .. } => {
                vec!["raise the limit with --max-elements N".to_string()]
            }
            _ => Vec::new(),
        }
    }
}

fn unsupported(what: impl Into<String>) -> CodegenError {
    CodegenError::Unsupported { what: what.into() }
}

fn compile_error(message: impl std::fmt::Display) -> CodegenError {
    CodegenError::Compile {
        message: message.to_string(),
    }
}

#[cfg(doc)]
use crate::eval::Value;
