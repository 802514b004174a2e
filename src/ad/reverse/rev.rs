//! The reverse sweep rev(B, ȳ) (spec/ad-reverse.md §5): with the block's
//! values restored, the bindings are visited last to first, and each
//! one's contributions (`rules.rs`) are delivered to its operands — ⊕ into
//! their adjoints, or into a dense accumulator where the operand is placed
//! (§5.6). Here too: placing the accumulable variables a block binds
//! (roots, views, aliases), and splitting a nested block's free variables
//! into the accumulators it threads and the cotangents it returns.

use std::collections::HashMap;

use super::analysis::ReadOnce;
use super::cotangent::cotangent_type;
use super::zero::Zero;
use super::{Accs, Contrib, Cot, Lets, Place, Reverse, acc_of, acc_type, set_acc};
use crate::ad::AdError;
use crate::ad::accum::{self, V, accumulable, node_type};
use crate::anf::to_ir;
use crate::anf::{Atom, Block, LoopKind, Rhs};
use crate::ir::{ExprId, Name, Prim, Type};

impl Reverse<'_, '_> {
    /// rev(B, ȳ): the tuple of cotangents of `wanted`, with B's variables
    /// in scope (restored from its tape), with two extensions.
    ///
    /// Bare contributions: a wanted array read once in `blk` (`bare[k]` is
    /// its [`read_once`]) gets its one contribution as a bare pair
    /// `(i, ȳ)` rather than the list `[(i, ȳ)]` (ȳ is `0` when the element
    /// received no cotangent): a loop then stores pairs, and its list of
    /// contributions is their array, with nothing to allocate per
    /// iteration or to join (spec/ad-reverse.md, "Bare contributions").
    ///
    /// Accumulators (§5.6): `threads` are the accumulators the block may
    /// add into, with the variables holding them on entry; the result is
    /// the tuple of the wanted cotangents followed by their versions on
    /// exit. The seed may be a place: the result's cotangent is already
    /// in an accumulator.
    pub(super) fn rev_bare(
        &mut self,
        blk: &Block,
        seed: Option<Cot>,
        wanted: &[(Name, Type)],
        bare: &[Option<ReadOnce>],
        threads: &[(Name, Name)],
    ) -> Result<ExprId, AdError> {
        let is_bare = |y: &Name| {
            wanted
                .iter()
                .zip(bare)
                .any(|((w, _), b)| b.is_some() && w == y)
        };
        let mut lets = Lets(Vec::new());
        let mut accs: Accs = threads.to_vec();
        self.place_block(blk, seed.as_ref(), &mut accs, &mut lets);
        let mut adj: HashMap<Name, Name> = HashMap::new();
        // Which parts of each adjoint are structural zeros.
        let mut masks: HashMap<Name, Zero> = HashMap::new();
        if let (Some(s), Atom::Var(r, t)) = (seed, &blk.result)
            && t.has_double()
        {
            let c = match s {
                Cot::Value(s) => Contrib::Value(self.b.var(&s, cotangent_type(t))),
                Cot::At(p) => Contrib::At(p),
            };
            let mut sink = Sink {
                adj: &mut adj,
                masks: &mut masks,
                accs: &mut accs,
                lets: &mut lets,
            };
            self.deliver(r, t, c, Zero::No, &mut sink);
        }
        for bd in blk.binds.iter().rev() {
            let cot = match self.available(&bd.name, &accs) {
                // A view: its contributions are in the accumulator already.
                Some(_) if matches!(bd.rhs, Rhs::Prim(Prim::Get, _)) => continue,
                // Nothing was added into it: zero, like a missing adjoint.
                Some(p) if !self.touched.contains(&p.root) => continue,
                Some(p) => Cot::At(p),
                None => match adj.get(&bd.name) {
                    Some(x) => Cot::Value(x.clone()),
                    None => continue,
                },
            };
            let mask = masks.get(&bd.name).cloned().unwrap_or(Zero::No);
            // The binding's contributions are at its source (a ⊥ in them
            // points at the operation differentiated).
            let was = self.b.at_binding(&bd.name);
            let contributed = self.contributions(bd, &cot, &mask, &mut lets, &mut accs);
            self.b.restore(was);
            for (y, ty, c, m) in contributed? {
                if !ty.has_double() || !self.active.contains(&y) || is_bare(&y) {
                    continue;
                }
                let mut sink = Sink {
                    adj: &mut adj,
                    masks: &mut masks,
                    accs: &mut accs,
                    lets: &mut lets,
                };
                self.deliver(&y, &ty, c, m, &mut sink);
            }
        }
        let mut items = Vec::new();
        for (k, (w, t)) in wanted.iter().enumerate() {
            if let Some(Some((y, yt, i))) = bare.get(k) {
                let i = self.atom(i);
                let c = match adj.get(y) {
                    Some(a) => self.b.var(a, cotangent_type(yt)),
                    None => self.zero_ct(yt),
                };
                items.push(self.b.pair(i, c));
                continue;
            }
            items.push(match adj.get(w) {
                Some(a) => self.b.var(a, cotangent_type(t)),
                None => self.zero_ct(t),
            });
        }
        for (root, _) in threads {
            let a = acc_of(&accs, root);
            items.push(self.b.var(&a, acc_type()));
        }
        if blk
            .binds
            .iter()
            .any(|bd| self.deferred.contains_key(&bd.name))
        {
            // R-Defer: the entry's block. A deferred fold whose rule did not
            // run (it had no cotangent) is computed plainly; then the path
            // to the result, which the tuple ends with.
            for bd in &blk.binds {
                if self.deferred.get(&bd.name) == Some(&false) {
                    let v = to_ir::plain_rhs(self.b, bd);
                    lets.0.push((bd.name.clone(), v));
                } else if self.deferred_path.contains(&bd.name) {
                    let v = to_ir::simple_rhs(self.b, bd);
                    lets.0.push((bd.name.clone(), v));
                }
            }
            items.push(self.atom(&blk.result));
        }
        let out = self.tuple(items);
        Ok(lets.wrap_live(self.b, out, &self.restored))
    }

    /// The place of `x` if its accumulator is among `accs`.
    pub(super) fn available(&self, x: &Name, accs: &Accs) -> Option<Place> {
        let p = self.places.get(x)?;
        accs.iter().any(|(r, _)| *r == p.root).then(|| p.clone())
    }

    /// Places the accumulable variables `blk` binds (§5.6), in order: the
    /// result, when it is built and the seed is a place, at that place (an
    /// alias); every other active `build` or array literal at the start of
    /// a new zero accumulator (a root); a read of a placed array at the
    /// node of its element (a view).
    fn place_block(&mut self, blk: &Block, seed: Option<&Cot>, accs: &mut Accs, lets: &mut Lets) {
        if !self.accumulators {
            return;
        }
        for bd in &blk.binds {
            if !self.active.contains(&bd.name) || !accumulable(&bd.ty) {
                continue;
            }
            let x = V::new(&bd.name, &bd.ty);
            match &bd.rhs {
                Rhs::Loop {
                    kind: LoopKind::Build,
                    ..
                }
                | Rhs::Array(_) => {
                    if blk.result.var() == Some(&bd.name)
                        && let Some(Cot::At(p)) = seed
                    {
                        self.places.insert(bd.name.clone(), p.clone());
                        continue;
                    }
                    // Only an array whose every leaf its binding made: an
                    // accumulator for rows it merely shares (`build n (fun
                    // i -> m[0])`) would cost more than the primal did.
                    if !fresh_leaves(&bd.rhs) {
                        continue;
                    }
                    // A root: zeros for its leaves, and its node from 0.
                    let n = accum::leaf_count(self.b, &x);
                    let z = accum::zeros(self.b, n);
                    let (acc, _) = self.bind(lets, "acc", z);
                    let zero = self.b.index(0);
                    let (base, _) = self.bind(lets, "base", zero);
                    let node = accum::offsets(self.b, &x, &V::new(&base, &Type::Index));
                    let (node, _) = self.bind(lets, "node", node);
                    for n in [&acc, &base, &node] {
                        self.restored.insert(n.clone());
                    }
                    self.places.insert(
                        bd.name.clone(),
                        Place {
                            root: bd.name.clone(),
                            node,
                        },
                    );
                    accs.push((bd.name.clone(), acc));
                }
                Rhs::Prim(Prim::Get, args) => {
                    let Some(w) = args[0].var() else { continue };
                    let Some(pw) = self.available(w, accs) else {
                        continue;
                    };
                    let wt = args[0].ty().clone();
                    let nv = self.b.var(&pw.node, node_type(&wt));
                    let i = self.atom(&args[1]);
                    let nd = self.b.get(nv, i);
                    let (node, _) = self.bind(lets, "node", nd);
                    self.restored.insert(node.clone());
                    self.places.insert(
                        bd.name.clone(),
                        Place {
                            root: pw.root,
                            node,
                        },
                    );
                }
                _ => {}
            }
        }
    }

    /// Adds the contribution `c` to `y : ty`: into its accumulator when
    /// `y` is placed there (`scatter` for a value, `slice_add` from
    /// another accumulator), else ⊕ into its adjoint (a value; a place is
    /// read out as a sparse list first).
    fn deliver(&mut self, y: &Name, ty: &Type, c: Contrib, m: Zero, sink: &mut Sink<'_>) {
        let here = self.available(y, sink.accs);
        match (here, c) {
            (Some(q), Contrib::At(p)) if q == p => {}
            (Some(q), Contrib::At(p)) if q.root != p.root => {
                let dst = self.b.var(&acc_of(sink.accs, &q.root), acc_type());
                let src = V::new(&acc_of(sink.accs, &p.root), &acc_type());
                let e = accum::slice_add(
                    self.b,
                    dst,
                    &V::new(&q.node, &node_type(ty)),
                    &src,
                    &V::new(&p.node, &node_type(ty)),
                    &V::new(y, ty),
                );
                let (a, _) = self.bind(sink.lets, "acc", e);
                set_acc(sink.accs, &q.root, a);
                self.touched.insert(q.root);
            }
            (_, Contrib::At(p)) => {
                // Not placed, or placed in the same accumulator: as a list.
                let src = V::new(&acc_of(sink.accs, &p.root), &acc_type());
                let list = accum::to_sparse(
                    self.b,
                    &src,
                    &V::new(&p.node, &node_type(ty)),
                    &V::new(y, ty),
                );
                self.deliver(y, ty, Contrib::Value(list), m, sink);
            }
            (Some(q), Contrib::Value(c)) => {
                let (cn, ct) = self.bind(sink.lets, "c", c);
                let acc = self.b.var(&acc_of(sink.accs, &q.root), acc_type());
                let e = accum::scatter(
                    self.b,
                    acc,
                    &V::new(&q.node, &node_type(ty)),
                    &V::new(&cn, &ct),
                    ty,
                );
                let (a, _) = self.bind(sink.lets, "acc", e);
                set_acc(sink.accs, &q.root, a);
                self.touched.insert(q.root);
            }
            (None, Contrib::Value(c)) => {
                let (v, m) = match sink.adj.get(y).cloned() {
                    Some(old) => {
                        let o = self.b.var(&old, cotangent_type(ty));
                        let om = sink.masks.get(y).cloned().unwrap_or(Zero::No);
                        (self.add_ct(o, c, ty), om.meet(&m))
                    }
                    None => (c, m),
                };
                let (n, _) = self.bind(sink.lets, "adj", v);
                sink.adj.insert(y.clone(), n);
                sink.masks.insert(y.clone(), m);
            }
        }
    }

    /// The accumulators a nested block adds into — the roots of its
    /// placed free variables among `accs`, plus `extra` — and the rest of
    /// its free variables, whose cotangents it returns as values.
    pub(super) fn split(
        &self,
        fvs: &[(Name, Type)],
        accs: &Accs,
        extra: Option<&Name>,
    ) -> (Accs, Vec<(Name, Type)>) {
        let mut threads: Accs = Vec::new();
        let mut rest = Vec::new();
        let add = |root: &Name, threads: &mut Accs| {
            if !threads.iter().any(|(r, _)| r == root) {
                threads.push((root.clone(), acc_of(accs, root)));
            }
        };
        if let Some(r) = extra {
            add(r, &mut threads);
        }
        for (v, t) in fvs {
            match self.available(v, accs) {
                Some(p) => add(&p.root, &mut threads),
                None => rest.push((v.clone(), t.clone())),
            }
        }
        (threads, rest)
    }

    /// After a construct that threaded `threads` and returned their new
    /// versions as components `from ..` of the tuple in `r`: binds them
    /// and makes them current.
    pub(super) fn rethread(
        &mut self,
        r: &Name,
        rt: &Type,
        from: usize,
        threads: &Accs,
        lets: &mut Lets,
        accs: &mut Accs,
    ) {
        for (k, (root, _)) in threads.iter().enumerate() {
            let rv = self.b.var(r, rt.clone());
            let a = self.proj(rv, from + k);
            let (an, _) = self.bind(lets, "acc", a);
            set_acc(accs, root, an);
            self.touched.insert(root.clone());
        }
    }
}

/// Whether the array `rhs` binds is made leaf by leaf by it (§5.6, the
/// cost of a root): a `build` or literal of Doubles, or a `build` whose
/// elements are such arrays built in its body.
fn fresh_leaves(rhs: &Rhs) -> bool {
    match rhs {
        Rhs::Array(items) => items.iter().all(|a| *a.ty() == Type::Double),
        Rhs::Loop {
            kind: LoopKind::Build,
            body,
            ..
        } => {
            if *body.result.ty() == Type::Double {
                return true;
            }
            let Some(r) = body.result.var() else {
                return false;
            };
            body.binds
                .iter()
                .any(|b| &b.name == r && fresh_leaves(&b.rhs))
        }
        _ => false,
    }
}

/// Where [`Reverse::deliver`] puts a contribution: the adjoint map (with
/// its zero masks), the current accumulators, and the block's lets.
struct Sink<'s> {
    adj: &'s mut HashMap<Name, Name>,
    masks: &'s mut HashMap<Name, Zero>,
    accs: &'s mut Accs,
    lets: &'s mut Lets,
}
