//! The partial derivatives of the scalar primitives as IR, shared by
//! forward mode (tangent = Σ ∂ᵢ · ṫᵢ) and reverse mode (āᵢ += ∂ᵢ · x̄), in
//! the manner of Futhark's `AD/Derivatives.hs`. The partials themselves
//! are data in the one table of primitives (`ir::prim`, `PrimInfo::partials`,
//! with the D-* and R-* rule names, which refer to spec/ad-forward.md and
//! spec/ad-reverse.md); this file builds them with the [`Builder`].
//!
//! A partial is `sign · num / den` (either part optional), so that the
//! forward tangent of `a / b` reads `ṫa / b - ṫb * r / b` rather than a
//! product with a reciprocal. Operands are [`Atom`]s: the caller binds the
//! primal arguments and the primal result `r` to variables first, so the
//! table may mention them any number of times.

use super::atom::Atom;
use crate::ir::build::Builder;
use crate::ir::prim::{PartialTerm, T, Term};
use crate::ir::{ExprId, Prim, Type};

/// One partial derivative ∂r/∂aᵢ = sign · num / den (num, den default 1),
/// built.
pub struct Partial {
    pub negative: bool,
    pub num: Option<ExprId>,
    pub den: Option<ExprId>,
    /// The partial may be ⊥ or infinite where the primitive is defined
    /// (sqrt at 0): a zero seed must then give a zero term, not 0/0.
    pub guard_zero_seed: bool,
}

/// The partial derivatives of `op` with respect to each argument, given
/// the primal arguments `args` and the primal result `r`: the table's
/// terms built as IR, each node once, partial by partial, numerator
/// before denominator.
pub fn partials(op: Prim, args: &[Atom], r: &Atom, b: &mut Builder) -> Vec<Partial> {
    let ps = op.info().partials;
    assert!(
        !ps.is_empty(),
        "{op:?} has no entry in the derivative table"
    );
    ps.iter()
        .map(|p: &PartialTerm| {
            let num = p.num.map(|t| term(&t, args, r, b));
            let den = p.den.map(|t| term(&t, args, r, b));
            Partial {
                negative: p.negative,
                num,
                den,
                guard_zero_seed: p.guard_zero_seed,
            }
        })
        .collect()
}

/// The nodes of one term: operands left to right before their operator;
/// a zero-guarded value before its test (`Term::ZeroWhenZero`).
fn term(t: &Term, args: &[Atom], r: &Atom, b: &mut Builder) -> ExprId {
    match t {
        Term::Arg(k) => b.atom(&args[*k]),
        Term::Result => b.atom(r),
        Term::Lit(x) => b.double(*x),
        Term::Op(op, ts) => {
            let xs: Vec<ExprId> = ts.iter().map(|t| term(t, args, r, b)).collect();
            b.prim(*op, xs, result_type(*op))
        }
        Term::If(c, x, y) => {
            let c = term(c, args, r, b);
            let x = term(x, args, r, b);
            let y = term(y, args, r, b);
            b.if_(c, x, y)
        }
        Term::ZeroWhenZero { test, value } => {
            let v = term(value, args, r, b);
            let t = term(test, args, r, b);
            zero_when_zero(t, v, b)
        }
    }
}

/// The type of a primitive of Doubles in a partial: Bool for a
/// comparison, else Double (the table's signature says which).
fn result_type(op: Prim) -> Type {
    match op.info().typing.sig.result {
        T::Bool => Type::Bool,
        _ => Type::Double,
    }
}

/// Σᵢ ∂ᵢ · sᵢ for "seeds" `s` (tangents in forward mode, the result's
/// cotangent in reverse mode), built without multiplying by literal ones.
/// A seed of `None` is known to be zero: its term is left out (which also
/// keeps an infinite partial from turning a zero tangent into NaN).
pub fn contract(ps: Vec<Partial>, seeds: &[Option<Atom>], b: &mut Builder) -> ExprId {
    let mut acc: Option<ExprId> = None;
    for (p, s) in ps.into_iter().zip(seeds) {
        let Some(s) = s else { continue };
        let mut t = b.atom(s);
        if let Some(n) = p.num {
            t = b.dop(Prim::Mul, vec![t, n]);
        }
        if let Some(d) = p.den {
            t = b.dop(Prim::Div, vec![t, d]);
        }
        if p.guard_zero_seed {
            let sv = b.atom(s);
            t = zero_when_zero(sv, t, b);
        }
        acc = Some(match (acc, p.negative) {
            (None, false) => t,
            (None, true) => b.dop(Prim::Neg, vec![t]),
            (Some(x), false) => b.dop(Prim::Add, vec![x, t]),
            (Some(x), true) => b.dop(Prim::Sub, vec![x, t]),
        });
    }
    acc.unwrap_or_else(|| b.double(0.0))
}

/// `if test = 0.0 then 0.0 else value`, of nodes already built.
fn zero_when_zero(test: ExprId, value: ExprId, b: &mut Builder) -> ExprId {
    let z = b.double(0.0);
    let is_zero = b.prim(Prim::Eq, vec![test, z], Type::Bool);
    let z = b.double(0.0);
    b.if_(is_zero, z, value)
}
