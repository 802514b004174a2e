//! Loops whose iterations each run an inner scalar fold, two iterations at
//! a time with the two folds jammed into one loop (Note [Jamming]).
//!
//! # Note [Jamming]
//!
//! An inner fold with a scalar state is a chain: each iteration's
//! addition waits for the one before, so `ifold (fun t s -> t + row[s] *
//! y[s]) 0.0 m` costs one addition's latency per element however wide
//! the machine is (GMM's triangular products `(Q y)_r`, a matrix–vector
//! product's rows). Reassociating the sum would change its bits; the
//! chains of two iterations of the enclosing loop, however, are
//! independent. So a loop over `r` (a `build`, `ifold` or `iscan`) whose
//! body is
//!
//! ```text
//! pre;  x = ifold (fun t s -> F) z m;  post
//! ```
//!
//! with
//!
//! - `pre` only primitives that allocate nothing and write nothing (no
//!   `addAt`, `concat`, `accum`), none of them fused (Note [Fusion]);
//!   bindings before the fold that read the loop's state, or that the fold
//!   does not need, are moved into `post` (the fold cannot read them);
//! - the fold innermost, its state made of scalars only (Double, Index,
//!   Bool and pairs of them), its body primitives of the same kind and
//!   conditionals of them;
//! - nothing in the iteration on a scratch stack (Note [Scratch arrays]),
//!
//! runs, while `r + 1 < n`, the step
//!
//! ```text
//! pre[r]; pre[r + 1]; (x_r, x_{r+1}) = both folds in one loop; post[r]; post[r + 1]
//! ```
//!
//! (`Lower::jammed`): one loop over `j < min(m_r, m_{r+1})` carries both
//! states and runs both bodies, each with its own iteration's values, in
//! order; then the longer fold's remaining iterations alone. Each chain
//! performs the same operations on the same values in the same order, so
//! every bit is the same; the processor overlaps the two chains.
//!
//! Exactness of ⊥. `pre`, the folds and the moved bindings are pure: they
//! allocate nothing and write nothing, so running some of them early
//! changes nothing but the order of their ⊥s. Everything of the step up
//! to the end of the folds other than `pre[r]` (which starts iteration r
//! either way) runs with a *bail* exit: any ⊥ there — a failing read, an
//! overflow, E-IFold-Bot of a negative `m`, a fold's bounds guard that
//! fails (Note [Bounds guards], tested for both folds before their loop)
//! — abandons the step, and iteration r runs alone as written, with the
//! evaluator's order of ⊥s; the loop then goes on from r + 1. Past the
//! folds, `post[r]` runs before anything of iteration r + 1 that is not
//! pure, so the first ⊥ of the step is the evaluator's. When `n` is odd
//! the last iteration runs alone. The code holds the body three times:
//! two halves of the step and the iteration as written.
//!
//! ## Invariant components
//!
//! `pre` may read the state through a projection whose component the
//! body returns unchanged at its own place (reverse mode's folds pass
//! their accumulators on, and read one: the means' cotangent is a sum
//! over the deviations' cotangents, `ifold (fun t i -> t + -(acc[o + i]))
//! 0.0 n` per row). Iteration r + 1 starts with iteration r's result,
//! whose component there is iteration r's own, so `pre[r + 1]` computed
//! from iteration r's state reads the same value; nothing writes it in
//! place (an `addAt` in place would have to be the last use of the
//! array the result still holds). GMM's batched gradient, d = 20, K = 5:
//! those sums ran one chain at a time, 7% of its samples.

use rustc_hash::FxHashSet as HashSet;

use crate::anf::{Atom, Binding, Block, LoopKind, Rhs};
use crate::ir::{Name, Prim, Type};

/// How a loop body splits for jamming (Note [Jamming]): positions in its
/// bindings.
#[derive(Debug)]
pub struct Plan {
    /// The bindings before the fold that it needs, in order.
    pub pre: Vec<usize>,
    /// The fold.
    pub fold: usize,
    /// The other bindings, in order: those before the fold it does not
    /// need, then those after it.
    pub post: Vec<usize>,
}

/// The plan of the loop body `body` with state `state`, if its iterations
/// can be jammed (Note [Jamming]; the scratch condition is the caller's).
pub fn plan(state: Option<&Name>, body: &Block) -> Option<Plan> {
    let fold = body
        .binds
        .iter()
        .position(|b| !matches!(b.rhs, Rhs::Prim(..)))?;
    let Rhs::Loop {
        kind: LoopKind::IFold,
        state: Some((_, _, st)),
        body: inner,
        ..
    } = &body.binds[fold].rhs
    else {
        return None;
    };
    if !scalars(st) || !pure_block(inner) {
        return None;
    }
    // Everything before the fold stays pure when moved (Note [Jamming]).
    if !body.binds[..fold]
        .iter()
        .all(|b| matches!(&b.rhs, Rhs::Prim(op, _) if pure(*op)))
    {
        return None;
    }
    // What the fold needs, backwards through the bindings before it. A
    // component of the state that the body passes on unchanged is the
    // same in both iterations (Note [Jamming], invariant components): a
    // projection reaching it may be needed, and is not followed back to
    // the state.
    let invariant: HashSet<Name> = match state {
        Some(s) => invariant_projections(body, s)
            .into_iter()
            .map(|(x, _)| x)
            .collect(),
        None => HashSet::default(),
    };
    let mut needed: HashSet<Name> = HashSet::default();
    body.binds[fold]
        .rhs
        .for_each_atom(&mut |a| needed.extend(a.var().cloned()));
    let mut pre = Vec::new();
    for k in (0..fold).rev() {
        let bind = &body.binds[k];
        if let Rhs::Prim(_, args) = &bind.rhs
            && needed.contains(&bind.name)
        {
            if !invariant.contains(&bind.name) {
                needed.extend(args.iter().filter_map(Atom::var).cloned());
            }
            pre.push(k);
        }
    }
    if state.is_some_and(|s| needed.contains(s)) {
        return None;
    }
    pre.reverse();
    let post = (0..body.binds.len())
        .filter(|k| *k != fold && !pre.contains(k))
        .collect();
    Some(Plan { pre, fold, post })
}

/// The projections of the state `s` in `body`'s bindings (a chain of
/// `fst`/`snd` from `s`) that the body returns at their own place, with
/// their paths: every iteration starts with the same value there.
pub(super) fn invariant_projections(body: &Block, s: &Name) -> Vec<(Name, Vec<bool>)> {
    let mut paths: Vec<(&Name, Vec<bool>)> = Vec::new();
    let path_of = |paths: &[(&Name, Vec<bool>)], x: &Name| -> Option<Vec<bool>> {
        if x == s {
            return Some(Vec::new());
        }
        paths.iter().find(|(y, _)| *y == x).map(|(_, p)| p.clone())
    };
    let mut pairs: Vec<(&Name, &Atom, &Atom)> = Vec::new();
    for b in &body.binds {
        match &b.rhs {
            Rhs::Prim(op @ (Prim::Fst | Prim::Snd), args) => {
                if let Some(mut p) = args[0].var().and_then(|x| path_of(&paths, x)) {
                    p.push(*op == Prim::Snd);
                    paths.push((&b.name, p));
                }
            }
            Rhs::Prim(Prim::Pair, args) => pairs.push((&b.name, &args[0], &args[1])),
            _ => {}
        }
    }
    // The body's result at a path, followed through its pairs.
    let at = |path: &[bool]| -> Option<&Name> {
        let mut a = &body.result;
        for &second in path {
            let x = a.var()?;
            let (_, l, r) = pairs.iter().find(|(y, _, _)| *y == x)?;
            a = if second { r } else { l };
        }
        a.var()
    };
    paths
        .iter()
        .filter(|(x, p)| at(p) == Some(*x))
        .map(|(x, p)| ((*x).clone(), p.clone()))
        .collect()
}

/// Whether values of `ty` are scalars only (Double, Index, Bool and
/// pairs of them).
pub(super) fn scalars(ty: &Type) -> bool {
    match ty {
        Type::Double | Type::Index | Type::Bool => true,
        Type::Pair(a, b) => scalars(a) && scalars(b),
        _ => false,
    }
}

/// Primitives that allocate nothing and write nothing.
fn pure(op: Prim) -> bool {
    !matches!(
        op,
        Prim::Build | Prim::IFold | Prim::IScan | Prim::Concat | Prim::Accum | Prim::AddAt
    )
}

/// Whether `b` binds only pure primitives, and conditionals of them.
fn pure_block(b: &Block) -> bool {
    b.binds.iter().all(|bind| match &bind.rhs {
        Rhs::Prim(op, _) => pure(*op),
        Rhs::If(_, t, e) => pure_block(t) && pure_block(e),
        _ => false,
    })
}

/// The bindings of `body` at `at`, in order.
pub fn picked<'b>(body: &'b Block, at: &[usize]) -> Vec<&'b Binding> {
    at.iter().map(|&k| &body.binds[k]).collect()
}
