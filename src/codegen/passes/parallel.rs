//! Which loops run on several threads (Note [Parallel loops]), and the
//! chunk function each one runs per thread.
//!
//! # Note [Parallel loops]
//!
//! With `--threads T` (T > 1), a loop of the function's own block (not
//! nested in another loop) may run as T chunks of consecutive
//! iterations, chunk t over `lo_t .. lo_t + count_t` (the counts differ
//! by at most one, the first `n mod T` chunks one longer), chunk 0 on the
//! calling thread and each other on a thread of its own
//! (`codegen/backend/pool.rs`), each with its own call context and arena.
//! Each chunk is a function of its own (the chunk function below: the
//! loop over `count` iterations, its index `lo + k`), lowered like any
//! entry and called through the runtime's `fsmooth_parallel`.
//!
//! **Builds**, under either floating-point contract: `build n (fun i ->
//! e)` (not a view of an array, nor a nest the lowering interchanges,
//! Note [Interchange]) runs as T chunks that each build their
//! elements; the lowering copies them side by side into the result.
//! Every element is computed by the same operations from the same values,
//! so every bit is the evaluator's; elements that hold arrays keep them
//! in their thread's arena, which the call keeps until its result is
//! dropped.
//!
//! **Folds**, under the relaxed contract only (spec/semantics.md §7): a
//! fold
//!
//! ```text
//! x = ifold (fun s i -> body) z n
//! ```
//!
//! whose body adds to its state and does nothing else with it — every
//! leaf of the body's result is either the same leaf of `s` plus terms
//! that do not depend on `s`, or a scalar that does not depend on `s` at
//! all — runs as T chunks. Every chunk starts from zero (−0.0, IEEE's
//! additive identity, so that a sum of −0.0s stays −0.0; or an array of
//! −0.0s as long as `z`'s, which the chunk allocates and so updates in
//! place); the result is `z` plus the chunks' results, added
//! leaf by leaf in chunk order; a scalar that does not depend on `s` is
//! the last chunk's, one the body passes on unchanged `z`'s.
//!
//! What adds to the state, tracked per leaf of every value (a value
//! *carries* leaf k of `s` when it is that leaf plus terms independent of
//! `s`):
//!
//! - projections and pairs of carried values carry what they take;
//! - `addAt a j c` and Double `a + c` carry what `a` carries when `j` and
//!   `c` are independent of `s`;
//! - `length a` is independent of `s`: `addAt` keeps lengths, and chunk
//!   t's zero arrays have `z`'s;
//! - an inner fold whose initial state carries leaves carries them when
//!   its body returns each carried leaf of its state in the same place
//!   (and keeps its independent leaves independent);
//! - a conditional on an independent test carries what both branches
//!   return, when they carry the same leaves;
//! - any other use of a carried value (reading an element, multiplying,
//!   a test, storing it in an array, a `while`) keeps the fold serial.
//!
//! A component the body returns unchanged at its own place (reverse
//! mode's folds carry arrays they only read, such as a cotangent they
//! take their seeds from: Note [Jamming], invariant components) is the
//! initial state's in every iteration: its projections are independent
//! of `s`, every chunk reads the initial value, and the result keeps it.
//!
//! So the body maps `s` to `s + δ(i)` with δ independent of `s`, and
//! over the reals the fold is `z + Σᵢ δ(i)` in any grouping: the chunked
//! fold is exact over the reals and reassociates IEEE additions only
//! (the relaxed contract's bound, spec/semantics.md §7). Results are
//! deterministic for a given T: the chunks are fixed by `n` and T, and
//! their sums are added in chunk order whatever the threads' timing.
//!
//! Cost. Handing a chunk to a thread and waiting for it costs a few
//! microseconds (`codegen/backend/pool.rs`), so a loop runs on several
//! threads only when it has at least [`MIN_LOOPS`] iterations and its
//! body runs a loop, or [`MIN_SCALAR`] iterations of straight-line code,
//! and at least one per thread; otherwise it runs as written. GMM's fold
//! over its points qualifies, its folds over a few components do not.
//! Fewer iterations still run on several threads when their loops do
//! enough work: when the body runs a nest of loops whose counts are bound
//! outside the loop (the deepest such nest, its outer [`WORK_DEPTH`]
//! counts: [`Parallel::work`]), and the loop's count times theirs (a
//! negative one taken as 0, the product saturated) is at least
//! [`MIN_SCALAR`], with an iteration per
//! thread. So the batched GMM's `build` over its components, each d rows
//! of n points, runs on both cores, while the pointwise one's triangles
//! (d rows of r + 1, a count that changes per row) do not.
//!
//! ⊥: a chunk that fails stops its own thread only; the failure reported
//! is that of the first failing chunk in order, which holds the first
//! failing iteration, so the code and details are the evaluator's first
//! ⊥ (every iteration before it succeeds in either order). A build's
//! E-Limit is tested for the whole array before the chunks run, as the
//! build would.
//!
//! Fuel and memory: the loop's whole count is charged before the chunks
//! start, as the serial loop's is (so a call without the fuel for it
//! ends there, with the serial code's `out-of-fuel`). Each thread's
//! context then has the call's remaining fuel, plus what its chunk
//! charges that the serial loop does not (its own count, and a fold's
//! zero accumulators); what the threads' inner loops spent is taken from
//! the call's when they finish, and a call that overdraws it ends with
//! `out-of-fuel`, located at the loop (the threads' inner iterations
//! together, and the fuel that was left). A chunk's own ⊥ is reported
//! first, so a call that both overdraws its fuel and fails in a chunk
//! reports the chunk's ⊥, where the serial loop might have run out of
//! fuel before reaching it (fuel comparisons are inconclusive,
//! spec/semantics.md §9). Each thread's arena has the call's memory
//! limit, so a call on T threads may hold up to T times it.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::anf::{Atom, Binding, Block, LoopKind, Normal, Rhs};
use crate::ir::{Name, Prim, Type};

/// How the chunks' results of one state leaf combine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Leaf {
    /// A Double that the body adds to: the chunks' sum, in order.
    Sum,
    /// An array of Doubles that the body adds into (`addAt`): the chunks'
    /// element-wise sum, in order.
    SumArray,
    /// A value the body passes on unchanged (a scalar, or any component
    /// it returns at its own place): the initial one.
    Keep,
    /// A scalar independent of the state: the last chunk's.
    Last,
}

/// What runs on several threads.
pub enum Kind {
    /// A fold (relaxed contract only), with its state's leaves, in slot
    /// order, and how each combines.
    Fold(Vec<(Leaf, Type)>),
    /// A `build` (either contract: each element is computed as written),
    /// with its elements' type.
    Build(Type),
}

/// A loop to run on several threads.
pub struct Parallel {
    pub kind: Kind,
    /// The chunk function: parameters `lo`, `count`, for a fold per leaf
    /// of the state its length (`SumArray`) or its initial value (`Keep`,
    /// `Last`), then the loop's free variables (in [`Parallel::free`]'s
    /// order). It returns the fold's state from zero, or the build's
    /// elements `lo .. lo + count`.
    pub chunk: Normal,
    /// The loop's free variables, passed to every chunk.
    pub free: Vec<(Name, Type)>,
    /// The fewest iterations worth a thread's hand-over (Note [Parallel
    /// loops], cost).
    pub min_count: i64,
    /// The counts of a nest of loops in the body that do not change from
    /// one iteration to the next, outermost first (at most [`WORK_DEPTH`]):
    /// fewer iterations than `min_count` still run on several threads
    /// when their count times these is at least [`MIN_SCALAR`].
    pub work: Vec<Atom>,
}

/// The fewest iterations of a loop whose body runs a loop, and of one
/// whose body does not, that run on several threads (Note [Parallel
/// loops], cost).
pub const MIN_LOOPS: i64 = 64;
pub const MIN_SCALAR: i64 = 1 << 14;

/// The most loop counts [`Parallel::work`] multiplies.
pub const WORK_DEPTH: usize = 2;

/// The loops of `normal`'s own block that run on several threads, by the
/// name they bind: its `build`s, and its folds when `folds` (the relaxed
/// contract). The lowering builds every array they read (a chunk
/// function is passed values, Note [Fusion] cannot reach into it).
pub fn plan(normal: &Normal, folds: bool) -> HashMap<Name, Parallel> {
    let mut out = HashMap::default();
    for bind in &normal.body.binds {
        let p = if folds { fold(bind, normal) } else { None };
        if let Some(p) = p.or_else(|| build(bind, normal)) {
            out.insert(bind.name.clone(), p);
        }
    }
    out
}

/// A `build n (fun i -> body)` whose body is more than a read at `i`.
fn build(bind: &Binding, normal: &Normal) -> Option<Parallel> {
    let Rhs::Loop {
        kind: LoopKind::Build,
        state: None,
        index,
        body,
        ..
    } = &bind.rhs
    else {
        return None;
    };
    let Type::Array(elem) = &bind.ty else {
        return None;
    };
    // A view of an array is no work (Note [Native layout]); a nest the
    // lowering interchanges runs over whole rows, which chunks of the
    // outer index would break (Note [Interchange]).
    if super::view::copied(body, index).is_some()
        || super::loop_interchange::plan(index, body, &bind.ty).is_some()
        || super::loop_interchange::transpose(index, body).is_some()
    {
        return None;
    }
    let free = free_vars(&bind.rhs);
    let chunk = chunk_fn(
        bind,
        normal,
        (LoopKind::Build, None, index, body),
        (Vec::new(), Vec::new()),
        &free,
    );
    Some(Parallel {
        kind: Kind::Build((**elem).clone()),
        chunk,
        work: work(body, &free),
        free,
        min_count: min_count(body),
    })
}

fn min_count(body: &Block) -> i64 {
    if body.binds.iter().any(|b| has_loop(&b.rhs)) {
        MIN_LOOPS
    } else {
        MIN_SCALAR
    }
}

fn fold(bind: &Binding, normal: &Normal) -> Option<Parallel> {
    let Rhs::Loop {
        kind: LoopKind::IFold,
        n: _,
        state: Some((_, s, st)),
        index,
        body,
    } = &bind.rhs
    else {
        return None;
    };
    // The body's result, leaf by leaf, against the state's.
    let mut tys = Vec::new();
    leaf_types(st, &mut tys);
    let mut next = 0;
    let carried = of_state(st, &mut next);
    let mut env: HashMap<Name, Carry> = HashMap::default();
    env.insert(s.clone(), carried);
    // Components the body passes on unchanged (Note [Parallel loops],
    // invariant components): every iteration reads the initial state's.
    let invariant = super::jam::invariant_projections(body, s);
    let skip: HashSet<Name> = invariant.iter().map(|(x, _)| x.clone()).collect();
    let mut kept: HashSet<usize> = HashSet::default();
    for (_, path) in &invariant {
        let (start, count) = leaf_span(st, path)?;
        kept.extend(start..start + count);
    }
    let result = walk_skipping(body, &mut env, &skip)?;
    let mut got = Vec::new();
    result.flatten(st, &mut got);
    let mut leaves = Vec::new();
    for (k, (c, ty)) in got.into_iter().zip(&tys).enumerate() {
        if kept.contains(&k) {
            leaves.push((Leaf::Keep, ty.clone()));
            continue;
        }
        let leaf = match c {
            Some(j) if j != k => return None,
            Some(_) => match ty {
                Type::Double => Leaf::Sum,
                Type::Array(e) if **e == Type::Double => Leaf::SumArray,
                t if t.has_array() => return None,
                _ => Leaf::Keep,
            },
            None if ty.has_array() => return None,
            None => Leaf::Last,
        };
        leaves.push((leaf, ty.clone()));
    }
    // A fold that adds nothing has nothing to split.
    if !leaves
        .iter()
        .any(|(l, _)| matches!(l, Leaf::Sum | Leaf::SumArray))
    {
        return None;
    }
    let free = free_vars(&bind.rhs);
    let chunk = fold_chunk(bind, (s, st, index, body), &leaves, &free, normal);
    Some(Parallel {
        kind: Kind::Fold(leaves),
        chunk,
        work: work(body, &free),
        free,
        min_count: min_count(body),
    })
}

/// The name of a chunk function's own variable `what`.
fn par_name(what: &str) -> Name {
    Name::from(format!("{what}'par"))
}

/// The chunk function of a fold (Note [Parallel loops]): per state leaf
/// its length (`SumArray`) or its initial value (`Keep`, `Last`; a `Sum`
/// starts at −0.0) after `lo` and `count`; the fold starts from the state
/// with every leaf the body adds to at zero (fresh arrays, which the fold
/// then owns and updates in place, Note [In-place updates]).
fn fold_chunk(
    bind: &Binding,
    (s, st, index, body): (&Name, &Type, &Name, &Block),
    leaves: &[(Leaf, Type)],
    free: &[(Name, Type)],
    normal: &Normal,
) -> Normal {
    let var = |x: &Name, t: Type| Atom::Var(x.clone(), t);
    let minus_zero = || Atom::Lit(crate::ir::Lit::Double(-0.0), Type::Double);
    let mut params = Vec::new();
    let mut binds = Vec::new();
    let mut atoms = Vec::new();
    for (j, (leaf, ty)) in leaves.iter().enumerate() {
        let atom = match leaf {
            Leaf::Sum => minus_zero(),
            Leaf::SumArray => {
                let len = par_name(&format!("len{j}"));
                let zero = par_name(&format!("zero{j}"));
                params.push((len.clone(), Type::Index));
                binds.push(Binding {
                    name: zero.clone(),
                    ty: ty.clone(),
                    rhs: Rhs::Loop {
                        kind: LoopKind::Build,
                        n: var(&len, Type::Index),
                        state: None,
                        index: par_name(&format!("j{j}")),
                        body: Block {
                            binds: Vec::new(),
                            result: minus_zero(),
                        },
                    },
                });
                var(&zero, ty.clone())
            }
            Leaf::Keep | Leaf::Last => {
                let init = par_name(&format!("init{j}"));
                params.push((init.clone(), ty.clone()));
                var(&init, ty.clone())
            }
        };
        atoms.push(atom);
    }
    let mut next = 0;
    let zero = pair_up(st, &mut atoms.into_iter(), &mut binds, &mut next);
    chunk_fn(
        bind,
        normal,
        (
            LoopKind::IFold,
            Some((zero, s.clone(), st.clone())),
            index,
            body,
        ),
        (params, binds),
        free,
    )
}

/// The chunk function of `bind`, a loop of `kind` from `state` over
/// `index` (Note [Parallel loops]): parameters `lo`, `count`, `extra`,
/// then `free`; the bindings `prelude`, then the loop over `count`
/// iterations, its body over the index `lo + k`.
fn chunk_fn(
    bind: &Binding,
    normal: &Normal,
    (kind, state, index, body): (LoopKind, Option<(Atom, Name, Type)>, &Name, &Block),
    (extra, mut prelude): (Vec<(Name, Type)>, Vec<Binding>),
    free: &[(Name, Type)],
) -> Normal {
    let (lo, count, k) = (par_name("lo"), par_name("count"), par_name("k"));
    let mut params = vec![(lo.clone(), Type::Index), (count.clone(), Type::Index)];
    params.extend(extra);
    params.extend(free.iter().cloned());
    let mut binds = vec![Binding {
        name: index.clone(),
        ty: Type::Index,
        rhs: Rhs::Prim(
            Prim::Add,
            vec![
                Atom::Var(lo, Type::Index),
                Atom::Var(k.clone(), Type::Index),
            ],
        ),
    }];
    binds.extend(body.binds.iter().cloned());
    prelude.push(Binding {
        name: bind.name.clone(),
        ty: bind.ty.clone(),
        rhs: Rhs::Loop {
            kind,
            n: Atom::Var(count, Type::Index),
            state,
            index: k,
            body: Block {
                binds,
                result: body.result.clone(),
            },
        },
    });
    Normal {
        params,
        body: Block {
            binds: prelude,
            result: Atom::Var(bind.name.clone(), bind.ty.clone()),
        },
        spans: normal.spans.clone(),
    }
}

/// The value of type `t` whose leaves are `atoms`, in order, its pairs
/// bound in `binds`.
fn pair_up(
    t: &Type,
    atoms: &mut impl Iterator<Item = Atom>,
    binds: &mut Vec<Binding>,
    next: &mut usize,
) -> Atom {
    match t {
        Type::Pair(a, b) => {
            let a = pair_up(a, atoms, binds, next);
            let b = pair_up(b, atoms, binds, next);
            let x = par_name(&format!("pair{next}"));
            *next += 1;
            binds.push(Binding {
                name: x.clone(),
                ty: t.clone(),
                rhs: Rhs::Prim(Prim::Pair, vec![a, b]),
            });
            Atom::Var(x, t.clone())
        }
        _ => atoms.next().expect("one atom per leaf"),
    }
}

/// What a value carries of the fold's state, leaf by leaf.
#[derive(Clone, Debug, PartialEq)]
enum Carry {
    /// Independent of the state, or (for a leaf) state leaf k plus terms
    /// independent of it.
    Leaf(Option<usize>),
    Pair(Box<Carry>, Box<Carry>),
}

const FREE: Carry = Carry::Leaf(None);

impl Carry {
    fn is_free(&self) -> bool {
        match self {
            Carry::Leaf(c) => c.is_none(),
            Carry::Pair(a, b) => a.is_free() && b.is_free(),
        }
    }

    /// The carried leaf of each leaf of a value of type `t`.
    fn flatten(&self, t: &Type, out: &mut Vec<Option<usize>>) {
        match (self, t) {
            (Carry::Pair(a, b), Type::Pair(ta, tb)) => {
                a.flatten(ta, out);
                b.flatten(tb, out);
            }
            (Carry::Leaf(c), t) => {
                let mut n = Vec::new();
                leaf_types(t, &mut n);
                out.extend(n.iter().map(|_| *c));
            }
            (Carry::Pair(..), _) => out.push(None),
        }
    }

    fn fst(&self) -> Carry {
        match self {
            Carry::Pair(a, _) => (**a).clone(),
            Carry::Leaf(_) => FREE,
        }
    }

    fn snd(&self) -> Carry {
        match self {
            Carry::Pair(_, b) => (**b).clone(),
            Carry::Leaf(_) => FREE,
        }
    }
}

/// State leaf numbers for a state of type `t`, from `next`.
fn of_state(t: &Type, next: &mut usize) -> Carry {
    match t {
        Type::Pair(a, b) => {
            let a = of_state(a, next);
            Carry::Pair(Box::new(a), Box::new(of_state(b, next)))
        }
        _ => {
            *next += 1;
            Carry::Leaf(Some(*next - 1))
        }
    }
}

fn leaf_types(t: &Type, out: &mut Vec<Type>) {
    match t {
        Type::Pair(a, b) => {
            leaf_types(a, out);
            leaf_types(b, out);
        }
        t => out.push(t.clone()),
    }
}

fn carry(env: &HashMap<Name, Carry>, a: &Atom) -> Carry {
    a.var().and_then(|x| env.get(x)).cloned().unwrap_or(FREE)
}

/// What `b`'s result carries, or None if `b` uses a carried value in a
/// way that is not an addition to it.
/// [`walk`] of a fold's body whose bindings in `skip` (projections of
/// components it passes on unchanged) are independent of the state.
fn walk_skipping(b: &Block, env: &mut HashMap<Name, Carry>, skip: &HashSet<Name>) -> Option<Carry> {
    for bind in b.binds.iter().filter(|x| !skip.contains(&x.name)) {
        let c = binding(&bind.rhs, &bind.ty, env)?;
        if !c.is_free() {
            env.insert(bind.name.clone(), c);
        }
    }
    Some(carry(env, &b.result))
}

/// The first leaf (in [`leaf_types`]'s order) of the component of `ty` at
/// `path`, and how many leaves it has.
fn leaf_span(ty: &Type, path: &[bool]) -> Option<(usize, usize)> {
    let count = |t: &Type| {
        let mut v = Vec::new();
        leaf_types(t, &mut v);
        v.len()
    };
    let mut start = 0;
    let mut t = ty;
    for &second in path {
        let Type::Pair(a, b) = t else {
            return None;
        };
        if second {
            start += count(a);
            t = b;
        } else {
            t = a;
        }
    }
    Some((start, count(t)))
}

fn walk(b: &Block, env: &mut HashMap<Name, Carry>) -> Option<Carry> {
    walk_skipping(b, env, &HashSet::default())
}

fn binding(rhs: &Rhs, ty: &Type, env: &mut HashMap<Name, Carry>) -> Option<Carry> {
    let uses_carried = |rhs: &Rhs, env: &HashMap<Name, Carry>| {
        let mut found = false;
        rhs.for_each_atom(&mut |a| found |= !carry(env, a).is_free());
        found
    };
    match rhs {
        Rhs::Prim(op, args) => {
            let cs: Vec<Carry> = args.iter().map(|a| carry(env, a)).collect();
            if cs.iter().all(Carry::is_free) {
                return Some(FREE);
            }
            match (op, cs.as_slice()) {
                (Prim::Fst, [c]) => Some(c.fst()),
                (Prim::Snd, [c]) => Some(c.snd()),
                (Prim::Pair, [a, b]) => Some(Carry::Pair(Box::new(a.clone()), Box::new(b.clone()))),
                (Prim::Length, _) => Some(FREE),
                (Prim::AddAt, [a @ Carry::Leaf(Some(_)), j, c]) if j.is_free() && c.is_free() => {
                    Some(a.clone())
                }
                (Prim::Add, [a @ Carry::Leaf(Some(_)), c] | [c, a @ Carry::Leaf(Some(_))])
                    if *ty == Type::Double && c.is_free() =>
                {
                    Some(a.clone())
                }
                _ => None,
            }
        }
        Rhs::Array(_) | Rhs::While { .. } => (!uses_carried(rhs, env)).then_some(FREE),
        Rhs::If(c, t, e) => {
            if !carry(env, c).is_free() {
                return None;
            }
            let t = walk(t, env)?;
            let e = walk(e, env)?;
            (t == e).then_some(t)
        }
        Rhs::Loop {
            kind,
            n,
            state,
            body,
            ..
        } => {
            if !carry(env, n).is_free() {
                return None;
            }
            match (kind, state) {
                (LoopKind::IFold, Some((z, s, _))) => {
                    let cz = carry(env, z);
                    env.insert(s.clone(), cz.clone());
                    let cb = walk(body, env)?;
                    (cb == cz).then_some(cz)
                }
                _ => {
                    // A build's elements and a scan's states are stored:
                    // nothing carried may reach them.
                    if let Some((z, _, _)) = state
                        && !carry(env, z).is_free()
                    {
                        return None;
                    }
                    walk(body, env)?.is_free().then_some(FREE)
                }
            }
        }
    }
}

/// The counts of the deepest nest of loops in `body` whose counts are
/// literals or bound outside the loop (`free`), outermost first, at most
/// [`WORK_DEPTH`] of them (Note [Parallel loops], cost).
fn work(body: &Block, free: &[(Name, Type)]) -> Vec<Atom> {
    let invariant = |a: &Atom| a.var().is_none_or(|x| free.iter().any(|(y, _)| y == x));
    let mut best: Vec<Atom> = Vec::new();
    for b in &body.binds {
        if let Rhs::Loop { n, body, .. } = &b.rhs
            && invariant(n)
        {
            let mut nest = vec![n.clone()];
            if nest.len() < WORK_DEPTH {
                nest.extend(work(body, free).into_iter().take(WORK_DEPTH - 1));
            }
            if nest.len() > best.len() {
                best = nest;
            }
        }
    }
    best
}

fn has_loop(rhs: &Rhs) -> bool {
    match rhs {
        Rhs::Loop { .. } | Rhs::While { .. } => true,
        Rhs::If(_, t, e) => t.binds.iter().chain(&e.binds).any(|b| has_loop(&b.rhs)),
        Rhs::Prim(..) | Rhs::Array(_) => false,
    }
}

/// The variables `rhs` reads that it does not bind, in order of first
/// use, with their types.
fn free_vars(rhs: &Rhs) -> Vec<(Name, Type)> {
    let mut bound: HashSet<Name> = HashSet::default();
    let mut copy = rhs.clone();
    copy.for_each_binder_mut(&mut |x| {
        bound.insert(x.clone());
    });
    let mut seen: HashSet<Name> = HashSet::default();
    let mut out = Vec::new();
    rhs.for_each_atom(&mut |a| {
        if let Atom::Var(x, t) = a
            && !bound.contains(x)
            && seen.insert(x.clone())
        {
            out.push((x.clone(), t.clone()));
        }
    });
    out
}
