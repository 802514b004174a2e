//! A small builder for typed IR, used by the passes that generate code
//! (forward and reverse mode, the normal form's conversion back to IR,
//! the tape oracle): every node it creates gets a ground type in the
//! pass's type table and the span of the source the pass is translating
//! (`Builder::at`; generated when none is known), so that a ⊥ in derived
//! code points at the user's operation it came from; fresh names avoid
//! every name already in the program.

use std::collections::HashSet;
use std::rc::Rc;

use cranelift_entity::SecondaryMap;

use crate::diagnostic::Span;
use crate::ir::{Expr, ExprId, Lit, Name, Prim, Program, Type};

pub struct Builder<'a> {
    pub prog: &'a mut Program,
    pub types: &'a mut SecondaryMap<ExprId, Option<Type>>,
    names: HashSet<Name>,
    counter: u32,
    /// The span new nodes get: the source they derive from.
    span: Span,
    /// The source spans of the normal form's bindings being translated
    /// (`anf::Normal::spans`), for [`Builder::at_binding`].
    binding_spans: std::collections::HashMap<Name, Span>,
}

impl<'a> Builder<'a> {
    pub fn new(prog: &'a mut Program, types: &'a mut SecondaryMap<ExprId, Option<Type>>) -> Self {
        let mut names = HashSet::new();
        for e in prog.exprs.values() {
            match e {
                Expr::Var(x) | Expr::Lam { param: x, .. } | Expr::Let { name: x, .. } => {
                    names.insert(x.clone());
                }
                Expr::Deriv { wrt, .. } => {
                    names.insert(wrt.clone());
                }
                _ => {}
            }
        }
        for d in &prog.defs {
            names.insert(d.name.clone());
        }
        Builder {
            prog,
            types,
            names,
            counter: 0,
            span: Span::generated(),
            binding_spans: std::collections::HashMap::new(),
        }
    }

    /// The source spans of the bindings of the normal form this builder
    /// translates.
    pub fn with_binding_spans(&mut self, spans: &std::collections::HashMap<Name, Span>) {
        self.binding_spans.clone_from(spans);
    }

    /// [`Builder::at`] the span of the normal form's binding `name`, if it
    /// has one (else the current span stays).
    pub fn at_binding(&mut self, name: &Name) -> Span {
        self.at(self.binding_span(name))
    }

    /// The span the nodes built now are given.
    pub fn span(&self) -> Span {
        self.span
    }

    /// The source span of the normal form's binding `name` (generated if
    /// it has none).
    pub fn binding_span(&self, name: &Name) -> Span {
        self.binding_spans
            .get(name)
            .copied()
            .unwrap_or(Span::generated())
    }

    /// Gives the nodes built from now on `span` (the source they derive
    /// from; kept when `span` is generated) and returns the previous one,
    /// to restore.
    pub fn at(&mut self, span: Span) -> Span {
        let was = self.span;
        if span != Span::generated() {
            self.span = span;
        }
        was
    }

    /// Gives the nodes built from now on `span`, generated or not (a
    /// restore of [`Builder::at`]).
    pub fn restore(&mut self, span: Span) {
        self.span = span;
    }

    /// A name not used anywhere in the program: `base'N`.
    pub fn fresh(&mut self, base: &str) -> Name {
        loop {
            self.counter += 1;
            let n: Name = Rc::from(format!("{base}'{}", self.counter));
            if self.names.insert(n.clone()) {
                return n;
            }
        }
    }

    /// Reserves an exact name (for derived definitions like `f'D`) or, if
    /// taken, a fresh variant of it.
    pub fn reserve(&mut self, name: &str) -> Name {
        let n: Name = Rc::from(name);
        if self.names.insert(n.clone()) {
            n
        } else {
            self.fresh(name)
        }
    }

    pub fn ty(&self, e: ExprId) -> Type {
        self.types[e].clone().expect("every node has a ground type")
    }

    pub fn add(&mut self, e: Expr, ty: Type) -> ExprId {
        let id = self.prog.add(e, self.span);
        self.types[id] = Some(ty);
        id
    }

    pub fn var(&mut self, name: &Name, ty: Type) -> ExprId {
        self.add(Expr::Var(name.clone()), ty)
    }

    pub fn double(&mut self, x: f64) -> ExprId {
        self.add(Expr::Lit(Lit::Double(x)), Type::Double)
    }

    pub fn index(&mut self, i: i64) -> ExprId {
        self.add(Expr::Lit(Lit::Int(i)), Type::Index)
    }

    pub fn prim(&mut self, op: Prim, args: Vec<ExprId>, ty: Type) -> ExprId {
        self.add(
            Expr::Prim {
                op,
                args: args.into(),
            },
            ty,
        )
    }

    /// A Double-valued primitive.
    pub fn dop(&mut self, op: Prim, args: Vec<ExprId>) -> ExprId {
        self.prim(op, args, Type::Double)
    }

    pub fn pair(&mut self, a: ExprId, b: ExprId) -> ExprId {
        let t = Type::pair(self.ty(a), self.ty(b));
        self.prim(Prim::Pair, vec![a, b], t)
    }

    pub fn fst(&mut self, p: ExprId) -> ExprId {
        let Type::Pair(a, _) = self.ty(p) else {
            unreachable!("fst of a non-pair")
        };
        self.prim(Prim::Fst, vec![p], (*a).clone())
    }

    pub fn snd(&mut self, p: ExprId) -> ExprId {
        let Type::Pair(_, b) = self.ty(p) else {
            unreachable!("snd of a non-pair")
        };
        self.prim(Prim::Snd, vec![p], (*b).clone())
    }

    pub fn get(&mut self, a: ExprId, i: ExprId) -> ExprId {
        let Type::Array(t) = self.ty(a) else {
            unreachable!("get of a non-array")
        };
        self.prim(Prim::Get, vec![a, i], (*t).clone())
    }

    pub fn length(&mut self, a: ExprId) -> ExprId {
        self.prim(Prim::Length, vec![a], Type::Index)
    }

    pub fn lam(&mut self, param: Name, param_ty: Type, body: ExprId) -> ExprId {
        let t = Type::fun(param_ty, self.ty(body));
        self.add(
            Expr::Lam {
                param,
                ann: None,
                body,
            },
            t,
        )
    }

    pub fn app(&mut self, f: ExprId, a: ExprId) -> ExprId {
        let Type::Fun(_, r) = self.ty(f) else {
            unreachable!("application of a non-function")
        };
        self.add(Expr::App { fun: f, arg: a }, (*r).clone())
    }

    pub fn let_(&mut self, name: Name, value: ExprId, body: ExprId) -> ExprId {
        let t = self.ty(body);
        self.add(
            Expr::Let {
                name,
                ann: None,
                value,
                body,
            },
            t,
        )
    }

    pub fn if_(&mut self, c: ExprId, a: ExprId, b: ExprId) -> ExprId {
        let t = self.ty(a);
        self.add(
            Expr::If {
                cond: c,
                then_: a,
                else_: b,
            },
            t,
        )
    }

    /// `build n (fun i -> body i)`.
    pub fn build(&mut self, n: ExprId, f: impl FnOnce(&mut Self, &Name) -> ExprId) -> ExprId {
        let i = self.fresh("i");
        let body = f(self, &i);
        let et = self.ty(body);
        let lam = self.lam(i, Type::Index, body);
        self.prim(Prim::Build, vec![n, lam], Type::array(et))
    }
}
