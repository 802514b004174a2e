//! Two elements or iterations at a time in `f64x2` lanes (Note [Bounds
//! guards], pairs, in `codegen/passes/guard.rs`): the terms of a body that
//! depend on the index, IEEE operation by operation as the scalar code
//! (so the same bits); which innermost `build`s can run so; and the folds
//! whose only changes to their state are in-place `addAt`s, two
//! iterations at a time.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value, types};

use super::prim::float_cc;
use super::{Lower, MathLanes, R, Vals};
use crate::anf::{Atom, Binding, Block as AnfBlock, Rhs};
use crate::codegen::abi;
use crate::codegen::compile_error;
use crate::codegen::layout::{SLOT, component_slot, component_type, slots};
use crate::codegen::passes::{self, loop_interchange};
use crate::ir::{Name, Prim, Type};

impl Lower<'_, '_> {
    /// `for k < n` two elements at a time: `pair` at each even `k` below
    /// `n - 1`, then `one(count, k0)`, a loop over the last element when
    /// `n` is odd (`count` 1, from `k0 = n - 1`), else over none.
    pub(super) fn by_twos(
        &mut self,
        n: Value,
        pair: impl FnOnce(&mut Self, Value) -> R<()>,
        one: impl FnOnce(&mut Self, Value, Value) -> R<Vals>,
    ) -> R<Vals> {
        let half = self.b.ins().sshr_imm_u(n, 1);
        self.counted_loop(half, &[], |l, h, _| {
            let k = l.b.ins().ishl_imm_u(h, 1);
            pair(l, k)?;
            Ok(Vec::new())
        })?;
        let odd = self.b.ins().band_imm_u(n, 1);
        let last = self.b.ins().iadd_imm_s(n, -1);
        one(self, odd, last)
    }

    /// Elements `k` and `k + 1` (Note [Interchange], pairs; Note [Bounds
    /// guards], pairs): the terms that depend on `j` in `f64x2` lanes, IEEE
    /// operation by operation as the scalar code (so the same bits),
    /// stored into `out[k]` and `out[k + 1]`, or added to them when
    /// `accumulate` (an interchanged sum's row). A division tests both
    /// divisors (E-Arith-Bot, the same ⊥ from any element).
    pub(super) fn pair(
        &mut self,
        terms: &[Binding],
        term: &Atom,
        varying: &HashSet<Name>,
        j: &Name,
        k: Value,
        (out, accumulate): (Value, bool),
    ) -> R<()> {
        let lanes = types::F64X2;
        // Unaligned: an element pair starts at any 8-byte boundary.
        let flags = MemFlagsData::new().with_notrap();
        let vals = self.lanes(terms, varying, j, k)?;
        let e = self.vector(&vals, term)?;
        let at = self.element(out, k, 8);
        let e = if accumulate {
            let old = self.b.ins().load(lanes, flags, at, 0);
            self.b.ins().fadd(old, e)
        } else {
            e
        };
        self.b.ins().store(flags, e, at, 0);
        Ok(())
    }

    /// An atom in `f64x2` lanes: a paired term's, or a scalar in both.
    pub(super) fn vector(&mut self, vals: &HashMap<&Name, Value>, a: &Atom) -> R<Value> {
        if let Some(x) = a.var()
            && let Some(v) = vals.get(x)
        {
            return Ok(*v);
        }
        let x = self.scalar(a)?;
        Ok(self.b.ins().splat(types::F64X2, x))
    }

    /// The terms in `varying` for elements `k` and `k + 1` of the loop over
    /// `j`, in `f64x2` lanes, IEEE operation by operation as the scalar
    /// code (Note [Bounds guards], pairs).
    pub(super) fn lanes<'t>(
        &mut self,
        terms: &'t [Binding],
        varying: &HashSet<Name>,
        j: &Name,
        k: Value,
    ) -> R<HashMap<&'t Name, Value>> {
        let mut vals: HashMap<&Name, Value> = HashMap::default();
        self.lanes_into(terms, varying, j, k, &mut vals)?;
        Ok(vals)
    }

    /// [`lanes`] into `vals`, which may hold the lanes of other terms
    /// already (those of `terms` not in `varying` that the others read).
    ///
    /// [`lanes`]: Self::lanes
    pub(super) fn lanes_into<'t>(
        &mut self,
        terms: &'t [Binding],
        varying: &HashSet<Name>,
        j: &Name,
        k: Value,
        vals: &mut HashMap<&'t Name, Value>,
    ) -> R<()> {
        let lanes = types::F64X2;
        let flags = MemFlagsData::new().with_notrap();
        let vector = |l: &mut Self, vals: &HashMap<&Name, Value>, a: &Atom| l.vector(vals, a);
        // Each term's ⊥ at its own site (Note [Failure sites]), as the
        // scalar code's.
        let was = self.here;
        for bind in terms.iter().filter(|b| varying.contains(&b.name)) {
            self.enter_site(&bind.name);
            if let Rhs::If(c, t, e) = &bind.rhs {
                // A lane-wise select (Note [Selects]): the comparison's
                // lanes are all ones or all zeros.
                let c = c
                    .var()
                    .and_then(|c| vals.get(c))
                    .copied()
                    .ok_or_else(|| compile_error("a paired select without its comparison"))?;
                let (t, e) = (
                    vector(self, &*vals, &t.result)?,
                    vector(self, &*vals, &e.result)?,
                );
                let mask = self.b.ins().bitcast(lanes, MemFlagsData::new(), c);
                let v = self.b.ins().bitselect(mask, t, e);
                vals.insert(&bind.name, v);
                continue;
            }
            let Rhs::Prim(op, args) = &bind.rhs else {
                return Err(compile_error("a paired term that is not a primitive"));
            };
            let v = match op {
                Prim::Get => {
                    let Some(a) = args[0].var() else {
                        return Err(compile_error("a paired read of a literal"));
                    };
                    if args[1].var() != Some(j) {
                        return Err(compile_error("a paired read not at j"));
                    }
                    let a = self.atom_of(a)?;
                    let (p, n) = (a[0], a[1]);
                    let mut at = self.element(p, k, 8);
                    if self.deferred.is_some() && !self.untested_read(j, bind) {
                        // Both lanes in bounds, or the pair runs as
                        // written (Note [Lane sums]); until then the load
                        // reads 16 bytes of the stack instead (an empty
                        // array's pointer is never read).
                        let k1 = self.b.ins().iadd_imm_s(k, 1);
                        let out = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, k1, n);
                        self.defer(out);
                        let safe = self.stack_buffer(16)?;
                        at = self.b.ins().select(out, safe, at);
                    }
                    self.b.ins().load(lanes, flags, at, 0)
                }
                Prim::Neg => {
                    let x = vector(self, &*vals, &args[0])?;
                    self.b.ins().fneg(x)
                }
                Prim::Lt | Prim::Gt | Prim::Le | Prim::Ge => {
                    // As the scalar comparison (Note [Selects]).
                    let x = vector(self, &*vals, &args[0])?;
                    let y = vector(self, &*vals, &args[1])?;
                    let (cc, swap) = float_cc(*op);
                    let (x, y) = if swap { (y, x) } else { (x, y) };
                    self.b.ins().fcmp(cc, x, y)
                }
                Prim::Add | Prim::Sub | Prim::Mul | Prim::Div => {
                    let x = vector(self, &*vals, &args[0])?;
                    let y = vector(self, &*vals, &args[1])?;
                    match op {
                        Prim::Add => self.b.ins().fadd(x, y),
                        Prim::Sub => self.b.ins().fsub(x, y),
                        Prim::Mul => self.b.ins().fmul(x, y),
                        _ if self.nonzero_divisors => self.b.ins().fdiv(x, y),
                        _ if self.deferred.is_some() => {
                            // Either lane zero: the pair runs as written
                            // (Note [Lane sums]).
                            let any = self.any_zero(y);
                            self.defer(any);
                            self.b.ins().fdiv(x, y)
                        }
                        _ => {
                            // Either lane zero: one compare, its lanes'
                            // sign bits (movmskpd).
                            let any = self.any_zero(y);
                            let z = self.iconst(0);
                            self.fail_if(any, abi::DIVISION_BY_ZERO, z, z);
                            self.b.ins().fdiv(x, y)
                        }
                    }
                }
                Prim::Log | Prim::Exp if self.math.is_some() => {
                    // In a block the math kernels run (Note [Math
                    // kernels]): the pair's slot of this `log`'s or
                    // `exp`'s buffer.
                    let (at, what) = self.math.expect("a block's buffer");
                    let off = i32::try_from(self.math_seen * 8 * abi::MATH_BLOCK)
                        .map_err(|_| compile_error("a math buffer too large"))?;
                    self.math_seen += 1;
                    match what {
                        MathLanes::Arguments => {
                            let x = vector(self, &*vals, &args[0])?;
                            self.b.ins().store(MemFlagsData::trusted(), x, at, off);
                            x
                        }
                        MathLanes::Values => {
                            self.b.ins().load(lanes, MemFlagsData::trusted(), at, off)
                        }
                    }
                }
                Prim::Log | Prim::Exp if self.deferred.is_some() => {
                    // Under the relaxed contract only (Note [Lane sums]).
                    let x = vector(self, &*vals, &args[0])?;
                    let (y, bad) = if *op == Prim::Log {
                        self.vlog(x)
                    } else {
                        self.vexp(x)
                    };
                    self.defer(bad);
                    y
                }
                _ => return Err(compile_error("a paired term that is not arithmetic")),
            };
            vals.insert(&bind.name, v);
        }
        self.here = was;
        Ok(())
    }

    /// An `i8`, non-zero when either lane of `y` is ±0.0: one compare,
    /// its lanes' sign bits (movmskpd).
    fn any_zero(&mut self, y: Value) -> Value {
        let zero = self.b.ins().f64const(0.0);
        let zeros = self.b.ins().splat(types::F64X2, zero);
        let is_zero = self.b.ins().fcmp(FloatCC::Equal, y, zeros);
        let bits = self.b.ins().vhigh_bits(types::I8, is_zero);
        self.b.ins().icmp_imm_s(IntCC::NotEqual, bits, 0)
    }

    /// Adds `bad` (an `i8`) to the pair's deferred tests.
    fn defer(&mut self, bad: Value) {
        if let Some(d) = self.deferred {
            self.deferred = Some(self.b.ins().bor(d, bad));
        }
    }

    /// Whether the innermost `build` over `index` can run two elements at
    /// a time in its guarded version (Note [Bounds guards], pairs): every
    /// binding but the pairs that make the element depends on `index` and
    /// is Double arithmetic or a read at `index` of an array of Doubles
    /// whose test the guard covers (or that the loop runs over), and each
    /// leaf of the element is a Double among them or a scalar the same in
    /// both elements (a literal, or bound outside the loop: not the
    /// index), one at least a Double among them. Reverse mode's tape
    /// records are such elements: `(e, (e, false))`.
    pub(super) fn pairable(&self, index: &Name, body: &AnfBlock) -> Option<PairedBuild> {
        let split = body
            .binds
            .iter()
            .rposition(|b| !matches!(b.rhs, Rhs::Prim(Prim::Pair, _)))
            .map_or(0, |k| k + 1);
        let (terms, tuple) = body.binds.split_at(split);
        let varying = loop_interchange::varying(terms, index);
        let mut leaves = Vec::new();
        element_leaves(&body.result, tuple, 0, &mut leaves)?;
        let in_lanes = |a: &Atom| a.var().is_some_and(|x| varying.contains(x));
        let lane = leaves.iter().map(|(_, a)| a).find(|a| in_lanes(a))?;
        let leaves_ok = leaves.iter().all(|(_, a)| {
            if in_lanes(a) {
                *a.ty() == Type::Double
            } else {
                matches!(a.ty(), Type::Double | Type::Index | Type::Bool)
                    && a.var()
                        .is_none_or(|x| x != index && !terms.iter().any(|b| &b.name == x))
            }
        });
        let ok = leaves_ok
            && varying.len() == terms.len()
            && loop_interchange::pairs(terms, lane, &varying, self.relaxed)
            && terms.iter().all(|b| match &b.rhs {
                Rhs::Prim(Prim::Get, _) => self.untested_read(index, b),
                _ => true,
            });
        ok.then(|| PairedBuild {
            varying,
            terms: split,
            leaves,
        })
    }

    /// Elements `k` and `k + 1` of a paired `build` into `out`, whose
    /// elements take `size` bytes (Note [Bounds guards], pairs): each
    /// leaf from its lanes, or the same scalar into both. A Double
    /// element is one 16-byte store.
    pub(super) fn store_pair(
        &mut self,
        (out, k, size): (Value, Value, i64),
        leaves: &[(i32, Atom)],
        vals: &HashMap<&Name, Value>,
    ) -> R<()> {
        let at = self.element(out, k, size);
        if size == 8
            && let [(0, a)] = leaves
        {
            let e = self.vector(vals, a)?;
            // Unaligned: an element pair starts at any 8-byte boundary.
            let unaligned = MemFlagsData::new().with_notrap();
            self.b.ins().store(unaligned, e, at, 0);
            return Ok(());
        }
        let next = i32::try_from(size).map_err(|_| compile_error("an element of 2 GiB"))?;
        let flags = MemFlagsData::trusted();
        for (off, a) in leaves {
            if let Some(v) = a.var().and_then(|x| vals.get(x)).copied() {
                for lane in 0..2u8 {
                    let x = self.b.ins().extractlane(v, lane);
                    self.b
                        .ins()
                        .store(flags, x, at, off + i32::from(lane) * next);
                }
            } else {
                let x = self.scalar(a)?;
                self.store(a.ty(), &[x], at, *off)?;
                self.store(a.ty(), &[x], at, off + next)?;
            }
        }
        Ok(())
    }

    /// Whether the innermost `ifold` over `index` with state `s : st` can
    /// run two iterations at a time in its guarded version (Note [Bounds
    /// guards], pairs of `addAt`s): its body only projects the state,
    /// reads arrays of Doubles at `index` (tests covered), computes Double
    /// arithmetic on them, and adds into state arrays of Doubles at
    /// `index + c` with `addAt`s that update in place and whose tests the
    /// guard covers, each state array at most once and for nothing else;
    /// the result is the state with each array replaced by its `addAt`
    /// (other leaves kept, or a literal).
    pub(super) fn fold_pairs(
        &self,
        index: &Name,
        s: &Name,
        st: &Type,
        body: &AnfBlock,
    ) -> Option<FoldPairs> {
        if self.scratch.loops.contains_key(index) {
            return None;
        }
        let varying = loop_interchange::varying(&body.binds, index);
        let mut paths: HashMap<&Name, Vec<bool>> = HashMap::default();
        let mut offsets: HashMap<&Name, &Atom> = HashMap::default();
        let mut tuples: HashMap<&Name, (&Atom, &Atom)> = HashMap::default();
        let mut lanes = HashSet::default();
        let mut adds: Vec<PairedAdd> = Vec::new();
        let mut added: HashMap<&Name, Vec<bool>> = HashMap::default();
        // Bound before the loop (or a literal): the same in every lane.
        let bound: HashSet<&Name> = body.binds.iter().map(|b| &b.name).collect();
        let outside = |a: &Atom| {
            a.var()
                .is_none_or(|x| !bound.contains(x) && x != index && x != s)
        };
        let path_of = |paths: &HashMap<&Name, Vec<bool>>, a: &Atom| -> Option<Vec<bool>> {
            let x = a.var()?;
            if x == s {
                return Some(Vec::new());
            }
            paths.get(x).cloned()
        };
        for b in &body.binds {
            match &b.rhs {
                Rhs::Prim(op @ (Prim::Fst | Prim::Snd), args) => {
                    let mut p = path_of(&paths, &args[0])?;
                    p.push(*op == Prim::Snd);
                    paths.insert(&b.name, p);
                }
                Rhs::Prim(Prim::Get, args) => {
                    let a = args[0].var()?;
                    let ok = args[1].var() == Some(index)
                        && b.ty == Type::Double
                        && !bound.contains(a)
                        && !self.fused.contains_key(a)
                        && self.env.contains_key(a)
                        && (self.covered.contains(&b.name)
                            || self.in_bounds.iter().any(|(k, x)| k == index && x == a));
                    if !ok {
                        return None;
                    }
                    lanes.insert(b.name.clone());
                }
                Rhs::Prim(Prim::Add | Prim::Sub | Prim::Mul | Prim::Div | Prim::Neg, args)
                    if b.ty == Type::Double =>
                {
                    let operand = |a: &Atom| {
                        *a.ty() == Type::Double
                            && (outside(a) || a.var().is_some_and(|x| lanes.contains(x)))
                    };
                    if !varying.contains(&b.name) || !args.iter().all(operand) {
                        return None;
                    }
                    lanes.insert(b.name.clone());
                }
                Rhs::Prim(Prim::Add, args) if b.ty == Type::Index => {
                    let c = match (&args[0], &args[1]) {
                        (i, c) | (c, i) if i.var() == Some(index) && outside(c) => c,
                        _ => return None,
                    };
                    offsets.insert(&b.name, c);
                }
                Rhs::Prim(Prim::Pair, args) => {
                    tuples.insert(&b.name, (&args[0], &args[1]));
                }
                Rhs::Prim(Prim::AddAt, args) => {
                    let acc = path_of(&paths, &args[0])?;
                    let at = match args[1].var() {
                        Some(i) if i == index => None,
                        Some(x) => Some(*offsets.get(x)?),
                        None => return None,
                    };
                    let v = &args[2];
                    let ok = *args[0].ty() == Type::array(Type::Double)
                        && (outside(v) || v.var().is_some_and(|x| lanes.contains(x)))
                        && self.updates.in_place.contains(&b.name)
                        && self.covered.contains(&b.name)
                        && !added.values().any(|p| *p == acc);
                    if !ok {
                        return None;
                    }
                    added.insert(&b.name, acc.clone());
                    adds.push(PairedAdd {
                        slot: component_slot(st, &acc).ok()?,
                        at: at.cloned(),
                        value: v.clone(),
                    });
                }
                _ => return None,
            }
        }
        // Two divisions that can fail: a pair tests the first for both
        // iterations before the second, where the evaluator's first ⊥ may
        // be the second's in the first iteration — the same code at
        // another site (Note [Failure sites]); such a fold runs as written.
        if passes::divisions(body) > 1 && !self.nonzero_divisors {
            return None;
        }
        // A state array is only the first operand of its one `addAt`.
        let mut uses: HashMap<Name, usize> = HashMap::default();
        for b in &body.binds {
            b.rhs.for_each_atom(&mut |a| {
                if let Some(x) = a.var() {
                    *uses.entry(x.clone()).or_default() += 1;
                }
            });
        }
        if let Some(x) = body.result.var() {
            *uses.entry(x.clone()).or_default() += 1;
        }
        for (x, p) in &paths {
            let arrays = matches!(component_type(st, p), Some(Type::Array(_)));
            if arrays && uses.get(*x).copied().unwrap_or(0) > 1 {
                return None;
            }
        }
        // The result: the state, leaf by leaf.
        let mut literals = Vec::new();
        let mut stack = vec![(body.result.clone(), Vec::new())];
        while let Some((a, p)) = stack.pop() {
            let ty = component_type(st, &p)?;
            if let Type::Pair(..) = ty
                && let Some((l, r)) = a.var().and_then(|x| tuples.get(x))
            {
                let (mut pl, mut pr) = (p.clone(), p);
                pl.push(false);
                pr.push(true);
                stack.push(((*l).clone(), pl));
                stack.push(((*r).clone(), pr));
                continue;
            }
            if path_of(&paths, &a).as_deref() == Some(&p[..]) {
                continue;
            }
            match (&a, ty) {
                (Atom::Var(x, _), Type::Array(_)) if added.get(x) == Some(&p) => {}
                (Atom::Lit(..), Type::Double | Type::Index | Type::Bool) => {
                    literals.push((component_slot(st, &p).ok()?, a.clone()));
                }
                _ => return None,
            }
        }
        // Every `addAt` is in the result at its array's place: that leaf is
        // an array, so it is that `addAt` (checked above), or else the
        // array's projection, whose second use was refused above.
        Some(FoldPairs {
            lanes,
            adds,
            literals,
        })
    }

    /// [`fold_pairs`]'s loop: the state's buffers are updated in place
    /// and keep their slots, so two iterations at a time need no state;
    /// the last iteration when `n` is odd runs as written, and a literal
    /// leaf of the result is the state's after the first iteration. Each
    /// slot an `addAt` writes is written by one iteration (its index is
    /// `i + c`), and no array the body reads is one it writes (the `addAt`s
    /// are in place: nothing reads their old arrays), so the same bits.
    ///
    /// [`fold_pairs`]: Self::fold_pairs
    pub(super) fn paired_fold(
        &mut self,
        n: Value,
        z: &[Value],
        (s, index): (&Name, &Name),
        body: &AnfBlock,
        plan: &FoldPairs,
    ) -> R<Vals> {
        let flags = MemFlagsData::new().with_notrap();
        let half = self.b.ins().sshr_imm_u(n, 1);
        self.counted_loop(half, &[], |l, h, _| {
            let k = l.b.ins().ishl_imm_u(h, 1);
            l.env.insert(s.clone(), z.to_vec());
            let vals = l.lanes(&body.binds, &plan.lanes, index, k)?;
            for add in &plan.adds {
                let at = match &add.at {
                    None => k,
                    Some(c) => {
                        let c = l.scalar(c)?;
                        l.b.ins().iadd(k, c)
                    }
                };
                let v = l.vector(&vals, &add.value)?;
                let p = l.element(z[add.slot], at, 8);
                let old = l.b.ins().load(types::F64X2, flags, p, 0);
                let new = l.b.ins().fadd(old, v);
                l.b.ins().store(flags, new, p, 0);
            }
            Ok(Vec::new())
        })?;
        // The last iteration when n is odd.
        let odd = self.b.ins().band_imm_u(n, 1);
        let last = self.b.ins().iadd_imm_s(n, -1);
        let mut out =
            self.counted_loop(odd, z, |l, _, st| l.fold_step((s, index), last, st, body))?;
        let some = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, n, 0);
        for (slot, lit) in &plan.literals {
            let v = self.scalar(lit)?;
            out[*slot] = self.b.ins().select(some, v, out[*slot]);
        }
        Ok(out)
    }
}

/// An `addAt` of a paired fold (Note [Bounds guards], pairs of `addAt`s):
/// the state slot of its array's pointer, the offset `c` of its index
/// `i + c` (none: `i`), and the Double it adds.
struct PairedAdd {
    slot: usize,
    at: Option<Atom>,
    value: Atom,
}

/// How a fold runs two iterations at a time ([`Lower::fold_pairs`]): the
/// bindings computed in lanes, the `addAt`s, and the literal leaves of its
/// result (state slot, literal).
pub(super) struct FoldPairs {
    lanes: HashSet<Name>,
    adds: Vec<PairedAdd>,
    literals: Vec<(usize, Atom)>,
}

/// How an innermost `build` runs two elements at a time
/// ([`Lower::pairable`]).
pub(super) struct PairedBuild {
    /// The bindings computed in lanes: all of the body's first `terms`.
    pub(super) varying: HashSet<Name>,
    /// How many of the body's bindings come before the pairs that make
    /// the element.
    pub(super) terms: usize,
    /// The element's leaves, by byte offset in the element: a term in
    /// lanes, or a scalar the same in both elements.
    pub(super) leaves: Vec<(i32, Atom)>,
}

/// The leaves of the element `a`, made by the pairs of `tuple` (bound
/// after every term), at byte offset `at` and on; None when a leaf is an
/// array or `a` a function.
fn element_leaves(a: &Atom, tuple: &[Binding], at: i32, out: &mut Vec<(i32, Atom)>) -> Option<()> {
    let pair = a
        .var()
        .and_then(|x| tuple.iter().find(|b| &b.name == x))
        .map(|b| &b.rhs);
    match pair {
        Some(Rhs::Prim(Prim::Pair, args)) => {
            element_leaves(&args[0], tuple, at, out)?;
            let first = i32::try_from(slots(args[0].ty()).ok()?).ok()? * SLOT as i32;
            element_leaves(&args[1], tuple, at + first, out)
        }
        _ => match a.ty() {
            Type::Double | Type::Index | Type::Bool => {
                out.push((at, a.clone()));
                Some(())
            }
            _ => None,
        },
    }
}
