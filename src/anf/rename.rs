//! A fresh copy of a block: every name the block binds renamed, and every
//! use of a renamed name (or of a name the caller maps, such as a loop's
//! state variable) rewritten. The normal form's names are unique
//! (every bound name is fresh, `normalise.rs`), so a pass that needs one block
//! twice — reverse mode's counting of a `while` (R-While) runs its step
//! in two loops — takes a copy.

use std::collections::HashMap;

use super::{Atom, Binding, Block, Rhs};
use crate::ir::Name;

/// `block` with each of its binders `x` renamed `fresh(x)` and the free
/// names in `map` replaced; `map` is extended with the renamings as they
/// are made, so the caller can find a binder's new name.
pub fn fresh_copy(
    block: &Block,
    map: &mut HashMap<Name, Name>,
    fresh: &mut impl FnMut(&Name) -> Name,
) -> Block {
    let mut binds = Vec::with_capacity(block.binds.len());
    for bd in &block.binds {
        let rhs = copy_rhs(&bd.rhs, map, fresh);
        let name = fresh(&bd.name);
        map.insert(bd.name.clone(), name.clone());
        binds.push(Binding {
            name,
            ty: bd.ty.clone(),
            rhs,
        });
    }
    Block {
        binds,
        result: atom(&block.result, map),
    }
}

fn atom(a: &Atom, map: &HashMap<Name, Name>) -> Atom {
    match a {
        Atom::Var(x, t) => Atom::Var(map.get(x).unwrap_or(x).clone(), t.clone()),
        Atom::Lit(..) => a.clone(),
    }
}

/// A binder of a nested block (a loop's index or state): renamed too.
fn bind(x: &Name, map: &mut HashMap<Name, Name>, fresh: &mut impl FnMut(&Name) -> Name) -> Name {
    let y = fresh(x);
    map.insert(x.clone(), y.clone());
    y
}

fn copy_rhs(
    rhs: &Rhs,
    map: &mut HashMap<Name, Name>,
    fresh: &mut impl FnMut(&Name) -> Name,
) -> Rhs {
    match rhs {
        Rhs::Prim(op, args) => Rhs::Prim(*op, args.iter().map(|a| atom(a, map)).collect()),
        Rhs::Array(args) => Rhs::Array(args.iter().map(|a| atom(a, map)).collect()),
        Rhs::If(c, t, e) => Rhs::If(
            atom(c, map),
            fresh_copy(t, map, fresh),
            fresh_copy(e, map, fresh),
        ),
        Rhs::Loop {
            kind,
            n,
            state,
            index,
            body,
        } => {
            let n = atom(n, map);
            let state = state
                .as_ref()
                .map(|(z, s, t)| (atom(z, map), bind(s, map, fresh), t.clone()));
            let index = bind(index, map, fresh);
            Rhs::Loop {
                kind: *kind,
                n,
                state,
                index,
                body: fresh_copy(body, map, fresh),
            }
        }
        Rhs::While {
            init,
            state,
            ty,
            cond,
            step,
        } => {
            let init = atom(init, map);
            let state = bind(state, map, fresh);
            Rhs::While {
                init,
                state,
                ty: ty.clone(),
                cond: fresh_copy(cond, map, fresh),
                step: fresh_copy(step, map, fresh),
            }
        }
    }
}
