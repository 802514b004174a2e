//! Index arithmetic on literals folded, and loop-invariant bindings
//! computed once before their loop (Note [Hoisting]).
//!
//! # Note [Hoisting]
//!
//! The normal form inlines every function, so a loop's body often
//! recomputes what depends only on values bound outside it: BA's
//! `projectAll` maps `project cam` over the points, and each iteration
//! slices `cam`, takes the norm of its rotation, a square root, a sine and
//! a cosine — the same numbers every time. Before fusion is planned, the
//! lowering moves such bindings out of `build`, `ifold` and `iscan`
//! bodies, innermost loops first, so that a binding invariant in several
//! nested loops leaves them all.
//!
//! A binding of a loop's body is *invariant* when it mentions neither the
//! loop's index nor its state, nor any binding left in the body. Names are
//! fresh across the normal form, so a mention anywhere inside it (nested
//! blocks included) is a dependency. It is moved when either
//!
//! 1. it cannot be ⊥ (Double `+ - *` and negation, `sin`, `cos`, `exp`,
//!    comparisons, `not`, `toDouble`, pairs, projections, `length`,
//!    `concat`, array literals; conditionals and loops of such, a loop only
//!    of a literal size ≥ 0): computed before the loop even when the loop
//!    runs zero times, which nothing observes; or
//! 2. it can be ⊥, and every binding before it that stays in the body
//!    cannot (a read `a[i]` in a loop over `0 .. length a` cannot, which
//!    lets BA's `cam` work move past the read of the point; an invariant
//!    read that can fail, which would stay as too cheap to move, moves
//!    with a later failing binding that moves): then iteration 0 would evaluate it before anything that can
//!    fail, with the same operands, so the first ⊥ of the loop (E-Build's,
//!    E-IFold-Succ's order) is the same. It is evaluated only when the loop
//!    runs at all: such bindings, from the first one on, are computed in
//!    `if 0 < n then … else dummies` (no test when `n` is a literal > 0), a
//!    tuple read back by projections under their own names; when `n ≤ 0`
//!    the body never runs and the dummies are never read. A negative `n`
//!    still fails in the loop, as E-Build-Bot and E-IFold-Bot say.
//!
//! 3. it can be ⊥ and something before it that stays can fail too (or it
//!    depends on such a binding): it is *speculated*. Before the loop,
//!    under `0 < n`, a conditional computes it in a branch whose ⊥ does
//!    not exit but continues in the other branch, which gives dummies
//!    and a flag `ran = false` (the lowering's `speculative` conditionals).
//!    In the body it stays, as `if ran then (the value) else (the binding
//!    again, under fresh binder names)`: when the speculation failed, the
//!    body computes it where the program does, after whatever precedes
//!    it, so the first ⊥ is still the program's; every speculated binding
//!    is redone so, since after a failure all speculated values are
//!    dummies. BA's `project` reads the point (which can fail: the rows'
//!    lengths are not known) before the camera's rotation is normalised
//!    (a division, a square root), and forward mode's wrapper builds the
//!    seeded input before the objective's invariant work. A speculative
//!    conditional that moves again (an inner loop's, invariant in the
//!    outer loop too), or is copied under fresh binder names, stays
//!    speculative under its new name (`carry_speculative`).
//!
//! ## Limits
//!
//! Where the code checks `--max-elements` (JIT code; object files have no
//! limits), a `build`, an `iscan` or a `concat` can be ⊥ by E-Limit
//! whatever its operands: a `build 1000 …` is larger than a limit of 100.
//! So there they are not rule 1 but rule 2 or 3, made before their loop
//! only when the loop runs. Native code then makes no array the
//! evaluator does not make (spec/semantics.md §3.8): rule 1 made an
//! invariant `build 1000 (fun j -> toDouble j)` before an `ifold` over
//! `k` and stopped a run at k = 0, `--max-elements 100`, that the
//! evaluator ends with 0.0. A copy keeps its original's span ([`Copies`]),
//! so such a ⊥ is still reported at the `build`.
//!
//! Only what Cranelift would not move itself is worth a register held
//! across the loop: loops, conditionals, allocations (array literals,
//! `concat`, `accum`), calls (`sin`, `cos`, `tan`, `log`, `exp`, `sqrt`,
//! `**`) and divisions, with the cheap bindings they need. Projections and
//! `length` move too: they select slots of a value the loop holds anyway,
//! and a `build` that reads a projected array at its index becomes simple
//! enough to fuse (Note [Fusion], condition 2; vector forward mode's
//! tangent loops each read `snd x` of a dual number bound outside: BA's
//! `fwd-vec` Jacobian at N = 10⁵, A/B 215.7–222.4 → 164.5–165.6 ms). Pure
//! arithmetic, comparisons and reads stay (they go first in the body),
//! unless a moved binding needs them.
//!
//! Nothing moves out of a branch of a conditional (that would evaluate
//! what the program may not). Index `+ - * /` and negation of literals are
//! folded first (when they do not overflow or divide by zero: those stay,
//! to fail at run time), so `vectorSlice cam 0 2`'s size is the literal 3
//! and the slice can live in registers (Note [Fusion], "Small arrays").
//! An Index operation that returns its operand (`0 + i`, `i - 0`, `i * 1`,
//! `1 * i`, `i / 1`, which cannot overflow) is replaced by the operand:
//! reverse mode's accumulators read `node + i` with a node of 0 in every
//! loop over a vector (spec/ad-reverse.md §5.6).

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::Copies;
use crate::anf::{Atom, Binding, Block, LoopKind, Rhs};
use crate::ir::prim::Compute;
use crate::ir::{Lit, Name, Prim, Type};

/// Folds literal Index arithmetic, then hoists loop invariants, in place.
/// Returns the speculative conditionals (rule 3): a ⊥ in the branch that
/// computes them must continue in the other branch instead of exiting.
/// Every copy is recorded in `made` with the name it copies.
pub fn hoist(body: &mut Block, limits: bool, made: &mut Copies) -> HashSet<Name> {
    fold_block(body, &mut HashMap::default());
    let before = body.clone();
    let mut h = Hoister {
        limits,
        made: Copies::new(),
        counter: 0,
        speculative: HashSet::default(),
        lengths: HashMap::default(),
    };
    h.block(body);
    // Note [Bounded speculation]: each speculated binding is also kept in
    // the loop, to redo after a failed speculation, so loops nested k
    // deep whose invariants are all speculated copy their bodies 2^k
    // times (a 311-atom vector-mode program grew to 83,705, and Cranelift
    // never finished). Hoisting only saves work: past a bounded growth the
    // function is lowered without it.
    if size(body) > 4 * size(&before) + 4096 {
        *body = before;
        return HashSet::default();
    }
    made.append(&mut h.made);
    h.speculative
}

/// The atoms of a block, nested blocks included: its size.
fn size(b: &Block) -> usize {
    let mut k = 0;
    b.for_each_atom(&mut |_| k += 1);
    k
}

// ----- folding -----------------------------------------------------------------

fn fold_atom(a: &mut Atom, known: &HashMap<Name, Atom>) {
    if let Atom::Var(x, _) = a
        && let Some(v) = known.get(x)
    {
        *a = v.clone();
    }
}

/// Substitutes known literals into `b`, and drops the Index bindings that
/// become literals (E-Arith on two literals cannot depend on anything)
/// or their operand (`a + 0`, `0 + a`, `a - 0`, `a * 1`, `1 * a`,
/// `a / 1` are `a`, and never overflow).
fn fold_block(b: &mut Block, known: &mut HashMap<Name, Atom>) {
    let binds = std::mem::take(&mut b.binds);
    for mut bind in binds {
        match &mut bind.rhs {
            Rhs::Prim(_, args) | Rhs::Array(args) => {
                args.iter_mut().for_each(|a| fold_atom(a, known));
            }
            Rhs::If(c, t, e) => {
                fold_atom(c, known);
                fold_block(t, known);
                fold_block(e, known);
            }
            Rhs::Loop { n, state, body, .. } => {
                fold_atom(n, known);
                if let Some((z, _, _)) = state {
                    fold_atom(z, known);
                }
                fold_block(body, known);
            }
            Rhs::While {
                init, cond, step, ..
            } => {
                fold_atom(init, known);
                fold_block(cond, known);
                fold_block(step, known);
            }
        }
        if bind.ty == Type::Index
            && let Rhs::Prim(op, args) = &bind.rhs
        {
            if let Some(v) = fold_index(*op, args) {
                known.insert(bind.name.clone(), Atom::Lit(Lit::Int(v), Type::Index));
                continue;
            }
            if let Some(a) = identity_operand(*op, args) {
                known.insert(bind.name.clone(), a.clone());
                continue;
            }
        }
        b.binds.push(bind);
    }
    fold_atom(&mut b.result, known);
}

/// The operand an Index operation returns unchanged: `a + 0`, `0 + a`,
/// `a - 0`, `a * 1`, `1 * a`, `a / 1`.
fn identity_operand(op: Prim, args: &[Atom]) -> Option<&Atom> {
    let is = |a: &Atom, v: i64| matches!(a, Atom::Lit(Lit::Int(x), _) if *x == v);
    match (op, args) {
        (Prim::Add, [a, z]) | (Prim::Add, [z, a]) if is(z, 0) => Some(a),
        (Prim::Sub, [a, z]) if is(z, 0) => Some(a),
        (Prim::Mul, [a, o]) | (Prim::Mul, [o, a]) if is(o, 1) => Some(a),
        (Prim::Div, [a, o]) if is(o, 1) => Some(a),
        _ => None,
    }
}

/// The value of `+ - * /` or negation of literal Indices, with the
/// evaluator's arithmetic (the table's, E-Arith): `None` where it is ⊥
/// (a zero divisor, an overflow), which then stays to fail at run time.
/// (`**` is not folded.)
pub(super) fn fold_index(op: Prim, args: &[Atom]) -> Option<i64> {
    let lit = |a: &Atom| match a {
        Atom::Lit(Lit::Int(v), _) => Some(*v),
        _ => None,
    };
    match (op.info().eval.compute?, args) {
        (Compute::Unary { index, .. }, [a]) => index(lit(a)?).ok(),
        (Compute::Arith { index, .. }, [a, b]) if op != Prim::Pow => index(lit(a)?, lit(b)?).ok(),
        _ => None,
    }
}

// ----- which bindings can be ⊥ -----------------------------------------------

/// Whether evaluating `rhs` may be ⊥ (spec/semantics.md: E-Arith-Bot,
/// E-Neg, E-Math-Bot, E-Get-Bot, E-Build-Bot, E-IFold-Bot, E-IScan-Bot,
/// E-Accum-Bot; with `limits`, E-Limit too: a `build`, an `iscan` or a
/// `concat` may be larger than `--max-elements`, Note [Hoisting], "Limits").
/// `safe` is a read that cannot be: `(a, i)` for the loop `i` over
/// `0 .. length a`.
fn can_fail(rhs: &Rhs, safe: Option<(&Name, &Name)>, limits: bool) -> bool {
    match rhs {
        // E-Limit.
        Rhs::Prim(Prim::Concat, _)
        | Rhs::Loop {
            kind: LoopKind::Build | LoopKind::IScan,
            ..
        } if limits => true,
        Rhs::Prim(Prim::Get, args)
            if safe.is_some()
                && args.len() == 2
                && (args[0].var(), args[1].var()) == (safe.map(|s| s.0), safe.map(|s| s.1)) =>
        {
            false
        }
        Rhs::Prim(op, args) => prim_can_fail(*op, args),
        Rhs::Array(_) => false,
        Rhs::If(_, t, e) => block_can_fail(t, limits) || block_can_fail(e, limits),
        Rhs::Loop { n, body, .. } => {
            !matches!(n, Atom::Lit(Lit::Int(v), _) if *v >= 0) || block_can_fail(body, limits)
        }
        // It may not end (E-Fuel).
        Rhs::While { .. } => true,
    }
}

/// Whether the primitive `op` applied to `args` may be ⊥, whatever the
/// values, as the table says (`PrimInfo::bottoms`): Index arithmetic
/// (overflow), division and power, `log`, `sqrt`, `tan`, reads, loops,
/// `accum` and `addAt` may; comparisons, `sin`, `cos`, `exp`, Double
/// `+ - *`, pairs, projections, `length` and `concat` may not.
pub(super) fn prim_can_fail(op: Prim, args: &[Atom]) -> bool {
    let index = args.first().is_some_and(|a| *a.ty() == Type::Index);
    op.info().can_fail(index)
}

fn block_can_fail(b: &Block, limits: bool) -> bool {
    b.binds.iter().any(|bind| can_fail(&bind.rhs, None, limits))
}

// ----- mentions --------------------------------------------------------------

/// Whether `rhs` mentions a name of `set` anywhere.
fn mentions(rhs: &Rhs, set: &HashSet<Name>) -> bool {
    let mut found = false;
    rhs.for_each_atom(&mut |a| found |= a.var().is_some_and(|x| set.contains(x)));
    found
}

/// Renames the uses of `map`'s names in `rhs`, and the binders inside it.
fn rename_rhs(rhs: &mut Rhs, map: &HashMap<Name, Name>) {
    rhs.for_each_atom_mut(&mut |a| {
        if let Atom::Var(x, _) = a
            && let Some(y) = map.get(x)
        {
            *x = y.clone();
        }
    });
    rhs.for_each_binder_mut(&mut |x| {
        if let Some(y) = map.get(x) {
            *x = y.clone();
        }
    });
}

fn has_fun(t: &Type) -> bool {
    match t {
        Type::Fun(..) => true,
        Type::Array(e) => has_fun(e),
        Type::Pair(a, b) => has_fun(a) || has_fun(b),
        Type::Double | Type::Index | Type::Bool => false,
    }
}

// ----- hoisting --------------------------------------------------------------

struct Hoister {
    /// Whether the code checks `--max-elements` (E-Limit): then an
    /// allocation may be ⊥ (Note [Hoisting], "Limits").
    limits: bool,
    /// The copies made, with the names they copy.
    made: Copies,
    counter: u32,
    /// The conditionals of rule 3, whose ⊥ the lowering catches.
    speculative: HashSet<Name>,
    /// `n ↦ a` for every binding `n = length a` seen so far.
    lengths: HashMap<Name, Name>,
}

impl Hoister {
    /// A name no other pass makes (`'h` + a number).
    fn fresh(&mut self, base: &str) -> Name {
        self.counter += 1;
        Name::from(format!("{base}'h{}", self.counter))
    }

    /// A fresh name for a copy of `base`'s binding, recorded.
    fn copy_of(&mut self, base: &Name) -> Name {
        let copy = self.fresh(base);
        self.made.push((copy.clone(), base.clone()));
        copy
    }

    fn block(&mut self, b: &mut Block) {
        let binds = std::mem::take(&mut b.binds);
        let mut out = Vec::with_capacity(binds.len());
        for mut bind in binds {
            match &mut bind.rhs {
                Rhs::Prim(Prim::Length, args) => {
                    if let [Atom::Var(a, _)] = args.as_slice() {
                        self.lengths.insert(bind.name.clone(), a.clone());
                    }
                }
                Rhs::If(_, t, e) => {
                    self.block(t);
                    self.block(e);
                }
                Rhs::Loop {
                    n,
                    state,
                    index,
                    body,
                    ..
                } => {
                    self.block(body);
                    let mut variant: HashSet<Name> = HashSet::from_iter([index.clone()]);
                    if let Some((_, s, _)) = state {
                        variant.insert(s.clone());
                    }
                    let over = n.var().and_then(|n| self.lengths.get(n));
                    let inv = invariants(body, variant, over.map(|a| (a, &*index)), self.limits);
                    self.emit(&mut out, inv.moved, n.clone());
                    self.speculate(&mut out, inv.speculated, n.clone(), body);
                }
                // Nothing leaves a `while` (its iterations are not
                // counted, so a moved binding would not know whether it
                // runs); its blocks' own loops are hoisted within them.
                Rhs::While { cond, step, .. } => {
                    self.block(cond);
                    self.block(step);
                }
                Rhs::Prim(..) | Rhs::Array(_) => {}
            }
            out.push(bind);
        }
        b.binds = out;
    }

    /// Binds the `moved` bindings before their loop of size `n`: the ones
    /// before the first that can fail as they are, the rest under `0 < n`.
    fn emit(&mut self, out: &mut Vec<Binding>, moved: Vec<(Binding, bool)>, n: Atom) {
        let first = moved.iter().position(|(_, f)| *f).unwrap_or(moved.len());
        let mut moved = moved.into_iter().map(|(b, _)| b);
        out.extend(moved.by_ref().take(first));
        let guarded: Vec<Binding> = moved.collect();
        if guarded.is_empty() {
            return;
        }
        if matches!(n, Atom::Lit(Lit::Int(v), _) if v > 0) {
            out.extend(guarded);
            return;
        }
        let cond = self.runs(out, &n);
        let targets = guarded.iter().map(|b| b.name.clone()).collect();
        self.region(out, guarded, cond, false, targets);
    }

    /// Rule 3 of Note [Hoisting]: computes `spec` before the loop of size
    /// `n` in a conditional whose ⊥ is caught (`Hoisted::speculative`),
    /// with a flag saying whether it ran to the end; in `body`, each of
    /// them becomes `if ran then value else (the binding again)`, under
    /// fresh binder names.
    fn speculate(&mut self, out: &mut Vec<Binding>, spec: Vec<Binding>, n: Atom, body: &mut Block) {
        if spec.is_empty() {
            return;
        }
        let cond = self.runs(out, &n);
        let mut redo: HashMap<Name, Name> = HashMap::default();
        let targets: Vec<Name> = spec
            .iter()
            .map(|b| {
                let h = self.copy_of(&b.name);
                redo.insert(b.name.clone(), h.clone());
                h
            })
            .collect();
        let (r, ran) = self.region(out, spec, cond, true, targets);
        self.speculative.insert(r);
        let ran = ran.expect("a flag was asked for");
        for bind in &mut body.binds {
            let Some(h) = redo.get(&bind.name) else {
                continue;
            };
            let mut again = bind.clone();
            self.freshen(&mut again.rhs);
            again.name = self.copy_of(&bind.name);
            let result = Atom::Var(again.name.clone(), bind.ty.clone());
            bind.rhs = Rhs::If(
                Atom::Var(ran.clone(), Type::Bool),
                Block {
                    binds: Vec::new(),
                    result: Atom::Var(h.clone(), bind.ty.clone()),
                },
                Block {
                    binds: vec![again],
                    result,
                },
            );
        }
    }

    /// Gives every binder inside `rhs` a fresh name (a copy of a binding
    /// must not bind the names the original binds).
    fn freshen(&mut self, rhs: &mut Rhs) {
        let mut binders = Vec::new();
        rhs.for_each_binder_mut(&mut |x| binders.push(x.clone()));
        let map: HashMap<Name, Name> = binders
            .into_iter()
            .map(|x| {
                let y = self.copy_of(&x);
                (x, y)
            })
            .collect();
        rename_rhs(rhs, &map);
        self.carry_speculative(&map);
    }

    /// A speculative conditional (rule 3) renamed by `map` stays one under
    /// its new name: an inner loop's region moved again, out of an outer
    /// loop, still catches its ⊥ (else its ⊥ would come before an earlier
    /// one of the loop it left).
    fn carry_speculative(&mut self, map: &HashMap<Name, Name>) {
        for (old, new) in map {
            if self.speculative.contains(old) {
                self.speculative.insert(new.clone());
            }
        }
    }

    /// `0 < n` as an atom: a literal for a literal `n`, else bound in `out`.
    fn runs(&mut self, out: &mut Vec<Binding>, n: &Atom) -> Atom {
        if let Atom::Lit(Lit::Int(v), _) = n {
            return Atom::Lit(Lit::Bool(*v > 0), Type::Bool);
        }
        let g = self.fresh("runs");
        out.push(Binding {
            name: g.clone(),
            ty: Type::Bool,
            rhs: Rhs::Prim(
                Prim::Lt,
                vec![Atom::Lit(Lit::Int(0), Type::Index), n.clone()],
            ),
        });
        Atom::Var(g, Type::Bool)
    }

    /// Binds `binds` inside `if cond then … else dummies`, under fresh
    /// names there, and reads their values back into `targets` (one per
    /// binding, in order), after a leading Bool target (`flag`), true when
    /// the branch ran. Returns the conditional's name and the flag's.
    fn region(
        &mut self,
        out: &mut Vec<Binding>,
        binds: Vec<Binding>,
        cond: Atom,
        flag: bool,
        targets: Vec<Name>,
    ) -> (Name, Option<Name>) {
        let map: HashMap<Name, Name> = binds
            .iter()
            .map(|b| (b.name.clone(), self.copy_of(&b.name)))
            .collect();
        self.carry_speculative(&map);
        let mut then_binds = Vec::new();
        for mut b in binds.iter().cloned() {
            rename_rhs(&mut b.rhs, &map);
            b.name = map[&b.name].clone();
            then_binds.push(b);
        }
        let bool_lit = |v| Atom::Lit(Lit::Bool(v), Type::Bool);
        let mut items: Vec<Atom> = flag.then(|| bool_lit(true)).into_iter().collect();
        items.extend(
            binds
                .iter()
                .map(|b| Atom::Var(map[&b.name].clone(), b.ty.clone())),
        );
        let then_result = self.tuple(&mut then_binds, items);
        let mut else_binds = Vec::new();
        let mut dummies: Vec<Atom> = flag.then(|| bool_lit(false)).into_iter().collect();
        for b in &binds {
            let d = self.dummy(&mut else_binds, &b.ty);
            dummies.push(d);
        }
        let else_result = self.tuple(&mut else_binds, dummies);
        let tuple_ty = then_result.ty().clone();
        let r = self.fresh("hoisted");
        out.push(Binding {
            name: r.clone(),
            ty: tuple_ty.clone(),
            rhs: Rhs::If(
                cond,
                Block {
                    binds: then_binds,
                    result: then_result,
                },
                Block {
                    binds: else_binds,
                    result: else_result,
                },
            ),
        });
        let mut tys: Vec<Type> = flag.then_some(Type::Bool).into_iter().collect();
        tys.extend(binds.iter().map(|b| b.ty.clone()));
        let ran = flag.then(|| self.fresh("ran"));
        let mut names: Vec<Name> = ran.iter().cloned().collect();
        names.extend(targets);
        let k = names.len();
        if k == 1 {
            // A single value is the conditional's own result.
            if let Some(last) = out.last_mut() {
                last.name = names[0].clone();
            }
            return (names[0].clone(), ran);
        }
        // Read back: x₁ = fst r, r₂ = snd r, x₂ = fst r₂, …, xₖ = snd rₖ₋₁.
        let mut rest = Atom::Var(r.clone(), tuple_ty);
        for (j, (name, ty)) in names.into_iter().zip(tys).enumerate() {
            let proj = if j + 1 == k { Prim::Snd } else { Prim::Fst };
            out.push(Binding {
                name,
                ty,
                rhs: Rhs::Prim(proj, vec![rest.clone()]),
            });
            if j + 2 < k {
                let Type::Pair(_, tail) = rest.ty().clone() else {
                    unreachable!("a tuple of {k} items is a pair");
                };
                let next = self.fresh("hoisted");
                out.push(Binding {
                    name: next.clone(),
                    ty: (*tail).clone(),
                    rhs: Rhs::Prim(Prim::Snd, vec![rest.clone()]),
                });
                rest = Atom::Var(next, (*tail).clone());
            }
        }
        (r, ran)
    }

    /// `(a₁, (a₂, … aₖ))`, bound in `binds`; a single item is itself.
    fn tuple(&mut self, binds: &mut Vec<Binding>, items: Vec<Atom>) -> Atom {
        let mut items = items.into_iter().rev();
        let mut acc = items.next().expect("at least one item");
        for a in items {
            let ty = Type::Pair(a.ty().clone().into(), acc.ty().clone().into());
            let p = self.fresh("hoisted");
            binds.push(Binding {
                name: p.clone(),
                ty: ty.clone(),
                rhs: Rhs::Prim(Prim::Pair, vec![a, acc]),
            });
            acc = Atom::Var(p, ty);
        }
        acc
    }

    /// Some value of type `t` (never read: the loop does not run).
    fn dummy(&mut self, binds: &mut Vec<Binding>, t: &Type) -> Atom {
        match t {
            Type::Double => Atom::Lit(Lit::Double(0.0), Type::Double),
            Type::Index => Atom::Lit(Lit::Int(0), Type::Index),
            Type::Bool => Atom::Lit(Lit::Bool(false), Type::Bool),
            Type::Pair(a, b) => {
                let a = self.dummy(binds, a);
                let b = self.dummy(binds, b);
                self.tuple(binds, vec![a, b])
            }
            Type::Array(_) | Type::Fun(..) => {
                let x = self.fresh("empty");
                binds.push(Binding {
                    name: x.clone(),
                    ty: t.clone(),
                    rhs: Rhs::Array(Vec::new()),
                });
                Atom::Var(x, t.clone())
            }
        }
    }
}

/// What `invariants` takes out of a loop's body.
struct Invariants {
    /// Rules 1 and 2 of Note [Hoisting], in order, each with whether it
    /// can fail.
    moved: Vec<(Binding, bool)>,
    /// Rule 3: speculated, in order (all are still in the body too, to be
    /// replaced by a test).
    speculated: Vec<Binding>,
}

/// Removes from `body` the bindings that can move before its loop.
/// `variant` holds the loop's index and state; `safe` is `(a, i)` when
/// the loop runs `i` over `0 .. length a`.
fn invariants(
    body: &mut Block,
    mut variant: HashSet<Name>,
    safe: Option<(&Name, &Name)>,
    limits: bool,
) -> Invariants {
    let mut clean = true;
    let mut kept = Vec::new();
    let mut moved = Vec::new();
    let mut speculated = Vec::new();
    let mut spec_names: HashSet<Name> = HashSet::default();
    for bind in std::mem::take(&mut body.binds) {
        let fails = can_fail(&bind.rhs, safe, limits);
        let invariant = !has_fun(&bind.ty) && !mentions(&bind.rhs, &variant);
        let on_speculation = mentions(&bind.rhs, &spec_names);
        if invariant && !on_speculation && (clean || !fails) {
            moved.push((bind, fails));
        } else if invariant && (on_speculation || (fails && worth_moving(&bind.rhs))) {
            // Rule 3. It stays in the body too, as the test that redoes it
            // there when the speculation failed (with the values the body
            // computes: after a failure every speculated value is a dummy).
            spec_names.insert(bind.name.clone());
            kept.push(bind.clone());
            speculated.push(bind);
        } else {
            clean &= !fails;
            variant.insert(bind.name.clone());
            kept.push(bind);
        }
    }
    // What Cranelift hoists itself (pure arithmetic) stays, unless a moved
    // binding needs it: moving it would only hold a register across the
    // loop. Projections and lengths move: they select slots the loop
    // holds anyway, and a read of a projected array is then a read of an
    // array bound outside the body, which fusion can recompute (Note
    // [Fusion], condition 2: vector forward mode's `snd x` in each
    // tangent loop).
    let mut needed: HashSet<Name> = HashSet::default();
    for bind in &speculated {
        rhs_names(&bind.rhs, &mut needed);
    }
    // A binding that can fail stays only if no later one that can fail
    // moves: rule 2 needs every failing binding before a moved one to be
    // evaluated before it (a read `[p][1]` left in the body while the
    // `0.0 ** -p` after it moved made the power's ⊥ come first;
    // `tests/difftest/native-seed3501-case1184.fsm`).
    let mut back = Vec::new();
    let mut out = Vec::new();
    let mut failing_moved = false;
    for (bind, fails) in moved.into_iter().rev() {
        let selects = matches!(
            &bind.rhs,
            Rhs::Prim(Prim::Fst | Prim::Snd | Prim::Length, _)
        );
        if worth_moving(&bind.rhs)
            || selects
            || needed.contains(&bind.name)
            || (fails && failing_moved)
        {
            let mut names = HashSet::default();
            rhs_names(&bind.rhs, &mut names);
            needed.extend(names);
            failing_moved |= fails;
            out.push((bind, fails));
        } else {
            back.push(bind);
        }
    }
    out.reverse();
    back.reverse();
    // They mention only names bound outside the body: first in it.
    back.extend(kept);
    body.binds = back;
    Invariants {
        moved: out,
        speculated,
    }
}

/// Whether computing `rhs` once saves what Cranelift would not save by
/// itself: a loop, a conditional, an allocation, a call or a division.
/// (A read is two loads and a test: moved alone it slowed GMM's gradient
/// by 4%, holding a row across the loop that reads it.)
fn worth_moving(rhs: &Rhs) -> bool {
    match rhs {
        Rhs::Loop { .. } | Rhs::If(..) | Rhs::Array(_) => true,
        // A loop that may not end is not run ahead of time (a speculative
        // run would spend the fuel of the code after it).
        Rhs::While { .. } => false,
        Rhs::Prim(op, _) => matches!(
            op,
            Prim::Sin
                | Prim::Cos
                | Prim::Tan
                | Prim::Log
                | Prim::Exp
                | Prim::Sqrt
                | Prim::Pow
                | Prim::Div
                | Prim::Concat
                | Prim::Accum
        ),
    }
}

/// The names `rhs` mentions (nested blocks included).
fn rhs_names(rhs: &Rhs, out: &mut HashSet<Name>) {
    rhs.for_each_atom(&mut |a| {
        if let Some(x) = a.var() {
            out.insert(x.clone());
        }
    });
}
