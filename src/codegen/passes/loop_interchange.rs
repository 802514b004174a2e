//! Which loop nests run with their loops interchanged (Note
//! [Interchange]): `build`s of sums, and `build`s of `build`s.
//!
//! # Note [Interchange]
//!
//! `x = build n (fun j -> ifold (fun s i -> s + e) z m)` — each element a
//! sum over `i` — reads whatever `e` reads in the order j-major. When `e`
//! reads a matrix at `a[i][j]`, as the transposed products of gradients
//! do (NNMF's update rule, Wᵀ(…)), that walks the matrix by columns. The
//! lowering then runs the same sums i-major instead: every `x[j]` starts
//! at `z`, and for i = 0 … m−1, for j = 0 … n−1, `x[j] += e(i, j)`. Each
//! element adds the same terms in the same order (i ascending), so every
//! bit is the same; only the order *between* elements changes.
//!
//! That order is visible only through ⊥, so the interchange is taken only
//! where no ⊥ can tell:
//!
//! - the body binds only total primitives (Double `+ - *` and negation,
//!   `sin`, `cos`, `exp`, comparisons, `not`, `toDouble`, pairs and
//!   projections, `length`), Double divisions, and reads of arrays bound
//!   outside the nest at `i`, `j` or a value bound outside, or of a row
//!   `r = a[i]` at `j`; the sum is `s + e` with `s` used nowhere else;
//! - at the binding, a guard tests every read in bounds for every `i < m`
//!   and `j < n` (E-Get-Bot can then not happen); a row read at `j` needs
//!   a loop over the rows. When it fails, the nest runs as written and
//!   stops with the evaluator's ⊥;
//! - so the only ⊥ left is a division by zero, whose details do not
//!   depend on which element divides: with one division, the first one
//!   in either order is the same ⊥. With two, the interchanged order may
//!   meet the other division's zero first, at another site (Note
//!   [Failure sites]): a division by zero in the interchanged nest then
//!   runs the nest again as written, which stops at the evaluator's ⊥
//!   (the fast path wrote only its own buffer; the iterations it was
//!   charged are given back first).
//!
//! E-Build-Bot (`n < 0`) is tested first, then E-IFold-Bot (`m < 0` when
//! `n > 0`), as the nest would.
//!
//! ## Terms once per i, and pairs
//!
//! In the i-major nest, the terms that do not depend on `j` (`u[i]`, a
//! row `a[i]`) are computed once per `i` — when `n > 0` only, so that a
//! division by zero among them is a ⊥ exactly when the nest has one. The
//! others run per element; when each of them is Double `+ - * /` or
//! negation, or a read at `j` of an array of Doubles, they run two
//! elements at a time in the lanes of an `f64x2` (and the last element
//! alone when `n` is odd). A lane operation is the IEEE operation of the
//! scalar code on the same operands, so every bit is the same; a
//! division tests both divisors, and its ⊥ is the same from any element.
//! NNMF's gradient is such a nest: its two divisions per element then
//! take one SSE2 `divpd` per two elements.
//!
//! ## Blocks
//!
//! Paired, each element still makes a round trip through memory per `i`
//! (load `x[j]`, add, store), and the loop is bound by it. So when the
//! elements pair, no term divides (a division's throughput would bound
//! the loop anyway), and the terms that do not depend on `j` are cheap to
//! repeat and cannot be ⊥ ([`blocks`]: reads, Double `+ - *`,
//! projections, `length`, `toDouble`), the elements run in blocks of
//! eight first: per tile of 32 values of `i` and per block, four `f64x2`
//! sums are loaded into registers, every `i` of the tile in order adds
//! its terms to them (the terms that do not depend on `j` recomputed per
//! block), and they are stored. The tile keeps the rows it reads in the
//! first-level cache and TLB from one block to the next (untiled, NNMF's
//! update rule, which divides and is not blocked now, walked 1 000 rows
//! of 8 KB per block and took 1.2 ms instead of 0.83). The elements left
//! (fewer than eight) run as above. Each element still adds the same
//! terms in the same order, so every bit is the same, and inside the
//! guard nothing can be ⊥. The products of a batched GMM (the triangular
//! factor times the points' deviations, for every point at once:
//! `batchedDataTerm` in `examples/adbench/gmm.fsm`) are such a nest: two loads, a
//! multiplication and an addition per two elements, no store.
//!
//! ## Pairs of rows
//!
//! A `build` over rows `r` whose every row is such a nest, `build d (fun r
//! -> pre; x = build n (fun j -> ifold (fun t s -> t + e) z m); x)` (the
//! batched products `qy[r][j] = Σ_{s ≤ r} Q[r][s] · ys[s][j]`, `m = r +
//! 1`), reads the same terms that do not depend on `r` — the row
//! `ys[s]`, its block — for every row. So when `pre` allocates and writes
//! nothing and both rows' nests run in blocks, rows r and r + 1 run
//! together ([`rows`], `Lower::paired_rows`): `pre` of both, their sizes
//! (equal), counts, guards and limits tested (any ⊥, failing guard or
//! unequal size abandons the pair, and row r runs alone as written, as
//! under Note [Jamming]), both rows allocated (r's
//! first) and filled with their `z`, then per tile and block of eight
//! points both rows' sums in registers (eight `f64x2`s) over the terms
//! both have, the terms that do not depend on `r` computed once for both;
//! then each row's remaining terms and elements alone, as above. Each
//! element still adds the same terms in the same order, so every bit is
//! the same. Loads of `ys`'s block are shared by the two rows: half of
//! them per product.
//!
//! ## Builds of builds
//!
//! `x = build n (fun j -> build m (fun i -> e))`, with `m` bound outside
//! the nest, is a transposition when `e` reads `a[i][j]`: vector forward
//! mode's wrapper turns each output's tangent vector into one row per
//! direction (`build nd (fun k -> build m (fun i -> (fst r[i], (snd
//! r[i])[k])))`), and j-major it chases every output's tangent once per
//! direction. Under the same conditions on `e` (a row may also be a
//! projection of `a[i]`, such as `snd r[i]`) and the same guard, the
//! lowering allocates the `n` rows first (in order, each of `m`
//! elements) and then runs i-major, storing `e(i, j)` into row `j` at
//! `i`. Each element is computed by the same operations from the same
//! values, so every bit is the same; the ⊥s are E-Build-Bot of `n`, then
//! of `m` (when `n > 0`), and a division by zero, as above.

use rustc_hash::FxHashSet as HashSet;

use super::hoist::prim_can_fail;
use crate::anf::{Atom, Binding, Block, LoopKind, Rhs};
use crate::ir::{Name, Prim, Type};

/// A read the guard must test.
#[derive(Clone, Debug)]
pub enum Read {
    /// `a[i]`: `m ≤ length a`.
    Outer(Name),
    /// `a[j]`: `n ≤ length a`.
    Inner(Name),
    /// `a[c]`: `0 ≤ c < length a`.
    Const(Name, Atom),
    /// `r[j]` of a row `r` in `a[i]` (`a[i]` itself, or a projection of
    /// it): `n ≤ length r` for every `i < m`.
    Row(Row),
}

/// Where a row is: in the elements of `array`, `stride` slots each, at
/// slot `at` of an element.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub array: Name,
    pub at: usize,
    pub stride: usize,
}

/// A `build` of sums to run interchanged.
pub struct Plan<'b> {
    /// The sum's count, initial value, state, index and body (its last
    /// binding the addition).
    pub m: &'b Atom,
    pub z: &'b Atom,
    pub index: &'b Name,
    /// The sum's body without its addition.
    pub terms: &'b [Binding],
    /// The term added: `e` of `s + e`.
    pub term: &'b Atom,
    pub reads: Vec<Read>,
}

/// A `build` of rows, each a nest to run interchanged, to run two rows at
/// a time (Note [Interchange], pairs of rows).
pub struct Rows<'b> {
    /// The bindings before the nest, in order: they allocate and write
    /// nothing.
    pub pre: Vec<&'b Binding>,
    /// The nest's binding, its size and index, and its plan.
    pub nest: &'b Binding,
    pub n: &'b Atom,
    pub j: &'b Name,
    pub plan: Plan<'b>,
}

/// The plan for `build d (fun r -> body)` whose every row is a nest that
/// the interchange leaves exact, and `pre` primitives that allocate and
/// write nothing (Note [Interchange], pairs of rows).
pub fn rows<'b>(body: &'b Block) -> Option<Rows<'b>> {
    let (nest, pre) = body.binds.split_last()?;
    if body.result.var() != Some(&nest.name) {
        return None;
    }
    let Rhs::Loop {
        kind: LoopKind::Build,
        n,
        state: None,
        index: j,
        body: outer,
    } = &nest.rhs
    else {
        return None;
    };
    let pure = |b: &Binding| matches!(&b.rhs, Rhs::Prim(op, _) if !matches!(op, Prim::Concat | Prim::Accum | Prim::AddAt));
    if !pre.iter().all(pure) {
        return None;
    }
    let plan = plan(j, outer, &nest.ty)?;
    Some(Rows {
        pre: pre.iter().collect(),
        nest,
        n,
        j,
        plan,
    })
}

/// The bindings of `terms` that depend on any of `names`, directly or
/// through another.
pub fn depending(terms: &[Binding], names: &HashSet<Name>) -> HashSet<Name> {
    let mut out: HashSet<Name> = HashSet::default();
    for b in terms {
        let mut uses = false;
        b.rhs.for_each_atom(&mut |a| {
            uses |= a
                .var()
                .is_some_and(|x| names.contains(x) || out.contains(x))
        });
        if uses {
            out.insert(b.name.clone());
        }
    }
    out
}

/// A `build` of `build`s to run transposed (Note [Interchange], builds of
/// builds).
pub struct Transpose<'b> {
    /// The inner `build`'s size, index and body.
    pub m: &'b Atom,
    pub index: &'b Name,
    pub body: &'b Block,
    pub reads: Vec<Read>,
}

/// The plan for `build n (fun j -> body)`, if it is a build of sums that
/// the interchange leaves exact.
pub fn plan<'b>(j: &Name, outer: &'b Block, ty: &Type) -> Option<Plan<'b>> {
    if *ty != Type::array(Type::Double) {
        return None;
    }
    let Rhs::Loop {
        kind: LoopKind::IFold,
        n: m,
        state: Some((z, s, Type::Double)),
        index: i,
        body,
    } = only_loop(outer)?
    else {
        return None;
    };
    // Bound outside the nest: not j, not the fold's names, not the body's.
    let inside = |x: &Name| x == j || x == i || x == s || body.binds.iter().any(|b| &b.name == x);
    let outside = |a: &Atom| a.var().is_none_or(|x| !inside(x));
    if !outside(m) || !outside(z) {
        return None;
    }
    let (last, rest) = body.binds.split_last()?;
    if body.result.var() != Some(&last.name) {
        return None;
    }
    let term = match &last.rhs {
        Rhs::Prim(Prim::Add, args) if last.ty == Type::Double => match (&args[0], &args[1]) {
            (Atom::Var(x, _), e) | (e, Atom::Var(x, _)) if x == s && e.var() != Some(s) => e,
            _ => return None,
        },
        _ => return None,
    };
    let mentions_s = |a: &Atom| a.var() == Some(s);
    if mentions_s(term) || rest.iter().any(|b| mentions(b, s)) {
        return None;
    }
    let reads = reads(rest, i, j, &inside)?;
    Some(Plan {
        m,
        z,
        index: i,
        terms: rest,
        term,
        reads,
    })
}

/// The plan for `build n (fun j -> outer)`, if it is a build of builds
/// that the transposition leaves exact.
pub fn transpose<'b>(j: &Name, outer: &'b Block) -> Option<Transpose<'b>> {
    let Rhs::Loop {
        kind: LoopKind::Build,
        n: m,
        state: None,
        index: i,
        body,
    } = only_loop(outer)?
    else {
        return None;
    };
    let inside = |x: &Name| x == j || x == i || body.binds.iter().any(|b| &b.name == x);
    if m.var().is_some_and(inside) {
        return None;
    }
    // The elements hold no arrays (each is stored where it is computed).
    if body.result.ty().has_array() {
        return None;
    }
    let reads = reads(&body.binds, i, j, &inside)?;
    Some(Transpose {
        m,
        index: i,
        body,
        reads,
    })
}

/// The bindings of `terms` that depend on `j`, directly or through
/// another.
pub fn varying(terms: &[Binding], j: &Name) -> HashSet<Name> {
    depending(terms, &HashSet::from_iter([j.clone()]))
}

/// Whether the terms that depend on j can run two elements at a time
/// (Note [Interchange], pairs): each is Double `+ - * /` or negation, a
/// read at j of an array of Doubles, an order comparison of Doubles, or a
/// Double conditional of two atoms on such a comparison (a lane-wise
/// select, Note [Selects]), and the term added is a Double. With `math`
/// (the relaxed contract, Note [Lane sums] in `codegen/lower/lane_sums.rs`),
/// `log` and `exp` of a Double too.
pub fn pairs(terms: &[Binding], term: &Atom, varying: &HashSet<Name>, math: bool) -> bool {
    let doubles = |args: &[Atom]| args.iter().all(|a| *a.ty() == Type::Double);
    let mut masks: HashSet<&Name> = HashSet::default();
    *term.ty() == Type::Double
        && terms
            .iter()
            .filter(|b| varying.contains(&b.name))
            .all(|b| match &b.rhs {
                Rhs::Prim(Prim::Add | Prim::Sub | Prim::Mul | Prim::Div | Prim::Neg, args) => {
                    b.ty == Type::Double && doubles(args)
                }
                Rhs::Prim(Prim::Log | Prim::Exp, args) => {
                    math && b.ty == Type::Double && doubles(args)
                }
                Rhs::Prim(Prim::Get, args) => b.ty == Type::Double && args[0].var().is_some(),
                Rhs::Prim(Prim::Lt | Prim::Gt | Prim::Le | Prim::Ge, args) if doubles(args) => {
                    masks.insert(&b.name);
                    true
                }
                Rhs::If(c, t, e) => {
                    b.ty == Type::Double
                        && c.var().is_some_and(|c| masks.contains(c))
                        && t.binds.is_empty()
                        && e.binds.is_empty()
                }
                _ => false,
            })
}

/// Whether a nest whose elements pair runs in blocks (Note [Interchange],
/// blocks): no term divides (a division's throughput, not the round trip
/// through memory, bounds such a loop), and the terms that do not depend
/// on j, run once per block instead of once per i, are each a read (the
/// guard tests it), a projection, `length`, `toDouble`, or `+ - *` or
/// negation that cannot be ⊥ (Double): nothing costly to repeat, and no
/// ⊥ at all.
pub fn blocks(terms: &[Binding], varying: &HashSet<Name>) -> bool {
    terms.iter().all(|b| match &b.rhs {
        Rhs::Prim(Prim::Div, _) => false,
        _ if varying.contains(&b.name) => true,
        Rhs::Prim(Prim::Get | Prim::Fst | Prim::Snd | Prim::Length | Prim::ToDouble, _) => true,
        Rhs::Prim(op @ (Prim::Add | Prim::Sub | Prim::Mul | Prim::Neg), args) => {
            !prim_can_fail(*op, args)
        }
        _ => false,
    })
}

/// The right side of `outer`'s one binding when `outer` is just that
/// binding (its result the bound name).
fn only_loop(outer: &Block) -> Option<&Rhs> {
    let [inner] = outer.binds.as_slice() else {
        return None;
    };
    (outer.result.var() == Some(&inner.name)).then_some(&inner.rhs)
}

/// Whether `b`'s right side mentions `x`.
pub fn mentions(b: &Binding, x: &Name) -> bool {
    let mut found = false;
    b.rhs.for_each_atom(&mut |a| found |= a.var() == Some(x));
    found
}

/// The reads of `binds`, the body of a nest over `j` (outside) and `i`
/// (inside), if every binding is one the interchange allows: total
/// primitives, Double divisions, and reads of arrays bound outside the
/// nest at `i`, `j` or a value bound outside, or of a row (an array in
/// `a[i]`, reached by projections) at `j`.
fn reads(
    binds: &[Binding],
    i: &Name,
    j: &Name,
    inside: &dyn Fn(&Name) -> bool,
) -> Option<Vec<Read>> {
    let outside = |a: &Atom| a.var().is_none_or(|x| !inside(x));
    // Values with arrays in `a[i]`: the name, and where it is.
    let mut parts: Vec<(&Name, Row)> = Vec::new();
    let part = |parts: &[(&Name, Row)], x: &Name| {
        parts
            .iter()
            .find(|(r, _)| *r == x)
            .map(|(_, row)| row.clone())
    };
    let mut reads = Vec::new();
    for bind in binds {
        let Rhs::Prim(op, args) = &bind.rhs else {
            return None;
        };
        let double = args.first().is_some_and(|a| *a.ty() == Type::Double);
        match op {
            Prim::Fst | Prim::Snd => {
                if let Some(x) = args[0].var()
                    && let Some(mut row) = part(&parts, x)
                {
                    if let (Prim::Snd, Type::Pair(l, _)) = (op, args[0].ty()) {
                        row.at += crate::codegen::layout::slots(l).ok()?;
                    }
                    if bind.ty.has_array() {
                        parts.push((&bind.name, row));
                    }
                }
            }
            Prim::Get => {
                let (Atom::Var(a, _), k) = (&args[0], &args[1]) else {
                    return None;
                };
                let kv = k.var();
                let read = if !inside(a) {
                    if kv == Some(i) {
                        if bind.ty.has_array() {
                            let stride = crate::codegen::layout::slots(&bind.ty).ok()?;
                            let row = Row {
                                array: a.clone(),
                                at: 0,
                                stride,
                            };
                            parts.push((&bind.name, row));
                        }
                        Read::Outer(a.clone())
                    } else if kv == Some(j) {
                        Read::Inner(a.clone())
                    } else if outside(k) {
                        Read::Const(a.clone(), k.clone())
                    } else {
                        return None;
                    }
                } else if let Some(row) = part(&parts, a)
                    && kv == Some(j)
                    && matches!(&args[0].ty(), Type::Array(e) if !e.has_array())
                {
                    Read::Row(row)
                } else {
                    return None;
                };
                reads.push(read);
            }
            Prim::Div if double => {}
            // Total, but an allocation per element.
            Prim::Concat => return None,
            // Total primitives, as the table says.
            _ if !prim_can_fail(*op, args) => {}
            _ => return None,
        }
    }
    // A part is only read or projected, never passed on.
    let escapes = binds.iter().any(|b| match &b.rhs {
        Rhs::Prim(Prim::Get | Prim::Fst | Prim::Snd | Prim::Length, _) => false,
        Rhs::Prim(_, args) => args
            .iter()
            .any(|x| x.var().is_some_and(|x| part(&parts, x).is_some())),
        _ => false,
    });
    if escapes {
        return None;
    }
    Some(reads)
}
