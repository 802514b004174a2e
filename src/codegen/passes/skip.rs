//! Folds that skip iterations which leave their state as it is (Note
//! [Skipping folds]).
//!
//! # Note [Skipping folds]
//!
//! The vector maximum's optimised gradient is an argmax,
//!
//! ```text
//! ifold (fun s i -> if v[i] > fst s then (v[i], i) else s) (v[0], 0) n
//! ```
//!
//! one load, one comparison and one well-predicted branch per element,
//! each iteration waiting for the last. Most iterations return `s`
//! itself, and whether iteration `i` does depends only on `s` and `i`.
//! So when the test of four consecutive iterations, each evaluated with
//! the *same* state `s`, says "keep `s`" for all four, the four
//! iterations return `s` — by induction, iteration `i + 1` then starts
//! from `s` too — and the loop can move on by four having run one test
//! in `f64x2` lanes (two loads, two comparisons, one `or`, one branch).
//! When a lane says otherwise, the four iterations run one by one as
//! written. C's argmax runs 1.7–2.5× faster so (`benches/aot/argmax.c`,
//! 0.51–0.77 → 0.18–0.46 ms at 10⁶ on a loaded machine), and the vector
//! maximum's gradient (the argmax, then a one-hot `build` filled by
//! `memset`) 1.27–1.41 → 0.86–0.99 ms, best and median of 10 alternating
//! AOT rounds (`benches/aot/vmax.c`): both loops are now bound by memory.
//!
//! A fold over `i` with state `s` skips when its body is
//!
//! ```text
//! t₁ = …; …; tₖ = …;  r = if c then T else s;  => r     (or  if c then s else T)
//! ```
//!
//! where
//!
//! 1. the test `c` depends on `i`;
//! 2. every `tⱼ` that depends on `i` is what the paired lowering computes
//!    in lanes (Note [Bounds guards], pairs) without a test: Double
//!    `+ - *` and negation, an order comparison of Doubles, a read
//!    `a[i]` of an array of Doubles whose bounds test the loop's guard
//!    covers or that the loop runs over — no division (a zero divisor of
//!    a later iteration is not this iteration's ⊥);
//! 3. every other `tⱼ` is total: a projection, a comparison, Double
//!    `+ - *` or negation (no read, no Index arithmetic, which can
//!    overflow);
//! 4. `T`'s bindings are primitives (the body is lowered twice, in the
//!    four-iteration loop and in the tail; no loop inside it);
//! 5. the conditional is not a select: a Double state and an atom `T`
//!    (the maximum itself) is one `maxsd` per element (Note [Selects] in
//!    `codegen/lower/mod.rs`), branch-free, which skipping beat by 15% on
//!    random data but ran 2.5× slower on sorted data, where every four
//!    iterations change the state (`vmax`'s objective, AOT, 0.65 → 0.56
//!    and 0.66 → 1.6 ms). The argmax's pair state has no such form; on
//!    sorted data its gradient ran 1.9–2.4 → 2.4–2.6 ms.
//!
//! Exactness. Under 2 and 3 the prefix `t₁ … tₖ` is defined and free of
//! effects at every index of the loop, so evaluating it ahead, for
//! iterations that then run anyway, changes nothing observable; and each
//! lane operation is the scalar IEEE operation (`float_cc`'s comparison,
//! NaN included), so the lanes' tests are the iterations' tests. Every
//! iteration that can change the state, or fail (in `T`), runs as
//! written, in order: values and the first ⊥ are the evaluator's. The
//! last `n mod 4` iterations run as written.

use rustc_hash::FxHashSet as HashSet;

use crate::anf::{Atom, Binding, Block as AnfBlock, Rhs};
use crate::ir::{Name, Prim, Type};

use super::loop_interchange;

/// How a fold skips (Note [Skipping folds]).
pub struct Plan {
    /// The test `c`.
    pub test: Name,
    /// The state is kept when the test is true (`if c then s else T`).
    pub keep_when: bool,
    /// The bindings before the conditional.
    pub prefix: usize,
    /// Those of them that depend on the index.
    pub varying: HashSet<Name>,
}

/// The plan of a fold over `index` with state `s`, if its body skips;
/// `readable(b)` says whether `b` is a read `a[index]` that needs no
/// bounds test (covered by the guard, or the loop runs over `a`).
pub fn plan(
    index: &Name,
    s: &Name,
    body: &AnfBlock,
    readable: impl Fn(&Binding) -> bool,
) -> Option<Plan> {
    let (last, prefix) = body.binds.split_last()?;
    if body.result.var() != Some(&last.name) {
        return None;
    }
    let Rhs::If(c, t, e) = &last.rhs else {
        return None;
    };
    let kept = |b: &AnfBlock| b.binds.is_empty() && b.result.var() == Some(s);
    let (keep_when, other) = match (kept(t), kept(e)) {
        (false, true) => (false, t),
        (true, false) => (true, e),
        _ => return None,
    };
    if !other.binds.iter().all(|b| matches!(b.rhs, Rhs::Prim(..)))
        || (other.binds.is_empty() && last.ty == Type::Double)
    {
        return None;
    }
    let test = c.var()?.clone();
    let varying = loop_interchange::varying(prefix, index);
    if !varying.contains(&test) {
        return None;
    }
    let doubles = |args: &[Atom]| args.iter().all(|a| *a.ty() == Type::Double);
    let ok = prefix.iter().all(|b| {
        let Rhs::Prim(op, args) = &b.rhs else {
            return false;
        };
        if varying.contains(&b.name) {
            match op {
                Prim::Get => b.ty == Type::Double && readable(b),
                Prim::Neg | Prim::Add | Prim::Sub | Prim::Mul => {
                    b.ty == Type::Double && doubles(args)
                }
                Prim::Lt | Prim::Gt | Prim::Le | Prim::Ge => doubles(args),
                _ => false,
            }
        } else {
            match op {
                Prim::Fst | Prim::Snd => true,
                Prim::Neg | Prim::Add | Prim::Sub | Prim::Mul => doubles(args),
                Prim::Lt | Prim::Gt | Prim::Le | Prim::Ge | Prim::Eq => true,
                _ => false,
            }
        }
    });
    ok.then(|| Plan {
        test,
        keep_when,
        prefix: prefix.len(),
        varying,
    })
}
