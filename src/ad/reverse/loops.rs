//! The reverse-mode rules of loops: R-Build (and R-Build-Acc for a placed
//! `build`), R-IFold-Linear (a fold with a linear state runs backwards as
//! a map), R-IFold and R-IScan (a backward loop carrying the state's
//! cotangent), and the two ways a map-like loop's iterations return
//! their contributions: threading the accumulators through an `ifold`
//! (§5.6), or recording them in a `build` and summing them.

use super::analysis::{ReadOnce, free_vars, read_once};
use super::checkpoint::Iteration;
use super::cotangent::cotangent_type;
use super::zero::Zero;
use super::{Accs, Contrib, Contributions, Cot, Lets, Place, Reverse, acc_of, acc_type};
use crate::ad::AdError;
use crate::ad::accum::{self, V, node_type};
use crate::anf::to_ir;
use crate::anf::{Atom, Binding, Block, LoopKind, Rhs};
use crate::ir::{ExprId, Name, Prim, Type};

impl Reverse<'_, '_> {
    /// R-Build, and R-Build-Acc for a placed `build`: the cotangent becomes
    /// dense once (`accum`, or it is in an accumulator already); each
    /// element's body runs backwards on its own tape. With accumulators to
    /// thread and no array among the other free variables, the elements
    /// run in a backward-compatible `ifold` that threads them (§5.6);
    /// otherwise in a `build` whose contributions are summed (doubles) or
    /// joined (lists).
    pub(super) fn rule_build(
        &mut self,
        bd: &Binding,
        cot: &Cot,
        lets: &mut Lets,
        accs: &mut Accs,
    ) -> Result<Contributions, AdError> {
        let Rhs::Loop { n, index, body, .. } = &bd.rhs else {
            unreachable!("a build")
        };
        let Type::Array(el) = &bd.ty else {
            unreachable!("build has an array type")
        };
        let mut out = Vec::new();
        let mut fvs = free_vars(body);
        fvs.retain(|(v, t)| v != index && t.has_double() && self.active.contains(v));
        // Elements that are arrays run backwards from their places in the
        // build's own accumulator, so it is threaded too; Double elements
        // only read their seeds from it.
        let own = match cot {
            Cot::At(p) if **el != Type::Double => Some(&p.root),
            _ => None,
        };
        let (threads, w) = self.split(&fvs, accs, own);
        let per = Iteration {
            bd,
            body,
            n,
            index,
            carried: el,
            offset: 0,
        };
        if threadable(&threads, &w) {
            let seeding = match cot {
                Cot::Value(xb) => {
                    let (dn, dt) = self.densify(xb, el, n, lets);
                    Seeding::Dense(dn, dt)
                }
                Cot::At(p) => Seeding::Place(p.clone(), (**el).clone()),
            };
            self.map_threaded(&per, seeding, &w, &threads, lets, accs, &mut out)?;
            return Ok(out);
        }
        let bare: Vec<Option<ReadOnce>> = fvs.iter().map(|(v, _)| read_once(body, v)).collect();
        let mut l = Lets(Vec::new());
        self.restore_iteration(&per, &mut l);
        let seed = match cot {
            Cot::Value(xb) => {
                let (dn, dt) = self.densify(xb, el, n, lets);
                let dv = self.b.var(&dn, dt);
                let iv = self.b.var(index, Type::Index);
                self.b.get(dv, iv)
            }
            Cot::At(p) => {
                // Element i's cotangent read out of the accumulator.
                let acc = V::new(&acc_of(accs, &p.root), &acc_type());
                let nd = self.b.var(&p.node, node_type(&bd.ty));
                let iv = self.b.var(index, Type::Index);
                if **el == Type::Double {
                    let at = self.b.prim(Prim::Add, vec![nd, iv], Type::Index);
                    let av = self.b.var(&acc.name, acc_type());
                    self.b.get(av, at)
                } else {
                    let sub = self.b.get(nd, iv);
                    let (sn, _) = self.bind(&mut l, "node", sub);
                    let xv = self.b.var(&bd.name, bd.ty.clone());
                    let iv = self.b.var(index, Type::Index);
                    let xi = self.b.get(xv, iv);
                    let (xn, _) = self.bind(&mut l, "x", xi);
                    accum::to_sparse(self.b, &acc, &V::new(&sn, &node_type(el)), &V::new(&xn, el))
                }
            }
        };
        let (sn, _) = self.bind(&mut l, "seed", seed);
        self.map_contributions(body, n, index, l, &sn, &fvs, &bare, lets, &mut out)?;
        Ok(out)
    }

    /// R-IFold-Linear (spec/ad-reverse.md §5): a fold whose state is
    /// linear runs backwards as a map over its iterations.
    pub(super) fn rule_ifold_linear(
        &mut self,
        bd: &Binding,
        xb: &Name,
        lets: &mut Lets,
        accs: &mut Accs,
    ) -> Result<Contributions, AdError> {
        let Rhs::Loop {
            n,
            state: Some((z, s, sty)),
            index,
            body,
            ..
        } = &bd.rhs
        else {
            unreachable!("a fold")
        };
        let ct = cotangent_type(&bd.ty);
        let mut out = Vec::new();
        // R-IFold-Linear: every iteration's state cotangent is x̄,
        // so the iterations run backwards independently, as the
        // elements of a `build` (in increasing order), from x̄.
        let mut fvs = free_vars(body);
        fvs.retain(|(v, t)| v != index && v != s && t.has_double() && self.active.contains(v));
        let (threads, w) = self.split(&fvs, accs, None);
        let per = Iteration {
            bd,
            body,
            n,
            index,
            carried: sty,
            offset: 1,
        };
        if threadable(&threads, &w) {
            self.map_threaded(
                &per,
                Seeding::Same(xb.clone()),
                &w,
                &threads,
                lets,
                accs,
                &mut out,
            )?;
        } else {
            let bare: Vec<Option<ReadOnce>> = fvs.iter().map(|(v, _)| read_once(body, v)).collect();
            let mut l = Lets(Vec::new());
            // The state is never restored: the bindings on its path
            // are recomputed ones nothing reads, so left out.
            self.restore_iteration(&per, &mut l);
            self.map_contributions(body, n, index, l, xb, &fvs, &bare, lets, &mut out)?;
            if let Some(done) = self.deferred.get_mut(&bd.name) {
                // R-Defer, unfused: the fold itself, here.
                *done = true;
                let v = to_ir::plain_rhs(self.b, bd);
                lets.0.push((bd.name.clone(), v));
            }
        }
        // z̄ ⊕= x̄, the state cotangent before the first iteration.
        if let Atom::Var(zn, zt) = z {
            let c = self.b.var(xb, ct.clone());
            out.push((zn.clone(), zt.clone(), Contrib::Value(c), Zero::No));
        }
        Ok(out)
    }

    /// R-IFold, R-IScan, R-IFold-Acc: a backward loop over the iterations
    /// carries the state's cotangent.
    pub(super) fn rule_fold(
        &mut self,
        bd: &Binding,
        xb: &Name,
        lets: &mut Lets,
        accs: &mut Accs,
    ) -> Result<Contributions, AdError> {
        let Rhs::Loop {
            kind,
            n,
            state: Some((z, s, sty)),
            index,
            body,
        } = &bd.rhs
        else {
            unreachable!("a fold or a scan")
        };
        let ct = cotangent_type(&bd.ty);
        let mut out = Vec::new();
        // R-IFold / R-IScan: a backward loop carries the state's
        // cotangent; a backward `iscan` records each iteration's
        // contributions, which are then summed or joined, or a
        // backward `ifold` threads the accumulators and sums the
        // rest (R-IFold-Acc).
        let st = self.subtapes[&bd.name].clone();
        // R-Checkpoint-State: the sub-tape holds the states alone.
        let states_only = self.states_only.contains(&bd.name);
        let stt = if states_only {
            Type::array(sty.clone())
        } else {
            Type::array(Type::pair(sty.clone(), self.tape_type(body)))
        };
        let mut fvs = free_vars(body);
        fvs.retain(|(v, t)| v != index && v != s && t.has_double() && self.active.contains(v));
        let (threads, w) = self.split(&fvs, accs, None);
        let threaded = threadable(&threads, &w);
        let fvs = if threaded { w } else { fvs };
        let bare: Vec<Option<ReadOnce>> = if threaded {
            vec![None; fvs.len()]
        } else {
            fvs.iter().map(|(v, _)| read_once(body, v)).collect()
        };
        let sct = cotangent_type(sty);
        // Dense state cotangents (an iscan's result is an array).
        let dense = if *kind == LoopKind::IScan {
            let z0 = self.zero_ct(sty);
            let nv = self.atom(n);
            let one = self.b.index(1);
            let len = self.b.prim(Prim::Add, vec![nv, one], Type::Index);
            let xv = self.b.var(xb, ct.clone());
            let d = self
                .b
                .prim(Prim::Accum, vec![z0, len, xv], Type::array(sct.clone()));
            Some(self.bind(lets, "dense", d))
        } else {
            None
        };
        let init_state = match &dense {
            Some((dn, dt)) => {
                let dv = self.b.var(dn, dt.clone());
                let nv = self.atom(n);
                self.b.get(dv, nv)
            }
            None => self.b.var(xb, ct.clone()),
        };
        let mut zeros: Vec<ExprId> = fvs
            .iter()
            .zip(&bare)
            .map(|((_, t), b)| {
                if b.is_some() {
                    self.bare_zero(t)
                } else {
                    self.zero_ct(t)
                }
            })
            .collect();
        if threaded {
            for (_, a) in &threads {
                zeros.push(self.b.var(a, acc_type()));
            }
        }
        let zeros = self.tuple(zeros);
        let init = self.b.pair(init_state, zeros);
        let acc_t = self.b.ty(init);
        // Step k handles iteration i = n - 1 - k.
        let (acc, k) = (self.b.fresh("acc"), self.b.fresh("k"));
        // n - 1, once, outside the loop.
        let nv = self.atom(n);
        let one = self.b.index(1);
        let nm1 = self.b.prim(Prim::Sub, vec![nv, one], Type::Index);
        let (nm1n, _) = self.bind(lets, "last", nm1);
        let mut l = Lets(Vec::new());
        let nm1v = self.b.var(&nm1n, Type::Index);
        let kv = self.b.var(&k, Type::Index);
        let i_e = self.b.prim(Prim::Sub, vec![nm1v, kv], Type::Index);
        l.0.push((index.clone(), i_e));
        let av = self.b.var(&acc, acc_t.clone());
        let sb = self.b.fst(av);
        let (sbn, _) = self.bind(&mut l, "sb", sb);
        // The accumulators, from the state (threaded only).
        let mut inner: Accs = Vec::new();
        if threaded {
            for (j, (root, _)) in threads.iter().enumerate() {
                let av = self.b.var(&acc, acc_t.clone());
                let rest = self.b.snd(av);
                let a = self.proj(rest, fvs.len() + j);
                let (an, _) = self.bind(&mut l, "acc", a);
                inner.push((root.clone(), an));
            }
        }
        let sv = self.b.var(&st, stt.clone());
        let iv = self.b.var(index, Type::Index);
        let e = self.b.get(sv, iv);
        let s_i = if states_only { e } else { self.b.fst(e) };
        l.0.push((s.clone(), s_i));
        // Like the restored values: in bounds, left out if unused.
        self.restored.insert(s.clone());
        if states_only {
            // The iteration's values and tapes, computed again from its
            // state (R-Checkpoint-State).
            self.recompute(body, &mut l);
        } else {
            let tape = self.iteration_tape(bd, sty, body, index, 1);
            self.restore(body, tape, &mut l);
        }
        let mut wanted = vec![(s.clone(), sty.clone())];
        wanted.extend(fvs.iter().cloned());
        let mut wanted_bare = vec![None];
        wanted_bare.extend(bare.iter().cloned());
        let r = self.rev_bare(body, Some(Cot::Value(sbn)), &wanted, &wanted_bare, &inner)?;
        let (rn, rt) = self.bind(&mut l, "r", r);
        let rv = self.b.var(&rn, rt.clone());
        let mut new_sb = self.b.fst(rv);
        if let Some((dn, dt)) = &dense {
            let dv = self.b.var(dn, dt.clone());
            let iv = self.b.var(index, Type::Index);
            let d_i = self.b.get(dv, iv);
            new_sb = self.add_ct(new_sb, d_i, sty);
        }
        let rest = if threaded {
            // (sums ⊕ this iteration's, accumulators).
            let mut items = Vec::new();
            for (j, (_, t)) in fvs.iter().enumerate() {
                let av = self.b.var(&acc, acc_t.clone());
                let old = self.b.snd(av);
                let old = self.proj(old, j);
                let rv = self.b.var(&rn, rt.clone());
                let c = self.proj(rv, 1 + j);
                items.push(self.add_ct(old, c, t));
            }
            for j in 0..threads.len() {
                let rv = self.b.var(&rn, rt.clone());
                items.push(self.proj(rv, 1 + fvs.len() + j));
            }
            self.tuple(items)
        } else {
            let rv = self.b.var(&rn, rt);
            self.b.snd(rv)
        };
        let step = self.b.pair(new_sb, rest);
        let body_e = l.wrap_live(self.b, step, &self.restored);
        let lam_k = self.b.lam(k, Type::Index, body_e);
        let f = self.b.lam(acc, acc_t.clone(), lam_k);
        let nv = self.atom(n);
        let op = if threaded { Prim::IFold } else { Prim::IScan };
        let out_t = if threaded {
            acc_t.clone()
        } else {
            Type::array(acc_t.clone())
        };
        let scan = self.b.prim(op, vec![f, init, nv], out_t);
        let (bn, bt) = self.bind(lets, "back", scan);
        // The state cotangent after all iterations.
        let last_state = |me: &mut Self| {
            let bv = me.b.var(&bn, bt.clone());
            if threaded {
                bv
            } else {
                let nv = me.atom(n);
                me.b.get(bv, nv)
            }
        };
        // z̄ ⊕= the state cotangent after all iterations.
        if let Atom::Var(zn, zt) = z {
            let last = last_state(self);
            let c = self.b.fst(last);
            out.push((zn.clone(), zt.clone(), Contrib::Value(c), Zero::No));
        }
        if threaded {
            let last = last_state(self);
            let rest = self.b.snd(last);
            let (rn, rt) = self.bind(lets, "sums", rest);
            for (k, (v, t)) in fvs.iter().enumerate() {
                let rv = self.b.var(&rn, rt.clone());
                let c = self.proj(rv, k);
                out.push((v.clone(), t.clone(), Contrib::Value(c), Zero::No));
            }
            self.rethread(&rn, &rt, fvs.len(), &threads, lets, accs);
        } else {
            for (k, (v, t)) in fvs.iter().enumerate() {
                let total = if bare[k].is_some() {
                    self.gather_bare(&bn, &bt, k, 1, true)
                } else {
                    self.reduce(&bn, &bt, k, true, t)
                };
                out.push((v.clone(), t.clone(), Contrib::Value(total), Zero::No));
            }
        }
        Ok(out)
    }

    /// R-Build and R-IFold-Linear threading accumulators (§5.6): iteration
    /// `index` restores its tape, runs the body backwards from its seed
    /// with the accumulators from the state, and passes them on with the
    /// sums of the other free variables' cotangents (doubles, or tuples of
    /// them): `ifold (fun st i -> …) (accs, 0_W) n`.
    #[allow(clippy::too_many_arguments, reason = "the parts of one rule")]
    fn map_threaded(
        &mut self,
        per: &Iteration<'_>,
        seeding: Seeding,
        w: &[(Name, Type)],
        threads: &Accs,
        lets: &mut Lets,
        accs: &mut Accs,
        out: &mut Contributions,
    ) -> Result<(), AdError> {
        let m = threads.len();
        // R-Defer: a deferred fold's own state rides along, last.
        let carry = match &per.bd.rhs {
            Rhs::Loop {
                state: Some((z, s, _)),
                ..
            } if self.deferred.contains_key(&per.bd.name) => Some((z, s)),
            _ => None,
        };
        let mut init = Vec::new();
        for (_, a) in threads {
            init.push(self.b.var(a, acc_type()));
        }
        for (_, t) in w {
            init.push(self.zero_ct(t));
        }
        if let Some((z, _)) = carry {
            init.push(self.atom(z));
        }
        let init = self.tuple(init);
        let st_t = self.b.ty(init);
        let st = self.b.fresh("st");
        let mut l = Lets(Vec::new());
        let mut inner: Accs = Vec::new();
        for (k, (root, _)) in threads.iter().enumerate() {
            let sv = self.b.var(&st, st_t.clone());
            let a = self.proj(sv, k);
            let (an, _) = self.bind(&mut l, "acc", a);
            inner.push((root.clone(), an));
        }
        if let Some((_, s)) = carry {
            let sv = self.b.var(&st, st_t.clone());
            let e = self.proj(sv, m + w.len());
            l.0.push((s.clone(), e));
        }
        self.restore_iteration(per, &mut l);
        let seed = match seeding {
            Seeding::Same(xb) => Cot::Value(xb),
            Seeding::Dense(dn, dt) => {
                let dv = self.b.var(&dn, dt);
                let iv = self.b.var(per.index, Type::Index);
                let e = self.b.get(dv, iv);
                Cot::Value(self.bind(&mut l, "seed", e).0)
            }
            Seeding::Place(p, el) => {
                let nd = self.b.var(&p.node, node_type(&Type::array(el.clone())));
                let iv = self.b.var(per.index, Type::Index);
                if el == Type::Double {
                    let at = self.b.prim(Prim::Add, vec![nd, iv], Type::Index);
                    let acc = self.b.var(&acc_of(accs, &p.root), acc_type());
                    let e = self.b.get(acc, at);
                    Cot::Value(self.bind(&mut l, "seed", e).0)
                } else {
                    let e = self.b.get(nd, iv);
                    let (sn, _) = self.bind(&mut l, "node", e);
                    Cot::At(Place {
                        root: p.root,
                        node: sn,
                    })
                }
            }
        };
        let r = self.rev_bare(per.body, Some(seed), w, &[], &inner)?;
        let (rn, rt) = self.bind(&mut l, "r", r);
        let mut next = Vec::new();
        for k in 0..m {
            let rv = self.b.var(&rn, rt.clone());
            next.push(self.proj(rv, w.len() + k));
        }
        for (k, (_, t)) in w.iter().enumerate() {
            let sv = self.b.var(&st, st_t.clone());
            let old = self.proj(sv, m + k);
            let rv = self.b.var(&rn, rt.clone());
            let c = self.proj(rv, k);
            next.push(self.add_ct(old, c, t));
        }
        if carry.is_some() {
            next.push(self.atom(&per.body.result));
        }
        let next = self.tuple(next);
        let body_e = l.wrap_live(self.b, next, &self.restored);
        let lam_i = self.b.lam(per.index.clone(), Type::Index, body_e);
        let f = self.b.lam(st, st_t.clone(), lam_i);
        let nv = self.atom(per.n);
        let fold = self.b.prim(Prim::IFold, vec![f, init, nv], st_t);
        let (fname, ft) = self.bind(lets, "fold", fold);
        self.rethread(&fname, &ft, 0, threads, lets, accs);
        if carry.is_some() {
            let fv = self.b.var(&fname, ft.clone());
            let x = self.proj(fv, m + w.len());
            lets.0.push((per.bd.name.clone(), x));
            self.deferred.insert(per.bd.name.clone(), true);
        }
        for (k, (v, t)) in w.iter().enumerate() {
            let fv = self.b.var(&fname, ft.clone());
            let c = self.proj(fv, m + k);
            out.push((v.clone(), t.clone(), Contrib::Value(c), Zero::No));
        }
        Ok(())
    }

    /// The tail of R-Build and R-IFold-Linear: iteration `index` of a loop
    /// over `n` runs `body` backwards from `seed` after the lets `l`
    /// (its restore), `cs = build n (fun index -> l; rev(body, seed, W))`
    /// records the contributions, and each `w ∈ W` gets their ⊕. With a
    /// single free variable each contribution is stored bare, so a list
    /// is joined without a gather.
    #[allow(clippy::too_many_arguments, reason = "the parts of one rule")]
    fn map_contributions(
        &mut self,
        body: &Block,
        n: &Atom,
        index: &Name,
        l: Lets,
        seed: &Name,
        fvs: &[(Name, Type)],
        bare: &[Option<ReadOnce>],
        lets: &mut Lets,
        out: &mut Contributions,
    ) -> Result<(), AdError> {
        let mut r = self.rev_bare(body, Some(Cot::Value(seed.clone())), fvs, bare, &[])?;
        let single = fvs.len() == 1;
        if single {
            r = self.proj(r, 0);
        }
        let per = l.wrap_live(self.b, r, &self.restored);
        let lam = self.b.lam(index.clone(), Type::Index, per);
        let nv = self.atom(n);
        let pt = self.b.ty(lam).fun_result();
        let contribs = self
            .b
            .prim(Prim::Build, vec![nv, lam], Type::array(pt.clone()));
        let (cn, ctt) = self.bind(lets, "contribs", contribs);
        for (k, (v, t)) in fvs.iter().enumerate() {
            let total = if single && bare[k].is_some() {
                // Bare contributions: the pairs are the list.
                self.b.var(&cn, ctt.clone())
            } else if single {
                let cv = self.b.var(&cn, ctt.clone());
                self.sum_array(cv, t, &cotangent_type(t))
            } else if bare[k].is_some() {
                self.gather_bare(&cn, &ctt, k, 0, false)
            } else {
                self.reduce(&cn, &ctt, k, false, t)
            };
            out.push((v.clone(), t.clone(), Contrib::Value(total), Zero::No));
        }
        Ok(())
    }
}

/// Where a threaded map-like loop's iterations start from.
enum Seeding {
    /// Every iteration from the same cotangent (R-IFold-Linear).
    Same(Name),
    /// Element i from slot i of a dense array of cotangents (R-Build).
    Dense(Name, Type),
    /// Element i (of the given type) from its place in an accumulator
    /// (R-Build-Acc).
    Place(Place, Type),
}

/// Whether a loop threads accumulators: it has some to thread, and every
/// other free variable's cotangent is free of arrays, so the iterations'
/// contributions can be summed in the loop's state.
fn threadable(threads: &Accs, w: &[(Name, Type)]) -> bool {
    !threads.is_empty() && w.iter().all(|(_, t)| !cotangent_type(t).has_array())
}
