//! Cotangent values (spec/ad-reverse.md, "Cotangents"): CT[[T]], zeros,
//! ⊕, sums over arrays of them (a loop's per-iteration contributions,
//! bare ones included), and the conversions between the sparse lists of
//! `(index, cotangent)` pairs that arrays carry and dense values shaped
//! like their primal.

use super::{Lets, Reverse};
use crate::anf::Atom;
use crate::ir::{Expr, ExprId, Lit, Name, Prim, Type};

/// CT[[T]]: the type of cotangents of values of type T.
pub fn cotangent_type(t: &Type) -> Type {
    match t {
        Type::Double => Type::Double,
        Type::Index => Type::Index,
        Type::Bool => Type::Bool,
        Type::Array(e) => Type::array(Type::pair(Type::Index, cotangent_type(e))),
        Type::Pair(a, b) => Type::pair(cotangent_type(a), cotangent_type(b)),
        Type::Fun(..) => Type::Bool,
    }
}

impl Reverse<'_, '_> {
    /// A shape-free default value of a type: 0.0, 0, false, [], pairs.
    pub(super) fn default_of(&mut self, t: &Type) -> ExprId {
        match t {
            Type::Double => self.b.double(0.0),
            Type::Index => {
                // `let z : Index = 0 in z`: an integer literal alone is
                // numeric, and nothing may fix it to Index when the program
                // is inferred again (a placeholder in a gradient would
                // default to Double and print as 0.0).
                let z = self.b.fresh("z");
                let zero = self.b.index(0);
                let v = self.b.var(&z, Type::Index);
                self.b.add(
                    Expr::Let {
                        name: z,
                        ann: Some(Type::Index),
                        value: zero,
                        body: v,
                    },
                    Type::Index,
                )
            }
            Type::Bool | Type::Fun(..) => self.b.add(Expr::Lit(Lit::Bool(false)), Type::Bool),
            Type::Array(_) => self.b.add(Expr::Array(Box::new([])), t.clone()),
            Type::Pair(a, c) => {
                let x = self.default_of(a);
                let y = self.default_of(c);
                self.b.pair(x, y)
            }
        }
    }

    /// The zero cotangent of type CT[t].
    pub(super) fn zero_ct(&mut self, t: &Type) -> ExprId {
        let ct = cotangent_type(t);
        self.default_of(&ct)
    }

    /// `let l = u in let r = v in (f(fst l, fst r, t₁), f(snd l, snd r, t₂))`:
    /// a pair-typed operation done component by component, with `u` and
    /// `v` (named after the given bases) evaluated once.
    fn pairwise(
        &mut self,
        (u, un): (ExprId, &str),
        (v, vn): (ExprId, &str),
        types: [&Type; 2],
        mut f: impl FnMut(&mut Self, ExprId, ExprId, &Type) -> ExprId,
    ) -> ExprId {
        let (ln, rn) = (self.b.fresh(un), self.b.fresh(vn));
        let (lt, rt) = (self.b.ty(u), self.b.ty(v));
        let mut parts = Vec::with_capacity(2);
        for (k, t) in types.into_iter().enumerate() {
            let l = self.b.var(&ln, lt.clone());
            let r = self.b.var(&rn, rt.clone());
            let (l, r) = if k == 0 {
                (self.b.fst(l), self.b.fst(r))
            } else {
                (self.b.snd(l), self.b.snd(r))
            };
            parts.push(f(self, l, r, t));
        }
        let p = self.b.pair(parts[0], parts[1]);
        let inner = self.b.let_(rn, v, p);
        self.b.let_(ln, u, inner)
    }

    /// a ⊕ c for cotangents of values of type `t`.
    pub(super) fn add_ct(&mut self, a: ExprId, c: ExprId, t: &Type) -> ExprId {
        match t {
            Type::Double => self.b.dop(Prim::Add, vec![a, c]),
            Type::Array(_) => {
                let ty = self.b.ty(a);
                let both = self
                    .b
                    .add(Expr::Array(Box::new([a, c])), Type::array(ty.clone()));
                self.b.prim(Prim::Concat, vec![both], ty)
            }
            Type::Pair(x, y) => {
                self.pairwise((a, "a"), (c, "c"), [x, y], |me, a, c, t| me.add_ct(a, c, t))
            }
            _ => a,
        }
    }

    /// `accum 0_T n x̄`: a build's cotangent list made dense once.
    pub(super) fn densify(
        &mut self,
        xb: &Name,
        el: &Type,
        n: &Atom,
        lets: &mut Lets,
    ) -> (Name, Type) {
        let z = self.zero_ct(el);
        let nv = self.atom(n);
        let xv = self.b.var(xb, cotangent_type(&Type::array(el.clone())));
        let dense = self.b.prim(
            Prim::Accum,
            vec![z, nv, xv],
            Type::array(cotangent_type(el)),
        );
        self.bind(lets, "dense", dense)
    }

    /// ⊕ of all elements of an array of cotangents of values of type `t`.
    pub(super) fn sum_array(&mut self, arr: ExprId, t: &Type, ct: &Type) -> ExprId {
        match t {
            Type::Array(_) => self.b.prim(Prim::Concat, vec![arr], ct.clone()),
            Type::Double => {
                let (s, j, a) = (self.b.fresh("s"), self.b.fresh("j"), self.b.fresh("a"));
                let at = self.b.ty(arr);
                let sv = self.b.var(&s, Type::Double);
                let av = self.b.var(&a, at.clone());
                let jv = self.b.var(&j, Type::Index);
                let x = self.b.get(av, jv);
                let sum = self.b.dop(Prim::Add, vec![sv, x]);
                let lj = self.b.lam(j, Type::Index, sum);
                let f = self.b.lam(s, Type::Double, lj);
                let z = self.b.double(0.0);
                let av = self.b.var(&a, at);
                let len = self.b.length(av);
                let fold = self.b.prim(Prim::IFold, vec![f, z, len], Type::Double);
                self.b.let_(a, arr, fold)
            }
            Type::Pair(x, y) => {
                let a = self.b.fresh("a");
                let at = self.b.ty(arr);
                let (cx, cy) = (cotangent_type(x), cotangent_type(y));
                let av = self.b.var(&a, at.clone());
                let len = self.b.length(av);
                let firsts = self.b.build(len, |b, j| {
                    let av = b.var(&a, at.clone());
                    let jv = b.var(j, Type::Index);
                    let e = b.get(av, jv);
                    b.fst(e)
                });
                let fx = self.sum_array(firsts, x, &cx);
                let av = self.b.var(&a, at.clone());
                let len = self.b.length(av);
                let seconds = self.b.build(len, |b, j| {
                    let av = b.var(&a, at.clone());
                    let jv = b.var(j, Type::Index);
                    let e = b.get(av, jv);
                    b.snd(e)
                });
                let sy = self.sum_array(seconds, y, &cy);
                let p = self.b.pair(fx, sy);
                self.b.let_(a, arr, p)
            }
            _ => self.default_of(ct),
        }
    }

    /// ⊕ over j of component `k` of the tuple in `arr[j]` (for a backward
    /// scan, the tuple is the second half of each state), for a variable of
    /// type `t`.
    pub(super) fn reduce(
        &mut self,
        arr: &Name,
        arr_t: &Type,
        k: usize,
        in_state: bool,
        t: &Type,
    ) -> ExprId {
        let ct = cotangent_type(t);
        // For a backward scan, element j is (state cotangent, tuple); its
        // first element holds the initial zeros, harmless to include.
        let element = |me: &mut Self, j: &Name| -> ExprId {
            let av = me.b.var(arr, arr_t.clone());
            let jv = me.b.var(j, Type::Index);
            let e = me.b.get(av, jv);
            let tup = if in_state { me.b.snd(e) } else { e };
            me.proj(tup, k)
        };
        let av = self.b.var(arr, arr_t.clone());
        let count = self.b.length(av);
        match t {
            Type::Double => {
                let (s, j) = (self.b.fresh("s"), self.b.fresh("j"));
                let sv = self.b.var(&s, Type::Double);
                let x = element(self, &j);
                let sum = self.b.dop(Prim::Add, vec![sv, x]);
                let lj = self.b.lam(j, Type::Index, sum);
                let f = self.b.lam(s, Type::Double, lj);
                let z = self.b.double(0.0);
                self.b.prim(Prim::IFold, vec![f, z, count], Type::Double)
            }
            _ => {
                // Lists (and tuples containing them): gather every
                // iteration's cotangent, then ⊕ them in one pass.
                let gathered = self.build_with(count, element);
                self.sum_array(gathered, t, &ct)
            }
        }
    }

    /// `build n (fun j -> f j)`, with `f` given this transformer.
    fn build_with(&mut self, n: ExprId, f: impl FnOnce(&mut Self, &Name) -> ExprId) -> ExprId {
        let j = self.b.fresh("j");
        let body = f(self, &j);
        let et = self.b.ty(body);
        let lam = self.b.lam(j, Type::Index, body);
        self.b.prim(Prim::Build, vec![n, lam], Type::array(et))
    }

    /// The zero a bare position starts from: `(0, 0_T)` for an array of T.
    /// (It fills `bk[0]` of a backward scan, which [`gather_bare`] skips.)
    pub(super) fn bare_zero(&mut self, t: &Type) -> ExprId {
        let Type::Array(el) = t else {
            unreachable!("bare contributions are to arrays")
        };
        let i = self.b.index(0);
        let z = self.zero_ct(el);
        self.b.pair(i, z)
    }

    /// The contributions list of a bare position `k`: the pairs component
    /// `k` of `arr[j]` holds, j from `from` (a backward scan's `bk[0]` is
    /// its initial zeros) — `build (length arr - from) (fun j -> π_k arr[j + from])`.
    pub(super) fn gather_bare(
        &mut self,
        arr: &Name,
        arr_t: &Type,
        k: usize,
        from: i64,
        in_state: bool,
    ) -> ExprId {
        let av = self.b.var(arr, arr_t.clone());
        let mut count = self.b.length(av);
        if from != 0 {
            let from_e = self.b.index(from);
            count = self.b.prim(Prim::Sub, vec![count, from_e], Type::Index);
        }
        self.build_with(count, |me, j| {
            let av = me.b.var(arr, arr_t.clone());
            let jv = me.b.var(j, Type::Index);
            let at = if from == 0 {
                jv
            } else {
                let f = me.b.index(from);
                me.b.prim(Prim::Add, vec![jv, f], Type::Index)
            };
            let e = me.b.get(av, at);
            let tup = if in_state { me.b.snd(e) } else { e };
            me.proj(tup, k)
        })
    }

    /// A cotangent of type CT[t] as a dense value shaped like `primal`.
    pub(super) fn dense(&mut self, ct: ExprId, primal: ExprId, t: &Type) -> ExprId {
        match t {
            Type::Array(el) if el.has_double() => {
                let (cn, pn) = (self.b.fresh("c"), self.b.fresh("p"));
                let (ctt, pt) = (self.b.ty(ct), self.b.ty(primal));
                let pv = self.b.var(&pn, pt.clone());
                let len = self.b.length(pv);
                let z = self.zero_ct(el);
                let cv = self.b.var(&cn, ctt.clone());
                let acc = self.b.prim(
                    Prim::Accum,
                    vec![z, len, cv],
                    Type::array(cotangent_type(el)),
                );
                let (an, at) = (self.b.fresh("d"), self.b.ty(acc));
                let body = if **el == Type::Double {
                    self.b.var(&an, at.clone())
                } else {
                    let pv = self.b.var(&pn, pt.clone());
                    let len = self.b.length(pv);
                    self.b.build(len, |b, j| {
                        let mut me = Reverse::new(b);
                        let av = me.b.var(&an, at.clone());
                        let jv = me.b.var(j, Type::Index);
                        let cj = me.b.get(av, jv);
                        let pv = me.b.var(&pn, pt.clone());
                        let jv = me.b.var(j, Type::Index);
                        let pj = me.b.get(pv, jv);
                        me.dense(cj, pj, el)
                    })
                };
                let inner = self.b.let_(an, acc, body);
                let inner = self.b.let_(pn, primal, inner);
                self.b.let_(cn, ct, inner)
            }
            Type::Pair(x, y) => self.pairwise((ct, "c"), (primal, "p"), [x, y], |me, c, p, t| {
                me.dense(c, p, t)
            }),
            _ => ct,
        }
    }

    /// A dense cotangent `w` of a value of type `t` as CT[t] (a sparse list
    /// for arrays).
    pub(super) fn sparse(&mut self, w: ExprId, t: &Type) -> ExprId {
        match t {
            Type::Array(el) => {
                let wn = self.b.fresh("w");
                let wt = self.b.ty(w);
                let wv = self.b.var(&wn, wt.clone());
                let len = self.b.length(wv);
                let list = self.b.build(len, |b, j| {
                    let mut me = Reverse::new(b);
                    let wv = me.b.var(&wn, wt.clone());
                    let jv = me.b.var(j, Type::Index);
                    let x = me.b.get(wv, jv);
                    let c = me.sparse(x, el);
                    let jv = me.b.var(j, Type::Index);
                    me.b.pair(jv, c)
                });
                self.b.let_(wn, w, list)
            }
            Type::Pair(x, y) => {
                let wn = self.b.fresh("w");
                let wt = self.b.ty(w);
                let wv = self.b.var(&wn, wt.clone());
                let a = self.b.fst(wv);
                let a = self.sparse(a, x);
                let wv = self.b.var(&wn, wt);
                let c = self.b.snd(wv);
                let c = self.sparse(c, y);
                let p = self.b.pair(a, c);
                self.b.let_(wn, w, p)
            }
            _ => w,
        }
    }
}
