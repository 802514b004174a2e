//! Substitution of `let`-bound values before each phase (the inlining step
//! that opens Fig. 9): a binding is substituted into its uses when it is
//! used once, when its value is cheap (a variable, a literal, `length`,
//! `fst`, `snd` or `get` of cheap operands), or when it is a pull array
//! (`build`) used only by `get` and `length`, which is what loop fusion
//! needs. This keeps the e-graph from pushing `let`s through whole terms.
//! Repeated subterms are bound to `let`s again by the final
//! re-normalisation. The input is in normal form, where every name is
//! bound once, so substitution cannot capture.

use std::collections::HashMap;
use std::rc::Rc;

use crate::ir::{Expr, ExprId, Prim, Program};

/// How a variable is used in a term.
#[derive(Default, Clone, Copy)]
struct Uses {
    count: usize,
    /// Every use is the array of a `get` or the argument of `length`.
    only_pull: bool,
    /// Every use is under `fst` or `snd`: after substitution, fission and
    /// tuple partial evaluation drop the half that is not needed.
    only_proj: bool,
}

fn count(prog: &Program, e: ExprId, uses: &mut HashMap<Rc<str>, Uses>, pull: bool, proj: bool) {
    match prog.expr(e) {
        Expr::Var(x) => {
            let u = uses.entry(x.clone()).or_insert(Uses {
                count: 0,
                only_pull: true,
                only_proj: true,
            });
            u.count += 1;
            u.only_pull &= pull;
            u.only_proj &= proj;
        }
        Expr::Prim {
            op: Prim::Get | Prim::Length,
            args,
        } => {
            count(prog, args[0], uses, true, false);
            for a in &args[1..] {
                count(prog, *a, uses, false, false);
            }
        }
        Expr::Prim {
            op: Prim::Fst | Prim::Snd,
            args,
        } => count(prog, args[0], uses, false, true),
        other => {
            for c in other.children() {
                count(prog, c, uses, false, false);
            }
        }
    }
}

/// `e` with the bindings described above substituted.
pub fn inline_lets(prog: &mut Program, e: ExprId) -> ExprId {
    let mut uses = HashMap::new();
    count(prog, e, &mut uses, false, false);
    let mut env: HashMap<Rc<str>, ExprId> = HashMap::new();
    subst(prog, e, &uses, &mut env, true)
}

/// Only single-use and cheap bindings substituted (no work is duplicated):
/// what remains bound is shared.
pub fn inline_single_uses(prog: &mut Program, e: ExprId) -> ExprId {
    let mut uses = HashMap::new();
    count(prog, e, &mut uses, false, false);
    let mut env: HashMap<Rc<str>, ExprId> = HashMap::new();
    subst(prog, e, &uses, &mut env, false)
}

fn subst(
    prog: &mut Program,
    e: ExprId,
    uses: &HashMap<Rc<str>, Uses>,
    env: &mut HashMap<Rc<str>, ExprId>,
    fusion: bool,
) -> ExprId {
    let span = prog.span(e);
    let node = prog.expr(e).clone();
    match node {
        Expr::Var(x) => match env.get(&x) {
            Some(v) => copy(prog, *v),
            None => e,
        },
        Expr::Let {
            name,
            ann,
            value,
            body,
        } => {
            let v = subst(prog, value, uses, env, fusion);
            let u = uses.get(&name).copied().unwrap_or_default();
            let atomic = cheap(prog, v);
            let pull = matches!(
                prog.expr(v),
                Expr::Prim {
                    op: Prim::Build,
                    ..
                }
            ) && u.only_pull;
            // Copying a large value into many uses could grow the term
            // exponentially (builds of builds): a budget bounds the copies.
            let affordable = u.count <= 1 || size(prog, v, BUDGET) * u.count <= BUDGET;
            if u.count <= 1 || atomic || (fusion && (pull || u.only_proj) && affordable) {
                env.insert(name.clone(), v);
                let b = subst(prog, body, uses, env, fusion);
                env.remove(&name);
                if u.count == 0 {
                    // Dead: keep it (its removal is the optimiser's choice).
                    return prog.add(
                        Expr::Let {
                            name,
                            ann,
                            value: v,
                            body: b,
                        },
                        span,
                    );
                }
                b
            } else {
                let b = subst(prog, body, uses, env, fusion);
                prog.add(
                    Expr::Let {
                        name,
                        ann,
                        value: v,
                        body: b,
                    },
                    span,
                )
            }
        }
        other => {
            let kids = other.children();
            let new: Vec<ExprId> = kids
                .iter()
                .map(|k| subst(prog, *k, uses, env, fusion))
                .collect();
            if new == kids {
                return e;
            }
            let rebuilt = other.with_children(&new);
            prog.add(rebuilt, span)
        }
    }
}

/// Cheap enough to compute at every use: variables, literals, and
/// `length`, `fst`, `snd`, `get`, `toDouble` of cheap operands.
fn cheap(prog: &Program, e: ExprId) -> bool {
    match prog.expr(e) {
        Expr::Var(_) | Expr::Lit(_) => true,
        Expr::Prim {
            op: Prim::Length | Prim::Fst | Prim::Snd | Prim::Get | Prim::ToDouble,
            args,
        } => args.iter().all(|a| cheap(prog, *a)),
        _ => false,
    }
}

/// Nodes a binding may copy into its uses, in all.
const BUDGET: usize = 4_000;

/// The number of nodes of `e`, counting up to `cap`.
fn size(prog: &Program, e: ExprId, cap: usize) -> usize {
    let mut n = 0;
    let mut work = vec![e];
    while let Some(x) = work.pop() {
        n += 1;
        if n > cap {
            return n;
        }
        work.extend(prog.expr(x).children());
    }
    n
}

/// A fresh copy of a subtree (so no node has two parents).
fn copy(prog: &mut Program, e: ExprId) -> ExprId {
    let span = prog.span(e);
    let node = prog.expr(e).clone();
    let kids = node.children();
    if kids.is_empty() {
        return prog.add(node, span);
    }
    let new: Vec<ExprId> = kids.iter().map(|k| copy(prog, *k)).collect();
    let rebuilt = node.with_children(&new);
    prog.add(rebuilt, span)
}
