//! The forward sweep fwd(B) (spec/ad-reverse.md §4.2): the block's
//! computation returning `(result, tape)`, where the tape holds every
//! value the block binds that is not recomputed (§4.1) or deferred (§4.5)
//! and, for loops and conditionals, the tapes of their bodies; and
//! `restore`, which rebinds a block's variables (and sub-tapes) from its
//! tape for the reverse sweep. The tape's type follows the same choices
//! (`tape_type`, `entry_type`).

use super::analysis::{recomputed, untaped};
use super::{Lets, Reverse};
use crate::anf::to_ir;
use crate::anf::{Binding, Block, LoopKind, Rhs};
use crate::ir::{Expr, ExprId, Lit, Name, Prim, Type};

impl Reverse<'_, '_> {
    /// Whether the forward sweep leaves `x` out: a deferred fold or a
    /// binding on its path to the result (R-Defer, §4.5).
    fn defers(&self, x: &Name) -> bool {
        self.deferred.contains_key(x) || self.deferred_path.contains(x)
    }

    /// A loop whose tape entry is its value alone: an untaped loop (§4.1)
    /// or a checkpointed one (§4.4).
    pub(super) fn unrecorded(&self, bd: &Binding) -> bool {
        untaped(bd) || self.checkpointed.contains(&bd.name)
    }

    /// The tape type of a block: (entry₁, (entry₂, … false)), over the
    /// bindings that are not [`recomputed`].
    pub(super) fn tape_type(&self, blk: &Block) -> Type {
        let mut t = Type::Bool;
        for bd in blk
            .binds
            .iter()
            .rev()
            .filter(|bd| !recomputed(bd) && !self.defers(&bd.name))
        {
            t = Type::pair(self.entry_type(bd), t);
        }
        t
    }

    pub(super) fn entry_type(&self, bd: &Binding) -> Type {
        match &bd.rhs {
            // A trip count (R-While) is stored as it is, like a
            // primitive's value.
            Rhs::Prim(..) | Rhs::Array(_) | Rhs::While { .. } => bd.ty.clone(),
            _ if self.unrecorded(bd) => bd.ty.clone(),
            // R-Checkpoint-State: the states, no tapes.
            Rhs::Loop {
                state: Some((_, _, st)),
                ..
            } if self.states_only.contains(&bd.name) => {
                Type::pair(bd.ty.clone(), Type::array(st.clone()))
            }
            Rhs::If(_, t, f) => Type::pair(
                bd.ty.clone(),
                Type::pair(self.tape_type(t), self.tape_type(f)),
            ),
            Rhs::Loop {
                kind, state, body, ..
            } => {
                let carried = match (kind, state) {
                    (LoopKind::Build, _) => body.result.ty().clone(),
                    (_, Some((_, _, st))) => st.clone(),
                    _ => unreachable!("folds have a state"),
                };
                Type::pair(
                    bd.ty.clone(),
                    Type::array(Type::pair(carried, self.tape_type(body))),
                )
            }
        }
    }

    /// fwd(B): `(result, tape)`.
    pub fn fwd(&mut self, blk: &Block) -> ExprId {
        let mut lets = Lets(Vec::new());
        let mut entries = Vec::new();
        for bd in &blk.binds {
            if self.defers(&bd.name) {
                continue;
            }
            if let Some(en) = self.fwd_binding(bd, &mut lets) {
                entries.push((en, bd));
            }
        }
        let mut tape = self.b.add(Expr::Lit(Lit::Bool(false)), Type::Bool);
        for (en, bd) in entries.iter().rev() {
            let et = self.entry_type(bd);
            let v = self.b.var(en, et);
            tape = self.b.pair(v, tape);
        }
        let r = match blk.result.var() {
            // R-Defer: the reverse sweep computes the result.
            Some(x) if self.defers(x) => self.b.double(0.0),
            _ => self.atom(&blk.result),
        };
        let out = self.b.pair(r, tape);
        lets.wrap(self.b, out)
    }

    /// F(b) of fwd(B) (§4.2): the lets that compute one binding and its
    /// tape entry; the variable holding the entry, or `None` for a
    /// recomputed binding, which has none.
    pub(super) fn fwd_binding(&mut self, bd: &Binding, lets: &mut Lets) -> Option<Name> {
        let was = self.b.at_binding(&bd.name);
        let r = self.fwd_binding_here(bd, lets);
        self.b.restore(was);
        r
    }

    fn fwd_binding_here(&mut self, bd: &Binding, lets: &mut Lets) -> Option<Name> {
        match &bd.rhs {
            Rhs::Prim(..) | Rhs::Array(_) => {
                let v = to_ir::simple_rhs(self.b, bd);
                lets.0.push((bd.name.clone(), v));
                (!recomputed(bd)).then(|| bd.name.clone())
            }
            Rhs::If(..) if recomputed(bd) => {
                let v = to_ir::plain_rhs(self.b, bd);
                lets.0.push((bd.name.clone(), v));
                None
            }
            // A trip count (R-While) is computed plainly and stored.
            Rhs::While { .. } => {
                let v = to_ir::plain_rhs(self.b, bd);
                lets.0.push((bd.name.clone(), v));
                Some(bd.name.clone())
            }
            _ if self.unrecorded(bd) => {
                let v = to_ir::plain_rhs(self.b, bd);
                lets.0.push((bd.name.clone(), v));
                Some(bd.name.clone())
            }
            // R-Checkpoint-State: the fold as a plain `iscan` of its
            // states (`st[i]` before iteration i, `st[n]` the value).
            Rhs::Loop {
                n,
                state: Some((_, _, sty)),
                ..
            } if self.states_only.contains(&bd.name) => {
                let mut scan = bd.clone();
                scan.ty = Type::array(sty.clone());
                if let Rhs::Loop { kind, .. } = &mut scan.rhs {
                    *kind = LoopKind::IScan;
                }
                let states = to_ir::plain_rhs(self.b, &scan);
                let (tn, tt) = self.bind(lets, "t", states);
                let tv = self.b.var(&tn, tt.clone());
                let nv = self.atom(n);
                let x = self.b.get(tv, nv);
                Some(self.loop_entry(bd, x, (&tn, tt), lets))
            }
            Rhs::If(c, t, f) => {
                let (tt, tf) = (self.tape_type(t), self.tape_type(f));
                let c = self.atom(c);
                let then_ = self.fwd_branch(t, &tf, true);
                let else_ = self.fwd_branch(f, &tt, false);
                let e = self.b.if_(c, then_, else_);
                let (en, et) = self.bind(lets, "e", e);
                let ev = self.b.var(&en, et);
                let x = self.b.fst(ev);
                lets.0.push((bd.name.clone(), x));
                Some(en)
            }
            Rhs::Loop {
                kind,
                n,
                state,
                index,
                body,
            } => {
                let nn = self.atom(n);
                let fb = self.fwd(body);
                let per = self.b.ty(fb);
                let tape = match (kind, state) {
                    (LoopKind::Build, _) => {
                        let lam = self.b.lam(index.clone(), Type::Index, fb);
                        self.b
                            .prim(Prim::Build, vec![nn, lam], Type::array(per.clone()))
                    }
                    (_, Some((z, s, st))) => {
                        // iscan over (state, tape of the previous step).
                        let acc = self.b.fresh("acc");
                        let av = self.b.var(&acc, per.clone());
                        let sv = self.b.fst(av);
                        let body_ = self.b.let_(s.clone(), sv, fb);
                        let lam = self.b.lam(index.clone(), Type::Index, body_);
                        let f = self.b.lam(acc, per.clone(), lam);
                        let z = self.atom(z);
                        let tt = self.tape_type(body);
                        let zt = self.default_of(&tt);
                        let init = self.b.pair(z, zt);
                        let _ = st;
                        self.b
                            .prim(Prim::IScan, vec![f, init, nn], Type::array(per.clone()))
                    }
                    _ => unreachable!("folds have a state"),
                };
                let (tn, tt) = self.bind(lets, "t", tape);
                // The value itself, from the tape.
                let x = match kind {
                    LoopKind::Build => {
                        let tv = self.b.var(&tn, tt.clone());
                        let len = self.b.length(tv);
                        self.b.build(len, |b, k| {
                            let tv = b.var(&tn, tt.clone());
                            let kv = b.var(k, Type::Index);
                            let e = b.get(tv, kv);
                            b.fst(e)
                        })
                    }
                    LoopKind::IFold => {
                        let tv = self.b.var(&tn, tt.clone());
                        let last = self.atom(n);
                        let e = self.b.get(tv, last);
                        self.b.fst(e)
                    }
                    LoopKind::IScan => {
                        let tv = self.b.var(&tn, tt.clone());
                        let len = self.b.length(tv);
                        self.b.build(len, |b, k| {
                            let tv = b.var(&tn, tt.clone());
                            let kv = b.var(k, Type::Index);
                            let e = b.get(tv, kv);
                            b.fst(e)
                        })
                    }
                };
                Some(self.loop_entry(bd, x, (&tn, tt), lets))
            }
        }
    }

    /// A loop's value `x`, bound to its name, and its tape entry: the
    /// value and the sub-tape `tn` (§4.2). Returns the entry's variable.
    fn loop_entry(
        &mut self,
        bd: &Binding,
        x: ExprId,
        (tn, tt): (&Name, Type),
        lets: &mut Lets,
    ) -> Name {
        lets.0.push((bd.name.clone(), x));
        let xv = self.b.var(&bd.name, bd.ty.clone());
        let tv = self.b.var(tn, tt);
        let entry = self.b.pair(xv, tv);
        self.bind(lets, "e", entry).0
    }

    /// One branch of a conditional's forward sweep (§4.2): `(result,
    /// (its tape, the other's default))` for the `then` branch (`first`),
    /// `(result, (the other's default, its tape))` for the `else` branch.
    fn fwd_branch(&mut self, blk: &Block, other: &Type, first: bool) -> ExprId {
        let r = self.fwd(blk);
        let n = self.b.fresh("r");
        let rv = self.b.var(&n, self.b.ty(r));
        let res = self.b.fst(rv);
        let rv = self.b.var(&n, self.b.ty(r));
        let tape = self.b.snd(rv);
        let other = self.default_of(other);
        let tapes = if first {
            self.b.pair(tape, other)
        } else {
            self.b.pair(other, tape)
        };
        let p = self.b.pair(res, tapes);
        self.b.let_(n, r, p)
    }

    /// Lets that rebind a block's variables (and sub-tapes) from its tape.
    pub(super) fn restore(&mut self, blk: &Block, tape: ExprId, lets: &mut Lets) {
        let start = lets.0.len();
        let (mut tn, mut tt) = self.bind(lets, "tp", tape);
        for bd in &blk.binds {
            if self.defers(&bd.name) {
                // R-Defer: bound by the reverse sweep.
                continue;
            }
            if recomputed(bd) {
                // Its operands are restored or recomputed already.
                let v = to_ir::plain_rhs(self.b, bd);
                lets.0.push((bd.name.clone(), v));
                continue;
            }
            let et = self.entry_type(bd);
            let tv = self.b.var(&tn, tt.clone());
            let entry = self.b.fst(tv);
            match &bd.rhs {
                Rhs::Prim(..) | Rhs::Array(_) => lets.0.push((bd.name.clone(), entry)),
                _ if self.unrecorded(bd) => lets.0.push((bd.name.clone(), entry)),
                _ => {
                    let (en, _) = self.bind(lets, "e", entry);
                    let ev = self.b.var(&en, et.clone());
                    let x = self.b.fst(ev);
                    lets.0.push((bd.name.clone(), x));
                    let ev = self.b.var(&en, et.clone());
                    let sub = self.b.snd(ev);
                    let (sn, _) = self.bind(lets, "st", sub);
                    self.subtapes.insert(bd.name.clone(), sn);
                }
            }
            let tv = self.b.var(&tn, tt.clone());
            let rest = self.b.snd(tv);
            (tn, tt) = self.bind(lets, "tp", rest);
        }
        for (n, _) in &lets.0[start..] {
            self.restored.insert(n.clone());
        }
    }
}
