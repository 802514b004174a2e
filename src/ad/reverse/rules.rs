//! The contributions of one binding to its operands, given its cotangent
//! (spec/ad-reverse.md §5, the R-* rules): one method per construct —
//! differentiable primitives, pairs and projections, reads, array
//! literals, conditionals — and the placed bindings' rules (R-Build-Acc,
//! R-Vector-Acc). The rules of loops are in `loops.rs`.

use super::analysis::{free_vars, linear_state};
use super::cotangent::cotangent_type;
use super::zero::Zero;
use super::{Accs, Contrib, Contributions, Cot, Lets, Place, Reverse, acc_of, acc_type, set_acc};
use crate::ad::AdError;
use crate::ad::accum::{self, node_type};
use crate::ad::atom::Atom as BAtom;
use crate::ad::derivatives::{contract, partials};
use crate::anf::{Atom, Binding, Block, LoopKind, Rhs};
use crate::ir::prim::ReverseRule;
use crate::ir::{Expr, ExprId, Lit, Name, Prim, Type};

impl Reverse<'_, '_> {
    /// The contributions (operand, its type, cotangent) of one binding whose
    /// result has cotangent `cot` (R-* rules). Reads of placed arrays, and
    /// loops and conditionals that thread accumulators, add into `accs`
    /// themselves (§5.6).
    pub(super) fn contributions(
        &mut self,
        bd: &Binding,
        cot: &Cot,
        mask: &Zero,
        lets: &mut Lets,
        accs: &mut Accs,
    ) -> Result<Contributions, AdError> {
        let xb = match cot {
            Cot::Value(x) => x.clone(),
            Cot::At(p) => return self.placed_contributions(bd, p, lets, accs),
        };
        let xb = &xb;
        Ok(match &bd.rhs {
            Rhs::Prim(op, _)
                if op.info().reverse.1 == ReverseRule::Partials && bd.ty == Type::Double =>
            {
                self.rule_partials(bd, xb)
            }
            Rhs::Prim(Prim::Pair, _) => self.rule_pair(bd, xb, mask),
            Rhs::Prim(Prim::Fst | Prim::Snd, _) => self.rule_proj(bd, xb, mask),
            Rhs::Prim(Prim::Get, _) => self.rule_get(bd, xb, lets, accs),
            Rhs::Prim(Prim::Concat, _) => self.rule_concat(bd, xb, lets),
            Rhs::Prim(Prim::Accum, _) => self.rule_accum(bd, xb, lets),
            Rhs::Prim(Prim::AddAt, _) => self.rule_add_at(bd, xb),
            // R-Discrete: comparisons, `not`, Index arithmetic, `length`,
            // `toDouble` have no cotangent to pass on.
            Rhs::Prim(..) => Vec::new(),
            Rhs::Array(_) => self.rule_vector(bd, xb, lets),
            Rhs::If(..) => self.rule_if(bd, xb, lets, accs)?,
            Rhs::Loop {
                kind: LoopKind::Build,
                ..
            } => self.rule_build(bd, &Cot::Value(xb.clone()), lets, accs)?,
            Rhs::Loop {
                kind: LoopKind::IFold,
                state: Some((_, s, sty)),
                body,
                ..
            } if linear_state(body, s, sty) => self.rule_ifold_linear(bd, xb, lets, accs)?,
            Rhs::Loop { state: Some(_), .. } => self.rule_fold(bd, xb, lets, accs)?,
            Rhs::Loop { .. } => unreachable!("folds have a state"),
            // R-While: by the time reverse mode runs, every `while` is the
            // trip count of a fold (`counted.rs`), whose Index
            // alone is read; a count is locally constant, so nothing flows
            // back through it.
            Rhs::While { .. } => Vec::new(),
        })
    }

    /// The rules of the differentiable primitives of Doubles: each active
    /// operand receives x̄ times its partial from the one table.
    fn rule_partials(&mut self, bd: &Binding, xb: &Name) -> Contributions {
        let Rhs::Prim(op, args) = &bd.rhs else {
            unreachable!("a primitive")
        };
        let mut out = Vec::new();
        // R-Add, R-Sub, R-Mult, R-Div, R-Pow, R-Neg, R-Sin, R-Cos,
        // R-Tan, R-Log, R-Exp, R-Sqrt: āᵢ += ∂ᵢ · x̄ from the table.
        let atoms: Vec<BAtom> = args
            .iter()
            .map(|a| match a {
                Atom::Var(n, _) => BAtom::Var(n.clone()),
                Atom::Lit(Lit::Double(x), _) => BAtom::Lit(*x),
                Atom::Lit(_, _) => BAtom::Lit(0.0),
            })
            .collect();
        let ps = partials(*op, &atoms, &BAtom::Var(bd.name.clone()), self.b);
        for (p, a) in ps.into_iter().zip(args) {
            if let Atom::Var(n, t) = a
                && self.active.contains(n)
            {
                let c = contract(vec![p], &[Some(BAtom::Var(xb.clone()))], self.b);
                out.push((n.clone(), t.clone(), Contrib::Value(c), Zero::No));
            }
        }
        out
    }

    /// R-Pair: each component receives its part of x̄.
    fn rule_pair(&mut self, bd: &Binding, xb: &Name, mask: &Zero) -> Contributions {
        let Rhs::Prim(_, args) = &bd.rhs else {
            unreachable!("a pair")
        };
        let ct = cotangent_type(&bd.ty);
        let mut out = Vec::new();
        // R-Pair
        // A component whose cotangent is a structural zero
        // contributes nothing (spec/ad-reverse.md §5.4).
        for (k, a) in args.iter().enumerate() {
            let part = mask.component(k);
            if let Atom::Var(n, t) = a
                && part != Zero::Yes
            {
                let v = self.b.var(xb, ct.clone());
                let c = if k == 0 { self.b.fst(v) } else { self.b.snd(v) };
                out.push((n.clone(), t.clone(), Contrib::Value(c), part));
            }
        }
        out
    }

    /// R-Fst, R-Snd: the pair receives x̄ beside a structural zero.
    fn rule_proj(&mut self, bd: &Binding, xb: &Name, mask: &Zero) -> Contributions {
        let Rhs::Prim(op, args) = &bd.rhs else {
            unreachable!("a projection")
        };
        let ct = cotangent_type(&bd.ty);
        let mut out = Vec::new();
        // R-Fst, R-Snd
        if let Atom::Var(n, t) = &args[0] {
            let Type::Pair(a, b) = t else {
                unreachable!("projection of a pair")
            };
            let v = self.b.var(xb, ct.clone());
            let (c, m) = if *op == Prim::Fst {
                let z = self.zero_ct(b);
                (self.b.pair(v, z), Zero::pair(mask.clone(), Zero::Yes))
            } else {
                let z = self.zero_ct(a);
                (self.b.pair(z, v), Zero::pair(Zero::Yes, mask.clone()))
            };
            out.push((n.clone(), t.clone(), Contrib::Value(c), m));
        }
        out
    }

    /// R-Get, R-Get-Acc: a read passes x̄ to its element of the array.
    fn rule_get(
        &mut self,
        bd: &Binding,
        xb: &Name,
        lets: &mut Lets,
        accs: &mut Accs,
    ) -> Contributions {
        let Rhs::Prim(_, args) = &bd.rhs else {
            unreachable!("a read")
        };
        let ct = cotangent_type(&bd.ty);
        let mut out = Vec::new();
        if let Atom::Var(n, t) = &args[0] {
            let i = self.atom(&args[1]);
            let v = self.b.var(xb, ct.clone());
            if let Some(p) = self.available(n, accs) {
                // R-Get-Acc: the element's slot of the accumulator.
                let acc = self.b.var(&acc_of(accs, &p.root), acc_type());
                let nd = self.b.var(&p.node, Type::Index);
                let at = self.b.prim(Prim::Add, vec![nd, i], Type::Index);
                let e = accum::add_at(self.b, acc, at, v);
                let (a, _) = self.bind(lets, "acc", e);
                set_acc(accs, &p.root, a);
                self.touched.insert(p.root);
            } else {
                // R-Get: one sparse contribution (i, x̄).
                let p = self.b.pair(i, v);
                let list = self.b.add(Expr::Array(Box::new([p])), cotangent_type(t));
                out.push((n.clone(), t.clone(), Contrib::Value(list), Zero::No));
            }
        }
        out
    }

    /// R-Concat: `y = concat xss`. x̄ is made dense once (its length is the
    /// sum of the pieces', from a scan of their lengths), and piece j
    /// receives its slice: O(length y + length x̄), the order of the
    /// primal's cost.
    fn rule_concat(&mut self, bd: &Binding, xb: &Name, lets: &mut Lets) -> Contributions {
        let Rhs::Prim(_, args) = &bd.rhs else {
            unreachable!("concat")
        };
        let Atom::Var(xss, xt) = &args[0] else {
            return Vec::new();
        };
        if !self.active.contains(xss) {
            return Vec::new();
        }
        let Type::Array(el) = &bd.ty else {
            unreachable!("concat gives an array")
        };
        let el = (**el).clone();
        // offs = iscan (fun s j -> s + length xss[j]) 0 (length xss)
        let (s, j) = (self.b.fresh("s"), self.b.fresh("j"));
        let sv = self.b.var(&s, Type::Index);
        let xv = self.b.var(xss, xt.clone());
        let jv = self.b.var(&j, Type::Index);
        let piece = self.b.get(xv, jv);
        let len = self.b.length(piece);
        let next = self.b.prim(Prim::Add, vec![sv, len], Type::Index);
        let lj = self.b.lam(j, Type::Index, next);
        let f = self.b.lam(s, Type::Index, lj);
        let zero = self.b.index(0);
        let xv = self.b.var(xss, xt.clone());
        let m = self.b.length(xv);
        let scan = self
            .b
            .prim(Prim::IScan, vec![f, zero, m], Type::array(Type::Index));
        let (offs, ot) = self.bind(lets, "offs", scan);
        let ov = self.b.var(&offs, ot.clone());
        let xv = self.b.var(xss, xt.clone());
        let m = self.b.length(xv);
        let total = self.b.get(ov, m);
        let z = self.zero_ct(&el);
        let v = self.b.var(xb, cotangent_type(&bd.ty));
        let dense = self.b.prim(
            Prim::Accum,
            vec![z, total, v],
            Type::array(cotangent_type(&el)),
        );
        let (dn, dt) = self.bind(lets, "dense", dense);
        let xv = self.b.var(xss, xt.clone());
        let m = self.b.length(xv);
        let out = self.b.build(m, |b, j| {
            let xv = b.var(xss, xt.clone());
            let jv = b.var(j, Type::Index);
            let piece = b.get(xv, jv);
            let len = b.length(piece);
            let slice = b.build(len, |b, o| {
                let ov = b.var(&offs, ot.clone());
                let jv = b.var(j, Type::Index);
                let base = b.get(ov, jv);
                let oi = b.var(o, Type::Index);
                let at = b.prim(Prim::Add, vec![base, oi], Type::Index);
                let dv = b.var(&dn, dt.clone());
                let c = b.get(dv, at);
                let oi = b.var(o, Type::Index);
                b.pair(oi, c)
            });
            let jv = b.var(j, Type::Index);
            b.pair(jv, slice)
        });
        vec![(xss.clone(), xt.clone(), Contrib::Value(out), Zero::No)]
    }

    /// R-Accum: `y = accum z n xs`. With ȳ the dense form of x̄, z
    /// receives ⊕ⱼ ȳ[j] (it is added into every element) and element k of
    /// `xs`, a pair (jₖ, cₖ), receives (0, ȳ[jₖ]).
    fn rule_accum(&mut self, bd: &Binding, xb: &Name, lets: &mut Lets) -> Contributions {
        let Rhs::Prim(_, args) = &bd.rhs else {
            unreachable!("accum")
        };
        let Type::Array(el) = &bd.ty else {
            unreachable!("accum gives an array")
        };
        let el = (**el).clone();
        let ct_el = cotangent_type(&el);
        let zc = self.zero_ct(&el);
        let n = self.atom(&args[1]);
        let v = self.b.var(xb, cotangent_type(&bd.ty));
        let dense = self
            .b
            .prim(Prim::Accum, vec![zc, n, v], Type::array(ct_el.clone()));
        let (dn, dt) = self.bind(lets, "dense", dense);
        let mut out = Vec::new();
        if let Atom::Var(z, zt) = &args[0]
            && self.active.contains(z)
        {
            let dv = self.b.var(&dn, dt.clone());
            let sum = self.sum_array(dv, &el, &ct_el);
            out.push((z.clone(), zt.clone(), Contrib::Value(sum), Zero::No));
        }
        if let Atom::Var(xs, xt) = &args[2]
            && self.active.contains(xs)
        {
            let xv = self.b.var(xs, xt.clone());
            let len = self.b.length(xv);
            let list = self.b.build(len, |b, k| {
                let xv = b.var(xs, xt.clone());
                let kv = b.var(k, Type::Index);
                let item = b.get(xv, kv);
                let at = b.fst(item);
                let dv = b.var(&dn, dt.clone());
                let c = b.get(dv, at);
                let zero = b.index(0);
                let pc = b.pair(zero, c);
                let kv = b.var(k, Type::Index);
                b.pair(kv, pc)
            });
            out.push((xs.clone(), xt.clone(), Contrib::Value(list), Zero::No));
        }
        out
    }

    /// R-AddAt: `y = addAt a i c`. `a` receives x̄ unchanged; `c` the ⊕ of
    /// the contributions of x̄ at index i.
    fn rule_add_at(&mut self, bd: &Binding, xb: &Name) -> Contributions {
        let Rhs::Prim(_, args) = &bd.rhs else {
            unreachable!("addAt")
        };
        let Type::Array(el) = &bd.ty else {
            unreachable!("addAt gives an array")
        };
        let el = (**el).clone();
        let ct_el = cotangent_type(&el);
        let xt = cotangent_type(&bd.ty);
        let mut out = Vec::new();
        if let Atom::Var(a, at) = &args[0]
            && self.active.contains(a)
        {
            let v = self.b.var(xb, xt.clone());
            out.push((a.clone(), at.clone(), Contrib::Value(v), Zero::No));
        }
        if let Atom::Var(c, ct) = &args[2]
            && self.active.contains(c)
        {
            let v = self.b.var(xb, xt.clone());
            let len = self.b.length(v);
            let picked = self.b.build(len, |b, k| {
                let mut me = super::Reverse::new(b);
                let v = me.b.var(xb, xt.clone());
                let kv = me.b.var(k, Type::Index);
                let item = me.b.get(v, kv);
                let j = me.b.fst(item);
                let i = me.atom(&args[1]);
                let hit = me.b.prim(Prim::Eq, vec![j, i], Type::Bool);
                let v = me.b.var(xb, xt.clone());
                let kv = me.b.var(k, Type::Index);
                let item = me.b.get(v, kv);
                let cv = me.b.snd(item);
                let z = me.zero_ct(&el);
                me.b.if_(hit, cv, z)
            });
            let sum = self.sum_array(picked, &el, &ct_el);
            out.push((c.clone(), ct.clone(), Contrib::Value(sum), Zero::No));
        }
        out
    }

    /// R-Vector: an array literal's operands receive the elements of x̄.
    fn rule_vector(&mut self, bd: &Binding, xb: &Name, lets: &mut Lets) -> Contributions {
        let Rhs::Array(args) = &bd.rhs else {
            unreachable!("an array literal")
        };
        let ct = cotangent_type(&bd.ty);
        let mut out = Vec::new();
        // R-Vector: the list becomes dense once, then element j goes
        // to the j-th operand.
        let Type::Array(el) = &bd.ty else {
            unreachable!("array literal of array type")
        };
        let z = self.zero_ct(el);
        let k = self.b.index(args.len() as i64);
        let v = self.b.var(xb, ct.clone());
        let dense = self
            .b
            .prim(Prim::Accum, vec![z, k, v], Type::array(cotangent_type(el)));
        let (dn, dt) = self.bind(lets, "dense", dense);
        for (j, a) in args.iter().enumerate() {
            if let Atom::Var(n, t) = a {
                let dv = self.b.var(&dn, dt.clone());
                let jv = self.b.index(j as i64);
                let c = self.b.get(dv, jv);
                out.push((n.clone(), t.clone(), Contrib::Value(c), Zero::No));
            }
        }
        out
    }

    /// R-If, R-If-Acc: the taken branch runs backwards on its own tape.
    fn rule_if(
        &mut self,
        bd: &Binding,
        xb: &Name,
        lets: &mut Lets,
        accs: &mut Accs,
    ) -> Result<Contributions, AdError> {
        let Rhs::If(c, t, f) = &bd.rhs else {
            unreachable!("a conditional")
        };
        let mut out = Vec::new();
        // R-If: the taken branch's reverse, on its own tape; both
        // branches take the accumulators they may add into and
        // return them (R-If-Acc).
        // A recomputed conditional (§4.1) has no sub-tape: its
        // branches restore from nothing.
        let st = self.subtapes.get(&bd.name).cloned();
        let stt = Type::pair(self.tape_type(t), self.tape_type(f));
        let mut fvs = free_vars(t);
        for v in free_vars(f) {
            if !fvs.iter().any(|(n, _)| *n == v.0) {
                fvs.push(v);
            }
        }
        fvs.retain(|(n, t)| t.has_double() && self.active.contains(n));
        let (threads, fvs) = self.split(&fvs, accs, None);
        let branch = |me: &mut Self, blk: &Block, first: bool| -> Result<ExprId, AdError> {
            let mut l = Lets(Vec::new());
            let tape = match &st {
                Some(st) => {
                    let sv = me.b.var(st, stt.clone());
                    if first { me.b.fst(sv) } else { me.b.snd(sv) }
                }
                None => me.b.add(Expr::Lit(Lit::Bool(false)), Type::Bool),
            };
            me.restore(blk, tape, &mut l);
            let r = me.rev_bare(blk, Some(Cot::Value(xb.clone())), &fvs, &[], &threads)?;
            Ok(l.wrap_live(me.b, r, &me.restored))
        };
        let tr = branch(self, t, true)?;
        let fr = branch(self, f, false)?;
        let cond = self.atom(c);
        let e = self.b.if_(cond, tr, fr);
        let (rn, rt) = self.bind(lets, "r", e);
        for (k, (n, t)) in fvs.iter().enumerate() {
            let rv = self.b.var(&rn, rt.clone());
            let c = self.proj(rv, k);
            out.push((n.clone(), t.clone(), Contrib::Value(c), Zero::No));
        }
        self.rethread(&rn, &rt, fvs.len(), &threads, lets, accs);
        Ok(out)
    }

    /// The rules of a placed binding, whose cotangent is in an accumulator
    /// (§5.6): a `build`'s elements run backwards from their places
    /// (R-Build-Acc), an array literal's operands receive their slots
    /// (R-Vector-Acc).
    fn placed_contributions(
        &mut self,
        bd: &Binding,
        p: &Place,
        lets: &mut Lets,
        accs: &mut Accs,
    ) -> Result<Contributions, AdError> {
        match &bd.rhs {
            Rhs::Loop {
                kind: LoopKind::Build,
                ..
            } => self.rule_build(bd, &Cot::At(p.clone()), lets, accs),
            Rhs::Array(args) => {
                // R-Vector-Acc
                let Type::Array(el) = &bd.ty else {
                    unreachable!("array literal of array type")
                };
                let mut out = Vec::new();
                for (j, a) in args.iter().enumerate() {
                    let Atom::Var(n, t) = a else { continue };
                    let nd = self.b.var(&p.node, node_type(&bd.ty));
                    let jv = self.b.index(j as i64);
                    if **el == Type::Double {
                        let at = self.b.prim(Prim::Add, vec![nd, jv], Type::Index);
                        let acc = self.b.var(&acc_of(accs, &p.root), acc_type());
                        let c = self.b.get(acc, at);
                        out.push((n.clone(), t.clone(), Contrib::Value(c), Zero::No));
                    } else {
                        let sub = self.b.get(nd, jv);
                        let (sn, _) = self.bind(lets, "node", sub);
                        let place = Place {
                            root: p.root.clone(),
                            node: sn,
                        };
                        out.push((n.clone(), t.clone(), Contrib::At(place), Zero::No));
                    }
                }
                Ok(out)
            }
            _ => unreachable!("only builds, literals and reads are placed"),
        }
    }
}
