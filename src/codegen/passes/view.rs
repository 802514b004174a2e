//! Views: `build n (fun i -> a[i])`, the shape of a `build` whose array
//! can be `a`'s own buffer (arrays are immutable). The lowering makes such
//! a `build` a view of `a` when `a` outlives every loop (`lower/loops.rs`,
//! `Lower::build`), and the in-place analysis (Note [In-place updates] in
//! `inplace.rs`) therefore counts every such `build` as consuming `a` and
//! as never owned. Both ask this one function, so they cannot disagree on
//! the shape.

use crate::anf::{Atom, Block, Rhs};
use crate::ir::{Name, Prim};

/// The array `a` if `body` (of a `build` over `index`) is just `a[index]`:
/// the build is a view of `a` (no buffer of its own).
pub fn copied<'b>(body: &'b Block, index: &Name) -> Option<&'b Atom> {
    let [bind] = body.binds.as_slice() else {
        return None;
    };
    let Rhs::Prim(Prim::Get, args) = &bind.rhs else {
        return None;
    };
    let [a @ Atom::Var(..), Atom::Var(i, _)] = args.as_slice() else {
        return None;
    };
    (i == index && body.result.var() == Some(&bind.name)).then_some(a)
}
