//! Loops of a small literal size replaced by copies of their body (Note
//! [Unrolling]).
//!
//! # Note [Unrolling]
//!
//! Programs over 2- and 3-vectors (bundle adjustment's rotations and
//! projections) are loops of two or three iterations, and in vector
//! forward mode every iteration holds a loop over the directions (Note
//! [Direction loops]). Such a loop is worth no loop at all. Before
//! hoisting,
//!
//! - `x = build c (fun i -> B)` becomes the copies `B[i := 0]`, …,
//!   `B[i := c−1]`, their binders renamed, followed by the array literal
//!   `x = [r₀, …, r_{c−1}]` of their results;
//! - `x = ifold (fun s i -> B) z c` becomes the copies chained through the
//!   state, `B[s := z, i := 0]`, `B[s := r₀, i := 1]`, …, and `x` the last
//!   result;
//!
//! when `c` is a literal from 1 to [`MAX_TRIPS`] — written as one, as Index
//! arithmetic on literals, or as the `length` of an array of literal size
//! — and the copies hold at most [`BUDGET`] bindings. Inner loops are
//! unrolled first. Then a read `x[k]` of an array literal at a literal
//! index in bounds is the item itself, so what one copy computes reaches
//! the copies that read it without an array in between.
//!
//! Exactness. E-Build evaluates the elements in index order and E-IFold-Succ
//! the iterations in order, each with the same values the copies see, so
//! every value and the first ⊥ (with its code and details) are the same; a
//! literal size ≥ 1 is never E-Build-Bot. A read of an array literal at a
//! literal index in bounds cannot be ⊥ (E-Get).

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::Copies;
use super::hoist::fold_index;
use crate::anf::{Atom, Binding, Block, LoopKind, Rhs};
use crate::ir::{Lit, Name, Prim, Type};

/// The most iterations a loop is unrolled for.
pub const MAX_TRIPS: i64 = 4;

/// The most bindings (nested ones included) all copies of one loop hold.
pub const BUDGET: usize = 400;

/// Unrolls the small loops of `body` in place (Note [Unrolling]).
/// `speculative` (Note [Hoisting], rule 3) gains the names of the copies
/// of speculative conditionals. Copies' binders are named `…'{tag}N`: each
/// pass over one body needs its own `tag`, so that names stay unique.
/// Every copy is recorded in `made` with the name it copies.
pub fn unroll(body: &mut Block, speculative: &mut HashSet<Name>, tag: char, made: &mut Copies) {
    let mut u = Unroller {
        tag,
        ..Unroller::default()
    };
    u.block(body);
    for (copy, old) in &u.made {
        if speculative.contains(old) {
            speculative.insert(copy.clone());
        }
    }
    made.append(&mut u.made);
}

#[derive(Default)]
struct Unroller {
    tag: char,
    counter: u32,
    /// Index variables with a literal value.
    lits: HashMap<Name, i64>,
    /// Arrays of a literal size: their items when they are literals.
    sizes: HashMap<Name, i64>,
    items: HashMap<Name, Vec<Atom>>,
    /// Variables replaced by atoms: reads of array literals, unrolled folds.
    subst: HashMap<Name, Atom>,
    /// Every renamed binder's copies, with the names they copy, in the
    /// order they are made.
    made: Copies,
}

impl Unroller {
    /// A name no other pass makes (`'` + the tag + a number).
    fn fresh(&mut self, base: &Name) -> Name {
        self.counter += 1;
        let stem = base.split('\'').next().unwrap_or("x");
        let copy = Name::from(format!("{stem}'{}{}", self.tag, self.counter));
        self.made.push((copy.clone(), base.clone()));
        copy
    }

    fn literal(&self, a: &Atom) -> Option<i64> {
        match a {
            Atom::Lit(Lit::Int(v), _) => Some(*v),
            Atom::Var(x, _) => self.lits.get(x).copied(),
            Atom::Lit(..) => None,
        }
    }

    fn block(&mut self, b: &mut Block) {
        let binds = std::mem::take(&mut b.binds);
        for mut bind in binds {
            substitute_rhs(&mut bind.rhs, &self.subst);
            match &mut bind.rhs {
                Rhs::If(_, t, e) => {
                    self.block(t);
                    self.block(e);
                }
                Rhs::Loop { body, .. } => self.block(body),
                Rhs::While { cond, step, .. } => {
                    self.block(cond);
                    self.block(step);
                }
                Rhs::Prim(..) | Rhs::Array(_) => {}
            }
            match &bind.rhs {
                Rhs::Prim(op, args) if bind.ty == Type::Index => {
                    let lits: Option<Vec<Atom>> = args
                        .iter()
                        .map(|a| self.literal(a).map(|v| Atom::Lit(Lit::Int(v), Type::Index)))
                        .collect();
                    let value = match (op, args.as_slice()) {
                        (Prim::Length, [Atom::Var(a, _)]) => self.sizes.get(a).copied(),
                        _ => lits.and_then(|l| fold_index(*op, &l)),
                    };
                    if let Some(v) = value {
                        self.lits.insert(bind.name.clone(), v);
                    }
                }
                // E-Get of an array literal at a literal index in bounds.
                Rhs::Prim(Prim::Get, args) => {
                    if let (Some(a), Some(k)) = (args[0].var(), self.literal(&args[1]))
                        && let Some(items) = self.items.get(a)
                        && let Some(item) = usize::try_from(k).ok().and_then(|k| items.get(k))
                    {
                        self.subst.insert(bind.name.clone(), item.clone());
                        continue;
                    }
                }
                Rhs::Array(items) => {
                    self.sizes.insert(bind.name.clone(), items.len() as i64);
                    self.items.insert(bind.name.clone(), items.clone());
                }
                _ => {}
            }
            if let Some(copies) = self.unrolled(&bind) {
                b.binds.extend(copies);
                continue;
            }
            if let Rhs::Loop {
                kind: LoopKind::Build,
                n,
                ..
            } = &bind.rhs
                && let Some(c) = self.literal(n)
            {
                self.sizes.insert(bind.name.clone(), c);
            }
            b.binds.push(bind);
        }
        substitute_atom(&mut b.result, &self.subst);
    }

    /// The copies replacing `bind` when it is a small loop (and, for a
    /// `build`, the array literal of their results).
    fn unrolled(&mut self, bind: &Binding) -> Option<Vec<Binding>> {
        let Rhs::Loop {
            kind,
            n,
            state,
            index,
            body,
        } = &bind.rhs
        else {
            return None;
        };
        let c = self.literal(n)?;
        if !(1..=MAX_TRIPS).contains(&c) || *kind == LoopKind::IScan {
            return None;
        }
        if size(body).saturating_mul(c as usize) > BUDGET {
            return None;
        }
        let mut out = Vec::new();
        let mut results = Vec::new();
        let mut s = state.as_ref().map(|(z, _, _)| z.clone());
        for k in 0..c {
            let mut copy = body.clone();
            let mut names: HashMap<Name, Name> = HashMap::default();
            copy.for_each_binder_mut(&mut |x| {
                let y = self.fresh(x);
                names.insert(x.clone(), y.clone());
                *x = y;
            });
            let mut map: HashMap<Name, Atom> = HashMap::default();
            copy.for_each_atom(&mut |a| {
                if let Atom::Var(x, t) = a
                    && let Some(y) = names.get(x)
                {
                    map.insert(x.clone(), Atom::Var(y.clone(), t.clone()));
                }
            });
            map.insert(index.clone(), Atom::Lit(Lit::Int(k), Type::Index));
            if let (Some((_, sv, _)), Some(cur)) = (state, &s) {
                map.insert(sv.clone(), cur.clone());
            }
            substitute_block(&mut copy, &map);
            self.block(&mut copy);
            out.extend(copy.binds);
            s = Some(copy.result.clone());
            results.push(copy.result);
        }
        match kind {
            LoopKind::Build => {
                self.sizes.insert(bind.name.clone(), c);
                self.items.insert(bind.name.clone(), results.clone());
                out.push(Binding {
                    name: bind.name.clone(),
                    ty: bind.ty.clone(),
                    rhs: Rhs::Array(results),
                });
            }
            _ => {
                self.subst
                    .insert(bind.name.clone(), s.expect("at least one iteration"));
            }
        }
        Some(out)
    }
}

/// The bindings of `b`, nested ones included.
pub(super) fn size(b: &Block) -> usize {
    b.binds
        .iter()
        .map(|x| {
            1 + match &x.rhs {
                Rhs::If(_, t, e) => size(t) + size(e),
                Rhs::Loop { body, .. } => size(body),
                Rhs::While { cond, step, .. } => size(cond) + size(step),
                Rhs::Prim(..) | Rhs::Array(_) => 0,
            }
        })
        .sum()
}

fn substitute_atom(a: &mut Atom, map: &HashMap<Name, Atom>) {
    if let Atom::Var(x, _) = a
        && let Some(y) = map.get(x)
    {
        *a = y.clone();
    }
}

fn substitute_rhs(rhs: &mut Rhs, map: &HashMap<Name, Atom>) {
    if !map.is_empty() {
        rhs.for_each_atom_mut(&mut |a| substitute_atom(a, map));
    }
}

pub(super) fn substitute_block(b: &mut Block, map: &HashMap<Name, Atom>) {
    b.for_each_atom_mut(&mut |a| substitute_atom(a, map));
}
