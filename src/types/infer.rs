//! Hindley–Milner inference over the core IR with numeric and data
//! constraints on type variables. Rule names refer to spec/types.md.

use std::collections::HashMap;
use std::rc::Rc;

use super::TypeError;
use crate::diagnostic::Span;
use crate::ir::prim::{T, TyVar};
use crate::ir::{DiffOp, Expr, ExprId, Lit, Prim, Program, Type};

/// Internal types: [`Type`] plus unification variables.
#[derive(Clone, Debug)]
pub(crate) enum Ty {
    Double,
    Index,
    Bool,
    Array(Rc<Ty>),
    Pair(Rc<Ty>, Rc<Ty>),
    Fun(Rc<Ty>, Rc<Ty>),
    Var(u32),
}

impl Ty {
    fn array(t: Ty) -> Ty {
        Ty::Array(Rc::new(t))
    }
    fn pair(a: Ty, b: Ty) -> Ty {
        Ty::Pair(Rc::new(a), Rc::new(b))
    }
    fn fun(a: Ty, b: Ty) -> Ty {
        Ty::Fun(Rc::new(a), Rc::new(b))
    }
    pub(crate) fn from_type(t: &Type) -> Ty {
        match t {
            Type::Double => Ty::Double,
            Type::Index => Ty::Index,
            Type::Bool => Ty::Bool,
            Type::Array(e) => Ty::array(Ty::from_type(e)),
            Type::Pair(a, b) => Ty::pair(Ty::from_type(a), Ty::from_type(b)),
            Type::Fun(a, b) => Ty::fun(Ty::from_type(a), Ty::from_type(b)),
        }
    }
}

#[derive(Clone, Debug)]
struct VarInfo {
    link: Option<Ty>,
    num: bool,
    /// Set when the variable must be a data type; says where it is stored.
    data: Option<&'static str>,
}

/// A generalised type: `vars` are quantified (T-Def).
#[derive(Clone, Debug)]
pub struct Scheme {
    pub(crate) vars: Vec<u32>,
    pub(crate) ty: Ty,
}

/// The result of inference over a whole program.
#[derive(Clone)]
pub struct Typing {
    vars: Vec<VarInfo>,
    /// The type of every expression (indexed by `ExprId`), unresolved.
    types: Vec<Option<Ty>>,
    /// Per definition (same order as `Program::defs`).
    pub(crate) schemes: Vec<Scheme>,
    /// For every `Var` that names a definition: which one, and the types its
    /// scheme's variables were instantiated with.
    pub(crate) insts: HashMap<ExprId, (usize, Vec<Ty>)>,
}

pub fn infer_program(prog: &Program) -> Result<Typing, TypeError> {
    let t = Typing {
        vars: Vec::new(),
        types: Vec::new(),
        schemes: Vec::new(),
        insts: HashMap::new(),
    };
    infer_defs(prog, t)
}

/// Infers the definitions of `prog` after those `base` typed, in the
/// environment of their schemes (T-Def): a definition appended to a typed
/// program (a generated wrapper) costs its own inference, not the whole
/// program's again. `prog` must extend the program `base` typed: the same
/// definitions and nodes first, new ones after. The result is the typing a
/// whole-program inference gives, type variables numbered alike.
pub fn infer_appended(prog: &Program, base: &Typing) -> Result<Typing, TypeError> {
    infer_defs(prog, base.clone())
}

/// T-Def for every definition of `prog` from the first that `t` has no
/// scheme for.
fn infer_defs(prog: &Program, mut t: Typing) -> Result<Typing, TypeError> {
    let done = t.schemes.len();
    t.types.resize(prog.exprs.len(), None);
    let mut inf = Infer {
        prog,
        t,
        locals: Vec::new(),
        globals: prog.defs[..done.min(prog.defs.len())]
            .iter()
            .enumerate()
            .map(|(i, d)| (d.name.to_string(), i))
            .collect(),
        current: None,
        pending: Vec::new(),
    };
    for (i, d) in prog.defs.iter().enumerate().skip(done) {
        inf.current = Some(d.name.to_string());
        let ty = inf.expr(d.body)?; // T-Def
        inf.solve_derivs()?;
        if let Some(t) = &d.ann {
            // T-Ann
            inf.expect(
                &Ty::from_type(t),
                &ty,
                prog.span(d.body),
                " for the annotated definition",
            )?;
        }
        let scheme = inf.generalise(d.body, ty);
        inf.t.schemes.push(scheme);
        inf.globals.insert(d.name.to_string(), i);
    }
    Ok(inf.t)
}

impl Typing {
    pub(crate) fn resolve(&self, t: &Ty) -> Ty {
        match t {
            Ty::Var(v) => match &self.vars[*v as usize].link {
                Some(l) => self.resolve(l),
                None => t.clone(),
            },
            Ty::Array(e) => Ty::array(self.resolve(e)),
            Ty::Pair(a, b) => Ty::pair(self.resolve(a), self.resolve(b)),
            Ty::Fun(a, b) => Ty::fun(self.resolve(a), self.resolve(b)),
            _ => t.clone(),
        }
    }

    /// The ground type of `t` after substituting `map` for quantified
    /// variables and defaulting the rest to Double, memoised per variable
    /// in `cache` (valid for one `map`): linear in the size of the types,
    /// however often a large type is shared.
    pub(crate) fn ground_memo(
        &self,
        t: &Ty,
        map: &HashMap<u32, Ty>,
        cache: &mut HashMap<u32, Type>,
    ) -> Type {
        match t {
            Ty::Double => Type::Double,
            Ty::Index => Type::Index,
            Ty::Bool => Type::Bool,
            Ty::Array(e) => Type::array(self.ground_memo(e, map, cache)),
            Ty::Pair(a, b) => Type::pair(
                self.ground_memo(a, map, cache),
                self.ground_memo(b, map, cache),
            ),
            Ty::Fun(a, b) => Type::fun(
                self.ground_memo(a, map, cache),
                self.ground_memo(b, map, cache),
            ),
            Ty::Var(v) => {
                if let Some(g) = cache.get(v) {
                    return g.clone();
                }
                let g = match (&self.vars[*v as usize].link, map.get(v)) {
                    (Some(l), _) => self.ground_memo(&l.clone(), map, cache),
                    (None, Some(m)) => self.ground_memo(&m.clone(), map, cache),
                    (None, None) => Type::Double,
                };
                cache.insert(*v, g.clone());
                g
            }
        }
    }

    /// The resolved type of an expression (with variables left as is).
    pub(crate) fn ty_of(&self, e: ExprId) -> Option<Ty> {
        self.types
            .get(e.as_u32() as usize)
            .and_then(|t| t.as_ref())
            .map(|t| self.resolve(t))
    }

    /// The type recorded for an expression, unresolved (cheap).
    pub(crate) fn raw_ty(&self, e: ExprId) -> Option<Ty> {
        self.types.get(e.as_u32() as usize).and_then(|t| t.clone())
    }

    /// The ground type of an expression, if it has one.
    pub fn expr_type(&self, e: ExprId) -> Option<Type> {
        self.ty_of(e).and_then(|t| ground(&t))
    }

    /// The type of definition `i` as a string with `'a`-style variables.
    pub fn scheme_string(&self, i: usize) -> String {
        let s = &self.schemes[i];
        let ty = self.resolve(&s.ty);
        let mut names = Vec::new();
        let body = self.show(&ty, &mut names);
        // A data constraint is implied for variables inside an array or a
        // tuple; state it only for the others.
        let mut inside = Vec::new();
        vars_inside_data(&ty, false, &mut inside);
        let mut cs: Vec<String> = Vec::new();
        for (v, n) in &names {
            let info = &self.vars[*v as usize];
            if info.num {
                cs.push(format!("num {n}"));
            } else if info.data.is_some() && !inside.contains(v) {
                cs.push(format!("data {n}"));
            }
        }
        if cs.is_empty() {
            body
        } else {
            format!("{body} where {}", cs.join(", "))
        }
    }

    /// The type of definition `i` with every type variable replaced by
    /// `pick(var, numeric, data)`; a variable is asked for once (the rule
    /// checker instantiates rule patterns at random ground types with it).
    pub fn def_type_with(&self, i: usize, pick: &mut dyn FnMut(u32, bool, bool) -> Type) -> Type {
        fn go(
            t: &Ty,
            vars: &[VarInfo],
            seen: &mut HashMap<u32, Type>,
            pick: &mut dyn FnMut(u32, bool, bool) -> Type,
        ) -> Type {
            match t {
                Ty::Double => Type::Double,
                Ty::Index => Type::Index,
                Ty::Bool => Type::Bool,
                Ty::Array(e) => Type::array(go(e, vars, seen, pick)),
                Ty::Pair(a, b) => Type::pair(go(a, vars, seen, pick), go(b, vars, seen, pick)),
                Ty::Fun(a, b) => Type::fun(go(a, vars, seen, pick), go(b, vars, seen, pick)),
                Ty::Var(v) => {
                    if let Some(g) = seen.get(v) {
                        return g.clone();
                    }
                    let info = &vars[*v as usize];
                    let g = pick(*v, info.num, info.data.is_some());
                    seen.insert(*v, g.clone());
                    g
                }
            }
        }
        let ty = self.resolve(&self.schemes[i].ty);
        go(&ty, &self.vars, &mut HashMap::new(), pick)
    }

    /// The ground type of definition `i` (None when it is polymorphic).
    pub fn def_type(&self, i: usize) -> Option<Type> {
        ground(&self.resolve(&self.schemes[i].ty))
    }

    fn show(&self, t: &Ty, names: &mut Vec<(u32, String)>) -> String {
        let t = self.resolve(t);
        fn go(t: &Ty, prec: u8, names: &mut Vec<(u32, String)>) -> String {
            match t {
                Ty::Double => "Double".into(),
                Ty::Index => "Index".into(),
                Ty::Bool => "Bool".into(),
                Ty::Var(v) => {
                    if let Some((_, n)) = names.iter().find(|(w, _)| w == v) {
                        return n.clone();
                    }
                    let i = names.len();
                    let letter = (b'a' + (i % 26) as u8) as char;
                    let n = if i < 26 {
                        format!("'{letter}")
                    } else {
                        format!("'{letter}{}", i / 26)
                    };
                    names.push((*v, n.clone()));
                    n
                }
                Ty::Array(e) => format!("Array<{}>", go(e, 0, names)),
                Ty::Pair(a, b) => {
                    let s = format!("{} * {}", go(a, 2, names), go(b, 1, names));
                    if prec > 1 { format!("({s})") } else { s }
                }
                Ty::Fun(a, b) => {
                    let s = format!("{} -> {}", go(a, 1, names), go(b, 0, names));
                    if prec > 0 { format!("({s})") } else { s }
                }
            }
        }
        go(&t, 0, names)
    }

    pub(crate) fn show1(&self, t: &Ty) -> String {
        self.show(t, &mut Vec::new())
    }
}

pub(crate) fn ground(t: &Ty) -> Option<Type> {
    Some(match t {
        Ty::Double => Type::Double,
        Ty::Index => Type::Index,
        Ty::Bool => Type::Bool,
        Ty::Array(e) => Type::array(ground(e)?),
        Ty::Pair(a, b) => Type::pair(ground(a)?, ground(b)?),
        Ty::Fun(a, b) => Type::fun(ground(a)?, ground(b)?),
        Ty::Var(_) => return None,
    })
}

struct Infer<'p> {
    prog: &'p Program,
    t: Typing,
    locals: Vec<(Rc<str>, Ty)>,
    globals: HashMap<String, usize>,
    current: Option<String>,
    /// `deriv` results whose type waits for the body's type (T-Deriv).
    pending: Vec<PendingDeriv>,
}

struct PendingDeriv {
    result: Ty,
    wrt: Ty,
    wrt_name: String,
    body: Ty,
    span: Span,
}

/// Why two types failed to unify.
enum UErr {
    Mismatch,
    NotNumeric(Ty),
    FunctionAsData(Ty, &'static str),
    Infinite(u32, Ty),
}

impl Infer<'_> {
    fn fresh(&mut self) -> Ty {
        self.t.vars.push(VarInfo {
            link: None,
            num: false,
            data: None,
        });
        Ty::Var(self.t.vars.len() as u32 - 1)
    }

    fn fresh_num(&mut self) -> Ty {
        let v = self.fresh();
        if let Ty::Var(i) = v {
            self.t.vars[i as usize].num = true;
            self.t.vars[i as usize].data = Some("numbers");
        }
        v
    }

    fn fresh_data(&mut self, place: &'static str) -> Ty {
        let v = self.fresh();
        if let Ty::Var(i) = v {
            self.t.vars[i as usize].data = Some(place);
        }
        v
    }

    fn shallow(&self, t: &Ty) -> Ty {
        let mut t = t.clone();
        while let Ty::Var(v) = t {
            match &self.t.vars[v as usize].link {
                Some(l) => t = l.clone(),
                None => break,
            }
        }
        t
    }

    fn occurs(&self, v: u32, t: &Ty) -> bool {
        match self.shallow(t) {
            Ty::Var(w) => v == w,
            Ty::Array(e) => self.occurs(v, &e),
            Ty::Pair(a, b) | Ty::Fun(a, b) => self.occurs(v, &a) || self.occurs(v, &b),
            _ => false,
        }
    }

    fn require_num(&mut self, t: &Ty) -> Result<(), UErr> {
        match self.shallow(t) {
            Ty::Double | Ty::Index => Ok(()),
            Ty::Var(v) => {
                self.t.vars[v as usize].num = true;
                self.t.vars[v as usize].data.get_or_insert("numbers");
                Ok(())
            }
            other => Err(UErr::NotNumeric(other)),
        }
    }

    fn require_data(&mut self, t: &Ty, place: &'static str) -> Result<(), UErr> {
        match self.shallow(t) {
            Ty::Double | Ty::Index | Ty::Bool => Ok(()),
            Ty::Var(v) => {
                self.t.vars[v as usize].data.get_or_insert(place);
                Ok(())
            }
            Ty::Array(e) => self.require_data(&e, place),
            Ty::Pair(a, b) => {
                self.require_data(&a, place)?;
                self.require_data(&b, place)
            }
            f @ Ty::Fun(..) => Err(UErr::FunctionAsData(f, place)),
        }
    }

    fn bind(&mut self, v: u32, t: Ty) -> Result<(), UErr> {
        if let Ty::Var(w) = t {
            if v == w {
                return Ok(());
            }
            let (num, data) = {
                let i = &self.t.vars[v as usize];
                (i.num, i.data)
            };
            let j = &mut self.t.vars[w as usize];
            j.num |= num;
            if j.data.is_none() {
                j.data = data;
            }
            self.t.vars[v as usize].link = Some(t);
            return Ok(());
        }
        if self.occurs(v, &t) {
            return Err(UErr::Infinite(v, t));
        }
        let info = self.t.vars[v as usize].clone();
        if info.num {
            self.require_num(&t)?;
        }
        if let Some(place) = info.data {
            self.require_data(&t, place)?;
        }
        self.t.vars[v as usize].link = Some(t);
        Ok(())
    }

    fn unify(&mut self, a: &Ty, b: &Ty) -> Result<(), UErr> {
        let (a, b) = (self.shallow(a), self.shallow(b));
        match (&a, &b) {
            (Ty::Var(v), _) => self.bind(*v, b),
            (_, Ty::Var(w)) => self.bind(*w, a),
            (Ty::Double, Ty::Double) | (Ty::Index, Ty::Index) | (Ty::Bool, Ty::Bool) => Ok(()),
            (Ty::Array(x), Ty::Array(y)) => self.unify(x, y),
            (Ty::Pair(a1, b1), Ty::Pair(a2, b2)) | (Ty::Fun(a1, b1), Ty::Fun(a2, b2)) => {
                self.unify(a1, a2)?;
                self.unify(b1, b2)
            }
            _ => Err(UErr::Mismatch),
        }
    }

    /// Unifies `found` (the type of the expression at `span`) with
    /// `expected`, turning a failure into a [`TypeError`].
    fn expect(
        &mut self,
        expected: &Ty,
        found: &Ty,
        span: Span,
        context: &str,
    ) -> Result<(), TypeError> {
        match self.unify(expected, found) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.uerr(e, expected, found, span, context)),
        }
    }

    fn uerr(&self, e: UErr, expected: &Ty, found: &Ty, span: Span, context: &str) -> TypeError {
        match e {
            UErr::Mismatch => {
                let (ex, fo) = (self.t.resolve(expected), self.t.resolve(found));
                let missing_args = matches!(ex, Ty::Fun(..)) != matches!(fo, Ty::Fun(..));
                let mut names = Vec::new();
                let expected = self.t.show(&ex, &mut names);
                let found = self.t.show(&fo, &mut names);
                TypeError::Mismatch {
                    expected,
                    found,
                    context: context.to_string(),
                    span,
                    missing_args,
                }
            }
            UErr::NotNumeric(t) => TypeError::NotNumeric {
                ty: self.t.show1(&t),
                span,
            },
            UErr::FunctionAsData(t, place) => TypeError::FunctionAsData {
                ty: self.t.show1(&t),
                place,
                span,
            },
            UErr::Infinite(v, t) => {
                let mut names = Vec::new();
                let var = self.t.show(&Ty::Var(v), &mut names);
                let ty = self.t.show(&t, &mut names);
                TypeError::Infinite { var, ty, span }
            }
        }
    }

    fn data(&mut self, t: &Ty, place: &'static str, span: Span) -> Result<(), TypeError> {
        self.require_data(t, place)
            .map_err(|e| self.uerr(e, t, t, span, ""))
    }

    /// T-Deriv, second half: at the end of a definition, the types of
    /// `deriv`'s body and variable are known (remaining variables default
    /// to Double), so the result type DT[...] can be fixed.
    fn solve_derivs(&mut self) -> Result<(), TypeError> {
        for p in std::mem::take(&mut self.pending) {
            for t in [&p.wrt, &p.body] {
                let mut fv = Vec::new();
                free_vars(&self.t.resolve(t), &mut fv);
                for v in fv {
                    self.t.vars[v as usize].link = Some(Ty::Double);
                }
            }
            let wrt = ground(&self.t.resolve(&p.wrt)).expect("defaulted");
            let body = ground(&self.t.resolve(&p.body)).expect("defaulted");
            if !body.is_data() {
                return Err(TypeError::DerivOfFunction {
                    ty: body.to_string(),
                    span: p.span,
                });
            }
            let Some(result) = body.deriv_result(&wrt) else {
                return Err(TypeError::BadWrt {
                    name: p.wrt_name,
                    ty: wrt.to_string(),
                    span: p.span,
                });
            };
            self.expect(
                &p.result,
                &Ty::from_type(&result),
                p.span,
                " (the result of `deriv`)",
            )?;
        }
        Ok(())
    }

    fn instantiate(&mut self, s: &Scheme) -> (Ty, Vec<Ty>) {
        let mut map = HashMap::new();
        let mut args = Vec::new();
        for v in &s.vars {
            let info = self.t.vars[*v as usize].clone();
            let f = self.fresh();
            if let Ty::Var(i) = f {
                self.t.vars[i as usize].num = info.num;
                self.t.vars[i as usize].data = info.data;
            }
            map.insert(*v, f.clone());
            args.push(f);
        }
        (subst(&s.ty, &map, &self.t), args)
    }

    /// T-Def: quantifies the variables of the definition's type; every other
    /// variable left in the body is defaulted to Double (the numeric
    /// default, and a harmless choice for an unused unconstrained one).
    fn generalise(&mut self, body: ExprId, ty: Ty) -> Scheme {
        let ty = self.t.resolve(&ty);
        let mut vars = Vec::new();
        free_vars(&ty, &mut vars);
        let mut work = vec![body];
        while let Some(e) = work.pop() {
            if let Some(t) = self.t.types[e.as_u32() as usize].clone() {
                let mut fv = Vec::new();
                free_vars(&self.t.resolve(&t), &mut fv);
                for v in fv {
                    if !vars.contains(&v) {
                        self.t.vars[v as usize].link = Some(Ty::Double);
                    }
                }
            }
            work.extend(self.prog.expr(e).children());
        }
        Scheme { vars, ty }
    }

    fn expr(&mut self, e: ExprId) -> Result<Ty, TypeError> {
        let ty = self.expr_inner(e)?;
        self.t.types[e.as_u32() as usize] = Some(ty.clone());
        Ok(ty)
    }

    fn expr_inner(&mut self, e: ExprId) -> Result<Ty, TypeError> {
        let span = self.prog.span(e);
        match self.prog.expr(e) {
            Expr::Var(x) => {
                // T-Var
                if let Some((_, t)) = self.locals.iter().rev().find(|(n, _)| n == x) {
                    return Ok(t.clone());
                }
                // T-Global
                if let Some(&i) = self.globals.get(&**x) {
                    let s = self.t.schemes[i].clone();
                    let (t, args) = self.instantiate(&s);
                    self.t.insts.insert(e, (i, args));
                    return Ok(t);
                }
                Err(TypeError::Unbound {
                    name: x.to_string(),
                    span,
                    recursive: self.current.as_deref() == Some(&**x),
                })
            }
            Expr::Lit(Lit::Int(_)) => Ok(self.fresh_num()), // T-Lit-Int
            Expr::Lit(Lit::Double(_)) => Ok(Ty::Double),    // T-Lit-Double
            Expr::Lit(Lit::Bool(_)) => Ok(Ty::Bool),        // T-Lit-Bool
            Expr::Lam { param, ann, body } => {
                // T-Abs (with T-Ann when annotated)
                let p = match ann {
                    Some(t) => Ty::from_type(t),
                    None => self.fresh(),
                };
                self.locals.push((param.clone(), p.clone()));
                let b = self.expr(*body);
                self.locals.pop();
                Ok(Ty::fun(p, b?))
            }
            Expr::App { fun, arg } => {
                // T-App
                let tf = self.expr(*fun)?;
                let ta = self.expr(*arg)?;
                let (a, r) = match self.shallow(&tf) {
                    Ty::Fun(a, r) => ((*a).clone(), (*r).clone()),
                    Ty::Var(_) => {
                        let (a, r) = (self.fresh(), self.fresh());
                        self.expect(&Ty::fun(a.clone(), r.clone()), &tf, span, "")?;
                        (a, r)
                    }
                    other => {
                        return Err(TypeError::NotAFunction {
                            ty: self.t.show1(&other),
                            span: self.prog.span(*fun),
                        });
                    }
                };
                self.expect(&a, &ta, self.prog.span(*arg), " in this argument")?;
                Ok(r)
            }
            Expr::Let {
                name,
                ann,
                value,
                body,
            } => {
                // T-Let (monomorphic; with T-Ann when annotated)
                let tv = self.expr(*value)?;
                if let Some(t) = ann {
                    self.expect(
                        &Ty::from_type(t),
                        &tv,
                        self.prog.span(*value),
                        " for the annotated binding",
                    )?;
                }
                self.locals.push((name.clone(), tv));
                let b = self.expr(*body);
                self.locals.pop();
                b
            }
            Expr::If { cond, then_, else_ } => {
                // T-If
                let tc = self.expr(*cond)?;
                self.expect(
                    &Ty::Bool,
                    &tc,
                    self.prog.span(*cond),
                    " in the condition of `if`",
                )?;
                let t1 = self.expr(*then_)?;
                let t2 = self.expr(*else_)?;
                self.expect(
                    &t1,
                    &t2,
                    self.prog.span(*else_),
                    " (the `else` branch must have the type of the `then` branch)",
                )?;
                self.data(&t1, "`if` branches", span)?;
                Ok(t1)
            }
            Expr::Array(items) => {
                // T-Array
                let el = self.fresh_data("arrays");
                for i in items.iter() {
                    let ti = self.expr(*i)?;
                    self.expect(
                        &el,
                        &ti,
                        self.prog.span(*i),
                        " (array elements must all have one type)",
                    )?;
                }
                Ok(Ty::array(el))
            }
            Expr::Diff { op, fun, at, dir } => {
                // T-Jvp: f : A -> B, x : A, t : A ⊢ jvp f x t : B * B;
                // T-Vjp: f : A -> B, x : A, w : B ⊢ vjp f x w : B * A;
                // A and B data types.
                let ctx = format!(" (the argument of `{}`)", op.name());
                let a = self.fresh_data("the argument of a differentiated function");
                let r = self.fresh_data("the result of a differentiated function");
                let tf = self.expr(*fun)?;
                self.expect(
                    &Ty::fun(a.clone(), r.clone()),
                    &tf,
                    self.prog.span(*fun),
                    &format!(" (the function `{}` differentiates)", op.name()),
                )?;
                let tx = self.expr(*at)?;
                self.expect(&a, &tx, self.prog.span(*at), &ctx)?;
                let td = self.expr(*dir)?;
                let (want, ctx, result) = match op {
                    DiffOp::Jvp => (
                        a,
                        " (the tangent must have the argument's type)",
                        Ty::pair(r.clone(), r),
                    ),
                    DiffOp::Vjp => (
                        r.clone(),
                        " (the cotangent must have the result's type)",
                        Ty::pair(r, a),
                    ),
                };
                self.expect(&want, &td, self.prog.span(*dir), ctx)?;
                Ok(result)
            }
            Expr::Deriv { body, wrt } => {
                // T-Deriv (first half; see solve_derivs)
                let tb = self.expr(*body)?;
                let Some((_, tx)) = self.locals.iter().rev().find(|(n, _)| n == wrt) else {
                    return Err(TypeError::Unbound {
                        name: wrt.to_string(),
                        span,
                        recursive: false,
                    });
                };
                let tx = tx.clone();
                let result = self.fresh();
                self.pending.push(PendingDeriv {
                    result: result.clone(),
                    wrt: tx,
                    wrt_name: wrt.to_string(),
                    body: tb,
                    span,
                });
                Ok(result)
            }
            Expr::Prim { op, args } => {
                let (params, result) = self.prim_sig(*op);
                for (k, (a, p)) in args.iter().zip(&params).enumerate() {
                    let ta = self.expr(*a)?;
                    let ctx = if op.is_infix() {
                        format!(" in an operand of `{}`", op.name())
                    } else {
                        format!(" in argument {} of `{}`", k + 1, op.name())
                    };
                    self.expect(p, &ta, self.prog.span(*a), &ctx)?;
                }
                Ok(result)
            }
        }
    }

    /// The signature of a primitive (spec/types.md, rules T-Arith to
    /// T-Snd; the rule is the table's `typing.rule`): the table's `Sig`
    /// with its variables made fresh, in order.
    fn prim_sig(&mut self, op: Prim) -> (Vec<Ty>, Ty) {
        let sig = &op.info().typing.sig;
        let vars: Vec<Ty> = sig
            .vars
            .iter()
            .map(|v| match v {
                TyVar::Num => self.fresh_num(),
                TyVar::Data(place) => self.fresh_data(place),
            })
            .collect();
        let params = sig.params.iter().map(|t| sig_ty(t, &vars)).collect();
        (params, sig_ty(&sig.result, &vars))
    }
}

/// A type of a signature, its variables being `vars`.
fn sig_ty(t: &T, vars: &[Ty]) -> Ty {
    match t {
        T::Double => Ty::Double,
        T::Index => Ty::Index,
        T::Bool => Ty::Bool,
        T::Var(k) => vars[*k].clone(),
        T::Array(e) => Ty::array(sig_ty(e, vars)),
        T::Pair(a, b) => Ty::pair(sig_ty(a, vars), sig_ty(b, vars)),
        T::Fun(a, b) => Ty::fun(sig_ty(a, vars), sig_ty(b, vars)),
    }
}

/// Variables occurring inside an array or tuple type.
fn vars_inside_data(t: &Ty, under: bool, out: &mut Vec<u32>) {
    match t {
        Ty::Var(v) if under => out.push(*v),
        Ty::Var(_) | Ty::Double | Ty::Index | Ty::Bool => {}
        Ty::Array(e) => vars_inside_data(e, true, out),
        Ty::Pair(a, b) => {
            vars_inside_data(a, true, out);
            vars_inside_data(b, true, out);
        }
        Ty::Fun(a, b) => {
            vars_inside_data(a, under, out);
            vars_inside_data(b, under, out);
        }
    }
}

fn free_vars(t: &Ty, out: &mut Vec<u32>) {
    match t {
        Ty::Var(v) if !out.contains(v) => out.push(*v),
        Ty::Array(e) => free_vars(e, out),
        Ty::Pair(a, b) | Ty::Fun(a, b) => {
            free_vars(a, out);
            free_vars(b, out);
        }
        _ => {}
    }
}

pub(crate) fn subst(t: &Ty, map: &HashMap<u32, Ty>, typing: &Typing) -> Ty {
    match typing.resolve(t) {
        Ty::Var(v) => map.get(&v).cloned().unwrap_or(Ty::Var(v)),
        Ty::Array(e) => Ty::array(subst(&e, map, typing)),
        Ty::Pair(a, b) => Ty::pair(subst(&a, map, typing), subst(&b, map, typing)),
        Ty::Fun(a, b) => Ty::fun(subst(&a, map, typing), subst(&b, map, typing)),
        other => other,
    }
}
