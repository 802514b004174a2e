//! Normalisation to the first-order A-normal form, the input of reverse
//! mode, the optimiser and the native backend (spec/ad-reverse.md,
//! "Normal form"). Every function is inlined by partial evaluation over
//! static closures: a function-valued expression evaluates at compile
//! time to a lambda with its environment, and application binds the
//! argument. What is left is a [`Block`] of bindings whose right-hand
//! sides apply one primitive to atoms, or are `if`, `build`, `ifold` or
//! `iscan` with nested blocks. Every bound name is fresh, so blocks never
//! shadow. This is Stalingrad's point: with no recursion, and functions
//! never stored in data, every closure can be resolved statically.

use std::rc::Rc;

use cranelift_entity::SecondaryMap;

use super::{AnfError, Atom, Binding, Block, LoopKind, Normal, Rhs};
use crate::diagnostic::Span;
use crate::ir::{Expr, ExprId, Name, Prim, Program, Type};

/// What an expression evaluates to at compile time.
#[derive(Clone)]
enum Sv {
    Data(Atom),
    Fun(Rc<Closure>),
}

struct Closure {
    lam: ExprId,
    env: Env,
}

type Env = crate::ir::env::Env<Sv>;

pub struct Normaliser<'a> {
    prog: &'a Program,
    types: &'a SecondaryMap<ExprId, Option<Type>>,
    /// The bindings of the block being built (innermost last).
    blocks: Vec<Vec<Binding>>,
    /// Common subexpressions: a primitive already applied to the same
    /// atoms in this block or an enclosing one is not recomputed.
    memo: Vec<std::collections::HashMap<String, Atom>>,
    /// Data-valued definitions already bound at the top: name → atom.
    globals: Vec<(Name, Sv)>,
    /// Top-level bindings of data definitions, in order of first use.
    top: Vec<Binding>,
    /// Whether projections of known pairs are resolved
    /// ([`normalise_projecting`]), and the components of every pair the
    /// normal form binds (names are fresh, so one map serves every block).
    project: bool,
    pairs: std::collections::HashMap<Name, (Atom, Atom)>,
    counter: u32,
    /// The span of the expression being normalised, and every binding's.
    span: Span,
    spans: std::collections::HashMap<Name, Span>,
}

/// Normalises definition `entry` of the monomorphic, `deriv`-free program,
/// whose parameters have the types `params`.
pub fn normalise(
    prog: &Program,
    types: &SecondaryMap<ExprId, Option<Type>>,
    entry: &str,
    params: &[Type],
) -> Result<Normal, AnfError> {
    normalise_with(prog, types, entry, params, false)
}

/// [`normalise`], where a projection of a pair the normal form bound is
/// that pair's component (R-Vjp-Tuple: the components of a tuple argument,
/// passed separately, stay the parameters reverse mode places).
pub fn normalise_projecting(
    prog: &Program,
    types: &SecondaryMap<ExprId, Option<Type>>,
    entry: &str,
    params: &[Type],
) -> Result<Normal, AnfError> {
    normalise_with(prog, types, entry, params, true)
}

fn normalise_with(
    prog: &Program,
    types: &SecondaryMap<ExprId, Option<Type>>,
    entry: &str,
    params: &[Type],
    project: bool,
) -> Result<Normal, AnfError> {
    let mut n = Normaliser {
        project,
        prog,
        types,
        blocks: vec![Vec::new()],
        memo: vec![std::collections::HashMap::new()],
        globals: Vec::new(),
        top: Vec::new(),
        pairs: std::collections::HashMap::new(),
        counter: 0,
        span: Span::generated(),
        spans: std::collections::HashMap::new(),
    };
    // The definitions before the entry are computed in program order,
    // used or not (semantics.md §1): one that is ⊥ makes the run ⊥, here
    // as in the evaluator, even when only a function that is never applied
    // mentions it.
    for d in &prog.defs {
        if *d.name == *entry {
            break;
        }
        n.global(&d.name)?;
    }
    let f = n.global(&Rc::from(entry))?;
    let mut ps = Vec::new();
    let mut v = f;
    for t in params {
        let p = n.fresh("p");
        ps.push((p.clone(), t.clone()));
        v = n.apply(v, Sv::Data(Atom::Var(p, t.clone())))?;
    }
    let result = n.data(v)?;
    let mut binds = std::mem::take(&mut n.top);
    binds.extend(n.blocks.pop().expect("the outer block"));
    Ok(Normal {
        params: ps,
        body: Block { binds, result },
        spans: n.spans,
    })
}

impl Normaliser<'_> {
    fn fresh(&mut self, base: &str) -> Name {
        self.counter += 1;
        // `'n` cannot clash with user names, which the normal form does not
        // keep; the printed form still parses.
        Rc::from(format!("{base}'n{}", self.counter))
    }

    fn ty(&self, e: ExprId) -> Type {
        self.types[e]
            .clone()
            .expect("monomorphic programs type every node")
    }

    fn data(&self, v: Sv) -> Result<Atom, AnfError> {
        match v {
            Sv::Data(a) => Ok(a),
            Sv::Fun(_) => Err(AnfError::Internal {
                message: "a function where data was expected".into(),
            }),
        }
    }

    fn emit(&mut self, ty: Type, rhs: Rhs) -> Atom {
        let key = match &rhs {
            Rhs::Prim(op, args) => Some(format!("{op:?} {args:?}")),
            _ => None,
        };
        if let Some(k) = &key
            && let Some(a) = self.memo.iter().rev().find_map(|m| m.get(k))
        {
            return a.clone();
        }
        let name = self.fresh("x");
        if let Some(k) = key {
            self.memo
                .last_mut()
                .expect("a memo per block")
                .insert(k, Atom::Var(name.clone(), ty.clone()));
        }
        self.spans.insert(name.clone(), self.span);
        self.blocks.last_mut().expect("a block").push(Binding {
            name: name.clone(),
            ty: ty.clone(),
            rhs,
        });
        Atom::Var(name, ty)
    }

    /// Runs `f` in a new block and returns that block.
    fn block(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<Atom, AnfError>,
    ) -> Result<Block, AnfError> {
        self.blocks.push(Vec::new());
        self.memo.push(std::collections::HashMap::new());
        let r = f(self);
        self.memo.pop();
        let binds = self.blocks.pop().expect("pushed");
        Ok(Block { binds, result: r? })
    }

    fn global(&mut self, x: &Name) -> Result<Sv, AnfError> {
        if let Some((_, v)) = self.globals.iter().rev().find(|(n, _)| n == x) {
            return Ok(v.clone());
        }
        let Some(d) = self.prog.defs.iter().rev().find(|d| d.name == *x) else {
            return Err(AnfError::Internal {
                message: format!("`{x}` is not defined"),
            });
        };
        let body = d.body;
        // A data definition is computed once, at the top of the entry.
        let saved = std::mem::replace(&mut self.blocks, vec![Vec::new()]);
        let saved_memo = std::mem::replace(&mut self.memo, vec![std::collections::HashMap::new()]);
        let v = self.norm(body, &Env::empty());
        let top = std::mem::replace(&mut self.blocks, saved);
        self.memo = saved_memo;
        let v = v?;
        for b in top {
            self.top.extend(b);
        }
        self.globals.push((x.clone(), v.clone()));
        Ok(v)
    }

    fn apply(&mut self, f: Sv, arg: Sv) -> Result<Sv, AnfError> {
        let Sv::Fun(c) = f else {
            return Err(AnfError::Internal {
                message: "applied data".into(),
            });
        };
        let Expr::Lam { param, body, .. } = self.prog.expr(c.lam).clone() else {
            return Err(AnfError::Internal {
                message: "closure without a lambda".into(),
            });
        };
        let env = c.env.bind(param, arg);
        self.norm(body, &env)
    }

    /// The normal form of `e`, its bindings at `e`'s span (or, for a
    /// generated node, the enclosing source's).
    fn norm(&mut self, e: ExprId, env: &Env) -> Result<Sv, AnfError> {
        let was = self.span;
        let here = self.prog.span(e);
        if here != Span::generated() {
            self.span = here;
        }
        let r = self.norm_node(e, env);
        self.span = was;
        r
    }

    fn norm_node(&mut self, e: ExprId, env: &Env) -> Result<Sv, AnfError> {
        Ok(match self.prog.expr(e).clone() {
            Expr::Var(x) => match env.lookup(&x) {
                Some(v) => v,
                None => self.global(&x)?,
            },
            Expr::Lit(l) => Sv::Data(Atom::Lit(l, self.ty(e))),
            Expr::Lam { .. } => Sv::Fun(Rc::new(Closure {
                lam: e,
                env: env.clone(),
            })),
            Expr::App { fun, arg } => {
                let f = self.norm(fun, env)?;
                let a = self.norm(arg, env)?;
                self.apply(f, a)?
            }
            Expr::Let {
                name, value, body, ..
            } => {
                let v = self.norm(value, env)?;
                let env = env.bind(name, v);
                self.norm(body, &env)?
            }
            Expr::If { cond, then_, else_ } => {
                let c = self.norm(cond, env)?;
                let c = self.data(c)?;
                let t = self.block(|n| {
                    let v = n.norm(then_, env)?;
                    n.data(v)
                })?;
                let f = self.block(|n| {
                    let v = n.norm(else_, env)?;
                    n.data(v)
                })?;
                Sv::Data(self.emit(self.ty(e), Rhs::If(c, t, f)))
            }
            Expr::Array(items) => {
                let mut atoms = Vec::new();
                for i in items.iter() {
                    let v = self.norm(*i, env)?;
                    atoms.push(self.data(v)?);
                }
                Sv::Data(self.emit(self.ty(e), Rhs::Array(atoms)))
            }
            Expr::Deriv { .. } | Expr::Diff { .. } => {
                return Err(AnfError::Internal {
                    message: "`deriv`, `jvp` and `vjp` must be expanded before normalisation"
                        .into(),
                });
            }
            Expr::Prim { op, args } => match op {
                Prim::Build => {
                    let n = self.norm(args[0], env)?;
                    let n = self.data(n)?;
                    let f = self.norm(args[1], env)?;
                    let i = self.fresh("i");
                    let body = self.block(|nm| {
                        let v = nm.apply(f, Sv::Data(Atom::Var(i.clone(), Type::Index)))?;
                        nm.data(v)
                    })?;
                    Sv::Data(self.emit(
                        self.ty(e),
                        Rhs::Loop {
                            kind: LoopKind::Build,
                            n,
                            state: None,
                            index: i,
                            body,
                        },
                    ))
                }
                Prim::IFold | Prim::IScan => {
                    let f = self.norm(args[0], env)?;
                    let z = self.norm(args[1], env)?;
                    let z = self.data(z)?;
                    let n = self.norm(args[2], env)?;
                    let n = self.data(n)?;
                    let st = z.ty().clone();
                    let (s, i) = (self.fresh("s"), self.fresh("i"));
                    let body = self.block(|nm| {
                        let g = nm.apply(f, Sv::Data(Atom::Var(s.clone(), st.clone())))?;
                        let v = nm.apply(g, Sv::Data(Atom::Var(i.clone(), Type::Index)))?;
                        nm.data(v)
                    })?;
                    let kind = if op == Prim::IFold {
                        LoopKind::IFold
                    } else {
                        LoopKind::IScan
                    };
                    Sv::Data(self.emit(
                        self.ty(e),
                        Rhs::Loop {
                            kind,
                            n,
                            state: Some((z, s, st)),
                            index: i,
                            body,
                        },
                    ))
                }
                Prim::While => {
                    let c = self.norm(args[0], env)?;
                    let f = self.norm(args[1], env)?;
                    let z = self.norm(args[2], env)?;
                    let z = self.data(z)?;
                    let ty = z.ty().clone();
                    let s = self.fresh("s");
                    let sv = || Sv::Data(Atom::Var(s.clone(), ty.clone()));
                    let cond = self.block(|nm| {
                        let v = nm.apply(c, sv())?;
                        nm.data(v)
                    })?;
                    let step = self.block(|nm| {
                        let v = nm.apply(f, sv())?;
                        nm.data(v)
                    })?;
                    Sv::Data(self.emit(
                        self.ty(e),
                        Rhs::While {
                            init: z,
                            state: s.clone(),
                            ty: ty.clone(),
                            cond,
                            step,
                        },
                    ))
                }
                _ => {
                    let mut atoms = Vec::new();
                    for a in args.iter() {
                        let v = self.norm(*a, env)?;
                        atoms.push(self.data(v)?);
                    }
                    // A projection of a pair the normal form bound is its
                    // component (its atoms are values already).
                    if self.project
                        && let (Prim::Fst | Prim::Snd, [Atom::Var(x, _)]) = (op, atoms.as_slice())
                        && let Some((a, b)) = self.pairs.get(x)
                    {
                        return Ok(Sv::Data(if op == Prim::Fst {
                            a.clone()
                        } else {
                            b.clone()
                        }));
                    }
                    let pair = (self.project && op == Prim::Pair)
                        .then(|| (atoms[0].clone(), atoms[1].clone()));
                    let v = self.emit(self.ty(e), Rhs::Prim(op, atoms));
                    if let (Some(p), Atom::Var(x, _)) = (pair, &v) {
                        self.pairs.insert(x.clone(), p);
                    }
                    Sv::Data(v)
                }
            },
        })
    }
}
