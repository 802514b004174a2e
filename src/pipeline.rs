//! The one place passes are sequenced: parse (prelude + program) → infer →
//! monomorphise for an entry → re-check → evaluate. Nothing here prints or
//! reads files; the CLI supplies texts and renders results.

use std::rc::Rc;

use cranelift_entity::SecondaryMap;

use crate::diagnostic::{Diagnostic, SourceId, Span};
use crate::eval::{EvalError, Evaluator, Limits, Snapshot, Stats, TraceEvent, Value};
use crate::interchange::{InputError, value_from_json};
use crate::ir::{Expr, ExprId, Program, Type};
use crate::syntax::parse_into;
use crate::types::{Typing, infer_program, monomorphise};

/// The M̃ library, written in the language and available to every program.
pub const PRELUDE: &str = include_str!("prelude.fsm");

/// A parsed and type-checked program (prelude included).
pub struct Loaded {
    pub program: Program,
    pub typing: Typing,
}

/// Parses only (prelude + `src`), for printing and round trips.
pub fn parse(src: &str) -> Result<Program, Diagnostic> {
    let mut program = Program::new();
    parse_into(&mut program, PRELUDE, SourceId::PRELUDE, true).map_err(|e| Diagnostic::from(&e))?;
    parse_into(&mut program, src, SourceId::MAIN, false).map_err(|e| Diagnostic::from(&e))?;
    Ok(program)
}

/// Parses and type-checks the prelude and `src`.
pub fn load(src: &str) -> Result<Loaded, Diagnostic> {
    let program = parse(src)?;
    let typing = infer_program(&program).map_err(|e| Diagnostic::from(&e))?;
    Ok(Loaded { program, typing })
}

/// A monomorphic program ready to run from one entry definition.
pub struct Entry {
    pub program: Program,
    /// The ground type of every expression of `program`.
    pub types: SecondaryMap<ExprId, Option<Type>>,
    pub name: String,
    /// Parameter names (from the entry's leading lambdas, else `arg{i}`) and types.
    pub params: Vec<(String, Type)>,
    pub result: Type,
    pub span: Span,
}

/// Monomorphises `loaded` for the entry `name` and checks that the entry
/// takes and returns data.
pub fn entry(loaded: &Loaded, name: &str) -> Result<Entry, Diagnostic> {
    let mono =
        monomorphise(&loaded.program, &loaded.typing, name).map_err(|e| Diagnostic::from(&e))?;
    let (program, types) = (mono.program, mono.types);
    // The copy must type-check on its own: a check of monomorphisation.
    infer_program(&program).map_err(|e| Diagnostic::from(&e))?;
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
        params.push((pname, *a));
        ty = *b;
    }
    if !ty.is_data() {
        return Err(bad_entry(name, &ty, span, "it returns a function"));
    }
    Ok(Entry {
        program,
        types,
        name: name.to_string(),
        params,
        result: ty,
        span,
    })
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
    /// Reads the entry's arguments from a JSON object keyed by parameter
    /// name, or a JSON array of positional arguments.
    pub fn read_input(&self, json: Option<&str>) -> Result<Vec<Value>, Diagnostic> {
        let err = |e: InputError| Diagnostic::from(&e);
        let Some(text) = json else {
            if self.params.is_empty() {
                return Ok(Vec::new());
            }
            return Err(err(InputError::Params {
                message: format!(
                    "`{}` takes {} parameter(s) ({}): pass them with --input",
                    self.name,
                    self.params.len(),
                    self.signature()
                ),
                span: self.span,
            }));
        };
        let j: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            err(InputError::Json {
                message: e.to_string(),
                span: self.span,
            })
        })?;
        let mut out = Vec::new();
        match &j {
            serde_json::Value::Object(map) => {
                for k in map.keys() {
                    if !self.params.iter().any(|(n, _)| n == k) {
                        return Err(err(InputError::Params {
                            message: format!(
                                "`{}` has no parameter `{k}` (parameters: {})",
                                self.name,
                                self.signature()
                            ),
                            span: self.span,
                        }));
                    }
                }
                for (n, t) in &self.params {
                    let Some(v) = map.get(n) else {
                        return Err(err(InputError::Params {
                            message: format!(
                                "input has no value for parameter `{n}` (parameters: {})",
                                self.signature()
                            ),
                            span: self.span,
                        }));
                    };
                    out.push(value_from_json(v, t, n, self.span).map_err(err)?);
                }
            }
            // Positional arguments; with a single parameter of array or tuple
            // type, a JSON array is that argument itself.
            serde_json::Value::Array(items)
                if self.params.len() != 1
                    || !matches!(self.params[0].1, Type::Array(_) | Type::Pair(..)) =>
            {
                if items.len() != self.params.len() {
                    return Err(err(InputError::Params {
                        message: format!(
                            "`{}` takes {} argument(s) ({}), the input array has {}",
                            self.name,
                            self.params.len(),
                            self.signature(),
                            items.len()
                        ),
                        span: self.span,
                    }));
                }
                for ((n, t), v) in self.params.iter().zip(items) {
                    out.push(value_from_json(v, t, n, self.span).map_err(err)?);
                }
            }
            other => {
                if self.params.len() == 1 {
                    let (n, t) = &self.params[0];
                    out.push(value_from_json(other, t, n, self.span).map_err(err)?);
                } else {
                    return Err(err(InputError::Params {
                        message: format!(
                            "input must be a JSON object keyed by parameter name or an array of arguments ({})",
                            self.signature()
                        ),
                        span: self.span,
                    }));
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
}
