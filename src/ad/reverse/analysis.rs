//! The analyses of reverse mode over the normal form: the free variables
//! of a block; which bindings the forward sweep recomputes instead of
//! taping (§4.1), which loops keep no tape (untaped) or are checkpointed
//! (R-Checkpoint, §4.4), which folds have a linear state (R-IFold-Linear)
//! and which the reverse sweep computes (R-Defer, §4.5); which arrays a
//! block reads once (bare contributions); and which variables are active.
//! They read the normal form only and build no code.

use std::collections::HashSet;

use crate::anf::{Atom, Binding, Block, LoopKind, Rhs};
use crate::ir::{Lit, Name, Prim, Type};

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
            Rhs::While {
                init,
                state,
                cond,
                step,
                ..
            } => {
                fv_atom(init, bound, out);
                let m = bound.len();
                bound.push(state.clone());
                fv_block(cond, bound, out);
                fv_block(step, bound, out);
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
pub(super) fn recomputed(bd: &Binding) -> bool {
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
pub(super) fn occurrences(b: &Block, x: &Name) -> usize {
    let at = |a: &Atom| usize::from(a.var() == Some(x));
    let mut n = at(&b.result);
    for bd in &b.binds {
        n += match &bd.rhs {
            Rhs::Prim(_, args) | Rhs::Array(args) => args.iter().map(at).sum(),
            Rhs::If(c, t, f) => at(c) + occurrences(t, x) + occurrences(f, x),
            Rhs::Loop { n, state, body, .. } => {
                at(n) + state.as_ref().map_or(0, |(z, _, _)| at(z)) + occurrences(body, x)
            }
            Rhs::While {
                init, cond, step, ..
            } => at(init) + occurrences(cond, x) + occurrences(step, x),
        };
    }
    n
}

/// The read `y = w[i]` (with `y : T`) that is the only occurrence of an
/// array `w` in a block.
pub(super) type ReadOnce = (Name, Type, Atom);

/// `Some((y, T, i))` when the array `w` occurs in `b` exactly once, as
/// `y = w[i]` at the top level of `b` (with `y : T`): then `w`'s cotangent
/// from `b` is the one pair `(i, ȳ)` (R-Get), which a loop stores bare.
pub(super) fn read_once(b: &Block, w: &Name) -> Option<ReadOnce> {
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
pub(super) fn linear_state(body: &Block, s: &Name, sty: &Type) -> bool {
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
pub(super) fn untaped(bd: &Binding) -> bool {
    match &bd.rhs {
        // A trip count (R-While): computed plainly, no tape.
        Rhs::While { .. } => true,
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
pub(super) fn checkpoints(blk: &Block) -> HashSet<Name> {
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

/// Whether a loop body holds a loop (in a branch too): the loops whose
/// per-iteration tape would hold arrays (R-Checkpoint, R-Checkpoint-State).
fn holds_loop(b: &Block) -> bool {
    b.binds.iter().any(|bd| match &bd.rhs {
        Rhs::Loop { .. } => true,
        Rhs::If(_, t, f) => holds_loop(t) || holds_loop(f),
        _ => false,
    })
}

/// R-Checkpoint-State (spec/ad-reverse.md §4.7): the folds of the entry's
/// own block whose state is not linear and whose body holds a loop (the
/// segments of R-Checkpoint-Sqrt): the forward sweep keeps each
/// iteration's state but no tape, and the reverse sweep computes each
/// iteration's tape again from its state.
pub(super) fn state_checkpoints(blk: &Block) -> HashSet<Name> {
    blk.binds
        .iter()
        .filter(|bd| match &bd.rhs {
            Rhs::Loop {
                kind: LoopKind::IFold,
                state: Some((_, s, sty)),
                body,
                ..
            } => !linear_state(body, s, sty) && holds_loop(body),
            _ => false,
        })
        .map(|bd| bd.name.clone())
        .collect()
}

/// R-Defer (spec/ad-reverse.md §4.5): the folds of the entry's own block
/// whose value the reverse sweep computes instead of the forward sweep —
/// a fold whose state is linear, keeping no tape (untaped or
/// checkpointed), and that reaches the result through additions alone
/// (each name on the way occurring once), so its cotangent is the seed's
/// and no binding but those on that path reads its value — each with the
/// bindings on its path.
pub(super) fn deferrals(blk: &Block, checkpointed: &HashSet<Name>) -> Vec<(Name, Vec<Name>)> {
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
            // A trip count (R-While): locally constant, so not active,
            // whatever it reads.
            Rhs::While { .. } => false,
        };
        if on && bd.ty.has_double() {
            active.insert(bd.name.clone());
        }
    }
}

/// Whether the Index atom `n` of `blk` cannot be negative: a literal `≥ 0`
/// or a `length`.
pub(super) fn never_negative(blk: &Block, n: &Atom) -> bool {
    match n {
        Atom::Lit(Lit::Int(k), _) => *k >= 0,
        Atom::Var(v, _) => blk
            .binds
            .iter()
            .any(|b| b.name == *v && matches!(b.rhs, Rhs::Prim(Prim::Length, _))),
        _ => false,
    }
}
