//! R-Defer-Sum (spec/ad-reverse.md §4.5): a sum of a map in the entry's
//! own block — `x = build n (i. B)`, `m = length x`, a fold adding the
//! elements of `x` — fused into one fold over `B`, with the same additions
//! in the same order (so the same bits), which R-Defer can then defer.
//! The one rewrite of the normal form that reverse mode makes.

use super::analysis::{never_negative, occurrences};
use crate::anf::{Atom, Binding, Block, LoopKind, Rhs};
use crate::ir::{Prim, Type};

/// R-Defer-Sum (spec/ad-reverse.md §4.5): in the entry's own block,
/// `x = build n (i. B)` of Doubles, `m = length x`, `s = ifold (acc j.
/// e = x[j]; t = acc + e) z m`, one after another, with `x` and `m` used
/// nowhere else and `n` a length or a literal (never negative), become
/// the one fold `s = ifold (acc i. B; t = acc + r) z n` (r: B's result;
/// the addition's operands in their order). The same additions on the same
/// elements in the same order, and the same ⊥ (an element's, or none), so
/// the same bits; the fold can then be deferred (a sum of a map such as
/// NNMF's `vectorSum (build …)` is computed by the reverse sweep alone).
pub(super) fn fuse_sums(blk: &Block) -> Block {
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
