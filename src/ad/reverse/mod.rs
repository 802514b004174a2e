//! Source-to-source reverse mode (spec/ad-reverse.md), on the first-order
//! normal form of `crate::anf`. For a block of bindings it generates
//!
//! - `fwd(B)`: the block's computation returning `(result, tape)`, where the
//!   tape holds every value the block binds and, for loops and conditionals,
//!   the tapes of their bodies (a `build` keeps one tape per element, an
//!   `ifold` or `iscan` one per iteration via `iscan`; a loop whose body
//!   binds only recomputed values, none, when its reverse needs none);
//! - `rev(B, ȳ)`: with the block's values restored from its tape, the
//!   cotangents of the block's free variables, given the cotangent ȳ of its
//!   result: the bindings are visited last to first and each one's rule
//!   (R-*) adds its operands' contributions.
//!
//! Cotangents (spec/ad-reverse.md, "Cotangents"): a Double's is a Double;
//! an array's is a *sparse list* of `(index, cotangent)` contributions, so
//! reading `v[i]` in a loop contributes one pair rather than a dense
//! one-hot array (seed 002 §4.3.4); lists are joined by `concat` and
//! turned dense, once, by `accum`. Index and Bool carry placeholders.
//! Only O(1) primitives are recomputed (reads, `+ − *`, comparisons,
//! pairs, projections: §4.1 "Recomputed bindings"), each once per restore,
//! so the gradient costs a constant factor more than the function,
//! whatever the sizes (the cheap-gradient criterion). An array read once
//! in a loop body contributes a bare pair per iteration ("Bare
//! contributions"). A fold whose state only accumulates sums runs
//! backwards as a map over its iterations (R-IFold-Linear). The entry's
//! own maps and sums whose bodies hold loops keep no tape at all: the
//! reverse sweep computes each iteration again, with its tape, just
//! before running it backwards (R-Checkpoint); such a sum that reaches the
//! result through additions is computed by the reverse sweep alone, in its
//! backward loop (R-Defer).
//!
//! One file per part: `counted.rs` turns a `while` into a count and a
//! fold first (R-While); `analysis.rs` decides what is taped, recomputed,
//! checkpointed, deferred, linear and active; `invariant.rs` reads the arrays a
//! fold passes on unchanged from its initial state (R-Invariant);
//! `segments.rs` splits a nonlinear fold into ⌈√n⌉ segments under
//! `--checkpoint sqrt` (R-Checkpoint-Sqrt); `rewrite.rs` is what those
//! three passes share (fresh names with spans); `fuse_sums.rs` fuses a sum of
//! a map into one fold (R-Defer-Sum); `fwd.rs` is the forward sweep
//! and restores a block from its tape; `rev.rs` is the reverse sweep,
//! which places accumulators and delivers contributions; `rules.rs` has
//! each construct's contributions (R-*) and `loops.rs` those of loops;
//! `checkpoint.rs` gives an iteration its values, restored or computed
//! again; `cotangent.rs` has cotangent values (zeros, ⊕, sums, dense and
//! sparse forms); `zero.rs` tracks structural zeros. [`reverse_program`]
//! is the entry point; the reverse-mode accumulators themselves are
//! `ad/accum.rs`.

mod analysis;
mod checkpoint;
mod cotangent;
mod counted;
mod fuse_sums;
mod fwd;
mod invariant;
mod loops;
mod rev;
mod rewrite;
mod rules;
mod segments;
mod zero;

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use super::AdError;
use super::accum::{self, V, accumulable, node_type};
use crate::anf::to_ir;
use crate::anf::{Atom, Normal};
use crate::ir::build::Builder;
use crate::ir::{Def, Expr, ExprId, Lit, Name, Type};
use analysis::{checkpoints, deferrals, state_checkpoints};
use fuse_sums::fuse_sums;
use zero::Zero;

pub use analysis::{activity, free_vars};
pub use cotangent::cotangent_type;

/// The reverse-mode program for a normalised entry: a definition
/// `name = fun p₁ … pₙ w -> (f p₁ … pₙ, ∂⟨w, f⟩/∂p_wrt)` taking the result's
/// cotangent `w` (dense, shaped like the result), or, when `seed` is
/// false, `fun p₁ … pₙ -> (f …, ∇_{p_wrt} f)` for a Double result (seed 1).
/// With several parameters in `wrt`, the cotangents form a tuple
/// `(∂/∂p_wrt₁, (∂/∂p_wrt₂, …))`, each accumulable one in its own dense
/// accumulator (R-Vjp-Tuple).
pub(super) fn reverse_program(
    b: &mut Builder<'_>,
    normal: &Normal,
    wrt: &[usize],
    seed: bool,
    name: &str,
    checkpointing: super::Checkpointing,
    accumulators: bool,
) -> Result<Def, AdError> {
    // R-While: `while`s of Double-carrying state become counted folds.
    let (normal, counts) = counted::counted(b, normal);
    let normal = &normal;
    // R-Invariant: arrays a fold passes on are read from its initial state.
    let normal = &invariant::invariant_states(b, normal);
    // R-Checkpoint-Sqrt: nonlinear folds in segments of ⌈√n⌉ iterations.
    let segmented;
    let normal = if checkpointing == super::Checkpointing::Sqrt {
        segmented = segments::segmented(b, normal, &counts);
        &segmented
    } else {
        normal
    };
    b.with_binding_spans(&normal.spans);
    let mut r = Reverse::new(b);
    r.accumulators = accumulators;
    let body = &fuse_sums(&normal.body);
    for &k in wrt {
        r.active.insert(normal.params[k].0.clone());
    }
    activity(body, &mut r.active);
    if checkpointing != super::Checkpointing::Off {
        r.checkpointed = checkpoints(body);
    }
    if checkpointing == super::Checkpointing::Sqrt {
        r.states_only = state_checkpoints(body);
    }
    for (x, path) in deferrals(body, &r.checkpointed) {
        r.deferred.insert(x, false);
        r.deferred_path.extend(path);
    }
    let result_t = body.result.ty().clone();
    let mut lets = Lets(Vec::new());
    let fr = r.fwd(body);
    let (frn, frt) = r.bind(&mut lets, "fwd", fr);
    // R-Defer: the value is the last component of the reverse sweep's
    // tuple, after the wanted cotangents and the accumulators (one each).
    let deferred = !r.deferred.is_empty();
    let mut value_of = None;
    if !deferred {
        let fv = r.b.var(&frn, frt.clone());
        let value = r.b.fst(fv);
        value_of = Some(r.bind(&mut lets, "value", value));
    }
    let fv = r.b.var(&frn, frt);
    let tape = r.b.snd(fv);
    r.restore(body, tape, &mut lets);
    let w: Name = Rc::from("w'seed");
    let seed_e = if seed {
        let wv = r.b.var(&w, result_t.clone());
        r.sparse(wv, &result_t)
    } else {
        r.b.double(1.0)
    };
    let (sn, _) = r.bind(&mut lets, "seed", seed_e);
    // Each parameter's cotangent: in an accumulator (§5.6) when it is an
    // array of Doubles, the gradient shaped like it at the end; else a
    // wanted adjoint, made dense.
    let mut wanted = Vec::new();
    let mut threads = Vec::new();
    let mut nodes = Vec::new();
    for &k in wrt {
        let (pn, pt) = normal.params[k].clone();
        if accumulators && accumulable(&pt) {
            let p = V::new(&pn, &pt);
            let n = accum::leaf_count(r.b, &p);
            let z = accum::zeros(r.b, n);
            let (acc, _) = r.bind(&mut lets, "acc", z);
            let zero = r.b.index(0);
            let (base, _) = r.bind(&mut lets, "base", zero);
            let node = accum::offsets(r.b, &p, &V::new(&base, &Type::Index));
            let (node, _) = r.bind(&mut lets, "node", node);
            r.places.insert(
                pn.clone(),
                Place {
                    root: pn.clone(),
                    node: node.clone(),
                },
            );
            threads.push((pn, acc));
            nodes.push(Some(node));
        } else {
            wanted.push((pn, pt));
            nodes.push(None);
        }
    }
    let adjs = r.rev_bare(body, Some(Cot::Value(sn)), &wanted, &[], &threads)?;
    let (an, at) = r.bind(&mut lets, "adjs", adjs);
    if deferred {
        let last = wanted.len() + threads.len();
        value_of = Some(r.deferred_value(&an, &at, last, &mut lets));
    }
    // The rev sweep's tuple: the wanted adjoints, then the accumulators.
    let (mut next_wanted, mut next_thread) = (0, wanted.len());
    let mut grads = Vec::new();
    for (&k, node) in wrt.iter().zip(nodes) {
        let (pn, pt) = normal.params[k].clone();
        let av = r.b.var(&an, at.clone());
        let g = match node {
            Some(node) => {
                let g = r.proj(av, next_thread);
                next_thread += 1;
                if pt == Type::array(Type::Double) {
                    // A vector's accumulator is its gradient.
                    g
                } else {
                    let (gn, _) = r.bind(&mut lets, "grad", g);
                    accum::reshape(
                        r.b,
                        &V::new(&gn, &Type::array(Type::Double)),
                        &V::new(&node, &node_type(&pt)),
                        &V::new(&pn, &pt),
                    )
                }
            }
            None => {
                let g = r.proj(av, next_wanted);
                next_wanted += 1;
                let pv = r.b.var(&pn, pt.clone());
                r.dense(g, pv, &pt)
            }
        };
        grads.push(g);
    }
    let last = grads.pop().expect("at least one independent parameter");
    let gd = grads
        .into_iter()
        .rev()
        .fold(last, |acc, g| r.b.pair(g, acc));
    let (vn, vt) = value_of.expect("the value, from one sweep or the other");
    let vv = r.b.var(&vn, vt);
    let out = r.b.pair(vv, gd);
    let mut e = lets.wrap_live(r.b, out, &r.restored);
    if seed {
        let t = Type::fun(result_t.clone(), r.b.ty(e));
        e = r.b.add(
            Expr::Lam {
                param: w,
                ann: Some(result_t),
                body: e,
            },
            t,
        );
    }
    for (p, t) in normal.params.iter().rev() {
        let ft = Type::fun(t.clone(), r.b.ty(e));
        e = r.b.add(
            Expr::Lam {
                param: p.clone(),
                ann: Some(t.clone()),
                body: e,
            },
            ft,
        );
    }
    Ok(Def {
        name: Rc::from(name),
        span: crate::diagnostic::Span::generated(),
        ann: None,
        body: e,
        prelude: false,
    })
}

/// One reverse-mode transformation: the builder of its output, and what
/// the analyses and the sweeps so far have decided.
pub(super) struct Reverse<'b, 'a> {
    pub b: &'b mut Builder<'a>,
    /// For compound bindings: the variable holding their sub-tape.
    subtapes: HashMap<Name, Name>,
    /// Variables that depend on the independent variable (activity
    /// analysis): only they get cotangents. Besides saving work, this
    /// keeps an infinite partial of an unrelated operand (sqrt at 0) from
    /// making the gradient ⊥.
    active: std::collections::HashSet<Name>,
    /// The names `restore` binds: tape projections, reads of tapes at
    /// their own indices and recomputed bindings (§4.1), none of which can
    /// be ⊥, so each is left out where nothing mentions it. Likewise the
    /// accumulators, nodes and leaf counts the reverse sweep creates
    /// (§5.6), which cannot be ⊥ either.
    restored: HashSet<Name>,
    /// The variables whose cotangents live in a dense accumulator
    /// (spec/ad-reverse.md §5.6): roots, views and aliases.
    places: HashMap<Name, Place>,
    /// The roots whose accumulator code so far may have added into.
    touched: HashSet<Name>,
    /// The loops whose iterations the reverse sweep recomputes instead of
    /// restoring them from a tape (R-Checkpoint, spec/ad-reverse.md §4.4).
    checkpointed: HashSet<Name>,
    /// The folds whose forward sweep keeps only their states, their
    /// iterations' tapes computed again (R-Checkpoint-State, §4.7).
    states_only: HashSet<Name>,
    /// R-Defer (§4.5): the entry's folds whose value the reverse sweep
    /// computes, each with whether it has yet, and the bindings on their
    /// paths to the result, which follow them.
    deferred: HashMap<Name, bool>,
    deferred_path: HashSet<Name>,
    /// Whether cotangents of arrays may live in dense accumulators (§5.6).
    /// Off for a program that reverse mode will differentiate again
    /// (R-Vjp nested in `vjp`, §9.3): an accumulator threaded through a
    /// loop is array state, whose reverse sweep would cost a pass over its
    /// contributions per update; sparse lists keep the second reverse
    /// sweep linear.
    accumulators: bool,
}

impl<'b, 'a> Reverse<'b, 'a> {
    pub fn new(b: &'b mut Builder<'a>) -> Self {
        Reverse {
            b,
            subtapes: HashMap::new(),
            active: std::collections::HashSet::new(),
            restored: HashSet::new(),
            places: HashMap::new(),
            touched: HashSet::new(),
            checkpointed: HashSet::new(),
            states_only: HashSet::new(),
            deferred: HashMap::new(),
            deferred_path: HashSet::new(),
            accumulators: true,
        }
    }

    /// An atom as IR ([`to_ir::atom`]).
    fn atom(&mut self, a: &Atom) -> ExprId {
        to_ir::atom(self.b, a)
    }

    fn bind(&mut self, lets: &mut Lets, base: &str, value: ExprId) -> (Name, Type) {
        let n = self.b.fresh(base);
        let t = self.b.ty(value);
        lets.0.push((n.clone(), value));
        (n, t)
    }

    /// A tuple (c₁, (c₂, … false)) of expressions.
    fn tuple(&mut self, items: Vec<ExprId>) -> ExprId {
        let mut t = self.b.add(Expr::Lit(Lit::Bool(false)), Type::Bool);
        for i in items.into_iter().rev() {
            t = self.b.pair(i, t);
        }
        t
    }

    /// Component `k` of a tuple built by [`tuple`].
    fn proj(&mut self, mut e: ExprId, k: usize) -> ExprId {
        for _ in 0..k {
            e = self.b.snd(e);
        }
        self.b.fst(e)
    }

    /// R-Defer: the program's value, the last component of the entry's
    /// reverse-sweep tuple `adjs` (after its one cotangent or accumulator).
    fn deferred_value(
        &mut self,
        adjs: &Name,
        t: &Type,
        at: usize,
        lets: &mut Lets,
    ) -> (Name, Type) {
        let av = self.b.var(adjs, t.clone());
        let v = self.proj(av, at);
        self.bind(lets, "value", v)
    }
}

/// Where a cotangent is added (spec/ad-reverse.md §5.6): the
/// accumulator of `root`, at `node` (a variable of type
/// `accum::node_type` of the placed variable's type).
#[derive(Clone, Debug, PartialEq)]
struct Place {
    root: Name,
    node: Name,
}

/// The cotangent of a binding: a value, or the part of an accumulator at
/// a place.
#[derive(Clone, Debug)]
enum Cot {
    Value(Name),
    At(Place),
}

/// A contribution a rule makes to an operand.
enum Contrib {
    /// A cotangent value of CT[[T]].
    Value(ExprId),
    /// The cotangent held in an accumulator at a place.
    At(Place),
}

/// What a rule passes on: each operand with its type, its contribution,
/// and which parts of that contribution are structural zeros.
type Contributions = Vec<(Name, Type, Contrib, Zero)>;

/// The accumulators threaded through a block: (root, the variable
/// holding its current version), in a fixed order.
type Accs = Vec<(Name, Name)>;

fn acc_of(accs: &Accs, root: &Name) -> Name {
    accs.iter()
        .find(|(r, _)| r == root)
        .map(|(_, a)| a.clone())
        .expect("a threaded accumulator")
}

fn set_acc(accs: &mut Accs, root: &Name, now: Name) {
    if let Some(slot) = accs.iter_mut().find(|(r, _)| r == root) {
        slot.1 = now;
    }
}

fn acc_type() -> Type {
    Type::array(Type::Double)
}

/// Pending `let`s, wrapped around a body at the end.
struct Lets(Vec<(Name, ExprId)>);

impl Lets {
    fn wrap(self, b: &mut Builder<'_>, mut body: ExprId) -> ExprId {
        for (n, v) in self.0.into_iter().rev() {
            body = b.let_(n, v, body);
        }
        body
    }

    /// [`wrap`](Lets::wrap), leaving out every binding named in `optional`
    /// that nothing inside it mentions: a value `restore` would read from
    /// the tape or recompute (§4.1) that the reverse sweep does not use.
    fn wrap_live(self, b: &mut Builder<'_>, mut body: ExprId, optional: &HashSet<Name>) -> ExprId {
        let mut used = HashSet::new();
        mentioned(b.prog, body, &mut used);
        for (n, v) in self.0.into_iter().rev() {
            if optional.contains(&n) && !used.contains(&n) {
                continue;
            }
            mentioned(b.prog, v, &mut used);
            body = b.let_(n, v, body);
        }
        body
    }
}

/// Every variable name `e` mentions, bound or free. (A superset of its
/// free variables: enough to tell that a name is certainly unused.)
fn mentioned(prog: &crate::ir::Program, e: ExprId, out: &mut HashSet<Name>) {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        let x = prog.expr(e);
        if let Expr::Var(n) = x {
            out.insert(n.clone());
        }
        stack.extend(x.children());
    }
}
