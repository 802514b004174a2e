//! R-Checkpoint-Sqrt (spec/ad-reverse.md §4.7), the first half: under
//! `--checkpoint sqrt`, every fold of the entry's own block whose state is
//! not linear (a `while`'s, after R-While, among them) runs as k segments
//! of at most k iterations, k = ⌈√n⌉, so that R-Checkpoint-State can keep
//! the k states between segments instead of n iterations' tapes. The same
//! iterations in the same order on the same values: the same bits.

use std::collections::HashMap;

use crate::anf::{Atom, Binding, Block, LoopKind, Normal, Rhs};
use crate::ir::build::Builder;
use crate::ir::{Lit, Name, Prim, Type};

use super::analysis::linear_state;

/// `normal` with the nonlinear folds of its own block segmented.
pub(super) fn segmented(b: &mut Builder<'_>, normal: &Normal) -> Normal {
    let mut s = Segmenter {
        b,
        spans: normal.spans.clone(),
    };
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
            } if !linear_state(body, st, sty) && never_negative(blk, n) => {
                s.segment(bd, (n, z, st, sty, index, body), &mut binds);
            }
            _ => binds.push(bd.clone()),
        }
    }
    Normal {
        params: normal.params.clone(),
        body: Block {
            binds,
            result: blk.result.clone(),
        },
        spans: s.spans,
    }
}

/// Whether the Index atom `n` of `blk` cannot be negative — a literal
/// `≥ 0`, a `length`, or a trip count (R-While's `snd` of a counting
/// loop) — so that k segments of a fold over it have its ⊥s: a fold over a
/// negative count is ⊥ (E-IFold-Bot), which the segments would not be.
fn never_negative(blk: &Block, n: &Atom) -> bool {
    let bound = |v: &Name| blk.binds.iter().find(|b| &b.name == v);
    match n {
        Atom::Lit(Lit::Int(k), _) => *k >= 0,
        Atom::Var(v, _) => match bound(v).map(|b| &b.rhs) {
            Some(Rhs::Prim(Prim::Length, _)) => true,
            Some(Rhs::Prim(Prim::Snd, a)) => a[0]
                .var()
                .and_then(bound)
                .is_some_and(|c| matches!(c.rhs, Rhs::While { .. })),
            _ => false,
        },
        _ => false,
    }
}

struct Segmenter<'a, 'b> {
    b: &'a mut Builder<'b>,
    spans: HashMap<Name, crate::diagnostic::Span>,
}

type Parts<'a> = (&'a Atom, &'a Atom, &'a Name, &'a Type, &'a Name, &'a Block);

impl Segmenter<'_, '_> {
    fn fresh(&mut self, stem: &str, span_of: &Name) -> Name {
        let x = self.b.fresh(stem);
        if let Some(s) = self.spans.get(span_of).copied() {
            self.spans.insert(x.clone(), s);
        }
        x
    }

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
            self.fresh("q", x),
            self.fresh("sq", x),
            self.fresh("lt", x),
            self.fresh("q", x),
        );
        let k = self.fresh("k", x);
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
            self.fresh("s", x),
            self.fresh("j", x),
            self.fresh("base", x),
            self.fresh("rest", x),
            self.fresh("short", x),
            self.fresh("c", x),
            self.fresh("neg", x),
            self.fresh("m", x),
            self.fresh("y", x),
            self.fresh("i", x),
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
