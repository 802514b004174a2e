//! The scalar operands of the derivative table (`derivatives.rs`) and of
//! forward mode: a variable, a literal, or a projection of a dual number
//! (`fst x`, `snd x`, and vector mode's `fst x`, `(snd x)[j]`). Each use
//! makes new nodes, so an atom may be duplicated freely. The IR
//! [`Builder`] itself is neutral (`ir::build`); only the nodes of these
//! AD-specific operands are made here.

use crate::ir::build::Builder;
use crate::ir::{ExprId, Name, Type};

/// A cheap scalar operand that may be duplicated: each use makes a new node.
#[derive(Clone, Debug)]
pub enum Atom {
    Var(Name),
    /// `fst x`: the primal part of a dual-number variable.
    Fst(Name),
    /// `snd x`: the tangent part of a dual-number variable.
    Snd(Name),
    Lit(f64),
    /// `fst x` of a vector-mode dual `x : Double * Vector` (VT-Double).
    VFst(Name),
    /// `(snd x)[j]`: the tangent of vector-mode dual `x` in direction `j`.
    VTan(Name, Name),
}

impl Builder<'_> {
    /// The nodes of an [`Atom`].
    pub fn atom(&mut self, a: &Atom) -> ExprId {
        match a {
            Atom::Var(n) => self.var(n, Type::Double),
            Atom::Fst(n) => {
                let v = self.var(n, Type::pair(Type::Double, Type::Double));
                self.fst(v)
            }
            Atom::Snd(n) => {
                let v = self.var(n, Type::pair(Type::Double, Type::Double));
                self.snd(v)
            }
            Atom::Lit(x) => self.double(*x),
            Atom::VFst(n) => {
                let v = self.var(n, Type::Double.vdual());
                self.fst(v)
            }
            Atom::VTan(n, j) => {
                let v = self.var(n, Type::Double.vdual());
                let t = self.snd(v);
                let jv = self.var(j, Type::Index);
                self.get(t, jv)
            }
        }
    }
}
