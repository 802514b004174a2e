//! Note [Horizontal fusion] natively: sibling loops of one count run as
//! one behind a guard, with the evaluator's values and first ⊥, on written
//! programs and on random straight lines of `build`s; an in-place update
//! ends a group, and a block lowered twice groups consistently.

use fsmooth::codegen::CodegenError;
use fsmooth::eval::Value;

use super::{
    Outcome, compile, exactly_all, exactly_on, listing_says, load_entry, native_error, vector,
};

/// Note [Horizontal fusion]: sibling `build`s of one count in a straight
/// line run as one loop behind a guard, the region's other bindings
/// first; any ⊥ or a failing guard continues in the region as written,
/// so values and the first ⊥ are the evaluator's: `a`'s short read (at
/// 2) comes before `q`'s (at 5) although the fused version reads `q`
/// first; a zero divisor, counts that differ at run time (`g`), an empty
/// loop with a zero divisor (no division runs); a pair holding a member
/// between two members (`h`: run after the loop, the member built).
#[test]
fn sibling_loops_run_as_one_with_the_evaluators_bottoms() {
    let src = "let f (v: Vector) (w: Vector) (p: Double) (k: Index) =\n\
               \x20 let a = build (length v) (fun i -> v[i] * p + w[i])\n\
               \x20 let q = w[k]\n\
               \x20 let b = build (length v) (fun i -> a[i] / q + w[i])\n\
               \x20 let c = build (length v) (fun i -> a[i] - b[i] * p)\n\
               \x20 (b, c)\n\
               let g (v: Vector) (w: Vector) (p: Double) =\n\
               \x20 let a = build (length v) (fun i -> v[i] * p)\n\
               \x20 let b = build (length w) (fun i -> a[i] + w[i])\n\
               \x20 build (length w) (fun i -> a[i] * b[i] - p)\n\
               let h (v: Vector) (w: Vector) (p: Double) (k: Index) =\n\
               \x20 let a = build (length v) (fun i -> v[i] * p)\n\
               \x20 let pr = (a, w[k])\n\
               \x20 let b = build (length v) (fun i -> a[i] + w[i])\n\
               \x20 (pr, b)\n";
    let groups = listing_says(src, "f", ";; loops run as one (Note [Horizontal fusion]): ");
    assert_eq!(
        groups.matches(", ").count(),
        2,
        "one group of three: {groups}"
    );
    assert!(
        groups.starts_with('[') && !groups.contains("], ["),
        "{groups}"
    );
    let groups = listing_says(src, "g", ";; loops run as one (Note [Horizontal fusion]): ");
    assert_ne!(groups, "none");
    // `pr` holds `a` and runs after the loop in the fused version.
    let groups = listing_says(src, "h", ";; loops run as one (Note [Horizontal fusion]): ");
    assert_eq!(
        groups.matches(", ").count(),
        1,
        "one group of two: {groups}"
    );
    let (d, i) = (Value::Double, Value::Index);
    let v3 = vector(&[1.0, -2.0, 3.5]);
    let w4 = vector(&[0.5, -1.25, 2.0, 4.0]);
    let w4z = vector(&[0.5, 0.0, 2.0, 4.0]);
    let w2 = vector(&[1.0, 2.0]);
    let v0 = vector(&[]);
    exactly_all(
        src,
        &[
            (
                "f",
                vec![v3.clone(), w4.clone(), d(1.5), i(1)],
                Outcome::Value,
            ),
            (
                "f",
                vec![v3.clone(), w4.clone(), d(1.5), i(7)],
                Outcome::Bottom,
            ),
            (
                "f",
                vec![v3.clone(), w4.clone(), d(1.5), i(-1)],
                Outcome::Bottom,
            ),
            (
                "f",
                vec![v3.clone(), w2.clone(), d(1.5), i(5)],
                Outcome::Bottom,
            ),
            (
                "f",
                vec![v3.clone(), w4z.clone(), d(1.5), i(1)],
                Outcome::Bottom,
            ),
            (
                "f",
                vec![v0.clone(), w4z.clone(), d(1.5), i(1)],
                Outcome::Value,
            ),
            ("g", vec![v3.clone(), w4.clone(), d(0.5)], Outcome::Bottom),
            ("g", vec![v3.clone(), w2.clone(), d(0.5)], Outcome::Value),
            ("g", vec![v3.clone(), v3.clone(), d(0.5)], Outcome::Value),
            ("g", vec![v0.clone(), v0.clone(), d(0.5)], Outcome::Value),
            (
                "h",
                vec![v3.clone(), w4.clone(), d(1.5), i(2)],
                Outcome::Value,
            ),
            (
                "h",
                vec![v3.clone(), w4.clone(), d(1.5), i(4)],
                Outcome::Bottom,
            ),
            (
                "h",
                vec![v3.clone(), w2.clone(), d(1.5), i(0)],
                Outcome::Bottom,
            ),
        ],
    );
    // The first ⊥ of `f` with a short `w` and `k = 5` is `a`'s read at 2.
    let e = native_error(src, "f", &[v3, w2, d(1.5), i(5)]);
    assert!(
        matches!(e, CodegenError::IndexOutOfBounds { index: 2, len: 2 }),
        "{e:?}"
    );
}

/// Note [Horizontal fusion] on random straight lines: `build`s over
/// `length v` or `length w` whose elements are Double arithmetic (with
/// divisions and selects) on reads at the index of the parameters and of
/// the earlier `build`s, between scalar bindings that can fail (a read at
/// `k`, a division, a square root) and pairs holding one of the arrays
/// (deferred past the loop), on vectors of lengths 0 to 4 and
/// divisors that may be zero. Every value and every first ⊥ (its index
/// and length for a read) is the evaluator's; most programs do run a
/// group as one loop.
#[test]
fn random_straight_lines_of_builds_agree_with_the_evaluator() {
    let mut seed = 0x5eed_2026_1126_u64;
    let mut next = move |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut fused_programs = 0;
    let programs = 60;
    for case in 0..programs {
        let mut lines = Vec::new();
        let mut arrays: Vec<String> = Vec::new();
        let mut scalars: Vec<String> = vec!["p".into(), "q".into()];
        let steps = 3 + next(5);
        let mut pairs: Vec<String> = Vec::new();
        for s in 0..steps {
            if !arrays.is_empty() && next(5) == 0 {
                // A pair holding an array (deferred past the loop).
                let x = format!("r{s}");
                let a = &arrays[next(arrays.len() as u64) as usize];
                let c = &scalars[next(scalars.len() as u64) as usize];
                lines.push(format!("  let {x} = ({a}, {c})"));
                pairs.push(x);
            } else if next(3) == 0 {
                let x = format!("s{s}");
                let rhs = match next(4) {
                    0 => "w[k]".to_string(),
                    1 => format!("p / {}", scalars[next(scalars.len() as u64) as usize]),
                    2 => "sqrt q".to_string(),
                    _ => format!("v[k] * {}", scalars[next(scalars.len() as u64) as usize]),
                };
                lines.push(format!("  let {x} = {rhs}"));
                scalars.push(x);
            } else {
                let x = format!("a{s}");
                let count = if next(4) == 0 { "length w" } else { "length v" };
                let leaf = |next: &mut dyn FnMut(u64) -> u64| -> String {
                    match next(4) {
                        0 => "v[i]".to_string(),
                        1 if !arrays.is_empty() => {
                            format!("{}[i]", arrays[next(arrays.len() as u64) as usize])
                        }
                        2 => scalars[next(scalars.len() as u64) as usize].clone(),
                        _ => "w[i]".to_string(),
                    }
                };
                let (a, b, c) = (leaf(&mut next), leaf(&mut next), leaf(&mut next));
                let body = match next(5) {
                    0 => format!("{a} * {b} + {c}"),
                    1 => format!("{a} / {b} - {c}"),
                    2 => format!("if {a} > {b} then {c} else {a}"),
                    3 => format!("-({a}) * {c}"),
                    _ => format!("{a} - {b} * {c}"),
                };
                lines.push(format!("  let {x} = build ({count}) (fun i -> {body})"));
                arrays.push(x);
            }
        }
        let result = match arrays.as_slice() {
            [] => "p".to_string(),
            [a] => format!("vectorSum {a}"),
            [.., a, b] => format!("({a}, vectorSum {b})"),
        };
        let result = match pairs.last() {
            Some(r) => format!("({result}, {r})"),
            None => result,
        };
        let src = format!(
            "let f (v: Vector) (w: Vector) (p: Double) (q: Double) (k: Index) =\n{}\n  {result}\n",
            lines.join("\n")
        );
        let groups = listing_says(
            &src,
            "f",
            ";; loops run as one (Note [Horizontal fusion]): ",
        );
        if groups != "none" {
            fused_programs += 1;
        }
        let (e, native) = {
            let e = load_entry(&src, "f");
            let n = compile(&e);
            (e, n)
        };
        let vs =
            |n: usize, off: f64| vector(&(0..n).map(|j| off + 0.75 * j as f64).collect::<Vec<_>>());
        for arg in 0..6 {
            let (nv, nw) = (next(5) as usize, next(5) as usize);
            let nw = if arg < 3 { nv.max(nw) } else { nw };
            let args = vec![
                vs(nv, -1.0),
                vs(nw, if next(3) == 0 { 0.0 } else { 0.5 }),
                Value::Double([1.5, 0.0, -2.0][next(3) as usize]),
                Value::Double([2.0, 0.0, -0.5][next(3) as usize]),
                Value::Index([0, 2, 5, -1][next(4) as usize]),
            ];
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                exactly_on(&e, &native, "f", &args)
            }));
            assert!(r.is_ok(), "case {case}: {args:?}\n{src}");
        }
    }
    assert!(
        fused_programs * 2 > programs,
        "{fused_programs} of {programs}"
    );
}

/// Note [Horizontal fusion]: the fused version of a region may be run and
/// then abandoned (a bail), so it must write no array that exists before
/// it. An `addAt` that updates its array in place (Note [In-place
/// updates]) between two members ends the group: here `b`'s count differs
/// from `a`'s at run time, so a fused version would bail after adding
/// into `z` once and the region as written would add again.
#[test]
fn in_place_updates_end_a_horizontal_group() {
    let src = "let u (v: Vector) (w: Vector) (k: Index) =\n\
               \x20 let z = build (length w) (fun i -> toDouble i)\n\
               \x20 let a = build (length v) (fun i -> v[i] * 2.0)\n\
               \x20 let z2 = addAt z k 1.0\n\
               \x20 let b = build (length w) (fun i -> a[i] + w[i])\n\
               \x20 (z2, b)\n";
    let (v3, w2) = (vector(&[1.0, 2.0, 3.0]), vector(&[1.0, 2.0]));
    exactly_all(
        src,
        &[
            (
                "u",
                vec![v3.clone(), w2.clone(), Value::Index(1)],
                Outcome::Value,
            ),
            (
                "u",
                vec![v3.clone(), v3.clone(), Value::Index(0)],
                Outcome::Value,
            ),
            (
                "u",
                vec![v3.clone(), w2.clone(), Value::Index(2)],
                Outcome::Bottom,
            ),
        ],
    );
    let updates = listing_says(src, "u", ";; in place: ");
    assert_ne!(updates, "none", "the addAt updates in place");
    let groups = listing_says(src, "u", ";; loops run as one (Note [Horizontal fusion]): ");
    assert_eq!(groups, "none");
}

/// Note [Horizontal fusion]: a block inside a region is lowered twice
/// (once in each version). The first lowering may fuse an array that the
/// second, once an earlier kept member is built, groups and keeps: its
/// old fused reading must not survive (found in review: native code
/// generation failed with "the buffer of fused `x`").
#[test]
fn a_block_lowered_twice_groups_consistently() {
    let src = "let f (v: Vector) (m: Index) =\n\
               \x20 let a0 = build (length v) (fun i -> v[i] * 2.0)\n\
               \x20 let r = ifold (fun acc j ->\n\
               \x20     let a = build (length v) (fun i -> v[i] * acc)\n\
               \x20     let y = build (length v) (fun i -> a[i] + 1.0)\n\
               \x20     let s = vectorSum y\n\
               \x20     let x = build (length v) (fun i -> y[i] * 2.0)\n\
               \x20     let z = build (length v) (fun i -> x[i] + a[i])\n\
               \x20     s + x[0] + z[0]) 1.0 m\n\
               \x20 let b0 = build (length v) (fun i -> a0[i] + r)\n\
               \x20 b0\n";
    let v = vector(&[1.0, 2.0, 3.0]);
    exactly_all(
        src,
        &[
            ("f", vec![v.clone(), Value::Index(2)], Outcome::Value),
            ("f", vec![v.clone(), Value::Index(0)], Outcome::Value),
            ("f", vec![vector(&[]), Value::Index(2)], Outcome::Bottom),
        ],
    );
    let groups = listing_says(src, "f", ";; loops run as one (Note [Horizontal fusion]): ");
    assert!(groups.matches('[').count() >= 2, "{groups}");
}
