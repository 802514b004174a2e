//! Which tests a loop runs natively: reads at a loop's own length skip
//! their bounds test, innermost loops run behind one bounds guard (Note
//! [Bounds guards]), known counts skip theirs (Note [Known counts]), and
//! rotated loops test the next index at the bottom; values and ⊥ stay
//! the evaluator's.

use fsmooth::codegen::CodegenError;
use fsmooth::eval::Value;

use super::{
    Outcome, compare_src, exactly, exactly_all, listing_of, listing_says, lowered_ir, native_error,
    vector,
};

/// Loops are rotated (`counted_loop`): a test before the loop, and at the
/// bottom of the body a conditional branch back to the body, with the
/// next index and state, or out; no unconditional jump goes back. Values
/// and ⊥ stay the evaluator's.
#[test]
fn loops_test_their_next_index_at_the_bottom() {
    let src = "let f (v: Vector) = vectorMax v\n";
    for xs in [&[3.0, 1.0, 4.0, 1.5][..], &[2.0]] {
        assert_eq!(
            compare_src(src, "f", &[vector(xs)]),
            Outcome::Value,
            "{xs:?}"
        );
    }
    assert_eq!(compare_src(src, "f", &[vector(&[])]), Outcome::Bottom);
    let listing = listing_of(src, "f");
    let ir = listing
        .split(";; Cranelift IR")
        .nth(1)
        .and_then(|s| s.split(";; machine code").next())
        .expect("the IR");
    // Back edges: branches to a block printed (laid out) earlier.
    let mut seen: Vec<String> = Vec::new();
    let (mut conditional, mut jumps) = (0, 0);
    for line in ir.lines() {
        if let Some(name) = line
            .strip_suffix(':')
            .and_then(|l| l.split(['(', ' ']).next())
        {
            seen.push(name.to_string());
            continue;
        }
        let back = seen.iter().any(|b| line.contains(&format!(" {b}(")));
        match line.split_whitespace().next() {
            Some("brif") if back => conditional += 1,
            Some("jump") if back => jumps += 1,
            _ => {}
        }
    }
    assert_eq!((conditional, jumps), (1, 0), "{ir}");
}

/// Note [Bounds guards]: an innermost loop whose reads and updates have
/// lengths known before it runs without their bounds tests (and without
/// the overflow test of `i + c`) when one guard says none can fire, and
/// as written otherwise. Every value and every ⊥ — code and details — is
/// the evaluator's: an offset read past the end, a negative offset, an
/// overflowing `i + c`, a constant index out of bounds, an accumulator in
/// the fold's state (its length the initial state's) too short, and a
/// state whose length changes (not guarded: its reads keep their tests).
#[test]
fn innermost_loops_run_behind_bounds_guards_exactly() {
    let src = "let f (u: Vector) (c: Index) (m: Index) = ifold (fun s i -> s + u[i + c]) 0.5 m\n\
               let g (u: Vector) (k: Index) (m: Index) = build m (fun i -> u[i] * u[k])\n\
               let h (n: Index) (o: Index) (v: Vector) = ifold (fun acc i -> addAt acc (o + i) (v[i] * 2.0)) (build n (fun j -> 0.0)) (length v)\n\
               let p (n: Index) (m: Index) = ifold (fun st i -> (addAt (fst st) i 1.0, snd st + 1.0)) (build n (fun j -> 0.0), 0.0) m\n\
               let k (u: Vector) (m: Index) = ifold (fun a i -> [a[i], a[i] + 1.0]) u m\n";
    let u = vector(&[1.5, -2.0, 0.25, 4.0]);
    let ix = Value::Index;
    let cases: Vec<(&str, Vec<Value>, Outcome)> = vec![
        ("f", vec![u.clone(), ix(1), ix(3)], Outcome::Value),
        ("f", vec![u.clone(), ix(2), ix(3)], Outcome::Bottom),
        ("f", vec![u.clone(), ix(-1), ix(2)], Outcome::Bottom),
        ("f", vec![u.clone(), ix(i64::MAX), ix(2)], Outcome::Bottom),
        ("f", vec![u.clone(), ix(-7), ix(0)], Outcome::Value),
        ("f", vec![u.clone(), ix(0), ix(-1)], Outcome::Bottom),
        ("g", vec![u.clone(), ix(3), ix(4)], Outcome::Value),
        ("g", vec![u.clone(), ix(4), ix(2)], Outcome::Bottom),
        ("g", vec![u.clone(), ix(0), ix(5)], Outcome::Bottom),
        ("h", vec![ix(6), ix(2), u.clone()], Outcome::Value),
        ("h", vec![ix(5), ix(2), u.clone()], Outcome::Bottom),
        ("h", vec![ix(6), ix(-1), u.clone()], Outcome::Bottom),
        ("p", vec![ix(3), ix(3)], Outcome::Value),
        ("p", vec![ix(3), ix(4)], Outcome::Bottom),
        ("k", vec![u.clone(), ix(2)], Outcome::Value),
        ("k", vec![u.clone(), ix(3)], Outcome::Bottom),
    ];
    exactly_all(src, &cases);
    let said = |f: &str| {
        listing_says(
            src,
            f,
            ";; loops behind a bounds guard (Note [Bounds guards]): ",
        )
    };
    for f in ["f", "g", "h", "p"] {
        assert_ne!(said(f), "none", "{f}");
    }
    assert_eq!(said("k"), "none");
}

/// A loop over `0 .. length a` reads `a[i]` without a bounds test
/// (`codegen/lower.rs`, `in_bounds`); every other read keeps its test:
/// another array at the same index, the same array at another index, a
/// loop over another length.
#[test]
fn reads_at_a_loops_own_length_skip_only_their_own_test() {
    let src = "let dot (a: Vector) (b: Vector) = ifold (fun s i -> s + a[i] * b[i]) 0.0 (length a)\n\
               let next (a: Vector) = ifold (fun s i -> s + a[i] * a[i + 1]) 0.0 (length a)\n\
               let other (a: Vector) (b: Vector) = ifold (fun s i -> s + a[i]) 0.0 (length b)\n\
               let nested (m: Matrix) = ifold (fun s i -> s + ifold (fun t j -> t + m[i][j]) 0.0 (length m)) 0.0 (length m)\n";
    let (a, short) = (vector(&[1.0, 2.0, 3.0]), vector(&[4.0, 5.0]));
    assert_eq!(
        compare_src(src, "dot", &[a.clone(), a.clone()]),
        Outcome::Value
    );
    assert_eq!(
        compare_src(src, "other", &[a.clone(), short.clone()]),
        Outcome::Value
    );
    let oob = |index, len| CodegenError::IndexOutOfBounds { index, len };
    assert_eq!(
        native_error(src, "dot", &[a.clone(), short.clone()]),
        oob(2, 2)
    );
    assert_eq!(
        native_error(src, "next", std::slice::from_ref(&a)),
        oob(3, 3)
    );
    assert_eq!(
        native_error(src, "other", &[short.clone(), a.clone()]),
        oob(2, 2)
    );
    // Rows of different lengths: m[i][j] is not a read of `m` at its length.
    let ragged = Value::array(vec![a.clone(), short.clone(), a.clone()]);
    assert_eq!(native_error(src, "nested", &[ragged]), oob(2, 2));
}

/// Note [Known counts]: a count that is a loop index's successor, a
/// length or a literal needs no E-IFold-Bot / E-Build-Bot test, and `i +
/// 1` of a loop index no overflow test; other counts and sums keep
/// theirs, with the evaluator's ⊥.
#[test]
fn known_counts_skip_their_tests() {
    let src = "let tri (v: Vector) = build (length v) (fun r -> ifold (fun t s -> t + v[s] * v[r]) 0.0 (r + 1))\n\
               let tri2 (v: Vector) = ifold (fun a r -> a + ifold (fun t s -> t + v[s]) 0.0 (1 + r)) 0.0 (length v)\n\
               let rows (v: Vector) = build (length v) (fun r -> build (r + 1) (fun s -> v[s] - v[r]))\n\
               let past (v: Vector) = build (length v) (fun r -> v[r + 1])\n\
               let back (v: Vector) (k: Index) = build (length v) (fun r -> ifold (fun t s -> t + v[s]) 0.0 (r + k))\n\
               let big (k: Index) = ifold (fun t s -> t + (s + k)) 0 3\n";
    for n in [0usize, 1, 2, 5] {
        let v: Vec<f64> = (0..n).map(|k| 0.5 + k as f64 * 1.25).collect();
        for f in ["tri", "tri2", "rows", "past"] {
            exactly(src, f, &[vector(&v)]);
        }
        for k in [-3, -1, 0, 2] {
            exactly(src, "back", &[vector(&v), Value::Index(k)]);
        }
    }
    // Overflow of `s + k` (not a successor) stays a ⊥.
    for k in [0, i64::MAX - 1, i64::MAX] {
        exactly(src, "big", &[Value::Index(k)]);
    }
    let ir = |f: &str| lowered_ir(src, f);
    // `n < 0` as lowered: `icmp slt n, z ; z = 0`.
    let negative_tests = |ir: &str| {
        ir.lines()
            .filter(|l| {
                let Some((ins, note)) = l.split_once(';') else {
                    return false;
                };
                let Some((_, ops)) = ins.split_once(" slt ") else {
                    return false;
                };
                let second = ops.split(',').nth(1).map(str::trim);
                second.is_some_and(|z| note.trim() == format!("{z} = 0"))
            })
            .count()
    };
    // `r + 1` is a plain addition; `(length v)` and `r + 1` are counts
    // known to be at least 0: no test compares them with 0.
    for f in ["tri", "tri2", "rows"] {
        let ir = ir(f);
        assert!(!ir.contains("sadd_overflow"), "{f}:\n{ir}");
        assert_eq!(negative_tests(&ir), 0, "{f}:\n{ir}");
    }
    // `r + k` may overflow and be negative: both tests stay.
    let back = ir("back");
    assert!(back.contains("sadd_overflow"), "{back}");
    assert!(negative_tests(&back) > 0, "{back}");
}
