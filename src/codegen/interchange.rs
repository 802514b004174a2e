//! Which `build`s of sums run with their loops interchanged (Note
//! [Interchange]).
//!
//! # Note [Interchange]
//!
//! `x = build n (fun j -> ifold (fun s i -> s + e) z m)` — each element a
//! sum over `i` — reads whatever `e` reads in the order j-major. When `e`
//! reads a matrix at `a[i][j]`, as the transposed products of gradients
//! do (NNMF's update rule, Wᵀ(…)), that walks the matrix by columns. The
//! lowering then runs the same sums i-major instead: every `x[j]` starts
//! at `z`, and for i = 0 … m−1, for j = 0 … n−1, `x[j] += e(i, j)`. Each
//! element adds the same terms in the same order (i ascending), so every
//! bit is the same; only the order *between* elements changes.
//!
//! That order is visible only through ⊥, so the interchange is taken only
//! where no ⊥ can tell:
//!
//! - the body binds only total primitives (Double `+ - *` and negation,
//!   `sin`, `cos`, `exp`, comparisons, `not`, `toDouble`, pairs and
//!   projections, `length`), Double divisions, and reads of arrays bound
//!   outside the nest at `i`, `j` or a value bound outside, or of a row
//!   `r = a[i]` at `j`; the sum is `s + e` with `s` used nowhere else;
//! - at the binding, a guard tests every read in bounds for every `i < m`
//!   and `j < n` (E-Get-Bot can then not happen); a row read at `j` needs
//!   a loop over the rows. When it fails, the nest runs as written and
//!   stops with the evaluator's ⊥;
//! - so the only ⊥ left is a division by zero, whose details do not
//!   depend on which element divides: the first one in either order is
//!   the same ⊥.
//!
//! E-Build-Bot (`n < 0`) is tested first, then E-IFold-Bot (`m < 0` when
//! `n > 0`), as the nest would.

use crate::ad::anf::{Atom, Binding, Block, LoopKind, Rhs};
use crate::ir::{Name, Prim, Type};

/// A read the guard must test.
#[derive(Clone, Debug)]
pub enum Read {
    /// `a[i]`: `m ≤ length a`.
    Outer(Name),
    /// `a[j]`: `n ≤ length a`.
    Inner(Name),
    /// `a[c]`: `0 ≤ c < length a`.
    Const(Name, Atom),
    /// `r[j]` of a row `r = a[i]`: `n ≤ length a[i]` for every `i < m`.
    Row(Name),
}

/// A `build` of sums to run interchanged.
pub struct Plan<'b> {
    /// The sum's count, initial value, state, index and body (its last
    /// binding the addition).
    pub m: &'b Atom,
    pub z: &'b Atom,
    pub index: &'b Name,
    /// The sum's body without its addition.
    pub terms: &'b [Binding],
    /// The term added: `e` of `s + e`.
    pub term: &'b Atom,
    pub reads: Vec<Read>,
}

/// The plan for `build n (fun j -> body)`, if it is a build of sums that
/// the interchange leaves exact.
pub fn plan<'b>(j: &Name, outer: &'b Block, ty: &Type) -> Option<Plan<'b>> {
    if *ty != Type::array(Type::Double) {
        return None;
    }
    let [fold] = outer.binds.as_slice() else {
        return None;
    };
    if outer.result.var() != Some(&fold.name) {
        return None;
    }
    let Rhs::Loop {
        kind: LoopKind::IFold,
        n: m,
        state: Some((z, s, Type::Double)),
        index: i,
        body,
    } = &fold.rhs
    else {
        return None;
    };
    // Bound outside the nest: not j, not the fold's names, not the body's.
    let inside = |x: &Name| x == j || x == i || x == s || body.binds.iter().any(|b| &b.name == x);
    let outside = |a: &Atom| a.var().is_none_or(|x| !inside(x));
    if !outside(m) || !outside(z) {
        return None;
    }
    let (last, rest) = body.binds.split_last()?;
    if body.result.var() != Some(&last.name) {
        return None;
    }
    let term = match &last.rhs {
        Rhs::Prim(Prim::Add, args) if last.ty == Type::Double => match (&args[0], &args[1]) {
            (Atom::Var(x, _), e) | (e, Atom::Var(x, _)) if x == s && e.var() != Some(s) => e,
            _ => return None,
        },
        _ => return None,
    };
    let mentions_s = |a: &Atom| a.var() == Some(s);
    let mut rows: Vec<(&Name, &Name)> = Vec::new();
    let mut reads = Vec::new();
    for bind in rest {
        let Rhs::Prim(op, args) = &bind.rhs else {
            return None;
        };
        if args.iter().any(mentions_s) {
            return None;
        }
        let double = args.first().is_some_and(|a| *a.ty() == Type::Double);
        match op {
            Prim::Add | Prim::Sub | Prim::Mul | Prim::Neg | Prim::Div if double => {}
            Prim::Sin | Prim::Cos | Prim::Exp | Prim::ToDouble => {}
            Prim::Lt | Prim::Gt | Prim::Le | Prim::Ge | Prim::Eq | Prim::Ne | Prim::Not => {}
            Prim::Pair | Prim::Fst | Prim::Snd | Prim::Length => {}
            Prim::Get => {
                let (Atom::Var(a, _), k) = (&args[0], &args[1]) else {
                    return None;
                };
                let kv = k.var();
                let read = if !inside(a) {
                    if kv == Some(i) {
                        if has_rows(&bind.ty) {
                            rows.push((&bind.name, a));
                        }
                        Read::Outer(a.clone())
                    } else if kv == Some(j) {
                        Read::Inner(a.clone())
                    } else if outside(k) {
                        Read::Const(a.clone(), k.clone())
                    } else {
                        return None;
                    }
                } else if let Some((_, of)) = rows.iter().find(|(r, _)| *r == a)
                    && kv == Some(j)
                {
                    Read::Row((*of).clone())
                } else {
                    return None;
                };
                reads.push(read);
            }
            _ => return None,
        }
    }
    if mentions_s(term) || !rows.iter().all(|(r, _)| only_read(rest, r)) {
        return None;
    }
    Some(Plan {
        m,
        z,
        index: i,
        terms: rest,
        term,
        reads,
    })
}

fn has_rows(t: &Type) -> bool {
    matches!(t, Type::Array(e) if **e == Type::Double)
}

/// Whether the row `r` is used only by reads (`r[k]` at the index the
/// planner checked).
fn only_read(binds: &[Binding], r: &Name) -> bool {
    binds.iter().all(|b| match &b.rhs {
        Rhs::Prim(Prim::Get, args) => args[1].var() != Some(r),
        Rhs::Prim(_, args) => args.iter().all(|a| a.var() != Some(r)),
        _ => false,
    })
}
