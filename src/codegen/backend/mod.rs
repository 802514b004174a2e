//! The backends of native code: what turns the lowered Cranelift IR into
//! something that runs, and what runs around it. The JIT (`jit.rs`, with
//! the Rust runtime it calls, `runtime.rs`, its kernels for 256-bit
//! vectors, `kernels.rs`, and the threads of parallel folds, `pool.rs`) and the object file
//! (`aot.rs`, its C entry's signature, `c_signature.rs`, and its header,
//! `header.rs`) share `module.rs`: the ISA, the helper table and
//! `define_entry`, the one place that calls the lowering.
//!
//! The backends depend on the lowering (`codegen/lower/`) and never the
//! other way round: what lowered code and its callers agree on — the flat
//! layout of values, the status codes and the call context's byte offsets
//! — lives beside them in `codegen/layout.rs` and `codegen/abi.rs`.

pub(super) mod aot;
pub(super) mod c_signature;
pub(super) mod header;
pub(super) mod jit;
pub(super) mod kernels;
pub(super) mod math;
pub(super) mod module;
pub(super) mod pool;
pub(super) mod runtime;
