//! R-Checkpoint-Sqrt (spec/ad-reverse.md §4.7), the first half: under
//! `--checkpoint sqrt`, every fold of the entry's own block whose state is
//! not linear (a `while`'s, after R-While, among them) runs as k segments
//! of at most k iterations, k = ⌈√n⌉, so that R-Checkpoint-State can keep
//! the k states between segments instead of n iterations' tapes. The same
//! iterations in the same order on the same values: the same bits.

use std::collections::HashSet;

use crate::anf::{Atom, Binding, Block, LoopKind, Normal, Rhs};
use crate::ir::build::Builder;
use crate::ir::{Lit, Name, Prim, Type};

use super::analysis::{linear_state, never_negative};
use super::rewrite::Rewrite;

/// `normal` with the nonlinear folds of its own block segmented: those
/// whose count cannot be negative — a literal `≥ 0`, a `length`, or one of
/// R-While's trip `counts` — so that the segments keep E-IFold-Bot's ⊥
/// (a fold over a negative count is ⊥, the segments would not be).
pub(super) fn segmented(b: &mut Builder<'_>, normal: &Normal, counts: &HashSet<Name>) -> Normal {
    let mut s = Segmenter(Rewrite::new(b, normal));
    let blk = &normal.body;
    let mut binds = Vec::with_capacity(blk.binds.len());
    for bd in &blk.binds {
        match &bd.rhs {
            Rhs::Loop {
                kind: LoopKind::IFold,
                n,
                state: Some((z, st, sty)),
                index,
                body,
            } if !linear_state(body, st, sty)
                && (never_negative(blk, n) || n.var().is_some_and(|v| counts.contains(v))) =>
            {
                s.segment(bd, (n, z, st, sty, index, body), &mut binds);
            }
            _ => binds.push(bd.clone()),
        }
    }
    let body = Block {
        binds,
        result: blk.result.clone(),
    };
    s.0.finish(normal, body)
}

struct Segmenter<'a, 'b>(Rewrite<'a, 'b>);

type Parts<'a> = (&'a Atom, &'a Atom, &'a Name, &'a Type, &'a Name, &'a Block);

impl Segmenter<'_, '_> {
    /// `x = ifold (s i. B) z n` ⇒
    /// `k = while (q. q * q < n) (q. q + 1) 0;
    ///  x = ifold (s₁ j. base = j * k; rest = n − base;
    ///             c = if rest < k then rest else k; m = if c < 0 then 0 else c;
    ///             y = ifold (s i′. i = base + i′; B) s₁ m; y) z k`.
    fn segment(
        &mut self,
        bd: &Binding,
        (n, z, s, sty, index, body): Parts<'_>,
        out: &mut Vec<Binding>,
    ) {
        let x = &bd.name;
        let idx = |v: &Name| Atom::Var(v.clone(), Type::Index);
        let int = |k: i64| Atom::Lit(Lit::Int(k), Type::Index);
        let prim = |name: Name, p: Prim, args: Vec<Atom>, ty: Type| Binding {
            name,
            ty,
            rhs: Rhs::Prim(p, args),
        };
        // k = ⌈√n⌉, by counting: O(√n) steps.
        let (q, sq, lt, q1) = (
            self.0.fresh("q", x),
            self.0.fresh("sq", x),
            self.0.fresh("lt", x),
            self.0.fresh("q", x),
        );
        let k = self.0.fresh("k", x);
        out.push(Binding {
            name: k.clone(),
            ty: Type::Index,
            rhs: Rhs::While {
                init: int(0),
                state: q.clone(),
                ty: Type::Index,
                cond: Block {
                    binds: vec![
                        prim(sq.clone(), Prim::Mul, vec![idx(&q), idx(&q)], Type::Index),
                        prim(lt.clone(), Prim::Lt, vec![idx(&sq), n.clone()], Type::Bool),
                    ],
                    result: Atom::Var(lt, Type::Bool),
                },
                step: Block {
                    binds: vec![prim(
                        q1.clone(),
                        Prim::Add,
                        vec![idx(&q), int(1)],
                        Type::Index,
                    )],
                    result: idx(&q1),
                },
            },
        });
        // One segment: iterations base … base + m − 1.
        let (s1, j, base, rest, short, c, neg, m, y, i2) = (
            self.0.fresh("s", x),
            self.0.fresh("j", x),
            self.0.fresh("base", x),
            self.0.fresh("rest", x),
            self.0.fresh("short", x),
            self.0.fresh("c", x),
            self.0.fresh("neg", x),
            self.0.fresh("m", x),
            self.0.fresh("y", x),
            self.0.fresh("i", x),
        );
        let pick = |name: Name, test: &Name, then_: Atom, else_: Atom| Binding {
            name,
            ty: Type::Index,
            rhs: Rhs::If(
                Atom::Var(test.clone(), Type::Bool),
                Block {
                    binds: vec![],
                    result: then_,
                },
                Block {
                    binds: vec![],
                    result: else_,
                },
            ),
        };
        let mut inner = vec![prim(
            index.clone(),
            Prim::Add,
            vec![idx(&base), idx(&i2)],
            Type::Index,
        )];
        inner.extend(body.binds.iter().cloned());
        let segment = Block {
            binds: vec![
                prim(base.clone(), Prim::Mul, vec![idx(&j), idx(&k)], Type::Index),
                prim(
                    rest.clone(),
                    Prim::Sub,
                    vec![n.clone(), idx(&base)],
                    Type::Index,
                ),
                prim(
                    short.clone(),
                    Prim::Lt,
                    vec![idx(&rest), idx(&k)],
                    Type::Bool,
                ),
                pick(c.clone(), &short, idx(&rest), idx(&k)),
                prim(neg.clone(), Prim::Lt, vec![idx(&c), int(0)], Type::Bool),
                pick(m.clone(), &neg, int(0), idx(&c)),
                Binding {
                    name: y.clone(),
                    ty: sty.clone(),
                    rhs: Rhs::Loop {
                        kind: LoopKind::IFold,
                        n: idx(&m),
                        state: Some((Atom::Var(s1.clone(), sty.clone()), s.clone(), sty.clone())),
                        index: i2,
                        body: Block {
                            binds: inner,
                            result: body.result.clone(),
                        },
                    },
                },
            ],
            result: Atom::Var(y, sty.clone()),
        };
        out.push(Binding {
            name: x.clone(),
            ty: bd.ty.clone(),
            rhs: Rhs::Loop {
                kind: LoopKind::IFold,
                n: idx(&k),
                state: Some((z.clone(), s1, sty.clone())),
                index: j,
                body: segment,
            },
        });
    }
}
