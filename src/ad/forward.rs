//! Forward-mode source-to-source AD: D[[·]] of seed 001 Fig. 7, one arm per
//! rule (spec/ad-forward.md). It runs on deriv-free, monomorphic code with
//! a ground type for every node, and produces ordinary core IR in which
//! every value of type T is replaced by its dual form of type DT[T]: a
//! Double becomes a (primal, tangent) pair, Index and Bool stay as they
//! are, and arrays, tuples and functions are translated element-wise.
//! The variables keep their names; helper variables get fresh names.
//! Definitions the code refers to are translated on demand, as `name'D`.
//!
//! With [`Forward::zero`] set, the same walk is *vector* forward mode
//! (spec/ad-forward.md §4.6): a Double's dual form is `(primal, tangents)`
//! with one tangent per seed direction, every tangent combination is a
//! `build` over the directions, and the named variable is the zero tangent
//! vector, whose length is the number of directions. Definitions are then
//! translated as `name'V`, a function of that zero vector.

use std::collections::HashMap;

use super::AdError;
use super::atom::Atom;
use super::derivatives::{Partial, contract, partials};
use crate::ir::build::Builder;
use crate::ir::prim::ForwardRule;
use crate::ir::{Def, Expr, ExprId, Lit, Name, Prim, Type};

pub(super) struct Forward<'b, 'a> {
    pub b: &'b mut Builder<'a>,
    /// Definition name → name of its D[[·]] translation.
    pub duals: &'b mut HashMap<Name, Name>,
    /// Definition name → name of its vector-mode translation.
    pub vduals: &'b mut HashMap<Name, Name>,
    /// Variables bound inside the code being translated.
    pub locals: Vec<Name>,
    /// Vector mode: the variable holding the zero tangent vector.
    pub zero: Option<Name>,
}

impl Forward<'_, '_> {
    /// DT[[t]], or VT[[t]] in vector mode.
    fn dual_ty(&self, t: &Type) -> Type {
        if self.zero.is_some() {
            t.vdual()
        } else {
            t.dual()
        }
    }

    /// A zero tangent: `0.0`, or the zero vector (D-Vec-Const).
    fn zero_tangent(&mut self) -> ExprId {
        match &self.zero {
            None => self.b.double(0.0),
            Some(z) => {
                let z = z.clone();
                self.b.var(&z, Type::array(Type::Double))
            }
        }
    }

    /// D[[e]], its nodes at `e`'s span.
    pub fn d(&mut self, e: ExprId) -> Result<ExprId, AdError> {
        let was = self.b.at(self.b.prog.span(e));
        let r = self.d_node(e);
        self.b.restore(was);
        r
    }

    fn d_node(&mut self, e: ExprId) -> Result<ExprId, AdError> {
        let ty = self.b.ty(e);
        let dty = self.dual_ty(&ty);
        Ok(match self.b.prog.expr(e).clone() {
            // D-Var: a variable stands for its own dual form; a definition
            // for its translation.
            Expr::Var(x) => {
                if self.locals.contains(&x) {
                    self.b.var(&x, dty)
                } else {
                    let dx = self.dual_global(&x)?;
                    match self.zero.clone() {
                        None => self.b.var(&dx, dty),
                        // D-Vec-Var: the translation takes the zero vector.
                        Some(z) => {
                            let ft = Type::fun(Type::array(Type::Double), dty);
                            let f = self.b.var(&dx, ft);
                            let zv = self.b.var(&z, Type::array(Type::Double));
                            self.b.app(f, zv)
                        }
                    }
                }
            }
            // D-Const (D-Vec-Const): constants have a zero tangent.
            Expr::Lit(Lit::Double(x)) => {
                let p = self.b.double(x);
                let z = self.zero_tangent();
                self.b.pair(p, z)
            }
            Expr::Lit(l) => self.b.add(Expr::Lit(l), ty),
            // D-Abs
            Expr::Lam { param, ann, body } => {
                self.locals.push(param.clone());
                let db = self.d(body);
                self.locals.pop();
                let db = db?;
                self.b.add(
                    Expr::Lam {
                        param,
                        ann: ann.map(|t| self.dual_ty(&t)),
                        body: db,
                    },
                    dty,
                )
            }
            // D-App
            Expr::App { fun, arg } => {
                let f = self.d(fun)?;
                let a = self.d(arg)?;
                self.b.add(Expr::App { fun: f, arg: a }, dty)
            }
            // D-Let
            Expr::Let {
                name,
                ann,
                value,
                body,
            } => {
                let v = self.d(value)?;
                self.locals.push(name.clone());
                let db = self.d(body);
                self.locals.pop();
                let db = db?;
                self.b.add(
                    Expr::Let {
                        name,
                        ann: ann.map(|t| self.dual_ty(&t)),
                        value: v,
                        body: db,
                    },
                    dty,
                )
            }
            // D-If: the condition is a Bool, whose dual form is itself.
            Expr::If { cond, then_, else_ } => {
                let c = self.d(cond)?;
                let a = self.d(then_)?;
                let bb = self.d(else_)?;
                self.b.if_(c, a, bb)
            }
            // D-Vector
            Expr::Array(items) => {
                let mut out = Vec::new();
                for i in items.iter() {
                    out.push(self.d(*i)?);
                }
                self.b.add(Expr::Array(out.into()), dty)
            }
            Expr::Deriv { .. } => unreachable!("deriv is expanded before D[[.]] runs"),
            Expr::Diff { .. } => unreachable!("jvp and vjp are expanded before D[[.]] runs"),
            Expr::Prim { op, args } => self.d_prim(op, &args, ty)?,
        })
    }

    fn d_args(&mut self, args: &[ExprId]) -> Result<Vec<ExprId>, AdError> {
        args.iter().map(|a| self.d(*a)).collect()
    }

    /// D[[·]] of a primitive application: the rule the table names
    /// (`PrimInfo::forward`).
    fn d_prim(&mut self, op: Prim, args: &[ExprId], ty: Type) -> Result<ExprId, AdError> {
        let dty = self.dual_ty(&ty);
        let arg_ty = self.b.ty(args[0]);
        Ok(match op.info().forward.1 {
            // D-Accum, D-AddAt: structural (cotangent addition of two dual
            // pairs adds the primals and the tangents), but not in vector
            // mode, where ⊕ on a tangent vector would concatenate it
            // (spec/ad-forward.md §4.6).
            ForwardRule::CotangentSum if self.zero.is_some() && ty.has_double() => {
                return Err(AdError::Unsupported {
                    what: format!(
                        "vector forward mode of `{}` (⊕ would join the tangent vectors)",
                        op.name()
                    ),
                    span: self.b.span(),
                });
            }
            // D-Build, D-IFold, D-Get, D-Length, D-Pair, D-Fst, D-Snd, D-Not,
            // D-IScan, D-Concat, D-While: structural; Index and Bool operands are
            // their own dual form.
            ForwardRule::Structural | ForwardRule::CotangentSum => {
                let ds = self.d_args(args)?;
                self.b.prim(op, ds, dty)
            }
            // D-Cmp: compare the primal parts.
            ForwardRule::Primal => {
                let mut ds = self.d_args(args)?;
                if arg_ty == Type::Double {
                    ds = ds.into_iter().map(|d| self.b.fst(d)).collect();
                }
                self.b.prim(op, ds, Type::Bool)
            }
            // D-ToDouble: a Double made from an Index has a zero tangent.
            ForwardRule::ZeroTangent => {
                let ds = self.d_args(args)?;
                let p = self.b.dop(op, ds);
                let z = self.zero_tangent();
                self.b.pair(p, z)
            }
            // D-Index: Index arithmetic has no tangent.
            ForwardRule::Partials if arg_ty == Type::Index => {
                let ds = self.d_args(args)?;
                self.b.prim(op, ds, Type::Index)
            }
            // D-Add, D-Sub, D-Mult, D-Div, D-Pow, D-Neg, D-Sin, D-Cos, D-Tan,
            // D-Log, D-Exp, D-Sqrt: the derivative table.
            ForwardRule::Partials => self.d_scalar(op, args)?,
        })
    }

    /// (r, Σ ∂ᵢ · ṫᵢ) for a scalar primitive on Doubles, with the dual
    /// arguments bound to variables first (seed 001: "the arguments are
    /// bound to a new variable" to avoid code explosion).
    fn d_scalar(&mut self, op: Prim, args: &[ExprId]) -> Result<ExprId, AdError> {
        let mut binds: Vec<(Name, ExprId)> = Vec::new();
        let mut names = Vec::new();
        // A literal operand has a zero tangent: its term is left out.
        let constant: Vec<bool> = args
            .iter()
            .map(|a| matches!(self.b.prog.expr(*a), Expr::Lit(_)))
            .collect();
        for a in args {
            let da = self.d(*a)?;
            match self.b.prog.expr(da) {
                Expr::Var(x) => names.push(x.clone()),
                _ => {
                    let n = self.b.fresh("d");
                    binds.push((n.clone(), da));
                    names.push(n);
                }
            }
        }
        let vector = self.zero.is_some();
        let primals: Vec<Atom> = names
            .iter()
            .map(|n| {
                if vector {
                    Atom::VFst(n.clone())
                } else {
                    Atom::Fst(n.clone())
                }
            })
            .collect();
        let tangents: Vec<Option<Name>> = names
            .iter()
            .zip(&constant)
            .map(|(n, c)| (!c).then(|| n.clone()))
            .collect();
        // D-Div, D-Pow, D-Exp, D-Sqrt: their partials mention `r`.
        let needs_result = op.info().needs_result();
        let primal = {
            let ps: Vec<ExprId> = primals.iter().map(|p| self.b.atom(p)).collect();
            self.b.dop(op, ps)
        };
        let (result_atom, primal_bind) = if needs_result {
            let r = self.b.fresh("r");
            (Atom::Var(r.clone()), Some((r, primal)))
        } else {
            (Atom::Lit(f64::NAN), None)
        };
        let ps = partials(op, &primals, &result_atom, self.b);
        let tangent = if vector {
            self.contract_vector(ps, &tangents)
        } else {
            let seeds: Vec<Option<Atom>> =
                tangents.iter().map(|t| t.clone().map(Atom::Snd)).collect();
            contract(ps, &seeds, self.b)
        };
        let mut out = match &primal_bind {
            Some((r, _)) => {
                let rv = self.b.var(r, Type::Double);
                self.b.pair(rv, tangent)
            }
            None => self.b.pair(primal, tangent),
        };
        if let Some((r, p)) = primal_bind {
            out = self.b.let_(r, p, out);
        }
        for (n, v) in binds.into_iter().rev() {
            out = self.b.let_(n, v, out);
        }
        Ok(out)
    }

    /// D-Vec-Scalar: Σ ∂ᵢ · ṫᵢ for every direction,
    /// `let q… = ∂… in build (length z) (fun j -> Σ qᵢ · ṫᵢ[j])`. The
    /// partials are bound once, outside the loop, in the order the scalar
    /// rule evaluates them, except a partial guarded by a zero tangent
    /// (D-Sqrt's), which stays under its guard in the loop
    /// so that it is evaluated exactly where D[[·]] evaluates it. With no
    /// non-constant operand the tangent is the zero vector itself.
    fn contract_vector(&mut self, ps: Vec<Partial>, tangents: &[Option<Name>]) -> ExprId {
        let z = self.zero.clone().expect("vector mode");
        if tangents.iter().all(Option::is_none) {
            return self.b.var(&z, Type::array(Type::Double));
        }
        let mut binds: Vec<(Name, ExprId)> = Vec::new();
        let mut bound = Vec::new();
        for (p, t) in ps.into_iter().zip(tangents) {
            if t.is_none() || p.guard_zero_seed {
                bound.push(p);
                continue;
            }
            let mut bind = |b: &mut Builder<'_>, e: Option<ExprId>| {
                e.map(|e| {
                    let q = b.fresh("q");
                    binds.push((q.clone(), e));
                    b.var(&q, Type::Double)
                })
            };
            let num = bind(self.b, p.num);
            let den = bind(self.b, p.den);
            bound.push(Partial { num, den, ..p });
        }
        let zv = self.b.var(&z, Type::array(Type::Double));
        let n = self.b.length(zv);
        let mut out = self.b.build(n, |b, j| {
            let seeds: Vec<Option<Atom>> = tangents
                .iter()
                .map(|t| t.clone().map(|t| Atom::VTan(t, j.clone())))
                .collect();
            contract(bound, &seeds, b)
        });
        for (q, e) in binds.into_iter().rev() {
            out = self.b.let_(q, e, out);
        }
        out
    }

    /// The name of D[[g]] for the definition `g`, translating it (and, on
    /// the way, what it refers to) the first time. The translation is
    /// inserted right after `g`, so it follows everything it refers to.
    ///
    /// In vector mode the translation is `g'V = fun z -> D[[body]]` with
    /// `z` the zero tangent vector (D-Vec-Var), so one translation serves
    /// every number of directions.
    pub fn dual_global(&mut self, g: &Name) -> Result<Name, AdError> {
        let vector = self.zero.is_some();
        let cached = if vector { &self.vduals } else { &self.duals };
        if let Some(n) = cached.get(g) {
            return Ok(n.clone());
        }
        let Some(idx) = self.b.prog.defs.iter().rposition(|d| d.name == *g) else {
            return Err(AdError::Internal {
                message: format!("`{g}` is neither a local variable nor a definition"),
            });
        };
        let body = self.b.prog.defs[idx].body;
        let saved = std::mem::take(&mut self.locals);
        let saved_zero = self.zero.clone();
        let param = vector.then(|| self.b.fresh("z"));
        if let Some(z) = &param {
            self.zero = Some(z.clone());
            self.locals.push(z.clone());
        }
        let db = self.d(body);
        self.locals = saved;
        self.zero = saved_zero;
        let mut db = db?;
        if let Some(z) = param {
            // A data definition is computed when the program starts, and
            // its ⊥ is the run's (semantics.md §1); its vector-mode
            // translation is a function, computed when called, so it
            // names `g` too: then `g` is computed at the start of the
            // derivative program as of the program (found by `fsmooth
            // fuzz --target native`: a ⊥ definition used in an untaken
            // branch gave the vector mode a value and the others ⊥).
            let ty = self.b.ty(body);
            if !matches!(ty, Type::Fun(..)) {
                let primal = self.b.var(g, ty);
                let u = self.b.fresh("u");
                db = self.b.let_(u, primal, db);
            }
            db = self.b.lam(z, Type::array(Type::Double), db);
        }
        let suffix = if vector { "V" } else { "D" };
        let name = self.b.reserve(&format!("{g}'{suffix}"));
        if vector {
            self.vduals.insert(g.clone(), name.clone());
        } else {
            self.duals.insert(g.clone(), name.clone());
        }
        // Translating the body may have inserted definitions before `g`.
        let idx = self
            .b
            .prog
            .defs
            .iter()
            .rposition(|d| d.name == *g)
            .expect("still there");
        let d = &self.b.prog.defs[idx];
        let def = Def {
            name: name.clone(),
            span: d.span,
            ann: d.ann.as_ref().map(|t| {
                if vector {
                    Type::fun(Type::array(Type::Double), t.vdual())
                } else {
                    t.dual()
                }
            }),
            body: db,
            prelude: false,
        };
        self.b.prog.defs.insert(idx + 1, def);
        Ok(name)
    }
}
