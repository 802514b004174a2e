//! Note [Interchange] natively: `build`s of sums and `build`s of `build`s
//! that read a matrix column-wise run i-major behind a guard, bit for bit
//! and ⊥ for ⊥ the evaluator's.

use fsmooth::eval::Value;

use super::{Outcome, exactly_all, listing_of, listing_says, vector};

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
