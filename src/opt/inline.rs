//! Substitution of `let`-bound values before each phase (the inlining step
//! that opens Fig. 9; spec/rules-format.md §9.1). A binding is substituted
//! into its uses when its value is cheap (a variable, a literal, `length`,
//! `fst`, `snd`, `get`, `toDouble` or a pair of cheap operands); when it is
//! used once and not inside a loop body (the function of a `build` or an
//! `ifold`, where one use is one evaluation per iteration); when every use
//! is under a projection, outside loop bodies (fission then drops the half
//! not needed); or when it is a pull array (`build`) used only by `get`
//! and `length` — a small one always, a larger one only if each element is
//! read about once (one read, not at a quotient index such as `k / 2`, at
//! most as many loops deep as the array has dimensions, counted through
//! `let`s of cheap values only: any other `let` between the builds is
//! work shared by a row). That is what loop fusion needs without moving
//! work into loops. A projection of a substituted pair is reduced (`fst-pair`,
//! `snd-pair` left to right). This keeps the e-graph from pushing `let`s
//! through whole terms. Repeated subterms are bound to `let`s again by the
//! final re-normalisation. Every name is made to be bound once first
//! (`uniquify`: the input is in normal form, but extraction copies
//! binders), so substitution cannot capture.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::rc::Rc;

use crate::ir::{Expr, ExprId, Prim, Program};

/// How a variable is used in a term.
#[derive(Default, Clone, Copy)]
struct Uses {
    count: usize,
    /// Every use is the array of a `get` or the argument of `length`.
    only_pull: bool,
    /// Uses as the array of a `get` (`length` reads no element).
    reads: usize,
    /// Every use is under `fst` or `snd`: after substitution, fission and
    /// tuple partial evaluation drop the half that is not needed.
    only_proj: bool,
    /// The most loop bodies (functions, a curried `fun a i ->` counting
    /// once) between the binding and a use. A use under one loop body is
    /// one evaluation per iteration: substituting an expensive value there
    /// moves work into the loop (O(n) → O(n²)).
    depth: usize,
}

/// What `count` tracks on the way down: the loop depth of each `let`
/// binder seen (names are unique in normal form) and the current depth.
struct Scope {
    depth: usize,
    bound_at: HashMap<Rc<str>, usize>,
    /// `get`s whose element is not read: measured by `length`, or the
    /// array of an enclosing `get`.
    measured: HashSet<ExprId>,
    /// Names bound to a quotient `a / b`: a read `x[q]` at such an index
    /// reads each element for several iterations (`ps[k / 2]` in a loop
    /// over k reads every element twice).
    quotients: HashSet<Rc<str>>,
}

/// Whether some index of the read chain `x[i][j]…` at `e` is a quotient.
fn strided(prog: &Program, mut e: ExprId, scope: &Scope) -> bool {
    while let Expr::Prim {
        op: Prim::Get,
        args,
    } = prog.expr(e)
    {
        let quotient = match prog.expr(args[1]) {
            Expr::Prim { op: Prim::Div, .. } => true,
            Expr::Var(q) => scope.quotients.contains(q),
            _ => false,
        };
        if quotient {
            return true;
        }
        e = args[0];
    }
    false
}

/// The variable at the root of `x[i][j]…` (or `x` itself).
fn chain_root(prog: &Program, mut e: ExprId) -> Option<Rc<str>> {
    loop {
        match prog.expr(e) {
            Expr::Var(x) => return Some(x.clone()),
            Expr::Prim {
                op: Prim::Get,
                args,
            } => e = args[0],
            _ => return None,
        }
    }
}

fn count(
    prog: &Program,
    e: ExprId,
    uses: &mut HashMap<Rc<str>, Uses>,
    scope: &mut Scope,
    pull: bool,
    proj: bool,
) {
    match prog.expr(e) {
        Expr::Var(x) => {
            let u = uses.entry(x.clone()).or_insert(Uses {
                count: 0,
                only_pull: true,
                only_proj: true,
                reads: 0,
                depth: 0,
            });
            u.count += 1;
            u.only_pull &= pull;
            u.only_proj &= proj;
            if let Some(d) = scope.bound_at.get(x) {
                u.depth = u.depth.max(scope.depth - d);
            }
        }
        Expr::Let {
            name, value, body, ..
        } => {
            count(prog, *value, uses, scope, false, false);
            if let Expr::Prim { op: Prim::Div, .. } = prog.expr(*value) {
                scope.quotients.insert(name.clone());
            }
            scope.bound_at.insert(name.clone(), scope.depth);
            count(prog, *body, uses, scope, false, false);
        }
        Expr::Lam { body, .. } => {
            let mut body = *body;
            while let Expr::Lam { body: inner, .. } = prog.expr(body) {
                body = *inner;
            }
            scope.depth += 1;
            count(prog, body, uses, scope, false, false);
            scope.depth -= 1;
        }
        Expr::Prim {
            op: op @ (Prim::Get | Prim::Length),
            args,
        } => {
            // The array of a `get` or `length` is not read for its elements.
            scope.measured.insert(args[0]);
            count(prog, args[0], uses, scope, true, false);
            // An element read: the outermost `get` of a chain `x[i][j]…`
            // that is not only measured by `length`.
            if op == &Prim::Get
                && !scope.measured.contains(&e)
                && let Some(x) = chain_root(prog, args[0])
            {
                // A read at a quotient index counts as several.
                let n = if strided(prog, e, scope) { 2 } else { 1 };
                if let Some(u) = uses.get_mut(&x) {
                    u.reads += n;
                }
            }

            for a in &args[1..] {
                count(prog, *a, uses, scope, false, false);
            }
        }
        Expr::Prim {
            op: Prim::Fst | Prim::Snd,
            args,
        } => count(prog, args[0], uses, scope, false, true),
        other => {
            for c in other.children() {
                count(prog, c, uses, scope, false, false);
            }
        }
    }
}

fn uses_of(prog: &Program, e: ExprId) -> HashMap<Rc<str>, Uses> {
    let mut uses = HashMap::default();
    let mut scope = Scope {
        depth: 0,
        bound_at: HashMap::default(),
        measured: HashSet::default(),
        quotients: HashSet::default(),
    };
    count(prog, e, &mut uses, &mut scope, false, false);
    uses
}

/// `e` with every binder that repeats a name bound or free elsewhere in
/// `e` renamed (`x'uK`, a name that occurs nowhere in the program), so that each
/// name is bound once. Extraction copies subterms with their binders and
/// may nest two binders of one name; the use counts and the substitution
/// below, and the loop sizes of the next e-graph (keyed by index name,
/// spec/rules-format.md §6), assume unique names. A term that already has
/// them is returned unchanged.
pub fn uniquify(prog: &mut Program, e: ExprId) -> ExprId {
    // Every name of the arena (a superset of `e`'s): new names avoid them.
    let mut taken: HashSet<Rc<str>> = prog.all_names().into_iter().collect();
    let mut bound: HashSet<Rc<str>> = HashSet::default();
    free_vars(prog, e, &mut Vec::new(), &mut bound);
    let mut env: HashMap<Rc<str>, Rc<str>> = HashMap::default();
    rename(prog, e, &mut env, &mut bound, &mut taken)
}

/// The free variables of `e` (`scope`: the binders around it).
fn free_vars(prog: &Program, e: ExprId, scope: &mut Vec<Rc<str>>, out: &mut HashSet<Rc<str>>) {
    match prog.expr(e) {
        Expr::Var(v) => {
            if !scope.contains(v) {
                out.insert(v.clone());
            }
        }
        Expr::Lam { param, body, .. } => {
            scope.push(param.clone());
            free_vars(prog, *body, scope, out);
            scope.pop();
        }
        Expr::Let {
            name, value, body, ..
        } => {
            free_vars(prog, *value, scope, out);
            scope.push(name.clone());
            free_vars(prog, *body, scope, out);
            scope.pop();
        }
        other => {
            for c in other.children() {
                free_vars(prog, c, scope, out);
            }
        }
    }
}

/// A binder's name: its own if no binder (or free variable) had it yet,
/// else a new one.
fn binder_name(x: &Rc<str>, bound: &mut HashSet<Rc<str>>, taken: &mut HashSet<Rc<str>>) -> Rc<str> {
    let name = if bound.contains(x) {
        let mut k = 0;
        loop {
            let n: Rc<str> = format!("{x}'u{k}").into();
            if !taken.contains(&n) {
                break n;
            }
            k += 1;
        }
    } else {
        x.clone()
    };
    bound.insert(name.clone());
    taken.insert(name.clone());
    name
}

fn rename(
    prog: &mut Program,
    e: ExprId,
    env: &mut HashMap<Rc<str>, Rc<str>>,
    bound: &mut HashSet<Rc<str>>,
    taken: &mut HashSet<Rc<str>>,
) -> ExprId {
    let span = prog.span(e);
    match prog.expr(e).clone() {
        Expr::Var(x) => match env.get(&x) {
            Some(n) if *n != x => prog.add(Expr::Var(n.clone()), span),
            _ => e,
        },
        Expr::Lam { param, ann, body } => {
            let new = binder_name(&param, bound, taken);
            let saved = env.insert(param.clone(), new.clone());
            let b = rename(prog, body, env, bound, taken);
            restore(env, &param, saved);
            if new == param && b == body {
                return e;
            }
            prog.add(
                Expr::Lam {
                    param: new,
                    ann,
                    body: b,
                },
                span,
            )
        }
        Expr::Let {
            name,
            ann,
            value,
            body,
        } => {
            let v = rename(prog, value, env, bound, taken);
            let new = binder_name(&name, bound, taken);
            let saved = env.insert(name.clone(), new.clone());
            let b = rename(prog, body, env, bound, taken);
            restore(env, &name, saved);
            if new == name && v == value && b == body {
                return e;
            }
            prog.add(
                Expr::Let {
                    name: new,
                    ann,
                    value: v,
                    body: b,
                },
                span,
            )
        }
        other => {
            let kids = other.children();
            let new: Vec<ExprId> = kids
                .iter()
                .map(|k| rename(prog, *k, env, bound, taken))
                .collect();
            if new == kids {
                return e;
            }
            let rebuilt = other.with_children(&new);
            prog.add(rebuilt, span)
        }
    }
}

fn restore(env: &mut HashMap<Rc<str>, Rc<str>>, x: &Rc<str>, saved: Option<Rc<str>>) {
    match saved {
        Some(s) => {
            env.insert(x.clone(), s);
        }
        None => {
            env.remove(x);
        }
    }
}

/// `e` with the bindings described above substituted.
pub fn inline_lets(prog: &mut Program, e: ExprId) -> ExprId {
    let e = uniquify(prog, e);
    let uses = uses_of(prog, e);
    let mut env: HashMap<Rc<str>, ExprId> = HashMap::default();
    subst(prog, e, &uses, &mut env, true)
}

/// Only single-use and cheap bindings substituted (no work is duplicated):
/// what remains bound is shared.
pub fn inline_single_uses(prog: &mut Program, e: ExprId) -> ExprId {
    let e = uniquify(prog, e);
    let uses = uses_of(prog, e);
    let mut env: HashMap<Rc<str>, ExprId> = HashMap::default();
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
            // A small pull array (a one-hot tangent seed, a pair of an
            // element and a literal) is always fused: recomputing an element
            // costs about what reading it does. A larger one is fused only
            // if each element is read about once: one read, at most as many
            // loops deep as the array has dimensions. Deeper, or read
            // several times, fusion would recompute every element in each
            // iteration of the outer loops.
            let small =
                size(prog, v, SMALL_ELEMENT) <= SMALL_ELEMENT && element_is_loop_free(prog, v);
            let pull = u.only_pull && (small || (u.reads <= 1 && u.depth <= rank(prog, v)));
            // Copying a large value into many uses could grow the term
            // exponentially (builds of builds): a budget bounds the copies.
            let affordable = u.count <= 1 || size(prog, v, BUDGET) * u.count <= BUDGET;
            // A single use inside a loop body is many evaluations: only
            // cheap values and pull arrays (which fusion turns into one
            // element per use) move there.
            let single = u.count <= 1 && u.depth == 0;
            let proj = u.only_proj && u.depth == 0;
            if single || atomic || (fusion && (pull || proj) && affordable) {
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
            // A substituted pair under its projection: fst-pair / snd-pair,
            // applied left to right only (a refinement, so sound here,
            // outside the e-graph). Without it the unused half, often a
            // whole primal computation, would still be evaluated.
            if let Expr::Prim {
                op: op @ (Prim::Fst | Prim::Snd),
                ..
            } = &other
                && let Expr::Prim {
                    op: Prim::Pair,
                    args,
                } = prog.expr(new[0])
            {
                return if *op == Prim::Fst { args[0] } else { args[1] };
            }
            let rebuilt = other.with_children(&new);
            prog.add(rebuilt, span)
        }
    }
}

/// The element of a pull array computes no loop and calls nothing: a small
/// term can still cost O(m) per element (`build n (fun i -> ifold … m)`).
/// The element of a nested pull array (`build n (fun i -> build m (fun j
/// -> e))`, a matrix of dual numbers) is the innermost `e`: reading
/// `a[i][j]` after fusion computes `e` once.
fn element_is_loop_free(prog: &Program, e: ExprId) -> bool {
    let Expr::Prim {
        op: Prim::Build,
        args,
    } = prog.expr(e)
    else {
        return false;
    };
    let mut f = args[1];
    let mut work = Vec::new();
    // Peel the nested builds; their sizes must be loop-free too.
    while let Expr::Lam { body, .. } = prog.expr(f)
        && let Expr::Prim {
            op: Prim::Build,
            args,
        } = prog.expr(*body)
    {
        work.push(args[0]);
        f = args[1];
    }
    work.push(f);
    while let Some(x) = work.pop() {
        match prog.expr(x) {
            Expr::Prim {
                op:
                    Prim::Build | Prim::IFold | Prim::IScan | Prim::Accum | Prim::AddAt | Prim::Concat,
                ..
            }
            | Expr::App { .. } => return false,
            other => work.extend(other.children()),
        }
    }
    true
}

/// The number of nested `build`s `e` is (0 if it is not a `build`): the
/// dimensions of a pull array.
fn rank(prog: &Program, e: ExprId) -> usize {
    let mut r = 0;
    let mut e = e;
    loop {
        match prog.expr(e) {
            Expr::Prim {
                op: Prim::Build,
                args,
            } => {
                r += 1;
                e = args[1];
            }
            Expr::Lam { body, .. } => e = *body,
            // A `let` of a cheap value between the builds is recomputed
            // with each element at no cost; any other is work shared by a
            // whole row, which a read of an element would redo (bundle
            // adjustment's `let ps = … in build (2 * n) …`, one row of the
            // Jacobian: fused into the reads of its elements, every
            // element recomputed all N projections).
            Expr::Let { value, body, .. } if cheap(prog, *value) => e = *body,
            _ => return r,
        }
    }
}

/// Cheap enough to compute at every use: variables, literals, and
/// `length`, `fst`, `snd`, `get`, `toDouble` and pairs of cheap operands
/// (a pair of cheap values is just those values: a dual number
/// `(x, 0.0)` is the commonest).
fn cheap(prog: &Program, e: ExprId) -> bool {
    match prog.expr(e) {
        Expr::Var(_) | Expr::Lit(_) => true,
        Expr::Prim {
            op: Prim::Length | Prim::Fst | Prim::Snd | Prim::Get | Prim::ToDouble | Prim::Pair,
            args,
        } => args.iter().all(|a| cheap(prog, *a)),
        _ => false,
    }
}

/// The largest pull array (in nodes) fused into more than one read.
const SMALL_ELEMENT: usize = 24;

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
