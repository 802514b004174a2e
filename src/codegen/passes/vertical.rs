//! A `build` read element by element by the next loop is computed in that
//! loop (Note [Vertical fusion]).
//!
//! # Note [Vertical fusion]
//!
//! The tangent-only wrapper of a Jacobian builds every dual column and
//! then, in a second loop, the tangents of each:
//!
//! ```text
//! d = build n (fun r -> B)          -- column r, an array of dual numbers
//! t = build (length d) (fun c -> let col = d[c] in build (length col) (fun k -> snd col[k]))
//! ```
//!
//! Built literally, every column of `d` is alive until the end (35 MB of
//! dual numbers for bundle adjustment's 10⁵ points, twice the Jacobian).
//! Pull-array fusion (Note [Fusion]) does not apply: `B` is a loop nest,
//! not a simple body. Here, before hoisting, such a producer is merged
//! into its consumer: the read `col = d[c]` becomes `B` with `r := c`, and
//! `col` its result. Each column is then built in the iteration that
//! reads it, where nothing keeps it, so it lives on a scratch stack (Note
//! [Scratch arrays]) and the memory of one column serves them all.
//!
//! When. `d = build n (fun r -> B)` and a later binding of the same block
//! `t`, a `build` or `ifold` over the index `c`, with
//!
//! 1. `d` used only by `length d` (anywhere) and by exactly one read
//!    `col = d[c]`, at the top level of `t`'s body, at `t`'s own index;
//! 2. `t`'s size `n` itself or a `length d`;
//! 3. no binding between `d` and `t`, and none of `t`'s body but the read,
//!    able to be ⊥.
//!
//! An `ifold` consumer reports a negative size as E-IFold-Bot where the
//! producer's was E-Build-Bot, so it is merged only when `n` cannot be
//! negative: a literal ≥ 0 or a name bound to a `length` (NNMF's
//! `vectorSum (build (length v) …)` in each row: no row buffer, one pass;
//! objective at n = 10³, best of A/B rounds, 11.6 → 7.7 ms).
//!
//! Exactness. E-Build evaluates `B` for r = 0, 1, … first, then `t` runs;
//! merged, iteration c runs `t`'s bindings before the read, then `B` at
//! r = c, then the rest. By 3 nothing but `B` can fail, so the first ⊥ is
//! the first failing `B(r)`, with its code and details, in both; `n < 0` is
//! E-Build-Bot with the same details at `t` (whose size is `n`, by 2),
//! and so is an array too large (E-Limit): the lowering reports `t`'s
//! own failures at `d`'s site, where the evaluator reports them (Note
//! [Failure sites]; the first producer merged into `t`, the first built). Each
//! column is computed once (1: one read per iteration), so nothing is
//! recomputed, and every value is the same.
//!
//! Merged, the consumer's body holds the producer's, and is searched
//! again: the wrapper's column is a `build` flattening the points'
//! projections, which the consumer's inner loop reads once per element,
//! so it is merged too and never built (BA at N = 10⁵, A/B: `fwd`
//! 90.4–91.6 → 82.1–83.0 ms and 31.0 → 28.0 MiB, `fwd-opt` 79.1–82.2 →
//! 76.2–77.1 ms and 25.5 → 22.4 MiB).

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::hoist::prim_can_fail;
use crate::anf::{Atom, Binding, Block, LoopKind, Rhs};
use crate::ir::{Lit, Name, Prim, Type};

/// Merges every producer of `b` (nested blocks first) into its consumer
/// (Note [Vertical fusion]). Returns, per consumer, the first producer
/// merged into it: the consumer's size is then checked at the producer's
/// site (Note [Vertical fusion], exactness).
pub fn fuse(b: &mut Block) -> HashMap<Name, Name> {
    let mut lengths = HashSet::default();
    length_names(b, &mut lengths);
    let mut merged = HashMap::default();
    fuse_with(b, &lengths, &mut merged);
    merged
}

/// [`fuse`], knowing the names bound to a `length` (never negative).
fn fuse_with(b: &mut Block, lengths: &HashSet<Name>, merged: &mut HashMap<Name, Name>) {
    for bind in &mut b.binds {
        match &mut bind.rhs {
            Rhs::If(_, t, e) => {
                fuse_with(t, lengths, merged);
                fuse_with(e, lengths, merged);
            }
            Rhs::Loop { body, .. } => fuse_with(body, lengths, merged),
            Rhs::While { cond, step, .. } => {
                fuse_with(cond, lengths, merged);
                fuse_with(step, lengths, merged);
            }
            Rhs::Prim(..) | Rhs::Array(_) => {}
        }
    }
    while let Some(m) = find(b, lengths) {
        let consumer = b.binds[m.t].name.clone();
        merged
            .entry(consumer.clone())
            .or_insert_with(|| b.binds[m.d].name.clone());
        merge(b, m);
        // The consumer's body now holds the producer's: a producer there
        // may feed the loop that read the column (the Jacobian wrapper's
        // flattened column, then its tangents).
        // Its projections of the producer's pairs are forwarded first: a
        // tape's tuple that held a column the body also reads (reverse
        // mode's `(qy, (tape, false))`) no longer uses it once the tuple's
        // projection is its component.
        if let Some(Rhs::Loop { body, .. }) = b
            .binds
            .iter_mut()
            .find(|x| x.name == consumer)
            .map(|x| &mut x.rhs)
        {
            super::fuse::forward_projections(body);
            fuse_with(body, lengths, merged);
        }
    }
}

/// Every name bound to a `length` in `b`, nested blocks included (names
/// are unique, so each holds a size ≥ 0 wherever it is in scope).
fn length_names(b: &Block, out: &mut HashSet<Name>) {
    for bind in &b.binds {
        match &bind.rhs {
            Rhs::Prim(Prim::Length, _) => {
                out.insert(bind.name.clone());
            }
            Rhs::If(_, t, e) => {
                length_names(t, out);
                length_names(e, out);
            }
            Rhs::Loop { body, .. } => length_names(body, out),
            Rhs::While { cond, step, .. } => {
                length_names(cond, out);
                length_names(step, out);
            }
            Rhs::Prim(..) | Rhs::Array(_) => {}
        }
    }
}

/// A producer `binds[d]` and its consumer `binds[t]`.
struct Merge {
    d: usize,
    t: usize,
    /// The variables bound to `length d`.
    lengths: HashSet<Name>,
}

fn find(b: &Block, lengths: &HashSet<Name>) -> Option<Merge> {
    (0..b.binds.len()).find_map(|d| candidate(b, d, lengths))
}

fn candidate(b: &Block, di: usize, lengths_known: &HashSet<Name>) -> Option<Merge> {
    let bind = &b.binds[di];
    let Rhs::Loop {
        kind: LoopKind::Build,
        n,
        state: None,
        ..
    } = &bind.rhs
    else {
        return None;
    };
    let d = &bind.name;
    if b.result.var() == Some(d) {
        return None;
    }
    // Condition 1: every use of `d`.
    let mut lengths = HashSet::default();
    let (mut reads, mut other) = (0, false);
    uses(b, d, &mut lengths, &mut reads, &mut other);
    if other || reads != 1 {
        return None;
    }
    let (ti, t) = b
        .binds
        .iter()
        .enumerate()
        .skip(di + 1)
        .find(|(_, t)| reads_at_index(t, d))?;
    let Rhs::Loop {
        kind,
        n: m,
        index: c,
        body,
        ..
    } = &t.rhs
    else {
        return None;
    };
    // An `ifold` reports a negative size as E-IFold-Bot, not E-Build-Bot.
    // A literal ≥ 0 or a `length` cannot be E-Build-Bot.
    let nonnegative = match n {
        Atom::Lit(Lit::Int(v), _) => *v >= 0,
        Atom::Var(x, _) => lengths_known.contains(x),
        Atom::Lit(..) => false,
    };
    if !(*kind == LoopKind::Build || *kind == LoopKind::IFold && nonnegative) {
        return None;
    }
    // Condition 2.
    let same_size = match (m, n) {
        (Atom::Var(x, _), _) if lengths.contains(x) => true,
        (Atom::Var(x, _), Atom::Var(y, _)) => x == y,
        (Atom::Lit(Lit::Int(x), _), Atom::Lit(Lit::Int(y), _)) => x == y,
        _ => false,
    };
    // Condition 3.
    let between = b.binds[di + 1..ti]
        .iter()
        .all(|x| total(&x.rhs, &Env::default()));
    let inside = total_block(body, &Env::default(), Some((d, c)));
    (same_size && between && inside).then_some(Merge {
        d: di,
        t: ti,
        lengths,
    })
}

/// Every use of `d` in `b`: the names bound to `length d`, how many reads
/// `y = d[i]`, and whether there is any other use.
fn uses(b: &Block, d: &Name, lengths: &mut HashSet<Name>, reads: &mut usize, other: &mut bool) {
    for bind in &b.binds {
        match &bind.rhs {
            Rhs::Prim(Prim::Length, args) if args[0].var() == Some(d) => {
                lengths.insert(bind.name.clone());
            }
            Rhs::Prim(Prim::Get, args) if args[0].var() == Some(d) => *reads += 1,
            Rhs::Prim(_, args) | Rhs::Array(args) => {
                *other |= args.iter().any(|a| a.var() == Some(d));
            }
            Rhs::If(c, t, e) => {
                *other |= c.var() == Some(d);
                uses(t, d, lengths, reads, other);
                uses(e, d, lengths, reads, other);
            }
            Rhs::Loop { n, state, body, .. } => {
                *other |= n.var() == Some(d);
                *other |= state.as_ref().is_some_and(|(z, _, _)| z.var() == Some(d));
                uses(body, d, lengths, reads, other);
            }
            // Any use in a `while` is not a consumer's read.
            w @ Rhs::While { .. } => w.for_each_atom(&mut |a| *other |= a.var() == Some(d)),
        }
    }
    *other |= b.result.var() == Some(d);
}

/// Whether `t` is a loop whose body reads `d` at the loop's index, at its
/// top level.
fn reads_at_index(t: &Binding, d: &Name) -> bool {
    match &t.rhs {
        Rhs::Loop { index, body, .. } => body.binds.iter().any(|x| is_read(&x.rhs, d, index)),
        _ => false,
    }
}

fn is_read(rhs: &Rhs, d: &Name, i: &Name) -> bool {
    matches!(rhs, Rhs::Prim(Prim::Get, args) if args[0].var() == Some(d) && args[1].var() == Some(i))
}

/// What is known where a binding is evaluated: the names bound to
/// `length a` (↦ a), and the (index, array) of the enclosing loops over
/// `0 .. length array`, whose reads are in bounds.
#[derive(Default, Clone)]
struct Env {
    lengths: HashMap<Name, Name>,
    safe: Vec<(Name, Name)>,
}

/// Whether evaluating `rhs` can never be ⊥ (spec/semantics.md: E-Arith-Bot,
/// E-Math-Bot, E-Get-Bot, E-Build-Bot, E-IFold-Bot, E-IScan-Bot,
/// E-Accum-Bot): primitives as `hoist::prim_can_fail` judges them, but
/// reads at the index of a loop over the array's length, which are in
/// bounds, and loops only of a literal or `length` size. (Finer than
/// hoisting's judgement, which counts every loop of a variable size.)
fn total(rhs: &Rhs, env: &Env) -> bool {
    match rhs {
        Rhs::Prim(Prim::Get, args) => match (args[0].var(), args[1].var()) {
            (Some(a), Some(i)) => env.safe.iter().any(|(j, b)| j == i && b == a),
            _ => false,
        },
        Rhs::Prim(op, args) => !prim_can_fail(*op, args),
        Rhs::Array(_) => true,
        Rhs::If(_, t, e) => total_block(t, env, None) && total_block(e, env, None),
        Rhs::Loop { n, index, body, .. } => {
            let over = match n {
                Atom::Lit(Lit::Int(v), _) => (*v >= 0).then_some(None),
                Atom::Var(x, _) => env.lengths.get(x).map(Some),
                _ => None,
            };
            let Some(over) = over else {
                return false;
            };
            let mut inner = env.clone();
            if let Some(a) = over {
                inner.safe.push((index.clone(), a.clone()));
            }
            total_block(body, &inner, None)
        }
        // It may not end (E-Fuel).
        Rhs::While { .. } => false,
    }
}

/// Whether no binding of `b` can be ⊥, but the read `skip` = (d, c),
/// `d[c]`, if given.
fn total_block(b: &Block, env: &Env, skip: Option<(&Name, &Name)>) -> bool {
    let mut env = env.clone();
    b.binds.iter().all(|x| {
        if let Rhs::Prim(Prim::Length, args) = &x.rhs
            && let Some(a) = args[0].var()
        {
            env.lengths.insert(x.name.clone(), a.clone());
        }
        skip.is_some_and(|(d, c)| is_read(&x.rhs, d, c)) || total(&x.rhs, &env)
    })
}

fn merge(b: &mut Block, m: Merge) {
    let producer = b.binds.remove(m.d);
    let Rhs::Loop {
        n,
        index: r,
        body: mut produce,
        ..
    } = producer.rhs
    else {
        return;
    };
    let t = m.t - 1;
    let Rhs::Loop { index: c, body, .. } = &mut b.binds[t].rhs else {
        return;
    };
    let c_atom = Atom::Var(c.clone(), Type::Index);
    substitute(&mut produce, &HashMap::from_iter([(r, c_atom)]));
    let Some(at) = body
        .binds
        .iter()
        .position(|x| is_read(&x.rhs, &producer.name, c))
    else {
        return;
    };
    let col = body.binds.remove(at).name;
    let result = produce.result.clone();
    body.binds.splice(at..at, produce.binds);
    substitute(body, &HashMap::from_iter([(col, result)]));
    // `length d` is `n`.
    let sizes: HashMap<Name, Atom> = m.lengths.into_iter().map(|x| (x, n.clone())).collect();
    drop_bindings(b, &sizes);
    substitute(b, &sizes);
}

/// Replaces the uses of `map`'s names in `b` by their atoms.
fn substitute(b: &mut Block, map: &HashMap<Name, Atom>) {
    b.for_each_atom_mut(&mut |a| {
        if let Atom::Var(x, _) = a
            && let Some(y) = map.get(x)
        {
            *a = y.clone();
        }
    });
}

/// Removes the bindings of `map`'s names from `b` and its nested blocks.
fn drop_bindings(b: &mut Block, map: &HashMap<Name, Atom>) {
    b.binds.retain(|x| !map.contains_key(&x.name));
    for bind in &mut b.binds {
        match &mut bind.rhs {
            Rhs::If(_, t, e) => {
                drop_bindings(t, map);
                drop_bindings(e, map);
            }
            Rhs::Loop { body, .. } => drop_bindings(body, map),
            Rhs::While { cond, step, .. } => {
                drop_bindings(cond, map);
                drop_bindings(step, map);
            }
            Rhs::Prim(..) | Rhs::Array(_) => {}
        }
    }
}
