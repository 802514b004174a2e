//! The e-class analysis: what side conditions need to know.
//!
//! - `free`: for every free variable, which parts of it the class uses:
//!   bit 1 = `fst x`, bit 2 = `snd x`, 3 = the whole of x. Classes merge
//!   by intersection (AND): a variable is free in a class when every
//!   member uses it, so `let x = e in y` (equal to `y`) does not make the
//!   variables of `e` free in the class of `y`. Extraction keeps this
//!   honest: it picks only a member whose own variables are exactly its
//!   class's (`engine::LoopCost`), so what a condition judged on a class
//!   holds of the extracted term. This gives `not-free`, and the
//!   `only-fst`/`only-snd` conditions of loop fission.
//! - `constant`: a literal the class is known to equal (constant folding,
//!   with the evaluator's own scalar semantics, so ⊥ is never folded).
//! - `loop_bounds` (global): the size `n` of the loop that binds each index
//!   symbol. Names are unique after normalisation, so `in-bounds (var i) n`
//!   holds when `i` is the index of a loop over `n`.

use rustc_hash::FxHashMap as HashMap;
use std::cell::RefCell;
use std::collections::BTreeMap;

use egg::{Analysis, DidMerge, EGraph, Id, Language, Symbol};

use super::lang::{Dbl, Fsm, FsmOp, node_prim};
use crate::eval::{Value, scalar};
use crate::ir::prim::{T, TyVar};

/// What every name made by a `fresh` condition contains
/// (`opt/rules.rs`: `v'f{nonce}'{class}`).
pub const FRESH_MARK: &str = "'f";

#[derive(Debug, Clone, PartialEq)]
pub struct Data {
    pub free: BTreeMap<Symbol, u8>,
    /// The *made* names (those containing [`FRESH_MARK`], as every
    /// `fresh` name does) free in some term the class represents (merged
    /// by union; `free` is an intersection): what a `fresh` name must
    /// avoid to capture nothing in any member. Names without the mark can
    /// never equal a made one, so they are left out. Bound occurrences do
    /// not count: a name made for a class and bound in one of its members
    /// may be made again, so applying a rule twice to a class builds the
    /// same term (counting them made a new name at every application, and
    /// the `cleanup` phase of the vector-max gradient ran into its time
    /// limit, 4.4 s where it took 0.3 s).
    pub names: std::collections::BTreeSet<Symbol>,
    pub constant: Option<Fsm>,
    /// Cannot be ⊥: built from total operations only (merged by OR: one
    /// total member makes the class total, as all members are equal).
    pub total: bool,
    /// Known to be a Double (merged by OR): for conditions that must not
    /// apply to Index arithmetic (`double ?e`).
    pub double: bool,
    /// Known to be an array of arrays … of Doubles, this many levels
    /// deep (0: a Double): from literals, typed operations and the
    /// [`FsmAnalysis::var_depth`] of variables, so that a read `a[i][j]`
    /// of a parameter `a: Matrix` is known to be a Double.
    pub depth: Option<u8>,
}

/// The [`Data::depth`] of a node, given its children's.
fn node_depth(egraph: &Graph, n: &Fsm) -> Option<u8> {
    let at = |c: &Id| {
        let d = &egraph[*c].data;
        if d.double { Some(0) } else { d.depth }
    };
    let var =
        |x: &Id| symbol_of(egraph, *x).and_then(|s| egraph.analysis.var_depth.get(&s).copied());
    depth_rule(n, at, var)
}

/// The depth rules of spec/rules-format.md §6.1 for one node, given the
/// depths of its children (`at`) and of the variable a `var` node names.
fn depth_rule(
    n: &Fsm,
    at: impl Fn(&Id) -> Option<u8>,
    var: impl FnOnce(&Id) -> Option<u8>,
) -> Option<u8> {
    let double = |c: &Id| at(c) == Some(0);
    match n {
        Fsm::Var(x) => var(x),
        Fsm::Get([a, _]) => at(a)?.checked_sub(1),
        Fsm::Build([_, f]) => at(f)?.checked_add(1),
        Fsm::Lam([_, b]) | Fsm::Let([_, _, b]) => at(b),
        Fsm::If([_, a, b]) => at(a).or_else(|| at(b)),
        Fsm::Double(_) => Some(0),
        n => {
            // A primitive, from its signature (T-Math, T-ToDouble: a
            // Double; T-Arith, T-Neg: a numeric type, which is Double when
            // an operand is).
            let sig = &node_prim(n)?.info().typing.sig;
            match sig.result {
                T::Double => Some(0),
                T::Var(k) if sig.vars[k] == TyVar::Num => {
                    n.children().iter().any(double).then_some(0)
                }
                _ => None,
            }
        }
    }
}

/// Constructs that cannot be ⊥ themselves (an application can: its
/// function's body may be).
fn total_construct(n: &Fsm) -> bool {
    matches!(
        n,
        Fsm::Var(_)
            | Fsm::Symbol(_)
            | Fsm::Bool(_)
            | Fsm::Int(_)
            | Fsm::Double(_)
            | Fsm::Lam(_)
            | Fsm::Let(_)
            | Fsm::If(_)
            | Fsm::Array(_)
    )
}

#[derive(Default)]
pub struct FsmAnalysis {
    /// Loop index symbol → e-class of its loop's size.
    pub loop_bounds: HashMap<Symbol, Id>,
    /// Variable → its [`Data::depth`], when known: the entry's parameters,
    /// from their types ([`type_depth`]). Not `let`-bound names: knowing
    /// them too made `double` conditions hold in more places, more rules
    /// fire, and phases end at their limits elsewhere (BA's `fwd-opt`
    /// normal form grew from 683 to 981 lines, 12 to 14 divisions).
    pub var_depth: HashMap<Symbol, u8>,
    /// Which saturation of one optimisation this is (0, 1, …): part of
    /// every `fresh` symbol, since class ids restart with each e-graph and
    /// a symbol made in one phase must not be made again in a later one.
    pub nonce: u32,
    /// Bumped by every `make` and `merge`: the e-graph's structure changes
    /// only through them, so an index built at one version is exact at
    /// that version (`parent_index`).
    pub version: u64,
    /// `parent_index` by (parent operator, child position), built lazily
    /// at `version`.
    pub parent_index: RefCell<HashMap<(FsmOp, usize), ParentIndex>>,
    /// The first merge of two classes whose constants differ as reals
    /// (Note [Conflicting constants]): the two literals.
    pub conflict: Option<(Fsm, Fsm)>,
}

/// # Note [Conflicting constants]
///
/// An e-graph reads every rewrite as an equation, and a `refines` rule
/// only holds one way: where `L` is ⊥, both `L => R₁` and `L => R₂`
/// (two refinements, or a refinement and a chain of equivalences over
/// the reals) put `R₁` and `R₂` into one class although they are
/// different values (spec/rules-format.md §7.3). A dead branch that
/// divides by `0.0` is such an `L`: `a − 0 · (p / 0)` is `a` by
/// `zero-mul` and `sub-zero`, and `(a · 0 − 0 · p) / 0 = 0` by
/// `sub-mul-div`, `mul-zero` and `zero-div`; so `a = 0` for every `a` that
/// stands there, and the merge spreads to the live code
/// (`tests/difftest/fwd-opt-seed3101-case656.fsm`). Such a merge shows
/// when two classes with constants that differ as reals meet (`1.0` and
/// `0.0`; not `0.0` and `-0.0`, nor a NaN or an infinity, which
/// `ieee-inexact` rules may turn into a finite value). The analysis
/// records the first such merge, and the phase that made it keeps its
/// input (`engine::run_phase`): its e-graph is known to equate different
/// values, so no term extracted from it is trusted.
///
/// Whether two constants are different values in the reals reading.
pub fn conflicting(a: &Fsm, b: &Fsm) -> bool {
    match (a, b) {
        (Fsm::Double(x), Fsm::Double(y)) => {
            let (x, y) = (x.get(), y.get());
            x.is_finite() && y.is_finite() && x != y
        }
        (Fsm::Int(x), Fsm::Int(y)) => x != y,
        (Fsm::Bool(x), Fsm::Bool(y)) => x != y,
        _ => false,
    }
}

/// The classes that hold a node of one operator whose child at one
/// position holds a node of another operator, by that other operator; in
/// the order of `classes_for_op` (e-matching's order).
pub struct ParentIndex {
    version: u64,
    by_child: HashMap<FsmOp, Vec<Id>>,
}

/// The classes holding a `parent` node whose child `k` holds a `child`
/// node: the only classes where a pattern `(parent … (child …) …)` can
/// match. Built in one pass over the `parent` nodes for every `child`
/// operator at once, and reused until the e-graph changes.
pub fn classes_with_child(egraph: &Graph, parent: FsmOp, k: usize, child: FsmOp) -> Vec<Id> {
    let analysis = &egraph.analysis;
    let mut cache = analysis.parent_index.borrow_mut();
    let entry = cache.entry((parent, k)).or_insert_with(|| ParentIndex {
        version: u64::MAX,
        by_child: HashMap::default(),
    });
    if entry.version != analysis.version {
        entry.by_child.clear();
        for id in egraph.classes_for_op(&parent).into_iter().flatten() {
            let mut seen: Vec<FsmOp> = Vec::new();
            for node in egraph[id].nodes.iter() {
                if node.discriminant() != parent {
                    continue;
                }
                let Some(c) = node.children().get(k) else {
                    continue;
                };
                for n in egraph[*c].nodes.iter() {
                    let d = n.discriminant();
                    if !seen.contains(&d) {
                        seen.push(d);
                        entry.by_child.entry(d).or_default().push(id);
                    }
                }
            }
        }
        entry.version = analysis.version;
    }
    entry.by_child.get(&child).cloned().unwrap_or_default()
}

pub type Graph = EGraph<Fsm, FsmAnalysis>;

/// The symbol of a class that is a `(var x)`, if it contains one.
pub fn var_symbol(egraph: &Graph, id: Id) -> Option<Symbol> {
    egraph[id].nodes.iter().find_map(|n| match n {
        Fsm::Var(s) => symbol_of(egraph, *s),
        _ => None,
    })
}

/// The symbol a symbol class holds.
pub fn symbol_of(egraph: &Graph, id: Id) -> Option<Symbol> {
    egraph[id].nodes.iter().find_map(|n| match n {
        Fsm::Symbol(s) => Some(*s),
        _ => None,
    })
}

fn value_of(n: &Fsm) -> Option<Value> {
    match n {
        Fsm::Double(d) => Some(Value::Double(d.get())),
        Fsm::Int(i) => Some(Value::Index(*i)),
        Fsm::Bool(b) => Some(Value::Bool(*b)),
        _ => None,
    }
}

fn literal(v: &Value) -> Option<Fsm> {
    match v {
        Value::Double(x) => Some(Fsm::Double(Dbl::new(*x))),
        Value::Index(i) => Some(Fsm::Int(*i)),
        Value::Bool(b) => Some(Fsm::Bool(*b)),
        _ => None,
    }
}

/// Constant folding with the reference semantics (`eval::scalar`): an
/// operation outside its domain stays unfolded.
fn fold(egraph: &Graph, enode: &Fsm) -> Option<Fsm> {
    if value_of(enode).is_some() {
        return Some(enode.clone());
    }
    let op = node_prim(enode)?;
    let mut args = Vec::new();
    for c in enode.children() {
        args.push(value_of(egraph[*c].data.constant.as_ref()?)?);
    }
    let (v, _) = scalar(op, &args, crate::diagnostic::Span::generated()).ok()?;
    literal(&v)
}

/// Whether one node cannot be ⊥, from its children's classes: a total
/// construct or primitive on total children, or a constant fold. A
/// primitive is total as the table says (`PrimInfo::can_fail`): Index
/// arithmetic can overflow; Double `+ - *` and negation cannot fail (IEEE
/// overflow gives infinities, not ⊥).
pub fn node_total(egraph: &Graph, enode: &Fsm) -> bool {
    let total_op = match node_prim(enode) {
        Some(p) => {
            let info = p.info();
            !info.can_fail(true) || (!info.can_fail(false) && node_depth(egraph, enode) == Some(0))
        }
        None => total_construct(enode),
    };
    (total_op || fold(egraph, enode).is_some())
        && enode.children().iter().all(|c| egraph[*c].data.total)
}

/// The free variables of one node, from its children's classes: what
/// the node uses if extraction picks it (spec/rules-format.md §7.1).
pub fn node_free(egraph: &Graph, enode: &Fsm) -> BTreeMap<Symbol, u8> {
    let mut free: BTreeMap<Symbol, u8> = BTreeMap::new();
    let add = |m: &BTreeMap<Symbol, u8>, free: &mut BTreeMap<Symbol, u8>| {
        for (k, b) in m {
            *free.entry(*k).or_insert(0) |= b;
        }
    };
    match enode {
        Fsm::Var(s) => {
            if let Some(x) = symbol_of(egraph, *s) {
                free.insert(x, 3);
            }
        }
        Fsm::Symbol(_) => {}
        Fsm::Lam([x, b]) => {
            add(&egraph[*b].data.free, &mut free);
            if let Some(x) = symbol_of(egraph, *x) {
                free.remove(&x);
            }
        }
        Fsm::Let([x, v, b]) => {
            add(&egraph[*b].data.free, &mut free);
            if let Some(x) = symbol_of(egraph, *x) {
                free.remove(&x);
            }
            add(&egraph[*v].data.free, &mut free);
        }
        Fsm::Fst([c]) | Fsm::Snd([c]) => {
            let part = if matches!(enode, Fsm::Fst(_)) { 1 } else { 2 };
            // A projection of a variable reads only that part.
            add(&egraph[*c].data.free, &mut free);
            // Only when the child's class uses the whole of `x`, as the
            // `(var x)` it holds does: extraction then picks that var.
            if let Some(x) = var_symbol(egraph, *c)
                && egraph[*c].data.free.get(&x) == Some(&3)
            {
                free.insert(x, part);
            }
        }
        _ => {
            for c in enode.children() {
                add(&egraph[*c].data.free, &mut free);
            }
        }
    }
    free
}

/// The `names` fact of one node: made names free in it, as `node_free`
/// computes free variables but from the children's unions.
fn node_free_made(egraph: &Graph, enode: &Fsm) -> std::collections::BTreeSet<Symbol> {
    let of = |c: &Id| egraph[*c].data.names.iter().copied();
    let mut out = std::collections::BTreeSet::new();
    match enode {
        Fsm::Var(s) => {
            if let Some(x) = symbol_of(egraph, *s)
                && x.as_str().contains(FRESH_MARK)
            {
                out.insert(x);
            }
        }
        Fsm::Symbol(_) => {}
        Fsm::Lam([x, b]) => {
            out.extend(of(b));
            if let Some(x) = symbol_of(egraph, *x) {
                out.remove(&x);
            }
        }
        Fsm::Let([x, v, b]) => {
            out.extend(of(b));
            if let Some(x) = symbol_of(egraph, *x) {
                out.remove(&x);
            }
            out.extend(of(v));
        }
        _ => {
            for c in enode.children() {
                out.extend(of(c));
            }
        }
    }
    out
}

impl Analysis<Fsm> for FsmAnalysis {
    type Data = Data;

    fn make(egraph: &mut Graph, enode: &Fsm, _id: Id) -> Data {
        egraph.analysis.version += 1;
        let free = node_free(egraph, enode);
        let names = node_free_made(egraph, enode);
        let depth = node_depth(egraph, enode);
        let double = depth == Some(0);
        let total = node_total(egraph, enode);
        Data {
            free,
            names,
            constant: fold(egraph, enode),
            total,
            double,
            depth,
        }
    }

    fn merge(&mut self, to: &mut Data, from: Data) -> DidMerge {
        self.version += 1;
        // Intersection, per variable and part: a variable is free in the
        // class only if every member uses it (egg's `tests/lambda.rs` does
        // the same). Extraction then picks only members that use exactly
        // the class's variables (`engine::LoopCost`), so a condition judged
        // on the class holds of the extracted term.
        let before = to.free.clone();
        to.free = before
            .iter()
            .filter_map(|(k, a)| {
                let both = a & from.free.get(k).copied().unwrap_or(0);
                (both != 0).then_some((*k, both))
            })
            .collect();
        let changed_to = before != to.free;
        let changed_from = to.free != from.free;
        let mut d = DidMerge(changed_to, changed_from);
        let from_more = !from.names.is_subset(&to.names);
        let to_more = !to.names.is_subset(&from.names);
        to.names.extend(from.names);
        d = d | DidMerge(from_more, to_more);
        if !to.double && from.double {
            to.double = true;
            d = d | DidMerge(true, false);
        } else if to.double && !from.double {
            d = d | DidMerge(false, true);
        }
        if to.depth.is_none() && from.depth.is_some() {
            to.depth = from.depth;
            d = d | DidMerge(true, false);
        } else if to.depth.is_some() && from.depth.is_none() {
            d = d | DidMerge(false, true);
        }
        if !to.total && from.total {
            to.total = true;
            d = d | DidMerge(true, false);
        } else if to.total && !from.total {
            d = d | DidMerge(false, true);
        }
        // Note [Conflicting constants]
        if let (Some(a), Some(b)) = (&to.constant, &from.constant)
            && self.conflict.is_none()
            && conflicting(a, b)
        {
            self.conflict = Some((a.clone(), b.clone()));
        }
        if to.constant.is_none() && from.constant.is_some() {
            to.constant = from.constant;
            d = d | DidMerge(true, false);
        } else if to.constant.is_some() && from.constant.is_none() {
            d = d | DidMerge(false, true);
        }
        d
    }

    fn modify(egraph: &mut Graph, id: Id) {
        let Some(c) = egraph[id].data.constant.clone() else {
            return;
        };
        if egraph[id].nodes.contains(&c) {
            return;
        }
        // A named step, so explanations read "const-fold".
        let lit = egraph.add(c);
        egraph.union_trusted(id, lit, "const-fold");
    }
}

/// The [`Data::depth`] of a value of type `t`, if it is an array of
/// arrays … of Doubles (or a Double).
pub fn type_depth(t: &crate::ir::Type) -> Option<u8> {
    match t {
        crate::ir::Type::Double => Some(0),
        crate::ir::Type::Array(e) => type_depth(e)?.checked_add(1),
        _ => None,
    }
}
