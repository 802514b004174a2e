//! Loops versioned on a size their readers imply (Note [Versioning]).
//!
//! # Note [Versioning]
//!
//! Bundle adjustment's points are rows of a matrix, so the loops over a
//! point's coordinates (`vectorSub x (vectorSlice cam 3 5)`, the rotated
//! point) have the size `length x`, unknown when compiling, though the
//! program then reads those arrays at indices 0, 1 and 2 (a cross
//! product, the projection's division by the third coordinate). Such a
//! loop is not unrolled (Note [Unrolling]), its array needs a buffer, and
//! in forward mode every element of it is a dual number or, in vector
//! mode, holds a loop over the directions that cannot be fused.
//!
//! After hoisting, in a loop's body, the first `x = build n (fun i -> B)`
//! whose size `n` is a variable, and whose array the rest of the body reads
//! at literal indices at most `k − 1` with 2 ≤ `k` ≤ [`MAX_TRIPS`]
//! (and at least one such read), splits the body there: the binding and
//! everything after it become
//!
//! ```text
//! r = if n = k then (the rest, n := k, binders renamed) else (the rest)
//! ```
//!
//! and `r` the body's result. In the first branch the size is a literal,
//! and unrolling and forwarding run again on it. At most one split per
//! block, and only when the rest holds at most [`BUDGET`] bindings (the
//! code is doubled).
//!
//! Exactness. `n = k` on Index cannot be ⊥ (E-Cmp), and each branch is
//! the rest of the body itself, in the first with `n` replaced by the
//! value it has there: every value and the first ⊥ are the same. A
//! speculative conditional (Note [Hoisting]) keeps its kind under its new
//! name.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::Copies;
use super::unroll::{MAX_TRIPS, size, substitute_block};
use crate::anf::{Atom, Binding, Block, LoopKind, Rhs};
use crate::ir::{Lit, Name, Prim, Type};

/// The most bindings (nested ones included) a versioned rest may hold.
pub const BUDGET: usize = 2000;

/// Versions the loop bodies of `body` in place (Note [Versioning]);
/// `speculative` gains the new names of renamed speculative conditionals.
/// Returns whether anything was versioned.
/// Every copy is recorded in `made` with the name it copies.
pub fn version(body: &mut Block, speculative: &mut HashSet<Name>, made: &mut Copies) -> bool {
    let mut v = Versioner {
        counter: 0,
        speculative,
        made,
        changed: false,
    };
    v.nested(body);
    v.changed
}

struct Versioner<'a> {
    counter: u32,
    speculative: &'a mut HashSet<Name>,
    /// The copies made, with the names they copy.
    made: &'a mut Copies,
    changed: bool,
}

impl Versioner<'_> {
    /// Versions the loop bodies nested in `b`, innermost first.
    fn nested(&mut self, b: &mut Block) {
        for bind in &mut b.binds {
            match &mut bind.rhs {
                Rhs::If(_, t, e) => {
                    self.nested(t);
                    self.nested(e);
                }
                Rhs::Loop { body, .. } => {
                    self.nested(body);
                    self.split(body);
                }
                Rhs::While { cond, step, .. } => {
                    self.nested(cond);
                    self.nested(step);
                }
                Rhs::Prim(..) | Rhs::Array(_) => {}
            }
        }
    }

    /// Splits loop body `b` at its first build whose readers imply a size.
    fn split(&mut self, b: &mut Block) {
        let Some((at, n, k)) = (0..b.binds.len()).find_map(|i| {
            let bind = &b.binds[i];
            let Rhs::Loop {
                kind: LoopKind::Build,
                n: Atom::Var(n, _),
                ..
            } = &bind.rhs
            else {
                return None;
            };
            let mut most = None;
            for later in &b.binds[i + 1..] {
                literal_reads(&later.rhs, &bind.name, &mut most);
            }
            let k = most? + 1;
            (2..=MAX_TRIPS).contains(&k).then(|| (i, n.clone(), k))
        }) else {
            return;
        };
        let rest = Block {
            binds: b.binds.split_off(at),
            result: b.result.clone(),
        };
        if size(&rest) > BUDGET {
            b.binds.extend(rest.binds);
            return;
        }
        let ty = rest.result.ty().clone();
        let mut special = rest.clone();
        let mut names: HashMap<Name, Name> = HashMap::default();
        special.for_each_binder_mut(&mut |x| {
            self.counter += 1;
            let stem = x.split('\'').next().unwrap_or("x");
            let y = Name::from(format!("{stem}'v{}", self.counter));
            self.made.push((y.clone(), x.clone()));
            names.insert(x.clone(), y.clone());
            *x = y;
        });
        for (old, new) in &names {
            if self.speculative.contains(old) {
                self.speculative.insert(new.clone());
            }
        }
        let mut map: HashMap<Name, Atom> = HashMap::default();
        special.for_each_atom(&mut |a| {
            if let Atom::Var(x, t) = a
                && let Some(y) = names.get(x)
            {
                map.insert(x.clone(), Atom::Var(y.clone(), t.clone()));
            }
        });
        map.insert(n.clone(), Atom::Lit(Lit::Int(k), Type::Index));
        substitute_block(&mut special, &map);
        self.counter += 1;
        let test = Name::from(format!("size'v{}", self.counter));
        self.counter += 1;
        let joined = Name::from(format!("versioned'v{}", self.counter));
        b.binds.push(Binding {
            name: test.clone(),
            ty: Type::Bool,
            rhs: Rhs::Prim(
                Prim::Eq,
                vec![
                    Atom::Var(n, Type::Index),
                    Atom::Lit(Lit::Int(k), Type::Index),
                ],
            ),
        });
        b.binds.push(Binding {
            name: joined.clone(),
            ty: ty.clone(),
            rhs: Rhs::If(Atom::Var(test, Type::Bool), special, rest),
        });
        b.result = Atom::Var(joined, ty);
        self.changed = true;
    }
}

/// The largest literal index at which `rhs` (nested blocks included)
/// reads `x`, into `most`.
fn literal_reads(rhs: &Rhs, x: &Name, most: &mut Option<i64>) {
    match rhs {
        Rhs::Prim(Prim::Get, args) => {
            if let [Atom::Var(a, _), Atom::Lit(Lit::Int(k), _)] = args.as_slice()
                && a == x
                && *k >= 0
            {
                *most = Some(most.map_or(*k, |m| m.max(*k)));
            }
        }
        Rhs::Prim(..) | Rhs::Array(_) => {}
        Rhs::If(_, t, e) => {
            for bind in t.binds.iter().chain(&e.binds) {
                literal_reads(&bind.rhs, x, most);
            }
        }
        Rhs::Loop { body, .. } => {
            for bind in &body.binds {
                literal_reads(&bind.rhs, x, most);
            }
        }
        Rhs::While { cond, step, .. } => {
            for bind in cond.binds.iter().chain(&step.binds) {
                literal_reads(&bind.rhs, x, most);
            }
        }
    }
}
