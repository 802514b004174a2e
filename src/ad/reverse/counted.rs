//! R-While (spec/ad-reverse.md): before the sweep, every `while` whose
//! state holds a Double becomes a counting loop and an `ifold` over the
//! count. The counting loop carries the trip count beside the state and is
//! never active (only its Index is read); the `ifold` is differentiated by
//! the fold rules, so each iteration's tape is recorded in the forward
//! sweep and replayed backwards. The step runs in both loops, so each gets
//! a fresh copy of it (`anf::fresh_copy`).

use std::collections::{HashMap, HashSet};

use super::rewrite::Rewrite;
use crate::anf::{Atom, Binding, Block, LoopKind, Normal, Rhs, fresh_copy};
use crate::ir::build::Builder;
use crate::ir::{Lit, Name, Prim, Type};

/// `normal` with its `while`s of Double-carrying state counted (R-While);
/// the new bindings get the span of the `while` they come from.
pub(super) fn counted(b: &mut Builder<'_>, normal: &Normal) -> (Normal, HashSet<Name>) {
    let mut c = Counter {
        r: Rewrite::new(b, normal),
        counts: HashSet::new(),
    };
    let body = c.block(&normal.body);
    (c.r.finish(normal, body), c.counts)
}

struct Counter<'a, 'b> {
    r: Rewrite<'a, 'b>,
    /// The trip counts made (`n = snd c`): never negative.
    counts: HashSet<Name>,
}

impl Counter<'_, '_> {
    fn block(&mut self, blk: &Block) -> Block {
        let mut binds = Vec::with_capacity(blk.binds.len());
        for bd in &blk.binds {
            // Nested loops first: a `while` inside a step is counted too.
            let mut rhs = bd.rhs.clone();
            for b in rhs.blocks_mut() {
                let counted = self.block(b);
                *b = counted;
            }
            match rhs {
                Rhs::While {
                    init,
                    state,
                    ty,
                    cond,
                    step,
                } if ty.has_double() => {
                    self.count(&bd.name, init, &state, &ty, &cond, &step, &mut binds);
                }
                rhs => binds.push(Binding {
                    name: bd.name.clone(),
                    ty: bd.ty.clone(),
                    rhs,
                }),
            }
        }
        Block {
            binds,
            result: blk.result.clone(),
        }
    }

    /// `x = while (s. C) (s. F) z` ⇒
    /// `z' = (z, 0); c = while (p. s = fst p; C) (p. s = fst p; k = snd p;
    /// F; k' = k + 1; (r, k')) z'; n = snd c; x = ifold (s i. F) z n`.
    #[allow(clippy::too_many_arguments)]
    fn count(
        &mut self,
        x: &Name,
        init: Atom,
        s: &Name,
        ty: &Type,
        cond: &Block,
        step: &Block,
        out: &mut Vec<Binding>,
    ) {
        let pty = Type::pair(ty.clone(), Type::Index);
        let var = |n: &Name, t: &Type| Atom::Var(n.clone(), t.clone());
        let z0 = self.r.fresh("z", x);
        out.push(Binding {
            name: z0.clone(),
            ty: pty.clone(),
            rhs: Rhs::Prim(
                Prim::Pair,
                vec![init.clone(), Atom::Lit(Lit::Int(0), Type::Index)],
            ),
        });
        let p = self.r.fresh("p", x);
        // The test, on the state part of p.
        let mut map = HashMap::new();
        let s1 = self.r.fresh(s, x);
        map.insert(s.clone(), s1.clone());
        let mut test = vec![Binding {
            name: s1,
            ty: ty.clone(),
            rhs: Rhs::Prim(Prim::Fst, vec![var(&p, &pty)]),
        }];
        let c = self.copy(cond, &mut map, x);
        test.extend(c.binds);
        let test = Block {
            binds: test,
            result: c.result,
        };
        // The step, with the count incremented.
        let mut map = HashMap::new();
        let s2 = self.r.fresh(s, x);
        map.insert(s.clone(), s2.clone());
        let k = self.r.fresh("k", x);
        let mut next = vec![
            Binding {
                name: s2,
                ty: ty.clone(),
                rhs: Rhs::Prim(Prim::Fst, vec![var(&p, &pty)]),
            },
            Binding {
                name: k.clone(),
                ty: Type::Index,
                rhs: Rhs::Prim(Prim::Snd, vec![var(&p, &pty)]),
            },
        ];
        let f = self.copy(step, &mut map, x);
        next.extend(f.binds);
        let k1 = self.r.fresh("k", x);
        let q = self.r.fresh("p", x);
        next.push(Binding {
            name: k1.clone(),
            ty: Type::Index,
            rhs: Rhs::Prim(
                Prim::Add,
                vec![var(&k, &Type::Index), Atom::Lit(Lit::Int(1), Type::Index)],
            ),
        });
        next.push(Binding {
            name: q.clone(),
            ty: pty.clone(),
            rhs: Rhs::Prim(Prim::Pair, vec![f.result, var(&k1, &Type::Index)]),
        });
        let next = Block {
            binds: next,
            result: var(&q, &pty),
        };
        let c = self.r.fresh("count", x);
        out.push(Binding {
            name: c.clone(),
            ty: pty.clone(),
            rhs: Rhs::While {
                init: var(&z0, &pty),
                state: p,
                ty: pty.clone(),
                cond: test,
                step: next,
            },
        });
        let n = self.r.fresh("n", x);
        self.counts.insert(n.clone());
        out.push(Binding {
            name: n.clone(),
            ty: Type::Index,
            rhs: Rhs::Prim(Prim::Snd, vec![var(&c, &pty)]),
        });
        // The fold over the count runs the original step, unchanged.
        let i = self.r.fresh("i", x);
        out.push(Binding {
            name: x.clone(),
            ty: ty.clone(),
            rhs: Rhs::Loop {
                kind: LoopKind::IFold,
                n: var(&n, &Type::Index),
                state: Some((init, s.clone(), ty.clone())),
                index: i,
                body: step.clone(),
            },
        });
    }

    /// A copy of `blk` with fresh names (the builder's, unique in the
    /// program), each with the span of the `while`.
    fn copy(&mut self, blk: &Block, map: &mut HashMap<Name, Name>, span_of: &Name) -> Block {
        fresh_copy(blk, map, &mut |n: &Name| self.r.fresh(n, span_of))
    }
}
