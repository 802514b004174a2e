//! [`Entry`]: a monomorphic program ready to run from one definition — a
//! definition of the user's program or a program the pipeline derived
//! from it ([`Artefact`]) — with its parameters read off its type, and the
//! artefacts derived from it computed once, on first use: its first-order
//! normal form and its native code.
//!
//! Input: the output of monomorphisation (and, for derived programs, of
//! AD and the optimiser). Invariant: `program`'s last definition is the
//! entry, and its parameters and result are data.

use std::cell::OnceCell;
use std::rc::Rc;

use cranelift_entity::SecondaryMap;

use super::Artefact;
use super::passes::{Pass, timed};
use crate::anf::{self, AnfError, Normal};
use crate::codegen::{CodegenError, Native};
use crate::diagnostic::{Diagnostic, Span};
use crate::eval::{EvalError, Evaluator, Limits, Snapshot, Stats, TraceEvent, Value};
use crate::interchange::{InputError, value_from_json};
use crate::ir::{Expr, ExprId, Program, Type};

/// A monomorphic program ready to run from one entry definition.
pub struct Entry {
    /// What this program is: the key it is cached under in its session.
    pub artefact: Artefact,
    pub program: Program,
    /// The ground type of every expression of `program`.
    pub types: SecondaryMap<ExprId, Option<Type>>,
    /// The entry's name as the user (or the pipeline) called it.
    pub name: String,
    /// Parameter names (from the entry's leading lambdas, else `arg{i}`) and types.
    pub params: Vec<(String, Type)>,
    pub result: Type,
    pub span: Span,
    normal: OnceCell<Result<Rc<Normal>, AnfError>>,
    native: OnceCell<Result<Rc<Native>, CodegenError>>,
    /// How [`Entry::native`] compiles: its session's options.
    native_options: std::cell::Cell<crate::codegen::NativeOptions>,
}

impl Entry {
    /// The entry of `program`, its last definition, checking that it
    /// takes and returns data.
    pub(super) fn new(
        artefact: Artefact,
        name: &str,
        program: Program,
        types: SecondaryMap<ExprId, Option<Type>>,
    ) -> Result<Entry, Diagnostic> {
        let def = program.defs.last().expect("the entry was copied");
        let span = def.span;
        let mut ty = types[def.body].clone().unwrap_or(Type::Double);
        let mut names = Vec::new();
        let mut cur = def.body;
        while let Expr::Lam { param, body, .. } = program.expr(cur) {
            names.push(param.to_string());
            cur = *body;
        }
        let mut params = Vec::new();
        while let Type::Fun(a, b) = ty {
            let n = params.len();
            let pname = names.get(n).cloned().unwrap_or_else(|| format!("arg{n}"));
            if !a.is_data() {
                let whole = Type::fun((*a).clone(), (*b).clone());
                return Err(bad_entry(
                    name,
                    &whole,
                    span,
                    "its parameters must be data, not functions",
                ));
            }
            params.push((pname, (*a).clone()));
            ty = (*b).clone();
        }
        if !ty.is_data() {
            return Err(bad_entry(name, &ty, span, "it returns a function"));
        }
        Ok(Entry {
            artefact,
            program,
            types,
            name: name.to_string(),
            params,
            result: ty,
            span,
            normal: OnceCell::new(),
            native: OnceCell::new(),
            native_options: Default::default(),
        })
    }

    /// Reads the entry's arguments from a JSON object keyed by parameter
    /// name, or a JSON array of positional arguments.
    pub fn read_input(&self, json: Option<&str>) -> Result<Vec<Value>, Diagnostic> {
        let err = |e: InputError| Diagnostic::from(&e);
        let params_error = |message: String| {
            err(InputError::Params {
                message,
                span: self.span,
            })
        };
        let Some(text) = json else {
            if self.params.is_empty() {
                return Ok(Vec::new());
            }
            return Err(params_error(format!(
                "`{}` takes {} parameter(s) ({}): pass them with --input",
                self.name,
                self.params.len(),
                self.signature()
            )));
        };
        let j: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            err(InputError::Json {
                message: e.to_string(),
                span: Span::whole_file(),
            })
        })?;
        let mut out = Vec::new();
        match &j {
            serde_json::Value::Object(map) => {
                if let Some(k) = map
                    .keys()
                    .find(|k| !self.params.iter().any(|(n, _)| n == *k))
                {
                    return Err(params_error(format!(
                        "`{}` has no parameter `{k}` (parameters: {})",
                        self.name,
                        self.signature()
                    )));
                }
                for (n, t) in &self.params {
                    let Some(v) = map.get(n) else {
                        return Err(params_error(format!(
                            "input has no value for parameter `{n}` (parameters: {})",
                            self.signature()
                        )));
                    };
                    out.push(value_from_json(v, t, n, self.span).map_err(err)?);
                }
            }
            // Positional arguments; with a single parameter of array or tuple
            // type, a JSON array is that argument itself (or, if it is not
            // one, the one positional argument).
            serde_json::Value::Array(items)
                if self.params.len() != 1
                    || !matches!(self.params[0].1, Type::Array(_) | Type::Pair(..)) =>
            {
                if items.len() != self.params.len() {
                    return Err(params_error(format!(
                        "`{}` takes {} argument(s) ({}), the input array has {}",
                        self.name,
                        self.params.len(),
                        self.signature(),
                        items.len()
                    )));
                }
                for ((n, t), v) in self.params.iter().zip(items) {
                    out.push(value_from_json(v, t, n, self.span).map_err(err)?);
                }
            }
            other => {
                let [(n, t)] = self.params.as_slice() else {
                    return Err(params_error(format!(
                        "input must be a JSON object keyed by parameter name or an array of arguments ({})",
                        self.signature()
                    )));
                };
                // A single array argument may also come positionally,
                // `[[1.0, 2.0]]` for a Vector: tried when the bare reading
                // fails, whose error is the one reported.
                let bare = value_from_json(other, t, n, self.span);
                let positional = match other {
                    serde_json::Value::Array(items) if bare.is_err() && items.len() == 1 => {
                        value_from_json(&items[0], t, n, self.span).ok()
                    }
                    _ => None,
                };
                match positional {
                    Some(v) => out.push(v),
                    None => out.push(bare.map_err(err)?),
                }
            }
        }
        Ok(out)
    }

    /// `x: Vector, y: Double`-style parameter list.
    pub fn signature(&self) -> String {
        self.params
            .iter()
            .map(|(n, t)| format!("{n}: {t}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Evaluates the entry on `args` with the reference evaluator.
    pub fn run(
        &self,
        args: Vec<Value>,
        limits: Limits,
        trace: &mut dyn FnMut(TraceEvent, Snapshot<'_>),
    ) -> Result<(Value, Stats), EvalError> {
        let mut ev = Evaluator::new(&self.program, limits);
        let v = ev.call(&self.name_in_program(), args, trace)?;
        Ok((v, ev.stats))
    }

    /// The entry's name after monomorphisation (the last definition).
    pub fn name_in_program(&self) -> Rc<str> {
        self.program.defs.last().expect("entry exists").name.clone()
    }

    /// The parameter types, in order.
    pub fn param_types(&self) -> Vec<Type> {
        self.params.iter().map(|(_, t)| t.clone()).collect()
    }

    /// The first-order normal form (`ad::anf`) of the entry, computed once:
    /// what the optimiser, reverse mode and native code start from.
    pub fn normal(&self) -> Result<Rc<Normal>, AnfError> {
        self.normal
            .get_or_init(|| {
                timed(Pass::Normalise, || {
                    anf::normalise(
                        &self.program,
                        &self.types,
                        &self.name_in_program(),
                        &self.param_types(),
                    )
                    .map(Rc::new)
                })
            })
            .clone()
    }

    /// Sets how [`Entry::native`] compiles (its session does, before the
    /// first compilation).
    pub fn set_native_options(&self, options: crate::codegen::NativeOptions) {
        self.native_options.set(options);
    }

    /// The entry compiled to native code (JIT), once.
    pub fn native(&self) -> Result<Rc<Native>, CodegenError> {
        self.native
            .get_or_init(|| {
                let normal = self.normal().map_err(normalisation_error)?;
                let options = self.native_options.get();
                timed(Pass::Compile, || Native::compile_with(&normal, options)).map(Rc::new)
            })
            .clone()
    }
}

fn bad_entry(name: &str, ty: &Type, span: Span, why: &'static str) -> Diagnostic {
    Diagnostic::from(&crate::types::TypeError::BadEntry {
        name: name.to_string(),
        ty: ty.to_string(),
        why,
        span,
    })
}

impl Entry {
    /// The entry compiled ahead of time into an object file and a C
    /// header (`fsmooth compile`), its parameters named `params` there.
    pub fn object(
        &self,
        params: &[(String, Type)],
        options: &crate::codegen::AotOptions,
    ) -> Result<crate::codegen::ObjectCode, CodegenError> {
        let normal = self.normal().map_err(normalisation_error)?;
        timed(Pass::Compile, || {
            crate::codegen::compile_object(&normal, params, options)
        })
    }
}

/// A normalisation failure as native code generation reports it.
fn normalisation_error(e: AnfError) -> CodegenError {
    CodegenError::Compile {
        message: format!(
            "normalisation: {e} [{}]",
            crate::diagnostic::Diagnose::code(&e)
        ),
    }
}
