//! The JIT: one [`JITModule`] per compiled entry, the helpers of
//! `runtime` registered as symbols, and [`Native`], which owns the module
//! (so the function pointer stays valid) and calls the compiled entry on
//! [`Value`]s.
//!
//! The compiled entry is the slot-level entry of `codegen/module.rs`:
//! `fn(ctx: *mut Ctx, args: *const u64, out: *mut u64) -> i64`.

use std::time::{Duration, Instant};

use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module, default_libcall_names};

use super::layout::slots;
use super::module::{HELPERS, define_entry, host_isa, signature};
use super::runtime::{self, Arena, Ctx};
use super::{CodegenError, compile_error};
use crate::ad::anf::Normal;
use crate::eval::Value;
use crate::ir::Type;
use crate::pipeline::Entry;

type EntryFn = unsafe extern "C" fn(*mut Ctx, *const u64, *mut u64) -> i64;

/// Resource limits of a native call.
#[derive(Copy, Clone, Debug)]
pub struct NativeLimits {
    /// The most bytes one call may allocate (arguments included).
    pub memory_bytes: usize,
}

impl Default for NativeLimits {
    fn default() -> NativeLimits {
        NativeLimits {
            memory_bytes: 8 << 30,
        }
    }
}

/// A compiled entry.
pub struct Native {
    /// Owns the code `func` points into; freed on drop.
    module: Option<JITModule>,
    func: EntryFn,
    params: Vec<Type>,
    result: Type,
    compile_time: Duration,
    pub limits: NativeLimits,
}

/// The address of the Rust function that provides a helper of
/// [`HELPERS`] to JIT-compiled code.
fn address(name: &str) -> Result<*const u8, CodegenError> {
    Ok(match name {
        "fsmooth_alloc" => runtime::fsmooth_alloc as *const u8,
        "fsmooth_copy" => runtime::fsmooth_copy as *const u8,
        "fsmooth_ipow" => runtime::fsmooth_ipow as *const u8,
        "fsmooth_sin" => runtime::fsmooth_sin as *const u8,
        "fsmooth_cos" => runtime::fsmooth_cos as *const u8,
        "fsmooth_tan" => runtime::fsmooth_tan as *const u8,
        "fsmooth_log" => runtime::fsmooth_log as *const u8,
        "fsmooth_exp" => runtime::fsmooth_exp as *const u8,
        "fsmooth_pow" => runtime::fsmooth_pow as *const u8,
        other => return Err(compile_error(format!("no JIT symbol for helper `{other}`"))),
    })
}

fn new_module() -> Result<JITModule, CodegenError> {
    let mut jb = JITBuilder::with_isa(host_isa(false)?, default_libcall_names());
    for h in &HELPERS {
        jb.symbol(h.name, address(h.name)?);
    }
    Ok(JITModule::new(jb))
}

fn declare_helpers(module: &mut JITModule) -> Result<Vec<(&'static str, FuncId)>, CodegenError> {
    let mut out = Vec::new();
    for h in &HELPERS {
        let sig = signature(module, h.params, h.results);
        let id = module
            .declare_function(h.name, Linkage::Import, &sig)
            .map_err(compile_error)?;
        out.push((h.name, id));
    }
    Ok(out)
}

impl Native {
    /// Normalises `entry` (`ad::anf`) and compiles it.
    pub fn compile(entry: &Entry) -> Result<Native, CodegenError> {
        let start = Instant::now();
        let normal = super::normalise_entry(entry)?;
        let mut native = Native::compile_normal(&normal)?;
        native.compile_time = start.elapsed();
        Ok(native)
    }

    /// Compiles a first-order normal form.
    pub fn compile_normal(normal: &Normal) -> Result<Native, CodegenError> {
        let start = Instant::now();
        let mut module = new_module()?;
        match Native::define(&mut module, normal) {
            Ok(func) => Ok(Native {
                module: Some(module),
                func,
                params: normal.params.iter().map(|(_, t)| t.clone()).collect(),
                result: normal.body.result.ty().clone(),
                compile_time: start.elapsed(),
                limits: NativeLimits::default(),
            }),
            Err(e) => {
                // SAFETY: no pointer into the module's code was taken.
                unsafe { module.free_memory() };
                Err(e)
            }
        }
    }

    fn define(module: &mut JITModule, normal: &Normal) -> Result<EntryFn, CodegenError> {
        let helpers = declare_helpers(module)?;
        let id = define_entry(module, "fsmooth_entry", Linkage::Export, normal, &helpers)?;
        module.finalize_definitions().map_err(compile_error)?;
        let code = module.get_finalized_function(id);
        // SAFETY: the function was compiled with exactly this signature
        // (three pointer-sized arguments, one i64 result, the host's
        // default calling convention, which is the C one).
        Ok(unsafe { std::mem::transmute::<*const u8, EntryFn>(code) })
    }

    /// The parameter types, in order.
    pub fn params(&self) -> &[Type] {
        &self.params
    }

    /// The result type.
    pub fn result(&self) -> &Type {
        &self.result
    }

    /// Time from the normal form (or the entry) to callable code.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// Runs the compiled entry on `args` (checked against the parameter
    /// types), returning its result or the ⊥ it reached.
    pub fn call(&self, args: &[Value]) -> Result<Value, CodegenError> {
        if args.len() != self.params.len() {
            return Err(CodegenError::Argument {
                message: format!(
                    "the entry takes {} argument(s), {} given",
                    self.params.len(),
                    args.len()
                ),
            });
        }
        let mut arena = Box::new(Arena::new(self.limits.memory_bytes));
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
            unsafe { runtime::write_value(v, t, &mut arena, input.as_mut_ptr().add(at))? };
            at += slots(t)?;
        }
        let mut out = vec![0u64; slots(&self.result)?];
        let mut ctx = Ctx {
            arena: &mut *arena,
            a: 0,
            b: 0,
            scratch: 0,
        };
        // SAFETY: `func` lives as long as `self.module`; the buffers have
        // the sizes the compiled code assumes; the arena outlives the call.
        let status = unsafe { (self.func)(&mut ctx, input.as_ptr(), out.as_mut_ptr()) };
        if let Some(e) = runtime::status_error(status, &ctx) {
            return Err(e);
        }
        // SAFETY: on success compiled code wrote a value of the result type
        // whose arrays live in `arena` or `input`'s arrays, both alive.
        unsafe { runtime::read_value(&self.result, out.as_ptr()) }
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
