//! Pairs in lanes under the relaxed contract (Note [Lane sums] in
//! `codegen/lower/lane_sums.rs`; spec/semantics.md §7): `log` and `exp`
//! in `f64x2` lanes against the evaluator's, sums two iterations at a
//! time within the contract's bound, the evaluator's first ⊥ from a pair
//! whose tests fail, and the values the lanes leave to the code as
//! written.

use fsmooth::codegen::{FpContract, Native, NativeOptions};
use fsmooth::diagnostic::Diagnose;
use fsmooth::eval::Value;
use fsmooth::pipeline::{Entry, Session};
use proptest::prelude::*;

use super::{FUEL, compile_with, evaluate, gamma, load_entry, vector};

const ONE_THREAD: NativeOptions = NativeOptions {
    fp: FpContract::Relaxed,
    threads: 1,
};

fn relaxed(entry: &Entry) -> Native {
    compile_with(entry, ONE_THREAD)
}

/// A xorshift generator of 64-bit words from `seed` (≠ 0).
fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}

fn doubles(v: &Value) -> Vec<f64> {
    v.with_elements(|xs| xs.iter().map(|x| x.as_f64().expect("a Double")).collect())
        .expect("an array")
}

/// The distance in units in the last place between two finite Doubles of
/// one sign.
fn ulps(a: f64, b: f64) -> u64 {
    (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
}

const LOGS: &str = "let logs (xs: Vector) = build (length xs) (fun j -> log xs[j])
let exps (xs: Vector) = build (length xs) (fun j -> exp xs[j])
";

/// The largest distance in ulp between `want` and `got`, element by
/// element (a zero must be the same zero), with its argument, and how
/// many elements differ at all.
fn worst_ulps(xs: &[f64], want: &[f64], got: &[f64]) -> ((u64, f64), usize) {
    let mut worst = (0, 0.0);
    let mut differ = 0;
    for ((x, w), g) in xs.iter().zip(want).zip(got) {
        let d = if *w == 0.0 {
            assert_eq!(w.to_bits(), g.to_bits(), "at {x}");
            0
        } else {
            ulps(*w, *g)
        };
        differ += usize::from(d > 0);
        if d > worst.0 {
            worst = (d, *x);
        }
    }
    (worst, differ)
}

/// `log` in lanes is within 2 ulp of the evaluator's (fdlibm's method,
/// under 1 ulp of the logarithm; glibc's, the evaluator's, about half of
/// one) on normal Doubles from 2⁻¹⁰²² to 2¹⁰²³, near 1, and at the ends of
/// the reduction's interval [√2/2, √2). Some elements differ from the
/// evaluator's bits: the lanes ran (the code as written would give them
/// all).
#[test]
fn log_in_lanes_is_within_two_ulp_of_the_evaluators() {
    let e = load_entry(LOGS, "logs");
    let native = relaxed(&e);
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
    let mut xs: Vec<f64> = Vec::new();
    // Any normal positive Double: random exponent and mantissa.
    for _ in 0..40_000 {
        let exp = 1 + next() % 2046;
        xs.push(f64::from_bits(exp << 52 | next() >> 12));
    }
    // Near 1, where log x is small and f is tiny.
    for _ in 0..20_000 {
        let t = (next() >> 11) as f64 / (1u64 << 53) as f64;
        xs.push(1.0 + (t - 0.5) * 1e-3);
    }
    let edges = [
        1.0,
        2.0,
        0.5,
        std::f64::consts::SQRT_2,
        std::f64::consts::FRAC_1_SQRT_2,
        f64::from_bits(0x3FE6_A09E_0000_0000),
        f64::from_bits(0x3FE6_A09D_FFFF_FFFF),
        f64::MIN_POSITIVE,
        f64::MAX,
        1.0 + f64::EPSILON,
        1.0 - f64::EPSILON / 2.0,
    ];
    xs.extend(edges);
    let args = [vector(&xs)];
    let want = doubles(&evaluate(&e, &args));
    let got = doubles(&native.call(&args).expect("runs"));
    let (worst, differ) = worst_ulps(&xs, &want, &got);
    assert!(worst.0 <= 2, "{} ulp at {:e}", worst.0, worst.1);
    assert!(
        differ > 0,
        "every element the evaluator's bits: no lanes ran"
    );
    // The edges exactly (fdlibm and glibc agree there).
    let n = xs.len() - edges.len();
    for (k, x) in edges.iter().enumerate() {
        assert!(ulps(want[n + k], got[n + k]) <= 1, "log {x}");
    }
}

/// `exp` in lanes is within 2 ulp of the evaluator's (fdlibm's method,
/// under 1 ulp; glibc's about half of one) on [−708, 708], around 0, and
/// at the reduction's halfway points (x/ln 2 half an odd integer); not
/// every element is the evaluator's bits (the lanes ran).
#[test]
fn exp_in_lanes_is_within_two_ulp_of_the_evaluators() {
    let e = load_entry(LOGS, "exps");
    let native = relaxed(&e);
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
    let mut unit = move || (next() >> 11) as f64 / (1u64 << 53) as f64;
    let mut xs: Vec<f64> = (0..40_000).map(|_| (unit() - 0.5) * 1416.0).collect();
    xs.extend((0..20_000).map(|_| (unit() - 0.5) * 1e-3));
    xs.extend((-40..40).map(|k| (k as f64 + 0.5) * std::f64::consts::LN_2));
    xs.extend([0.0, -0.0, 1.0, -1.0, 708.0, -708.0, 1e-300, -1e-300]);
    let args = [vector(&xs)];
    let want = doubles(&evaluate(&e, &args));
    let got = doubles(&native.call(&args).expect("runs"));
    let (worst, differ) = worst_ulps(&xs, &want, &got);
    assert!(worst.0 <= 2, "{} ulp at {:e}", worst.0, worst.1);
    assert!(
        differ > 0,
        "every element the evaluator's bits: no lanes ran"
    );
}

/// Under the relaxed contract a `build` whose element is a tuple — the
/// forward sweep's tape of `exp`s in a log-sum-exp, `(e, (e, false))` —
/// takes its `exp`s in lanes too: each leaf within 2 ulp of the
/// evaluator's, the literal leaf the evaluator's, and the pair holding an
/// argument the lanes do not cover as written.
#[test]
fn tuple_builds_take_exp_in_lanes() {
    let src = "let tape (xs: Vector) (m: Double) = build (length xs) (fun j ->
  let e = exp (xs[j] - m) in (e, (e, false)))
";
    let e = load_entry(src, "tape");
    let native = relaxed(&e);
    let mut xs: Vec<f64> = (0..2001).map(|k| (k as f64 - 1000.0) * 0.37).collect();
    xs[1500] = 2000.0;
    let args = [vector(&xs), Value::Double(0.25)];
    let (want, got) = (evaluate(&e, &args), native.call(&args).expect("runs"));
    let leaves = |v: &Value| -> Vec<(f64, f64, bool)> {
        v.with_elements(|es| {
            es.iter()
                .map(|r| match r {
                    Value::Pair(p) => match &p.1 {
                        Value::Pair(q) => match (&p.0, &q.0, &q.1) {
                            (Value::Double(a), Value::Double(b), Value::Bool(c)) => (*a, *b, *c),
                            other => panic!("not a tape record: {other:?}"),
                        },
                        other => panic!("not a pair: {other:?}"),
                    },
                    other => panic!("not a pair: {other:?}"),
                })
                .collect()
        })
        .expect("an array")
    };
    let (want, got) = (leaves(&want), leaves(&got));
    assert_eq!(want.len(), got.len());
    let mut differ = 0;
    for (k, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_eq!(g.0.to_bits(), g.1.to_bits(), "both leaves the same at {k}");
        assert_eq!(w.2, g.2, "the literal leaf at {k}");
        if k >= 1500 {
            assert_eq!(
                w.0.to_bits(),
                g.0.to_bits(),
                "as written from the pair at 1500, at {k}"
            );
        } else if w.0 != 0.0 {
            assert!(ulps(w.0, g.0) <= 2, "{} ulp at {k}", ulps(w.0, g.0));
            differ += usize::from(w.0 != g.0);
        }
    }
    assert!(
        differ > 0,
        "every element the evaluator's bits: no lanes ran"
    );
}

/// Note [Lane constants]: `log`'s nineteen constants are loads of the
/// module's table where they are used, not hoisted out of the loop of
/// pairs. Hoisted, more were live than x86-64 has vector registers, and
/// the loop stored a dozen spilled constants back on every trip: the
/// function's machine code held 38 vector stores to the stack, where the
/// code around the loop needs a handful.
#[test]
fn log_constants_are_not_spilled_in_the_loop_of_pairs() {
    use fsmooth::codegen::AotOptions;
    let src = "let nnmf (u: Vector) (v: Vector) (a: Matrix) = vectorSum (build (length u) (fun i ->
  vectorSum (build (length v) (fun j -> let w = u[i] * v[j] in log w + a[i][j] / w))))
";
    let e = load_entry(src, "nnmf");
    let options = AotOptions {
        symbol: "nnmf".into(),
        origin: "test".into(),
        listing: true,
        fp: FpContract::Relaxed,
    };
    let listing = e
        .object(&e.params, &options)
        .expect("compiles")
        .listing
        .expect("a listing");
    let (ir, code) = listing
        .split_once(";; machine code")
        .expect("the machine code");
    assert_eq!(
        ir.matches("readonly can_move").count(),
        19,
        "one load per constant"
    );
    let spills = code
        .lines()
        .filter(|l| l.trim_start().starts_with("movdqu %xmm") && l.contains("(%rsp)"))
        .count();
    assert!(spills <= 10, "{spills} vector stores to the stack");
}

/// Where `log` or `exp` in lanes does not hold — for `log` subnormals and
/// +∞, for `exp` NaN and magnitudes over 708 (overflow, subnormal results,
/// underflow) — the pair and every element after it run as written: the
/// evaluator's bits.
#[test]
fn values_lanes_leave_run_as_written() {
    let cases = [
        (
            "logs",
            vec![5e-324, 1e-310, f64::MIN_POSITIVE / 2.0, f64::INFINITY],
        ),
        (
            "exps",
            vec![
                f64::NAN,
                709.5,
                710.0,
                -708.5,
                -740.0,
                -800.0,
                f64::INFINITY,
                f64::NEG_INFINITY,
            ],
        ),
    ];
    for (f, specials) in cases {
        let e = load_entry(LOGS, f);
        let native = relaxed(&e);
        for special in specials {
            for at in [0usize, 1, 6, 7, 8] {
                let mut xs: Vec<f64> = (0..9).map(|i| 1.5 + i as f64).collect();
                xs[at] = special;
                let args = [vector(&xs)];
                let want = doubles(&evaluate(&e, &args));
                let got = doubles(&native.call(&args).expect("runs"));
                // The pair holding it and everything after: as written.
                for k in (at - at % 2)..xs.len() {
                    assert_eq!(want[k].to_bits(), got[k].to_bits(), "{f} {} at {k}", xs[k]);
                }
            }
        }
    }
}

/// A pair whose tests fail runs its two iterations as written, so the ⊥
/// is the evaluator's first — its code, details and source span — for
/// `log` of 0, of a negative and of NaN in either lane, for a division
/// by zero, and for a row too short to read at the index (its bounds
/// test deferred), in sums and in builds.
#[test]
fn a_failing_pair_reports_the_evaluators_first_bottom() {
    let src = "let sum (xs: Vector) = ifold (fun acc j -> acc + log xs[j]) 0.0 (length xs)
let logs (xs: Vector) = build (length xs) (fun j -> log xs[j])
let quotients (xs: Vector) = ifold (fun acc j -> acc + log (xs[j] + 2.0) / xs[j]) 0.0 (length xs)
let rows (a: Matrix) (v: Vector) = ifold (fun s i -> s + ifold (fun acc j -> acc + log (v[j] * a[i][j])) 0.0 (length v)) 0.0 (length a)
";
    let session = Session::load(src).expect("loads");
    let check = |f: &str, args: &[Value]| {
        let e = session.entry(f).expect("entry");
        let native = relaxed(&e);
        let want = e.run(args.to_vec(), FUEL, &mut |_, _| {}).expect_err("⊥");
        let got = native.call(args).expect_err("⊥");
        assert_eq!(want.code(), got.code(), "{f}");
        assert_eq!(want.span(), got.span(), "{f}: the evaluator's site");
        assert_eq!(want.to_string(), got.unlocated().to_string(), "{f}");
    };
    for f in ["sum", "logs", "quotients"] {
        for bad in [0.0, -0.0, -3.0, f64::NAN, f64::NEG_INFINITY] {
            for at in [[0, 1], [1, 0], [4, 5], [5, 4], [8, 8], [3, 6]] {
                let mut xs: Vec<f64> = (0..9).map(|i| 0.5 + i as f64).collect();
                xs[at[0]] = bad;
                xs[at[1]] = if f == "quotients" { 0.0 } else { -1.0 };
                check(f, &[vector(&xs)]);
            }
        }
    }
    // An empty row, or an empty array: the pair's read is never made (an
    // empty array's pointer is never read; a review found this crashing).
    check(
        "rows",
        &[
            Value::array(vec![vector(&[1.0, 2.0]), vector(&[])]),
            vector(&[1.0, 2.0]),
        ],
    );
    let empty = "let g (r: Vector) (v: Vector) = ifold (fun acc j -> acc + r[j]) 0.0 (length v)\n";
    let e = load_entry(empty, "g");
    for threads in [1, 2] {
        let options = NativeOptions {
            threads,
            ..ONE_THREAD
        };
        let native = compile_with(&e, options);
        let args = [vector(&[]), vector(&[1.0, 2.0])];
        let want = e.run(args.to_vec(), FUEL, &mut |_, _| {}).expect_err("⊥");
        let got = native.call(&args).expect_err("⊥");
        assert_eq!(
            want.to_string(),
            got.unlocated().to_string(),
            "{threads} threads"
        );
    }
    // Row 2 is one short: its last pair's read fails.
    for short in [7usize, 8] {
        let v: Vec<f64> = (0..9).map(|i| 1.0 + i as f64).collect();
        let a = Value::array(
            (0..4)
                .map(|i| vector(&v[..if i == 2 { short } else { 9 }]))
                .collect(),
        );
        check("rows", &[a, vector(&v)]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The bound of spec/semantics.md §7 for a sum two iterations at a
    /// time: within 2 γ_m Σ|t| of the evaluator's (no `log`: the addends
    /// are the evaluator's), and −0.0 kept.
    #[test]
    fn a_lane_sum_is_within_the_relaxed_bound(
        xs in proptest::collection::vec(
            prop_oneof![-1e6f64..1e6, -1.0f64..1.0, Just(1e300), Just(-1e300), Just(-0.0)],
            0..3000,
        ),
        w in -4.0f64..4.0,
        z in prop_oneof![-1.0f64..1.0, Just(-0.0)],
    ) {
        let src = "let main (xs: Vector) (w: Double) (z: Double) = ifold (fun acc i -> acc + w * xs[i]) z (length xs)\n";
        let e = load_entry(src, "main");
        let native = relaxed(&e);
        let args = [vector(&xs), Value::Double(w), Value::Double(z)];
        let want = evaluate(&e, &args).as_f64().expect("a Double");
        let got = native.call(&args).expect("runs").as_f64().expect("a Double");
        let terms: f64 = z.abs() + xs.iter().map(|x| (w * x).abs()).sum::<f64>();
        if terms == 0.0 {
            prop_assert_eq!(want.to_bits(), got.to_bits(), "a zero sum's sign");
        } else if terms.is_finite() && want.is_finite() {
            let bound = 2.0 * gamma(xs.len() + 1) * terms;
            prop_assert!((got - want).abs() <= bound, "{} vs {} (bound {})", got, want, bound);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Note [Math kernels] on random sums of `log`s, long enough for
    /// blocks (and not): the evaluator's ⊥ (code and site) when an
    /// argument is outside `log`'s domain, else within the bound of
    /// spec/semantics.md §7 — the regrouping's 2γ Σ|t| and 2 ulp per
    /// `log`.
    #[test]
    fn a_lane_sum_of_logs_is_within_the_relaxed_bound(
        mut xs in proptest::collection::vec(
            prop_oneof![20 => 1e-3f64..1e3, 1 => 1e-300f64..1e300],
            0..1500,
        ),
        bad in proptest::option::weighted(
            0.5,
            (any::<proptest::sample::Index>(), prop_oneof![Just(0.0), Just(-2.0), Just(f64::NAN), Just(1e-310)]),
        ),
    ) {
        // At most one argument outside the kernels' (a ⊥, or a subnormal).
        if let (Some((at, x)), false) = (bad, xs.is_empty()) {
            let k = at.index(xs.len());
            xs[k] = x;
        }
        let src = "let main (xs: Vector) = ifold (fun acc j -> acc + log xs[j]) 0.0 (length xs)\n";
        let e = load_entry(src, "main");
        let native = relaxed(&e);
        let args = [vector(&xs)];
        match (e.run(args.to_vec(), FUEL, &mut |_, _| {}), native.call(&args)) {
            (Ok((want, _)), Ok(got)) => {
                let (want, got) = (want.as_f64().expect("a Double"), got.as_f64().expect("a Double"));
                let terms: f64 = xs.iter().map(|x| x.ln().abs()).sum();
                let bound = 2.0 * gamma(xs.len() + 1) * terms + 4.0 * f64::EPSILON * terms;
                prop_assert!((got - want).abs() <= bound, "{} vs {} (bound {})", got, want, bound);
            }
            (Err(want), Err(got)) => {
                prop_assert_eq!(want.code(), got.code());
                prop_assert_eq!(want.span(), got.span());
            }
            (want, got) => prop_assert!(false, "evaluator {:?}, native {:?}", want.map(|v| v.0), got),
        }
    }
}

/// NNMF's objective (examples/nnmf.fsm), whose inner fold is a lane sum
/// with `log` and a division: within ρ ≤ 1e-12 of the evaluator's on a
/// 64 × 65 instance, and strict native code still returns its bits. Its
/// row sums alone (where one ulp of a row is not lost in the total) are
/// not all the evaluator's bits: the lanes ran.
#[test]
fn nnmf_under_the_relaxed_contract() {
    let mut src =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/nnmf.fsm"))
            .expect("the example");
    src.push_str(
        "let rows (u: Vector) (v: Vector) (a: Matrix) =
  build (length u) (fun i ->
    vectorSum (build (length v) (fun j ->
      let w = u[i] * v[j]
      log w + a[i][j] / w)))
",
    );
    let (m, n) = (64, 65);
    let u: Vec<f64> = (0..m)
        .map(|i| 0.5 + (i as f64 * 0.37).sin().abs())
        .collect();
    let v: Vec<f64> = (0..n)
        .map(|j| 0.5 + (j as f64 * 0.91).cos().abs())
        .collect();
    let a = Value::array(
        (0..m)
            .map(|i| {
                let row: Vec<f64> = (0..n)
                    .map(|j| 1.0 + ((i * n + j) as f64 * 0.618).sin().abs())
                    .collect();
                vector(&row)
            })
            .collect(),
    );
    let args = [vector(&u), vector(&v), a];
    let e = load_entry(&src, "nnmf");
    let want = evaluate(&e, &args);
    let got = relaxed(&e).call(&args).expect("runs");
    let r = want.max_rho(&got).expect("a Double");
    assert!(r <= 1e-12, "{want} vs {got}");
    let strict = super::compile(&e).call(&args).expect("runs");
    assert!(want.same(&strict), "strict: {want} vs {strict}");
    let e = load_entry(&src, "rows");
    let want = doubles(&evaluate(&e, &args));
    let got = doubles(&relaxed(&e).call(&args).expect("runs"));
    let differ = want
        .iter()
        .zip(&got)
        .filter(|(w, g)| w.to_bits() != g.to_bits());
    assert!(
        differ.count() > 0,
        "every row the evaluator's bits: no lanes ran"
    );
    for (w, g) in want.iter().zip(&got) {
        assert!(fsmooth::numeric::rho(*w, *g) <= 1e-14, "{w} vs {g}");
    }
}

/// Note [Math kernels]: on a host with AVX2 and FMA3 a relaxed lane sum
/// with a `log` over 256 iterations or more runs in blocks — the block's
/// `log`s by a kernel, its pairs summed from −0.0 and added after it —
/// within the contract's bound; a bad argument anywhere (the first block,
/// a later one, the last partial one), or a division by zero beside the
/// `log`, is the evaluator's ⊥; an argument the kernel does not cover
/// (subnormal) runs its block's pairs as before. The grouping shows: 2⁵³
/// plus ones, where the evaluator (and pairs alone) lose every one, and
/// a block's own partial sums keep those of the blocks after the first.
#[test]
fn lane_sums_with_log_run_in_blocks_by_the_math_kernels() {
    let src = "let sum (xs: Vector) = ifold (fun acc j -> acc + log xs[j]) 0.0 (length xs)
let quotients (xs: Vector) = ifold (fun acc j -> acc + log (xs[j] + 2.0) / xs[j]) 0.0 (length xs)
let shifted (w: Vector) (xs: Vector) = ifold (fun acc j -> acc + (w[j] + log xs[j])) 0.0 (length xs)
";
    let kernels =
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma");
    if !kernels {
        eprintln!("this host has no AVX2 and FMA3: the math kernels are not called");
    }
    let session = Session::load(src).expect("loads");
    let compiled = |f: &str| {
        let e = session.entry(f).expect("entry");
        let n = relaxed(&e);
        (e, n)
    };
    let (sum, nsum) = compiled("sum");
    let (quo, nquo) = compiled("quotients");
    let bottom = |e: &Entry, native: &Native, args: &[Value]| {
        let want = e.run(args.to_vec(), FUEL, &mut |_, _| {}).expect_err("⊥");
        let got = native.call(args).expect_err("⊥");
        assert_eq!(want.code(), got.code());
        assert_eq!(want.span(), got.span(), "the evaluator's site");
        assert_eq!(want.to_string(), got.unlocated().to_string());
    };
    let mut next = xorshift(0x4f6c_dd1d_2545_f491);
    for n in [256usize, 257, 300, 511, 512, 1000, 1001] {
        let xs: Vec<f64> = (0..n)
            .map(|_| 0.25 + (next() >> 11) as f64 / (1u64 << 53) as f64 * 100.0)
            .collect();
        for (e, native) in [(&sum, &nsum), (&quo, &nquo)] {
            let args = [vector(&xs)];
            let want = evaluate(e, &args).as_f64().expect("a Double");
            let got = native
                .call(&args)
                .expect("runs")
                .as_f64()
                .expect("a Double");
            let terms: f64 = xs.iter().map(|x| (x + 2.0).ln().abs() / x.min(1.0)).sum();
            // Regrouped, and each `log` within 2 ulp.
            let bound = 2.0 * gamma(n + 1) * terms + 4.0 * f64::EPSILON * terms;
            assert!((got - want).abs() <= bound, "n {n}: {got} vs {want}");
        }
        for at in [0usize, 1, 130, 255, 256, 299, n - 2, n - 1] {
            if at >= n {
                continue;
            }
            for bad in [0.0, -3.0, f64::NAN] {
                let mut ys = xs.clone();
                ys[at] = bad;
                bottom(&sum, &nsum, &[vector(&ys)]);
            }
            let mut ys = xs.clone();
            ys[at] = 0.0;
            bottom(&quo, &nquo, &[vector(&ys)]);
            // Subnormal: not the kernel's, the block's pairs as before.
            let mut ys = xs.clone();
            ys[at] = 1e-310;
            let args = [vector(&ys)];
            let want = evaluate(&sum, &args).as_f64().expect("a Double");
            let got = nsum.call(&args).expect("runs").as_f64().expect("a Double");
            let terms: f64 = ys.iter().map(|x| x.ln().abs()).sum();
            let bound = 2.0 * gamma(n + 1) * terms + 4.0 * f64::EPSILON * terms;
            assert!(
                (got - want).abs() <= bound,
                "subnormal at {at}: {got} vs {want}"
            );
        }
    }
    // 2⁵³ in the first even term, then ones in every even term: log 1 is
    // 0 exactly, so each term is its w. In order, or in two lanes over
    // the whole sum, every one is lost to the 2⁵³ (ties to even); in
    // blocks of 256, a block's even partial sum after the first keeps
    // its ones.
    let (shifted, nshifted) = compiled("shifted");
    let n = 1000usize;
    let w: Vec<f64> = (0..n)
        .map(|j| match j {
            0 => 9_007_199_254_740_992.0,
            _ if j % 2 == 0 => 1.0,
            _ => 0.0,
        })
        .collect();
    let args = [vector(&w), vector(&vec![1.0; n])];
    let want = evaluate(&shifted, &args).as_f64().expect("a Double");
    let got = nshifted
        .call(&args)
        .expect("runs")
        .as_f64()
        .expect("a Double");
    assert_eq!(want, 9_007_199_254_740_992.0);
    let kept = if kernels {
        ((256..n).filter(|j| j % 2 == 0).count()) as f64
    } else {
        0.0
    };
    assert_eq!(got, 9_007_199_254_740_992.0 + kept, "the blocks' grouping");
}
