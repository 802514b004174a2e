//! Two elements at a time natively (Note [Bounds guards], pairs): maps in
//! `f64x2` lanes, folds of `addAt`s two iterations at a time, one-hot
//! builds as a fill and one store, and Double conditionals of atoms as
//! selects (Note [Selects]); bit for bit and ⊥ for ⊥ the evaluator's.

use fsmooth::eval::Value;

use super::{Outcome, exactly, exactly_all, listing_of, listing_says, lowered_ir, vector};

/// Note [Bounds guards], pairs: an innermost `build` of Double arithmetic
/// on reads at its index that need no test (covered by the guard, or over
/// the array's length) runs two elements at a time in `f64x2` lanes, the
/// last alone when n is odd. Every bit and every ⊥ is the evaluator's: a
/// short array (the guard fails), a zero divisor in either lane or in the
/// last element.
#[test]
fn maps_run_two_elements_at_a_time_exactly() {
    let src = "let f (u: Vector) (v: Vector) = build (length u) (fun i -> u[i] * 2.0 - v[i] / u[i])\n\
               let g (u: Vector) (c: Double) = build (length u) (fun i -> -(u[i] * c))\n";
    let v = vector(&[0.5, -1.5, 2.5, 3.0, -0.25]);
    let cases: Vec<(&str, Vec<Value>, Outcome)> = vec![
        (
            "f",
            vec![vector(&[1.0, 2.0, 3.0]), v.clone()],
            Outcome::Value,
        ),
        (
            "f",
            vec![vector(&[1.0, 2.0, 3.0, -4.0]), v.clone()],
            Outcome::Value,
        ),
        ("f", vec![vector(&[]), v.clone()], Outcome::Value),
        ("f", vec![vector(&[1.0; 6]), v.clone()], Outcome::Bottom),
        (
            "f",
            vec![vector(&[1.0, 0.0, 3.0]), v.clone()],
            Outcome::Bottom,
        ),
        (
            "f",
            vec![vector(&[0.0, 1.0, 3.0, 2.0]), v.clone()],
            Outcome::Bottom,
        ),
        (
            "f",
            vec![vector(&[1.0, 2.0, 0.0]), v.clone()],
            Outcome::Bottom,
        ),
        ("g", vec![v.clone(), Value::Double(-0.1)], Outcome::Value),
    ];
    exactly_all(src, &cases);
    for f in ["f", "g"] {
        assert!(listing_of(src, f).contains("f64x2"), "{f}");
    }
}

/// Note [Bounds guards], pairs: a `build` whose element is a tuple of
/// Doubles computed in lanes and scalars the same in every element —
/// reverse mode's tape records, `(e, (e, false))` — runs two elements at
/// a time too, each leaf stored to its slot of both elements. Every bit
/// and every ⊥ is the evaluator's: n odd, even and zero, a zero divisor in
/// either lane and in the last element, an Index leaf bound outside; a
/// leaf that is the index keeps the build one element at a time.
#[test]
fn builds_of_tuples_run_two_elements_at_a_time_exactly() {
    let src = "let tape (u: Vector) (c: Index) = build (length u) (fun i ->\n\
               \x20 let e = 1.0 / u[i] - u[i] in (e, ((e * e, c), false)))\n\
               let indexed (u: Vector) = build (length u) (fun i -> (u[i] * 2.0, i))\n";
    let cases: Vec<(&str, Vec<Value>, Outcome)> = vec![
        (
            "tape",
            vec![vector(&[1.0, 2.0, 3.0]), Value::Index(7)],
            Outcome::Value,
        ),
        (
            "tape",
            vec![vector(&[0.5, -2.0, 3.0, -4.0]), Value::Index(-1)],
            Outcome::Value,
        ),
        ("tape", vec![vector(&[]), Value::Index(0)], Outcome::Value),
        (
            "tape",
            vec![vector(&[1.0, 0.0, 3.0, 2.0]), Value::Index(0)],
            Outcome::Bottom,
        ),
        (
            "tape",
            vec![vector(&[1.0, 2.0, 0.0]), Value::Index(0)],
            Outcome::Bottom,
        ),
        // The index as a leaf: one element at a time.
        ("indexed", vec![vector(&[1.0, 2.0, 3.0])], Outcome::Value),
    ];
    exactly_all(src, &cases);
    let ir = lowered_ir(src, "tape");
    assert!(ir.contains("f64x2") && ir.contains("extractlane"), "{ir}");
}

/// Note [Bounds guards], pairs of `addAt`s: an innermost fold whose state
/// changes only by in-place `addAt`s at `i + c`, each into its own state
/// array, of Double arithmetic on reads at `i` (reverse mode's inner
/// loops), runs two iterations at a time, the last alone when n is odd,
/// and a literal leaf of its result is the state's after the first
/// iteration. Every bit and every ⊥ is the evaluator's: n odd, even and
/// zero, an offset past the end (the guard fails), a short array, a zero
/// divisor in either lane and in the last iteration. An `addAt` at a
/// constant index (every iteration adds into one slot), one whose value
/// reads the accumulator, and one into an array the loop also reads (not
/// in place) stay one iteration at a time.
#[test]
fn folds_of_addats_run_two_iterations_at_a_time_exactly() {
    let src = "let two (u: Vector) (v: Vector) (c: Index) =\n\
               \x20 let a = build (length u + c) (fun i -> 0.5)\n\
               \x20 let b = build (length v) (fun i -> toDouble i)\n\
               \x20 ifold (fun s i -> (addAt (fst s) (i + c) (u[i] * v[i]), addAt (snd s) i (u[i] / v[i] - 1.0))) (a, b) (length u)\n\
               let lit (u: Vector) (x: Double) =\n\
               \x20 let a = build (length u) (fun i -> 0.0)\n\
               \x20 ifold (fun s i -> (addAt (fst s) i (u[i] * 2.0), 1.5)) (a, x) (length u)\n\
               let same (u: Vector) = ifold (fun s i -> addAt s 0 u[i]) (build 3 (fun i -> 0.0)) (length u)\n\
               let reads (u: Vector) = ifold (fun s i -> addAt s i (s[i] * u[i])) (build (length u) (fun i -> 1.0)) (length u)\n\
               let alias (u: Vector) = let a = build (length u) (fun i -> u[i] * 2.0) in ifold (fun s i -> addAt s (i + 1) a[i]) a (length u - 1)\n";
    let ix = Value::Index;
    let u = |n: usize| vector(&(0..n).map(|k| 0.25 + k as f64 * 1.5).collect::<Vec<_>>());
    let mut cases: Vec<(&str, Vec<Value>, Outcome)> = Vec::new();
    for n in [0, 1, 4, 5] {
        for c in [0, 2] {
            cases.push(("two", vec![u(n), u(n + 1), ix(c)], Outcome::Value));
        }
        cases.push(("lit", vec![u(n), Value::Double(-3.0)], Outcome::Value));
        cases.push(("same", vec![u(n)], Outcome::Value));
        cases.push(("reads", vec![u(n)], Outcome::Value));
        if n > 0 {
            cases.push(("alias", vec![u(n)], Outcome::Value));
        }
    }
    // v shorter than u: a read past the end.
    cases.push(("two", vec![u(5), u(3), ix(1)], Outcome::Bottom));
    // A zero divisor in the first lane, the second, the last iteration.
    for zero in [0, 1, 4] {
        let mut v: Vec<f64> = (0..5).map(|k| 1.0 + k as f64).collect();
        v[zero] = 0.0;
        cases.push(("two", vec![u(5), vector(&v), ix(0)], Outcome::Bottom));
    }
    exactly_all(src, &cases);
    // A negative offset: the guard fails and the loop runs as written.
    exactly(src, "two", &[u(4), u(4), ix(-1)]);
    let prefix = ";; folds of addAts two iterations at a time (Note [Bounds guards], pairs of addAts), over: ";
    // `alias` reads the array it adds into (the state starts as `a`): its
    // `addAt` copies (Note [In-place updates]), so it is not paired.
    for (f, paired) in [
        ("two", true),
        ("lit", true),
        ("same", false),
        ("reads", false),
        ("alias", false),
    ] {
        assert_eq!(listing_says(src, f, prefix) != "none", paired, "{f}");
    }
}

/// A one-hot `build n (fun i -> if i = k then hot else cold)` (the
/// vector maximum's optimised gradient) is a fill with `cold` and one
/// store of `hot` (a fill of all-zero bits, `+0.0` but not `-0.0`, is a
/// `memset`): the evaluator's bits for every n (odd, even, zero) and k
/// (inside, negative, past the end), in either order of the test. A
/// `build` of a literal (+0.0, −0.0 or another) is the fill alone.
#[test]
fn one_hot_builds_fill_then_store_once() {
    let src = "let f (n: Index) (k: Index) (h: Double) = build n (fun i -> if i = k then h else 0.5)\n\
               let g (n: Index) (k: Index) = build n (fun i -> if k = i then 1.0 else 0.0)\n\
               let z (n: Index) (k: Index) (c: Double) = build n (fun i -> if i = k then 1.0 else c)\n\
               let v (x: Vector) = vectorMap (grad (fun y -> vectorMax y) x) snd\n\
               let p (n: Index) = build n (fun i -> 0.0)\n\
               let m (n: Index) = build n (fun i -> -0.0)\n\
               let q (n: Index) = build n (fun i -> 2.5)\n";
    let ix = Value::Index;
    let mut cases: Vec<(&str, Vec<Value>, Outcome)> = Vec::new();
    for n in [0, 1, 4, 5] {
        for k in [-1, 0, 2, 4, 7] {
            cases.push((
                "f",
                vec![ix(n), ix(k), Value::Double(-2.25)],
                Outcome::Value,
            ));
            cases.push(("g", vec![ix(n), ix(k)], Outcome::Value));
            for c in [0.0, -0.0, 0.5] {
                cases.push(("z", vec![ix(n), ix(k), Value::Double(c)], Outcome::Value));
            }
        }
    }
    cases.push(("g", vec![ix(-1), ix(0)], Outcome::Bottom));
    // A literal element (reverse mode's zero cotangents): a fill, two
    // elements per store, or `memset` for many +0.0s.
    for f in ["p", "m", "q"] {
        for n in [0, 1, 4, 5] {
            cases.push((f, vec![ix(n)], Outcome::Value));
        }
        cases.push((f, vec![ix(-3)], Outcome::Bottom));
    }
    cases.push((
        "v",
        vec![vector(&[1.0, 3.0, -2.0, 3.0, 0.5])],
        Outcome::Value,
    ));
    exactly_all(src, &cases);
    for f in ["f", "g", "p", "m", "q"] {
        assert!(listing_of(src, f).contains("f64x2"), "{f}");
    }
    // +0.0 only: `memset` from 64 elements (n = 64 and 65 compared too).
    let zeroes = lowered_ir(src, "p");
    assert!(zeroes.contains("call fn"), "{zeroes}");
    for f in ["p", "m", "q"] {
        for n in [64, 65] {
            exactly(src, f, &[ix(n)]);
        }
    }
}

/// Note [Selects]: a Double conditional of two atoms is a `select`; a
/// running maximum `if x > s then x else s` is `maxsd` and a minimum
/// `minsd`, whose IEEE behaviour (the second operand on NaN and on equal
/// zeros) is the conditional's. The evaluator's bits on NaNs anywhere
/// (first, middle, last), signed zeros in either order, infinities; an
/// argmax (a pair), branches that compute, and a branch that can be ⊥
/// keep their branches. In a paired `build` the select is lane-wise
/// (a ReLU is one `maxpd` per two elements), odd and even lengths.
#[test]
fn double_conditionals_of_atoms_are_selects() {
    let src = "let mx (v: Vector) = ifold (fun s i -> if v[i] > s then v[i] else s) v[0] (length v)\n\
               let mn (v: Vector) = ifold (fun s i -> if v[i] < s then v[i] else s) v[0] (length v)\n\
               let ge (v: Vector) = ifold (fun s i -> if v[i] >= s then v[i] else s) v[0] (length v)\n\
               let arg (v: Vector) = ifold (fun s i -> if v[i] > fst s then (v[i], i) else s) (v[0], 0) (length v)\n\
               let ops (v: Vector) = ifold (fun s i -> if v[i] > s then s * 0.5 + v[i] else s - 1.0) 0.0 (length v)\n\
               let div (v: Vector) = ifold (fun s i -> if v[i] > s then s / v[i] else s) 1.0 (length v)\n\
               let relu (v: Vector) = build (length v) (fun i -> if v[i] > 0.0 then v[i] else 0.0)\n\
               let clip (v: Vector) (w: Vector) = build (length v) (fun i -> let x = v[i] * 2.0 in let c = w[i] <= x in if c then w[i] else x)\n\
               let lo (v: Vector) = build (length v) (fun i -> if v[i] < 1.0 then 1.0 else v[i])\n";
    let nan = f64::NAN;
    let inputs: Vec<Vec<f64>> = vec![
        vec![1.0, 3.0, -2.0, 3.0, 0.5],
        vec![nan, 1.0, 2.0],
        vec![1.0, nan, 2.0, nan],
        vec![-0.0, 0.0, -0.0],
        vec![0.0, -0.0, 0.0],
        vec![f64::NEG_INFINITY, -1.0, f64::INFINITY, 2.0],
        (0..9).map(|k| k as f64 * 0.25).collect(),
        (0..9).map(|k| -(k as f64) * 0.25).collect(),
        vec![0.0, 0.0, 1.5, 0.0],
    ];
    for v in &inputs {
        for f in ["mx", "mn", "ge", "arg", "ops", "div", "relu", "lo"] {
            exactly(src, f, &[vector(v)]);
        }
        let w: Vec<f64> = v.iter().rev().copied().collect();
        exactly(src, "clip", &[vector(v), vector(&w)]);
    }
    assert!(listing_of(src, "mx").contains("maxsd"), "mx");
    assert!(listing_of(src, "mn").contains("minsd"), "mn");
    // Paired (Note [Bounds guards], pairs): two elements per `maxpd`.
    assert!(listing_of(src, "relu").contains("maxpd"), "relu");
    for f in ["clip", "lo"] {
        assert!(listing_of(src, f).contains("bitselect"), "{f}");
    }
    // The division can be ⊥ (a zero divisor): it keeps its branch.
    let ir = |f: &str| lowered_ir(src, f);
    for (f, select) in [("ge", true), ("arg", false), ("ops", false), ("div", false)] {
        assert_eq!(ir(f).contains("select"), select, "{f}");
    }
}

/// A division by zero in lanes fails at the division's own site, as the
/// evaluator's does — in a paired `build` and in an interchanged nest —
/// not at the loop's (a review found the loop's span reported).
#[test]
fn a_paired_division_fails_at_its_own_site() {
    use fsmooth::diagnostic::Diagnose;
    let src = "let bd (xs: Vector) (ys: Vector) = build (length xs) (fun j -> xs[j] / ys[j])
let nest (u: Vector) (xs: Vector) = build (length u) (fun i -> ifold (fun acc j -> acc + xs[j] / u[i]) 0.0 (length xs))
";
    let cases = [
        (
            "bd",
            [vector(&[1.0, 2.0, 3.0, 4.0]), vector(&[1.0, 0.0, 3.0, 4.0])],
        ),
        (
            "nest",
            [vector(&[1.0, 0.0, 3.0, 4.0]), vector(&[1.0, 2.0, 3.0, 4.0])],
        ),
    ];
    for (f, args) in cases {
        let e = super::load_entry(src, f);
        let want = e
            .run(args.to_vec(), super::FUEL, &mut |_, _| {})
            .expect_err("⊥");
        let got = super::compile(&e).call(&args).expect_err("⊥");
        assert_eq!(want.code(), got.code(), "{f}");
        assert_eq!(want.span(), got.span(), "{f}: the division's site");
    }
}
