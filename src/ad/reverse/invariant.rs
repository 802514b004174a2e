//! R-Invariant (spec/ad-reverse.md §4.6): a component of a fold's state
//! that every iteration passes on unchanged is the initial state's
//! component throughout, so the body reads that value instead of the
//! state. An array carried through the state and read by the body
//! (`ifold (fun s i -> (fst s, snd s + (fst s)[i])) (v, 0.0) n`, or the
//! fold that R-While makes of a `while`) then has its reads' cotangents
//! gathered like those of any free array — linear in the iterations —
//! instead of travelling back through every iteration's state cotangent,
//! where each step's ⊕ copied the growing list (Θ(n²), the open question
//! this rule closes). No arithmetic moves, so the bits are the same.

use std::collections::HashMap;

use super::rewrite::Rewrite;
use crate::anf::{Atom, Binding, Block, LoopKind, Normal, Rhs};
use crate::ir::build::Builder;
use crate::ir::{Name, Prim, Type};

/// `normal` with every fold's invariant array components read from the
/// initial state (R-Invariant); the new projections get the fold's span.
pub(super) fn invariant_states(b: &mut Builder<'_>, normal: &Normal) -> Normal {
    let mut p = Pass(Rewrite::new(b, normal));
    let body = p.block(&normal.body);
    p.0.finish(normal, body)
}

/// A path into a tuple: `false` for `fst`, `true` for `snd`.
type Path = Vec<bool>;

struct Pass<'a, 'b>(Rewrite<'a, 'b>);

impl Pass<'_, '_> {
    fn block(&mut self, blk: &Block) -> Block {
        let mut binds = Vec::with_capacity(blk.binds.len());
        for bd in &blk.binds {
            // Inner loops first: their state may be the outer one's.
            let mut rhs = bd.rhs.clone();
            for b in rhs.blocks_mut() {
                let inner = self.block(b);
                *b = inner;
            }
            if let Rhs::Loop {
                kind: LoopKind::IFold,
                state: Some((z, s, ty)),
                body,
                ..
            } = &mut rhs
            {
                let mut paths = Vec::new();
                invariant_paths(body, s, ty, &mut Vec::new(), &mut paths);
                for path in paths {
                    let c = self.project(z, ty, &path, &bd.name, &mut binds);
                    let olds = projections(body, s, &path);
                    body.for_each_atom_mut(&mut |a: &mut Atom| {
                        if a.var().is_some_and(|v| olds.contains(v)) {
                            *a = c.clone();
                        }
                    });
                }
            }
            binds.push(Binding {
                name: bd.name.clone(),
                ty: bd.ty.clone(),
                rhs,
            });
        }
        Block {
            binds,
            result: blk.result.clone(),
        }
    }

    /// `z`'s component at `path`, bound by projections appended to `out`.
    fn project(
        &mut self,
        z: &Atom,
        ty: &Type,
        path: &[bool],
        span_of: &Name,
        out: &mut Vec<Binding>,
    ) -> Atom {
        let mut a = z.clone();
        let mut t = ty.clone();
        for &second in path {
            let Type::Pair(l, r) = &t else {
                unreachable!("a path follows the state's pairs")
            };
            let ct = if second { r } else { l }.as_ref().clone();
            let x = self.0.fresh("inv", span_of);
            let prim = if second { Prim::Snd } else { Prim::Fst };
            out.push(Binding {
                name: x.clone(),
                ty: ct.clone(),
                rhs: Rhs::Prim(prim, vec![a]),
            });
            a = Atom::Var(x, ct.clone());
            t = ct;
        }
        a
    }
}

/// Whether a value of `t` holds an array.
fn has_array(t: &Type) -> bool {
    match t {
        Type::Array(_) => true,
        Type::Pair(a, b) => has_array(a) || has_array(b),
        _ => false,
    }
}

/// The maximal paths of the state `s : ty` at which `body`'s result is
/// the state's own component, `s` projected along the same path, for
/// components that hold an array.
fn invariant_paths(body: &Block, s: &Name, ty: &Type, at: &mut Path, out: &mut Vec<Path>) {
    if !has_array(ty) {
        return;
    }
    let here = component(body, &body.result, at);
    let Some(Atom::Var(v, _)) = here else {
        return;
    };
    if projection_path(body, s, &v).as_deref() == Some(at.as_slice()) {
        out.push(at.clone());
        return;
    }
    if let Type::Pair(l, r) = ty {
        for (second, t) in [(false, l), (true, r)] {
            at.push(second);
            invariant_paths(body, s, t, at, out);
            at.pop();
        }
    }
}

/// The atom at `path` in `a`, following the pairs `blk` binds.
fn component(blk: &Block, a: &Atom, path: &[bool]) -> Option<Atom> {
    let Some((&second, rest)) = path.split_first() else {
        return Some(a.clone());
    };
    let v = a.var()?;
    let bd = blk.binds.iter().find(|b| &b.name == v)?;
    match &bd.rhs {
        Rhs::Prim(Prim::Pair, args) => component(blk, &args[usize::from(second)], rest),
        _ => None,
    }
}

/// The path along which `v` projects `s` by the `fst`/`snd` bindings of
/// `blk` (`[]` for `s` itself), or `None`.
fn projection_path(blk: &Block, s: &Name, v: &Name) -> Option<Path> {
    if v == s {
        return Some(Vec::new());
    }
    let bd = blk.binds.iter().find(|b| &b.name == v)?;
    let (second, arg) = match &bd.rhs {
        Rhs::Prim(Prim::Fst, a) => (false, &a[0]),
        Rhs::Prim(Prim::Snd, a) => (true, &a[0]),
        _ => return None,
    };
    let mut p = projection_path(blk, s, arg.var()?)?;
    p.push(second);
    Some(p)
}

/// Every variable bound in `body` (nested blocks included) to `s`
/// projected along `path`, and `s` itself when `path` is empty.
fn projections(body: &Block, s: &Name, path: &[bool]) -> Vec<Name> {
    let mut paths: HashMap<Name, Path> = HashMap::from([(s.clone(), Vec::new())]);
    collect(body, &mut paths);
    paths
        .into_iter()
        .filter(|(_, p)| p == path)
        .map(|(v, _)| v)
        .collect()
}

fn collect(blk: &Block, paths: &mut HashMap<Name, Path>) {
    for bd in &blk.binds {
        match &bd.rhs {
            Rhs::Prim(prim @ (Prim::Fst | Prim::Snd), a) => {
                if let Some(mut p) = a[0].var().and_then(|v| paths.get(v)).cloned() {
                    p.push(*prim == Prim::Snd);
                    paths.insert(bd.name.clone(), p);
                }
            }
            rhs => rhs.blocks().into_iter().for_each(|b| collect(b, paths)),
        }
    }
}
