//! Expansion of `deriv e x` (seed 001 Fig. 5; spec/ad-forward.md,
//! "deriv"), innermost first: by the time an outer `deriv` is expanded,
//! the inner ones are ordinary code over pairs, which the outer D[[·]]
//! treats as data. That ordering, plus translating each `deriv` body as
//! a closed function of its free variables, is what rules out
//! perturbation confusion (seed 001 §4.3).
//!
//! `deriv e x` with free variables v₁ … vₙ of `e` becomes
//!
//! ```text
//! x : Double   let v₁ = A[v₁] in … let vₙ = A[vₙ] in D[[e]]          (D-Deriv-Double)
//! x : Vector   build (length x) (fun r -> let v₁ = A[v₁]ᵣ in … D[[e]])  (D-Deriv-Vector)
//! x : Matrix   build (length x) (fun r -> build (length x[r]) (fun c -> …))  (D-Deriv-Matrix)
//! ```
//!
//! where A[x] is x with a one-hot tangent (1 at r, or at (r, c)) and A[v]
//! for every other v is v with zero tangents: the let-bound form of the
//! paper's application of D[[fun v₁ … vₙ -> e]] to those arguments.

use std::collections::HashMap;

use super::accum::accumulable;
use super::forward::Forward;
use super::{AdError, ForwardMode};
use crate::ir::build::Builder;
use crate::ir::{Def, DiffOp, Expr, ExprId, Name, Prim, Type};

/// The λ an operator differentiates: its parameter and its type, its
/// body, and the body's other free variables.
struct Operand {
    param: Name,
    ty: Type,
    body: ExprId,
    free: Vec<(Name, Type)>,
}

struct Binder {
    name: Name,
    ty: Type,
    value: Option<ExprId>,
}

pub(super) struct Expander<'b, 'a> {
    pub b: &'b mut Builder<'a>,
    pub duals: &'b mut HashMap<Name, Name>,
    pub vduals: &'b mut HashMap<Name, Name>,
    /// How `deriv` with respect to a Vector is expanded: D-Deriv-Vector,
    /// or D-Vec-Deriv in vector forward mode.
    pub mode: ForwardMode,
    /// The outermost `deriv` of the definition is expanded by D-Vec-Rows
    /// (the Jacobian's rows, `pipeline::Form::Rows`).
    pub rows: bool,
    /// How many `deriv`s enclose the current node.
    depth: usize,
    /// How many `vjp`s enclose the current node (in their function): a
    /// `vjp` inside one is expanded without accumulators (R-Vjp-Nested).
    under_vjp: usize,
    /// Binders enclosing the current node, with their types and, for a
    /// `let`, the bound expression.
    scope: Vec<Binder>,
}

impl<'b, 'a> Expander<'b, 'a> {
    pub fn new(
        b: &'b mut Builder<'a>,
        duals: &'b mut HashMap<Name, Name>,
        vduals: &'b mut HashMap<Name, Name>,
        mode: ForwardMode,
        rows: bool,
    ) -> Self {
        Expander {
            b,
            duals,
            vduals,
            mode,
            rows,
            depth: 0,
            under_vjp: 0,
            scope: Vec::new(),
        }
    }

    /// Returns `e` with every `deriv` inside expanded (the same id when
    /// there is none).
    pub fn expand(&mut self, e: ExprId) -> Result<ExprId, AdError> {
        let was = self.b.at(self.b.prog.span(e));
        let r = self.expand_node(e);
        self.b.restore(was);
        r
    }

    fn expand_node(&mut self, e: ExprId) -> Result<ExprId, AdError> {
        let ty = self.b.ty(e);
        let node = self.b.prog.expr(e).clone();
        let new = match node.clone() {
            Expr::Var(_) | Expr::Lit(_) => return Ok(e),
            Expr::Lam { param, ann, body } => {
                let pt = match &ty {
                    Type::Fun(a, _) => (**a).clone(),
                    _ => unreachable!("a lambda has a function type"),
                };
                self.scope.push(Binder {
                    name: param.clone(),
                    ty: pt,
                    value: None,
                });
                let nb = self.expand(body);
                self.scope.pop();
                let nb = nb?;
                if nb == body {
                    return Ok(e);
                }
                Expr::Lam {
                    param,
                    ann,
                    body: nb,
                }
            }
            Expr::Let {
                name,
                ann,
                value,
                body,
            } => {
                let nv = self.expand(value)?;
                let vt = self.b.ty(nv);
                self.scope.push(Binder {
                    name: name.clone(),
                    ty: vt,
                    value: Some(nv),
                });
                let nb = self.expand(body);
                self.scope.pop();
                let nb = nb?;
                if nv == value && nb == body {
                    return Ok(e);
                }
                Expr::Let {
                    name,
                    ann,
                    value: nv,
                    body: nb,
                }
            }
            Expr::Deriv { body, wrt } => {
                self.depth += 1;
                let nb = self.expand(body);
                self.depth -= 1;
                return self.deriv(nb?, &wrt, e);
            }
            Expr::Diff { op, fun, at, dir } => {
                // Innermost first (§5): the function's own operators are
                // ordinary code by the time this one is expanded.
                let at = self.expand(at)?;
                let dir = self.expand(dir)?;
                self.depth += 1;
                let reversed = usize::from(op == DiffOp::Vjp);
                self.under_vjp += reversed;
                let fun = self.expand(fun);
                self.under_vjp -= reversed;
                self.depth -= 1;
                let fun = fun?;
                return match op {
                    DiffOp::Jvp => self.jvp(fun, at, dir),
                    DiffOp::Vjp => self.vjp(fun, at, dir),
                };
            }
            other => {
                let kids = other.children();
                let mut new_kids = Vec::new();
                for k in &kids {
                    new_kids.push(self.expand(*k)?);
                }
                if new_kids == kids {
                    return Ok(e);
                }
                other.with_children(&new_kids)
            }
        };
        Ok(self.b.add(new, ty))
    }

    /// The free local variables of `e` (in order of first occurrence).
    fn free_locals(&self, e: ExprId) -> Vec<(Name, Type)> {
        let mut out: Vec<(Name, Type)> = Vec::new();
        let mut bound: Vec<Name> = Vec::new();
        self.collect_free(e, &mut bound, &mut out);
        out
    }

    fn collect_free(&self, e: ExprId, bound: &mut Vec<Name>, out: &mut Vec<(Name, Type)>) {
        match self.b.prog.expr(e) {
            Expr::Var(x) => {
                if bound.contains(x) || out.iter().any(|(n, _)| n == x) {
                    return;
                }
                if let Some(b) = self.scope.iter().rev().find(|b| b.name == *x) {
                    out.push((x.clone(), b.ty.clone()));
                }
            }
            Expr::Lam { param, body, .. } => {
                bound.push(param.clone());
                self.collect_free(*body, bound, out);
                bound.pop();
            }
            Expr::Let {
                name, value, body, ..
            } => {
                self.collect_free(*value, bound, out);
                bound.push(name.clone());
                self.collect_free(*body, bound, out);
                bound.pop();
            }
            other => {
                for c in other.children() {
                    self.collect_free(c, bound, out);
                }
            }
        }
    }

    /// Position in `scope` of the innermost binder of `x` among the first
    /// `upto` binders.
    fn binder_of(&self, x: &Name, upto: usize) -> Option<usize> {
        self.scope[..upto].iter().rposition(|b| b.name == *x)
    }

    fn deriv(&mut self, body: ExprId, wrt: &Name, at: ExprId) -> Result<ExprId, AdError> {
        let span = self.b.prog.span(at);
        let mut body = body;
        // Function-valued free variables bound by an enclosing `let` are
        // re-bound inside the differentiated code (D-Deriv-Let),
        // provided their definition means the same there.
        let mut fvs = loop {
            let fvs = self.free_locals(body);
            let Some((n, t)) = fvs.iter().find(|(_, t)| !t.is_data()).cloned() else {
                break fvs;
            };
            let err = AdError::FunctionFreeVariable {
                name: n.to_string(),
                ty: t.to_string(),
                span,
            };
            let pos = self.binder_of(&n, self.scope.len()).ok_or(err.clone())?;
            let Some(value) = self.scope[pos].value else {
                return Err(err);
            };
            let mut bound = Vec::new();
            let mut vfree = Vec::new();
            self.collect_free(value, &mut bound, &mut vfree);
            let same_meaning = vfree
                .iter()
                .all(|(v, _)| self.binder_of(v, pos) == self.binder_of(v, self.scope.len()));
            if !same_meaning {
                return Err(err);
            }
            body = self.b.let_(n, value, body);
        };
        let wrt_ty = self
            .scope
            .iter()
            .rev()
            .find(|b| b.name == *wrt)
            .map(|b| b.ty.clone())
            .ok_or_else(|| AdError::Internal {
                message: format!("`deriv` variable `{wrt}` is not in scope"),
            })?;
        // The independent variable is always an input, even if unused.
        if !fvs.iter().any(|(n, _)| n == wrt) {
            fvs.push((wrt.clone(), wrt_ty.clone()));
        }
        let out = match &wrt_ty {
            // D-Deriv-Double
            Type::Double => {
                let seed = |b: &mut Builder<'_>| b.double(1.0);
                self.with_inputs(
                    &fvs,
                    wrt,
                    None,
                    &mut |b, x| {
                        let v = b.var(x, Type::Double);
                        let one = seed(b);
                        b.pair(v, one)
                    },
                    body,
                )?
            }
            Type::Array(e) if **e == Type::Double && self.rows && self.depth == 0 => {
                self.deriv_rows(&fvs, wrt, body)?
            }
            Type::Array(e) if **e == Type::Double && self.mode == ForwardMode::Vector => {
                self.deriv_vector(&fvs, wrt, body)?
            }
            // D-Deriv-Vector: element r of the result seeds x[r].
            Type::Array(e) if **e == Type::Double => {
                let wrt_v = self.b.var(wrt, wrt_ty.clone());
                let n = self.b.length(wrt_v);
                let r = self.b.fresh("r");
                let inner = self.with_inputs(
                    &fvs,
                    wrt,
                    None,
                    &mut |b, x| {
                        let xv = b.var(x, Type::array(Type::Double));
                        let len = b.length(xv);
                        b.build(len, |b, j| {
                            hot_element(b, x, std::slice::from_ref(j), std::slice::from_ref(&r))
                        })
                    },
                    body,
                )?;
                let lam = self.b.lam(r, Type::Index, inner);
                let rt = Type::array(self.b.ty(lam).fun_result());
                self.b.prim(Prim::Build, vec![n, lam], rt)
            }
            // D-Deriv-Matrix: element (r, c) of the result seeds x[r][c].
            Type::Array(e) if **e == Type::array(Type::Double) => {
                let (r, c) = (self.b.fresh("r"), self.b.fresh("c"));
                let inner = self.with_inputs(
                    &fvs,
                    wrt,
                    None,
                    &mut |b, x| {
                        let xv = b.var(x, Type::array(Type::array(Type::Double)));
                        let rows = b.length(xv);
                        b.build(rows, |b, i| {
                            let xv = b.var(x, Type::array(Type::array(Type::Double)));
                            let iv = b.var(i, Type::Index);
                            let row = b.get(xv, iv);
                            let cols = b.length(row);
                            b.build(cols, |b, j| {
                                hot_element(b, x, &[i.clone(), j.clone()], &[r.clone(), c.clone()])
                            })
                        })
                    },
                    body,
                )?;
                let lc = self.b.lam(c, Type::Index, inner);
                let xv = self.b.var(wrt, wrt_ty.clone());
                let rv = self.b.var(&r, Type::Index);
                let row = self.b.get(xv, rv);
                let cols = self.b.length(row);
                let rt = Type::array(self.b.ty(lc).fun_result());
                let inner_build = self.b.prim(Prim::Build, vec![cols, lc], rt);
                let lr = self.b.lam(r, Type::Index, inner_build);
                let xv = self.b.var(wrt, wrt_ty.clone());
                let rows = self.b.length(xv);
                let rt = Type::array(self.b.ty(lr).fun_result());
                self.b.prim(Prim::Build, vec![rows, lr], rt)
            }
            other => {
                return Err(AdError::Internal {
                    message: format!("`deriv` with respect to a variable of type {other}"),
                });
            }
        };
        Ok(out)
    }

    /// The lambda an operator differentiates (specialisation made it one),
    /// with the free local variables of its body other than its parameter.
    fn operand(&mut self, fun: ExprId) -> Result<Operand, AdError> {
        let Expr::Lam { param, body, .. } = self.b.prog.expr(fun).clone() else {
            return Err(AdError::Internal {
                message: "the function of `jvp` or `vjp` is not a lambda after specialisation"
                    .into(),
            });
        };
        let pt = match self.b.ty(fun) {
            Type::Fun(a, _) => (*a).clone(),
            _ => unreachable!("a lambda has a function type"),
        };
        self.scope.push(Binder {
            name: param.clone(),
            ty: pt.clone(),
            value: None,
        });
        let fvs = self.free_locals(body);
        self.scope.pop();
        let fvs: Vec<_> = fvs.into_iter().filter(|(n, _)| *n != param).collect();
        if let Some((n, t)) = fvs.iter().find(|(_, t)| !t.is_data()) {
            return Err(AdError::FunctionFreeVariable {
                name: n.to_string(),
                ty: t.to_string(),
                span: self.b.prog.span(fun),
            });
        }
        Ok(Operand {
            param,
            ty: pt,
            body,
            free: fvs,
        })
    }

    /// D-Jvp: `jvp (fun p -> e) x t` becomes
    ///
    /// ```text
    /// let x' = x in let t' = t in let p = x' in
    /// let v₁ = Z[v₁] in … let vₙ = Z[vₙ] in let p = P[p, t'] in
    /// let r = D[[e]] in (fst* r, snd* r)
    /// ```
    ///
    /// where P pairs every Double of `p` with the Double at the same place
    /// of `t'`, and `fst*`/`snd*` take every dual number's primal and
    /// tangent (a component without Doubles keeps its value in both).
    fn jvp(&mut self, fun: ExprId, at: ExprId, dir: ExprId) -> Result<ExprId, AdError> {
        let Operand {
            param: p,
            ty: pt,
            body,
            free: mut fvs,
        } = self.operand(fun)?;
        fvs.push((p.clone(), pt.clone()));
        let xn = self.b.fresh("x");
        let tn = self.b.fresh("t");
        let inner = self.with_inputs(
            &fvs,
            &p,
            None,
            &mut |b, x| {
                let xv = b.var(x, pt.clone());
                let tv = b.var(&tn, pt.clone());
                zip_dual(b, xv, tv, &pt)
            },
            body,
        )?;
        let rt = self.b.ty(body);
        let rn = self.b.fresh("r");
        let rv = self.b.var(&rn, rt.dual());
        let primal = map_doubles(self.b, rv, &rt, &Type::dual, &mut |b, d| b.fst(d));
        let rv = self.b.var(&rn, rt.dual());
        let tangent = map_doubles(self.b, rv, &rt, &Type::dual, &mut |b, d| b.snd(d));
        let out = self.b.pair(primal, tangent);
        let out = self.b.let_(rn, inner, out);
        let xv = self.b.var(&xn, pt.clone());
        let out = self.b.let_(p, xv, out);
        let out = self.b.let_(tn, dir, out);
        Ok(self.b.let_(xn, at, out))
    }

    /// R-Vjp: `vjp (fun p -> e) x w` with free variables v₁ … vₙ of `e`
    /// becomes `rev x v₁ … vₙ w`, where `rev` is reverse mode's program
    /// (spec/ad-reverse.md) for `fun p v₁ … vₙ -> e` with respect to `p`,
    /// seeded with the cotangent `w`.
    fn vjp(&mut self, fun: ExprId, at: ExprId, dir: ExprId) -> Result<ExprId, AdError> {
        let Operand {
            param: p,
            ty: pt,
            body,
            free: fvs,
        } = self.operand(fun)?;
        let accumulators = self.under_vjp == 0;
        // R-Vjp-Tuple: a tuple argument with arrays of Doubles among its
        // components is passed as its components, each an independent
        // parameter with a dense accumulator of its own (§5.6); the
        // gradient is the tuple of theirs.
        let spine = tuple_spine(&pt);
        let split = accumulators && spine.len() > 1 && spine.iter().any(accumulable);
        let comps: Vec<(Name, Type)> = if split {
            spine
                .iter()
                .map(|t| (self.b.fresh("c"), t.clone()))
                .collect()
        } else {
            vec![(p.clone(), pt.clone())]
        };
        let mut lam = if split {
            let parts: Vec<ExprId> = comps
                .iter()
                .map(|(c, t)| self.b.var(c, t.clone()))
                .collect();
            let tuple = right_nested(self.b, parts);
            self.b.let_(p.clone(), tuple, body)
        } else {
            body
        };
        for (v, t) in fvs.iter().rev() {
            lam = self.b.lam(v.clone(), t.clone(), lam);
        }
        for (c, t) in comps.iter().rev() {
            lam = self.b.lam(c.clone(), t.clone(), lam);
        }
        let name = self.b.fresh("vjp");
        // First in the program: no other definition is computed with it.
        self.b.prog.defs.insert(
            0,
            Def {
                name: name.clone(),
                span: self.b.span(),
                ann: None,
                body: lam,
                prelude: false,
            },
        );
        let params: Vec<Type> = comps.iter().chain(&fvs).map(|(_, t)| t.clone()).collect();
        let normal = if split {
            crate::anf::normalise_projecting(self.b.prog, self.b.types, &name, &params)
        } else {
            crate::anf::normalise(self.b.prog, self.b.types, &name, &params)
        };
        self.b.prog.defs.remove(0);
        let normal = normal?;
        let def = super::reverse::reverse_program(
            self.b,
            &normal,
            &(0..comps.len()).collect::<Vec<_>>(),
            true,
            &name,
            super::Checkpointing::default(),
            // R-Vjp-Nested: code another `vjp` reverses keeps sparse
            // cotangents (spec/ad-reverse.md §10.2).
            accumulators,
        )?;
        let xn = self.b.fresh("x");
        let mut out = def.body;
        // The components of the argument, as arguments: component k is
        // `fst (sndᵏ x)`, the last one `sndᵏ x`.
        for k in 0..comps.len() {
            let mut part = self.b.var(&xn, pt.clone());
            for _ in 0..k {
                part = self.b.snd(part);
            }
            if k + 1 < comps.len() {
                part = self.b.fst(part);
            }
            out = self.b.app(out, part);
        }
        for (v, t) in &fvs {
            let a = self.b.var(v, t.clone());
            out = self.b.app(out, a);
        }
        let out = self.b.app(out, dir);
        Ok(self.b.let_(xn, at, out))
    }

    /// D-Vec-Deriv: `deriv e (x : Vector)` in vector forward mode, the
    /// same value as D-Deriv-Vector from one run of the translation:
    ///
    /// ```text
    /// let z = build (length x) (fun _ -> 0.0) in
    /// let d = build (if 0 < length x then 1 else 0) (fun _ ->
    ///           let v₁ = V[v₁] in … let vₙ = V[vₙ] in D_V[[e]]) in
    /// build (length x) (fun r -> C_r[d[0]])
    /// ```
    ///
    /// V[x] seeds element i with the i-th unit vector, V[v] is v with the
    /// zero vector `z` as every tangent, and C_r picks direction r out of
    /// every tangent vector. `d` has one element, or none when `x` is
    /// empty, so that the translation runs exactly when D-Deriv-Vector
    /// runs D[[e]] at least once.
    fn deriv_vector(
        &mut self,
        fvs: &[(Name, Type)],
        wrt: &Name,
        body: ExprId,
    ) -> Result<ExprId, AdError> {
        let vt = Type::array(Type::Double);
        let z = self.b.fresh("z");
        let inner =
            self.with_inputs(fvs, wrt, Some(&z), &mut |b, x| unit_vectors(b, x, &z), body)?;
        let result_ty = self.b.ty(body);
        let d = self.b.fresh("d");
        let xv = self.b.var(wrt, vt.clone());
        let n = self.b.length(xv);
        let zero = self.b.index(0);
        let xv = self.b.var(wrt, vt);
        let len = self.b.length(xv);
        let nonempty = self.b.prim(Prim::Lt, vec![zero, len], Type::Bool);
        let one = self.b.index(1);
        let zero = self.b.index(0);
        let runs = self.b.if_(nonempty, one, zero);
        let once = self.b.build(runs, |_, _| inner);
        let out = self.b.build(n, |b, r| {
            let dv = b.var(&d, Type::array(result_ty.vdual()));
            let zero = b.index(0);
            let d0 = b.get(dv, zero);
            direction(b, d0, &result_ty, r)
        });
        let out = self.b.let_(d, once, out);
        Ok(self.with_zero_vector(z, wrt, out))
    }

    /// `let z = build (length x) (fun _ -> 0.0) in out`: the zero tangent
    /// vector of D-Vec-Deriv and D-Vec-Rows for the variable `x = wrt`.
    fn with_zero_vector(&mut self, z: Name, wrt: &Name, out: ExprId) -> ExprId {
        let xv = self.b.var(wrt, Type::array(Type::Double));
        let n = self.b.length(xv);
        let zeros = self.b.build(n, |b, _| b.double(0.0));
        self.b.let_(z, zeros, out)
    }

    /// D-Vec-Rows: the Jacobian of `e` with respect to `x : Vector` as
    /// rows, from one run of D_V[[e]]:
    ///
    /// ```text
    /// let z = build (length x) (fun _ -> 0.0) in
    /// let v₁ = V[v₁] in … let vₙ = V[vₙ] in T[D_V[[e]]]
    /// ```
    ///
    /// where T replaces every Double's vector dual by its tangent vector
    /// (`snd`), so a Double becomes its gradient and a Vector result the
    /// Jacobian's rows, with no transposition (D-Vec-Deriv's C_r). Unlike
    /// D-Vec-Deriv it runs D_V[[e]] also when `x` is empty.
    fn deriv_rows(
        &mut self,
        fvs: &[(Name, Type)],
        wrt: &Name,
        body: ExprId,
    ) -> Result<ExprId, AdError> {
        let z = self.b.fresh("z");
        let inner =
            self.with_inputs(fvs, wrt, Some(&z), &mut |b, x| unit_vectors(b, x, &z), body)?;
        let result_ty = self.b.ty(body);
        let out = map_doubles(self.b, inner, &result_ty, &Type::vdual, &mut |b, d| {
            b.snd(d)
        });
        Ok(self.with_zero_vector(z, wrt, out))
    }

    /// `let v₁ = A[v₁] in … let vₙ = A[vₙ] in D[[body]]`, with `seed`
    /// giving A[x] for the independent variable and zero tangents for the
    /// others; in vector mode (`zero`, the zero tangent vector) D_V[[body]]
    /// with the zero vector as every other tangent.
    fn with_inputs(
        &mut self,
        fvs: &[(Name, Type)],
        wrt: &Name,
        zero: Option<&Name>,
        seed: &mut dyn FnMut(&mut Builder<'_>, &Name) -> ExprId,
        body: ExprId,
    ) -> Result<ExprId, AdError> {
        let mut fwd = Forward {
            b: self.b,
            duals: self.duals,
            vduals: self.vduals,
            locals: fvs.iter().map(|(n, _)| n.clone()).collect(),
            zero: zero.cloned(),
        };
        let mut out = fwd.d(body)?;
        for (n, t) in fvs.iter().rev() {
            let v = if n == wrt {
                seed(self.b, n)
            } else if let Some(z) = zero {
                let var = self.b.var(n, t.clone());
                zero_dual_of(self.b, var, t, Some(z))
            } else {
                zero_dual(self.b, n, t)
            };
            out = self.b.let_(n.clone(), v, out);
        }
        Ok(out)
    }
}

/// V[x] = `build (length x) (fun i -> (x[i], build (length z) (fun j -> if
/// i = j then 1.0 else 0.0)))`: element `i` seeded with the `i`-th unit
/// vector (D-Vec-Deriv, D-Vec-Rows).
fn unit_vectors(b: &mut Builder<'_>, x: &Name, z: &Name) -> ExprId {
    let xv = b.var(x, Type::array(Type::Double));
    let len = b.length(xv);
    b.build(len, |b, i| {
        let xv = b.var(x, Type::array(Type::Double));
        let iv = b.var(i, Type::Index);
        let p = b.get(xv, iv);
        let zv = b.var(z, Type::array(Type::Double));
        let k = b.length(zv);
        let hot = b.build(k, |b, j| {
            let iv = b.var(i, Type::Index);
            let jv = b.var(j, Type::Index);
            let eq = b.prim(Prim::Eq, vec![iv, jv], Type::Bool);
            let one = b.double(1.0);
            let zero = b.double(0.0);
            b.if_(eq, one, zero)
        });
        b.pair(p, hot)
    })
}

/// `(x[i…], if i… = r… then 1.0 else 0.0)`: one element of a one-hot
/// tangent.
fn hot_element(b: &mut Builder<'_>, x: &Name, idx: &[Name], at: &[Name]) -> ExprId {
    let xt = (0..idx.len()).fold(Type::Double, |t, _| Type::array(t));
    let mut v = b.var(x, xt);
    for i in idx {
        let iv = b.var(i, Type::Index);
        v = b.get(v, iv);
    }
    let mut cond: Option<ExprId> = None;
    for (i, r) in idx.iter().zip(at) {
        let iv = b.var(i, Type::Index);
        let rv = b.var(r, Type::Index);
        let eq = b.prim(Prim::Eq, vec![iv, rv], Type::Bool);
        cond = Some(match cond {
            None => eq,
            Some(c) => {
                let f = b.add(Expr::Lit(crate::ir::Lit::Bool(false)), Type::Bool);
                b.if_(c, eq, f)
            }
        });
    }
    let one = b.double(1.0);
    let zero = b.double(0.0);
    let t = b.if_(cond.expect("at least one index"), one, zero);
    b.pair(v, t)
}

/// The components of a right-nested tuple type `(T₁, (T₂, … Tₖ))`.
fn tuple_spine(t: &Type) -> Vec<Type> {
    match t {
        Type::Pair(a, b) => std::iter::once((**a).clone())
            .chain(tuple_spine(b))
            .collect(),
        other => vec![other.clone()],
    }
}

/// `(e₁, (e₂, … eₖ))`.
fn right_nested(b: &mut Builder<'_>, mut parts: Vec<ExprId>) -> ExprId {
    let last = parts.pop().expect("at least one component");
    parts.into_iter().rev().fold(last, |acc, e| b.pair(e, acc))
}

/// P[v, t]: the dual form of `v : ty` whose tangents are the Doubles at
/// the same places of `t : ty` (D-Jvp). Reading past the end of a shorter
/// tangent array is ⊥ (E-Get-Bot).
fn zip_dual(b: &mut Builder<'_>, v: ExprId, t: ExprId, ty: &Type) -> ExprId {
    if ty.dual() == *ty {
        return v;
    }
    match ty {
        Type::Double => b.pair(v, t),
        Type::Array(el) => {
            let (vn, tn) = (b.fresh("a"), b.fresh("t"));
            let va = b.var(&vn, ty.clone());
            let n = b.length(va);
            let built = b.build(n, |b, j| {
                let va = b.var(&vn, ty.clone());
                let jv = b.var(j, Type::Index);
                let x = b.get(va, jv);
                let ta = b.var(&tn, ty.clone());
                let jv = b.var(j, Type::Index);
                let y = b.get(ta, jv);
                zip_dual(b, x, y, el)
            });
            let e = b.let_(tn, t, built);
            b.let_(vn, v, e)
        }
        Type::Pair(x, y) => {
            let (vn, tn) = (b.fresh("p"), b.fresh("t"));
            let side = |b: &mut Builder<'_>, first: bool, st: &Type| {
                let pv = b.var(&vn, ty.clone());
                let tv = b.var(&tn, ty.clone());
                let (a, c) = if first {
                    (b.fst(pv), b.fst(tv))
                } else {
                    (b.snd(pv), b.snd(tv))
                };
                zip_dual(b, a, c, st)
            };
            let l = side(b, true, x);
            let r = side(b, false, y);
            let pair = b.pair(l, r);
            let e = b.let_(tn, t, pair);
            b.let_(vn, v, e)
        }
        _ => unreachable!("types without Doubles returned above"),
    }
}

/// A[v] for a variable that is not the independent one: its dual form
/// with every tangent zero.
fn zero_dual(b: &mut Builder<'_>, v: &Name, t: &Type) -> ExprId {
    let var = b.var(v, t.clone());
    zero_dual_of(b, var, t, None)
}

/// C_r[e]: the scalar dual form DT[[T]] of direction `r` of the vector-mode
/// dual `e : VT[[T]]` — each tangent vector replaced by its element `r`.
fn direction(b: &mut Builder<'_>, e: ExprId, t: &Type, r: &Name) -> ExprId {
    map_doubles(b, e, t, &Type::vdual, &mut |b, d| {
        let tmp = b.fresh("p");
        let p = b.var(&tmp, Type::Double.vdual());
        let primal = b.fst(p);
        let p = b.var(&tmp, Type::Double.vdual());
        let ts = b.snd(p);
        let rv = b.var(r, Type::Index);
        let tangent = b.get(ts, rv);
        let pair = b.pair(primal, tangent);
        b.let_(tmp, d, pair)
    })
}

/// Z_T[e]; in vector mode (`zero`, the zero vector) every Double's tangent
/// is that vector (spec/ad-forward.md §4.6).
fn zero_dual_of(b: &mut Builder<'_>, e: ExprId, t: &Type, zero: Option<&Name>) -> ExprId {
    map_doubles(b, e, t, &Type::clone, &mut |b, x| {
        let z = match zero {
            None => b.double(0.0),
            Some(z) => b.var(z, Type::array(Type::Double)),
        };
        b.pair(x, z)
    })
}

/// `e`, a value of type `repr(t)` for the data type `t`, rebuilt with
/// `leaf` applied to the value of each Double of `t`; parts of `t` without
/// Doubles are kept as they are.
fn map_doubles(
    b: &mut Builder<'_>,
    e: ExprId,
    t: &Type,
    repr: &dyn Fn(&Type) -> Type,
    leaf: &mut dyn FnMut(&mut Builder<'_>, ExprId) -> ExprId,
) -> ExprId {
    if t.dual() == *t {
        return e;
    }
    match t {
        Type::Double => leaf(b, e),
        Type::Array(el) => {
            let tmp = b.fresh("a");
            let arr = b.var(&tmp, repr(t));
            let n = b.length(arr);
            let built = b.build(n, |b, j| {
                let arr = b.var(&tmp, repr(t));
                let jv = b.var(j, Type::Index);
                let x = b.get(arr, jv);
                map_doubles(b, x, el, repr, leaf)
            });
            b.let_(tmp, e, built)
        }
        Type::Pair(x, y) => {
            let tmp = b.fresh("p");
            let p1 = b.var(&tmp, repr(t));
            let f = b.fst(p1);
            let fx = map_doubles(b, f, x, repr, leaf);
            let p2 = b.var(&tmp, repr(t));
            let s = b.snd(p2);
            let sy = map_doubles(b, s, y, repr, leaf);
            let pair = b.pair(fx, sy);
            b.let_(tmp, e, pair)
        }
        _ => unreachable!("only data types have tangents; Double, Index, Bool handled"),
    }
}
