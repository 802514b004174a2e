//! Which `addAt`s update their array in place (Note [In-place updates]).
//!
//! Input: the normal form as lowered (after fusion, unrolling, hoisting
//! and versioning) and its speculative conditionals. Output: the names of
//! the `addAt` bindings whose array operand nothing can observe after
//! them, so the lowering (`codegen/lower/`) writes into the operand's
//! buffer instead of a copy. Everything else copies, which E-AddAt allows
//! as well: the analysis only decides cost, never a value.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::rc::Rc;

use super::view;
use crate::anf::{Atom, Block, LoopKind, Rhs};
use crate::ir::{Name, Prim, Type};

// Note [In-place updates]
// ~~~~~~~~~~~~~~~~~~~~~~~
// `y = addAt a i c` is a new array (E-AddAt); reverse mode threads its
// dense accumulators through the sweep with it, one version after
// another (spec/ad-reverse.md §5.6), so it can write into `a`'s buffer
// when that buffer is *owned* and `a` is *linear* there.
//
// The analysis works on the array leaves of variables: a leaf is a
// variable and a path of `fst`/`snd` steps to an array inside its type
// (tuples are slots side by side in native code, so `fst st` is the same
// buffer as the leaf of `st`). A **use** of a leaf is
//
// - a *read*: `get` of an element without arrays, `length`, or an array
//   operand that `concat`, `accum` or the contribution of an `addAt` only
//   copies from;
// - a *projection* `fst`/`snd` whose path leads to the leaf: the new
//   variable holds the same buffer;
// - a *consumption*: anything else that takes the buffer itself — the
//   array operand of `addAt`, a pair, a loop's initial state, a block's
//   result, an array literal's item, a read of a row.
//
// A leaf is **linear at** a consumption C when C is its only consumption
// (or the others are in other branches of the same ordinary conditional,
// which never both run; a binding that consumes it twice, `pair z z`,
// consumes it twice), every read of it happens before C or in another
// branch, and C is not inside a loop the leaf is bound outside of (every
// iteration would consume it). Positions are a pre-order numbering of the
// bindings, a block's result coming after its bindings; a loop's body
// comes after its initial state. The branches of a *speculative*
// conditional (Note [Hoisting], rule 3) may both run, so they count as
// one after the other.
//
// A leaf is **owned** when its buffer was made by its binding (`build`,
// an array literal, `concat`, `accum`, `iscan`, `addAt` — a copy, or a
// buffer that was owned and linear) or reaches it from owned leaves that
// are linear at the step: a projection or pair of one, the result of a
// conditional both of whose branch results are, or a fold's state or
// result when its initial state and its body's result are (assumed for
// the state while the body is judged: the greatest fixed point).
//
// `addAt` updates in place when its array operand is owned and linear at
// the `addAt`. Then no other variable holds the buffer, no read of the old
// version is left to run, and the new version is the only name for it,
// so writing into it is invisible. Parameters, rows read out of arrays,
// anything stored in an array, and a `build n (fun i -> a[i])` (a view of
// `a`'s buffer, which consumes `a`) are never owned; anything else
// copies.

/// The `addAt` bindings of a function, split by how they update.
#[derive(Default)]
pub struct Updates {
    /// Into their operand's buffer.
    pub in_place: HashSet<Name>,
    /// Into a copy.
    pub copies: HashSet<Name>,
}

impl Updates {
    /// The split as listing comments.
    pub fn describe(&self) -> String {
        let list = |set: &HashSet<Name>| {
            let mut xs: Vec<String> = set.iter().map(|x| x.to_string()).collect();
            xs.sort();
            if xs.is_empty() {
                "none".to_string()
            } else {
                xs.join(", ")
            }
        };
        format!(
            ";; addAt (Note [In-place updates])\n;; in place: {}\n;; into a copy: {}\n",
            list(&self.in_place),
            list(&self.copies)
        )
    }
}

/// Which `addAt` bindings of `body` update in place.
pub fn updates(body: &Block, speculative: &HashSet<Name>) -> Updates {
    let mut a = Analysis::default();
    a.block(body, &Rc::new(Vec::new()), speculative);
    let owned = a.owned_leaves();
    let mut out = Updates::default();
    for (y, (x, pos)) in &a.add_ats {
        let leaf = (x.clone(), Vec::new());
        if owned.contains(&leaf) && a.linear(&leaf, *pos) {
            out.in_place.insert(y.clone());
        } else {
            out.copies.insert(y.clone());
        }
    }
    out
}

/// Which part of a construct a position is in.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Part {
    Then,
    Else,
    /// A branch of a speculative conditional: both may run.
    Speculative,
    Body,
}

/// The enclosing constructs (their binding's number, the part).
type Ancestry = Rc<Vec<(u32, Part)>>;

#[derive(Clone, Debug)]
struct Pos {
    seq: u32,
    anc: Ancestry,
}

/// How a variable is bound.
#[derive(Clone, Debug)]
enum Def {
    /// A binding with a fresh buffer (or buffers) of its own.
    Fresh,
    Fst(Name),
    Snd(Name),
    Pair(Atom, Atom),
    /// A conditional: its branches' results and the positions of their
    /// ends.
    If(Atom, u32, Atom, u32),
    /// A fold's state, or its result: the initial state (consumed at the
    /// loop's binding), the body's result (consumed at the body's end).
    Fold {
        z: Atom,
        at: u32,
        result: Atom,
        end: u32,
    },
    /// Anything else: parameters, indices, reads of rows, scalars.
    Other,
}

#[derive(Clone, Debug)]
enum Use {
    Read,
    /// `fst` (0) or `snd` (1).
    Proj(u8),
    Consume,
}

type Leaf = (Name, Vec<u8>);

/// Where a leaf's buffer comes from.
enum Origin {
    /// Made by its binding.
    Fresh,
    /// From these leaves (None: a literal), each consumed at a position.
    From(Vec<(Option<Leaf>, u32)>),
    /// Never owned: a parameter, an index, a read of a row, a scalar.
    Never,
}

#[derive(Default)]
struct Analysis {
    seq: u32,
    defs: HashMap<Name, (Pos, Def, Type)>,
    uses: HashMap<Name, Vec<(Pos, Use)>>,
    /// `y = addAt x …`: y ↦ (x, the position of the binding).
    add_ats: HashMap<Name, (Name, u32)>,
    positions: HashMap<u32, Pos>,
}

impl Analysis {
    fn next(&mut self, anc: &Ancestry) -> Pos {
        self.seq += 1;
        let p = Pos {
            seq: self.seq,
            anc: anc.clone(),
        };
        self.positions.insert(p.seq, p.clone());
        p
    }

    fn def(&mut self, x: &Name, pos: &Pos, d: Def, ty: &Type) {
        self.defs.insert(x.clone(), (pos.clone(), d, ty.clone()));
    }

    fn use_(&mut self, a: &Atom, pos: &Pos, u: Use) {
        if let Atom::Var(x, t) = a
            && t.has_array()
        {
            self.uses
                .entry(x.clone())
                .or_default()
                .push((pos.clone(), u));
        }
    }

    /// Returns the position of the block's end (its result's use).
    fn block(&mut self, b: &Block, anc: &Ancestry, speculative: &HashSet<Name>) -> u32 {
        for bind in &b.binds {
            let pos = self.next(anc);
            let def = match &bind.rhs {
                Rhs::Prim(op, args) => {
                    match (op, args.as_slice()) {
                        (Prim::Get, [a, _]) => {
                            let u = if bind.ty.has_array() {
                                Use::Consume
                            } else {
                                Use::Read
                            };
                            self.use_(a, &pos, u);
                        }
                        (Prim::Length | Prim::Concat, [a]) => self.use_(a, &pos, Use::Read),
                        (Prim::Accum, [z, _, cs]) => {
                            self.use_(z, &pos, Use::Read);
                            self.use_(cs, &pos, Use::Read);
                        }
                        (Prim::AddAt, [a, _, c]) => {
                            self.use_(a, &pos, Use::Consume);
                            self.use_(c, &pos, Use::Read);
                            if let Atom::Var(x, _) = a {
                                self.add_ats.insert(bind.name.clone(), (x.clone(), pos.seq));
                            }
                        }
                        (Prim::Fst, [a]) => self.use_(a, &pos, Use::Proj(0)),
                        (Prim::Snd, [a]) => self.use_(a, &pos, Use::Proj(1)),
                        _ => args.iter().for_each(|a| self.use_(a, &pos, Use::Consume)),
                    }
                    match (op, args.as_slice()) {
                        (Prim::Concat | Prim::Accum | Prim::AddAt, _) => Def::Fresh,
                        (Prim::Fst, [Atom::Var(p, _)]) => Def::Fst(p.clone()),
                        (Prim::Snd, [Atom::Var(p, _)]) => Def::Snd(p.clone()),
                        (Prim::Pair, [a, b]) => Def::Pair(a.clone(), b.clone()),
                        _ => Def::Other,
                    }
                }
                Rhs::Array(items) => {
                    items.iter().for_each(|a| self.use_(a, &pos, Use::Consume));
                    Def::Fresh
                }
                Rhs::If(c, t, e) => {
                    self.use_(c, &pos, Use::Read);
                    let (pt, pe) = if speculative.contains(&bind.name) {
                        (Part::Speculative, Part::Speculative)
                    } else {
                        (Part::Then, Part::Else)
                    };
                    let te = self.block(t, &extend(anc, pos.seq, pt), speculative);
                    let ee = self.block(e, &extend(anc, pos.seq, pe), speculative);
                    Def::If(t.result.clone(), te, e.result.clone(), ee)
                }
                // A `while`'s state is never owned (its iterations are
                // not counted, so the fold argument does not apply): an
                // `addAt` on it copies.
                Rhs::While {
                    init,
                    state,
                    ty,
                    cond,
                    step,
                } => {
                    self.use_(init, &pos, Use::Consume);
                    let inner = extend(anc, pos.seq, Part::Body);
                    let start = self.next(&inner);
                    self.def(state, &start, Def::Other, ty);
                    self.block(cond, &inner, speculative);
                    self.block(step, &inner, speculative);
                    Def::Other
                }
                Rhs::Loop {
                    kind,
                    n,
                    state,
                    index,
                    body,
                } => {
                    self.use_(n, &pos, Use::Read);
                    // A view `build n (fun i -> a[i])` shares `a`'s buffer
                    // (`view::copied`): `a` is consumed there, so an
                    // `addAt` on `a` later cannot write into it.
                    if *kind == LoopKind::Build
                        && let Some(a) = view::copied(body, index)
                    {
                        self.use_(a, &pos, Use::Consume);
                    }
                    let inner = extend(anc, pos.seq, Part::Body);
                    let start = self.next(&inner);
                    self.def(index, &start, Def::Other, &Type::Index);
                    if let Some((z, _, _)) = state {
                        self.use_(z, &pos, Use::Consume);
                    }
                    let end = self.block(body, &inner, speculative);
                    match (kind, state) {
                        (LoopKind::IFold, Some((z, s, st))) => {
                            let fold = Def::Fold {
                                z: z.clone(),
                                at: pos.seq,
                                result: body.result.clone(),
                                end,
                            };
                            self.def(s, &start, fold.clone(), st);
                            fold
                        }
                        (_, Some((_, s, st))) => {
                            // An `iscan` stores its states: never owned.
                            self.def(s, &start, Def::Other, st);
                            Def::Fresh
                        }
                        // `build n (fun i -> a[i])` is a view of `a`'s
                        // buffer (`view::copied`): never owned.
                        (LoopKind::Build, None) if view::copied(body, index).is_some() => {
                            Def::Other
                        }
                        _ => Def::Fresh,
                    }
                }
            };
            self.def(&bind.name, &pos, def, &bind.ty);
        }
        let end = self.next(anc);
        self.use_(&b.result, &end, Use::Consume);
        end.seq
    }

    /// The owned leaves among those the `addAt` operands' ownership
    /// depends on: the greatest fixed point of the rules of Note [In-place
    /// updates], from all of them.
    fn owned_leaves(&self) -> HashSet<Leaf> {
        let mut owned: HashSet<Leaf> = HashSet::default();
        let mut stack: Vec<Leaf> = self
            .add_ats
            .values()
            .map(|(x, _)| (x.clone(), Vec::new()))
            .collect();
        while let Some(leaf) = stack.pop() {
            if owned.contains(&leaf) {
                continue;
            }
            stack.extend(self.depends_on(&leaf));
            owned.insert(leaf);
        }
        let mut memo = HashMap::default();
        loop {
            let before = owned.len();
            let all: Vec<Leaf> = owned.iter().cloned().collect();
            for leaf in all {
                if !self.owned_step(&leaf, &owned, &mut memo) {
                    owned.remove(&leaf);
                }
            }
            if owned.len() == before {
                return owned;
            }
        }
    }

    /// Where the buffer of `leaf` comes from (Note [In-place updates]).
    fn origin(&self, (x, path): &Leaf) -> Origin {
        let Some((pos, d, _)) = self.defs.get(x) else {
            return Origin::Never;
        };
        let from = |a: &Atom, p: Vec<u8>, at: u32| (a.var().map(|v| (v.clone(), p)), at);
        match d {
            Def::Fresh if path.is_empty() => Origin::Fresh,
            Def::Fst(p) | Def::Snd(p) => {
                let k = if matches!(d, Def::Fst(_)) { 0 } else { 1 };
                let mut sub = vec![k];
                sub.extend(path);
                Origin::From(vec![(Some((p.clone(), sub)), pos.seq)])
            }
            Def::Pair(a, b) => match path.split_first() {
                Some((0, rest)) => Origin::From(vec![from(a, rest.to_vec(), pos.seq)]),
                Some((1, rest)) => Origin::From(vec![from(b, rest.to_vec(), pos.seq)]),
                _ => Origin::Never,
            },
            Def::If(t, te, e, ee) => {
                Origin::From(vec![from(t, path.clone(), *te), from(e, path.clone(), *ee)])
            }
            Def::Fold { z, at, result, end } => Origin::From(vec![
                from(z, path.clone(), *at),
                from(result, path.clone(), *end),
            ]),
            Def::Fresh | Def::Other => Origin::Never,
        }
    }

    /// The leaves whose ownership that of `leaf` depends on.
    fn depends_on(&self, leaf: &Leaf) -> Vec<Leaf> {
        match self.origin(leaf) {
            Origin::From(sources) => sources.into_iter().filter_map(|(l, _)| l).collect(),
            Origin::Fresh | Origin::Never => Vec::new(),
        }
    }

    /// One step of the fixed point: whether `leaf` is owned given that
    /// the leaves in `owned` are — made by its binding, or every source
    /// owned and linear where it is consumed.
    fn owned_step(
        &self,
        leaf: &Leaf,
        owned: &HashSet<Leaf>,
        memo: &mut HashMap<(Leaf, u32), bool>,
    ) -> bool {
        match self.origin(leaf) {
            Origin::Fresh => true,
            Origin::Never => false,
            Origin::From(sources) => sources.iter().all(|(l, at)| {
                l.as_ref()
                    .is_some_and(|l| owned.contains(l) && self.linear_memo(l, *at, memo))
            }),
        }
    }

    fn linear_memo(&self, leaf: &Leaf, at: u32, memo: &mut HashMap<(Leaf, u32), bool>) -> bool {
        if let Some(&r) = memo.get(&(leaf.clone(), at)) {
            return r;
        }
        let r = self.linear(leaf, at);
        memo.insert((leaf.clone(), at), r);
        r
    }

    /// Whether `leaf` is linear at the consumption at position `at`.
    fn linear(&self, (x, path): &Leaf, at: u32) -> bool {
        let (Some((def, _, _)), Some(c)) = (self.defs.get(x), self.positions.get(&at)) else {
            return false;
        };
        // Not consumed once per iteration of a loop it is bound outside of.
        if c.anc.len() < def.anc.len()
            || c.anc[..def.anc.len()] != def.anc[..]
            || c.anc[def.anc.len()..].iter().any(|(_, p)| *p == Part::Body)
        {
            return false;
        }
        let mut found = false;
        for (p, u) in self.uses.get(x).map(Vec::as_slice).unwrap_or(&[]) {
            let consumes = match u {
                Use::Read => {
                    if !(p.seq < c.seq || exclusive(p, c)) {
                        return false;
                    }
                    false
                }
                Use::Proj(k) => path.first() == Some(k),
                Use::Consume => true,
            };
            if consumes {
                if p.seq == c.seq {
                    // Twice at the same binding (`pair z z`): two names
                    // for one buffer, not linear.
                    if found {
                        return false;
                    }
                    found = true;
                } else if !exclusive(p, c) {
                    return false;
                }
            }
        }
        found
    }
}

fn extend(anc: &Ancestry, seq: u32, part: Part) -> Ancestry {
    let mut v = (**anc).clone();
    v.push((seq, part));
    Rc::new(v)
}

/// Whether two positions are in different branches of one ordinary
/// conditional (so at most one of them runs).
fn exclusive(a: &Pos, b: &Pos) -> bool {
    a.anc
        .iter()
        .zip(b.anc.iter())
        .take_while(|(x, y)| x.0 == y.0)
        .any(|(x, y)| {
            matches!(
                (x.1, y.1),
                (Part::Then, Part::Else) | (Part::Else, Part::Then)
            )
        })
}
