//! Conversion between the core IR and egg's `RecExpr<Fsm>`. Going in, the
//! size of every loop is recorded against its index symbol (for the
//! `in-bounds` condition). Coming out, the extracted term is a tree (a
//! shared node is copied); the pipeline re-normalises it, which binds
//! repeated subterms to `let`s again (common-subexpression elimination
//! per scope).

use rustc_hash::FxHashMap as HashMap;
use std::rc::Rc;

use egg::{Id, Language, RecExpr, Symbol};

use super::lang::{Dbl, Fsm, node_prim, prim_node};
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
            out.add(prim_node(*op, ids))
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
        Expr::Deriv { .. } | Expr::Diff { .. } => {
            unreachable!("deriv, jvp and vjp are expanded before optimisation")
        }
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
            out.add(prim_node(*op, ids))
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
        node => match node_prim(node) {
            Some(op) => p(op, node.children(), prog),
            None => unreachable!("every operator of the language is a construct or a primitive"),
        },
    }
}
