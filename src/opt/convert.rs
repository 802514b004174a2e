//! Conversion between the core IR and egg's `RecExpr<Fsm>`. Going in, the
//! size of every loop is recorded against its index symbol (for the
//! `in-bounds` condition). Coming out, the extracted term is a tree (a
//! shared node is copied); the pipeline re-normalises it, which binds
//! repeated subterms to `let`s again (common-subexpression elimination
//! per scope).

use rustc_hash::FxHashMap as HashMap;
use std::rc::Rc;

use egg::{Id, RecExpr, Symbol};

use super::lang::{Dbl, Fsm};
use crate::diagnostic::Span;
use crate::ir::{Expr, ExprId, Lit, Prim, Program};

/// `e` as a RecExpr, and each loop index symbol's size (as RecExpr ids).
pub fn to_recexpr(prog: &Program, e: ExprId) -> (RecExpr<Fsm>, HashMap<Symbol, Id>) {
    let mut out = Nodes::default();
    let mut bounds = HashMap::default();
    let mut lets = Vec::new();
    let root = go(prog, e, &mut out, &mut bounds, &mut lets);
    // The root must be the last node.
    let mut nodes = out.nodes;
    let root_node = nodes[usize::from(root)].clone();
    if usize::from(root) + 1 != nodes.len() {
        nodes.push(root_node);
    }
    (RecExpr::from(nodes), bounds)
}

/// A RecExpr under construction: `RecExpr::add` costs O(n) per node in
/// egg 0.11 (it recomputes the root), so nodes are collected first. Each
/// distinct node is added once (the result is a DAG, as egg expects).
#[derive(Default)]
struct Nodes {
    nodes: Vec<Fsm>,
    memo: HashMap<Fsm, Id>,
}

impl Nodes {
    fn add(&mut self, n: Fsm) -> Id {
        if let Some(id) = self.memo.get(&n) {
            return *id;
        }
        let id = Id::from(self.nodes.len());
        self.nodes.push(n.clone());
        self.memo.insert(n, id);
        id
    }
}

/// A loop size with the `let`-bound variables it mentions replaced by
/// their definitions, so that equal sizes meet in the e-graph whatever
/// names they went through (`length x` with `x = build n f` is `n`).
fn inlined(prog: &Program, e: ExprId, lets: &[(Rc<str>, ExprId)], out: &mut Nodes) -> Id {
    let mut b = HashMap::default();
    match prog.expr(e) {
        Expr::Var(x) => match lets.iter().rposition(|(n, _)| n == x) {
            Some(k) => inlined(prog, lets[k].1, &lets[..k], out),
            None => go(prog, e, out, &mut b, &mut Vec::new()),
        },
        Expr::Prim { op, args }
            if matches!(
                op,
                Prim::Length | Prim::Get | Prim::Add | Prim::Sub | Prim::Mul
            ) =>
        {
            let ids: Vec<Id> = args.iter().map(|a| inlined(prog, *a, lets, out)).collect();
            out.add(match op {
                Prim::Length => Fsm::Length([ids[0]]),
                Prim::Get => Fsm::Get([ids[0], ids[1]]),
                Prim::Add => Fsm::Add([ids[0], ids[1]]),
                Prim::Sub => Fsm::Sub([ids[0], ids[1]]),
                _ => Fsm::Mul([ids[0], ids[1]]),
            })
        }
        _ => go(prog, e, out, &mut b, &mut Vec::new()),
    }
}

fn sym(out: &mut Nodes, name: &str) -> Id {
    out.add(Fsm::Symbol(Symbol::from(name)))
}

fn go(
    prog: &Program,
    e: ExprId,
    out: &mut Nodes,
    bounds: &mut HashMap<Symbol, Id>,
    lets: &mut Vec<(Rc<str>, ExprId)>,
) -> Id {
    match prog.expr(e) {
        Expr::Var(x) => {
            let s = sym(out, x);
            out.add(Fsm::Var(s))
        }
        Expr::Lit(Lit::Double(x)) => out.add(Fsm::Double(Dbl::new(*x))),
        Expr::Lit(Lit::Int(i)) => out.add(Fsm::Int(*i)),
        Expr::Lit(Lit::Bool(b)) => out.add(Fsm::Bool(*b)),
        Expr::Lam { param, body, .. } => {
            let s = sym(out, param);
            let b = go(prog, *body, out, bounds, lets);
            out.add(Fsm::Lam([s, b]))
        }
        Expr::App { fun, arg } => {
            let f = go(prog, *fun, out, bounds, lets);
            let a = go(prog, *arg, out, bounds, lets);
            out.add(Fsm::App([f, a]))
        }
        Expr::Let {
            name, value, body, ..
        } => {
            let s = sym(out, name);
            let v = go(prog, *value, out, bounds, lets);
            lets.push((name.clone(), *value));
            let b = go(prog, *body, out, bounds, lets);
            lets.pop();
            out.add(Fsm::Let([s, v, b]))
        }
        Expr::If { cond, then_, else_ } => {
            let c = go(prog, *cond, out, bounds, lets);
            let t = go(prog, *then_, out, bounds, lets);
            let f = go(prog, *else_, out, bounds, lets);
            out.add(Fsm::If([c, t, f]))
        }
        Expr::Array(items) => {
            let ids: Vec<Id> = items
                .iter()
                .map(|i| go(prog, *i, out, bounds, lets))
                .collect();
            out.add(Fsm::Array(ids.into()))
        }
        Expr::Deriv { .. } => unreachable!("deriv is expanded before optimisation"),
        Expr::Prim { op, args } => {
            let ids: Vec<Id> = args
                .iter()
                .map(|a| go(prog, *a, out, bounds, lets))
                .collect();
            // The index of a loop ranges over [0, n).
            let index_of = |f: ExprId, depth: usize| -> Option<Rc<str>> {
                let mut cur = f;
                let mut name = None;
                for _ in 0..depth {
                    match prog.expr(cur) {
                        Expr::Lam { param, body, .. } => {
                            name = Some(param.clone());
                            cur = *body;
                        }
                        _ => return None,
                    }
                }
                name
            };
            match op {
                Prim::Build => {
                    if let Some(i) = index_of(args[1], 1) {
                        let n = inlined(prog, args[0], lets, out);
                        bounds.insert(Symbol::from(&*i), n);
                    }
                }
                Prim::IFold | Prim::IScan => {
                    if let Some(i) = index_of(args[0], 2) {
                        let n = inlined(prog, args[2], lets, out);
                        bounds.insert(Symbol::from(&*i), n);
                    }
                }
                _ => {}
            }
            let n = |k: usize| ids[k];
            out.add(match op {
                Prim::Add => Fsm::Add([n(0), n(1)]),
                Prim::Sub => Fsm::Sub([n(0), n(1)]),
                Prim::Mul => Fsm::Mul([n(0), n(1)]),
                Prim::Div => Fsm::Div([n(0), n(1)]),
                Prim::Pow => Fsm::Pow([n(0), n(1)]),
                Prim::Neg => Fsm::Neg([n(0)]),
                Prim::Lt => Fsm::Lt([n(0), n(1)]),
                Prim::Gt => Fsm::Gt([n(0), n(1)]),
                Prim::Le => Fsm::Le([n(0), n(1)]),
                Prim::Ge => Fsm::Ge([n(0), n(1)]),
                Prim::Eq => Fsm::Eq([n(0), n(1)]),
                Prim::Ne => Fsm::Ne([n(0), n(1)]),
                Prim::Not => Fsm::Not([n(0)]),
                Prim::Sin => Fsm::Sin([n(0)]),
                Prim::Cos => Fsm::Cos([n(0)]),
                Prim::Tan => Fsm::Tan([n(0)]),
                Prim::Log => Fsm::Log([n(0)]),
                Prim::Exp => Fsm::Exp([n(0)]),
                Prim::Sqrt => Fsm::Sqrt([n(0)]),
                Prim::ToDouble => Fsm::ToDouble([n(0)]),
                Prim::Build => Fsm::Build([n(0), n(1)]),
                Prim::IFold => Fsm::IFold([n(0), n(1), n(2)]),
                Prim::IScan => Fsm::IScan([n(0), n(1), n(2)]),
                Prim::Concat => Fsm::Concat([n(0)]),
                Prim::Accum => Fsm::Accum([n(0), n(1), n(2)]),
                Prim::AddAt => Fsm::AddAt([n(0), n(1), n(2)]),
                Prim::Get => Fsm::Get([n(0), n(1)]),
                Prim::Length => Fsm::Length([n(0)]),
                Prim::Pair => Fsm::Pair([n(0), n(1)]),
                Prim::Fst => Fsm::Fst([n(0)]),
                Prim::Snd => Fsm::Snd([n(0)]),
            })
        }
    }
}

/// A RecExpr back as IR nodes of `prog` (as a tree).
pub fn from_recexpr(expr: &RecExpr<Fsm>, prog: &mut Program) -> ExprId {
    let root = Id::from(expr.as_ref().len() - 1);
    back(expr, root, prog)
}

fn name_of(expr: &RecExpr<Fsm>, id: Id) -> Rc<str> {
    match &expr[id] {
        Fsm::Symbol(s) => Rc::from(s.as_str()),
        other => Rc::from(other.to_string()),
    }
}

fn back(expr: &RecExpr<Fsm>, id: Id, prog: &mut Program) -> ExprId {
    let span = Span::generated();
    let p = |op: Prim, ids: &[Id], prog: &mut Program| {
        let args: Vec<ExprId> = ids.iter().map(|c| back(expr, *c, prog)).collect();
        prog.add(
            Expr::Prim {
                op,
                args: args.into(),
            },
            span,
        )
    };
    match &expr[id] {
        Fsm::Var(s) => prog.add(Expr::Var(name_of(expr, *s)), span),
        Fsm::Symbol(s) => prog.add(Expr::Var(Rc::from(s.as_str())), span),
        Fsm::Double(d) => prog.add(Expr::Lit(Lit::Double(d.get())), span),
        Fsm::Int(i) => prog.add(Expr::Lit(Lit::Int(*i)), span),
        Fsm::Bool(b) => prog.add(Expr::Lit(Lit::Bool(*b)), span),
        Fsm::Lam([x, b]) => {
            let body = back(expr, *b, prog);
            prog.add(
                Expr::Lam {
                    param: name_of(expr, *x),
                    ann: None,
                    body,
                },
                span,
            )
        }
        Fsm::Let([x, v, b]) => {
            let value = back(expr, *v, prog);
            let body = back(expr, *b, prog);
            prog.add(
                Expr::Let {
                    name: name_of(expr, *x),
                    ann: None,
                    value,
                    body,
                },
                span,
            )
        }
        Fsm::App([f, a]) => {
            let fun = back(expr, *f, prog);
            let arg = back(expr, *a, prog);
            prog.add(Expr::App { fun, arg }, span)
        }
        Fsm::If([c, t, f]) => {
            let cond = back(expr, *c, prog);
            let then_ = back(expr, *t, prog);
            let else_ = back(expr, *f, prog);
            prog.add(Expr::If { cond, then_, else_ }, span)
        }
        Fsm::Array(ids) => {
            let items: Vec<ExprId> = ids.iter().map(|c| back(expr, *c, prog)).collect();
            prog.add(Expr::Array(items.into()), span)
        }
        Fsm::Add(c) => p(Prim::Add, c, prog),
        Fsm::Sub(c) => p(Prim::Sub, c, prog),
        Fsm::Mul(c) => p(Prim::Mul, c, prog),
        Fsm::Div(c) => p(Prim::Div, c, prog),
        Fsm::Pow(c) => p(Prim::Pow, c, prog),
        Fsm::Neg(c) => p(Prim::Neg, c, prog),
        Fsm::Lt(c) => p(Prim::Lt, c, prog),
        Fsm::Gt(c) => p(Prim::Gt, c, prog),
        Fsm::Le(c) => p(Prim::Le, c, prog),
        Fsm::Ge(c) => p(Prim::Ge, c, prog),
        Fsm::Eq(c) => p(Prim::Eq, c, prog),
        Fsm::Ne(c) => p(Prim::Ne, c, prog),
        Fsm::Not(c) => p(Prim::Not, c, prog),
        Fsm::Sin(c) => p(Prim::Sin, c, prog),
        Fsm::Cos(c) => p(Prim::Cos, c, prog),
        Fsm::Tan(c) => p(Prim::Tan, c, prog),
        Fsm::Log(c) => p(Prim::Log, c, prog),
        Fsm::Exp(c) => p(Prim::Exp, c, prog),
        Fsm::Sqrt(c) => p(Prim::Sqrt, c, prog),
        Fsm::ToDouble(c) => p(Prim::ToDouble, c, prog),
        Fsm::Build(c) => p(Prim::Build, c, prog),
        Fsm::IFold(c) => p(Prim::IFold, c, prog),
        Fsm::IScan(c) => p(Prim::IScan, c, prog),
        Fsm::Concat(c) => p(Prim::Concat, c, prog),
        Fsm::Accum(c) => p(Prim::Accum, c, prog),
        Fsm::AddAt(c) => p(Prim::AddAt, c, prog),
        Fsm::Get(c) => p(Prim::Get, c, prog),
        Fsm::Length(c) => p(Prim::Length, c, prog),
        Fsm::Pair(c) => p(Prim::Pair, c, prog),
        Fsm::Fst(c) => p(Prim::Fst, c, prog),
        Fsm::Snd(c) => p(Prim::Snd, c, prog),
    }
}
