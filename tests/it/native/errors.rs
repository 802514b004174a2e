//! ⊥ and errors natively: every ⊥ code of spec/semantics.md §5 (but
//! `out-of-fuel`) with the evaluator's code, reads out of bounds with the
//! index and the length, the copy loop's ⊥ after it became a memcpy, what
//! the backend refuses (`native-unsupported`, `native-argument`,
//! `out-of-memory`), and `--engine native`'s error exits.

use fsmooth::codegen::{CodegenError, Native};
use fsmooth::diagnostic::Diagnose;
use fsmooth::eval::Value;
use fsmooth::ir::Type;

use super::{Outcome, compare_src, compile, load_entry, native_error, vector};
use crate::common;

/// E-Get-Bot: an index outside the array is `index-out-of-bounds` with the
/// index and the length, never a crash, for every element layout.
#[test]
fn native_get_out_of_bounds_is_an_error_not_a_crash() {
    let src = "let at (v: Vector) (i: Index) = v[i]\n\
               let atPair (v: Vector) (i: Index) = (vectorZip v v)[i]\n\
               let atRow (m: Matrix) (i: Index) = m[i]\n";
    let v = vector(&[1.0, 2.0, 3.0]);
    for i in [3, -1, i64::MAX, i64::MIN] {
        for f in ["at", "atPair"] {
            let e = native_error(src, f, &[v.clone(), Value::Index(i)]);
            assert_eq!(e, CodegenError::IndexOutOfBounds { index: i, len: 3 });
        }
    }
    let m = Value::array(vec![v.clone()]);
    let e = native_error(src, "atRow", &[m.clone(), Value::Index(1)]);
    assert_eq!(e, CodegenError::IndexOutOfBounds { index: 1, len: 1 });
    assert_eq!(
        compare_src(src, "atRow", &[m, Value::Index(0)]),
        Outcome::Value
    );
    assert_eq!(
        compare_src(src, "at", &[v, Value::Index(2)]),
        Outcome::Value
    );
}

/// `build n (fun i -> a[i])` is lowered to one memcpy (the optimised
/// dot-product gradient): the same values as the loop, and past the end of
/// `a` the same ⊥ as the loop's first read out of bounds, at `length a`.
#[test]
fn native_copy_loop_is_a_memcpy_with_the_loops_bottom() {
    let src = "let take (n: Index) (v: Vector) = build n (fun i -> v[i])\n\
               let rows (n: Index) (m: Matrix) = build n (fun i -> m[i])\n\
               let pairs (n: Index) (v: Vector) = let z = vectorZip v v in build n (fun i -> z[i])\n";
    let v = vector(&[1.0, -2.5, 3.0]);
    let m = Value::array(vec![v.clone(), vector(&[4.0])]);
    for (f, a) in [("take", &v), ("rows", &m), ("pairs", &v)] {
        let len = if f == "rows" { 2 } else { 3 };
        for n in 0..=len {
            assert_eq!(
                compare_src(src, f, &[Value::Index(n), a.clone()]),
                Outcome::Value,
                "{f} {n}"
            );
        }
        let e = native_error(src, f, &[Value::Index(len + 2), a.clone()]);
        assert_eq!(e, CodegenError::IndexOutOfBounds { index: len, len });
        let e = native_error(src, f, &[Value::Index(-1), a.clone()]);
        assert_eq!(e.code(), "negative-size");
    }
}

/// Every ⊥ code of spec/semantics.md §5 but `out-of-fuel`, natively.
#[test]
fn native_bottoms_have_the_evaluators_codes() {
    let d = |x: f64| Value::Double(x);
    let i = Value::Index;
    let cases: Vec<(&str, Vec<Value>, &str)> = vec![
        // Dom(tan): x finite and cos x ≠ 0 (spec/semantics.md §4).
        (
            "fun (x: Double) -> tan x",
            vec![d(f64::INFINITY)],
            "domain-error",
        ),
        (
            "fun (x: Double) -> tan x",
            vec![d(f64::NAN)],
            "domain-error",
        ),
        (
            "fun (x: Double) (y: Double) -> x / y",
            vec![d(1.0), d(0.0)],
            "division-by-zero",
        ),
        (
            "fun (x: Double) (y: Double) -> x / y",
            vec![d(0.0), d(-0.0)],
            "division-by-zero",
        ),
        (
            "fun (x: Index) (y: Index) -> x / y",
            vec![i(7), i(0)],
            "division-by-zero",
        ),
        (
            "fun (x: Index) (y: Index) -> x / y",
            vec![i(i64::MIN), i(-1)],
            "integer-overflow",
        ),
        (
            "fun (x: Index) (y: Index) -> x + y",
            vec![i(i64::MAX), i(1)],
            "integer-overflow",
        ),
        (
            "fun (x: Index) (y: Index) -> x - y",
            vec![i(i64::MIN), i(1)],
            "integer-overflow",
        ),
        (
            "fun (x: Index) (y: Index) -> x * y",
            vec![i(1 << 40), i(1 << 40)],
            "integer-overflow",
        ),
        (
            "fun (x: Index) -> -x",
            vec![i(i64::MIN)],
            "integer-overflow",
        ),
        (
            "fun (x: Index) (y: Index) -> x ** y",
            vec![i(3), i(-1)],
            "domain-error",
        ),
        (
            "fun (x: Index) (y: Index) -> x ** y",
            vec![i(3), i(50)],
            "integer-overflow",
        ),
        (
            "fun (x: Double) (y: Double) -> x ** y",
            vec![d(-2.0), d(0.5)],
            "domain-error",
        ),
        (
            "fun (x: Double) (y: Double) -> x ** y",
            vec![d(f64::NAN), d(1.0)],
            "domain-error",
        ),
        (
            "fun (x: Double) (y: Double) -> x ** y",
            vec![d(-2.0), d(f64::INFINITY)],
            "domain-error",
        ),
        (
            "fun (x: Double) (y: Double) -> x ** y",
            vec![d(0.0), d(-1.0)],
            "domain-error",
        ),
        ("fun (x: Double) -> log x", vec![d(0.0)], "domain-error"),
        (
            "fun (x: Double) -> log x",
            vec![d(f64::NAN)],
            "domain-error",
        ),
        (
            "fun (x: Double) -> sqrt x",
            vec![d(-1e-300)],
            "domain-error",
        ),
        (
            "fun (n: Index) -> build n (fun i -> toDouble i)",
            vec![i(-1)],
            "negative-size",
        ),
        (
            "fun (n: Index) -> ifold (fun s i -> s + 1.0) 0.0 n",
            vec![i(-2)],
            "negative-count",
        ),
        (
            "fun (n: Index) -> iscan (fun s i -> s + 1.0) 0.0 n",
            vec![i(-2)],
            "negative-count",
        ),
        (
            "fun (n: Index) -> accum 0.0 n [(0, 1.0)]",
            vec![i(-1)],
            "negative-size",
        ),
        (
            "fun (n: Index) -> accum 0.0 n [(0, 1.0), (n, 2.0)]",
            vec![i(2)],
            "index-out-of-bounds",
        ),
    ];
    for (f, args, code) in cases {
        let src = format!("let bottom'case = {f}\n");
        let e = native_error(&src, "bottom'case", &args);
        assert_eq!(e.code(), code, "{f}");
    }
    // And the edges of those domains are values.
    let values: Vec<(&str, Vec<Value>)> = vec![
        (
            "fun (x: Double) (y: Double) -> x ** y",
            vec![d(0.0), d(0.0)],
        ),
        (
            "fun (x: Double) (y: Double) -> x ** y",
            vec![d(-2.0), d(3.0)],
        ),
        (
            "fun (x: Double) (y: Double) -> x ** y",
            vec![d(2.0), d(f64::NAN)],
        ),
        (
            "fun (x: Index) (y: Index) -> x ** y",
            vec![i(-1), i(1 << 40)],
        ),
        ("fun (x: Index) (y: Index) -> x ** y", vec![i(3), i(39)]),
        ("fun (x: Index) (y: Index) -> x / y", vec![i(-7), i(2)]),
        ("fun (x: Double) -> sqrt x", vec![d(-0.0)]),
        (
            "fun (x: Double) (y: Double) -> (x < y, x <> y, x = y, x >= y)",
            vec![d(f64::NAN), d(1.0)],
        ),
        (
            "fun (x: Double) (y: Double) -> (x < y, x <> y, x = y, x <= y)",
            vec![d(0.0), d(-0.0)],
        ),
        (
            "fun (n: Index) -> (build n (fun i -> i), iscan (fun s i -> s + i) 0 n)",
            vec![i(0)],
        ),
        ("fun (x: Index) -> toDouble x", vec![i((1 << 53) + 1)]),
    ];
    for (f, args) in values {
        let src = format!("let value'case = {f}\n");
        assert_eq!(
            compare_src(&src, "value'case", &args),
            Outcome::Value,
            "{f}"
        );
    }
}

/// What the backend cannot compile is a clean `native-unsupported`; a call
/// with arguments of the wrong shape is `native-argument`; an array beyond
/// the memory limit is `out-of-memory`. None of them panics.
#[test]
fn native_unsupported_bad_arguments_and_memory_limits_are_errors() {
    use fsmooth::anf::{Atom, Block, Normal};
    let f = Type::fun(Type::Double, Type::Double);
    let normal = Normal {
        params: vec![("f'n1".into(), f.clone())],
        body: Block {
            binds: Vec::new(),
            result: Atom::Var("f'n1".into(), f),
        },
        spans: Default::default(),
    };
    let e = Native::compile(&normal).expect_err("a function parameter");
    assert_eq!(e.code(), "native-unsupported", "{e}");

    let n = compile(&load_entry("let f (v: Vector) = vectorSum v\n", "f"));
    for bad in [
        vec![],
        vec![Value::Double(1.0)],
        vec![Value::array(vec![Value::Index(1)])],
    ] {
        let e = n.call(&bad).expect_err("wrong arguments");
        assert_eq!(e.code(), "native-argument", "{e}");
    }
    assert_eq!(
        n.call(&[vector(&[1.0, 2.0])]).ok().and_then(|v| v.as_f64()),
        Some(3.0)
    );

    let mut n = compile(&load_entry(
        "let f (n: Index) = build n (fun i -> toDouble i)\n",
        "f",
    ));
    n.limits.memory_bytes = 1 << 20;
    for size in [1 << 20, i64::MAX] {
        // Past the element limit (E-Limit, before any memory is asked
        // for), and, with no element limit and no fuel limit (the loop's
        // iterations are charged before its array is allocated), past the
        // memory limit.
        let e = n.call(&[Value::Index(size)]).expect_err("too large");
        let want = if size as u64 > n.limits.elements {
            "array-too-large"
        } else {
            "out-of-memory"
        };
        assert_eq!(e.code(), want, "{e}");
        let unlimited = fsmooth::codegen::NativeLimits {
            elements: u64::MAX,
            fuel: u64::MAX,
            ..n.limits
        };
        let e = n
            .call_with(&[Value::Index(size)], unlimited)
            .expect_err("too large");
        assert_eq!(e.code(), "out-of-memory", "{e}");
    }
    assert!(n.call(&[Value::Index(1000)]).is_ok());
}

#[test]
fn native_engine_errors_from_the_command_line() {
    let p = common::temp_file("oob.fsm", "let main = fun (v: Vector) -> v[5]\n");
    let o = common::cli(&[
        "run",
        p.to_str().unwrap(),
        "--engine",
        "native",
        "--input",
        "[1, 2]",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("error[index-out-of-bounds]"));
    // The tape and finite differences are interpreters: no native leg.
    let dot = common::root().join("examples/dot.fsm");
    let o = common::cli(&[
        "grad",
        dot.to_str().unwrap(),
        "--entry",
        "dot",
        "--wrt",
        "u",
        "--mode",
        "tape",
        "--engine",
        "native",
        "--input",
        "[[1], [2]]",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--engine native"));
}

/// E-Limit of an `iscan`: its n + 1 states counted without wrapping, so
/// the message is the evaluator's — 2⁶³ − 1 elements, not −2⁶³ (a review
/// found the sum wrapping).
#[test]
fn an_iscan_too_large_is_counted_as_the_evaluator_counts_it() {
    let e = load_entry("let f (n: Index) = iscan (fun s i -> s + 1.0) 0.0 n\n", "f");
    let native = compile(&e);
    for n in [i64::MAX, i64::MAX - 1, 300_000_000] {
        let args = [Value::Index(n)];
        let want = e
            .run(args.to_vec(), super::FUEL, &mut |_, _| {})
            .expect_err("too large");
        let got = native.call(&args).expect_err("too large");
        assert_eq!(want.code(), "array-too-large");
        assert_eq!(want.to_string(), got.unlocated().to_string(), "n = {n}");
    }
}

/// Note [Failure sites]: a ⊥ natively is reported where the evaluator
/// reports it, also where native code computes the failing operation
/// elsewhere: a read past the end in `build n (fun i -> a[i])`, which is
/// a view of `a` (at the read, not the `build`); a producer merged into
/// its consumer, and the consumer into the next (Note [Vertical fusion]:
/// a negative size at the first producer, which the evaluator builds
/// first); and a paired `build` (strict), a fold of `addAt`s or an
/// interchanged nest (Note [Interchange]) with two divisions, where the
/// order they run in meets the other division's zero first (the pair,
/// and the nest, run again as written; the fold is not paired).
#[test]
fn failures_inside_views_merged_producers_and_pairs_are_at_the_evaluators_site() {
    let src = "let view (v: Vector) (k: Index) = vectorSum (build k (fun j -> v[j]))\n\
               let chain (v: Vector) (n: Index) =\n\
               \x20 let d = build n (fun r -> build (length v) (fun k -> v[k] * toDouble r))\n\
               \x20 let e = build (length d) (fun c -> let col = d[c] in build (length col) (fun k -> col[k] + 1.0))\n\
               \x20 build (length e) (fun c -> let col = e[c] in ifold (fun s k -> s + col[k]) 0.0 (length col))\n\
               let twoDivisions (v: Vector) (w: Vector) = build (length v) (fun i -> 1.0 / v[i] + 1.0 / w[i])\n\
               let twoDivisionsAdded (u: Vector) (v: Vector) (w: Vector) = let a = build (length u) (fun j -> 0.0) in ifold (fun s i -> addAt s i (u[i] / v[i] + u[i] / w[i])) a (length u)\n\
               let twoDivisionsNested (u: Vector) (w: Vector) (xs: Vector) (ys: Vector) = build (length u) (fun i -> ifold (fun acc j -> acc + (xs[j] / u[i] + ys[i] / w[j])) 0.0 (length xs))\n";
    let i = Value::Index;
    let cases: Vec<(&str, Vec<Value>, &str)> = vec![
        ("view", vec![vector(&[3.5]), i(5)], "v[j]"),
        ("chain", vec![vector(&[1.0, 2.0]), i(-2)], "build n (fun r"),
        (
            "twoDivisions",
            vec![vector(&[1.0, 0.0, 1.0]), vector(&[0.0, 1.0, 1.0])],
            "1.0 / w[i]",
        ),
        (
            "twoDivisionsAdded",
            vec![
                vector(&[1.0, 1.0]),
                vector(&[1.0, 0.0]),
                vector(&[0.0, 1.0]),
            ],
            "u[i] / w[i]",
        ),
        (
            "twoDivisionsNested",
            vec![
                vector(&[1.0, 0.0, 1.0, 1.0]),
                vector(&[1.0, 0.0, 1.0, 1.0]),
                vector(&[1.0; 4]),
                vector(&[1.0; 4]),
            ],
            "ys[i] / w[j]",
        ),
    ];
    for (f, args, at) in cases {
        let e = load_entry(src, f);
        let want = e
            .run(args.to_vec(), super::FUEL, &mut |_, _| {})
            .expect_err("⊥");
        let got = compile(&e).call(&args).expect_err("⊥");
        assert_eq!(want.code(), got.code(), "{f} {args:?}");
        assert_eq!(
            want.span(),
            got.span(),
            "{f} {args:?}: the evaluator's site"
        );
        if f == "twoDivisionsNested" {
            // The nest is interchanged: its fast path is what failed.
            let listing = super::listing_of(src, f);
            assert!(
                !listing.contains(";; loop nests interchanged (Note [Interchange]): none"),
                "{listing}"
            );
        }
        let span = got.span();
        assert!(
            src[span.start as usize..].starts_with(at),
            "{f} {args:?}: {}",
            &src[span.start as usize..span.end as usize]
        );
    }
}
