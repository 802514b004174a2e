//! Source-to-source reverse mode (spec/ad-reverse.md), on the first-order
//! normal form of `crate::anf`. For a block of bindings it generates
//!
//! - `fwd(B)`: the block's computation returning `(result, tape)`, where the
//!   tape holds every value the block binds and, for loops and conditionals,
//!   the tapes of their bodies (a `build` keeps one tape per element, an
//!   `ifold` or `iscan` one per iteration via `iscan`; a loop whose body
//!   binds only recomputed values, none, when its reverse needs none);
//! - `rev(B, ȳ)`: with the block's values restored from its tape, the
//!   cotangents of the block's free variables, given the cotangent ȳ of its
//!   result: the bindings are visited last to first and each one's rule
//!   (R-*) adds its operands' contributions.
//!
//! Cotangents (spec/ad-reverse.md, "Cotangents"): a Double's is a Double;
//! an array's is a *sparse list* of `(index, cotangent)` contributions, so
//! reading `v[i]` in a loop contributes one pair rather than a dense
//! one-hot array (seed 002 §4.3.4); lists are joined by `concat` and
//! turned dense, once, by `accum`. Index and Bool carry placeholders.
//! Only O(1) primitives are recomputed (reads, `+ − *`, comparisons,
//! pairs, projections: §4.1 "Recomputed bindings"), each once per restore,
//! so the gradient costs a constant factor more than the function,
//! whatever the sizes (the cheap-gradient criterion). An array read once
//! in a loop body contributes a bare pair per iteration ("Bare
//! contributions"). A fold whose state only accumulates sums runs
//! backwards as a map over its iterations (R-IFold-Linear). The entry's
//! own maps and sums whose bodies hold loops keep no tape at all: the
//! reverse sweep computes each iteration again, with its tape, just
//! before running it backwards (R-Checkpoint); such a sum that reaches the
//! result through additions is computed by the reverse sweep alone, in its
//! backward loop (R-Defer).

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use super::AdError;
use super::accum::{self, V, accumulable, node_type};
use super::atom::Atom as BAtom;
use super::derivatives::{contract, is_differentiable, partials};
use crate::anf::to_ir;
use crate::anf::{Atom, Binding, Block, LoopKind, Normal, Rhs};
use crate::ir::build::Builder;
use crate::ir::{Def, Expr, ExprId, Lit, Name, Prim, Type};

/// CT[[T]]: the type of cotangents of values of type T.
pub fn cotangent_type(t: &Type) -> Type {
    match t {
        Type::Double => Type::Double,
        Type::Index => Type::Index,
        Type::Bool => Type::Bool,
        Type::Array(e) => Type::array(Type::pair(Type::Index, cotangent_type(e))),
        Type::Pair(a, b) => Type::pair(cotangent_type(a), cotangent_type(b)),
        Type::Fun(..) => Type::Bool,
    }
}

/// The free variables of a block, in order of first occurrence.
pub fn free_vars(b: &Block) -> Vec<(Name, Type)> {
    let mut out = Vec::new();
    let mut bound = Vec::new();
    fv_block(b, &mut bound, &mut out);
    out
}

fn fv_atom(a: &Atom, bound: &[Name], out: &mut Vec<(Name, Type)>) {
    if let Atom::Var(n, t) = a
        && !bound.contains(n)
        && !out.iter().any(|(m, _)| m == n)
    {
        out.push((n.clone(), t.clone()));
    }
}

fn fv_block(b: &Block, bound: &mut Vec<Name>, out: &mut Vec<(Name, Type)>) {
    let mark = bound.len();
    for bd in &b.binds {
        match &bd.rhs {
            Rhs::Prim(_, args) | Rhs::Array(args) => {
                args.iter().for_each(|a| fv_atom(a, bound, out))
            }
            Rhs::If(c, t, f) => {
                fv_atom(c, bound, out);
                fv_block(t, bound, out);
                fv_block(f, bound, out);
            }
            Rhs::Loop {
                n,
                state,
                index,
                body,
                ..
            } => {
                fv_atom(n, bound, out);
                let m = bound.len();
                if let Some((z, s, _)) = state {
                    fv_atom(z, bound, out);
                    bound.push(s.clone());
                }
                bound.push(index.clone());
                fv_block(body, bound, out);
                bound.truncate(m);
            }
        }
        bound.push(bd.name.clone());
    }
    fv_atom(&b.result, bound, out);
    bound.truncate(mark);
}

/// A simple binding that `restore` recomputes instead of reading from the
/// tape (spec/ad-reverse.md §4.1, "Recomputed bindings"): a read, a
/// length, a projection, a pair, or one of the arithmetic and comparison
/// operators that cost about as much as the tape traffic they replace.
/// Its operands are in scope wherever the block is restored, it cannot be
/// ⊥ there (the forward sweep computed it from the same values), and it
/// gives the same bits; each restore recomputes it once, so the gradient
/// stays within a constant factor of the function.
fn recomputed(bd: &Binding) -> bool {
    if let Rhs::If(_, t, f) = &bd.rhs {
        // A conditional whose branches bind only recomputed values: the
        // condition is in scope wherever it is restored, and the branch
        // the forward sweep took is taken again.
        return t.binds.iter().all(recomputed) && f.binds.iter().all(recomputed);
    }
    matches!(
        &bd.rhs,
        Rhs::Prim(
            Prim::Add
                | Prim::Sub
                | Prim::Mul
                | Prim::Neg
                | Prim::Lt
                | Prim::Gt
                | Prim::Le
                | Prim::Ge
                | Prim::Eq
                | Prim::Ne
                | Prim::Not
                | Prim::ToDouble
                | Prim::Get
                | Prim::Length
                | Prim::Pair
                | Prim::Fst
                | Prim::Snd,
            _
        )
    )
}

/// How often the variable `x` occurs in `b`, nested blocks included
/// (names are bound once in the normal form, so every occurrence is `x`).
fn occurrences(b: &Block, x: &Name) -> usize {
    let at = |a: &Atom| usize::from(a.var() == Some(x));
    let mut n = at(&b.result);
    for bd in &b.binds {
        n += match &bd.rhs {
            Rhs::Prim(_, args) | Rhs::Array(args) => args.iter().map(at).sum(),
            Rhs::If(c, t, f) => at(c) + occurrences(t, x) + occurrences(f, x),
            Rhs::Loop { n, state, body, .. } => {
                at(n) + state.as_ref().map_or(0, |(z, _, _)| at(z)) + occurrences(body, x)
            }
        };
    }
    n
}

/// The read `y = w[i]` (with `y : T`) that is the only occurrence of an
/// array `w` in a block.
type ReadOnce = (Name, Type, Atom);

/// `Some((y, T, i))` when the array `w` occurs in `b` exactly once, as
/// `y = w[i]` at the top level of `b` (with `y : T`): then `w`'s cotangent
/// from `b` is the one pair `(i, ȳ)` (R-Get), which a loop stores bare.
fn read_once(b: &Block, w: &Name) -> Option<ReadOnce> {
    if occurrences(b, w) != 1 {
        return None;
    }
    b.binds.iter().find_map(|bd| match &bd.rhs {
        Rhs::Prim(Prim::Get, args) if args[0].var() == Some(w) => {
            Some((bd.name.clone(), bd.ty.clone(), args[1].clone()))
        }
        _ => None,
    })
}

/// R-IFold-Linear: whether a fold's state `s` reaches the body's result
/// through additions alone — `y₁ = s + a` (or `a + s`, `s - a`), then
/// `y₂ = y₁ + b`, …, the last one the result — each name on the path
/// occurring exactly once in the body. Then the cotangent of `s` is that
/// of the result: every iteration runs backwards from the same cotangent,
/// x̄, and none needs the state's value (an addition's partials are
/// constants), so the backward loop is a map (spec/ad-reverse.md §5).
fn linear_state(body: &Block, s: &Name, sty: &Type) -> bool {
    *sty == Type::Double && linear_path(body, s).is_some()
}

/// The bindings on the path of [`linear_state`] from `s` to the block's
/// result, in order (empty when `s` is the result), or `None` when there
/// is no such path.
fn linear_path(body: &Block, s: &Name) -> Option<Vec<Name>> {
    let mut path = Vec::new();
    let mut v = s;
    loop {
        if occurrences(body, v) != 1 {
            return None;
        }
        if body.result.var() == Some(v) {
            return Some(path);
        }
        let next = body.binds.iter().find_map(|bd| match &bd.rhs {
            Rhs::Prim(Prim::Add, args) if args.iter().any(|a| a.var() == Some(v)) => Some(&bd.name),
            Rhs::Prim(Prim::Sub, args) if args[0].var() == Some(v) => Some(&bd.name),
            _ => None,
        });
        v = next?;
        path.push(v.clone());
    }
}

/// A loop that keeps no per-iteration tape (spec/ad-reverse.md §4.1):
/// its body binds only recomputed values, so no iteration has a tape, and
/// it is a `build` (whose reverse restores element i from i alone) or a
/// fold whose state is linear (R-IFold-Linear, whose reverse needs no
/// state). The forward sweep runs it plainly and tapes its result like a
/// primitive's.
fn untaped(bd: &Binding) -> bool {
    match &bd.rhs {
        Rhs::Loop {
            kind: LoopKind::Build,
            body,
            ..
        } => body.binds.iter().all(recomputed),
        Rhs::Loop {
            kind: LoopKind::IFold,
            state: Some((_, s, sty)),
            body,
            ..
        } => body.binds.iter().all(recomputed) && linear_state(body, s, sty),
        _ => false,
    }
}

/// R-Checkpoint (spec/ad-reverse.md §4.4): the loops of the entry's own
/// block whose iterations the reverse sweep computes again rather than
/// reads from a tape — a `build`, or a fold whose state is linear (their
/// iterations need nothing from one another), whose body holds a loop, so
/// that its per-iteration tape would hold arrays. Their tapes then live
/// for one iteration of the reverse sweep instead of all of them: GMM's
/// gradient no longer keeps every point's centred vectors and triangular
/// products.
fn checkpoints(blk: &Block) -> HashSet<Name> {
    fn holds_loop(b: &Block) -> bool {
        b.binds.iter().any(|bd| match &bd.rhs {
            Rhs::Loop { .. } => true,
            Rhs::If(_, t, f) => holds_loop(t) || holds_loop(f),
            _ => false,
        })
    }
    blk.binds
        .iter()
        .filter(|bd| match &bd.rhs {
            Rhs::Loop {
                kind: LoopKind::Build,
                body,
                ..
            } => holds_loop(body),
            Rhs::Loop {
                kind: LoopKind::IFold,
                state: Some((_, s, sty)),
                body,
                ..
            } => linear_state(body, s, sty) && holds_loop(body),
            _ => false,
        })
        .map(|bd| bd.name.clone())
        .collect()
}

/// R-Defer-Sum (spec/ad-reverse.md §4.5): in the entry's own block,
/// `x = build n (i. B)` of Doubles, `m = length x`, `s = ifold (acc j.
/// e = x[j]; t = acc + e) z m`, one after another, with `x` and `m` used
/// nowhere else and `n` a length or a literal (never negative), become
/// the one fold `s = ifold (acc i. B; t = acc + r) z n` (r: B's result;
/// the addition's operands in their order). The same additions on the same
/// elements in the same order, and the same ⊥ (an element's, or none), so
/// the same bits; the fold can then be deferred (a sum of a map such as
/// NNMF's `vectorSum (build …)` is computed by the reverse sweep alone).
fn fuse_sums(blk: &Block) -> Block {
    let mut binds = Vec::with_capacity(blk.binds.len());
    let mut k = 0;
    while k < blk.binds.len() {
        match &blk.binds[k..] {
            [x, m, f, ..] if let Some(fused) = fuse_sum(blk, x, m, f) => {
                binds.push(fused);
                k += 3;
            }
            _ => {
                binds.push(blk.binds[k].clone());
                k += 1;
            }
        }
    }
    Block {
        binds,
        result: blk.result.clone(),
    }
}

/// Whether the Index atom `n` of `blk` cannot be negative: a literal `≥ 0`
/// or a `length`.
fn never_negative(blk: &Block, n: &Atom) -> bool {
    match n {
        Atom::Lit(Lit::Int(k), _) => *k >= 0,
        Atom::Var(v, _) => blk
            .binds
            .iter()
            .any(|b| b.name == *v && matches!(b.rhs, Rhs::Prim(Prim::Length, _))),
        _ => false,
    }
}

/// [`fuse_sums`] on three bindings in a row: the one fold, or `None`.
fn fuse_sum(blk: &Block, x: &Binding, m: &Binding, f: &Binding) -> Option<Binding> {
    let Rhs::Loop {
        kind: LoopKind::Build,
        n,
        state: None,
        index,
        body,
    } = &x.rhs
    else {
        return None;
    };
    let Rhs::Prim(Prim::Length, la) = &m.rhs else {
        return None;
    };
    let Rhs::Loop {
        kind: LoopKind::IFold,
        n: count,
        state: Some((z, acc, Type::Double)),
        index: j,
        body: fb,
    } = &f.rhs
    else {
        return None;
    };
    let [e, t] = fb.binds.as_slice() else {
        return None;
    };
    let read = matches!(&e.rhs, Rhs::Prim(Prim::Get, a)
        if a[0].var() == Some(&x.name) && a[1].var() == Some(j));
    let Rhs::Prim(Prim::Add, add) = &t.rhs else {
        return None;
    };
    let acc_first = add[0].var() == Some(acc) && add[1].var() == Some(&e.name);
    let acc_second = add[1].var() == Some(acc) && add[0].var() == Some(&e.name);
    let ok = x.ty == Type::array(Type::Double)
        && la[0].var() == Some(&x.name)
        && count.var() == Some(&m.name)
        && read
        && (acc_first || acc_second)
        && fb.result.var() == Some(&t.name)
        && occurrences(blk, &x.name) == 2
        && occurrences(blk, &m.name) == 1
        && never_negative(blk, n);
    if !ok {
        return None;
    }
    let a = Atom::Var(acc.clone(), Type::Double);
    let r = body.result.clone();
    let operands = if acc_first { vec![a, r] } else { vec![r, a] };
    let mut fused = body.binds.clone();
    fused.push(Binding {
        name: t.name.clone(),
        ty: Type::Double,
        rhs: Rhs::Prim(Prim::Add, operands),
    });
    Some(Binding {
        name: f.name.clone(),
        ty: Type::Double,
        rhs: Rhs::Loop {
            kind: LoopKind::IFold,
            n: n.clone(),
            state: Some((z.clone(), acc.clone(), Type::Double)),
            index: index.clone(),
            body: Block {
                binds: fused,
                result: Atom::Var(t.name.clone(), Type::Double),
            },
        },
    })
}

/// R-Defer (spec/ad-reverse.md §4.5): the folds of the entry's own block
/// whose value the reverse sweep computes instead of the forward sweep —
/// a fold whose state is linear, keeping no tape (untaped or
/// checkpointed), and that reaches the result through additions alone
/// (each name on the way occurring once), so its cotangent is the seed's
/// and no binding but those on that path reads its value — each with the
/// bindings on its path.
fn deferrals(blk: &Block, checkpointed: &HashSet<Name>) -> Vec<(Name, Vec<Name>)> {
    if *blk.result.ty() != Type::Double {
        return Vec::new();
    }
    blk.binds
        .iter()
        .filter(|bd| match &bd.rhs {
            Rhs::Loop {
                kind: LoopKind::IFold,
                state: Some((_, s, sty)),
                body,
                ..
            } => linear_state(body, s, sty) && (untaped(bd) || checkpointed.contains(&bd.name)),
            _ => false,
        })
        .filter_map(|bd| linear_path(blk, &bd.name).map(|p| (bd.name.clone(), p)))
        .collect()
}

pub(super) struct Reverse<'b, 'a> {
    pub b: &'b mut Builder<'a>,
    /// For compound bindings: the variable holding their sub-tape.
    subtapes: HashMap<Name, Name>,
    /// Variables that depend on the independent variable (activity
    /// analysis): only they get cotangents. Besides saving work, this
    /// keeps an infinite partial of an unrelated operand (sqrt at 0) from
    /// making the gradient ⊥.
    active: std::collections::HashSet<Name>,
    /// The names `restore` binds: tape projections, reads of tapes at
    /// their own indices and recomputed bindings (§4.1), none of which can
    /// be ⊥, so each is left out where nothing mentions it. Likewise the
    /// accumulators, nodes and leaf counts the reverse sweep creates
    /// (§5.6), which cannot be ⊥ either.
    restored: HashSet<Name>,
    /// The variables whose cotangents live in a dense accumulator
    /// (spec/ad-reverse.md §5.6): roots, views and aliases.
    places: HashMap<Name, Place>,
    /// The roots whose accumulator code so far may have added into.
    touched: HashSet<Name>,
    /// The loops whose iterations the reverse sweep recomputes instead of
    /// restoring them from a tape (R-Checkpoint, spec/ad-reverse.md §4.4).
    checkpointed: HashSet<Name>,
    /// R-Defer (§4.5): the entry's folds whose value the reverse sweep
    /// computes, each with whether it has yet, and the bindings on their
    /// paths to the result, which follow them.
    deferred: HashMap<Name, bool>,
    deferred_path: HashSet<Name>,
}

/// Where a cotangent is added (spec/ad-reverse.md §5.6): the
/// accumulator of `root`, at `node` (a variable of type
/// `accum::node_type` of the placed variable's type).
#[derive(Clone, Debug, PartialEq)]
struct Place {
    root: Name,
    node: Name,
}

/// The cotangent of a binding: a value, or the part of an accumulator at
/// a place.
#[derive(Clone, Debug)]
enum Cot {
    Value(Name),
    At(Place),
}

/// A contribution a rule makes to an operand.
enum Contrib {
    /// A cotangent value of CT[[T]].
    Value(ExprId),
    /// The cotangent held in an accumulator at a place.
    At(Place),
}

/// The accumulators threaded through a block: (root, the variable
/// holding its current version), in a fixed order.
type Accs = Vec<(Name, Name)>;

fn acc_of(accs: &Accs, root: &Name) -> Name {
    accs.iter()
        .find(|(r, _)| r == root)
        .map(|(_, a)| a.clone())
        .expect("a threaded accumulator")
}

fn set_acc(accs: &mut Accs, root: &Name, now: Name) {
    if let Some(slot) = accs.iter_mut().find(|(r, _)| r == root) {
        slot.1 = now;
    }
}

fn acc_type() -> Type {
    Type::array(Type::Double)
}

/// Marks the variables of `blk` that depend on an already active one.
/// Conservative for loops and conditionals: their result (and a fold's
/// state) is active when anything they read is.
pub fn activity(blk: &Block, active: &mut std::collections::HashSet<Name>) {
    let is_active =
        |a: &Atom, act: &std::collections::HashSet<Name>| a.var().is_some_and(|n| act.contains(n));
    for bd in &blk.binds {
        let on = match &bd.rhs {
            Rhs::Prim(_, args) | Rhs::Array(args) => args.iter().any(|a| is_active(a, active)),
            Rhs::If(_, t, f) => {
                activity(t, active);
                activity(f, active);
                free_vars(t)
                    .iter()
                    .chain(free_vars(f).iter())
                    .any(|(n, _)| active.contains(n))
            }
            Rhs::Loop {
                state, index, body, ..
            } => {
                let reads = free_vars(body)
                    .iter()
                    .any(|(n, _)| n != index && active.contains(n))
                    || state.as_ref().is_some_and(|(z, _, _)| is_active(z, active));
                if reads && let Some((_, s, _)) = state {
                    active.insert(s.clone());
                }
                activity(body, active);
                reads
            }
        };
        if on && bd.ty.has_double() {
            active.insert(bd.name.clone());
        }
    }
}

/// Pending `let`s, wrapped around a body at the end.
struct Lets(Vec<(Name, ExprId)>);

impl Lets {
    fn wrap(self, b: &mut Builder<'_>, mut body: ExprId) -> ExprId {
        for (n, v) in self.0.into_iter().rev() {
            body = b.let_(n, v, body);
        }
        body
    }

    /// [`wrap`](Lets::wrap), leaving out every binding named in `optional`
    /// that nothing inside it mentions: a value `restore` would read from
    /// the tape or recompute (§4.1) that the reverse sweep does not use.
    fn wrap_live(self, b: &mut Builder<'_>, mut body: ExprId, optional: &HashSet<Name>) -> ExprId {
        let mut used = HashSet::new();
        mentioned(b.prog, body, &mut used);
        for (n, v) in self.0.into_iter().rev() {
            if optional.contains(&n) && !used.contains(&n) {
                continue;
            }
            mentioned(b.prog, v, &mut used);
            body = b.let_(n, v, body);
        }
        body
    }
}

/// Every variable name `e` mentions, bound or free. (A superset of its
/// free variables: enough to tell that a name is certainly unused.)
fn mentioned(prog: &crate::ir::Program, e: ExprId, out: &mut HashSet<Name>) {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        let x = prog.expr(e);
        if let Expr::Var(n) = x {
            out.insert(n.clone());
        }
        stack.extend(x.children());
    }
}

impl<'b, 'a> Reverse<'b, 'a> {
    pub fn new(b: &'b mut Builder<'a>) -> Self {
        Reverse {
            b,
            subtapes: HashMap::new(),
            active: std::collections::HashSet::new(),
            restored: HashSet::new(),
            places: HashMap::new(),
            touched: HashSet::new(),
            checkpointed: HashSet::new(),
            deferred: HashMap::new(),
            deferred_path: HashSet::new(),
        }
    }

    /// An atom as IR ([`to_ir::atom`]).
    fn atom(&mut self, a: &Atom) -> ExprId {
        to_ir::atom(self.b, a)
    }

    fn bind(&mut self, lets: &mut Lets, base: &str, value: ExprId) -> (Name, Type) {
        let n = self.b.fresh(base);
        let t = self.b.ty(value);
        lets.0.push((n.clone(), value));
        (n, t)
    }

    /// A shape-free default value of a type: 0.0, 0, false, [], pairs.
    fn default_of(&mut self, t: &Type) -> ExprId {
        match t {
            Type::Double => self.b.double(0.0),
            Type::Index => self.b.index(0),
            Type::Bool | Type::Fun(..) => self.b.add(Expr::Lit(Lit::Bool(false)), Type::Bool),
            Type::Array(_) => self.b.add(Expr::Array(Box::new([])), t.clone()),
            Type::Pair(a, c) => {
                let x = self.default_of(a);
                let y = self.default_of(c);
                self.b.pair(x, y)
            }
        }
    }

    /// The zero cotangent of type CT[t].
    fn zero_ct(&mut self, t: &Type) -> ExprId {
        let ct = cotangent_type(t);
        self.default_of(&ct)
    }

    /// `let l = u in let r = v in (f(fst l, fst r, t₁), f(snd l, snd r, t₂))`:
    /// a pair-typed operation done component by component, with `u` and
    /// `v` (named after the given bases) evaluated once.
    fn pairwise(
        &mut self,
        (u, un): (ExprId, &str),
        (v, vn): (ExprId, &str),
        types: [&Type; 2],
        mut f: impl FnMut(&mut Self, ExprId, ExprId, &Type) -> ExprId,
    ) -> ExprId {
        let (ln, rn) = (self.b.fresh(un), self.b.fresh(vn));
        let (lt, rt) = (self.b.ty(u), self.b.ty(v));
        let mut parts = Vec::with_capacity(2);
        for (k, t) in types.into_iter().enumerate() {
            let l = self.b.var(&ln, lt.clone());
            let r = self.b.var(&rn, rt.clone());
            let (l, r) = if k == 0 {
                (self.b.fst(l), self.b.fst(r))
            } else {
                (self.b.snd(l), self.b.snd(r))
            };
            parts.push(f(self, l, r, t));
        }
        let p = self.b.pair(parts[0], parts[1]);
        let inner = self.b.let_(rn, v, p);
        self.b.let_(ln, u, inner)
    }

    /// a ⊕ c for cotangents of values of type `t`.
    fn add_ct(&mut self, a: ExprId, c: ExprId, t: &Type) -> ExprId {
        match t {
            Type::Double => self.b.dop(Prim::Add, vec![a, c]),
            Type::Array(_) => {
                let ty = self.b.ty(a);
                let both = self
                    .b
                    .add(Expr::Array(Box::new([a, c])), Type::array(ty.clone()));
                self.b.prim(Prim::Concat, vec![both], ty)
            }
            Type::Pair(x, y) => {
                self.pairwise((a, "a"), (c, "c"), [x, y], |me, a, c, t| me.add_ct(a, c, t))
            }
            _ => a,
        }
    }

    /// Whether the forward sweep leaves `x` out: a deferred fold or a
    /// binding on its path to the result (R-Defer, §4.5).
    fn defers(&self, x: &Name) -> bool {
        self.deferred.contains_key(x) || self.deferred_path.contains(x)
    }

    /// A loop whose tape entry is its value alone: an untaped loop (§4.1)
    /// or a checkpointed one (§4.4).
    fn unrecorded(&self, bd: &Binding) -> bool {
        untaped(bd) || self.checkpointed.contains(&bd.name)
    }

    /// The tape type of a block: (entry₁, (entry₂, … false)), over the
    /// bindings that are not [`recomputed`].
    fn tape_type(&self, blk: &Block) -> Type {
        let mut t = Type::Bool;
        for bd in blk
            .binds
            .iter()
            .rev()
            .filter(|bd| !recomputed(bd) && !self.defers(&bd.name))
        {
            t = Type::pair(self.entry_type(bd), t);
        }
        t
    }

    fn entry_type(&self, bd: &Binding) -> Type {
        match &bd.rhs {
            Rhs::Prim(..) | Rhs::Array(_) => bd.ty.clone(),
            _ if self.unrecorded(bd) => bd.ty.clone(),
            Rhs::If(_, t, f) => Type::pair(
                bd.ty.clone(),
                Type::pair(self.tape_type(t), self.tape_type(f)),
            ),
            Rhs::Loop {
                kind, state, body, ..
            } => {
                let carried = match (kind, state) {
                    (LoopKind::Build, _) => body.result.ty().clone(),
                    (_, Some((_, _, st))) => st.clone(),
                    _ => unreachable!("folds have a state"),
                };
                Type::pair(
                    bd.ty.clone(),
                    Type::array(Type::pair(carried, self.tape_type(body))),
                )
            }
        }
    }

    /// fwd(B): `(result, tape)`.
    pub fn fwd(&mut self, blk: &Block) -> ExprId {
        let mut lets = Lets(Vec::new());
        let mut entries = Vec::new();
        for bd in &blk.binds {
            if self.defers(&bd.name) {
                continue;
            }
            if let Some(en) = self.fwd_binding(bd, &mut lets) {
                entries.push((en, bd));
            }
        }
        let mut tape = self.b.add(Expr::Lit(Lit::Bool(false)), Type::Bool);
        for (en, bd) in entries.iter().rev() {
            let et = self.entry_type(bd);
            let v = self.b.var(en, et);
            tape = self.b.pair(v, tape);
        }
        let r = match blk.result.var() {
            // R-Defer: the reverse sweep computes the result.
            Some(x) if self.defers(x) => self.b.double(0.0),
            _ => self.atom(&blk.result),
        };
        let out = self.b.pair(r, tape);
        lets.wrap(self.b, out)
    }

    /// F(b) of fwd(B) (§4.2): the lets that compute one binding and its
    /// tape entry; the variable holding the entry, or `None` for a
    /// recomputed binding, which has none.
    fn fwd_binding(&mut self, bd: &Binding, lets: &mut Lets) -> Option<Name> {
        match &bd.rhs {
            Rhs::Prim(..) | Rhs::Array(_) => {
                let v = to_ir::simple_rhs(self.b, bd);
                lets.0.push((bd.name.clone(), v));
                (!recomputed(bd)).then(|| bd.name.clone())
            }
            Rhs::If(..) if recomputed(bd) => {
                let v = to_ir::plain_rhs(self.b, bd);
                lets.0.push((bd.name.clone(), v));
                None
            }
            _ if self.unrecorded(bd) => {
                let v = to_ir::plain_rhs(self.b, bd);
                lets.0.push((bd.name.clone(), v));
                Some(bd.name.clone())
            }
            Rhs::If(c, t, f) => {
                let (tt, tf) = (self.tape_type(t), self.tape_type(f));
                let c = self.atom(c);
                let then_ = self.fwd_branch(t, &tf, true);
                let else_ = self.fwd_branch(f, &tt, false);
                let e = self.b.if_(c, then_, else_);
                let (en, et) = self.bind(lets, "e", e);
                let ev = self.b.var(&en, et);
                let x = self.b.fst(ev);
                lets.0.push((bd.name.clone(), x));
                Some(en)
            }
            Rhs::Loop {
                kind,
                n,
                state,
                index,
                body,
            } => {
                let nn = self.atom(n);
                let fb = self.fwd(body);
                let per = self.b.ty(fb);
                let tape = match (kind, state) {
                    (LoopKind::Build, _) => {
                        let lam = self.b.lam(index.clone(), Type::Index, fb);
                        self.b
                            .prim(Prim::Build, vec![nn, lam], Type::array(per.clone()))
                    }
                    (_, Some((z, s, st))) => {
                        // iscan over (state, tape of the previous step).
                        let acc = self.b.fresh("acc");
                        let av = self.b.var(&acc, per.clone());
                        let sv = self.b.fst(av);
                        let body_ = self.b.let_(s.clone(), sv, fb);
                        let lam = self.b.lam(index.clone(), Type::Index, body_);
                        let f = self.b.lam(acc, per.clone(), lam);
                        let z = self.atom(z);
                        let tt = self.tape_type(body);
                        let zt = self.default_of(&tt);
                        let init = self.b.pair(z, zt);
                        let _ = st;
                        self.b
                            .prim(Prim::IScan, vec![f, init, nn], Type::array(per.clone()))
                    }
                    _ => unreachable!("folds have a state"),
                };
                let (tn, tt) = self.bind(lets, "t", tape);
                // The value itself, from the tape.
                let x = match kind {
                    LoopKind::Build => {
                        let tv = self.b.var(&tn, tt.clone());
                        let len = self.b.length(tv);
                        self.b.build(len, |b, k| {
                            let tv = b.var(&tn, tt.clone());
                            let kv = b.var(k, Type::Index);
                            let e = b.get(tv, kv);
                            b.fst(e)
                        })
                    }
                    LoopKind::IFold => {
                        let tv = self.b.var(&tn, tt.clone());
                        let last = self.atom(n);
                        let e = self.b.get(tv, last);
                        self.b.fst(e)
                    }
                    LoopKind::IScan => {
                        let tv = self.b.var(&tn, tt.clone());
                        let len = self.b.length(tv);
                        self.b.build(len, |b, k| {
                            let tv = b.var(&tn, tt.clone());
                            let kv = b.var(k, Type::Index);
                            let e = b.get(tv, kv);
                            b.fst(e)
                        })
                    }
                };
                lets.0.push((bd.name.clone(), x));
                let xv = self.b.var(&bd.name, bd.ty.clone());
                let tv = self.b.var(&tn, tt);
                let entry = self.b.pair(xv, tv);
                let (en, _) = self.bind(lets, "e", entry);
                Some(en)
            }
        }
    }

    /// One branch of a conditional's forward sweep (§4.2): `(result,
    /// (its tape, the other's default))` for the `then` branch (`first`),
    /// `(result, (the other's default, its tape))` for the `else` branch.
    fn fwd_branch(&mut self, blk: &Block, other: &Type, first: bool) -> ExprId {
        let r = self.fwd(blk);
        let n = self.b.fresh("r");
        let rv = self.b.var(&n, self.b.ty(r));
        let res = self.b.fst(rv);
        let rv = self.b.var(&n, self.b.ty(r));
        let tape = self.b.snd(rv);
        let other = self.default_of(other);
        let tapes = if first {
            self.b.pair(tape, other)
        } else {
            self.b.pair(other, tape)
        };
        let p = self.b.pair(res, tapes);
        self.b.let_(n, r, p)
    }

    /// Lets that rebind a block's variables (and sub-tapes) from its tape.
    fn restore(&mut self, blk: &Block, tape: ExprId, lets: &mut Lets) {
        let start = lets.0.len();
        let (mut tn, mut tt) = self.bind(lets, "tp", tape);
        for bd in &blk.binds {
            if self.defers(&bd.name) {
                // R-Defer: bound by the reverse sweep.
                continue;
            }
            if recomputed(bd) {
                // Its operands are restored or recomputed already.
                let v = to_ir::plain_rhs(self.b, bd);
                lets.0.push((bd.name.clone(), v));
                continue;
            }
            let et = self.entry_type(bd);
            let tv = self.b.var(&tn, tt.clone());
            let entry = self.b.fst(tv);
            match &bd.rhs {
                Rhs::Prim(..) | Rhs::Array(_) => lets.0.push((bd.name.clone(), entry)),
                _ if self.unrecorded(bd) => lets.0.push((bd.name.clone(), entry)),
                _ => {
                    let (en, _) = self.bind(lets, "e", entry);
                    let ev = self.b.var(&en, et.clone());
                    let x = self.b.fst(ev);
                    lets.0.push((bd.name.clone(), x));
                    let ev = self.b.var(&en, et.clone());
                    let sub = self.b.snd(ev);
                    let (sn, _) = self.bind(lets, "st", sub);
                    self.subtapes.insert(bd.name.clone(), sn);
                }
            }
            let tv = self.b.var(&tn, tt.clone());
            let rest = self.b.snd(tv);
            (tn, tt) = self.bind(lets, "tp", rest);
        }
        for (n, _) in &lets.0[start..] {
            self.restored.insert(n.clone());
        }
    }

    /// A tuple (c₁, (c₂, … false)) of expressions.
    fn tuple(&mut self, items: Vec<ExprId>) -> ExprId {
        let mut t = self.b.add(Expr::Lit(Lit::Bool(false)), Type::Bool);
        for i in items.into_iter().rev() {
            t = self.b.pair(i, t);
        }
        t
    }

    /// Component `k` of a tuple built by [`tuple`].
    fn proj(&mut self, mut e: ExprId, k: usize) -> ExprId {
        for _ in 0..k {
            e = self.b.snd(e);
        }
        self.b.fst(e)
    }

    /// rev(B, ȳ): the tuple of cotangents of `wanted`, with B's variables
    /// in scope (restored from its tape).
    pub fn rev(
        &mut self,
        blk: &Block,
        seed: Option<Name>,
        wanted: &[(Name, Type)],
    ) -> Result<ExprId, AdError> {
        self.rev_bare(blk, seed.map(Cot::Value), wanted, &[], &[])
    }

    /// [`rev`], with two extensions.
    ///
    /// Bare contributions: a wanted array read once in `blk` (`bare[k]` is
    /// its [`read_once`]) gets its one contribution as a bare pair
    /// `(i, ȳ)` rather than the list `[(i, ȳ)]` (ȳ is `0` when the element
    /// received no cotangent): a loop then stores pairs, and its list of
    /// contributions is their array, with nothing to allocate per
    /// iteration or to join (spec/ad-reverse.md, "Bare contributions").
    ///
    /// Accumulators (§5.6): `threads` are the accumulators the block may
    /// add into, with the variables holding them on entry; the result is
    /// the tuple of the wanted cotangents followed by their versions on
    /// exit. The seed may be a place: the result's cotangent is already
    /// in an accumulator.
    fn rev_bare(
        &mut self,
        blk: &Block,
        seed: Option<Cot>,
        wanted: &[(Name, Type)],
        bare: &[Option<ReadOnce>],
        threads: &[(Name, Name)],
    ) -> Result<ExprId, AdError> {
        let is_bare = |y: &Name| {
            wanted
                .iter()
                .zip(bare)
                .any(|((w, _), b)| b.is_some() && w == y)
        };
        let mut lets = Lets(Vec::new());
        let mut accs: Accs = threads.to_vec();
        self.place_block(blk, seed.as_ref(), &mut accs, &mut lets);
        let mut adj: HashMap<Name, Name> = HashMap::new();
        // Which parts of each adjoint are structural zeros.
        let mut masks: HashMap<Name, Zero> = HashMap::new();
        if let (Some(s), Atom::Var(r, t)) = (seed, &blk.result)
            && t.has_double()
        {
            let c = match s {
                Cot::Value(s) => Contrib::Value(self.b.var(&s, cotangent_type(t))),
                Cot::At(p) => Contrib::At(p),
            };
            let mut sink = Sink {
                adj: &mut adj,
                masks: &mut masks,
                accs: &mut accs,
                lets: &mut lets,
            };
            self.deliver(r, t, c, Zero::No, &mut sink);
        }
        for bd in blk.binds.iter().rev() {
            let cot = match self.available(&bd.name, &accs) {
                // A view: its contributions are in the accumulator already.
                Some(_) if matches!(bd.rhs, Rhs::Prim(Prim::Get, _)) => continue,
                // Nothing was added into it: zero, like a missing adjoint.
                Some(p) if !self.touched.contains(&p.root) => continue,
                Some(p) => Cot::At(p),
                None => match adj.get(&bd.name) {
                    Some(x) => Cot::Value(x.clone()),
                    None => continue,
                },
            };
            let mask = masks.get(&bd.name).cloned().unwrap_or(Zero::No);
            for (y, ty, c, m) in self.contributions(bd, &cot, &mask, &mut lets, &mut accs)? {
                if !ty.has_double() || !self.active.contains(&y) || is_bare(&y) {
                    continue;
                }
                let mut sink = Sink {
                    adj: &mut adj,
                    masks: &mut masks,
                    accs: &mut accs,
                    lets: &mut lets,
                };
                self.deliver(&y, &ty, c, m, &mut sink);
            }
        }
        let mut items = Vec::new();
        for (k, (w, t)) in wanted.iter().enumerate() {
            if let Some(Some((y, yt, i))) = bare.get(k) {
                let i = self.atom(i);
                let c = match adj.get(y) {
                    Some(a) => self.b.var(a, cotangent_type(yt)),
                    None => self.zero_ct(yt),
                };
                items.push(self.b.pair(i, c));
                continue;
            }
            items.push(match adj.get(w) {
                Some(a) => self.b.var(a, cotangent_type(t)),
                None => self.zero_ct(t),
            });
        }
        for (root, _) in threads {
            let a = acc_of(&accs, root);
            items.push(self.b.var(&a, acc_type()));
        }
        if blk
            .binds
            .iter()
            .any(|bd| self.deferred.contains_key(&bd.name))
        {
            // R-Defer: the entry's block. A deferred fold whose rule did not
            // run (it had no cotangent) is computed plainly; then the path
            // to the result, which the tuple ends with.
            for bd in &blk.binds {
                if self.deferred.get(&bd.name) == Some(&false) {
                    let v = to_ir::plain_rhs(self.b, bd);
                    lets.0.push((bd.name.clone(), v));
                } else if self.deferred_path.contains(&bd.name) {
                    let v = to_ir::simple_rhs(self.b, bd);
                    lets.0.push((bd.name.clone(), v));
                }
            }
            items.push(self.atom(&blk.result));
        }
        let out = self.tuple(items);
        Ok(lets.wrap_live(self.b, out, &self.restored))
    }

    /// The place of `x` if its accumulator is among `accs`.
    fn available(&self, x: &Name, accs: &Accs) -> Option<Place> {
        let p = self.places.get(x)?;
        accs.iter().any(|(r, _)| *r == p.root).then(|| p.clone())
    }

    /// Places the accumulable variables `blk` binds (§5.6), in order: the
    /// result, when it is built and the seed is a place, at that place (an
    /// alias); every other active `build` or array literal at the start of
    /// a new zero accumulator (a root); a read of a placed array at the
    /// node of its element (a view).
    fn place_block(&mut self, blk: &Block, seed: Option<&Cot>, accs: &mut Accs, lets: &mut Lets) {
        for bd in &blk.binds {
            if !self.active.contains(&bd.name) || !accumulable(&bd.ty) {
                continue;
            }
            let x = V::new(&bd.name, &bd.ty);
            match &bd.rhs {
                Rhs::Loop {
                    kind: LoopKind::Build,
                    ..
                }
                | Rhs::Array(_) => {
                    if blk.result.var() == Some(&bd.name)
                        && let Some(Cot::At(p)) = seed
                    {
                        self.places.insert(bd.name.clone(), p.clone());
                        continue;
                    }
                    // Only an array whose every leaf its binding made: an
                    // accumulator for rows it merely shares (`build n (fun
                    // i -> m[0])`) would cost more than the primal did.
                    if !fresh_leaves(&bd.rhs) {
                        continue;
                    }
                    // A root: zeros for its leaves, and its node from 0.
                    let n = accum::leaf_count(self.b, &x);
                    let z = accum::zeros(self.b, n);
                    let (acc, _) = self.bind(lets, "acc", z);
                    let zero = self.b.index(0);
                    let (base, _) = self.bind(lets, "base", zero);
                    let node = accum::offsets(self.b, &x, &V::new(&base, &Type::Index));
                    let (node, _) = self.bind(lets, "node", node);
                    for n in [&acc, &base, &node] {
                        self.restored.insert(n.clone());
                    }
                    self.places.insert(
                        bd.name.clone(),
                        Place {
                            root: bd.name.clone(),
                            node,
                        },
                    );
                    accs.push((bd.name.clone(), acc));
                }
                Rhs::Prim(Prim::Get, args) => {
                    let Some(w) = args[0].var() else { continue };
                    let Some(pw) = self.available(w, accs) else {
                        continue;
                    };
                    let wt = args[0].ty().clone();
                    let nv = self.b.var(&pw.node, node_type(&wt));
                    let i = self.atom(&args[1]);
                    let nd = self.b.get(nv, i);
                    let (node, _) = self.bind(lets, "node", nd);
                    self.restored.insert(node.clone());
                    self.places.insert(
                        bd.name.clone(),
                        Place {
                            root: pw.root,
                            node,
                        },
                    );
                }
                _ => {}
            }
        }
    }

    /// Adds the contribution `c` to `y : ty`: into its accumulator when
    /// `y` is placed there (`scatter` for a value, `slice_add` from
    /// another accumulator), else ⊕ into its adjoint (a value; a place is
    /// read out as a sparse list first).
    fn deliver(&mut self, y: &Name, ty: &Type, c: Contrib, m: Zero, sink: &mut Sink<'_>) {
        let here = self.available(y, sink.accs);
        match (here, c) {
            (Some(q), Contrib::At(p)) if q == p => {}
            (Some(q), Contrib::At(p)) if q.root != p.root => {
                let dst = self.b.var(&acc_of(sink.accs, &q.root), acc_type());
                let src = V::new(&acc_of(sink.accs, &p.root), &acc_type());
                let e = accum::slice_add(
                    self.b,
                    dst,
                    &V::new(&q.node, &node_type(ty)),
                    &src,
                    &V::new(&p.node, &node_type(ty)),
                    &V::new(y, ty),
                );
                let (a, _) = self.bind(sink.lets, "acc", e);
                set_acc(sink.accs, &q.root, a);
                self.touched.insert(q.root);
            }
            (_, Contrib::At(p)) => {
                // Not placed, or placed in the same accumulator: as a list.
                let src = V::new(&acc_of(sink.accs, &p.root), &acc_type());
                let list = accum::to_sparse(
                    self.b,
                    &src,
                    &V::new(&p.node, &node_type(ty)),
                    &V::new(y, ty),
                );
                self.deliver(y, ty, Contrib::Value(list), m, sink);
            }
            (Some(q), Contrib::Value(c)) => {
                let (cn, ct) = self.bind(sink.lets, "c", c);
                let acc = self.b.var(&acc_of(sink.accs, &q.root), acc_type());
                let e = accum::scatter(
                    self.b,
                    acc,
                    &V::new(&q.node, &node_type(ty)),
                    &V::new(&cn, &ct),
                    ty,
                );
                let (a, _) = self.bind(sink.lets, "acc", e);
                set_acc(sink.accs, &q.root, a);
                self.touched.insert(q.root);
            }
            (None, Contrib::Value(c)) => {
                let (v, m) = match sink.adj.get(y).cloned() {
                    Some(old) => {
                        let o = self.b.var(&old, cotangent_type(ty));
                        let om = sink.masks.get(y).cloned().unwrap_or(Zero::No);
                        (self.add_ct(o, c, ty), om.meet(&m))
                    }
                    None => (c, m),
                };
                let (n, _) = self.bind(sink.lets, "adj", v);
                sink.adj.insert(y.clone(), n);
                sink.masks.insert(y.clone(), m);
            }
        }
    }

    /// The accumulators a nested block adds into — the roots of its
    /// placed free variables among `accs`, plus `extra` — and the rest of
    /// its free variables, whose cotangents it returns as values.
    fn split(
        &self,
        fvs: &[(Name, Type)],
        accs: &Accs,
        extra: Option<&Name>,
    ) -> (Accs, Vec<(Name, Type)>) {
        let mut threads: Accs = Vec::new();
        let mut rest = Vec::new();
        let add = |root: &Name, threads: &mut Accs| {
            if !threads.iter().any(|(r, _)| r == root) {
                threads.push((root.clone(), acc_of(accs, root)));
            }
        };
        if let Some(r) = extra {
            add(r, &mut threads);
        }
        for (v, t) in fvs {
            match self.available(v, accs) {
                Some(p) => add(&p.root, &mut threads),
                None => rest.push((v.clone(), t.clone())),
            }
        }
        (threads, rest)
    }

    /// After a construct that threaded `threads` and returned their new
    /// versions as components `from ..` of the tuple in `r`: binds them
    /// and makes them current.
    fn rethread(
        &mut self,
        r: &Name,
        rt: &Type,
        from: usize,
        threads: &Accs,
        lets: &mut Lets,
        accs: &mut Accs,
    ) {
        for (k, (root, _)) in threads.iter().enumerate() {
            let rv = self.b.var(r, rt.clone());
            let a = self.proj(rv, from + k);
            let (an, _) = self.bind(lets, "acc", a);
            set_acc(accs, root, an);
            self.touched.insert(root.clone());
        }
    }

    /// The zero a bare position starts from: `(0, 0_T)` for an array of T.
    /// (It fills `bk[0]` of a backward scan, which [`gather_bare`] skips.)
    fn bare_zero(&mut self, t: &Type) -> ExprId {
        let Type::Array(el) = t else {
            unreachable!("bare contributions are to arrays")
        };
        let i = self.b.index(0);
        let z = self.zero_ct(el);
        self.b.pair(i, z)
    }

    /// The contributions list of a bare position `k`: the pairs component
    /// `k` of `arr[j]` holds, j from `from` (a backward scan's `bk[0]` is
    /// its initial zeros) — `build (length arr - from) (fun j -> π_k arr[j + from])`.
    fn gather_bare(
        &mut self,
        arr: &Name,
        arr_t: &Type,
        k: usize,
        from: i64,
        in_state: bool,
    ) -> ExprId {
        let av = self.b.var(arr, arr_t.clone());
        let mut count = self.b.length(av);
        if from != 0 {
            let from_e = self.b.index(from);
            count = self.b.prim(Prim::Sub, vec![count, from_e], Type::Index);
        }
        self.build_with(count, |me, j| {
            let av = me.b.var(arr, arr_t.clone());
            let jv = me.b.var(j, Type::Index);
            let at = if from == 0 {
                jv
            } else {
                let f = me.b.index(from);
                me.b.prim(Prim::Add, vec![jv, f], Type::Index)
            };
            let e = me.b.get(av, at);
            let tup = if in_state { me.b.snd(e) } else { e };
            me.proj(tup, k)
        })
    }

    /// The contributions (operand, its type, cotangent) of one binding whose
    /// result has cotangent `cot` (R-* rules). Reads of placed arrays, and
    /// loops and conditionals that thread accumulators, add into `accs`
    /// themselves (§5.6).
    fn contributions(
        &mut self,
        bd: &Binding,
        cot: &Cot,
        mask: &Zero,
        lets: &mut Lets,
        accs: &mut Accs,
    ) -> Result<Vec<(Name, Type, Contrib, Zero)>, AdError> {
        let xb = match cot {
            Cot::Value(x) => x.clone(),
            Cot::At(p) => return self.placed_contributions(bd, p, lets, accs),
        };
        let xb = &xb;
        let ct = cotangent_type(&bd.ty);
        let mut out = Vec::new();
        match &bd.rhs {
            Rhs::Prim(op, args) if is_differentiable(*op) && bd.ty == Type::Double => {
                // R-Add, R-Sub, R-Mult, R-Div, R-Pow, R-Neg, R-Sin, R-Cos,
                // R-Tan, R-Log, R-Exp, R-Sqrt: āᵢ += ∂ᵢ · x̄ from the table.
                let atoms: Vec<BAtom> = args
                    .iter()
                    .map(|a| match a {
                        Atom::Var(n, _) => BAtom::Var(n.clone()),
                        Atom::Lit(Lit::Double(x), _) => BAtom::Lit(*x),
                        Atom::Lit(_, _) => BAtom::Lit(0.0),
                    })
                    .collect();
                let ps = partials(*op, &atoms, &BAtom::Var(bd.name.clone()), self.b);
                for (p, a) in ps.into_iter().zip(args) {
                    if let Atom::Var(n, t) = a
                        && self.active.contains(n)
                    {
                        let c = contract(vec![p], &[Some(BAtom::Var(xb.clone()))], self.b);
                        out.push((n.clone(), t.clone(), Contrib::Value(c), Zero::No));
                    }
                }
            }
            Rhs::Prim(Prim::Pair, args) => {
                // R-Pair
                // A component whose cotangent is a structural zero
                // contributes nothing (spec/ad-reverse.md §5.4).
                for (k, a) in args.iter().enumerate() {
                    let part = mask.component(k);
                    if let Atom::Var(n, t) = a
                        && part != Zero::Yes
                    {
                        let v = self.b.var(xb, ct.clone());
                        let c = if k == 0 { self.b.fst(v) } else { self.b.snd(v) };
                        out.push((n.clone(), t.clone(), Contrib::Value(c), part));
                    }
                }
            }
            Rhs::Prim(op @ (Prim::Fst | Prim::Snd), args) => {
                // R-Fst, R-Snd
                if let Atom::Var(n, t) = &args[0] {
                    let Type::Pair(a, b) = t else {
                        unreachable!("projection of a pair")
                    };
                    let v = self.b.var(xb, ct.clone());
                    let (c, m) = if *op == Prim::Fst {
                        let z = self.zero_ct(b);
                        (self.b.pair(v, z), Zero::pair(mask.clone(), Zero::Yes))
                    } else {
                        let z = self.zero_ct(a);
                        (self.b.pair(z, v), Zero::pair(Zero::Yes, mask.clone()))
                    };
                    out.push((n.clone(), t.clone(), Contrib::Value(c), m));
                }
            }
            Rhs::Prim(Prim::Get, args) => {
                if let Atom::Var(n, t) = &args[0] {
                    let i = self.atom(&args[1]);
                    let v = self.b.var(xb, ct.clone());
                    if let Some(p) = self.available(n, accs) {
                        // R-Get-Acc: the element's slot of the accumulator.
                        let acc = self.b.var(&acc_of(accs, &p.root), acc_type());
                        let nd = self.b.var(&p.node, Type::Index);
                        let at = self.b.prim(Prim::Add, vec![nd, i], Type::Index);
                        let e = accum::add_at(self.b, acc, at, v);
                        let (a, _) = self.bind(lets, "acc", e);
                        set_acc(accs, &p.root, a);
                        self.touched.insert(p.root);
                    } else {
                        // R-Get: one sparse contribution (i, x̄).
                        let p = self.b.pair(i, v);
                        let list = self.b.add(Expr::Array(Box::new([p])), cotangent_type(t));
                        out.push((n.clone(), t.clone(), Contrib::Value(list), Zero::No));
                    }
                }
            }
            Rhs::Prim(Prim::Concat | Prim::Accum | Prim::AddAt, _) => {
                return Err(AdError::Unsupported {
                    what: "reverse mode of `concat`, `accum` and `addAt`".into(),
                });
            }
            // R-Discrete: comparisons, `not`, Index arithmetic, `length`,
            // `toDouble` have no cotangent to pass on.
            Rhs::Prim(..) => {}
            Rhs::Array(args) => {
                // R-Vector: the list becomes dense once, then element j goes
                // to the j-th operand.
                let Type::Array(el) = &bd.ty else {
                    unreachable!("array literal of array type")
                };
                let z = self.zero_ct(el);
                let k = self.b.index(args.len() as i64);
                let v = self.b.var(xb, ct.clone());
                let dense =
                    self.b
                        .prim(Prim::Accum, vec![z, k, v], Type::array(cotangent_type(el)));
                let (dn, dt) = self.bind(lets, "dense", dense);
                for (j, a) in args.iter().enumerate() {
                    if let Atom::Var(n, t) = a {
                        let dv = self.b.var(&dn, dt.clone());
                        let jv = self.b.index(j as i64);
                        let c = self.b.get(dv, jv);
                        out.push((n.clone(), t.clone(), Contrib::Value(c), Zero::No));
                    }
                }
            }
            Rhs::If(c, t, f) => {
                // R-If: the taken branch's reverse, on its own tape; both
                // branches take the accumulators they may add into and
                // return them (R-If-Acc).
                // A recomputed conditional (§4.1) has no sub-tape: its
                // branches restore from nothing.
                let st = self.subtapes.get(&bd.name).cloned();
                let stt = Type::pair(self.tape_type(t), self.tape_type(f));
                let mut fvs = free_vars(t);
                for v in free_vars(f) {
                    if !fvs.iter().any(|(n, _)| *n == v.0) {
                        fvs.push(v);
                    }
                }
                fvs.retain(|(n, t)| t.has_double() && self.active.contains(n));
                let (threads, fvs) = self.split(&fvs, accs, None);
                let branch = |me: &mut Self, blk: &Block, first: bool| -> Result<ExprId, AdError> {
                    let mut l = Lets(Vec::new());
                    let tape = match &st {
                        Some(st) => {
                            let sv = me.b.var(st, stt.clone());
                            if first { me.b.fst(sv) } else { me.b.snd(sv) }
                        }
                        None => me.b.add(Expr::Lit(Lit::Bool(false)), Type::Bool),
                    };
                    me.restore(blk, tape, &mut l);
                    let r = me.rev_bare(blk, Some(Cot::Value(xb.clone())), &fvs, &[], &threads)?;
                    Ok(l.wrap_live(me.b, r, &me.restored))
                };
                let tr = branch(self, t, true)?;
                let fr = branch(self, f, false)?;
                let cond = self.atom(c);
                let e = self.b.if_(cond, tr, fr);
                let (rn, rt) = self.bind(lets, "r", e);
                for (k, (n, t)) in fvs.iter().enumerate() {
                    let rv = self.b.var(&rn, rt.clone());
                    let c = self.proj(rv, k);
                    out.push((n.clone(), t.clone(), Contrib::Value(c), Zero::No));
                }
                self.rethread(&rn, &rt, fvs.len(), &threads, lets, accs);
            }
            Rhs::Loop {
                kind: LoopKind::Build,
                ..
            } => return self.rule_build(bd, &Cot::Value(xb.clone()), lets, accs),
            Rhs::Loop {
                kind: LoopKind::IFold,
                n,
                state: Some((z, s, sty)),
                index,
                body,
            } if linear_state(body, s, sty) => {
                // R-IFold-Linear: every iteration's state cotangent is x̄,
                // so the iterations run backwards independently, as the
                // elements of a `build` (in increasing order), from x̄.
                let mut fvs = free_vars(body);
                fvs.retain(|(v, t)| {
                    v != index && v != s && t.has_double() && self.active.contains(v)
                });
                let (threads, w) = self.split(&fvs, accs, None);
                let per = Iteration {
                    bd,
                    body,
                    n,
                    index,
                    carried: sty,
                    offset: 1,
                };
                if threadable(&threads, &w) {
                    self.map_threaded(
                        &per,
                        Seeding::Same(xb.clone()),
                        &w,
                        &threads,
                        lets,
                        accs,
                        &mut out,
                    )?;
                } else {
                    let bare: Vec<Option<ReadOnce>> =
                        fvs.iter().map(|(v, _)| read_once(body, v)).collect();
                    let mut l = Lets(Vec::new());
                    // The state is never restored: the bindings on its path
                    // are recomputed ones nothing reads, so left out.
                    self.restore_iteration(&per, &mut l);
                    self.map_contributions(body, n, index, l, xb, &fvs, &bare, lets, &mut out)?;
                    if let Some(done) = self.deferred.get_mut(&bd.name) {
                        // R-Defer, unfused: the fold itself, here.
                        *done = true;
                        let v = to_ir::plain_rhs(self.b, bd);
                        lets.0.push((bd.name.clone(), v));
                    }
                }
                // z̄ ⊕= x̄, the state cotangent before the first iteration.
                if let Atom::Var(zn, zt) = z {
                    let c = self.b.var(xb, ct.clone());
                    out.push((zn.clone(), zt.clone(), Contrib::Value(c), Zero::No));
                }
            }
            Rhs::Loop {
                kind,
                n,
                state: Some((z, s, sty)),
                index,
                body,
            } => {
                // R-IFold / R-IScan: a backward loop carries the state's
                // cotangent; a backward `iscan` records each iteration's
                // contributions, which are then summed or joined, or a
                // backward `ifold` threads the accumulators and sums the
                // rest (R-IFold-Acc).
                let st = self.subtapes[&bd.name].clone();
                let stt = Type::array(Type::pair(sty.clone(), self.tape_type(body)));
                let mut fvs = free_vars(body);
                fvs.retain(|(v, t)| {
                    v != index && v != s && t.has_double() && self.active.contains(v)
                });
                let (threads, w) = self.split(&fvs, accs, None);
                let threaded = threadable(&threads, &w);
                let fvs = if threaded { w } else { fvs };
                let bare: Vec<Option<ReadOnce>> = if threaded {
                    vec![None; fvs.len()]
                } else {
                    fvs.iter().map(|(v, _)| read_once(body, v)).collect()
                };
                let sct = cotangent_type(sty);
                // Dense state cotangents (an iscan's result is an array).
                let dense = if *kind == LoopKind::IScan {
                    let z0 = self.zero_ct(sty);
                    let nv = self.atom(n);
                    let one = self.b.index(1);
                    let len = self.b.prim(Prim::Add, vec![nv, one], Type::Index);
                    let xv = self.b.var(xb, ct.clone());
                    let d = self
                        .b
                        .prim(Prim::Accum, vec![z0, len, xv], Type::array(sct.clone()));
                    Some(self.bind(lets, "dense", d))
                } else {
                    None
                };
                let init_state = match &dense {
                    Some((dn, dt)) => {
                        let dv = self.b.var(dn, dt.clone());
                        let nv = self.atom(n);
                        self.b.get(dv, nv)
                    }
                    None => self.b.var(xb, ct.clone()),
                };
                let mut zeros: Vec<ExprId> = fvs
                    .iter()
                    .zip(&bare)
                    .map(|((_, t), b)| {
                        if b.is_some() {
                            self.bare_zero(t)
                        } else {
                            self.zero_ct(t)
                        }
                    })
                    .collect();
                if threaded {
                    for (_, a) in &threads {
                        zeros.push(self.b.var(a, acc_type()));
                    }
                }
                let zeros = self.tuple(zeros);
                let init = self.b.pair(init_state, zeros);
                let acc_t = self.b.ty(init);
                // Step k handles iteration i = n - 1 - k.
                let (acc, k) = (self.b.fresh("acc"), self.b.fresh("k"));
                // n - 1, once, outside the loop.
                let nv = self.atom(n);
                let one = self.b.index(1);
                let nm1 = self.b.prim(Prim::Sub, vec![nv, one], Type::Index);
                let (nm1n, _) = self.bind(lets, "last", nm1);
                let mut l = Lets(Vec::new());
                let nm1v = self.b.var(&nm1n, Type::Index);
                let kv = self.b.var(&k, Type::Index);
                let i_e = self.b.prim(Prim::Sub, vec![nm1v, kv], Type::Index);
                l.0.push((index.clone(), i_e));
                let av = self.b.var(&acc, acc_t.clone());
                let sb = self.b.fst(av);
                let (sbn, _) = self.bind(&mut l, "sb", sb);
                // The accumulators, from the state (threaded only).
                let mut inner: Accs = Vec::new();
                if threaded {
                    for (j, (root, _)) in threads.iter().enumerate() {
                        let av = self.b.var(&acc, acc_t.clone());
                        let rest = self.b.snd(av);
                        let a = self.proj(rest, fvs.len() + j);
                        let (an, _) = self.bind(&mut l, "acc", a);
                        inner.push((root.clone(), an));
                    }
                }
                let sv = self.b.var(&st, stt.clone());
                let iv = self.b.var(index, Type::Index);
                let e = self.b.get(sv, iv);
                let s_i = self.b.fst(e);
                l.0.push((s.clone(), s_i));
                // Like the restored values: in bounds, left out if unused.
                self.restored.insert(s.clone());
                let tape = self.iteration_tape(bd, sty, body, index, 1);
                self.restore(body, tape, &mut l);
                let mut wanted = vec![(s.clone(), sty.clone())];
                wanted.extend(fvs.iter().cloned());
                let mut wanted_bare = vec![None];
                wanted_bare.extend(bare.iter().cloned());
                let r =
                    self.rev_bare(body, Some(Cot::Value(sbn)), &wanted, &wanted_bare, &inner)?;
                let (rn, rt) = self.bind(&mut l, "r", r);
                let rv = self.b.var(&rn, rt.clone());
                let mut new_sb = self.b.fst(rv);
                if let Some((dn, dt)) = &dense {
                    let dv = self.b.var(dn, dt.clone());
                    let iv = self.b.var(index, Type::Index);
                    let d_i = self.b.get(dv, iv);
                    new_sb = self.add_ct(new_sb, d_i, sty);
                }
                let rest = if threaded {
                    // (sums ⊕ this iteration's, accumulators).
                    let mut items = Vec::new();
                    for (j, (_, t)) in fvs.iter().enumerate() {
                        let av = self.b.var(&acc, acc_t.clone());
                        let old = self.b.snd(av);
                        let old = self.proj(old, j);
                        let rv = self.b.var(&rn, rt.clone());
                        let c = self.proj(rv, 1 + j);
                        items.push(self.add_ct(old, c, t));
                    }
                    for j in 0..threads.len() {
                        let rv = self.b.var(&rn, rt.clone());
                        items.push(self.proj(rv, 1 + fvs.len() + j));
                    }
                    self.tuple(items)
                } else {
                    let rv = self.b.var(&rn, rt);
                    self.b.snd(rv)
                };
                let step = self.b.pair(new_sb, rest);
                let body_e = l.wrap_live(self.b, step, &self.restored);
                let lam_k = self.b.lam(k, Type::Index, body_e);
                let f = self.b.lam(acc, acc_t.clone(), lam_k);
                let nv = self.atom(n);
                let op = if threaded { Prim::IFold } else { Prim::IScan };
                let out_t = if threaded {
                    acc_t.clone()
                } else {
                    Type::array(acc_t.clone())
                };
                let scan = self.b.prim(op, vec![f, init, nv], out_t);
                let (bn, bt) = self.bind(lets, "back", scan);
                // The state cotangent after all iterations.
                let last_state = |me: &mut Self| {
                    let bv = me.b.var(&bn, bt.clone());
                    if threaded {
                        bv
                    } else {
                        let nv = me.atom(n);
                        me.b.get(bv, nv)
                    }
                };
                // z̄ ⊕= the state cotangent after all iterations.
                if let Atom::Var(zn, zt) = z {
                    let last = last_state(self);
                    let c = self.b.fst(last);
                    out.push((zn.clone(), zt.clone(), Contrib::Value(c), Zero::No));
                }
                if threaded {
                    let last = last_state(self);
                    let rest = self.b.snd(last);
                    let (rn, rt) = self.bind(lets, "sums", rest);
                    for (k, (v, t)) in fvs.iter().enumerate() {
                        let rv = self.b.var(&rn, rt.clone());
                        let c = self.proj(rv, k);
                        out.push((v.clone(), t.clone(), Contrib::Value(c), Zero::No));
                    }
                    self.rethread(&rn, &rt, fvs.len(), &threads, lets, accs);
                } else {
                    for (k, (v, t)) in fvs.iter().enumerate() {
                        let total = if bare[k].is_some() {
                            self.gather_bare(&bn, &bt, k, 1, true)
                        } else {
                            self.reduce(&bn, &bt, k, true, t)
                        };
                        out.push((v.clone(), t.clone(), Contrib::Value(total), Zero::No));
                    }
                }
            }
            Rhs::Loop { .. } => unreachable!("folds have a state"),
        }
        Ok(out)
    }

    /// The rules of a placed binding, whose cotangent is in an accumulator
    /// (§5.6): a `build`'s elements run backwards from their places
    /// (R-Build-Acc), an array literal's operands receive their slots
    /// (R-Vector-Acc).
    fn placed_contributions(
        &mut self,
        bd: &Binding,
        p: &Place,
        lets: &mut Lets,
        accs: &mut Accs,
    ) -> Result<Vec<(Name, Type, Contrib, Zero)>, AdError> {
        match &bd.rhs {
            Rhs::Loop {
                kind: LoopKind::Build,
                ..
            } => self.rule_build(bd, &Cot::At(p.clone()), lets, accs),
            Rhs::Array(args) => {
                // R-Vector-Acc
                let Type::Array(el) = &bd.ty else {
                    unreachable!("array literal of array type")
                };
                let mut out = Vec::new();
                for (j, a) in args.iter().enumerate() {
                    let Atom::Var(n, t) = a else { continue };
                    let nd = self.b.var(&p.node, node_type(&bd.ty));
                    let jv = self.b.index(j as i64);
                    if **el == Type::Double {
                        let at = self.b.prim(Prim::Add, vec![nd, jv], Type::Index);
                        let acc = self.b.var(&acc_of(accs, &p.root), acc_type());
                        let c = self.b.get(acc, at);
                        out.push((n.clone(), t.clone(), Contrib::Value(c), Zero::No));
                    } else {
                        let sub = self.b.get(nd, jv);
                        let (sn, _) = self.bind(lets, "node", sub);
                        let place = Place {
                            root: p.root.clone(),
                            node: sn,
                        };
                        out.push((n.clone(), t.clone(), Contrib::At(place), Zero::No));
                    }
                }
                Ok(out)
            }
            _ => unreachable!("only builds, literals and reads are placed"),
        }
    }

    /// R-Build, and R-Build-Acc for a placed `build`: the cotangent becomes
    /// dense once (`accum`, or it is in an accumulator already); each
    /// element's body runs backwards on its own tape. With accumulators to
    /// thread and no array among the other free variables, the elements
    /// run in a backward-compatible `ifold` that threads them (§5.6);
    /// otherwise in a `build` whose contributions are summed (doubles) or
    /// joined (lists).
    fn rule_build(
        &mut self,
        bd: &Binding,
        cot: &Cot,
        lets: &mut Lets,
        accs: &mut Accs,
    ) -> Result<Vec<(Name, Type, Contrib, Zero)>, AdError> {
        let Rhs::Loop { n, index, body, .. } = &bd.rhs else {
            unreachable!("a build")
        };
        let Type::Array(el) = &bd.ty else {
            unreachable!("build has an array type")
        };
        let mut out = Vec::new();
        let mut fvs = free_vars(body);
        fvs.retain(|(v, t)| v != index && t.has_double() && self.active.contains(v));
        // Elements that are arrays run backwards from their places in the
        // build's own accumulator, so it is threaded too; Double elements
        // only read their seeds from it.
        let own = match cot {
            Cot::At(p) if **el != Type::Double => Some(&p.root),
            _ => None,
        };
        let (threads, w) = self.split(&fvs, accs, own);
        let per = Iteration {
            bd,
            body,
            n,
            index,
            carried: el,
            offset: 0,
        };
        if threadable(&threads, &w) {
            let seeding = match cot {
                Cot::Value(xb) => {
                    let (dn, dt) = self.densify(xb, el, n, lets);
                    Seeding::Dense(dn, dt)
                }
                Cot::At(p) => Seeding::Place(p.clone(), (**el).clone()),
            };
            self.map_threaded(&per, seeding, &w, &threads, lets, accs, &mut out)?;
            return Ok(out);
        }
        let bare: Vec<Option<ReadOnce>> = fvs.iter().map(|(v, _)| read_once(body, v)).collect();
        let mut l = Lets(Vec::new());
        self.restore_iteration(&per, &mut l);
        let seed = match cot {
            Cot::Value(xb) => {
                let (dn, dt) = self.densify(xb, el, n, lets);
                let dv = self.b.var(&dn, dt);
                let iv = self.b.var(index, Type::Index);
                self.b.get(dv, iv)
            }
            Cot::At(p) => {
                // Element i's cotangent read out of the accumulator.
                let acc = V::new(&acc_of(accs, &p.root), &acc_type());
                let nd = self.b.var(&p.node, node_type(&bd.ty));
                let iv = self.b.var(index, Type::Index);
                if **el == Type::Double {
                    let at = self.b.prim(Prim::Add, vec![nd, iv], Type::Index);
                    let av = self.b.var(&acc.name, acc_type());
                    self.b.get(av, at)
                } else {
                    let sub = self.b.get(nd, iv);
                    let (sn, _) = self.bind(&mut l, "node", sub);
                    let xv = self.b.var(&bd.name, bd.ty.clone());
                    let iv = self.b.var(index, Type::Index);
                    let xi = self.b.get(xv, iv);
                    let (xn, _) = self.bind(&mut l, "x", xi);
                    accum::to_sparse(self.b, &acc, &V::new(&sn, &node_type(el)), &V::new(&xn, el))
                }
            }
        };
        let (sn, _) = self.bind(&mut l, "seed", seed);
        self.map_contributions(body, n, index, l, &sn, &fvs, &bare, lets, &mut out)?;
        Ok(out)
    }

    /// `accum 0_T n x̄`: a build's cotangent list made dense once.
    fn densify(&mut self, xb: &Name, el: &Type, n: &Atom, lets: &mut Lets) -> (Name, Type) {
        let z = self.zero_ct(el);
        let nv = self.atom(n);
        let xv = self.b.var(xb, cotangent_type(&Type::array(el.clone())));
        let dense = self.b.prim(
            Prim::Accum,
            vec![z, nv, xv],
            Type::array(cotangent_type(el)),
        );
        self.bind(lets, "dense", dense)
    }

    /// R-Build and R-IFold-Linear threading accumulators (§5.6): iteration
    /// `index` restores its tape, runs the body backwards from its seed
    /// with the accumulators from the state, and passes them on with the
    /// sums of the other free variables' cotangents (doubles, or tuples of
    /// them): `ifold (fun st i -> …) (accs, 0_W) n`.
    #[allow(clippy::too_many_arguments, reason = "the parts of one rule")]
    fn map_threaded(
        &mut self,
        per: &Iteration<'_>,
        seeding: Seeding,
        w: &[(Name, Type)],
        threads: &Accs,
        lets: &mut Lets,
        accs: &mut Accs,
        out: &mut Vec<(Name, Type, Contrib, Zero)>,
    ) -> Result<(), AdError> {
        let m = threads.len();
        // R-Defer: a deferred fold's own state rides along, last.
        let carry = match &per.bd.rhs {
            Rhs::Loop {
                state: Some((z, s, _)),
                ..
            } if self.deferred.contains_key(&per.bd.name) => Some((z, s)),
            _ => None,
        };
        let mut init = Vec::new();
        for (_, a) in threads {
            init.push(self.b.var(a, acc_type()));
        }
        for (_, t) in w {
            init.push(self.zero_ct(t));
        }
        if let Some((z, _)) = carry {
            init.push(self.atom(z));
        }
        let init = self.tuple(init);
        let st_t = self.b.ty(init);
        let st = self.b.fresh("st");
        let mut l = Lets(Vec::new());
        let mut inner: Accs = Vec::new();
        for (k, (root, _)) in threads.iter().enumerate() {
            let sv = self.b.var(&st, st_t.clone());
            let a = self.proj(sv, k);
            let (an, _) = self.bind(&mut l, "acc", a);
            inner.push((root.clone(), an));
        }
        if let Some((_, s)) = carry {
            let sv = self.b.var(&st, st_t.clone());
            let e = self.proj(sv, m + w.len());
            l.0.push((s.clone(), e));
        }
        self.restore_iteration(per, &mut l);
        let seed = match seeding {
            Seeding::Same(xb) => Cot::Value(xb),
            Seeding::Dense(dn, dt) => {
                let dv = self.b.var(&dn, dt);
                let iv = self.b.var(per.index, Type::Index);
                let e = self.b.get(dv, iv);
                Cot::Value(self.bind(&mut l, "seed", e).0)
            }
            Seeding::Place(p, el) => {
                let nd = self.b.var(&p.node, node_type(&Type::array(el.clone())));
                let iv = self.b.var(per.index, Type::Index);
                if el == Type::Double {
                    let at = self.b.prim(Prim::Add, vec![nd, iv], Type::Index);
                    let acc = self.b.var(&acc_of(accs, &p.root), acc_type());
                    let e = self.b.get(acc, at);
                    Cot::Value(self.bind(&mut l, "seed", e).0)
                } else {
                    let e = self.b.get(nd, iv);
                    let (sn, _) = self.bind(&mut l, "node", e);
                    Cot::At(Place {
                        root: p.root,
                        node: sn,
                    })
                }
            }
        };
        let r = self.rev_bare(per.body, Some(seed), w, &[], &inner)?;
        let (rn, rt) = self.bind(&mut l, "r", r);
        let mut next = Vec::new();
        for k in 0..m {
            let rv = self.b.var(&rn, rt.clone());
            next.push(self.proj(rv, w.len() + k));
        }
        for (k, (_, t)) in w.iter().enumerate() {
            let sv = self.b.var(&st, st_t.clone());
            let old = self.proj(sv, m + k);
            let rv = self.b.var(&rn, rt.clone());
            let c = self.proj(rv, k);
            next.push(self.add_ct(old, c, t));
        }
        if carry.is_some() {
            next.push(self.atom(&per.body.result));
        }
        let next = self.tuple(next);
        let body_e = l.wrap_live(self.b, next, &self.restored);
        let lam_i = self.b.lam(per.index.clone(), Type::Index, body_e);
        let f = self.b.lam(st, st_t.clone(), lam_i);
        let nv = self.atom(per.n);
        let fold = self.b.prim(Prim::IFold, vec![f, init, nv], st_t);
        let (fname, ft) = self.bind(lets, "fold", fold);
        self.rethread(&fname, &ft, 0, threads, lets, accs);
        if carry.is_some() {
            let fv = self.b.var(&fname, ft.clone());
            let x = self.proj(fv, m + w.len());
            lets.0.push((per.bd.name.clone(), x));
            self.deferred.insert(per.bd.name.clone(), true);
        }
        for (k, (v, t)) in w.iter().enumerate() {
            let fv = self.b.var(&fname, ft.clone());
            let c = self.proj(fv, m + k);
            out.push((v.clone(), t.clone(), Contrib::Value(c), Zero::No));
        }
        Ok(())
    }

    /// R-Defer: the program's value, the last component of the entry's
    /// reverse-sweep tuple `adjs` (after its one cotangent or accumulator).
    fn deferred_value(&mut self, adjs: &Name, t: &Type, lets: &mut Lets) -> (Name, Type) {
        let av = self.b.var(adjs, t.clone());
        let v = self.proj(av, 1);
        self.bind(lets, "value", v)
    }

    /// Iteration `per.index`'s values in `l`, for its reverse: restored
    /// from the loop's sub-tape (§4.3), or, for a checkpointed loop,
    /// computed again (R-Checkpoint).
    fn restore_iteration(&mut self, per: &Iteration<'_>, l: &mut Lets) {
        if self.checkpointed.contains(&per.bd.name) {
            self.recompute(per.body, l);
        } else {
            let tape = self.iteration_tape(per.bd, per.carried, per.body, per.index, per.offset);
            self.restore(per.body, tape, l);
        }
    }

    /// R-Checkpoint: the lets of fwd(B) (§4.2) without the tape tuple, so
    /// that B's variables are bound as `restore` would bind them, and each
    /// compound binding's sub-tape is the second half of its entry. None
    /// of them can be ⊥ (the forward sweep evaluated the same bindings on
    /// the same values), so, like restored values, each is left out where
    /// nothing mentions it — among them the bindings on a linear state's
    /// path, which mention the state the reverse sweep does not have.
    fn recompute(&mut self, blk: &Block, lets: &mut Lets) {
        let start = lets.0.len();
        for bd in &blk.binds {
            let Some(en) = self.fwd_binding(bd, lets) else {
                continue;
            };
            if matches!(bd.rhs, Rhs::Prim(..) | Rhs::Array(_)) || self.unrecorded(bd) {
                continue;
            }
            let et = self.entry_type(bd);
            let ev = self.b.var(&en, et);
            let sub = self.b.snd(ev);
            let (sn, _) = self.bind(lets, "st", sub);
            self.subtapes.insert(bd.name.clone(), sn);
        }
        for (n, _) in &lets.0[start..] {
            self.restored.insert(n.clone());
        }
    }

    /// The tape of iteration `index` of the loop `bd`, whose sub-tape holds
    /// `(carried, tape of body)` pairs: `snd st[index + offset]` (offset 1
    /// for folds, whose `st[0]` is the initial state), or the placeholder
    /// `false` for an untaped loop, whose body restores from nothing.
    fn iteration_tape(
        &mut self,
        bd: &Binding,
        carried: &Type,
        body: &Block,
        index: &Name,
        offset: i64,
    ) -> ExprId {
        if untaped(bd) {
            return self.b.add(Expr::Lit(Lit::Bool(false)), Type::Bool);
        }
        let st = self.subtapes[&bd.name].clone();
        let stt = Type::array(Type::pair(carried.clone(), self.tape_type(body)));
        let sv = self.b.var(&st, stt);
        let mut at = self.b.var(index, Type::Index);
        if offset != 0 {
            let o = self.b.index(offset);
            at = self.b.prim(Prim::Add, vec![at, o], Type::Index);
        }
        let e = self.b.get(sv, at);
        self.b.snd(e)
    }

    /// The tail of R-Build and R-IFold-Linear: iteration `index` of a loop
    /// over `n` runs `body` backwards from `seed` after the lets `l`
    /// (its restore), `cs = build n (fun index -> l; rev(body, seed, W))`
    /// records the contributions, and each `w ∈ W` gets their ⊕. With a
    /// single free variable each contribution is stored bare, so a list
    /// is joined without a gather.
    #[allow(clippy::too_many_arguments, reason = "the parts of one rule")]
    fn map_contributions(
        &mut self,
        body: &Block,
        n: &Atom,
        index: &Name,
        l: Lets,
        seed: &Name,
        fvs: &[(Name, Type)],
        bare: &[Option<ReadOnce>],
        lets: &mut Lets,
        out: &mut Vec<(Name, Type, Contrib, Zero)>,
    ) -> Result<(), AdError> {
        let mut r = self.rev_bare(body, Some(Cot::Value(seed.clone())), fvs, bare, &[])?;
        let single = fvs.len() == 1;
        if single {
            r = self.proj(r, 0);
        }
        let per = l.wrap_live(self.b, r, &self.restored);
        let lam = self.b.lam(index.clone(), Type::Index, per);
        let nv = self.atom(n);
        let pt = self.b.ty(lam).fun_result();
        let contribs = self
            .b
            .prim(Prim::Build, vec![nv, lam], Type::array(pt.clone()));
        let (cn, ctt) = self.bind(lets, "contribs", contribs);
        for (k, (v, t)) in fvs.iter().enumerate() {
            let total = if single && bare[k].is_some() {
                // Bare contributions: the pairs are the list.
                self.b.var(&cn, ctt.clone())
            } else if single {
                let cv = self.b.var(&cn, ctt.clone());
                self.sum_array(cv, t, &cotangent_type(t))
            } else if bare[k].is_some() {
                self.gather_bare(&cn, &ctt, k, 0, false)
            } else {
                self.reduce(&cn, &ctt, k, false, t)
            };
            out.push((v.clone(), t.clone(), Contrib::Value(total), Zero::No));
        }
        Ok(())
    }

    /// ⊕ over j of component `k` of the tuple in `arr[j]` (for a backward
    /// scan, the tuple is the second half of each state), for a variable of
    /// type `t`.
    fn reduce(&mut self, arr: &Name, arr_t: &Type, k: usize, in_state: bool, t: &Type) -> ExprId {
        let ct = cotangent_type(t);
        // For a backward scan, element j is (state cotangent, tuple); its
        // first element holds the initial zeros, harmless to include.
        let element = |me: &mut Self, j: &Name| -> ExprId {
            let av = me.b.var(arr, arr_t.clone());
            let jv = me.b.var(j, Type::Index);
            let e = me.b.get(av, jv);
            let tup = if in_state { me.b.snd(e) } else { e };
            me.proj(tup, k)
        };
        let av = self.b.var(arr, arr_t.clone());
        let count = self.b.length(av);
        match t {
            Type::Double => {
                let (s, j) = (self.b.fresh("s"), self.b.fresh("j"));
                let sv = self.b.var(&s, Type::Double);
                let x = element(self, &j);
                let sum = self.b.dop(Prim::Add, vec![sv, x]);
                let lj = self.b.lam(j, Type::Index, sum);
                let f = self.b.lam(s, Type::Double, lj);
                let z = self.b.double(0.0);
                self.b.prim(Prim::IFold, vec![f, z, count], Type::Double)
            }
            _ => {
                // Lists (and tuples containing them): gather every
                // iteration's cotangent, then ⊕ them in one pass.
                let gathered = self.build_with(count, element);
                self.sum_array(gathered, t, &ct)
            }
        }
    }

    /// `build n (fun j -> f j)`, with `f` given this transformer.
    fn build_with(&mut self, n: ExprId, f: impl FnOnce(&mut Self, &Name) -> ExprId) -> ExprId {
        let j = self.b.fresh("j");
        let body = f(self, &j);
        let et = self.b.ty(body);
        let lam = self.b.lam(j, Type::Index, body);
        self.b.prim(Prim::Build, vec![n, lam], Type::array(et))
    }

    /// ⊕ of all elements of an array of cotangents of values of type `t`.
    fn sum_array(&mut self, arr: ExprId, t: &Type, ct: &Type) -> ExprId {
        match t {
            Type::Array(_) => self.b.prim(Prim::Concat, vec![arr], ct.clone()),
            Type::Double => {
                let (s, j, a) = (self.b.fresh("s"), self.b.fresh("j"), self.b.fresh("a"));
                let at = self.b.ty(arr);
                let sv = self.b.var(&s, Type::Double);
                let av = self.b.var(&a, at.clone());
                let jv = self.b.var(&j, Type::Index);
                let x = self.b.get(av, jv);
                let sum = self.b.dop(Prim::Add, vec![sv, x]);
                let lj = self.b.lam(j, Type::Index, sum);
                let f = self.b.lam(s, Type::Double, lj);
                let z = self.b.double(0.0);
                let av = self.b.var(&a, at);
                let len = self.b.length(av);
                let fold = self.b.prim(Prim::IFold, vec![f, z, len], Type::Double);
                self.b.let_(a, arr, fold)
            }
            Type::Pair(x, y) => {
                let a = self.b.fresh("a");
                let at = self.b.ty(arr);
                let (cx, cy) = (cotangent_type(x), cotangent_type(y));
                let av = self.b.var(&a, at.clone());
                let len = self.b.length(av);
                let firsts = self.b.build(len, |b, j| {
                    let av = b.var(&a, at.clone());
                    let jv = b.var(j, Type::Index);
                    let e = b.get(av, jv);
                    b.fst(e)
                });
                let fx = self.sum_array(firsts, x, &cx);
                let av = self.b.var(&a, at.clone());
                let len = self.b.length(av);
                let seconds = self.b.build(len, |b, j| {
                    let av = b.var(&a, at.clone());
                    let jv = b.var(j, Type::Index);
                    let e = b.get(av, jv);
                    b.snd(e)
                });
                let sy = self.sum_array(seconds, y, &cy);
                let p = self.b.pair(fx, sy);
                self.b.let_(a, arr, p)
            }
            _ => self.default_of(ct),
        }
    }

    /// A cotangent of type CT[t] as a dense value shaped like `primal`.
    fn dense(&mut self, ct: ExprId, primal: ExprId, t: &Type) -> ExprId {
        match t {
            Type::Array(el) if el.has_double() => {
                let (cn, pn) = (self.b.fresh("c"), self.b.fresh("p"));
                let (ctt, pt) = (self.b.ty(ct), self.b.ty(primal));
                let pv = self.b.var(&pn, pt.clone());
                let len = self.b.length(pv);
                let z = self.zero_ct(el);
                let cv = self.b.var(&cn, ctt.clone());
                let acc = self.b.prim(
                    Prim::Accum,
                    vec![z, len, cv],
                    Type::array(cotangent_type(el)),
                );
                let (an, at) = (self.b.fresh("d"), self.b.ty(acc));
                let body = if **el == Type::Double {
                    self.b.var(&an, at.clone())
                } else {
                    let pv = self.b.var(&pn, pt.clone());
                    let len = self.b.length(pv);
                    self.b.build(len, |b, j| {
                        let mut me = Reverse::new(b);
                        let av = me.b.var(&an, at.clone());
                        let jv = me.b.var(j, Type::Index);
                        let cj = me.b.get(av, jv);
                        let pv = me.b.var(&pn, pt.clone());
                        let jv = me.b.var(j, Type::Index);
                        let pj = me.b.get(pv, jv);
                        me.dense(cj, pj, el)
                    })
                };
                let inner = self.b.let_(an, acc, body);
                let inner = self.b.let_(pn, primal, inner);
                self.b.let_(cn, ct, inner)
            }
            Type::Pair(x, y) => self.pairwise((ct, "c"), (primal, "p"), [x, y], |me, c, p, t| {
                me.dense(c, p, t)
            }),
            _ => ct,
        }
    }

    /// A dense cotangent `w` of a value of type `t` as CT[t] (a sparse list
    /// for arrays).
    fn sparse(&mut self, w: ExprId, t: &Type) -> ExprId {
        match t {
            Type::Array(el) => {
                let wn = self.b.fresh("w");
                let wt = self.b.ty(w);
                let wv = self.b.var(&wn, wt.clone());
                let len = self.b.length(wv);
                let list = self.b.build(len, |b, j| {
                    let mut me = Reverse::new(b);
                    let wv = me.b.var(&wn, wt.clone());
                    let jv = me.b.var(j, Type::Index);
                    let x = me.b.get(wv, jv);
                    let c = me.sparse(x, el);
                    let jv = me.b.var(j, Type::Index);
                    me.b.pair(jv, c)
                });
                self.b.let_(wn, w, list)
            }
            Type::Pair(x, y) => {
                let wn = self.b.fresh("w");
                let wt = self.b.ty(w);
                let wv = self.b.var(&wn, wt.clone());
                let a = self.b.fst(wv);
                let a = self.sparse(a, x);
                let wv = self.b.var(&wn, wt);
                let c = self.b.snd(wv);
                let c = self.sparse(c, y);
                let p = self.b.pair(a, c);
                self.b.let_(wn, w, p)
            }
            _ => w,
        }
    }
}

/// The reverse-mode program for a normalised entry: a definition
/// `name = fun p₁ … pₙ w -> (f p₁ … pₙ, ∂⟨w, f⟩/∂p_wrt)` taking the result's
/// cotangent `w` (dense, shaped like the result), or, when `seed` is
/// false, `fun p₁ … pₙ -> (f …, ∇_{p_wrt} f)` for a Double result (seed 1).
pub(super) fn reverse_program(
    b: &mut Builder<'_>,
    normal: &Normal,
    wrt: usize,
    seed: bool,
    name: &str,
    checkpointing: super::Checkpointing,
) -> Result<Def, AdError> {
    let mut r = Reverse::new(b);
    let body = &fuse_sums(&normal.body);
    r.active.insert(normal.params[wrt].0.clone());
    activity(body, &mut r.active);
    if checkpointing == super::Checkpointing::Loops {
        r.checkpointed = checkpoints(body);
    }
    for (x, path) in deferrals(body, &r.checkpointed) {
        r.deferred.insert(x, false);
        r.deferred_path.extend(path);
    }
    let result_t = body.result.ty().clone();
    let mut lets = Lets(Vec::new());
    let fr = r.fwd(body);
    let (frn, frt) = r.bind(&mut lets, "fwd", fr);
    // R-Defer: the value is the last component of the reverse sweep's
    // tuple, after the wanted cotangents and the accumulators (one each).
    let deferred = !r.deferred.is_empty();
    let mut value_of = None;
    if !deferred {
        let fv = r.b.var(&frn, frt.clone());
        let value = r.b.fst(fv);
        value_of = Some(r.bind(&mut lets, "value", value));
    }
    let fv = r.b.var(&frn, frt);
    let tape = r.b.snd(fv);
    r.restore(body, tape, &mut lets);
    let w: Name = Rc::from("w'seed");
    let seed_e = if seed {
        let wv = r.b.var(&w, result_t.clone());
        r.sparse(wv, &result_t)
    } else {
        r.b.double(1.0)
    };
    let (sn, _) = r.bind(&mut lets, "seed", seed_e);
    let (pn, pt) = normal.params[wrt].clone();
    let gd = if accumulable(&pt) {
        // The parameter's cotangent in an accumulator (§5.6), the
        // gradient shaped like it at the end.
        let p = V::new(&pn, &pt);
        let n = accum::leaf_count(r.b, &p);
        let z = accum::zeros(r.b, n);
        let (acc, _) = r.bind(&mut lets, "acc", z);
        let zero = r.b.index(0);
        let (base, _) = r.bind(&mut lets, "base", zero);
        let node = accum::offsets(r.b, &p, &V::new(&base, &Type::Index));
        let (node, _) = r.bind(&mut lets, "node", node);
        r.places.insert(
            pn.clone(),
            Place {
                root: pn.clone(),
                node: node.clone(),
            },
        );
        let adjs = r.rev_bare(body, Some(Cot::Value(sn)), &[], &[], &[(pn.clone(), acc)])?;
        let (an, at) = r.bind(&mut lets, "adjs", adjs);
        if deferred {
            value_of = Some(r.deferred_value(&an, &at, &mut lets));
        }
        let av = r.b.var(&an, at);
        let g = r.proj(av, 0);
        if pt == Type::array(Type::Double) {
            // A vector's accumulator is its gradient.
            g
        } else {
            let (gn, _) = r.bind(&mut lets, "grad", g);
            accum::reshape(
                r.b,
                &V::new(&gn, &Type::array(Type::Double)),
                &V::new(&node, &node_type(&pt)),
                &p,
            )
        }
    } else {
        let adjs = r.rev(body, Some(sn), &[(pn.clone(), pt.clone())])?;
        let (an, at) = r.bind(&mut lets, "adjs", adjs);
        if deferred {
            value_of = Some(r.deferred_value(&an, &at, &mut lets));
        }
        let av = r.b.var(&an, at);
        let g = r.proj(av, 0);
        let pv = r.b.var(&pn, pt.clone());
        r.dense(g, pv, &pt)
    };
    let (vn, vt) = value_of.expect("the value, from one sweep or the other");
    let vv = r.b.var(&vn, vt);
    let out = r.b.pair(vv, gd);
    let mut e = lets.wrap_live(r.b, out, &r.restored);
    if seed {
        let t = Type::fun(result_t.clone(), r.b.ty(e));
        e = r.b.add(
            Expr::Lam {
                param: w,
                ann: Some(result_t),
                body: e,
            },
            t,
        );
    }
    for (p, t) in normal.params.iter().rev() {
        let ft = Type::fun(t.clone(), r.b.ty(e));
        e = r.b.add(
            Expr::Lam {
                param: p.clone(),
                ann: Some(t.clone()),
                body: e,
            },
            ft,
        );
    }
    Ok(Def {
        name: Rc::from(name),
        span: crate::diagnostic::Span::generated(),
        ann: None,
        body: e,
        prelude: false,
    })
}

/// Whether the array `rhs` binds is made leaf by leaf by it (§5.6, the
/// cost of a root): a `build` or literal of Doubles, or a `build` whose
/// elements are such arrays built in its body.
fn fresh_leaves(rhs: &Rhs) -> bool {
    match rhs {
        Rhs::Array(items) => items.iter().all(|a| *a.ty() == Type::Double),
        Rhs::Loop {
            kind: LoopKind::Build,
            body,
            ..
        } => {
            if *body.result.ty() == Type::Double {
                return true;
            }
            let Some(r) = body.result.var() else {
                return false;
            };
            body.binds
                .iter()
                .any(|b| &b.name == r && fresh_leaves(&b.rhs))
        }
        _ => false,
    }
}

/// A loop binding's parts that its iterations' reverse needs.
struct Iteration<'a> {
    bd: &'a Binding,
    body: &'a Block,
    n: &'a Atom,
    index: &'a Name,
    /// What the sub-tape carries besides each iteration's tape: the
    /// element type (`build`) or the state type (folds).
    carried: &'a Type,
    /// Where iteration i's tape is in the sub-tape: `i + offset`.
    offset: i64,
}

/// Where a threaded map-like loop's iterations start from.
enum Seeding {
    /// Every iteration from the same cotangent (R-IFold-Linear).
    Same(Name),
    /// Element i from slot i of a dense array of cotangents (R-Build).
    Dense(Name, Type),
    /// Element i (of the given type) from its place in an accumulator
    /// (R-Build-Acc).
    Place(Place, Type),
}

/// Whether a loop threads accumulators: it has some to thread, and every
/// other free variable's cotangent is free of arrays, so the iterations'
/// contributions can be summed in the loop's state.
fn threadable(threads: &Accs, w: &[(Name, Type)]) -> bool {
    !threads.is_empty() && w.iter().all(|(_, t)| !cotangent_type(t).has_array())
}

/// Where [`Reverse::deliver`] puts a contribution: the adjoint map (with
/// its zero masks), the current accumulators, and the block's lets.
struct Sink<'s> {
    adj: &'s mut HashMap<Name, Name>,
    masks: &'s mut HashMap<Name, Zero>,
    accs: &'s mut Accs,
    lets: &'s mut Lets,
}

/// Which parts of a cotangent are structural zeros: built by R-Fst/R-Snd
/// (`(x̄, 0)`), read by R-Pair, which drops a zero component instead of
/// multiplying it through the component's partials — exact over the reals,
/// and it keeps `0 · ∞ = NaN` out of IEEE results (§8).
#[derive(Clone, Debug, PartialEq)]
enum Zero {
    /// Not known to be zero.
    No,
    /// Exactly the zero cotangent.
    Yes,
    Pair(Box<Zero>, Box<Zero>),
}

impl Zero {
    fn pair(a: Zero, b: Zero) -> Zero {
        match (a, b) {
            (Zero::Yes, Zero::Yes) => Zero::Yes,
            (Zero::No, Zero::No) => Zero::No,
            (a, b) => Zero::Pair(Box::new(a), Box::new(b)),
        }
    }

    /// Component `k` (0 or 1) of a pair cotangent.
    fn component(&self, k: usize) -> Zero {
        match self {
            Zero::No => Zero::No,
            Zero::Yes => Zero::Yes,
            Zero::Pair(a, b) => {
                if k == 0 {
                    (**a).clone()
                } else {
                    (**b).clone()
                }
            }
        }
    }

    /// The mask of a sum: zero only where both are.
    fn meet(&self, other: &Zero) -> Zero {
        match (self, other) {
            (Zero::Yes, z) | (z, Zero::Yes) => z.clone(),
            (Zero::Pair(a, b), Zero::Pair(c, d)) => Zero::pair(a.meet(c), b.meet(d)),
            _ => Zero::No,
        }
    }
}
