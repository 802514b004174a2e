//! Which arrays the lowering never builds (Note [Fusion]).
//!
//! # Note [Fusion]
//!
//! The prelude is written with pull arrays: `vectorDot v1 v2` is
//! `vectorSum (build n (fun i -> v1[i] * v2[i]))`, `vectorSlice v s e` is
//! `build (e - s + 1) (fun i -> v[i + s])`. Built literally, each is a
//! buffer in the arena, written once and read once. Here, before lowering,
//! a binding `x = build n (fun i -> body)` is *fused* when
//!
//! 1. every use of `x` is `x[j]` or `length x` (it is never passed,
//!    stored, returned or concatenated);
//! 2. `body` is *simple*: no loop, no array literal, and every primitive
//!    total (Double `+ - *`, negation, `sin`, `cos`, `exp`, comparisons,
//!    `not`, `toDouble`, pairs and projections, `length`) except reads
//!    `a[k]` of an array `a` bound outside the body, at an index `k` that
//!    is the loop index `i`, a value bound outside the body (`c`), or
//!    `i + c` (an Index `+` used only as such an index); a conditional
//!    only if neither branch reads or can fail (forward mode's one-hot
//!    seed `(p[i], if i = r then 1.0 else 0.0)`), so that which reads
//!    run does not depend on a test;
//! 3. recomputing it is cheap: no read of `x` is inside a loop (relative
//!    to `x`) at an index other than that loop's (it would read the same
//!    element at every iteration), and its cost (one per operation, 20
//!    per `sin`, `cos`, `exp`, a fused array's cost per read of it) is at
//!    most [`CHEAP`], or at most [`AFFORDABLE`] when every read of `x` is
//!    at most one loop deeper than `x` and indexed by that loop's index
//!    (each element read about once), and there are at most [`READS`] of
//!    them, and the reads beyond the first repeat at most [`RECOMPUTED`]
//!    of work (GMM's batched gradient read each `exp` of its log-sum-exp
//!    tape twice, fused: built, its strict gradient at d2_K200 took
//!    5.2 ms instead of 6.2, `adbench gmm --batched --repeat 100`).
//!
//! Then no buffer is allocated: `length x` is `n`, and `x[j]` is the
//! bounds test of E-Get-Bot against `n` followed by `body` with `i := j`.
//!
//! Exactness. E-Build evaluates every element at the binding, so a ⊥ in an
//! element nobody reads is still ⊥. Condition 2 makes every element
//! defined exactly when a few tests hold, which the lowering emits at the
//! binding (`guard`): `n ≥ 0`, and when `n > 0`, for each read `a[i]`
//! `n ≤ length a`; for `a[c]` `0 ≤ c < length a`; for `a[i + c]`
//! `n ≤ length a`, `0 ≤ c` and `c ≤ length a − n` (so `i + c` cannot
//! overflow). When they hold, every element is defined and fusion changes
//! nothing observable; when one fails, the lowering builds the array as
//! usual, which then stops with the evaluator's ⊥, its code and details
//! (the first failing element in order, as E-Build). So the reads inside
//! a fused body need no bounds test of their own.
//!
//! An array literal `x = [a₀, …, aₘ₋₁]` is fused when every use is
//! `length x` or `x[k]` with a literal `0 ≤ k < m`: the read is the atom.
//!
//! ## Through tuples
//!
//! Before planning, projections of pairs are forwarded
//! ([`forward_projections`]): after `x = (a, b)`, `fst x` is `a`, and
//! pairs, projections and literals nobody uses are dropped (none can be
//! ⊥). Reverse mode returns every cotangent as `(adj, false)` and reads it
//! back with `fst`; forwarded, the list is seen where `accum` consumes it.
//!
//! ## Accumulations
//!
//! `c = concat parts`, when every use of `c` is the contributions of an
//! `accum`, is never joined: the accumulation reads the parts in place, in
//! order (E-Concat then E-Accum add the same contributions in the same
//! order; `concat` cannot be ⊥). When `parts` is itself a `build` used
//! only so, with a simple body (condition 2; its result may be an array
//! literal) and contributions without arrays (one pass reads each part
//! once), no part is built either: the accumulation computes each part in
//! its loop, and a literal part's items are contributions directly.
//! Reverse mode's `accum 0 n (concat (build m (fun i -> [(i, ct)])))`, a
//! scatter-add, then allocates only its result. The parts' guard is at
//! their binding, as for any fused `build`. Likewise a `build` used only
//! as the contributions of one `accum`, whose elements hold no arrays,
//! with a simple body: each pair is computed where it is added (reverse
//! mode's `accum 0 n (build m (fun i -> (i, ct)))`, the bare pairs of a
//! map-like loop, R-Build and R-IFold-Linear).
//!
//! ## Small arrays
//!
//! A `build` of a literal size of one to [`UNROLL`] elements that is
//! used only by `x[k]` and `length x`, and is not fused as above (its body
//! is not simple, or recomputing it at every read costs too much), is
//! *unrolled* (as is an array literal that small read at a variable
//! index: its items are the elements): the lowering evaluates its body
//! for i = 0, 1, … at the binding, in order — E-Build's order, so a ⊥ is
//! the first failing element's — and keeps the elements in registers. `length x` is the
//! literal; `x[k]` is the element at a literal `k`, or E-Get-Bot's test
//! against the literal length and a chain of selects. Forward mode's
//! 3-vectors of dual numbers (bundle adjustment's rotation, cross
//! product, point) then take no memory.
//!
//! What is not fused: reverse mode's tapes keep every array they bind
//! (condition 1), and a `build` whose elements are loops (condition 2).

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::hoist::prim_can_fail;
use crate::anf::{Atom, Block, LoopKind, Normal, Rhs};
use crate::ir::{Lit, Name, Prim, Type};

/// Cost at or below which a body is recomputed at every read.
pub const CHEAP: usize = 4;
/// Cost at or below which a body is recomputed when each element is read
/// about once.
pub const AFFORDABLE: usize = 64;
/// The most reads of an array fused under [`AFFORDABLE`].
pub const READS: usize = 4;
/// The most work, in cost units, that reads beyond the first may repeat
/// for an array fused under [`AFFORDABLE`]: a body with an `exp` read
/// twice (reverse mode's tape of a log-sum-exp, read by the forward sum
/// and by the reverse sweep) is built once instead.
pub const RECOMPUTED: usize = 16;

/// The index of a read inside a fused body, relative to its loop index.
#[derive(Clone, Debug)]
pub enum Index {
    /// `a[i]`.
    Loop,
    /// `a[c]`, `c` bound outside the body (or a literal).
    Const(Atom),
    /// `a[i + c]`.
    Offset(Atom),
}

/// What the guard of a fused `build` tests: one per read in its body.
#[derive(Clone, Debug)]
pub struct Read {
    pub array: Name,
    pub index: Index,
}

#[derive(Clone, Debug)]
pub enum Fused {
    Build {
        reads: Vec<Read>,
    },
    Literal,
    /// A `concat` read only by `accum`s.
    Concat,
    /// A `build` read only as the parts of a fused `concat`: its elements
    /// are computed in the accumulation (a literal result is not built).
    Parts {
        reads: Vec<Read>,
    },
    /// A `build` read only as the contributions of one `accum`: each
    /// element (a pair without arrays) is computed where it is added.
    Records {
        reads: Vec<Read>,
    },
    /// A `build` of a literal size of at most [`UNROLL`] elements, read
    /// only by `get` and `length`: its elements are computed at the
    /// binding, in order, into registers, never stored.
    Unrolled,
}

/// The most elements of an unrolled `build` (Note [Fusion], "Small
/// arrays").
pub const UNROLL: i64 = 4;

/// The fused bindings, by name.
#[derive(Default, Debug)]
pub struct Plan {
    pub fused: HashMap<Name, Fused>,
}

/// One use of a variable.
#[derive(Clone)]
enum Use {
    /// The array of `x[k]`: loops between the binding and the read, whether
    /// `k` is the innermost enclosing loop's index, and `k` if a literal.
    Read {
        depth: usize,
        by_loop_index: bool,
        literal: Option<i64>,
    },
    Length,
    /// The parts of `c = concat x`.
    Concat(Name),
    /// The contributions of an `accum`.
    Accum,
    Other,
}

#[derive(Default)]
struct Walk {
    uses: HashMap<Name, Vec<Use>>,
    /// Loop depth of every binding.
    depth_of: HashMap<Name, usize>,
    /// Candidates in binding order: name, and the binding's index path.
    candidates: Vec<Name>,
    bodies: HashMap<Name, Candidate>,
}

enum Candidate {
    Build {
        index: Name,
        body: Block,
        /// Whether its elements hold arrays.
        arrays: bool,
        /// Its size, when a literal.
        size: Option<i64>,
    },
    Literal {
        len: usize,
    },
    /// `concat x`; whether its elements hold arrays.
    Concat {
        arrays: bool,
    },
}

impl Walk {
    fn atom(&mut self, a: &Atom) {
        if let Atom::Var(x, _) = a {
            self.uses.entry(x.clone()).or_default().push(Use::Other);
        }
    }

    fn block(&mut self, b: &Block, depth: usize, loops: &mut Vec<Name>) {
        for bind in &b.binds {
            self.depth_of.insert(bind.name.clone(), depth);
            match &bind.rhs {
                Rhs::Prim(Prim::Get, args) if args.len() == 2 => {
                    if let Atom::Var(x, _) = &args[0] {
                        let bound = self.depth_of.get(x).copied().unwrap_or(0);
                        let by_loop_index =
                            args[1].var().is_some() && args[1].var() == loops.last();
                        let literal = match &args[1] {
                            Atom::Lit(Lit::Int(k), _) => Some(*k),
                            _ => None,
                        };
                        self.uses.entry(x.clone()).or_default().push(Use::Read {
                            depth: depth.saturating_sub(bound),
                            by_loop_index,
                            literal,
                        });
                    } else {
                        self.atom(&args[0]);
                    }
                    self.atom(&args[1]);
                }
                Rhs::Prim(Prim::Length, args) if args.len() == 1 => match &args[0] {
                    Atom::Var(x, _) => self.uses.entry(x.clone()).or_default().push(Use::Length),
                    a => self.atom(a),
                },
                Rhs::Prim(Prim::Concat, args) if args.len() == 1 => {
                    match &args[0] {
                        Atom::Var(x, _) => self
                            .uses
                            .entry(x.clone())
                            .or_default()
                            .push(Use::Concat(bind.name.clone())),
                        a => self.atom(a),
                    }
                    let arrays = match &bind.ty {
                        Type::Array(e) => e.has_array(),
                        _ => true,
                    };
                    self.candidates.push(bind.name.clone());
                    self.bodies
                        .insert(bind.name.clone(), Candidate::Concat { arrays });
                }
                Rhs::Prim(Prim::Accum, args) if args.len() == 3 => {
                    self.atom(&args[0]);
                    self.atom(&args[1]);
                    match &args[2] {
                        Atom::Var(x, _) => self.uses.entry(x.clone()).or_default().push(Use::Accum),
                        a => self.atom(a),
                    }
                }
                Rhs::Prim(_, args) => args.iter().for_each(|a| self.atom(a)),
                Rhs::Array(items) => {
                    items.iter().for_each(|a| self.atom(a));
                    self.candidates.push(bind.name.clone());
                    self.bodies
                        .insert(bind.name.clone(), Candidate::Literal { len: items.len() });
                }
                Rhs::If(c, t, e) => {
                    self.atom(c);
                    self.block(t, depth, loops);
                    self.block(e, depth, loops);
                }
                // A `while`'s blocks run once per iteration, at a depth of
                // their own (an enclosing loop's index is not theirs).
                Rhs::While {
                    init,
                    state,
                    cond,
                    step,
                    ..
                } => {
                    self.atom(init);
                    self.depth_of.insert(state.clone(), depth + 1);
                    loops.push(state.clone());
                    self.block(cond, depth + 1, loops);
                    self.block(step, depth + 1, loops);
                    loops.pop();
                }
                Rhs::Loop {
                    kind,
                    n,
                    state,
                    index,
                    body,
                } => {
                    self.atom(n);
                    if let Some((z, s, _)) = state {
                        self.atom(z);
                        self.depth_of.insert(s.clone(), depth + 1);
                    }
                    self.depth_of.insert(index.clone(), depth + 1);
                    loops.push(index.clone());
                    self.block(body, depth + 1, loops);
                    loops.pop();
                    if *kind == LoopKind::Build && state.is_none() {
                        self.candidates.push(bind.name.clone());
                        self.bodies.insert(
                            bind.name.clone(),
                            Candidate::Build {
                                index: index.clone(),
                                body: body.clone(),
                                arrays: match &bind.ty {
                                    Type::Array(e) => e.has_array(),
                                    _ => true,
                                },
                                size: match n {
                                    Atom::Lit(Lit::Int(c), _) => Some(*c),
                                    _ => None,
                                },
                            },
                        );
                    }
                }
            }
        }
        self.atom(&b.result);
    }
}

/// Decides which bindings of `normal` are fused (Note [Fusion]); the
/// arrays in `built` are not (a parallel fold's chunks are passed them,
/// Note [Parallel loops]).
pub fn plan(normal: &Normal, built: &HashSet<Name>) -> Plan {
    let mut w = Walk::default();
    for (p, _) in &normal.params {
        w.depth_of.insert(p.clone(), 0);
    }
    w.block(&normal.body, 0, &mut Vec::new());
    let mut plan = Plan::default();
    // Costs of the fused builds decided so far (candidates come in binding
    // order, so a body's reads of earlier arrays are already decided).
    let mut costs: HashMap<Name, usize> = HashMap::default();
    let no_uses = Vec::new();
    // A `concat` whose only consumers are `accum`s is never joined: the
    // accumulation reads its parts (Note [Fusion], "accumulations").
    let mut concats: HashMap<Name, bool> = HashMap::default();
    w.candidates.retain(|x| !built.contains(x));
    for x in &w.candidates {
        if let Candidate::Concat { arrays } = &w.bodies[x]
            && w.uses
                .get(x)
                .unwrap_or(&no_uses)
                .iter()
                .all(|u| matches!(u, Use::Accum))
        {
            concats.insert(x.clone(), *arrays);
            plan.fused.insert(x.clone(), Fused::Concat);
        }
    }
    for x in &w.candidates {
        let uses = w.uses.get(x).unwrap_or(&no_uses);
        match &w.bodies[x] {
            Candidate::Concat { .. } => {}
            Candidate::Literal { len } => {
                let ok = uses.iter().all(|u| match u {
                    Use::Length => true,
                    Use::Read { literal, .. } => {
                        literal.is_some_and(|k| 0 <= k && (k as usize) < *len)
                    }
                    Use::Concat(_) | Use::Accum | Use::Other => false,
                });
                if ok {
                    plan.fused.insert(x.clone(), Fused::Literal);
                    costs.insert(x.clone(), 0);
                } else if (1..=UNROLL as usize).contains(len)
                    && uses
                        .iter()
                        .all(|u| matches!(u, Use::Read { .. } | Use::Length))
                {
                    // Read at a variable index: its items, by selects.
                    plan.fused.insert(x.clone(), Fused::Unrolled);
                }
            }
            Candidate::Build {
                index,
                body,
                arrays,
                size,
            } => {
                // The contributions of one `accum`, without arrays (its one
                // pass reads each once): any simple body, computed there.
                if let [Use::Accum] = uses.as_slice()
                    && !*arrays
                {
                    if let Some((reads, _)) = simple(body, index, &costs, false) {
                        plan.fused.insert(x.clone(), Fused::Records { reads });
                    }
                    continue;
                }
                // The parts of accumulated `concat`s of elements without
                // arrays (one pass reads each element once): any simple
                // body, whose result may be an array literal.
                if !uses.is_empty()
                    && uses
                        .iter()
                        .all(|u| matches!(u, Use::Concat(c) if concats.get(c) == Some(&false)))
                {
                    if let Some((reads, _)) = simple(body, index, &costs, true) {
                        plan.fused.insert(x.clone(), Fused::Parts { reads });
                    }
                    continue;
                }
                if uses
                    .iter()
                    .any(|u| matches!(u, Use::Other | Use::Accum | Use::Concat(_)))
                {
                    continue;
                }
                // Small arrays: unrolled at the binding, whatever the body,
                // unless recomputing is cheaper still (below).
                let unroll = size.is_some_and(|c| (1..=UNROLL).contains(&c));
                let Some((reads, cost)) = simple(body, index, &costs, false) else {
                    if unroll {
                        plan.fused.insert(x.clone(), Fused::Unrolled);
                    }
                    continue;
                };
                let n_reads = uses
                    .iter()
                    .filter(|u| matches!(u, Use::Read { .. }))
                    .count();
                let once = n_reads <= READS
                    && cost * n_reads.saturating_sub(1) <= RECOMPUTED
                    && uses.iter().all(|u| match u {
                        Use::Read {
                            depth,
                            by_loop_index,
                            ..
                        } => *depth == 0 || (*depth == 1 && *by_loop_index),
                        _ => true,
                    });
                // A read inside a loop at an index not that loop's (a
                // constant, an outer index) reads the same element at every
                // iteration: built once, it is cheaper than recomputed.
                let invariant = uses.iter().any(|u| {
                    matches!(u, Use::Read { depth, by_loop_index, .. } if *depth > 0 && !*by_loop_index)
                });
                if !invariant && (cost <= CHEAP || (cost <= AFFORDABLE && once)) {
                    plan.fused.insert(x.clone(), Fused::Build { reads });
                    costs.insert(x.clone(), cost);
                } else if unroll {
                    plan.fused.insert(x.clone(), Fused::Unrolled);
                }
            }
        }
    }
    plan
}

/// Condition 2 of Note [Fusion]: the reads of a simple body and its cost.
fn simple(
    body: &Block,
    index: &Name,
    costs: &HashMap<Name, usize>,
    literal_result: bool,
) -> Option<(Vec<Read>, usize)> {
    let local: Vec<&Name> = body.binds.iter().map(|b| &b.name).collect();
    let outside = |a: &Atom| match a {
        Atom::Var(x, _) => x != index && !local.contains(&x),
        Atom::Lit(..) => true,
    };
    // Index `+`s of the form i + c, by name, with c.
    let mut offsets: HashMap<&Name, Atom> = HashMap::default();
    let mut reads = Vec::new();
    let mut cost = 0usize;
    for bind in &body.binds {
        if let Rhs::If(_, t, e) = &bind.rhs {
            // Only what cannot fail in either branch (E-If runs one).
            cost += 1 + total_cost(t)?.max(total_cost(e)?);
            continue;
        }
        if let Rhs::Array(_) = &bind.rhs
            && literal_result
            && body.result.var() == Some(&bind.name)
        {
            continue;
        }
        let Rhs::Prim(op, args) = &bind.rhs else {
            return None;
        };
        if let Some(c) = total_op_cost(*op, args) {
            cost += c;
            continue;
        }
        match op {
            Prim::Add if *args[0].ty() == Type::Index => {
                let is_i = |a: &Atom| a.var() == Some(index);
                let c = match (&args[0], &args[1]) {
                    (i, c) if is_i(i) && outside(c) => c.clone(),
                    (c, i) if is_i(i) && outside(c) => c.clone(),
                    _ => return None,
                };
                offsets.insert(&bind.name, c);
                cost += 1;
            }
            Prim::Get => {
                let Atom::Var(a, _) = &args[0] else {
                    return None;
                };
                if !outside(&args[0]) {
                    return None;
                }
                let k = &args[1];
                let idx = if k.var() == Some(index) {
                    Index::Loop
                } else if outside(k) {
                    Index::Const(k.clone())
                } else if let Some(c) = k.var().and_then(|v| offsets.get(v)) {
                    Index::Offset(c.clone())
                } else {
                    return None;
                };
                // A fused array's read recomputes its element.
                cost += 1 + costs.get(a).copied().unwrap_or(0);
                reads.push(Read {
                    array: a.clone(),
                    index: idx,
                });
            }
            _ => return None,
        }
    }
    // An `i + c` is total only where the guard covers it: as the index of
    // a read. Any other use (an operand, the result) is not simple.
    for name in offsets.keys() {
        let used_elsewhere = body.binds.iter().any(|b| match &b.rhs {
            Rhs::Prim(Prim::Get, args) => args[0].var() == Some(*name),
            Rhs::Prim(_, args) => args.iter().any(|a| a.var() == Some(*name)),
            Rhs::If(c, t, e) => c.var() == Some(*name) || mentions(t, name) || mentions(e, name),
            Rhs::Array(items) => items.iter().any(|a| a.var() == Some(*name)),
            Rhs::Loop { .. } | Rhs::While { .. } => true,
        }) || body.result.var() == Some(*name);
        if used_elsewhere {
            return None;
        }
    }
    Some((reads, cost))
}

/// The cost of a block of total primitives and conditionals only (no
/// read, no Index arithmetic), or `None`.
fn total_cost(b: &Block) -> Option<usize> {
    let mut cost = 0;
    for bind in &b.binds {
        cost += match &bind.rhs {
            Rhs::If(_, t, e) => 1 + total_cost(t)?.max(total_cost(e)?),
            Rhs::Prim(op, args) => total_op_cost(*op, args)?,
            _ => return None,
        };
    }
    Some(cost)
}

/// The cost of a primitive that cannot fail (`hoist::prim_can_fail`:
/// Double `+ - *` and negation, `sin`, `cos`, `exp`, comparisons, `not`,
/// `toDouble`, pairs, projections, `length`), or `None` for one that can,
/// that reads, or that allocates (`concat`).
fn total_op_cost(op: Prim, args: &[Atom]) -> Option<usize> {
    if prim_can_fail(op, args) {
        return None;
    }
    Some(match op {
        Prim::Add | Prim::Sub | Prim::Mul | Prim::Neg => 1,
        Prim::Sin | Prim::Cos | Prim::Exp => 20,
        Prim::Lt | Prim::Gt | Prim::Le | Prim::Ge | Prim::Eq | Prim::Ne | Prim::Not => 1,
        Prim::ToDouble | Prim::Pair | Prim::Fst | Prim::Snd | Prim::Length => 0,
        _ => return None,
    })
}

/// Whether `x` occurs in a block of primitives and conditionals.
fn mentions(b: &Block, x: &Name) -> bool {
    b.result.var() == Some(x)
        || b.binds.iter().any(|bind| match &bind.rhs {
            Rhs::Prim(_, args) | Rhs::Array(args) => args.iter().any(|a| a.var() == Some(x)),
            Rhs::If(c, t, e) => c.var() == Some(x) || mentions(t, x) || mentions(e, x),
            Rhs::Loop { .. } | Rhs::While { .. } => true,
        })
}

// ----- projections of pairs ----------------------------------------------------

/// Forwards projections of pairs and drops what nobody uses (Note
/// [Fusion], "through tuples"): after `x = (a, b)`, a later `y = fst x`
/// makes every use of `y` a use of `a` (names are unique, so nothing is
/// captured), and `length` of an array literal is its number of items;
/// then pairs, projections, lengths and array literals that nothing uses
/// are removed, which cannot change a result or a ⊥ (E-Pair, E-Fst,
/// E-Snd, E-Length and E-Array cannot fail). Reverse mode returns every cotangent in
/// a tuple (`(adj, false)`) and reads it back with `fst`; this lets the
/// plan see the cotangent list where `accum` consumes it.
pub fn forward_projections(body: &mut Block) {
    let mut pairs: HashMap<Name, (Atom, Atom)> = HashMap::default();
    let mut alias: HashMap<Name, Atom> = HashMap::default();
    forward_block(body, &mut pairs, &mut HashMap::default(), &mut alias);
    // Removing a pair can leave its operands unused: repeat, boundedly.
    for _ in 0..8 {
        let mut uses: HashMap<Name, usize> = HashMap::default();
        body.for_each_atom(&mut |a| {
            if let Some(x) = a.var() {
                *uses.entry(x.clone()).or_default() += 1;
            }
        });
        if !drop_unused(body, &uses) {
            break;
        }
    }
}

fn resolve(a: &mut Atom, alias: &HashMap<Name, Atom>) {
    if let Atom::Var(x, _) = a
        && let Some(b) = alias.get(x)
    {
        *a = b.clone();
    }
}

fn forward_block(
    b: &mut Block,
    pairs: &mut HashMap<Name, (Atom, Atom)>,
    literals: &mut HashMap<Name, i64>,
    alias: &mut HashMap<Name, Atom>,
) {
    for bind in &mut b.binds {
        match &mut bind.rhs {
            Rhs::Prim(op, args) => {
                args.iter_mut().for_each(|a| resolve(a, alias));
                match (*op, args.as_slice()) {
                    (Prim::Pair, [a, c]) => {
                        pairs.insert(bind.name.clone(), (a.clone(), c.clone()));
                    }
                    (Prim::Fst | Prim::Snd, [Atom::Var(x, _)]) => {
                        if let Some((a, c)) = pairs.get(x) {
                            let part = if *op == Prim::Fst { a } else { c };
                            alias.insert(bind.name.clone(), part.clone());
                        }
                    }
                    // The length of an array literal is its number of
                    // items (E-Length), so a literal kept only for its
                    // length goes, with the pairs it held.
                    (Prim::Length, [Atom::Var(x, _)]) => {
                        if let Some(k) = literals.get(x) {
                            alias.insert(bind.name.clone(), Atom::Lit(Lit::Int(*k), Type::Index));
                        }
                    }
                    _ => {}
                }
            }
            Rhs::Array(items) => {
                items.iter_mut().for_each(|a| resolve(a, alias));
                literals.insert(bind.name.clone(), items.len() as i64);
            }
            Rhs::If(c, t, e) => {
                resolve(c, alias);
                forward_block(t, pairs, literals, alias);
                forward_block(e, pairs, literals, alias);
            }
            Rhs::Loop { n, state, body, .. } => {
                resolve(n, alias);
                if let Some((z, _, _)) = state {
                    resolve(z, alias);
                }
                forward_block(body, pairs, literals, alias);
            }
            Rhs::While {
                init, cond, step, ..
            } => {
                resolve(init, alias);
                forward_block(cond, pairs, literals, alias);
                forward_block(step, pairs, literals, alias);
            }
        }
    }
    resolve(&mut b.result, alias);
}

fn drop_unused(b: &mut Block, uses: &HashMap<Name, usize>) -> bool {
    let mut changed = false;
    b.binds.retain(|bind| {
        let pure = matches!(
            bind.rhs,
            Rhs::Prim(Prim::Pair | Prim::Fst | Prim::Snd | Prim::Length, _) | Rhs::Array(_)
        );
        let keep = !pure || uses.get(&bind.name).copied().unwrap_or(0) > 0;
        changed |= !keep;
        keep
    });
    for bind in &mut b.binds {
        match &mut bind.rhs {
            Rhs::If(_, t, e) => {
                changed |= drop_unused(t, uses);
                changed |= drop_unused(e, uses);
            }
            Rhs::Loop { body, .. } => changed |= drop_unused(body, uses),
            _ => {}
        }
    }
    changed
}
