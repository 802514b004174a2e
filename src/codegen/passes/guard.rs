//! Which innermost loops run behind a bounds guard (Note [Bounds guards]).
//!
//! # Note [Bounds guards]
//!
//! E-Get-Bot and E-AddAt-Bot make every `a[k]` and `addAt a k c` a test
//! of `k` against `length a`, and the index is often `i + c`, whose
//! addition tests for overflow (E-Arith-Bot). In an innermost loop those
//! tests are most of the work besides the loads: reverse mode's
//! accumulation `addAt acc (node + i) (x̄ * y[i])` is two tests for one
//! multiply–add. The lowering therefore runs an innermost loop over
//! `i < m` (a `build` or an `ifold` whose body binds no loop) in two
//! versions, chosen once at the loop by a *guard*:
//!
//! - Each read or update `a[k]` / `addAt a k c` bound at the top of the
//!   body (so run by every iteration) is *checked* when its length is
//!   known before the loop — `a` is bound outside the loop, and is not a
//!   fused array (those test against their own size), or `a` is a
//!   component of the fold's state whose length every iteration keeps —
//!   and its index is the loop index `i`, a value `c` bound outside the
//!   loop, or `x = i + c` (an Index `+` in the body).
//! - The guard holds when `m = 0`, or every check holds for every
//!   `i < m`: `m ≤ length a` for `a[i]`; `0 ≤ c < length a` for `a[c]`;
//!   `0 ≤ c` and `c ≤ length a − m` for `a[i + c]`, which also keeps
//!   `i + c` from overflowing.
//! - When it holds, the loop runs without those tests (nor the overflow
//!   test of `x = i + c`): none of them could fire, so every value and
//!   every other ⊥ is the same. When it fails, the loop runs as written,
//!   every test in place, and stops with the evaluator's ⊥ (the first
//!   failing iteration's, E-IFold-Bot and E-Build-Bot's order): since the
//!   checked bindings run at every iteration, that version always fails,
//!   and it is laid out cold.
//!
//! A state component keeps its length when the body's result has at its
//! place (through pairs) an array made from the same component by
//! projections and `addAt`s (E-AddAt keeps the length): the accumulators
//! of reverse mode (Note [In-place updates] in `codegen/passes/inplace.rs`).
//! Its length is then the initial state's. E-IFold-Bot (`m < 0`) and
//! E-Build-Bot are tested before the guard, as the loop would.
//!
//! Only innermost loops are versioned, so the code grows by at most one
//! copy of each innermost body.
//!
//! ## Pairs
//!
//! An innermost `build` whose bindings all depend on its index, each
//! Double `+ - * /` or negation, a read at the index of an array of
//! Doubles that needs no test (covered by the guard, or the loop runs
//! over its length), an order comparison of Doubles (a lane mask), or a
//! Double conditional of two atoms on such a comparison (a lane-wise
//! `bitselect`, Note [Selects] in `codegen/lower/mod.rs`), runs two
//! elements at a time in the lanes of an `f64x2` (the last alone when `n`
//! is odd), when its element is a Double among them or a tuple made of
//! such Doubles and of scalars the same in every element (a literal, a
//! name bound outside): reverse mode's tape records, `(e, (e, false))`.
//! A Double element is one 16-byte store; a tuple's leaves are stored
//! lane by lane into their slots of both elements. A lane operation is
//! the scalar IEEE operation, so every bit is the same; the only ⊥ left
//! is a division by zero (both lanes tested), the same ⊥ from any
//! element. Vector forward mode's tangent maps and the Jacobians of
//! elementwise maps are such loops.
//!
//! ## Pairs of `addAt`s
//!
//! An innermost `ifold` whose body only projects its state, reads arrays
//! of Doubles at the index (tests covered), computes Double arithmetic on
//! them, and adds into state arrays of Doubles at `i + c` with `addAt`s
//! whose tests the guard covers and that update in place (Note [In-place
//! updates]), each state array at most once and for nothing else, and
//! whose result is the state with each such array replaced by its
//! `addAt` (other leaves kept, or literals) also runs two iterations at a
//! time (`Lower::fold_pairs`): the reverse sweep's inner loops, such as
//! GMM's `ȳ[s] += t·Q[r][s]; Q̄[r][s] += t·y[s]`. In-place updates keep
//! the buffers and their lengths, so the state is the same pointers in
//! every iteration and the paired loop carries none; each `addAt` is an
//! `f64x2` load, add and store at `i + c`. The same bits: each slot is
//! written by one iteration (its index is `i + c`), its one addition is
//! the scalar one, and no array the body reads is one it writes (an
//! `addAt` is in place only when nothing can read its old array, and the
//! reads of iteration i + 1 read the same arrays). The last iteration
//! when `n` is odd runs as written, with the state; a literal leaf of the
//! result is the state's once an iteration has run. An `addAt` at a
//! constant index (one slot, every iteration) or whose value reads an
//! accumulator runs one iteration at a time.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::anf::{Atom, Block, Rhs};
use crate::ir::{Name, Prim, Type};

/// Where the length a check tests against comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Length {
    /// An array bound outside the loop.
    Outside(Name),
    /// The component of the fold's state at this path (`false` for
    /// `fst`, `true` for `snd`), whose length every iteration keeps.
    State(Vec<bool>),
}

/// The index of a checked read or update, relative to the loop index.
#[derive(Clone, Debug)]
pub enum At {
    /// `a[i]`.
    Loop,
    /// `a[i + c]`.
    Offset(Atom),
    /// `a[c]`.
    Const(Atom),
}

/// One test of the guard.
#[derive(Clone, Debug)]
pub struct Check {
    pub length: Length,
    pub at: At,
}

/// The guard of one innermost loop.
#[derive(Debug, Default)]
pub struct Plan {
    pub checks: Vec<Check>,
    /// The bindings of the body that run without their tests when the
    /// guard holds: the checked reads and updates, and the additions
    /// `i + c` of their indices.
    pub covered: HashSet<Name>,
}

/// The guard of the loop over `index` with body `body` (and state `state`
/// for a fold), if it is innermost and has a checked read or update.
/// `fused` tells the arrays not built, `known` those whose reads at
/// `index` need no test anyway (the loop runs over their length).
pub fn plan(
    index: &Name,
    state: Option<&Name>,
    body: &Block,
    fused: impl Fn(&Name) -> bool,
    known: impl Fn(&Name) -> bool,
) -> Option<Plan> {
    if !innermost(body) {
        return None;
    }
    let mut inside: HashSet<&Name> = HashSet::from_iter([index]);
    inside.extend(state);
    collect_binders(body, &mut inside);
    let outside = |a: &Atom| a.var().is_none_or(|x| !inside.contains(x));
    // Names with the length (or, for pairs, the lengths) of a state
    // component, and the pairs the body builds.
    let mut paths: HashMap<&Name, Vec<bool>> = HashMap::default();
    if let Some(s) = state {
        paths.insert(s, Vec::new());
    }
    let mut pairs: HashMap<&Name, (&Atom, &Atom)> = HashMap::default();
    // `x = i + c`: x ↦ c.
    let mut offsets: HashMap<&Name, &Atom> = HashMap::default();
    for bind in &body.binds {
        let Rhs::Prim(op, args) = &bind.rhs else {
            continue;
        };
        match (op, args.as_slice()) {
            (Prim::Fst | Prim::Snd, [Atom::Var(y, _)]) => {
                if let Some(q) = paths.get(y) {
                    let mut q = q.clone();
                    q.push(*op == Prim::Snd);
                    paths.insert(&bind.name, q);
                }
            }
            (Prim::AddAt, [Atom::Var(y, _), _, _]) => {
                if let Some(q) = paths.get(y).cloned() {
                    paths.insert(&bind.name, q);
                }
            }
            (Prim::Pair, [a, b]) => {
                pairs.insert(&bind.name, (a, b));
            }
            (Prim::Add, [x, y]) if bind.ty == Type::Index => {
                if x.var() == Some(index) && outside(y) {
                    offsets.insert(&bind.name, y);
                } else if y.var() == Some(index) && outside(x) {
                    offsets.insert(&bind.name, x);
                }
            }
            _ => {}
        }
    }
    // Whether the result keeps the length of the component at `q`.
    let kept = |q: &[bool]| resolve(&paths, &pairs, &body.result, q).as_deref() == Some(q);
    let mut plan = Plan::default();
    for bind in &body.binds {
        let (a, k) = match &bind.rhs {
            Rhs::Prim(Prim::Get, args) => (&args[0], &args[1]),
            Rhs::Prim(Prim::AddAt, args) => (&args[0], &args[1]),
            _ => continue,
        };
        let Atom::Var(a, _) = a else {
            continue;
        };
        let length = if !inside.contains(a) && !fused(a) {
            Length::Outside(a.clone())
        } else if let Some(q) = paths.get(a)
            && kept(q)
        {
            Length::State(q.clone())
        } else {
            continue;
        };
        let at = match k.var() {
            Some(x) if x == index && known(a) => continue,
            Some(x) if x == index => At::Loop,
            Some(x) if offsets.contains_key(x) => {
                plan.covered.insert(x.clone());
                At::Offset(offsets[x].clone())
            }
            _ if outside(k) => At::Const(k.clone()),
            _ => continue,
        };
        plan.covered.insert(bind.name.clone());
        plan.checks.push(Check { length, at });
    }
    (!plan.checks.is_empty()).then_some(plan)
}

/// The state path whose length the component of `a` at `suffix` has.
fn resolve(
    paths: &HashMap<&Name, Vec<bool>>,
    pairs: &HashMap<&Name, (&Atom, &Atom)>,
    a: &Atom,
    suffix: &[bool],
) -> Option<Vec<bool>> {
    let x = a.var()?;
    if let Some(q) = paths.get(x) {
        let mut q = q.clone();
        q.extend_from_slice(suffix);
        return Some(q);
    }
    let (l, r) = pairs.get(x)?;
    let (first, rest) = suffix.split_first()?;
    resolve(paths, pairs, if *first { r } else { l }, rest)
}

/// Whether `body` binds no loop, in conditionals neither.
fn innermost(body: &Block) -> bool {
    body.binds.iter().all(|b| match &b.rhs {
        Rhs::Loop { .. } => false,
        Rhs::If(_, t, e) => innermost(t) && innermost(e),
        _ => true,
    })
}

fn collect_binders<'b>(body: &'b Block, out: &mut HashSet<&'b Name>) {
    for b in &body.binds {
        out.insert(&b.name);
        if let Rhs::If(_, t, e) = &b.rhs {
            collect_binders(t, out);
            collect_binders(e, out);
        }
    }
}
