//! Loops that run several iterations per trip natively: inner folds of two
//! iterations jammed (Note [Jamming]) and the loops that cannot be,
//! folds skipping four iterations that keep their state (Note [Skipping
//! folds]), and folds two iterations per trip (Note [Two iterations per
//! trip]); bit for bit and first ⊥ for first ⊥ the evaluator's.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use fsmooth::codegen::Native;
use fsmooth::eval::Value;
use fsmooth::pipeline::Entry;

use super::{Outcome, compile, exactly, exactly_all, exactly_on, listing_says, load_entry, vector};

/// Note [Jamming]: a loop whose iterations each run an inner scalar fold
/// runs two iterations at a time, the two folds in one loop (then the
/// longer one's rest): `build`, `ifold` and `iscan` over triangular and
/// ragged rows (either lane longer), a pair state, an inner fold that
/// reads the outer index; n odd, even, 0, 1. Every bit is the
/// evaluator's, and so is the first ⊥ when iteration r fails after its
/// fold while r + 1 would fail before its own: a read past a short row in
/// the second fold, a row past the end in the second `pre`, a negative
/// count — each with a division by zero in iteration r's `post`.
#[test]
fn inner_folds_of_two_iterations_run_jammed_exactly() {
    let src = "let tri (q: Matrix) (y: Vector) =\n\
               \x20 ifold (fun acc r -> let row = q[r] in let qy = ifold (fun t s -> t + row[s] * y[s]) 0.0 (r + 1) in acc + qy * qy) 0.0 (length q)\n\
               let rows (a: Matrix) (y: Vector) (d: Vector) =\n\
               \x20 build (length a) (fun r -> let q = ifold (fun t s -> t + a[r][s] * y[s]) 0.0 (length a[r]) in q / d[r])\n\
               let scan (a: Matrix) (y: Vector) =\n\
               \x20 iscan (fun acc r -> let row = a[r] in let p = ifold (fun t s -> (fst t + row[s], snd t * y[s])) (0.0, 1.0) (length row) in (fst acc * 0.5 + fst p, snd p)) (0.0, 1.0) (length a)\n\
               let idx (a: Matrix) (n: Index) (d: Vector) =\n\
               \x20 build n (fun r -> let k = r + 1 in let q = ifold (fun t s -> t + a[r][s] * toDouble k) 0.0 (length a[0]) in q / d[r])\n\
               let neg (y: Vector) (m: Index) (d: Vector) =\n\
               \x20 build (length d) (fun r -> let q = ifold (fun t s -> t + y[s]) 0.0 (m - r) in q / d[r])\n";
    let ix = Value::Index;
    let row = |len: usize, seed: f64| {
        vector(
            &(0..len)
                .map(|k| seed - 0.375 * k as f64)
                .collect::<Vec<_>>(),
        )
    };
    let matrix = |lens: &[usize]| {
        Value::array(
            lens.iter()
                .enumerate()
                .map(|(r, &len)| row(len, 1.25 + r as f64))
                .collect(),
        )
    };
    let tri = |n: usize| matrix(&(1..=n).collect::<Vec<_>>());
    let ones = |n: usize| vector(&vec![1.5; n]);
    let mut cases: Vec<(&str, Vec<Value>, Outcome)> = Vec::new();
    for n in [0, 1, 2, 5, 6] {
        cases.push(("tri", vec![tri(n), row(n, 0.5)], Outcome::Value));
        cases.push((
            "idx",
            vec![matrix(&vec![3; n]), ix(n as i64), ones(n)],
            Outcome::Value,
        ));
    }
    // Ragged rows: the first lane longer, the second, equal, empty.
    let ragged = [4, 2, 0, 3, 3, 1, 5];
    cases.push((
        "rows",
        vec![matrix(&ragged), row(5, 2.0), ones(7)],
        Outcome::Value,
    ));
    cases.push(("scan", vec![matrix(&ragged), row(5, 2.0)], Outcome::Value));
    cases.push(("scan", vec![matrix(&[]), row(5, 2.0)], Outcome::Value));
    cases.push(("neg", vec![row(4, 1.0), ix(4), ones(4)], Outcome::Value));
    // Iteration 2 divides by zero; iteration 3's fold reads past the
    // end of y, its `pre` past the matrix, its count is negative.
    let d = vector(&[1.5, 1.5, 0.0, 1.5]);
    let (short, three) = (matrix(&[2, 2, 2, 5]), matrix(&[3, 3, 3]));
    cases.push((
        "rows",
        vec![short.clone(), row(3, 2.0), d.clone()],
        Outcome::Bottom,
    ));
    cases.push((
        "idx",
        vec![three.clone(), ix(4), d.clone()],
        Outcome::Bottom,
    ));
    cases.push(("neg", vec![row(4, 1.0), ix(2), d], Outcome::Bottom));
    // Without the zero, those are the ⊥s.
    cases.push(("rows", vec![short, row(3, 2.0), ones(4)], Outcome::Bottom));
    cases.push(("idx", vec![three, ix(4), ones(4)], Outcome::Bottom));
    cases.push(("neg", vec![row(4, 1.0), ix(2), ones(4)], Outcome::Bottom));
    exactly_all(src, &cases);
    let prefix =
        ";; loops two iterations at a time, their inner folds jammed (Note [Jamming]), over: ";
    for f in ["tri", "rows", "scan", "idx", "neg"] {
        assert_ne!(listing_says(src, f, prefix), "none", "{f}");
    }
}

/// Note [Jamming]'s conditions: an inner fold that reads the outer
/// state, one with an array state, and one after a conditional are not
/// jammed; nor is the cold version of an interchanged build of sums
/// (Note [Interchange]), kept as written.
#[test]
fn loops_that_cannot_jam_run_one_iteration_at_a_time() {
    let src = "let state (y: Vector) (n: Index) = ifold (fun acc r -> acc + ifold (fun t s -> t + acc * y[s]) 0.0 (length y)) 0.0 n\n\
               let arrays (y: Vector) (n: Index) = build n (fun r -> ifold (fun t s -> addAt t s y[s]) (build 2 (fun i -> 0.0)) (length y))\n\
               let branch (a: Matrix) = build (length a) (fun r -> let v = a[r] in let w = if v[0] > 0.0 then v else a[0] in ifold (fun t s -> t + w[s]) 0.0 (length w))\n\
               let sums (a: Matrix) (n: Index) = build n (fun j -> ifold (fun s i -> s + a[i][j]) 0.0 (length a))\n";
    let prefix =
        ";; loops two iterations at a time, their inner folds jammed (Note [Jamming]), over: ";
    for f in ["state", "arrays", "branch", "sums"] {
        assert_eq!(listing_says(src, f, prefix), "none", "{f}");
    }
    let m = Value::array(
        (0..3)
            .map(|r| vector(&[1.0 + r as f64, 2.0, -0.5]))
            .collect(),
    );
    exactly(src, "state", &[vector(&[0.5, 1.5]), Value::Index(5)]);
    exactly(src, "arrays", &[vector(&[0.5, 1.5]), Value::Index(3)]);
    exactly(src, "branch", std::slice::from_ref(&m));
    exactly(src, "sums", &[m, Value::Index(3)]);
    let interchanged = ";; loop nests interchanged (Note [Interchange]): ";
    assert_ne!(listing_says(src, "sums", interchanged), "none");
}

/// Note [Jamming], invariant components: an inner fold that reads a
/// component of the outer state which the body passes on unchanged (an
/// array carried beside a sum, as reverse mode carries its accumulators)
/// is jammed; the evaluator's bits for every count, odd and even, and its
/// ⊥ when the second iteration's fold reads past the end.
#[test]
fn inner_folds_reading_a_passed_on_component_run_jammed() {
    let src = "let passed (v: Vector) (n: Index) (k: Index) = ifold (fun st r -> let a = fst st in let o = r * n in (a, snd st * 0.5 + ifold (fun t i -> t + a[o + i]) 0.0 n)) (v, 0.25) k\n";
    let prefix =
        ";; loops two iterations at a time, their inner folds jammed (Note [Jamming]), over: ";
    assert_ne!(listing_says(src, "passed", prefix), "none");
    let v: Vec<f64> = (0..12).map(|x| 1.0 / (1.0 + x as f64) - 0.3).collect();
    let e = load_entry(src, "passed");
    let native = compile(&e);
    for k in 0..=5 {
        exactly_on(
            &e,
            &native,
            "passed",
            &[vector(&v), Value::Index(3), Value::Index(k)],
        );
    }
    exactly_on(
        &e,
        &native,
        "passed",
        &[vector(&v), Value::Index(5), Value::Index(3)],
    );
}

/// Doubles for the fold properties: NaN, signed zeros, infinities, ties
/// at 1.0, and small values.
fn special_doubles() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(f64::NAN),
        Just(0.0),
        Just(-0.0),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(1.0),
        -4.0..4.0f64,
    ]
}

/// Note [Skipping folds]: folds whose body keeps the state unless a test
/// of `s` and `v[i]` says otherwise skip four iterations at a time; on
/// vectors of every length up to 13 (the tail), with NaNs, signed zeros,
/// infinities, ties and ascending runs (every iteration changes the
/// state), natively and by the evaluator: the same bits, or the same
/// first ⊥ (from `T`, the branch that changes the state, at the iteration
/// that runs it).
#[test]
fn folds_skip_iterations_that_keep_their_state() {
    let src = "
let argmax = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> if v[i] > fst s then (v[i], i) else s) (w, 0) (length v)
let argminScaled = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> if v[i] * w - 1.0 >= fst s then s else (v[i] * w - 1.0, i)) (w, 0) (length v)
let failsWhenTaken = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> if -v[i] < fst s then (-v[i], snd s + 10 / (i - 5)) else s) (w, 0) (length v)
let readsWhenTaken = fun (v: Vector) (w: Double) ->
  let u = build 6 (fun j -> toDouble j) in
  ifold (fun s i -> if v[i] > fst s then (v[i] + u[i], i) else s) (w, 0) (length v)
let divides = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> if v[i] / w > fst s then (v[i], i) else s) (0.0, 0) (length v)
";
    let skipping = ";; folds skipping four iterations at a time where they keep their state (Note [Skipping folds]), over: ";
    for f in ["argmax", "argminScaled", "failsWhenTaken", "readsWhenTaken"] {
        assert_ne!(listing_says(src, f, skipping), "none", "{f} skips");
    }
    // A division in the test could fail for a later iteration: as written.
    assert_eq!(listing_says(src, "divides", skipping), "none");
    // The maximum itself is a select (Note [Selects]), not skipped.
    let max = "let m = fun (v: Vector) -> ifold (fun s i -> if v[i] > s then v[i] else s) 0.0 (length v)\n";
    assert_eq!(listing_says(max, "m", skipping), "none");
    let entries: Vec<(&str, std::rc::Rc<Entry>, Native)> = [
        "argmax",
        "argminScaled",
        "failsWhenTaken",
        "readsWhenTaken",
        "divides",
    ]
    .into_iter()
    .map(|f| {
        let e = load_entry(src, f);
        let n = compile(&e);
        (f, e, n)
    })
    .collect();
    let inputs = (
        prop::collection::vec(special_doubles(), 0..14),
        -3.0..3.0f64,
        any::<bool>(),
    );
    let mut runner = TestRunner::new(Config {
        cases: 300,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&inputs, |(mut xs, w, ascending)| {
            if ascending {
                xs.sort_by(|a, b| a.total_cmp(b));
            }
            let args = [vector(&xs), Value::Double(w)];
            for (f, e, n) in &entries {
                exactly_on(e, n, f, &args);
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Note [Two iterations per trip]: a fold of a few scalar operations runs
/// iterations 2k and 2k + 1 per trip of its loop, then the last one alone
/// when the count is odd, with the evaluator's bits and first ⊥ (a read
/// out of bounds at an even or an odd iteration, a division by zero at
/// either, E-IFold-Bot of a negative count).
#[test]
fn folds_run_two_iterations_per_trip() {
    let src = "
let max = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> if v[i] > s then v[i] else s) w (length v)
let shifted = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> s + v[i + 2] * w) 0.0 (length v - 2)
let pairs = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> (fst s + v[i], snd s * w - v[i])) (w, 1.0) (length v)
let counts = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> (fst s + (if v[i] > w then 1 else 0), not (snd s))) (0, false) (length v)
let oddFails = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> s + v[2 * i] + toDouble (10 / (i - 3))) w (length v)
let evenFails = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> s * w + toDouble (10 / (i - 4))) w (length v)
let arrayState = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> addAt s (i / 2) (v[i] * w)) (build (length v) (fun k -> w)) (length v)
";
    let doubled = ";; folds two iterations per trip (Note [Two iterations per trip]), over: ";
    let fs = ["max", "shifted", "pairs", "counts", "oddFails", "evenFails"];
    for f in fs {
        assert_ne!(
            listing_says(src, f, doubled),
            "none",
            "{f} runs two per trip"
        );
    }
    // A state with an array runs as written.
    assert_eq!(listing_says(src, "arrayState", doubled), "none");
    let entries: Vec<(&str, std::rc::Rc<Entry>, Native)> = fs
        .into_iter()
        .chain(["arrayState"])
        .map(|f| {
            let e = load_entry(src, f);
            let n = compile(&e);
            (f, e, n)
        })
        .collect();
    let inputs = (
        prop::collection::vec(special_doubles(), 0..12),
        -3.0..3.0f64,
    );
    let mut runner = TestRunner::new(Config {
        cases: 200,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&inputs, |(xs, w)| {
            let args = [vector(&xs), Value::Double(w)];
            for (f, e, n) in &entries {
                exactly_on(e, n, f, &args);
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    // Every count from 0 to 9 (both parities, the odd iteration alone),
    // and the ⊥s at their iterations.
    for len in 0..10 {
        let xs: Vec<f64> = (0..len).map(|k| (k as f64 * 0.7).sin()).collect();
        let args = [vector(&xs), Value::Double(0.5)];
        for (f, e, n) in &entries {
            exactly_on(e, n, f, &args);
        }
    }
}
