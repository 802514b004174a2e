//! Sibling `build`s of one count, run as one loop (Note [Horizontal
//! fusion]).
//!
//! # Note [Horizontal fusion]
//!
//! Vector forward mode (`--mode fwd-vec`, spec/ad-forward.md §4.6) gives
//! every Double a tangent vector of one element per direction, and every
//! operation on Doubles a loop over the directions: `t = build nd (fun k
//! -> a[k] * q + b[k] * r)`. After unrolling and versioning, BA's
//! `project` is a straight line of about a hundred such loops between the
//! primal's scalar bindings, each reading earlier ones at `k`. Run one by
//! one, every tangent is stored and loaded again, and every loop pays its
//! own entry and exit. The lowering runs such a straight line as one loop
//! over the directions instead, each tangent a value of the iteration.
//!
//! A *member* is a binding `t = build n (fun k -> body)` of Doubles whose
//! body binds only Double `+ - *` and negation, `/` by an atom bound
//! outside the body, comparisons of Doubles, Double conditionals of two
//! atoms (Note [Selects]) and reads `a[k]` of arrays of Doubles bound
//! outside the body, each built or an earlier member (a fused array, Note
//! [Fusion], has no buffer to read). A *group* is two
//! or more members of one block, in order, that no binding between the
//! first and the last mentions except later members reading them at
//! their index; the bindings between are the group's *region* with them.
//! A member that nothing after the region reads is *internal*: it is
//! never built. The others are *kept*: built in both versions (one that
//! fusion planned to recompute where it is read is built instead, as the
//! code after the region reads its buffer; a block inside a region is
//! lowered once per version, and the first may have fused it, so that
//! reading is dropped too).
//!
//! The region runs in two versions:
//!
//! - the *fast* one runs the region's other bindings in order, then one
//!   *guard*, then one loop over `k < n` (the first member's count) that
//!   computes every member's element `k` in order, a read of an earlier
//!   member at `k` being that member's value in the same iteration; only
//!   the members read after the region are stored. The guard holds when
//!   every member's count equals `n`, `n ≥ 0`, every array read at `k` has
//!   at least `n` elements, and (when `n > 0`) no divisor is zero. Then no
//!   member can be ⊥ (E-Build-Bot, E-Get-Bot, E-Arith-Bot are the only
//!   ways, and the rest is total), so when they are computed changes
//!   nothing but time: each element is the same operations on the same
//!   values, so every bit is the same.
//! - the *slow* one is the region as written (its loops without the
//!   versions of their bounds guards, Note [Bounds guards]: it runs only
//!   after a bail, and is code to compile). The fast version runs with
//!   a *bail* exit (as Note [Jamming]'s step does): any ⊥ in it, or a
//!   guard that fails, continues in the slow version, which then meets
//!   the evaluator's first ⊥ itself. The fast version only allocates (it
//!   writes no array that exists before it), so running the region again
//!   computes the same values.
//!
//! Divisors are atoms bound before the region or in it (never a
//! member's element), so the guard can test them, and the loop's
//! divisions then test nothing. A non-member in the region that the
//! lowering fuses (its reads compute values where they are, Note
//! [Fusion]) ends the group before it: its plan holds values of one
//! version. So does one that holds an `addAt` (it may update an array
//! that exists before the region in place, Note [In-place updates]: run
//! by a fast version that then bails, and again by the slow one, it would
//! add twice). A non-member that mentions a member is *deferred* when it is
//! a pair, a projection or an array literal (total but for memory, and
//! cheap): the fast version runs it after the loop, and the member it
//! holds is kept; any other such binding ends the group (the fast version
//! would run it before the member exists), as does one that mentions a
//! deferred binding, and a member that does. Past [`MAX_REGION`]
//! bindings of non-members (nested ones counted) the group ends too, as
//! the fast version holds them a second time.
//!
//! BA's `projectAll` Jacobian (`fwd-vec`, N = 10⁵, `benches/aot/run.sh`'s
//! `ba_fwd_vec` under callgrind, one call): 744 → 304 million
//! instructions, one group of 52 members per point; see
//! benches/README.md, "What this session changed".

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::anf::{Atom, Binding, Block, LoopKind, Rhs};
use crate::ir::{Lit, Name, Prim, Type};

/// The most bindings (nested ones counted) of a region's non-members: the
/// fast version holds them a second time.
pub const MAX_REGION: usize = 4096;

/// One group of a block (Note [Horizontal fusion]): positions in its
/// bindings.
#[derive(Debug)]
pub struct Group {
    /// The region, `binds[start..end]`: the first member to the last.
    pub start: usize,
    pub end: usize,
    /// The members, in order.
    pub members: Vec<usize>,
    /// The region's pairs, projections and array literals that mention a
    /// member or another of them: the fast version runs them after the
    /// loop.
    pub deferred: Vec<usize>,
    /// Per member: whether anything after the region reads it (else it
    /// is internal, never built).
    pub kept: Vec<bool>,
    /// The bindings of the region whose names are read after it.
    pub live: Vec<usize>,
}

/// A group's loop: the members' bodies as one, over one index.
#[derive(Debug)]
pub struct Loop {
    pub index: Name,
    /// Each member's count.
    pub counts: Vec<Atom>,
    /// The members' bodies in order, every index renamed to `index`, and
    /// a read of an earlier member at its index replaced by that member's
    /// element.
    pub terms: Vec<Binding>,
    /// Each member's element.
    pub elements: Vec<Atom>,
    /// The arrays read at the index, each once.
    pub reads: Vec<Name>,
    /// The divisors, each once (atoms bound outside every body).
    pub divisors: Vec<Atom>,
}

/// The groups of `block`, in order; `fused` says which bindings the
/// lowering fuses (Note [Fusion]).
pub fn groups(block: &Block, fused: &dyn Fn(&Name) -> bool) -> Vec<Group> {
    let binds = &block.binds;
    let mut out = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    let mut names: HashSet<&Name> = HashSet::default();
    // The region's bindings that run after the loop, and their names.
    let mut deferred: Vec<usize> = Vec::new();
    let mut later: HashSet<&Name> = HashSet::default();
    let mut size = 0;
    for (p, b) in binds.iter().enumerate() {
        let shape = member(b);
        // Whether `b` can be a member of a group of `names`, after the
        // deferred `later`.
        let fits = |names: &HashSet<&Name>, later: &HashSet<&Name>| {
            shape.is_some_and(|(_, index, body)| {
                reads_only_at_index(b, names)
                    && built_or_members(index, body, names, fused)
                    && !mentions_any(&b.rhs, later)
            })
        };
        let joins = !open.is_empty() && fits(&names, &later);
        let mentions = mentions_any(&b.rhs, &names) || mentions_any(&b.rhs, &later);
        let defers = !open.is_empty()
            && shape.is_none()
            && mentions
            && deferrable(&b.rhs)
            && !fused(&b.name);
        let breaks = !open.is_empty()
            && !joins
            && !defers
            && (shape.is_some() || {
                size += weight(&b.rhs);
                fused(&b.name) || writes(&b.rhs) || mentions || size > MAX_REGION
            });
        if breaks {
            close(
                block,
                std::mem::take(&mut open),
                std::mem::take(&mut deferred),
                &mut out,
            );
            names.clear();
            later.clear();
            size = 0;
        }
        if defers {
            deferred.push(p);
            later.insert(&b.name);
        }
        if joins || (open.is_empty() && fits(&names, &later)) {
            open.push(p);
            names.insert(&b.name);
        }
    }
    close(block, open, deferred, &mut out);
    out
}

/// Whether `rhs` holds an `addAt`, which may update an array that exists
/// before it in place (Note [In-place updates]).
fn writes(rhs: &Rhs) -> bool {
    let block = |b: &Block| b.binds.iter().any(|t| writes(&t.rhs));
    match rhs {
        Rhs::Prim(op, _) => *op == Prim::AddAt,
        Rhs::Array(_) => false,
        Rhs::If(_, t, e) => block(t) || block(e),
        Rhs::Loop { body, .. } => block(body),
        Rhs::While { cond, step, .. } => block(cond) || block(step),
    }
}

/// Pairs, projections and array literals: total (but for running out of
/// memory) and cheap, so a region may run them after its loop.
fn deferrable(rhs: &Rhs) -> bool {
    matches!(
        rhs,
        Rhs::Prim(Prim::Pair | Prim::Fst | Prim::Snd, _) | Rhs::Array(_)
    )
}

/// Whether every array the member body reads is built or an earlier
/// member of the group (a fused array has no buffer to read, Note
/// [Fusion]; a fused member is computed in the loop).
fn built_or_members(
    index: &Name,
    body: &Block,
    group: &HashSet<&Name>,
    fused: &dyn Fn(&Name) -> bool,
) -> bool {
    body.binds.iter().all(|t| match &t.rhs {
        Rhs::Prim(Prim::Get, args) if args[1].var() == Some(index) => args[0]
            .var()
            .is_some_and(|a| group.contains(a) || !fused(a)),
        _ => true,
    })
}

/// `(count, index, body)` when `b` is a member (Note [Horizontal fusion]).
fn member(b: &Binding) -> Option<(&Atom, &Name, &Block)> {
    let Rhs::Loop {
        kind: LoopKind::Build,
        n,
        state: None,
        index,
        body,
    } = &b.rhs
    else {
        return None;
    };
    if b.ty != Type::array(Type::Double) || *body.result.ty() != Type::Double {
        return None;
    }
    let bound: HashSet<&Name> = body.binds.iter().map(|t| &t.name).collect();
    let outside = |a: &Atom| a.var().is_none_or(|x| !bound.contains(x) && x != index);
    let doubles = |args: &[Atom]| args.iter().all(|a| *a.ty() == Type::Double);
    let ok = body.binds.iter().all(|t| match &t.rhs {
        Rhs::Prim(Prim::Add | Prim::Sub | Prim::Mul | Prim::Neg, args) => {
            t.ty == Type::Double && doubles(args)
        }
        Rhs::Prim(Prim::Div, args) => t.ty == Type::Double && doubles(args) && outside(&args[1]),
        Rhs::Prim(Prim::Lt | Prim::Gt | Prim::Le | Prim::Ge | Prim::Eq | Prim::Ne, args) => {
            doubles(args)
        }
        Rhs::Prim(Prim::Get, args) => {
            t.ty == Type::Double
                && *args[0].ty() == Type::array(Type::Double)
                && args[0].var().is_some()
                && outside(&args[0])
                && args[1].var() == Some(index)
        }
        Rhs::If(_, th, el) => t.ty == Type::Double && th.binds.is_empty() && el.binds.is_empty(),
        _ => false,
    });
    ok.then_some((n, index, body))
}

/// Whether the member `b` mentions the names of `group` only in reads at
/// its index.
fn reads_only_at_index(b: &Binding, group: &HashSet<&Name>) -> bool {
    let Some((n, index, body)) = member(b) else {
        return false;
    };
    let named = |a: &Atom| a.var().is_some_and(|x| group.contains(x));
    !named(n)
        && !named(&body.result)
        && body.binds.iter().all(|t| match &t.rhs {
            Rhs::Prim(Prim::Get, args) if args[1].var() == Some(index) => true,
            rhs => !mentions_any(rhs, group),
        })
}

fn mentions_any(rhs: &Rhs, names: &HashSet<&Name>) -> bool {
    let mut found = false;
    rhs.for_each_atom(&mut |a| found |= a.var().is_some_and(|x| names.contains(x)));
    found
}

/// The bindings of `rhs`, nested ones counted, itself included.
fn weight(rhs: &Rhs) -> usize {
    let block = |b: &Block| b.binds.iter().map(|t| weight(&t.rhs)).sum::<usize>();
    1 + match rhs {
        Rhs::Prim(..) | Rhs::Array(_) => 0,
        Rhs::If(_, t, e) => block(t) + block(e),
        Rhs::Loop { body, .. } => block(body),
        Rhs::While { cond, step, .. } => block(cond) + block(step),
    }
}

/// Ends the group of the members `open`, if it has two or more, with the
/// bindings `deferred` that mention them.
fn close(block: &Block, open: Vec<usize>, deferred: Vec<usize>, out: &mut Vec<Group>) {
    let (Some(&start), Some(&last)) = (open.first(), open.last()) else {
        return;
    };
    if open.len() < 2 {
        return;
    }
    let end = last + 1;
    // Those past the last member run after the region anyway.
    let deferred: Vec<usize> = deferred.into_iter().filter(|&p| p < end).collect();
    let mut after: HashSet<Name> = HashSet::default();
    for b in &block.binds[end..] {
        b.rhs.for_each_atom(&mut |a| after.extend(a.var().cloned()));
    }
    after.extend(block.result.var().cloned());
    let read_after = |p: &usize| after.contains(&block.binds[*p].name);
    // A member that a deferred binding holds has a buffer too.
    let mut held: HashSet<Name> = HashSet::default();
    for &p in &deferred {
        block.binds[p]
            .rhs
            .for_each_atom(&mut |a| held.extend(a.var().cloned()));
    }
    let kept = open
        .iter()
        .map(|p| read_after(p) || held.contains(&block.binds[*p].name))
        .collect();
    let live = (start..end).filter(read_after).collect();
    out.push(Group {
        start,
        end,
        members: open,
        deferred,
        kept,
        live,
    });
}

/// The loop of `group` in `block` (Note [Horizontal fusion]).
pub fn fused_loop(block: &Block, group: &Group) -> Loop {
    let mut subst: HashMap<Name, Atom> = HashMap::default();
    let mut ordinal: HashMap<&Name, usize> = HashMap::default();
    let shapes: Vec<_> = group
        .members
        .iter()
        .filter_map(|&p| member(&block.binds[p]).map(|m| (&block.binds[p].name, m)))
        .collect();
    let index = shapes
        .first()
        .map_or_else(|| Name::from(""), |(_, (_, k, _))| (*k).clone());
    let mut out = Loop {
        index: index.clone(),
        counts: Vec::new(),
        terms: Vec::new(),
        elements: Vec::new(),
        reads: Vec::new(),
        divisors: Vec::new(),
    };
    let mut read: HashSet<Name> = HashSet::default();
    for (o, (name, (n, k, body))) in shapes.into_iter().enumerate() {
        subst.insert(k.clone(), Atom::Var(index.clone(), Type::Index));
        out.counts.push(n.clone());
        for t in &body.binds {
            if let Rhs::Prim(Prim::Get, args) = &t.rhs
                && let Some(&from) = args[0].var().and_then(|a| ordinal.get(a))
            {
                subst.insert(t.name.clone(), out.elements[from].clone());
                continue;
            }
            let mut t = t.clone();
            t.rhs.for_each_atom_mut(&mut |a| {
                if let Some(v) = a.var().and_then(|x| subst.get(x)) {
                    *a = v.clone();
                }
            });
            match &t.rhs {
                Rhs::Prim(Prim::Get, args) => {
                    if let Some(a) = args[0].var()
                        && read.insert(a.clone())
                    {
                        out.reads.push(a.clone());
                    }
                }
                Rhs::Prim(Prim::Div, args) => {
                    // A nonzero literal needs no test.
                    let d = &args[1];
                    let seen = match d {
                        Atom::Var(x, _) => out.divisors.iter().any(|y| y.var() == Some(x)),
                        Atom::Lit(Lit::Double(c), _) => *c != 0.0,
                        Atom::Lit(..) => false,
                    };
                    if !seen {
                        out.divisors.push(d.clone());
                    }
                }
                _ => {}
            }
            out.terms.push(t);
        }
        let e = match body.result.var().and_then(|x| subst.get(x)) {
            Some(v) => v.clone(),
            None => body.result.clone(),
        };
        out.elements.push(e);
        ordinal.insert(name, o);
    }
    out
}
