//! Note [Interchange] natively: `build`s of sums and `build`s of `build`s
//! that read a matrix column-wise run i-major behind a guard, bit for bit
//! and ⊥ for ⊥ the evaluator's.

use fsmooth::eval::Value;

use super::{
    Outcome, compare, compile, compile_with, evaluate, exactly_all, exactly_on, gamma, listing_of,
    listing_says, load_entry, vector,
};

/// Note [Interchange]: a `build` of sums reading a matrix at `a[i][j]`
/// runs i-major behind a guard; every bit is the evaluator's, and so is
/// every ⊥: a short row (E-Get-Bot, the guard fails and the nest runs as
/// written), a division by zero (the same ⊥ from any element), a negative
/// size, a negative count only when there is an element. A body with a
/// `log` (whose ⊥ depends on the element) is not interchanged.
#[test]
fn builds_of_sums_run_interchanged_exactly() {
    let src = "let f (u: Vector) (v: Vector) (a: Matrix) = build (length v) (fun j -> ifold (fun s i -> s + u[i] * a[i][j] / v[j]) 0.5 (length u))\n\
               let g (n: Index) (m: Index) (u: Vector) = build n (fun j -> ifold (fun s i -> s + u[i] / u[j]) 0.0 m)\n\
               let h (u: Vector) (a: Matrix) = build (length u) (fun j -> ifold (fun s i -> s + log (a[i][j])) 0.0 (length a))\n\
               let k (u: Vector) (v: Vector) = build (length v) (fun j -> ifold (fun s i -> s + 1.0 / u[i] * v[j]) 0.0 (length u))\n";
    let m = |rows: &[&[f64]]| Value::array(rows.iter().map(|r| vector(r)).collect());
    let u = vector(&[1.5, -2.0, 0.25]);
    let v = vector(&[0.5, 3.0]);
    let cases: Vec<(&str, Vec<Value>, Outcome)> = vec![
        (
            "f",
            vec![
                u.clone(),
                v.clone(),
                m(&[&[1.0, 2.0], &[3.0, 4.0], &[5.0, 6.0]]),
            ],
            Outcome::Value,
        ),
        (
            "f",
            vec![u.clone(), v.clone(), m(&[&[1.0, 2.0], &[3.0], &[5.0, 6.0]])],
            Outcome::Bottom,
        ),
        (
            "f",
            vec![
                u.clone(),
                vector(&[0.5, 0.0]),
                m(&[&[1.0, 2.0], &[3.0, 4.0], &[5.0, 6.0]]),
            ],
            Outcome::Bottom,
        ),
        ("f", vec![vector(&[]), v.clone(), m(&[])], Outcome::Value),
        (
            "g",
            vec![Value::Index(-1), Value::Index(2), u.clone()],
            Outcome::Bottom,
        ),
        (
            "g",
            vec![Value::Index(2), Value::Index(-1), u.clone()],
            Outcome::Bottom,
        ),
        (
            "g",
            vec![Value::Index(0), Value::Index(-1), u.clone()],
            Outcome::Value,
        ),
        (
            "g",
            vec![Value::Index(3), Value::Index(4), u.clone()],
            Outcome::Bottom,
        ),
        (
            "g",
            vec![Value::Index(3), Value::Index(3), u.clone()],
            Outcome::Value,
        ),
        // Pairs of elements (Note [Interchange], pairs): an odd n (the
        // last element alone), a zero divisor in the last element, in the
        // second lane of a pair.
        (
            "f",
            vec![
                u.clone(),
                vector(&[0.5, 3.0, -0.75]),
                m(&[&[1.0, 2.0, 7.0], &[3.0, 4.0, 8.0], &[5.0, 6.0, 9.0]]),
            ],
            Outcome::Value,
        ),
        (
            "f",
            vec![
                u.clone(),
                vector(&[0.5, 3.0, 0.0]),
                m(&[&[1.0, 2.0, 7.0], &[3.0, 4.0, 8.0], &[5.0, 6.0, 9.0]]),
            ],
            Outcome::Bottom,
        ),
        (
            "f",
            vec![
                u.clone(),
                vector(&[0.5, 3.0, 2.0, 0.0]),
                m(&[
                    &[1.0, 2.0, 7.0, 1.0],
                    &[3.0, 4.0, 8.0, 1.0],
                    &[5.0, 6.0, 9.0, 1.0],
                ]),
            ],
            Outcome::Bottom,
        ),
        // A term without j, computed once per i: its division by zero is
        // a ⊥ only when there is an element.
        (
            "k",
            vec![u.clone(), vector(&[2.0, -1.0, 4.0])],
            Outcome::Value,
        ),
        (
            "k",
            vec![vector(&[1.0, 0.0]), vector(&[2.0, -1.0, 4.0])],
            Outcome::Bottom,
        ),
        ("k", vec![vector(&[1.0, 0.0]), vector(&[])], Outcome::Value),
    ];
    exactly_all(src, &cases);
    let said = |f: &str| listing_says(src, f, ";; loop nests interchanged (Note [Interchange]): ");
    assert_ne!(said("f"), "none");
    assert_ne!(said("g"), "none");
    assert_eq!(said("h"), "none");
    assert_ne!(said("k"), "none");
    // f's terms that depend on j run in the lanes of an f64x2.
    assert!(listing_of(src, "f").contains("f64x2"));
}

/// Note [Interchange], blocks: an interchanged sum whose terms without j
/// are cheap runs its elements in blocks of eight, each sum in a register
/// over a tile of i, the rest as pairs and a last element. Every length
/// from none to three blocks and a tail, and several tiles, give the
/// evaluator's bits; a short row and a negative count give its ⊥. Terms
/// without j that compute (`o`) run once per block; one that divides or
/// calls `exp` keeps the nest out of blocks (it would run once per
/// block), and so does a division in the elements' terms (`d`, whose
/// zero divisors at every place are compared too, as pairs).
#[test]
fn interchanged_sums_run_in_blocks_exactly() {
    let src = "let b (q: Vector) (ys: Matrix) (z: Double) = build (length (ys[0])) (fun j -> ifold (fun t s -> t + q[s] * ys[s][j]) z (length q))\n\
               let d (q: Vector) (ys: Matrix) (w: Vector) = build (length w) (fun j -> ifold (fun t s -> t + q[s] * ys[s][j] / w[j]) 0.0 (length q))\n\
               let o (q: Vector) (ys: Matrix) (k: Double) = build (length (ys[0])) (fun j -> ifold (fun t s -> t + (k * q[s] - toDouble s) * ys[s][j]) 0.0 (length q))\n\
               let m (q: Vector) (ys: Matrix) (c: Index) = build (length (ys[0])) (fun j -> ifold (fun t s -> t + q[s] * ys[s][j]) 0.0 c)\n\
               let x (q: Vector) (ys: Matrix) = build (length (ys[0])) (fun j -> ifold (fun t s -> t + exp (q[s]) * ys[s][j]) 0.0 (length q))\n\
               let v (q: Vector) (ys: Matrix) = build (length (ys[0])) (fun j -> ifold (fun t s -> t + 1.0 / q[s] * ys[s][j]) 0.0 (length q))\n";
    let said = |f: &str| {
        listing_says(
            src,
            f,
            ";; interchanged sums in blocks of eight (Note [Interchange], blocks): ",
        )
    };
    for f in ["b", "o", "m"] {
        assert_ne!(said(f), "none", "{f}");
    }
    for f in ["d", "x", "v"] {
        assert_eq!(said(f), "none", "{f}");
    }
    // Deterministic values of every magnitude and sign, so that the order
    // of the additions shows in the bits.
    let mut next = draws(0x9e37_79b9_7f4a_7c15_u64);
    let q: Vec<f64> = (0..5).map(|_| next()).collect();
    let (eb, ed) = (load_entry(src, "b"), load_entry(src, "d"));
    let (nb, nd) = (compile(&eb), compile(&ed));
    for n in 1..=27 {
        let ys = matrix(5, n, &mut next);
        exactly_on(
            &eb,
            &nb,
            "b",
            &[vector(&q), ys.clone(), Value::Double(0.375)],
        );
        let w: Vec<f64> = (0..n).map(|_| next()).collect();
        exactly_on(&ed, &nd, "d", &[vector(&q), ys.clone(), vector(&w)]);
        // A zero divisor at each place: in a block's either lane, in a
        // tail pair, in the last element.
        for at in [0, 1, n / 2, n - 1].into_iter().filter(|&at| at < n) {
            let mut w0 = w.clone();
            w0[at] = 0.0;
            exactly_on(&ed, &nd, "d", &[vector(&q), ys.clone(), vector(&w0)]);
        }
    }
    // IEEE's special values in the terms and the start: each element's
    // NaN, infinities and signed zeros as the evaluator's.
    let specials = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        0.0,
        5e-324,
    ];
    for (k, z) in specials.iter().enumerate() {
        let mut q0 = q.clone();
        q0[k % 5] = specials[(k + 1) % specials.len()];
        let rows: Vec<Value> = (0..5)
            .map(|r| {
                let row: Vec<f64> = (0..17)
                    .map(|i| {
                        if (i + r + k) % 7 == 0 {
                            specials[(i + r) % 6]
                        } else {
                            next()
                        }
                    })
                    .collect();
                vector(&row)
            })
            .collect();
        exactly_on(
            &eb,
            &nb,
            "b",
            &[vector(&q0), Value::array(rows), Value::Double(*z)],
        );
    }
    // More values of i than a tile's (32): two whole tiles and part of a
    // third.
    let long: Vec<f64> = (0..70).map(|_| next()).collect();
    for n in [8, 13, 24] {
        let ys = matrix(70, n, &mut next);
        exactly_on(&eb, &nb, "b", &[vector(&long), ys, Value::Double(-1.25)]);
    }
    let ys = matrix(5, 19, &mut next);
    let short = {
        let Value::Array(rows) = &ys else {
            unreachable!()
        };
        let mut rows = rows.to_vec();
        rows[3] = vector(&[1.0; 18]);
        Value::array(rows)
    };
    let cases: Vec<(&str, Vec<Value>, Outcome)> = vec![
        (
            "b",
            vec![vector(&q), short, Value::Double(0.0)],
            Outcome::Bottom,
        ),
        (
            "o",
            vec![vector(&q), ys.clone(), Value::Double(-3.5)],
            Outcome::Value,
        ),
        (
            "m",
            vec![vector(&q), ys.clone(), Value::Index(-1)],
            Outcome::Bottom,
        ),
        (
            "m",
            vec![vector(&q), ys.clone(), Value::Index(0)],
            Outcome::Value,
        ),
        ("x", vec![vector(&q), ys.clone()], Outcome::Value),
        ("v", vec![vector(&q), ys.clone()], Outcome::Value),
    ];
    exactly_all(src, &cases);
}

/// Note [Interchange], builds of builds: `build n (fun k -> build m (fun
/// i -> e))` reading `a[i][k]` (or a row projected from `a[i]`) runs
/// i-major into rows allocated first, what does not depend on `k` once
/// per `i`; every bit is the evaluator's, and every ⊥ too: a short row, a
/// negative outer or inner size (the inner one only with a row to build),
/// a division by zero; no row and more `i` than `a` has rows is a value.
#[test]
fn builds_of_builds_run_transposed_exactly() {
    let src = "let t (a: Matrix) (n: Index) = build n (fun k -> build (length a) (fun i -> a[i][k] * 2.0))\n\
               let u (a: Matrix) (n: Index) =\n\
               \x20 let r = build (length a) (fun i -> (a[i][0], a[i]))\n\
               \x20 (r, build n (fun k -> build (length r) (fun i -> let e = r[i] in fst e + (snd e)[k])))\n\
               let w (a: Matrix) (n: Index) (m: Index) (d: Double) = build n (fun k -> build m (fun i -> a[i][k] / d))\n";
    let m = |rows: &[&[f64]]| Value::array(rows.iter().map(|r| vector(r)).collect());
    let a = m(&[&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]]);
    let short = m(&[&[1.0, 2.0, 3.0], &[4.0, 5.0]]);
    let ix = Value::Index;
    let cases: Vec<(&str, Vec<Value>, Outcome)> = vec![
        ("t", vec![a.clone(), ix(3)], Outcome::Value),
        ("t", vec![a.clone(), ix(0)], Outcome::Value),
        ("t", vec![m(&[]), ix(2)], Outcome::Value),
        ("t", vec![short.clone(), ix(3)], Outcome::Bottom),
        ("t", vec![a.clone(), ix(-1)], Outcome::Bottom),
        ("u", vec![a.clone(), ix(3)], Outcome::Value),
        ("u", vec![short.clone(), ix(3)], Outcome::Bottom),
        (
            "w",
            vec![a.clone(), ix(2), ix(2), Value::Double(0.5)],
            Outcome::Value,
        ),
        (
            "w",
            vec![a.clone(), ix(2), ix(-1), Value::Double(0.5)],
            Outcome::Bottom,
        ),
        (
            "w",
            vec![a.clone(), ix(0), ix(-1), Value::Double(0.5)],
            Outcome::Value,
        ),
        // No row, m beyond `a`'s rows: an empty matrix.
        (
            "w",
            vec![a.clone(), ix(0), ix(3), Value::Double(0.5)],
            Outcome::Value,
        ),
        (
            "w",
            vec![a.clone(), ix(2), ix(3), Value::Double(0.5)],
            Outcome::Bottom,
        ),
        (
            "w",
            vec![a.clone(), ix(2), ix(2), Value::Double(0.0)],
            Outcome::Bottom,
        ),
    ];
    exactly_all(src, &cases);
    for f in ["t", "u", "w"] {
        let said = listing_of(src, f)
            .lines()
            .find_map(|l| l.strip_prefix(";; loop nests interchanged (Note [Interchange]): "))
            .map(str::to_string)
            .expect("the listing says");
        assert_ne!(said, "none", "{f}");
    }
}

/// An interchanged nest charges its inner loops' iterations (n × m, Note
/// [Native limits]) where it starts them, at the inner loop's site, so
/// that it runs out of fuel where the evaluator does (m = 2²⁸ and m =
/// 2⁶³ − 1, blocked); and it reports a negative inner count at the inner
/// loop, the evaluator's error code and location.
#[test]
fn interchanged_nests_charge_their_inner_loops_at_their_site() {
    let src = "let g (v: Vector) (m: Index) = build (length v) (fun j -> ifold (fun t s -> t + v[j]) 0.5 m)\n\
               let b (q: Vector) (ys: Matrix) (c: Index) = build (length (ys[0])) (fun j -> ifold (fun t s -> t + q[s] * ys[s][j]) 0.0 c)\n";
    let file = crate::common::temp_file("interchange_limits.fsm", src);
    let first_line = |engine: &str, entry: &str, input: &str, extra: &[&str]| {
        let mut args = vec![
            "run",
            file.to_str().unwrap(),
            "--entry",
            entry,
            "--input",
            input,
            "--engine",
            engine,
        ];
        args.extend_from_slice(extra);
        let o = crate::common::cli(&args);
        assert!(!o.status.success(), "{engine} {entry} {input}: no error");
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        let line = err.lines().next().unwrap_or_default().to_string();
        // `path:line:col: error[code]`.
        line.split(": ").take(2).collect::<Vec<_>>().join(": ")
    };
    let v8 = "[1, 2, 3, 4, 5, 6, 7, 8]";
    for (entry, input, extra) in [
        (
            "g",
            format!(r#"{{"v": {v8}, "m": 268435456}}"#),
            vec!["--fuel", "1000"],
        ),
        (
            "g",
            format!(r#"{{"v": {v8}, "m": 9223372036854775807}}"#),
            vec!["--fuel", "1000000"],
        ),
        (
            "b",
            r#"{"q": [1, 2], "ys": [[1, 2, 3], [4, 5, 6]], "c": -1}"#.to_string(),
            vec![],
        ),
    ] {
        let want = first_line("eval", entry, &input, &extra);
        let got = first_line("native", entry, &input, &extra);
        if extra.is_empty() {
            assert_eq!(got, want, "{entry} {input}");
        } else {
            // Out of fuel: the evaluator stops at the step that overdraws
            // it, native code at the loop (spec/semantics.md §9).
            let code = |l: &str| l.rsplit(": ").next().unwrap_or_default().to_string();
            assert_eq!(code(&got), "error[out-of-fuel]", "{got}");
            assert_eq!(code(&got), code(&want), "{entry} {input}");
        }
    }
}

/// A fold over points of a fold over terms that adds at `o[s] + i` (a
/// slot per term and point), at `c + s` (a slot per term) and at `i` (a
/// slot per point): reverse mode's batched products (Note [Interchanged
/// folds]).
const TERM_MAJOR: &str = "let f (o: Array<Index>) (w: Vector) (ys: Matrix) (t: Vector) (c: Index) =\n\
                          \x20 let m = length o\n\
                          \x20 let n = length t\n\
                          \x20 ifold (fun st i ->\n\
                          \x20     let ti = t[i]\n\
                          \x20     ifold (fun st2 s ->\n\
                          \x20         let a = addAt (fst st2) (o[s] + i) (ti * w[s])\n\
                          \x20         let b = addAt (fst (snd st2)) (c + s) (ti * ys[s][i])\n\
                          \x20         let e = addAt (snd (snd st2)) i (ti * w[s] - ys[s][i])\n\
                          \x20         (a, (b, e))) st m)\n\
                          \x20   (build (m * n + 2) (fun k -> 0.1), (build (m + c) (fun k -> 0.25), build n (fun k -> 0.0))) n\n";

/// Note [Interchanged folds]: a fold over points of a fold over terms
/// that only adds into its state arrays (reverse mode's batched
/// products) runs term-major behind a guard, four terms per point, then
/// two, then one; every bit is the evaluator's, for every number of terms
/// and points. Its `addAt`s add at `o[s] + i` (one slot per term and
/// point), at `c + s` (a slot per term, kept in a register) and at `i`
/// (a slot per point, added to by every term). When the guard fails —
/// rows of `o` that overlap or run past the end, a short row of `ys`, a
/// negative `c` — the nest runs as written: overlapping rows give the
/// evaluator's bits (its order of additions), the rest its ⊥, at the same
/// index. A constant index (`k`: every term and point the same slot) is
/// not interchanged.
#[test]
fn folds_of_folds_of_add_ats_run_term_major_exactly() {
    let src = format!(
        "{TERM_MAJOR}let k (w: Vector) (t: Vector) =\n\
         \x20 ifold (fun st i -> ifold (fun st2 s -> addAt st2 1 (t[i] * w[s])) st (length w)) (build 2 (fun j -> 0.0)) (length t)\n"
    );
    let src = src.as_str();
    let said = |f: &str| {
        listing_says(
            src,
            f,
            ";; folds of folds of addAts run term-major (Note [Interchanged folds]), over: ",
        )
    };
    assert_ne!(said("f"), "none");
    assert_eq!(said("k"), "none");
    let mut next = draws(0x2545_f491_4f6c_dd1d_u64);
    let e = load_entry(src, "f");
    let native = compile(&e);
    let run = |o: &[i64], rows: usize, n: usize, c: i64, next: &mut dyn FnMut() -> f64| {
        let m = o.len();
        let w: Vec<f64> = (0..m).map(|_| next()).collect();
        let t: Vec<f64> = (0..n).map(|_| next()).collect();
        let args = [
            indices(o),
            vector(&w),
            matrix(rows, n, next),
            vector(&t),
            Value::Index(c),
        ];
        exactly_on(&e, &native, "f", &args);
    };
    // Every number of terms from none to nine (blocks of four, two, one),
    // rows of o spaced n apart, in order.
    for m in 0..=9usize {
        for n in [0usize, 1, 2, 7] {
            let o: Vec<i64> = (0..m as i64).map(|s| s * n as i64 + 1).collect();
            run(&o, m, n, 2, &mut next);
        }
    }
    // Rows that overlap (the guard fails: as written, the same bits).
    run(&[0, 1, 2], 3, 4, 0, &mut next);
    run(&[5, 0, 2], 3, 2, 0, &mut next);
    for _ in 0..4 {
        run(&[0, 1, 2, 3, 4, 5, 6], 7, 9, 0, &mut next);
    }
    // The last row past the end, a negative row start, a short row of
    // ys, a negative c: the evaluator's ⊥ at the same index.
    run(&[0, 4, 9], 3, 4, 0, &mut next);
    run(&[-1, 4], 2, 3, 0, &mut next);
    let w = vector(&[1.0, 2.0]);
    let short = Value::array(vec![vector(&[1.0, 2.0, 3.0]), vector(&[4.0, 5.0])]);
    let t = vector(&[0.5, -0.25, 2.0]);
    let args = [indices(&[0, 3]), w, short, t, Value::Index(0)];
    assert_eq!(compare(&e, &native, &args), Ok(Outcome::Bottom));
    exactly_on(&e, &native, "f", &args);
    run(&[0, 3], 2, 3, -1, &mut next);
}

/// Note [Interchanged folds], relaxed: under `--fp relaxed` a slot kept
/// in a register (`addAt` at `c + s`, one per term) sums its points two
/// at a time in lanes, the even and the odd points apart; the bound of
/// spec/semantics.md §7 holds for it (2γ_m Σ|t| over its m addends), the
/// slots per point are the evaluator's bits, and for some input the
/// regrouping shows in the bits (the lanes ran).
#[test]
fn interchanged_folds_sum_their_terms_slots_in_lanes_under_the_relaxed_contract() {
    use fsmooth::codegen::{FpContract, NativeOptions};
    let e = load_entry(TERM_MAJOR, "f");
    let relaxed = NativeOptions {
        fp: FpContract::Relaxed,
        threads: 1,
    };
    let native = compile_with(&e, relaxed);
    let mut next = draws(0x9e37_79b9_7f4a_7c15);
    let mut regrouped = false;
    for m in 0..=9usize {
        for n in [0usize, 1, 2, 7, 40] {
            let o: Vec<i64> = (0..m as i64).map(|s| s * n as i64).collect();
            let w: Vec<f64> = (0..m).map(|_| next()).collect();
            let t: Vec<f64> = (0..n).map(|_| next()).collect();
            let ys = matrix(m, n, &mut next);
            let rows = rows_of(&ys);
            let args = [
                indices(&o),
                vector(&w),
                ys.clone(),
                vector(&t),
                Value::Index(0),
            ];
            let want = doubles(&evaluate(&e, &args));
            let got = doubles(&native.call(&args).expect("runs"));
            assert_eq!(want.len(), got.len());
            // The slots per term and point, and per point: the
            // evaluator's bits.
            let (a, b) = (m * n + 2, m * n + 2 + m);
            for k in (0..a).chain(b..want.len()) {
                assert_eq!(want[k].to_bits(), got[k].to_bits(), "m {m} n {n} slot {k}");
            }
            // The slots per term: within 2γ_{n+1} Σ|t|.
            for s in 0..m {
                let (x, y) = (want[a + s], got[a + s]);
                let sum: f64 = 0.25 + (0..n).map(|i| (t[i] * rows[s][i]).abs()).sum::<f64>();
                let bound = 2.0 * gamma(n + 1) * sum;
                assert!((x - y).abs() <= bound, "m {m} n {n} term {s}: {x} vs {y}");
                regrouped |= x.to_bits() != y.to_bits();
            }
        }
    }
    assert!(regrouped, "every slot the evaluator's bits: no lanes ran");
}

/// Note [Interchange], pairs of rows: a `build` over rows, each a nest
/// that runs in blocks (the batched products `Q[r] · ys` over `s ≤ r`),
/// runs two rows at a time, the terms both rows have together and the
/// rest of each alone; every bit is the evaluator's for every number of
/// rows (odd: the last alone) and points, with term counts that grow
/// with the row (`t`), shrink with it (`u`) or are equal (`c`). A ⊥ of the
/// second row's `pre` (`q` short by one row), a short row of `ys` (its
/// guard fails), and a negative count in the second row give the
/// evaluator's ⊥, the pair abandoned and its first row run as written.
#[test]
fn rows_of_interchanged_sums_run_two_at_a_time_exactly() {
    let src = "let t (q: Matrix) (ys: Matrix) (d: Index) = build d (fun r -> let row = q[r] in let m = r + 1 in build (length (ys[0])) (fun i -> ifold (fun acc s -> acc + row[s] * ys[s][i]) 0.0 m))\n\
               let u (q: Matrix) (ys: Matrix) (d: Index) = build d (fun r -> let row = q[r] in let m = d - r in build (length (ys[0])) (fun i -> ifold (fun acc s -> acc + row[s] * ys[s][i]) 0.25 m))\n\
               let c (q: Matrix) (ys: Matrix) (d: Index) (k: Index) = build d (fun r -> let row = q[r] in let m = k - r * r in build (length (ys[0])) (fun i -> ifold (fun acc s -> acc + row[s] * ys[s][i]) 0.0 m))\n";
    let said = |f: &str| {
        listing_says(
            src,
            f,
            ";; rows of interchanged sums two at a time (Note [Interchange], pairs of rows), over: ",
        )
    };
    for f in ["t", "u", "c"] {
        assert_ne!(said(f), "none", "{f}");
    }
    let mut next = draws(0x853c_49e6_748f_ea9b_u64);
    let entries: Vec<_> = ["t", "u", "c"]
        .iter()
        .map(|f| {
            let e = load_entry(src, f);
            let n = compile(&e);
            (*f, e, n)
        })
        .collect();
    let ix = Value::Index;
    for d in 0..=7usize {
        for n in [1usize, 7, 8, 19, 40] {
            let q = matrix(d.max(1), d.max(1), &mut next);
            let ys = matrix(d.max(1), n, &mut next);
            for (f, e, native) in &entries {
                let mut args = vec![q.clone(), ys.clone(), ix(d as i64)];
                if *f == "c" {
                    args.push(ix(d as i64 + 2));
                }
                exactly_on(e, native, f, &args);
            }
        }
    }
    // q one row short: the second row's `pre` fails (E-Get-Bot).
    let (_, e, native) = &entries[0];
    let args = [matrix(3, 4, &mut next), matrix(4, 9, &mut next), ix(4)];
    assert_eq!(compare(e, native, &args), Ok(Outcome::Bottom));
    exactly_on(e, native, "t", &args);
    // A short row of ys: the pair's guard fails.
    let mut rows: Vec<Value> = (0..4)
        .map(|_| vector(&(0..9).map(|_| next()).collect::<Vec<_>>()))
        .collect();
    rows[2] = vector(&[1.0, 2.0]);
    let args = [matrix(4, 4, &mut next), Value::array(rows), ix(4)];
    assert_eq!(compare(e, native, &args), Ok(Outcome::Bottom));
    exactly_on(e, native, "t", &args);
    // A negative count in the second row of a pair (k − r² < 0 at r = 1).
    let (_, e, native) = &entries[2];
    let args = [
        matrix(4, 4, &mut next),
        matrix(4, 9, &mut next),
        ix(4),
        ix(0),
    ];
    assert_eq!(compare(e, native, &args), Ok(Outcome::Bottom));
    exactly_on(e, native, "c", &args);
}

/// Deterministic Doubles of every magnitude and sign (xorshift from
/// `seed`), so that the order of additions shows in the bits.
fn draws(mut seed: u64) -> impl FnMut() -> f64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let m = (seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
        m * f64::powi(10.0, (seed % 7) as i32 - 3)
    }
}

/// A `rows × n` matrix of `next`'s draws.
fn matrix(rows: usize, n: usize, next: &mut dyn FnMut() -> f64) -> Value {
    Value::array(
        (0..rows)
            .map(|_| vector(&(0..n).map(|_| next()).collect::<Vec<_>>()))
            .collect(),
    )
}

/// Note [Row kernels]: under `--fp relaxed`, on a host with AVX2 and
/// FMA3, an interchanged sum whose terms are `c_i · r_i[j]` (`b`; the
/// batched products `Q[r] · ys` over `s ≤ r`, `t`) calls the JIT's row
/// kernel: every element is its terms fused in order onto its start,
/// `fma(c_i, r_i[j], x)` for i ascending, bit for bit, for every count of
/// elements (the kernel's paths of sixteen, four and one) and of terms
/// (more than one buffer of 64); for some input that differs from the
/// evaluator's bits (the products were fused). A short row is still the
/// evaluator's ⊥ (the guard). On a host without them the sums are the
/// evaluator's bits, as under the strict contract.
#[test]
fn interchanged_sums_of_products_call_the_row_kernel_under_the_relaxed_contract() {
    use fsmooth::codegen::{FpContract, NativeOptions};
    let src = "let b (q: Vector) (ys: Matrix) (z: Double) = build (length (ys[0])) (fun j -> ifold (fun t s -> t + q[s] * ys[s][j]) z (length q))\n\
               let t (q: Matrix) (ys: Matrix) (d: Index) = build d (fun r -> let row = q[r] in let m = r + 1 in build (length (ys[0])) (fun i -> ifold (fun acc s -> acc + ys[s][i] * row[s]) 0.0 m))\n";
    let fused =
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma");
    if !fused {
        eprintln!(
            "this host has no AVX2 and FMA3: the row kernel is not called, the sums are the evaluator's"
        );
    }
    let relaxed = NativeOptions {
        fp: FpContract::Relaxed,
        threads: 1,
    };
    let same = |x: f64, y: f64| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan());
    // One element: its terms (c_i, r_i[j]) onto z, fused or as written.
    let sum = |z: f64, terms: &mut dyn Iterator<Item = (f64, f64)>| {
        terms.fold(
            z,
            |x, (c, r)| if fused { c.mul_add(r, x) } else { x + c * r },
        )
    };
    let mut next = draws(0x2545_f491_4f6c_dd1d);
    let mut differs = false;
    let (eb, et) = (load_entry(src, "b"), load_entry(src, "t"));
    let (nb, nt) = (compile_with(&eb, relaxed), compile_with(&et, relaxed));
    for m in [1usize, 5, 64, 70, 130] {
        let q: Vec<f64> = (0..m).map(|_| next()).collect();
        for n in [1usize, 3, 4, 15, 16, 17, 21, 40] {
            let ys = matrix(m, n, &mut next);
            let rows = rows_of(&ys);
            let args = [vector(&q), ys.clone(), Value::Double(0.375)];
            let want = doubles(&evaluate(&eb, &args));
            let got = doubles(&nb.call(&args).expect("runs"));
            for j in 0..n {
                let fma = sum(0.375, &mut (0..m).map(|s| (q[s], rows[s][j])));
                assert!(
                    same(got[j], fma),
                    "b: m {m} n {n} element {j}: {} vs {fma}",
                    got[j]
                );
                differs |= !same(got[j], want[j]);
            }
        }
    }
    for d in [1usize, 2, 7, 33] {
        for n in [5usize, 16, 23] {
            let q = matrix(d, d, &mut next);
            let ys = matrix(d, n, &mut next);
            let (qr, yr) = (rows_of(&q), rows_of(&ys));
            let args = [q.clone(), ys.clone(), Value::Index(d as i64)];
            let got = doubles(&nt.call(&args).expect("runs"));
            for r in 0..d {
                for i in 0..n {
                    let fma = sum(0.0, &mut (0..=r).map(|s| (yr[s][i], qr[r][s])));
                    assert!(
                        same(got[r * n + i], fma),
                        "t: d {d} n {n} row {r} element {i}"
                    );
                }
            }
        }
    }
    assert_eq!(
        differs, fused,
        "the products fused exactly when the host has FMA3"
    );
    // A short row of ys: the guard fails, and the nest's ⊥ is the
    // evaluator's.
    let mut rows: Vec<Value> = (0..4)
        .map(|_| vector(&(0..9).map(|_| next()).collect::<Vec<_>>()))
        .collect();
    rows[2] = vector(&[1.0, 2.0]);
    let args = [
        vector(&[0.5, 1.5, -2.0, 3.0]),
        Value::array(rows),
        Value::Double(0.0),
    ];
    assert_eq!(compare(&eb, &nb, &args), Ok(Outcome::Bottom));
}

/// Note [Row kernels], folds: under `--fp relaxed`, on a host with AVX2
/// and FMA3, a fold of folds of `addAt`s of GMM's reverse shape — per
/// point `t = t[q + i]`, per term `addAt` of `t · w[s]` at `o[s] + i`
/// and of `t · ys[s][i]` at `c + s` — calls the JIT's fold kernel: each
/// slot per (term, point) is its one product fused onto its start, bit
/// for bit; each slot per term is within the contract's bound of the
/// evaluator's (2γ_{n+1} Σ|t|) and differs from it for some input; a
/// short row of `ys` is the evaluator's ⊥ (the guard). On a host without
/// them the slots per (term, point) are the evaluator's bits.
#[test]
fn interchanged_folds_of_products_call_the_fold_kernel_under_the_relaxed_contract() {
    use fsmooth::codegen::{FpContract, NativeOptions};
    let src = "let g (o: Array<Index>) (w: Vector) (ys: Matrix) (t: Vector) (c: Index) (q: Index) (n: Index) =\n\
               \x20 let m = length o\n\
               \x20 ifold (fun st i ->\n\
               \x20     let ti = t[q + i]\n\
               \x20     ifold (fun st2 s ->\n\
               \x20         let a = addAt (fst st2) (o[s] + i) (ti * w[s])\n\
               \x20         let b = addAt (snd st2) (c + s) (ys[s][i] * ti)\n\
               \x20         (a, b)) st m)\n\
               \x20   (build (m * n + 2) (fun k -> 0.1), build (m + c) (fun k -> 0.25)) n\n";
    let fused =
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma");
    if !fused {
        eprintln!("this host has no AVX2 and FMA3: the fold kernel is not called");
    }
    let e = load_entry(src, "g");
    let native = compile_with(
        &e,
        NativeOptions {
            fp: FpContract::Relaxed,
            threads: 1,
        },
    );
    let mut next = draws(0x6a09_e667_f3bc_c908);
    let mut differs = false;
    for m in [1usize, 3, 70] {
        for n in [1usize, 15, 16, 17, 40] {
            let (q, c) = (3usize, 2usize);
            let o: Vec<i64> = (0..m as i64).map(|s| s * n as i64 + 1).collect();
            let w: Vec<f64> = (0..m).map(|_| next()).collect();
            let t: Vec<f64> = (0..n + q).map(|_| next()).collect();
            let ys = matrix(m, n, &mut next);
            let rows = rows_of(&ys);
            let args = [
                indices(&o),
                vector(&w),
                ys.clone(),
                vector(&t),
                Value::Index(c as i64),
                Value::Index(q as i64),
                Value::Index(n as i64),
            ];
            let want = doubles(&evaluate(&e, &args));
            let got = doubles(&native.call(&args).expect("runs"));
            assert_eq!(want.len(), got.len());
            for s in 0..m {
                for i in 0..n {
                    let k = o[s] as usize + i;
                    let ti = t[q + i];
                    let fma = if fused {
                        ti.mul_add(w[s], 0.1)
                    } else {
                        0.1 + ti * w[s]
                    };
                    assert_eq!(
                        got[k].to_bits(),
                        fma.to_bits(),
                        "m {m} n {n} slot ({s}, {i})"
                    );
                }
                let at = m * n + 2 + c + s;
                let (x, y) = (want[at], got[at]);
                let sum: f64 = 0.25 + (0..n).map(|i| (t[q + i] * rows[s][i]).abs()).sum::<f64>();
                assert!(
                    (x - y).abs() <= 2.0 * gamma(n + 1) * sum,
                    "m {m} n {n} term {s}: {x} vs {y}"
                );
                differs |= x.to_bits() != y.to_bits();
            }
        }
    }
    assert!(
        differs,
        "every sum the evaluator's bits: neither kernel nor lanes ran"
    );
    // A short row of ys: the guard fails, the nest runs as written.
    let mut rows: Vec<Value> = (0..3)
        .map(|_| vector(&(0..9).map(|_| next()).collect::<Vec<_>>()))
        .collect();
    rows[1] = vector(&[1.0, 2.0]);
    let args = [
        indices(&[1, 10, 19]),
        vector(&[0.5, 1.5, -2.0]),
        Value::array(rows),
        vector(&(0..12).map(|_| next()).collect::<Vec<_>>()),
        Value::Index(0),
        Value::Index(3),
        Value::Index(9),
    ];
    assert_eq!(compare(&e, &native, &args), Ok(Outcome::Bottom));
}

/// Note [Row kernels], pairs: rows whose row `r_i` is bound per row (in
/// `pre`: `let v = a[r]`) are not summed two at a time by the row kernel
/// — each row reads its own `v` — under either contract, bit for bit the
/// evaluator's (integers: fused or not, the same). A review found row r
/// summing row r + 1's `v`.
#[test]
fn rows_whose_row_is_bound_per_row_read_their_own_row() {
    use fsmooth::codegen::{FpContract, NativeOptions};
    let src = "let f (a: Matrix) (c: Vector) (d: Index) = build d (fun r -> let v = a[r] in build (length (a[0])) (fun j -> ifold (fun s i -> s + c[i] * v[j]) 0.0 (length c)))\n";
    let e = load_entry(src, "f");
    let strict = compile(&e);
    let relaxed = compile_with(
        &e,
        NativeOptions {
            fp: FpContract::Relaxed,
            threads: 1,
        },
    );
    for d in [1usize, 2, 3, 4, 7] {
        for n in [1usize, 5, 16, 21] {
            let a = Value::array(
                (0..d)
                    .map(|r| vector(&(0..n).map(|j| (10 * r + j) as f64).collect::<Vec<_>>()))
                    .collect(),
            );
            let c = vector(&[1.0, 2.0, -3.0]);
            let args = [a, c, Value::Index(d as i64)];
            exactly_on(&e, &strict, "f", &args);
            exactly_on(&e, &relaxed, "f", &args);
        }
    }
}

/// Note [Interchange], the guard: with no element (n = 0) the rows'
/// descriptors are not read, however many terms the count says (a
/// review found `build 0 (fun j -> … r[i][j] …)` over m past `r`'s end
/// reading descriptors beyond it: a fault with `r` empty, a stack
/// overflow with m = 10⁸); with elements, a count past `r`'s end is the
/// evaluator's ⊥. Sums, sums of products (the row kernel's shape) and
/// builds of builds, on one thread and two, under either contract.
#[test]
fn interchanged_nests_read_no_row_past_the_end() {
    use fsmooth::codegen::{FpContract, NativeOptions};
    use fsmooth::diagnostic::Diagnose;
    let src = "let g (r: Matrix) (n: Index) (m: Index) = build n (fun j -> ifold (fun s i -> s + r[i][j]) 0.0 m)\n\
               let k (c: Vector) (r: Matrix) (n: Index) (m: Index) = build n (fun j -> ifold (fun s i -> s + c[i] * r[i][j]) 0.0 m)\n\
               let h (a: Matrix) (n: Index) (m: Index) = build n (fun j -> build m (fun i -> a[i][j] * 2.0))\n";
    let ix = Value::Index;
    let one = || Value::array(vec![vector(&[1.0])]);
    let two = || Value::array(vec![vector(&[1.0, 3.0]), vector(&[2.0, 4.0])]);
    for (fp, threads) in [
        (FpContract::Strict, 1),
        (FpContract::Relaxed, 1),
        (FpContract::Strict, 2),
        (FpContract::Relaxed, 2),
    ] {
        let options = NativeOptions { fp, threads };
        for f in ["g", "k", "h"] {
            let e = load_entry(src, f);
            let native = compile_with(&e, options);
            let cases = [
                (Value::array(vec![]), 0, 1),
                (one(), 0, 100_000_000),
                (two(), 2, 3),
                (two(), 1, 2),
            ];
            for (m_arr, n, m) in cases {
                let mut args = Vec::new();
                if f == "k" {
                    args.push(vector(&[1.0, -2.0, 0.5]));
                }
                args.extend([m_arr, ix(n), ix(m)]);
                let want = e.run(args.clone(), super::FUEL, &mut |_, _| {});
                let got = native.call(&args);
                match (&want, &got) {
                    (Ok((a, _)), Ok(b)) => assert!(a.same(b), "{f} {args:?}: {a} vs {b}"),
                    (Err(a), Err(b)) => assert_eq!(a.code(), b.code(), "{f} {args:?}"),
                    _ => panic!("{f} {args:?}: {want:?} vs {got:?}"),
                }
            }
        }
    }
}

/// Every Double of `v`, in order.
fn doubles(v: &Value) -> Vec<f64> {
    let mut out = Vec::new();
    fsmooth::eval::flatten(v, &mut out);
    out
}

/// The rows of a matrix.
fn rows_of(ys: &Value) -> Vec<Vec<f64>> {
    match ys {
        Value::Array(rows) => rows.iter().map(doubles).collect(),
        _ => unreachable!("a matrix"),
    }
}

/// An array of Indices.
fn indices(xs: &[i64]) -> Value {
    Value::array(xs.iter().map(|&x| Value::Index(x)).collect())
}
