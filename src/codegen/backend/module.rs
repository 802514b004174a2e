//! What the JIT and the object-file backend share: the target ISA, the
//! table of helper
//! functions the lowering may call, and [`define_entry`],
//! which lowers a normal form (`lower::lower_function`) into the slot-level
//! entry of any [`cranelift_module::Module`] — a `JITModule` for
//! `Native`, an `ObjectModule` for `aot`. There is one lowering; the two
//! backends differ only in how the helpers are provided.
//!
//! The slot-level entry has the signature
//! `fn(ctx: *mut Ctx, args: *const u64, out: *mut u64) -> i64`: the
//! parameters' slots one after another in `args`, the result's slots in
//! `out`, and the status (0 for success) as the return value.

use cranelift_codegen::ir::{AbiParam, Signature, UserFuncName, types};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::FunctionBuilderContext;
use cranelift_module::{DataDescription, DataId, FuncId, Linkage, Module};

use crate::anf::Normal;
use crate::codegen::lower::{Imports, LANE_CONSTANTS, LowerOptions, lower_function};
use crate::codegen::{CodegenError, compile_error, unsupported};

/// A helper the lowering calls by name: its parameter and result types.
pub struct Helper {
    pub name: &'static str,
    pub params: &'static [types::Type],
    pub results: &'static [types::Type],
}

const fn helper(
    name: &'static str,
    params: &'static [types::Type],
    results: &'static [types::Type],
) -> Helper {
    Helper {
        name,
        params,
        results,
    }
}

use types::{F64, I64};

/// Every helper the lowering may call. `fsmooth_alloc(ctx, bytes) -> ptr`
/// (null on failure), `fsmooth_copy(dst, src, bytes)`,
/// `fsmooth_ipow(ctx, x, y) -> status` (result in `ctx.scratch`), and the
/// math functions, which compute what libm's `sin`, `cos`, … compute.
/// Scratch arrays (Note [Scratch arrays] in `codegen/passes/scratch.rs`):
/// `fsmooth_scratch(ctx, bytes, k) -> ptr` starts a new window of stack
/// `k` when the context's is full, `fsmooth_release(ctx, mark, k)` moves
/// the window back to `mark` in an earlier chunk.
pub const HELPERS: [Helper; 12] = [
    helper("fsmooth_alloc", &[I64, I64], &[I64]),
    helper("fsmooth_scratch", &[I64, I64, I64], &[I64]),
    helper("fsmooth_release", &[I64, I64, I64], &[]),
    helper("fsmooth_copy", &[I64, I64, I64], &[]),
    helper("fsmooth_zero", &[I64, I64], &[]),
    helper("fsmooth_ipow", &[I64, I64, I64], &[I64]),
    helper("fsmooth_sin", &[F64], &[F64]),
    helper("fsmooth_cos", &[F64], &[F64]),
    helper("fsmooth_tan", &[F64], &[F64]),
    helper("fsmooth_log", &[F64], &[F64]),
    helper("fsmooth_exp", &[F64], &[F64]),
    helper("fsmooth_pow", &[F64, F64], &[F64]),
];

/// A signature in the module's default calling convention (the C one).
pub fn signature<M: Module>(
    module: &M,
    params: &[types::Type],
    results: &[types::Type],
) -> Signature {
    let mut sig = module.make_signature();
    sig.params.extend(params.iter().copied().map(AbiParam::new));
    sig.returns
        .extend(results.iter().copied().map(AbiParam::new));
    sig
}

/// The host's ISA, optimising for speed. `pic` for object files that must
/// link into position-independent executables; the JIT needs no PIC.
/// Cranelift's IR verifier runs in debug builds — every program the test
/// suite compiles is verified — and not in release builds, where it was
/// 3% of compile time (BA's `fwd-vec` Jacobian).
pub fn host_isa(pic: bool) -> Result<OwnedTargetIsa, CodegenError> {
    let mut flags = settings::builder();
    let verify = if cfg!(debug_assertions) {
        "true"
    } else {
        "false"
    };
    for (k, v) in [
        ("use_colocated_libcalls", "false"),
        ("is_pic", if pic { "true" } else { "false" }),
        ("opt_level", "speed"),
        ("enable_verifier", verify),
    ] {
        flags.set(k, v).map_err(compile_error)?;
    }
    let isa = cranelift_native::builder()
        .map_err(|m| unsupported(format!("this host ({m})")))?
        .finish(settings::Flags::new(flags))
        .map_err(compile_error)?;
    if isa.pointer_type() != types::I64 {
        return Err(unsupported("targets whose pointers are not 64 bits"));
    }
    Ok(isa)
}

/// Whether `isa` has fused multiply–add (x86-64's FMA3), which the
/// relaxed contract's `log` and `exp` in lanes use (Note [Fused
/// polynomials] in `lower/vmath.rs`). Without it Cranelift would lower
/// `fma` to calls of libm's, so the polynomials are not fused.
pub fn host_fma(isa: &dyn cranelift_codegen::isa::TargetIsa) -> bool {
    has(isa, "has_fma")
}

/// Whether `isa` has AVX2 and FMA3, which the JIT's row kernels use
/// (Note [Row kernels] in `backend/kernels.rs`).
pub fn host_avx2_fma(isa: &dyn cranelift_codegen::isa::TargetIsa) -> bool {
    has(isa, "has_avx2") && has(isa, "has_fma")
}

fn has(isa: &dyn cranelift_codegen::isa::TargetIsa, flag: &str) -> bool {
    isa.isa_flags()
        .iter()
        .any(|f| f.name == flag && f.as_bool() == Some(true))
}

/// Defines the module's read-only table of lane constants (Note [Lane
/// constants] in `lower/vmath.rs`): each of [`LANE_CONSTANTS`] twice, in a
/// 16-byte entry. Only code lowered under the relaxed contract loads it,
/// so a strict module has none.
pub fn define_lane_constants<M: Module>(
    module: &mut M,
    relaxed: bool,
) -> Result<Option<DataId>, CodegenError> {
    if !relaxed {
        return Ok(None);
    }
    let id = module
        .declare_data("fsmooth_lane_constants", Linkage::Local, false, false)
        .map_err(compile_error)?;
    let mut data = DataDescription::new();
    data.set_align(16);
    let bytes: Vec<u8> = LANE_CONSTANTS
        .iter()
        .flat_map(|c| [c.to_le_bytes(), c.to_le_bytes()])
        .flatten()
        .collect();
    data.define(bytes.into_boxed_slice());
    module.define_data(id, &data).map_err(compile_error)?;
    Ok(Some(id))
}

/// The signature of the slot-level entry: `(ctx, args, out) -> status`.
pub fn entry_signature<M: Module>(module: &M) -> Signature {
    signature(module, &[I64, I64, I64], &[I64])
}

/// Declares `name` with the entry signature and defines it as the lowering
/// of `normal`. `helpers` maps each name of [`HELPERS`] to the function
/// that provides it in this module; `constants` is the module's
/// [`define_lane_constants`].
/// With `listing`, the normal form as lowered (`anf::Block`'s `Display`),
/// where the entry's arrays live (Note [Scratch arrays]), its Cranelift IR
/// as lowered (before Cranelift's own passes) and its
/// machine code as Cranelift prints it are appended.
pub fn define_entry<M: Module>(
    module: &mut M,
    name: &str,
    linkage: Linkage,
    normal: &Normal,
    (helpers, constants): (&[(&'static str, FuncId)], Option<DataId>),
    listing: Option<&mut String>,
    options: LowerOptions,
) -> Result<(FuncId, Defined), CodegenError> {
    let sig = entry_signature(module);
    let id = module
        .declare_function(name, linkage, &sig)
        .map_err(compile_error)?;
    let mut ctx = module.make_context();
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(0, id.as_u32());
    let mut fctx = FunctionBuilderContext::new();
    let mut imports = Imports::default();
    for (helper, hid) in helpers {
        imports.insert(helper, module.declare_func_in_func(*hid, &mut ctx.func));
    }
    if let Some(table) = constants {
        imports.set_lane_constants(module.declare_data_in_func(table, &mut ctx.func));
    }
    let target = module.target_config();
    let lowered = lower_function(&mut ctx.func, &mut fctx, normal, &imports, target, options)?;
    let ir = listing.is_some().then(|| ctx.func.display().to_string());
    if ir.is_some() {
        ctx.set_disasm(true);
    }
    module
        .define_function(id, &mut ctx)
        .map_err(|e| compile_error(format!("{e:?}")))?;
    if let (Some(out), Some(ir)) = (listing, ir) {
        let code = ctx
            .compiled_code()
            .and_then(|c| c.vcode.clone())
            .unwrap_or_default();
        out.push_str(&format!(
            ";; normal form of `{name}`, as lowered (after fusion, unrolling and hoisting)\n{}\n",
            lowered.body
        ));
        out.push_str(&lowered.scratch.describe());
        out.push_str(&lowered.updates.describe());
        let names = |xs: &[crate::ir::Name]| {
            if xs.is_empty() {
                "none".to_string()
            } else {
                xs.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        for (what, over) in [
            (
                "loop nests interchanged (Note [Interchange]): ",
                &lowered.interchanged,
            ),
            (
                "interchanged sums in blocks of eight (Note [Interchange], blocks): ",
                &lowered.blocked,
            ),
            (
                "rows of interchanged sums two at a time (Note [Interchange], pairs of rows), over: ",
                &lowered.rows_paired,
            ),
            (
                "folds of folds of addAts run term-major (Note [Interchanged folds]), over: ",
                &lowered.folds_interchanged,
            ),
            (
                "loops behind a bounds guard (Note [Bounds guards]): ",
                &lowered.guarded,
            ),
            (
                "folds of addAts two iterations at a time (Note [Bounds guards], pairs of addAts), over: ",
                &lowered.paired,
            ),
            (
                "folds skipping four iterations at a time where they keep their state (Note [Skipping folds]), over: ",
                &lowered.skipping,
            ),
            (
                "folds two iterations per trip (Note [Two iterations per trip]), over: ",
                &lowered.doubled,
            ),
            (
                "loops two iterations at a time, their inner folds jammed (Note [Jamming]), over: ",
                &lowered.jammed,
            ),
        ] {
            out.push_str(&format!(";; {what}{}\n", names(over)));
        }
        let groups: Vec<String> = lowered
            .horizontal
            .iter()
            .map(|g| format!("[{}]", names(g)))
            .collect();
        out.push_str(&format!(
            ";; loops run as one (Note [Horizontal fusion]): {}\n",
            if groups.is_empty() {
                "none".to_string()
            } else {
                groups.join(", ")
            }
        ));
        out.push_str(&format!(
            ";; Cranelift IR of `{name}`, as lowered\n{ir}\n;; machine code of `{name}`\n{code}"
        ));
    }
    module.clear_context(&mut ctx);
    Ok((
        id,
        Defined {
            sites: lowered.sites,
            chunks: lowered.chunks,
        },
    ))
}

/// What [`define_entry`] tells its caller beyond the function's id.
pub struct Defined {
    /// The source span of each failure site, from the options'
    /// `first_site` on (Note [Failure sites]).
    pub sites: Vec<crate::diagnostic::Span>,
    /// The chunk functions the entry's parallel folds call, by number
    /// (Note [Parallel loops]), still to be defined.
    pub chunks: Vec<Normal>,
}
