//! Folds on several threads under the relaxed floating-point contract
//! (Note [Parallel loops] in `codegen/passes/parallel.rs`; spec/semantics.md
//! §7, "Native code's contract"): which folds split, the contract's bound
//! on random inputs, determinism, the first ⊥, fuel, and the command line.

use fsmooth::codegen::{FpContract, NativeOptions};
use fsmooth::diagnostic::Diagnose;
use fsmooth::eval::{Limits, Value};
use fsmooth::numeric::rho;
use fsmooth::pipeline::Session;
use proptest::prelude::*;

use super::{FUEL, compile_with, evaluate, gamma, load_entry, vector};

fn relaxed(threads: usize) -> NativeOptions {
    NativeOptions {
        fp: FpContract::Relaxed,
        threads,
    }
}

const SUM: &str = "let main (xs: Vector) (w: Double) =\n  ifold (fun acc i -> acc + w * xs[i]) 0.25 (length xs)\n";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The bound of spec/semantics.md §7: a sum of m addends on T threads
    /// is within 2 γ_m Σ|t| of the evaluator's, and the same bits on every
    /// call.
    #[test]
    fn a_sum_on_threads_is_within_the_relaxed_bound(
        xs in proptest::collection::vec(
            prop_oneof![-1e6f64..1e6, -1.0f64..1.0, Just(1e300), Just(-1e300)],
            0..3000,
        ),
        w in -4.0f64..4.0,
        threads in 2usize..5,
    ) {
        let e = load_entry(SUM, "main");
        let native = compile_with(&e, relaxed(threads));
        prop_assert_eq!(native.parallel_loops(), 1);
        let args = [vector(&xs), Value::Double(w)];
        let want = evaluate(&e, &args).as_f64().expect("a Double");
        let got = native.call(&args).expect("runs").as_f64().expect("a Double");
        let again = native.call(&args).expect("runs").as_f64().expect("a Double");
        prop_assert_eq!(got.to_bits(), again.to_bits(), "deterministic");
        let terms: f64 = 0.25 + xs.iter().map(|x| (w * x).abs()).sum::<f64>();
        if terms.is_finite() && want.is_finite() {
            let bound = 2.0 * gamma(xs.len() + 1) * terms;
            prop_assert!((got - want).abs() <= bound, "{} vs {} (bound {})", got, want, bound);
        }
    }
}

/// Reverse mode's shape: accumulators threaded through inner folds by
/// `addAt`, a Double sum, a scalar the body passes on, one it replaces, and
/// `length` of an accumulator. Every leaf combines as the Note says; the
/// results are within ρ ≤ 1e-12 of the evaluator's at every thread count,
/// below the threshold the fold runs as written (the evaluator's bits).
#[test]
fn accumulators_through_inner_folds_run_on_threads() {
    let src = "let main (xs: Vector) (k: Index) =
  let n = length xs
  ifold (fun st i ->
      let a = fst st
      let b = fst (snd st)
      let s = fst (snd (snd st))
      let keep = fst (snd (snd (snd st)))
      let a2 = ifold (fun acc j -> addAt acc (i + j - (length acc) * ((i + j) / (length acc))) (xs[i] * toDouble j)) a 3
      let b2 = if xs[i] > 0.0 then addAt b 0 xs[i] else addAt b 1 xs[i]
      (a2, (b2, (s + xs[i] * xs[i], (keep, i * k)))))
    (build k (fun j -> toDouble j), (build 2 (fun j -> 0.0), (1.5, (true, 0)))) n
";
    let e = load_entry(src, "main");
    for threads in [2, 3, 4] {
        let native = compile_with(&e, relaxed(threads));
        // The fold and the build of its initial state.
        assert_eq!(native.parallel_loops(), 2, "{threads} threads");
        for n in [0usize, 3, 63, 64, 65, 200, 1001] {
            let xs: Vec<f64> = (0..n)
                .map(|i| ((i * 37 % 101) as f64 - 50.0) / 7.0)
                .collect();
            let args = [vector(&xs), Value::Index(5)];
            let want = evaluate(&e, &args);
            let got = native.call(&args).expect("runs");
            let r = want.max_rho(&got).expect("same shape");
            assert!(r <= 1e-12, "{threads} threads, n = {n}: {want} vs {got}");
            if n < 64 {
                assert!(want.same(&got), "below the threshold: as written");
            }
        }
    }
}

/// Note [Parallel loops], invariant components: a fold that reads an
/// array its body passes on unchanged (reverse mode's seeds, carried
/// beside the accumulators) runs on threads; every chunk reads the
/// initial array, the result keeps it, and the sums are within ρ ≤ 1e-12
/// of the evaluator's. One that changes the array it reads stays serial.
#[test]
fn folds_reading_a_component_they_pass_on_run_on_threads() {
    let src = "let main (xs: Vector) (w: Vector) =
  ifold (fun st i ->
      let seeds = fst st
      let acc = snd st
      (seeds, addAt acc (i - (length acc) * (i / (length acc))) (seeds[i] * w[i])))
    (xs, build 7 (fun j -> 0.0)) (length xs)
let changed (xs: Vector) (w: Vector) =
  ifold (fun st i ->
      let seeds = fst st
      (addAt seeds 0 w[i], snd st + seeds[i]))
    (xs, 0.0) (length xs)
";
    let e = load_entry(src, "main");
    let native = compile_with(&e, relaxed(2));
    // The fold and the build of its initial state.
    assert_eq!(native.parallel_loops(), 2);
    for n in [0usize, 5, 64, 65, 1000] {
        let xs: Vec<f64> = (0..n)
            .map(|i| ((i * 31 % 97) as f64 - 40.0) / 9.0)
            .collect();
        let w: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).cos()).collect();
        let args = [vector(&xs), vector(&w)];
        let want = evaluate(&e, &args);
        let got = native.call(&args).expect("runs");
        let r = want.max_rho(&got).expect("same shape");
        assert!(r <= 1e-12, "n = {n}: {want} vs {got}");
    }
    let e = load_entry(src, "changed");
    let native = compile_with(&e, relaxed(2));
    assert_eq!(native.parallel_loops(), 0);
    let xs: Vec<f64> = (0..300).map(|i| (i as f64).sin()).collect();
    let args = [vector(&xs), vector(&xs)];
    assert!(evaluate(&e, &args).same(&native.call(&args).expect("runs")));
}

/// A fold that reads its state (a product, a test, an element) is not a
/// sum: it runs as written, and relaxed native code returns the
/// evaluator's bits.
#[test]
fn folds_that_read_their_state_stay_serial() {
    let src = "let product (xs: Vector) = ifold (fun acc i -> acc * 1.0001 + xs[i]) 0.0 (length xs)
let test (xs: Vector) = ifold (fun acc i -> if acc > 10.0 then acc else acc + xs[i]) 0.0 (length xs)
let element (xs: Vector) = ifold (fun a i -> addAt a 0 (a[1] + xs[i])) (build 2 (fun j -> 1.0)) (length xs)
let stored (xs: Vector) = ifold (fun st i -> (fst st + xs[i], build 1 (fun j -> fst st))) (0.0, build 1 (fun j -> 0.0)) (length xs)
";
    let xs: Vec<f64> = (0..500).map(|i| (i as f64).sin()).collect();
    for f in ["product", "test", "element", "stored"] {
        let e = load_entry(src, f);
        let native = compile_with(&e, relaxed(2));
        assert_eq!(native.parallel_loops(), 0, "{f}");
        let args = [vector(&xs)];
        assert!(
            evaluate(&e, &args).same(&native.call(&args).expect("runs")),
            "{f}"
        );
    }
}

/// The ⊥ a parallel fold reports is the evaluator's first, with its code,
/// details and source span, whichever chunk holds it and whichever chunks
/// fail after it.
#[test]
fn the_first_failing_chunk_reports_the_evaluators_first_bottom() {
    let src = "let logs (xs: Vector) = ifold (fun acc i -> acc + log xs[i]) 0.0 (length xs)
let reads (xs: Vector) (k: Index) = ifold (fun acc i -> acc + xs[i * k]) 0.0 (length xs)
";
    let run = |f: &str, args: &[Value], threads: usize| {
        let session = Session::load(src).expect("loads");
        let e = session.entry(f).expect("entry");
        let native = compile_with(&e, relaxed(threads));
        assert_eq!(native.parallel_loops(), 1, "{f}");
        let want = e.run(args.to_vec(), FUEL, &mut |_, _| {}).expect_err("⊥");
        let got = native.call(args).expect_err("⊥");
        assert_eq!(want.code(), got.code(), "{f}");
        assert_eq!(want.to_string(), got.unlocated().to_string(), "{f}");
        let got = native.call(args).expect_err("⊥");
        assert_eq!(want.span(), got.span(), "{f}: the evaluator's site");
    };
    for threads in [2, 3, 4] {
        for bad in [[5, 900], [100, 150], [999, 300], [0, 998]] {
            let xs: Vec<f64> = (0..1000)
                .map(|i| {
                    if bad.contains(&i) {
                        -(i as f64) - 1.0
                    } else {
                        1.0 + i as f64
                    }
                })
                .collect();
            run("logs", &[vector(&xs)], threads);
        }
        let xs: Vec<f64> = (0..1000).map(|i| i as f64).collect();
        run("reads", &[vector(&xs), Value::Index(2)], threads);
    }
}

/// Fuel spent on the other threads counts against the call's: a parallel
/// fold whose iterations, all threads together, overdraw the fuel ends
/// with `out-of-fuel`, located at the fold; one within it runs.
#[test]
fn fuel_spent_on_every_thread_counts() {
    let src = "let main (xs: Vector) = ifold (fun acc i -> acc + ifold (fun t j -> t + xs[j] * toDouble i) 0.0 (length xs)) 0.0 (length xs)\n";
    let e = load_entry(src, "main");
    let native = compile_with(&e, relaxed(2));
    assert_eq!(native.parallel_loops(), 1);
    let args = [vector(&vec![1.0; 300])];
    let limits = |fuel| fsmooth::codegen::NativeLimits::of(Limits::with_fuel(fuel));
    // 300 outer iterations of 300: 90 300 iterations in all.
    let ok = native
        .call_with(&args, limits(91_000))
        .expect("within the fuel");
    assert_eq!(ok.as_f64(), Some(300.0 * 44_850.0));
    let err = native
        .call_with(&args, limits(60_000))
        .expect_err("overdrawn");
    assert_eq!(err.code(), "out-of-fuel", "{err}");
    // Located at the parallel fold (Note [Failure sites]), not the entry.
    let fsmooth::codegen::CodegenError::Located { span, .. } = &err else {
        panic!("a located ⊥: {err:?}");
    };
    assert!(
        src[span.start as usize..].starts_with("ifold (fun acc i"),
        "{err:?}"
    );
}

/// Builds of the entry's own block run on threads under either contract,
/// element by element as written: under the strict contract the
/// evaluator's bits, whatever the thread count, for elements that are
/// scalars, pairs or rows (which stay in their thread's arena while the
/// result lives: two results held at once keep their own rows); under the
/// relaxed one an element's inner sums may run in lanes (Note [Lane
/// sums]), within ρ ≤ 1e-12. The first ⊥ is the evaluator's.
#[test]
fn builds_on_threads_are_the_evaluators_bits_under_either_contract() {
    use fsmooth::codegen::{Arg, Out};
    let src = "let scalars (xs: Vector) = build (length xs) (fun i -> ifold (fun t j -> t + xs[j] * toDouble i) 0.0 (i - 64 * (i / 64)))
let rows (xs: Vector) (k: Index) = build (length xs) (fun i -> build k (fun j -> xs[i] * toDouble j + sin xs[i]))
let pairs (xs: Vector) = build (length xs) (fun i -> (ifold (fun t j -> t + xs[j]) 0.0 (i / 10), i))
let bad (xs: Vector) = build (length xs) (fun i -> ifold (fun t j -> t + log xs[i + j]) 0.0 3)
";
    let xs: Vec<f64> = (0..500).map(|i| 1.0 + (i as f64).cos()).collect();
    let cases: Vec<(&str, Vec<Value>)> = vec![
        ("scalars", vec![vector(&xs)]),
        ("rows", vec![vector(&xs), Value::Index(7)]),
        ("pairs", vec![vector(&xs)]),
    ];
    for strictness in [FpContract::Strict, FpContract::Relaxed] {
        for threads in [2, 3] {
            let options = NativeOptions {
                fp: strictness,
                threads,
            };
            for (f, args) in &cases {
                let e = load_entry(src, f);
                let native = compile_with(&e, options);
                assert_eq!(native.parallel_loops(), 1, "{f}");
                let want = evaluate(&e, args);
                let got = native.call(args).expect("runs");
                if strictness == FpContract::Strict {
                    assert!(want.same(&got), "{f}");
                } else {
                    let r = want.max_rho(&got).expect("same shape");
                    assert!(r <= 1e-12, "{f}: {want} vs {got}");
                }
            }
            let e = load_entry(src, "bad");
            let native = compile_with(&e, options);
            let ys: Vec<f64> = (0..500)
                .map(|i| if i == 400 || i == 300 { -1.0 } else { 1.0 })
                .collect();
            let want = e
                .run(vec![vector(&ys)], FUEL, &mut |_, _| {})
                .expect_err("⊥");
            let got = native.call(&[vector(&ys)]).expect_err("⊥");
            assert_eq!(want.to_string(), got.unlocated().to_string());
            let short = native.call(&[vector(&xs)]).expect_err("⊥");
            assert_eq!(short.code(), "index-out-of-bounds");
        }
    }
    // Rows held by two live results at once.
    let e = load_entry(src, "rows");
    let native = compile_with(
        &e,
        NativeOptions {
            fp: FpContract::Strict,
            threads: 2,
        },
    );
    let ys: Vec<f64> = xs.iter().map(|x| x * 2.0).collect();
    let first = native
        .call_slices(&[Arg::F64s(&xs), Arg::I64(5)])
        .expect("runs");
    let second = native
        .call_slices(&[Arg::F64s(&ys), Arg::I64(5)])
        .expect("runs");
    for (out, v) in [(&first, &xs), (&second, &ys)] {
        let Some(Out::F64Rows(rows)) = out.get(0) else {
            panic!("a matrix");
        };
        assert_eq!(rows.len(), v.len());
        for (i, row) in rows.iter().enumerate() {
            for (j, x) in row.iter().enumerate() {
                assert_eq!(
                    x.to_bits(),
                    (v[i] * j as f64 + v[i].sin()).to_bits(),
                    "[{i}][{j}]"
                );
            }
        }
    }
}

/// −0.0 is IEEE's additive identity: every chunk of a relaxed fold starts
/// from it, so a sum the evaluator leaves at −0.0 stays −0.0, in a Double
/// leaf and in an accumulator array; and a Double the body passes on is
/// its initial value, bit for bit.
#[test]
fn relaxed_folds_keep_negative_zero() {
    let src = "let keep (xs: Vector) (z: Double) = ifold (fun s i -> (fst s + ifold (fun t j -> t + xs[j]) 0.0 i, snd s)) (0.0, z) (length xs)
let arr (xs: Vector) (z: Vector) = ifold (fun a i -> addAt a 0 (ifold (fun t j -> t + xs[j]) 0.0 i)) z (length xs)
let zeros (xs: Vector) = ifold (fun s i -> s + ifold (fun t j -> t + xs[i]) (-0.0) 1) (-0.0) (length xs)
";
    let ones = vector(&[1.0; 64]);
    let minus: Vec<f64> = vec![-0.0; 100];
    let cases: Vec<(&str, Vec<Value>)> = vec![
        ("keep", vec![ones.clone(), Value::Double(-0.0)]),
        ("arr", vec![ones, vector(&[0.0, -0.0])]),
        ("zeros", vec![vector(&minus)]),
    ];
    for (f, args) in cases {
        let e = load_entry(src, f);
        let native = compile_with(&e, relaxed(2));
        assert!(native.parallel_loops() >= 1, "{f}");
        let want = evaluate(&e, &args);
        let got = native.call(&args).expect("runs");
        assert!(want.same(&got), "{f}: {want} vs {got}");
        if f == "zeros" {
            assert_eq!(got.as_f64().map(f64::to_bits), Some((-0.0f64).to_bits()));
        }
    }
}

/// Fuel on threads is the serial loop's: the loop's count is charged
/// before the chunks start (so a call without the fuel for it ends with
/// `out-of-fuel` before any chunk's ⊥, as the serial code does), and a
/// chunk's own count and its zero accumulators are not charged again: a
/// program that finishes within `--fuel N` serially finishes on threads.
#[test]
fn fuel_on_threads_is_the_serial_loops() {
    let src = "let acc (xs: Vector) (m: Index) (n: Index) = ifold (fun a i -> addAt a i (ifold (fun t j -> t + xs[i + j]) 0.0 m)) xs n
let logs (xs: Vector) = ifold (fun s i -> s + log xs[i]) 0.0 (length xs)
let blogs (xs: Vector) = build (length xs) (fun i -> log xs[i])
";
    let limits = |fuel| fsmooth::codegen::NativeLimits::of(Limits::with_fuel(fuel));
    // 64 outer iterations of 1 over a long accumulator: 128 iterations.
    let e = load_entry(src, "acc");
    let native = compile_with(&e, relaxed(2));
    let args = [
        vector(&vec![1.0; 100_000]),
        Value::Index(1),
        Value::Index(64),
    ];
    let serial = compile_with(&e, NativeOptions::default());
    assert!(serial.call_with(&args, limits(200)).is_ok());
    assert!(
        native.call_with(&args, limits(200)).is_ok(),
        "the zero arrays are free"
    );
    // Too little fuel for the loop itself: out-of-fuel before the chunks'
    // domain error, as serially.
    let mut xs = vec![1.0; 20_000];
    xs[15_000] = -1.0;
    for (f, options) in [
        ("logs", relaxed(2)),
        (
            "blogs",
            NativeOptions {
                fp: FpContract::Strict,
                threads: 2,
            },
        ),
    ] {
        let e = load_entry(src, f);
        let native = compile_with(&e, options);
        assert_eq!(native.parallel_loops(), 1, "{f}");
        let err = native
            .call_with(&[vector(&xs)], limits(12_000))
            .expect_err("⊥");
        assert_eq!(err.code(), "out-of-fuel", "{f}: {err}");
        let err = native
            .call_with(&[vector(&xs)], limits(1_000_000))
            .expect_err("⊥");
        assert_eq!(err.code(), "domain-error", "{f}: {err}");
    }
}

/// The command line: `--threads N` under the strict contract runs builds
/// only, and GMM's results are the strict ones, bit for bit; under the
/// relaxed contract GMM's objective and reverse-mode gradient on two
/// threads stay within ρ ≤ 1e-12 of the strict (evaluator's) results on
/// ADBench's d2_K5 file (1000 points), the parallel folds regrouping some
/// sums; and the ADBench golden holds under the relaxed contract.
#[test]
fn gmm_on_two_threads_from_the_command_line() {
    let root = crate::common::root();
    let run = |file: &str, extra: &[&str]| -> Vec<f64> {
        let path = root.join("tests/data/adbench/data/gmm").join(file);
        let o = crate::common::cli(
            &[
                &[
                    "adbench",
                    "gmm",
                    path.to_str().unwrap(),
                    "--mode",
                    "rev",
                    "--engine",
                    "native",
                ][..],
                extra,
            ]
            .concat(),
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        let mut all = vec![out["objective"].as_f64().expect("objective")];
        fn numbers(j: &serde_json::Value, out: &mut Vec<f64>) {
            match j {
                serde_json::Value::Array(items) => items.iter().for_each(|x| numbers(x, out)),
                other => out.push(other.as_f64().expect("a number")),
            }
        }
        numbers(&out["gradient"], &mut all);
        all
    };
    let relaxed = ["--fp", "relaxed", "--threads", "2"];
    let strict = run("1k/gmm_d2_K5.txt", &[]);
    assert_eq!(
        strict,
        run("1k/gmm_d2_K5.txt", &["--threads", "2"]),
        "strict on two threads"
    );
    let two = run("1k/gmm_d2_K5.txt", &relaxed);
    assert_eq!(strict.len(), two.len());
    for (i, (a, b)) in strict.iter().zip(&two).enumerate() {
        assert!(rho(*a, *b) <= 1e-12, "[{i}]: strict {a}, two threads {b}");
    }
    assert!(
        strict
            .iter()
            .zip(&two)
            .any(|(a, b)| a.to_bits() != b.to_bits()),
        "the points' fold ran on two threads (some sum regrouped)"
    );
    assert_eq!(two, run("1k/gmm_d2_K5.txt", &relaxed), "deterministic");
    let golden: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("tests/data/adbench/goldens/gmm_test.json"))
            .expect("golden"),
    )
    .expect("json");
    let test = run("test.txt", &relaxed);
    assert!(rho(test[0], golden["objective"].as_f64().unwrap()) <= 1e-8);
    let want = golden["gradient"].as_array().expect("gradient");
    for (a, b) in test[1..].iter().zip(want) {
        assert!(rho(*a, b.as_f64().unwrap()) <= 1e-8);
    }
}

/// `--repeat N` times compiled code: `run` the entry's native call, `grad`
/// and `jacobian` the derivative program alone (arguments converted
/// once), each printing the fastest on stderr after the result; the
/// evaluator's runs are timed as themselves.
#[test]
fn repeat_times_compiled_code_from_the_command_line() {
    let root = crate::common::root();
    let nnmf = root.join("examples/nnmf.fsm");
    let input = r#"{"u": [1, 2], "v": [0.5, 1.5, 2], "a": [[1, 2, 3], [4, 5, 6]]}"#;
    let line = |o: &std::process::Output| -> serde_json::Value {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let err = String::from_utf8_lossy(&o.stderr);
        let last = err.lines().last().expect("a line on stderr");
        serde_json::from_str(last).expect("json")
    };
    let base = |cmd: &str| {
        vec![
            cmd.to_string(),
            nnmf.to_str().unwrap().to_string(),
            "--entry".into(),
            "nnmf".into(),
            "--input".into(),
            input.into(),
            "--repeat".into(),
            "3".into(),
        ]
    };
    let run = |args: Vec<String>| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        crate::common::cli(&refs)
    };
    let mut native = base("run");
    native.extend(["--engine".into(), "native".into()]);
    let o = run(native);
    let j = line(&o);
    assert_eq!(j["repeat"], 3);
    assert_eq!(j["timed"], "native call");
    assert!(j["min_ms"].as_f64().unwrap() >= 0.0);
    let v: f64 = String::from_utf8_lossy(&o.stdout)
        .trim()
        .parse()
        .expect("the value");
    assert!((v - 14.890371757896165).abs() < 1e-12);
    assert_eq!(line(&run(base("run")))["timed"], "evaluator run");
    let mut grad = base("grad");
    grad.extend(
        [
            "--wrt",
            "v",
            "--mode",
            "rev",
            "--engine",
            "native",
            "--no-gate",
        ]
        .map(String::from),
    );
    assert_eq!(line(&run(grad))["timed"], "derivative program");
    let mut jac = base("jacobian");
    jac.extend(
        [
            "--wrt",
            "v",
            "--mode",
            "fwd-rows",
            "--engine",
            "native",
            "--no-gate",
        ]
        .map(String::from),
    );
    assert_eq!(line(&run(jac))["timed"], "derivative program");
    let mut zero = base("run");
    zero[7] = "0".into();
    assert_eq!(run(zero).status.code(), Some(2), "N ≥ 1");
}

/// Note [Parallel loops], cost: a loop of fewer than `MIN_LOOPS`
/// iterations runs on several threads when its count times the counts of
/// the loop nest in its body (bound outside it) is at least `MIN_SCALAR`:
/// four components of 8 × 1 000 elements each run as chunks, of 8 × 10
/// each as written, and a nest whose inner count changes per iteration
/// counts only its outer loop. Every run is the evaluator's bits (a
/// `build`, under the strict contract); `run --stats` reports the loops
/// compiled to run on threads and those that did.
#[test]
fn few_iterations_with_enough_work_run_on_threads() {
    let src = "let comps (k: Index) (d: Index) (xs: Vector) = build k (fun c -> build d (fun s -> ifold (fun t i -> t + xs[i] * toDouble (c + s)) 0.0 (length xs)))\n\
               let ragged (k: Index) (xs: Vector) = build k (fun c -> build (c + 1) (fun s -> ifold (fun t i -> t + xs[i] * toDouble s) 0.0 (length xs)))\n";
    let strict2 = NativeOptions {
        fp: FpContract::Strict,
        threads: 2,
    };
    let runs = |f: &str, args: Vec<Value>| {
        let e = load_entry(src, f);
        let native = compile_with(&e, strict2);
        assert_eq!(native.parallel_loops(), 1, "{f}");
        let want = evaluate(&e, &args);
        let got = native.call(&args).expect("runs");
        assert!(want.same(&got), "{f}: {want} vs {got}");
        native.parallel_runs()
    };
    let xs = |n: usize| vector(&(0..n).map(|i| (i as f64).sin()).collect::<Vec<_>>());
    let ix = Value::Index;
    // 4 × 8 × 1000 = 32 000 ≥ 2^14: on threads.
    assert_eq!(runs("comps", vec![ix(4), ix(8), xs(1000)]), 1);
    // 4 × 8 × 10: as written.
    assert_eq!(runs("comps", vec![ix(4), ix(8), xs(10)]), 0);
    // One iteration: as written, whatever its work.
    assert_eq!(runs("comps", vec![ix(1), ix(8), xs(5000)]), 0);
    // Negative sizes: as written, with the evaluator's ⊥.
    let e = load_entry(src, "comps");
    let native = compile_with(&e, strict2);
    let args = [ix(4), ix(-8), xs(1000)];
    let want = e.run(args.to_vec(), FUEL, &mut |_, _| {}).expect_err("⊥");
    let got = native.call(&args).expect_err("⊥");
    assert_eq!(want.to_string(), got.unlocated().to_string());
    assert_eq!(native.parallel_runs(), 0);
    // `c + 1` changes per component: only the 40 components count, and
    // 40 < MIN_LOOPS.
    assert_eq!(runs("ragged", vec![ix(40), xs(1000)]), 0);
    // `run --stats` says so.
    let file = crate::common::temp_file("few_iterations.fsm", src);
    let input = format!(
        "{{\"k\": 4, \"d\": 8, \"xs\": {:?}}}",
        (0..1000).map(|i| i as f64).collect::<Vec<_>>()
    );
    let stats = |threads: &str| -> serde_json::Value {
        let o = crate::common::cli(&[
            "run",
            file.to_str().unwrap(),
            "--entry",
            "comps",
            "--input",
            &input,
            "--engine",
            "native",
            "--threads",
            threads,
            "--stats",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let err = String::from_utf8_lossy(&o.stderr);
        serde_json::from_str(err.lines().last().expect("a line")).expect("json")
    };
    let two = stats("2");
    assert_eq!(
        (
            two["parallel_loops"].as_u64(),
            two["parallel_runs"].as_u64()
        ),
        (Some(1), Some(1))
    );
    let one = stats("1");
    assert_eq!(
        (
            one["parallel_loops"].as_u64(),
            one["parallel_runs"].as_u64()
        ),
        (Some(0), Some(0))
    );
}
