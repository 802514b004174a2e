//! Which folds of folds of `addAt`s run with their loops interchanged
//! (Note [Interchanged folds]).
//!
//! # Note [Interchanged folds]
//!
//! Reverse mode turns a `build` over points of sums over terms — a
//! batched product, `qy[r][i] = Σ_{s ≤ r} Q[r][s] · ys[s][i]` — into a
//! fold over the points whose body folds over the terms, adding into
//! the cotangents in place (Note [In-place updates]):
//!
//! ```text
//! ifold (fun st i -> … ifold (fun st' s ->
//!     addAt ȳs (o[s] + i) (t_i · Q[r][s]);  addAt Q̄ (c + s) (t_i · ys[s][i])) … m) z n
//! ```
//!
//! Point-major, every iteration of the inner fold writes another row of
//! `ȳs` (a column walk, stride n) and reads another row of `ys`, and the
//! slot of `Q̄` it adds into changes with `s`: a load, an addition and a
//! store per term, nothing in registers. The lowering runs the same
//! additions term-major instead — for s < m, for i < n — where `ȳs`'s
//! row is walked in order and `Q̄`'s slot stays in a register over all
//! points.
//!
//! That is exact when every slot receives the same additions in the same
//! order. Each `addAt` adds into a state array of its own (one `addAt`
//! per array, nothing else touches it in the nest), and its index is one
//! of:
//!
//! - `o[s] + i` (`o` an array of Indices bound outside), one slot per
//!   (s, i): exact when the rows `o[s] .. o[s] + n` do not overlap; the
//!   guard tests `o[s] ≥ o[s − 1] + n`.
//! - `c + s`, `s`, or `o[s]`, one slot per s, added to by every i in
//!   order in both orders (for `o[s]`, the guard tests `o[s] > o[s − 1]`);
//!   the lowering keeps it in a register over all i.
//! - `c + i` or `i`, one slot per i, added to by every s in order in both
//!   orders (term-major, s still ascends for each slot).
//!
//! A constant index (every iteration the same slot) is refused: its
//! additions would be reordered. The terms are total primitives, Double
//! divisions and reads: of arrays bound outside the nest at `i`, `c + i`,
//! `s`, `c + s`, `o[s]`, `o[s] + i` or an outside value, and of a row
//! `a[s]` at `i`. No term reads a state array (they are only projected,
//! paired and updated), so the interchange changes no value a term
//! computes; and an `addAt` in place means nothing reads its old array.
//!
//! The ⊥s. A guard before the nest tests every read and `addAt` in
//! bounds for every `i < n` and `s < m` (rows included), that `m ≥ 0`,
//! and the two orderings above; under it no term but a division can be
//! ⊥ and no index addition overflows (each stays below its array's
//! length). A division by zero is the same ⊥ from any element (E-Arith-
//! Bot's details do not name the element), and at the same site when the
//! nest has one division; a nest with two is refused, since the
//! interchanged order could meet the second's zero before the first's
//! (Note [Failure sites]). When the guard fails the
//! nest runs as written and stops with the evaluator's ⊥. The inner
//! loops' n × m iterations are charged at once (Note [Native limits]).
//!
//! The lowering (`Lower::interchanged_fold`) runs the terms four at a
//! time, then two, then one (s, s + 1, s + 2, s + 3 for every i, in that
//! order: each slot's additions keep their order; four sums in registers
//! are four chains of additions in flight), the terms of the outer body
//! once per i and block, and the terms that do not depend on i once per
//! s. Where every term that depends on the point is a read of Doubles at
//! `i`, `c + i` or `o[s] + i`, such an index, or Double `+ - *` or
//! negation, two points run at a time in the lanes of `f64x2`s (the last
//! alone when n is odd): a lane operation is the scalar IEEE operation, a
//! slot per (s, i) or per i is a load, addition and store of both, and a
//! slot in a register adds lane 0, then lane 1 — the points in order. So
//! every bit is the evaluator's. GMM's batched gradient at d = 20, K = 5
//! (`adbench gmm --batched`, best of three alternating runs against the
//! parent commit): 3.20 → 1.23 ms, with the forward sweep's products
//! blocked (Note [Vertical fusion]) and zero cotangents filled.
//!
//! ## Relaxed
//!
//! Under `--fp relaxed` (spec/semantics.md §7) a slot in a register sums
//! its points two at a time in lanes, the even and the odd points apart,
//! each from −0.0, and adds lane 0 and then lane 1 to its value after the
//! pairs (the last point, when n is odd, as written): one `f64x2`
//! addition per term and pair of points instead of two dependent scalar
//! ones, which bound the loop (its additions, on two add pipes). A
//! regrouped sum, within the contract's bound; the other slots keep the
//! evaluator's bits. GMM's batched gradient, relaxed (best of three
//! alternating runs against the parent commit): d10_K25 1.91 → 1.77 ms,
//! d20_K5 0.973 → 0.908, d32_K5 2.12 → 1.95.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::hoist::prim_can_fail;
use crate::anf::{Atom, Binding, Block, LoopKind, Rhs};
use crate::codegen::layout::{component_slot, component_type};
use crate::ir::{Name, Prim, Type};

/// An index of a read or an `addAt` in the nest: `i` is the outer fold's
/// index, `s` the inner fold's, `c` a value bound outside the nest.
#[derive(Clone, Debug)]
pub enum At {
    /// `i + c` (`i` when `c` is none).
    Outer(Option<Atom>),
    /// `s + c` (`s` when `c` is none).
    Inner(Option<Atom>),
    /// `o[s]`, `o` an array of Indices bound outside.
    Table(Name),
    /// `o[s] + i`.
    TableOuter(Name),
    /// `c`.
    Const(Atom),
}

/// The length an access is tested against.
#[derive(Clone, Debug)]
pub enum Length {
    /// An array bound outside the nest.
    Outside(Name),
    /// The outer fold's state array at this slot (its pointer; the
    /// length is the next slot), whose length the `addAt`s keep.
    State(usize),
}

/// One test of the guard.
#[derive(Clone, Debug)]
pub enum Check {
    /// A read or an `addAt` in bounds for every `i < n`, `s < m`.
    Access(Length, At),
    /// Every row `a[s]`, `s < m`, at least `n` long.
    Rows(Name),
    /// `o[s] ≥ o[s − 1] + n` for `0 < s < m` (`outer`), else
    /// `o[s] > o[s − 1]`: the slots of an `addAt` at `o[s] + i` (or
    /// `o[s]`) are distinct.
    Order { table: Name, outer: bool },
}

/// How an `addAt`'s slots are shared (Note [Interchanged folds]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Share {
    /// One slot per (s, i).
    None,
    /// One slot per s, added to by every i: kept in a register.
    PerInner,
    /// One slot per i, added to by every s.
    PerOuter,
}

/// An `addAt` of the inner body.
#[derive(Clone, Debug)]
pub struct Add {
    /// The outer state's slot of its array's pointer.
    pub slot: usize,
    pub index: Atom,
    pub value: Atom,
    pub share: Share,
}

/// A fold of folds of `addAt`s to run interchanged.
pub struct Plan<'b> {
    /// The inner fold's count and index.
    pub m: &'b Atom,
    pub inner: &'b Name,
    /// The outer body's terms (each depends on nothing the state holds).
    pub outer_terms: Vec<&'b Binding>,
    /// The inner body's terms.
    pub inner_terms: Vec<&'b Binding>,
    pub adds: Vec<Add>,
    pub checks: Vec<Check>,
    /// The reads and index additions that run without their tests.
    pub covered: HashSet<Name>,
    /// The literal leaves of the outer result: (state slot, literal).
    pub literals: Vec<(usize, Atom)>,
}

/// What a value of the nest's state threading is: a component of the
/// outer state (at a path, false for `fst`), a pair of such, or a literal.
#[derive(Clone, Debug)]
enum Sym {
    Path(Vec<bool>),
    Pair(Box<Sym>, Box<Sym>),
    Lit(Atom),
}

impl Sym {
    fn proj(&self, second: bool) -> Sym {
        match self {
            Sym::Path(p) => {
                let mut p = p.clone();
                p.push(second);
                Sym::Path(p)
            }
            Sym::Pair(a, b) => {
                if second {
                    (**b).clone()
                } else {
                    (**a).clone()
                }
            }
            Sym::Lit(a) => Sym::Lit(a.clone()),
        }
    }
}

/// The plan for `ifold (fun s i -> body) z n` of state type `st`, if it
/// is a fold of folds of `addAt`s that the interchange leaves exact.
/// `built(a)`: `a` is an array with a buffer (not fused); `in_place(x)`:
/// the `addAt` bound to `x` updates in place.
pub fn plan<'b>(
    (index, state, st): (&Name, &Name, &Type),
    body: &'b Block,
    built: impl Fn(&Name) -> bool,
    in_place: impl Fn(&Name) -> bool,
) -> Option<Plan<'b>> {
    // One division at most: two could fail in another order, at another
    // site (Note [Failure sites]).
    if super::divisions(body) > 1 {
        return None;
    }
    // The outer body: projections and pairs of the state, one inner fold,
    // and terms.
    let mut syms: HashMap<&Name, Sym> = HashMap::default();
    syms.insert(state, Sym::Path(Vec::new()));
    let mut outer_terms = Vec::new();
    let mut inner = None;
    for b in &body.binds {
        if let Some(s) = threads(b, &syms)? {
            syms.insert(&b.name, s);
            continue;
        }
        match &b.rhs {
            Rhs::Loop {
                kind: LoopKind::IFold,
                n,
                state: Some((init, s2, st2)),
                index: k,
                body: ib,
            } if inner.is_none() => {
                let init = sym(init, &syms)?;
                syms.insert(&b.name, init.clone());
                inner = Some((n, init, s2, st2, k, ib));
            }
            Rhs::Prim(_, args) if !args.iter().any(|a| var_in(a, &syms)) => outer_terms.push(b),
            _ => return None,
        }
    }
    let (m, init, s2, st2, s, ib) = inner?;
    // The outer result: the state itself, or literals.
    let mut literals = Vec::new();
    if !returns_state(
        &sym(&body.result, &syms)?,
        st,
        &mut Vec::new(),
        st,
        &mut literals,
    ) {
        return None;
    }
    // The inner body: projections and pairs of its state, `addAt`s into
    // its arrays, and terms.
    let mut syms2: HashMap<&Name, Sym> = HashMap::default();
    syms2.insert(s2, init.clone());
    let mut inner_terms = Vec::new();
    let mut adds: Vec<(&Binding, Vec<bool>)> = Vec::new();
    for b in &ib.binds {
        let mut uses_outer = false;
        b.rhs.for_each_atom(&mut |a| uses_outer |= var_in(a, &syms));
        if uses_outer {
            return None;
        }
        if let Some(s) = threads(b, &syms2)? {
            syms2.insert(&b.name, s);
            continue;
        }
        match &b.rhs {
            Rhs::Prim(Prim::AddAt, args) if var_in(&args[0], &syms2) => {
                let Sym::Path(p) = sym(&args[0], &syms2)? else {
                    return None;
                };
                let ok = component_type(st, &p) == Some(&Type::array(Type::Double))
                    && *args[2].ty() == Type::Double
                    && !var_in(&args[1], &syms2)
                    && !var_in(&args[2], &syms2)
                    && in_place(&b.name)
                    && !adds.iter().any(|(_, q)| *q == p);
                if !ok {
                    return None;
                }
                syms2.insert(&b.name, Sym::Path(p.clone()));
                adds.push((b, p));
            }
            Rhs::Prim(_, args) if !args.iter().any(|a| var_in(a, &syms2)) => inner_terms.push(b),
            _ => return None,
        }
    }
    if ib.result.var().is_some_and(|x| syms.contains_key(x))
        || !same_leaves(&sym(&ib.result, &syms2)?, &init, st2)
    {
        return None;
    }
    // A state array is used once: by its `addAt`, a pair or the result.
    let mut uses: HashMap<&Name, usize> = HashMap::default();
    let mut count = |a: &'b Atom| {
        if let Some(x) = a.var() {
            *uses.entry(x).or_default() += 1;
        }
    };
    for b in body.binds.iter().chain(&ib.binds) {
        if let Rhs::Prim(_, args) = &b.rhs {
            args.iter().for_each(&mut count);
        } else if let Rhs::Loop {
            state: Some((init, ..)),
            ..
        } = &b.rhs
        {
            count(init);
        }
    }
    count(&body.result);
    count(&ib.result);
    let arrays_once = |syms: &HashMap<&Name, Sym>, ty_of: &dyn Fn(&Name) -> Option<Type>| {
        syms.keys().all(|x| {
            ty_of(x).is_none_or(|t| !matches!(t, Type::Array(_)))
                || uses.get(x).copied().unwrap_or(0) <= 1
        })
    };
    let ty_of = |x: &Name| {
        body.binds
            .iter()
            .chain(&ib.binds)
            .find(|b| &b.name == x)
            .map(|b| b.ty.clone())
    };
    if !arrays_once(&syms, &ty_of) || !arrays_once(&syms2, &ty_of) {
        return None;
    }
    // Every name bound in the nest; the rest is outside.
    let mut bound: HashSet<&Name> = HashSet::default();
    bound.extend([index, state, s2, s]);
    bound.extend(body.binds.iter().map(|b| &b.name));
    bound.extend(ib.binds.iter().map(|b| &b.name));
    let outside = |a: &Atom| a.var().is_none_or(|x| !bound.contains(x));
    if !outside(m) {
        return None;
    }
    // The accesses and their tests.
    let mut cx = Classify {
        outer: index,
        inner: s,
        outside: &outside,
        built: &built,
        ix: HashMap::default(),
        rows: HashMap::default(),
        used_as_index: HashSet::default(),
        checks: Vec::new(),
        covered: HashSet::default(),
    };
    for b in &outer_terms {
        cx.term(b, false)?;
    }
    for b in &inner_terms {
        cx.term(b, true)?;
    }
    let mut out = Vec::new();
    for (b, p) in &adds {
        let Rhs::Prim(_, args) = &b.rhs else {
            return None;
        };
        let at = cx.at(&args[1], true)?;
        let slot = component_slot(st, p).ok()?;
        let share = match &at {
            At::Outer(_) => Share::PerOuter,
            At::Inner(_) => Share::PerInner,
            At::Table(t) => {
                cx.checks.push(Check::Order {
                    table: t.clone(),
                    outer: false,
                });
                Share::PerInner
            }
            At::TableOuter(t) => {
                cx.checks.push(Check::Order {
                    table: t.clone(),
                    outer: true,
                });
                Share::None
            }
            At::Const(_) => return None,
        };
        if let Some(x) = args[1].var() {
            cx.used_as_index.insert(x.clone());
        }
        cx.checks.push(Check::Access(Length::State(slot), at));
        out.push(Add {
            slot,
            index: args[1].clone(),
            value: args[2].clone(),
            share,
        });
    }
    // An index addition is covered only where an access tests it.
    if cx
        .ix
        .iter()
        .any(|(x, at)| !matches!(at, At::Table(_)) && !cx.used_as_index.contains(*x))
    {
        return None;
    }
    Some(Plan {
        m,
        inner: s,
        outer_terms,
        inner_terms,
        adds: out,
        checks: cx.checks,
        covered: cx.covered,
        literals,
    })
}

/// The reads and index additions of a nest's terms.
struct Classify<'a, 'b> {
    outer: &'a Name,
    inner: &'a Name,
    outside: &'a dyn Fn(&Atom) -> bool,
    built: &'a dyn Fn(&Name) -> bool,
    /// Index-valued terms of a known form.
    ix: HashMap<&'b Name, At>,
    /// Rows `a[s]`: the row's name and `a`.
    rows: HashMap<&'b Name, Name>,
    used_as_index: HashSet<Name>,
    checks: Vec<Check>,
    covered: HashSet<Name>,
}

impl<'b> Classify<'_, 'b> {
    /// The form of index `k` (`in_inner`: in the inner body, where `s` is
    /// bound).
    fn at(&self, k: &Atom, in_inner: bool) -> Option<At> {
        let x = match k.var() {
            None => return Some(At::Const(k.clone())),
            Some(x) => x,
        };
        if x == self.outer {
            Some(At::Outer(None))
        } else if x == self.inner && in_inner {
            Some(At::Inner(None))
        } else if let Some(at) = self.ix.get(x) {
            Some(at.clone())
        } else if (self.outside)(k) {
            Some(At::Const(k.clone()))
        } else {
            None
        }
    }

    /// Classifies term `b`: a read, an index addition, or a total
    /// primitive (or a Double division); `None` refuses the nest.
    fn term(&mut self, b: &'b Binding, in_inner: bool) -> Option<()> {
        let Rhs::Prim(op, args) = &b.rhs else {
            return None;
        };
        match op {
            Prim::Get => {
                let a = args[0].var()?;
                let at = self.at(&args[1], in_inner)?;
                if let Some(x) = args[1].var() {
                    self.used_as_index.insert(x.clone());
                }
                if (self.outside)(&args[0]) && (self.built)(a) {
                    match (&b.ty, &at) {
                        (Type::Array(e), At::Inner(None)) if !e.has_array() => {
                            self.rows.insert(&b.name, a.clone());
                        }
                        (Type::Array(_), _) => return None,
                        (Type::Index, At::Inner(None)) => {
                            self.ix.insert(&b.name, At::Table(a.clone()));
                        }
                        _ => {}
                    }
                    self.checks
                        .push(Check::Access(Length::Outside(a.clone()), at));
                } else if let Some(array) = self.rows.get(a)
                    && matches!(at, At::Outer(None))
                {
                    self.checks.push(Check::Rows(array.clone()));
                } else {
                    return None;
                }
                self.covered.insert(b.name.clone());
            }
            Prim::Add if b.ty == Type::Index => {
                let form = |x: &Atom, c: &Atom| -> Option<At> {
                    let v = x.var()?;
                    if !(self.outside)(c) {
                        if v == self.outer
                            && let Some(At::Table(t)) = c.var().and_then(|c| self.ix.get(c))
                        {
                            return Some(At::TableOuter(t.clone()));
                        }
                        return None;
                    }
                    if v == self.outer {
                        Some(At::Outer(Some(c.clone())))
                    } else if v == self.inner && in_inner {
                        Some(At::Inner(Some(c.clone())))
                    } else {
                        None
                    }
                };
                let at = form(&args[0], &args[1]).or_else(|| form(&args[1], &args[0]))?;
                self.ix.insert(&b.name, at);
                self.covered.insert(b.name.clone());
            }
            Prim::Div if b.ty == Type::Double => {}
            // Total, but an allocation.
            Prim::Concat => return None,
            _ if prim_can_fail(*op, args) => return None,
            _ => {}
        }
        Some(())
    }
}

/// What `b` threads of the state: `Some(Some(s))` for a projection or a
/// pair of state values (`s` what it is), `Some(None)` for a binding that
/// uses none, `None` for a pair of a state value and something else.
fn threads(b: &Binding, syms: &HashMap<&Name, Sym>) -> Option<Option<Sym>> {
    Some(match &b.rhs {
        Rhs::Prim(op @ (Prim::Fst | Prim::Snd), args) if var_in(&args[0], syms) => {
            Some(sym(&args[0], syms)?.proj(*op == Prim::Snd))
        }
        Rhs::Prim(Prim::Pair, args) if args.iter().any(|a| var_in(a, syms)) => Some(Sym::Pair(
            Box::new(sym(&args[0], syms)?),
            Box::new(sym(&args[1], syms)?),
        )),
        _ => None,
    })
}

fn var_in(a: &Atom, syms: &HashMap<&Name, Sym>) -> bool {
    a.var().is_some_and(|x| syms.contains_key(x))
}

/// What `a` is in the state threading (a literal is itself).
fn sym(a: &Atom, syms: &HashMap<&Name, Sym>) -> Option<Sym> {
    match a {
        Atom::Lit(..) => Some(Sym::Lit(a.clone())),
        Atom::Var(x, _) => syms.get(x).cloned(),
    }
}

/// Whether `s`, at `path` of the outer state (of type `ty` there, `st`
/// in all), is that component itself, leaf by leaf, or a literal
/// (recorded with its slot).
fn returns_state(
    s: &Sym,
    ty: &Type,
    path: &mut Vec<bool>,
    st: &Type,
    literals: &mut Vec<(usize, Atom)>,
) -> bool {
    if let Type::Pair(a, b) = ty
        && !matches!(s, Sym::Path(p) if p == path)
    {
        return [(false, a), (true, b)].into_iter().all(|(second, t)| {
            path.push(second);
            let ok = returns_state(&s.proj(second), t, path, st, literals);
            path.pop();
            ok
        });
    }
    match s {
        Sym::Path(p) => p == path,
        Sym::Lit(a) if matches!(ty, Type::Double | Type::Index | Type::Bool) => {
            match component_slot(st, path) {
                Ok(slot) => {
                    literals.push((slot, a.clone()));
                    true
                }
                Err(_) => false,
            }
        }
        _ => false,
    }
}

/// Whether the inner fold's result `r` has, leaf by leaf over its state
/// type `ty`, what its initial state `init` has: the same component of
/// the outer state, or an equal literal.
fn same_leaves(r: &Sym, init: &Sym, ty: &Type) -> bool {
    if let Type::Pair(a, b) = ty {
        if let (Sym::Path(p), Sym::Path(q)) = (r, init)
            && p == q
        {
            return true;
        }
        return same_leaves(&r.proj(false), &init.proj(false), a)
            && same_leaves(&r.proj(true), &init.proj(true), b);
    }
    match (r, init) {
        (Sym::Path(p), Sym::Path(q)) => p == q,
        (Sym::Lit(x), Sym::Lit(y)) => format!("{x:?}") == format!("{y:?}"),
        _ => false,
    }
}
