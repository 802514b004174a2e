//! The one table of partial derivatives of the scalar primitives, shared
//! by forward mode (tangent = Σ ∂ᵢ · ṫᵢ) and reverse mode (āᵢ += ∂ᵢ · ȳ),
//! in the manner of Futhark's `AD/Derivatives.hs`. Rule names refer to
//! spec/ad-forward.md, where each primitive's rule is stated.
//!
//! A partial is `sign · num / den` (either part optional), so that the
//! forward tangent of `a / b` reads `ṫa / b - ṫb * r / b` rather than a
//! product with a reciprocal. Operands are [`Atom`]s: the caller binds the
//! primal arguments and the primal result `r` to variables first, so the
//! table may mention them any number of times.

use super::atom::Atom;
use crate::ir::Prim;
use crate::ir::build::Builder;

/// One partial derivative ∂r/∂aᵢ = sign · num / den (num, den default 1).
pub struct Partial {
    pub negative: bool,
    pub num: Option<crate::ir::ExprId>,
    pub den: Option<crate::ir::ExprId>,
    /// The partial may be infinite where the primitive is defined (sqrt
    /// at 0): a zero seed must then give a zero term, not 0/0.
    pub guard_zero_seed: bool,
}

impl Partial {
    fn one() -> Partial {
        Partial {
            negative: false,
            num: None,
            den: None,
            guard_zero_seed: false,
        }
    }
    fn minus_one() -> Partial {
        Partial {
            negative: true,
            num: None,
            den: None,
            guard_zero_seed: false,
        }
    }
    fn times(e: crate::ir::ExprId) -> Partial {
        Partial {
            negative: false,
            num: Some(e),
            den: None,
            guard_zero_seed: false,
        }
    }
    fn over(e: crate::ir::ExprId) -> Partial {
        Partial {
            negative: false,
            num: None,
            den: Some(e),
            guard_zero_seed: false,
        }
    }
}

/// Whether `op` is a differentiable scalar primitive on Doubles.
pub fn is_differentiable(op: Prim) -> bool {
    matches!(
        op,
        Prim::Add
            | Prim::Sub
            | Prim::Mul
            | Prim::Div
            | Prim::Pow
            | Prim::Neg
            | Prim::Sin
            | Prim::Cos
            | Prim::Tan
            | Prim::Log
            | Prim::Exp
            | Prim::Sqrt
    )
}

/// The partial derivatives of `op` with respect to each argument, given
/// the primal arguments `args` and the primal result `r`.
pub fn partials(op: Prim, args: &[Atom], r: &Atom, b: &mut Builder) -> Vec<Partial> {
    let a = |b: &mut Builder, i: usize| b.atom(&args[i]);
    match op {
        // D-Add: ∂(a + b) = (1, 1)
        Prim::Add => vec![Partial::one(), Partial::one()],
        // D-Sub: ∂(a - b) = (1, -1)
        Prim::Sub => vec![Partial::one(), Partial::minus_one()],
        // D-Mult: ∂(a * b) = (b, a)
        Prim::Mul => {
            let pb = a(b, 1);
            let pa = a(b, 0);
            vec![Partial::times(pb), Partial::times(pa)]
        }
        // D-Div: ∂(a / b) = (1 / b, -r / b)
        Prim::Div => {
            let d1 = a(b, 1);
            let rr = b.atom(r);
            let d2 = a(b, 1);
            vec![
                Partial::over(d1),
                Partial {
                    negative: true,
                    num: Some(rr),
                    den: Some(d2),
                    guard_zero_seed: false,
                },
            ]
        }
        // D-Pow: ∂(a ** b) = (if b = 0 then 0 else b * a ** (b - 1),
        //                     if a > 0 then r * log a else 0)
        Prim::Pow => {
            let bb = a(b, 1);
            let base = a(b, 0);
            let e1 = a(b, 1);
            let one = b.double(1.0);
            let em1 = b.dop(Prim::Sub, vec![e1, one]);
            let pw = b.dop(Prim::Pow, vec![base, em1]);
            let prod_a = b.dop(Prim::Mul, vec![bb, pw]);
            let e0 = a(b, 1);
            let z0 = b.double(0.0);
            let is_zero = b.prim(Prim::Eq, vec![e0, z0], crate::ir::Type::Bool);
            let z1 = b.double(0.0);
            let da = b.if_(is_zero, z1, prod_a);
            let base2 = a(b, 0);
            let zero = b.double(0.0);
            let pos = b.prim(Prim::Gt, vec![base2, zero], crate::ir::Type::Bool);
            let rr = b.atom(r);
            let base3 = a(b, 0);
            let lg = b.dop(Prim::Log, vec![base3]);
            let prod = b.dop(Prim::Mul, vec![rr, lg]);
            let zero2 = b.double(0.0);
            let db = b.if_(pos, prod, zero2);
            vec![Partial::times(da), Partial::times(db)]
        }
        // D-Neg: ∂(-a) = -1
        Prim::Neg => vec![Partial::minus_one()],
        // D-Sin: ∂ sin a = cos a
        Prim::Sin => {
            let x = a(b, 0);
            vec![Partial::times(b.dop(Prim::Cos, vec![x]))]
        }
        // D-Cos: ∂ cos a = -(sin a)
        Prim::Cos => {
            let x = a(b, 0);
            let s = b.dop(Prim::Sin, vec![x]);
            vec![Partial {
                negative: true,
                num: Some(s),
                den: None,
                guard_zero_seed: false,
            }]
        }
        // D-Tan: ∂ tan a = 1 / (cos a * cos a)
        Prim::Tan => {
            let x1 = a(b, 0);
            let c1 = b.dop(Prim::Cos, vec![x1]);
            let x2 = a(b, 0);
            let c2 = b.dop(Prim::Cos, vec![x2]);
            vec![Partial::over(b.dop(Prim::Mul, vec![c1, c2]))]
        }
        // D-Log: ∂ log a = 1 / a
        Prim::Log => vec![Partial::over(a(b, 0))],
        // D-Exp: ∂ exp a = r
        Prim::Exp => vec![Partial::times(b.atom(r))],
        // D-Sqrt: ∂ sqrt a = 1 / (2 r), infinite at a = 0 (where a zero
        // seed still gives a zero term).
        Prim::Sqrt => {
            let two = b.double(2.0);
            let rr = b.atom(r);
            let mut p = Partial::over(b.dop(Prim::Mul, vec![two, rr]));
            p.guard_zero_seed = true;
            vec![p]
        }
        other => unreachable!("{other:?} has no entry in the derivative table"),
    }
}

/// Σᵢ ∂ᵢ · sᵢ for "seeds" `s` (tangents in forward mode, the result's
/// cotangent in reverse mode), built without multiplying by literal ones.
/// A seed of `None` is known to be zero: its term is left out (which also
/// keeps an infinite partial from turning a zero tangent into NaN).
pub fn contract(ps: Vec<Partial>, seeds: &[Option<Atom>], b: &mut Builder) -> crate::ir::ExprId {
    let mut acc: Option<crate::ir::ExprId> = None;
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
            let z = b.double(0.0);
            let is_zero = b.prim(Prim::Eq, vec![sv, z], crate::ir::Type::Bool);
            let z = b.double(0.0);
            t = b.if_(is_zero, z, t);
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
