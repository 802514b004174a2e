//! Specialisation (spec/ad-forward.md §10.2): every function value of a
//! program resolved at compile time, so that `jvp`, `vjp` and `deriv`
//! see the function they differentiate as a lambda whose free variables
//! are data. This is Stalingrad's whole-program specialisation (seed 000
//! §6): with no recursion and no function stored in data (T-If, T-Array,
//! T-Pair and T-IFold demand data), partial evaluation over static
//! closures inlines every application of a function value.
//!
//! The output is core IR again: every binder renamed fresh, every
//! application of a function value β-reduced (S-App), every function
//! bound by `let` substituted (S-Let-Fun), every function argument of a
//! loop or an operator written out as a lambda (S-Residual). The lets
//! that evaluating a function value performs (`let z = e in fun x -> …`)
//! are kept, in evaluation order, in the nearest enclosing *frame*: a
//! definition, an `if` branch, a lambda body or a `deriv` body, so that
//! they run exactly when the original runs them.
//!
//! Only data definitions and the entry are kept: every other function
//! definition has been inlined where it is used.

use std::rc::Rc;

use super::AdError;
use crate::diagnostic::Span;
use crate::ir::build::Builder;
use crate::ir::{Def, Expr, ExprId, Name, Type};

/// What an expression evaluates to at compile time: residual code, or a
/// function known statically.
#[derive(Clone)]
enum Sv {
    Data(ExprId),
    Fun(Rc<Closure>),
}

struct Closure {
    lam: ExprId,
    env: Env,
}

/// What a source variable stands for in the residual program.
#[derive(Clone)]
enum Bound {
    Data(Name, Type),
    Fun(Rc<Closure>),
}

type Env = crate::ir::env::Env<Bound>;

/// Specialises `b.prog` for its entry `entry` (in place): the entry and
/// every data definition are rewritten; the other function definitions,
/// now inlined, are dropped.
pub fn specialise_program(b: &mut Builder<'_>, entry: &str) -> Result<(), AdError> {
    let defs: Vec<Def> = b.prog.defs.clone();
    let mut kept = Vec::new();
    for (k, d) in defs.iter().enumerate() {
        let ty = b.ty(d.body);
        let is_entry = *d.name == *entry;
        if !ty.is_data() && !is_entry {
            continue;
        }
        let mut s = Specialiser {
            b: &mut *b,
            defs: &defs[..k],
            all: &defs,
            frames: Vec::new(),
        };
        // The entry keeps its parameters' names (the command line reads
        // its inputs by them) unless a definition has the same name.
        let body = s.frame(|s| {
            let v = s.spec(d.body, &Env::empty())?;
            s.residual(v, &ty, d.span, is_entry)
        })?;
        kept.push(Def { body, ..d.clone() });
    }
    b.prog.defs = kept;
    Ok(())
}

struct Specialiser<'s, 'a> {
    b: &'s mut Builder<'a>,
    /// The definitions before the one being specialised (the only ones
    /// it may name).
    defs: &'s [Def],
    /// Every definition of the program.
    all: &'s [Def],
    /// The pending lets of each enclosing frame, in evaluation order.
    frames: Vec<Vec<(Name, ExprId)>>,
}

impl Specialiser<'_, '_> {
    /// Runs `f` in a new frame and wraps its pending lets around the
    /// result.
    fn frame(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<ExprId, AdError>,
    ) -> Result<ExprId, AdError> {
        self.frames.push(Vec::new());
        let r = f(self);
        let lets = self.frames.pop().expect("pushed");
        let mut out = r?;
        for (n, v) in lets.into_iter().rev() {
            // Annotated with the (ground) type: the program is inferred
            // again, and a λ's annotation the let replaces (S-App) may be
            // all that fixed an integer literal to Index.
            let (vt, bt) = (self.b.ty(v), self.b.ty(out));
            out = self.b.add(
                Expr::Let {
                    name: n,
                    ann: Some(vt),
                    value: v,
                    body: out,
                },
                bt,
            );
        }
        Ok(out)
    }

    /// A data value as a variable of the residual program, bound (with
    /// its type) in the current frame — a variable too, so that the type
    /// a λ's annotation gave it stays written down.
    fn share(&mut self, e: ExprId, stem: &str) -> (Name, Type) {
        let ty = self.b.ty(e);
        let n = self.b.fresh(stem);
        self.frames
            .last_mut()
            .expect("a frame")
            .push((n.clone(), e));
        (n, ty)
    }

    fn data(&mut self, v: Sv, at: ExprId) -> Result<ExprId, AdError> {
        match v {
            Sv::Data(e) => Ok(e),
            Sv::Fun(_) => Err(AdError::Internal {
                message: format!(
                    "specialisation: a function where data was expected at {:?}",
                    self.b.prog.span(at)
                ),
            }),
        }
    }

    /// S-Residual: `v` as residual code of type `ty`; a function value
    /// becomes a lambda whose body is specialised for a fresh parameter
    /// (with `keep`, the source's name, if no definition has it).
    fn residual(&mut self, v: Sv, ty: &Type, span: Span, keep: bool) -> Result<ExprId, AdError> {
        match v {
            Sv::Data(e) => Ok(e),
            Sv::Fun(c) => {
                let Type::Fun(a, r) = ty else {
                    return Err(AdError::Internal {
                        message: "specialisation: a function value of a non-function type".into(),
                    });
                };
                if !a.is_data() {
                    return Err(AdError::Unresolved {
                        ty: ty.to_string(),
                        span,
                    });
                }
                let param = match self.b.prog.expr(c.lam) {
                    Expr::Lam { param, .. } => param.clone(),
                    _ => Rc::from("x"),
                };
                let p = if keep && !self.all.iter().any(|d| d.name == param) {
                    param.clone()
                } else {
                    self.b.fresh(&stem(&param))
                };
                let was = self.b.at(span);
                let body = self.frame(|s| {
                    // The λ's own (annotated) parameter: no `let` between
                    // it and the next λ of a curried entry.
                    let v = s.apply_to(&c, Bound::Data(p.clone(), (**a).clone()))?;
                    s.residual(v, r, span, keep)
                });
                let body = body.inspect_err(|_| self.b.restore(was))?;
                // Annotated: an unused parameter keeps its type when the
                // program is inferred again.
                let lam = self.b.add(
                    Expr::Lam {
                        param: p,
                        ann: Some((**a).clone()),
                        body,
                    },
                    ty.clone(),
                );
                self.b.restore(was);
                Ok(lam)
            }
        }
    }

    /// S-App: the closure's body specialised with its parameter bound to
    /// the argument (a data argument shared through a fresh `let`).
    fn apply(&mut self, c: &Closure, arg: Sv) -> Result<Sv, AdError> {
        let Expr::Lam { param, body, .. } = self.b.prog.expr(c.lam).clone() else {
            return Err(AdError::Internal {
                message: "specialisation: a closure without a lambda".into(),
            });
        };
        let value = match arg {
            Sv::Data(e) => {
                let (n, t) = self.share(e, &stem(&param));
                Bound::Data(n, t)
            }
            Sv::Fun(f) => Bound::Fun(f),
        };
        let env = c.env.bind(param, value);
        self.spec(body, &env)
    }

    /// The closure's body specialised with its parameter standing for
    /// `value` as it is.
    fn apply_to(&mut self, c: &Closure, value: Bound) -> Result<Sv, AdError> {
        let Expr::Lam { param, body, .. } = self.b.prog.expr(c.lam).clone() else {
            return Err(AdError::Internal {
                message: "specialisation: a closure without a lambda".into(),
            });
        };
        let env = c.env.bind(param, value);
        self.spec(body, &env)
    }

    fn spec(&mut self, e: ExprId, env: &Env) -> Result<Sv, AdError> {
        let was = self.b.at(self.b.prog.span(e));
        let r = self.spec_node(e, env);
        self.b.restore(was);
        r
    }

    fn spec_node(&mut self, e: ExprId, env: &Env) -> Result<Sv, AdError> {
        let ty = self.b.ty(e);
        Ok(match self.b.prog.expr(e).clone() {
            Expr::Var(x) => match env.lookup(&x) {
                Some(Bound::Data(n, t)) => Sv::Data(self.b.var(&n, t)),
                Some(Bound::Fun(c)) => Sv::Fun(c),
                None => self.global(&x, ty)?,
            },
            Expr::Lit(l) => Sv::Data(self.b.add(Expr::Lit(l), ty)),
            Expr::Lam { .. } => Sv::Fun(Rc::new(Closure {
                lam: e,
                env: env.clone(),
            })),
            Expr::App { fun, arg } => {
                let f = self.spec(fun, env)?;
                let a = self.spec(arg, env)?;
                let Sv::Fun(c) = f else {
                    return Err(AdError::Internal {
                        message: "specialisation: data applied".into(),
                    });
                };
                self.apply(&c, a)?
            }
            Expr::Let {
                name, value, body, ..
            } => {
                // S-Let-Data, S-Let-Fun
                let v = self.spec(value, env)?;
                let bound = match v {
                    Sv::Data(x) => {
                        let (n, t) = self.share(x, &stem(&name));
                        Bound::Data(n, t)
                    }
                    Sv::Fun(c) => Bound::Fun(c),
                };
                let env = env.bind(name, bound);
                self.spec(body, &env)?
            }
            Expr::If { cond, then_, else_ } => {
                let c = self.spec(cond, env)?;
                let c = self.data(c, cond)?;
                let t = self.frame(|s| {
                    let v = s.spec(then_, env)?;
                    s.data(v, then_)
                })?;
                let f = self.frame(|s| {
                    let v = s.spec(else_, env)?;
                    s.data(v, else_)
                })?;
                Sv::Data(self.b.add(
                    Expr::If {
                        cond: c,
                        then_: t,
                        else_: f,
                    },
                    ty,
                ))
            }
            Expr::Deriv { body, wrt } => {
                let Some(Bound::Data(w, _)) = env.lookup(&wrt) else {
                    return Err(AdError::Internal {
                        message: format!("specialisation: `deriv` variable `{wrt}` is not data"),
                    });
                };
                let body = self.frame(|s| {
                    let v = s.spec(body, env)?;
                    s.data(v, body)
                })?;
                Sv::Data(self.b.add(Expr::Deriv { body, wrt: w }, ty))
            }
            other => {
                // Primitives, arrays and the operators: function arguments
                // (of loops, `jvp`, `vjp`) are written out as lambdas.
                let mut kids = Vec::new();
                for k in other.children() {
                    let kt = self.b.ty(k);
                    let v = self.spec(k, env)?;
                    kids.push(if kt.is_data() {
                        self.data(v, k)?
                    } else {
                        self.residual(v, &kt, self.b.prog.span(k), false)?
                    });
                }
                Sv::Data(self.b.add(other.with_children(&kids), ty))
            }
        })
    }

    /// A top-level name: a data definition stays a reference; a function
    /// definition is specialised where it is used.
    fn global(&mut self, x: &Name, ty: Type) -> Result<Sv, AdError> {
        let Some(j) = self.defs.iter().rposition(|d| d.name == *x) else {
            return Err(AdError::Internal {
                message: format!("specialisation: `{x}` is not defined"),
            });
        };
        if ty.is_data() {
            return Ok(Sv::Data(self.b.var(x, ty)));
        }
        // Its body sees only the definitions before it.
        let body = self.defs[j].body;
        let all = self.defs;
        self.defs = &all[..j];
        let v = self.spec(body, &Env::empty());
        self.defs = all;
        v
    }
}

/// The user's name without the suffixes earlier passes added, as the stem
/// of a fresh name.
fn stem(name: &Name) -> String {
    let s = name.split('\'').next().unwrap_or("x");
    if s.is_empty() { "x".into() } else { s.into() }
}
