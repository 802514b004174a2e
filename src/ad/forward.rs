//! Forward-mode source-to-source AD: D[[·]] of seed 001 Fig. 7, one arm per
//! rule (spec/ad-forward.md). It runs on deriv-free, monomorphic code with
//! a ground type for every node, and produces ordinary core IR in which
//! every value of type T is replaced by its dual form of type DT[T]: a
//! Double becomes a (primal, tangent) pair, Index and Bool stay as they
//! are, and arrays, tuples and functions are translated element-wise.
//! The variables keep their names; helper variables get fresh names.
//! Definitions the code refers to are translated on demand, as `name'D`.

use std::collections::HashMap;

use super::AdError;
use super::build::{Atom, Builder};
use super::derivatives::{contract, is_differentiable, partials};
use crate::ir::{Def, Expr, ExprId, Lit, Name, Prim, Type};

pub(super) struct Forward<'b, 'a> {
    pub b: &'b mut Builder<'a>,
    /// Definition name → name of its D[[·]] translation.
    pub duals: &'b mut HashMap<Name, Name>,
    /// Variables bound inside the code being translated.
    pub locals: Vec<Name>,
}

impl Forward<'_, '_> {
    /// D[[e]].
    pub fn d(&mut self, e: ExprId) -> Result<ExprId, AdError> {
        let ty = self.b.ty(e);
        let dty = ty.dual();
        Ok(match self.b.prog.expr(e).clone() {
            // D-Var: a variable stands for its own dual form; a definition
            // for its translation.
            Expr::Var(x) => {
                if self.locals.contains(&x) {
                    self.b.var(&x, dty)
                } else {
                    let dx = self.dual_global(&x)?;
                    self.b.var(&dx, dty)
                }
            }
            // D-Const: constants have a zero tangent.
            Expr::Lit(Lit::Double(x)) => {
                let p = self.b.double(x);
                let z = self.b.double(0.0);
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
                        ann: ann.map(|t| t.dual()),
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
                        ann: ann.map(|t| t.dual()),
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
            Expr::Prim { op, args } => self.d_prim(op, &args, ty)?,
        })
    }

    fn d_args(&mut self, args: &[ExprId]) -> Result<Vec<ExprId>, AdError> {
        args.iter().map(|a| self.d(*a)).collect()
    }

    fn d_prim(&mut self, op: Prim, args: &[ExprId], ty: Type) -> Result<ExprId, AdError> {
        let dty = ty.dual();
        let arg_ty = self.b.ty(args[0]);
        Ok(match op {
            // D-Build, D-IFold, D-Get, D-Length, D-Pair, D-Fst, D-Snd, D-Not:
            // structural; Index and Bool operands are their own dual form.
            // D-IScan, D-Concat, D-Accum: structural too (cotangent addition
            // of two dual pairs adds the primals and the tangents).
            Prim::Build
            | Prim::IFold
            | Prim::IScan
            | Prim::Concat
            | Prim::Accum
            | Prim::Get
            | Prim::Length
            | Prim::Pair
            | Prim::Fst
            | Prim::Snd
            | Prim::Not => {
                let ds = self.d_args(args)?;
                self.b.prim(op, ds, dty)
            }
            // D-Cmp: compare the primal parts.
            Prim::Lt | Prim::Gt | Prim::Le | Prim::Ge | Prim::Eq | Prim::Ne => {
                let mut ds = self.d_args(args)?;
                if arg_ty == Type::Double {
                    ds = ds.into_iter().map(|d| self.b.fst(d)).collect();
                }
                self.b.prim(op, ds, Type::Bool)
            }
            // D-ToDouble: a Double made from an Index has a zero tangent.
            Prim::ToDouble => {
                let ds = self.d_args(args)?;
                let p = self.b.dop(Prim::ToDouble, ds);
                let z = self.b.double(0.0);
                self.b.pair(p, z)
            }
            // D-Index: Index arithmetic has no tangent.
            _ if arg_ty == Type::Index => {
                let ds = self.d_args(args)?;
                self.b.prim(op, ds, Type::Index)
            }
            // D-Add, D-Sub, D-Mult, D-Div, D-Pow, D-Neg, D-Sin, D-Cos, D-Tan,
            // D-Log, D-Exp, D-Sqrt: the derivative table.
            _ if is_differentiable(op) => self.d_scalar(op, args)?,
            _ => unreachable!("every primitive has a D rule"),
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
        let primals: Vec<Atom> = names.iter().map(|n| Atom::Fst(n.clone())).collect();
        let tangents: Vec<Option<Atom>> = names
            .iter()
            .zip(&constant)
            .map(|(n, c)| (!c).then(|| Atom::Snd(n.clone())))
            .collect();
        let needs_result = matches!(op, Prim::Div | Prim::Pow | Prim::Exp | Prim::Sqrt);
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
        let tangent = contract(ps, &tangents, self.b);
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

    /// The name of D[[g]] for the definition `g`, translating it (and, on
    /// the way, what it refers to) the first time. The translation is
    /// inserted right after `g`, so it follows everything it refers to.
    pub fn dual_global(&mut self, g: &Name) -> Result<Name, AdError> {
        if let Some(n) = self.duals.get(g) {
            return Ok(n.clone());
        }
        let Some(idx) = self.b.prog.defs.iter().rposition(|d| d.name == *g) else {
            return Err(AdError::Internal {
                message: format!("`{g}` is neither a local variable nor a definition"),
            });
        };
        let body = self.b.prog.defs[idx].body;
        let saved = std::mem::take(&mut self.locals);
        let db = self.d(body);
        self.locals = saved;
        let db = db?;
        let name = self.b.reserve(&format!("{g}'D"));
        self.duals.insert(g.clone(), name.clone());
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
            ann: d.ann.as_ref().map(Type::dual),
            body: db,
            prelude: false,
        };
        self.b.prog.defs.insert(idx + 1, def);
        Ok(name)
    }
}
