//! ADBench GMM: the objective written in F̃ (`examples/adbench/gmm.fsm`),
//! run by the reference evaluator on inputs read by
//! `fsmooth::adbench::gmm`, against ADBench's golden value, against an
//! independent double-loop Rust implementation, and the reader's error
//! codes on malformed files. The data files are a copy of the ADBench
//! files the tests need (`tests/data/adbench/`, MIT licence, LICENSE.txt
//! there), so a clean clone tests without anything beside it.

use std::path::PathBuf;

use fsmooth::adbench::gmm::{AdbenchError, GmmInput, read_gmm, read_gmm_replicated};
use fsmooth::diagnostic::Diagnose;
use fsmooth::eval::{Limits, Value};
use fsmooth::numeric::rho;

use fsmooth::pipeline::Session;

/// ADBench's tolerance on ρ.
const TOLERANCE: f64 = 1e-8;

fn adbench_file(rel: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/adbench")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn gmm_source() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/adbench/gmm.fsm");
    std::fs::read_to_string(path).expect("examples/adbench/gmm.fsm")
}

/// Runs the entry `name` of gmm.fsm on `args` and returns its Double result.
fn run_fsm(name: &str, args: Vec<Value>) -> f64 {
    let loaded = Session::load(&gmm_source()).expect("gmm.fsm loads");
    let entry = loaded.entry(name).expect("entry exists");
    let (v, _) = entry
        .run(args, Limits::default(), &mut |_, _| {})
        .expect("evaluation succeeds");
    v.as_f64().expect("a Double result")
}

fn objective(input: &GmmInput) -> f64 {
    run_fsm("gmmObjective", input.args())
}

// ----- an independent implementation --------------------------------------

/// log Γ(x) for x > 0 by the Lanczos approximation (g = 7, 9 terms,
/// relative error about 1e-15), with the reflection formula below 1/2.
/// Deliberately unlike gmm.fsm's exact half-integer recurrence.
fn ln_gamma(x: f64) -> f64 {
    #[allow(
        clippy::excessive_precision,
        reason = "the published Lanczos coefficients, kept verbatim"
    )]
    const COEF: [f64; 9] = [
        0.999_999_999_999_809_93,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_13,
        -176.615_029_162_140_59,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_571_6e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let pi = std::f64::consts::PI;
    if x < 0.5 {
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + 7.5;
    let mut a = COEF[0];
    for (i, c) in COEF.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * pi).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

fn logsumexp(v: &[f64]) -> f64 {
    let mx = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    mx + v.iter().map(|a| (a - mx).exp()).sum::<f64>().ln()
}

/// The ADBench GMM objective by the README's formula, with each Q_c as a
/// dense d × d matrix filled column by column from a running counter.
#[allow(
    clippy::needless_range_loop,
    reason = "index loops written to read like the formula"
)]
fn reference_objective(p: &GmmInput) -> f64 {
    let (d, k, n) = (p.d, p.k, p.n);
    #[allow(
        clippy::approx_constant,
        reason = "ADBench's literal for pi, not the constant"
    )]
    let pi: f64 = 3.14159265359;
    let mut qs = Vec::new();
    for icf in &p.icf {
        let mut q = vec![vec![0.0; d]; d];
        for j in 0..d {
            q[j][j] = icf[j].exp();
        }
        let mut t = d;
        for col in 0..d {
            for row in col + 1..d {
                q[row][col] = icf[t];
                t += 1;
            }
        }
        qs.push(q);
    }
    let sum_q: Vec<f64> = p.icf.iter().map(|r| r[..d].iter().sum()).collect();

    let mut e = -((n * d) as f64) / 2.0 * (2.0 * pi).ln();
    for xi in &p.x {
        let mut terms = Vec::new();
        for c in 0..k {
            let mut sq = 0.0;
            for r in 0..d {
                let mut y = 0.0;
                for s in 0..d {
                    y += qs[c][r][s] * (xi[s] - p.means[c][s]);
                }
                sq += y * y;
            }
            terms.push(p.alphas[c] + sum_q[c] - 0.5 * sq);
        }
        e += logsumexp(&terms);
    }
    e -= n as f64 * logsumexp(&p.alphas);
    for c in 0..k {
        let frobenius: f64 = qs[c].iter().flatten().map(|a| a * a).sum();
        e += p.gamma * p.gamma / 2.0 * frobenius - p.m as f64 * sum_q[c];
    }
    let big_n = (d as i64 + p.m + 1) as f64;
    let mut log_gamma_d = (d * (d - 1)) as f64 / 4.0 * pi.ln();
    for j in 1..=d {
        log_gamma_d += ln_gamma(big_n / 2.0 + (1.0 - j as f64) / 2.0);
    }
    let wishart_c = big_n * d as f64 * (p.gamma.ln() - 0.5 * 2f64.ln()) - log_gamma_d;
    e - k as f64 * wishart_c
}

/// A small problem with d = 4 (so the column-by-column order of the
/// strictly lower icf entries matters, unlike in the d = 2 files) and a
/// non-zero Wishart m, from a fixed pseudo-random sequence.
fn synthetic(d: usize, k: usize, n: usize, gamma: f64, m: i64) -> GmmInput {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    let tri = d * (d + 1) / 2;
    let mut rows = |r: usize, c: usize| -> Vec<Vec<f64>> {
        (0..r).map(|_| (0..c).map(|_| next()).collect()).collect()
    };
    let means = rows(k, d);
    let icf = rows(k, tri);
    let x = rows(n, d);
    let alphas = rows(1, k).remove(0);
    GmmInput {
        d,
        k,
        n,
        alphas,
        means,
        icf,
        x,
        gamma,
        m,
    }
}

// ----- tests ---------------------------------------------------------------

#[test]
fn gmm_test_txt_matches_the_golden() {
    let input = read_gmm(&adbench_file("data/gmm/test.txt")).expect("test.txt reads");
    assert_eq!((input.d, input.k, input.n), (2, 3, 1));
    let golden: serde_json::Value =
        serde_json::from_str(&adbench_file("goldens/gmm_test.json")).expect("golden JSON");
    let expected = golden["objective"].as_f64().expect("objective");
    // ADBench's GmmTests.cpp writes 8.07380408004975791.
    assert_eq!(expected, 8.073_804_080_049_758);
    let got = objective(&input);
    assert!(
        rho(got, expected) <= TOLERANCE,
        "objective {got}, golden {expected}"
    );
    assert!(rho(reference_objective(&input), expected) <= TOLERANCE);
}

#[test]
fn gmm_1k_d2_k5_matches_the_reference_implementation() {
    let input = read_gmm(&adbench_file("data/gmm/1k/gmm_d2_K5.txt")).expect("file reads");
    assert_eq!((input.d, input.k, input.n), (2, 5, 1000));
    assert_eq!((input.gamma, input.m), (1.0, 0));
    let got = objective(&input);
    let expected = reference_objective(&input);
    assert!(
        rho(got, expected) <= TOLERANCE,
        "objective {got}, reference {expected}"
    );
}

#[test]
fn gmm_with_d4_and_wishart_m_matches_the_reference_implementation() {
    for (gamma, m) in [(1.0, 0), (0.7, 3), (2.5, -1)] {
        let input = synthetic(4, 3, 5, gamma, m);
        let got = objective(&input);
        let expected = reference_objective(&input);
        assert!(
            rho(got, expected) <= TOLERANCE,
            "gamma {gamma}, m {m}: objective {got}, reference {expected}"
        );
    }
}

#[test]
fn log_gamma_of_half_integers_is_exact() {
    // The reference's Lanczos log Γ against closed forms first.
    let ln_pi = std::f64::consts::PI.ln();
    assert!(rho(ln_gamma(0.5), 0.5 * ln_pi) <= 1e-14);
    assert!(rho(ln_gamma(5.0), 24f64.ln()) <= 1e-14);
    assert!(rho(ln_gamma(3.5), (15.0 / 8.0f64).ln() + 0.5 * ln_pi) <= 1e-14);
    for h in 1..=60i64 {
        let got = run_fsm("logGammaHalf", vec![Value::Index(h)]);
        let expected = ln_gamma(h as f64 / 2.0);
        assert!(
            rho(got, expected) <= 1e-13,
            "log Γ({h}/2): {got}, Lanczos {expected}"
        );
    }
}

#[test]
fn gmm_replicated_mode_repeats_the_point() {
    let full = "2 1 3\n0.5\n0.1 0.2\n0.3 -0.4 0.25\n1 2\n1 2\n1 2\n1 0\n";
    let replicated = "2 1 3\n0.5\n0.1 0.2\n0.3 -0.4 0.25\n1 2\n1 0\n";
    let a = read_gmm(full).expect("full file reads");
    let b = read_gmm_replicated(replicated).expect("replicated file reads");
    assert_eq!(a, b);
    assert_eq!(b.x, vec![vec![1.0, 2.0]; 3]);
    // Each file in the wrong mode is an error, not a misread.
    assert_eq!(code(read_gmm(replicated)), "adbench-eof");
    assert_eq!(code(read_gmm_replicated(full)), "adbench-trailing-data");
}

fn code(r: Result<GmmInput, AdbenchError>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(e) => e.code(),
    }
}

#[test]
fn gmm_malformed_files_give_error_codes() {
    let good = "2 1 1\n0.5\n0.1 0.2\n0.3 -0.4 0.25\n1 2\n1 0\n";
    assert_eq!(code(read_gmm(good)), "ok");
    let cases = [
        ("", "adbench-eof"),
        ("2 1", "adbench-eof"),
        ("2 1 1\n0.5\n0.1 0.2\n0.3 -0.4", "adbench-eof"),
        ("2 1 1\n0.5\n0.1 0.2\n0.3 -0.4 0.25\n1 2\n1", "adbench-eof"),
        ("2 x 1\n", "adbench-format"),
        ("2.0 1 1\n", "adbench-format"),
        ("2 1 1\n0.5\n0.1 zwei\n", "adbench-format"),
        (
            "2 1 1\n0.5\n0.1 0.2\n0.3 -0.4 0.25\n1 2\n1 0.5\n",
            "adbench-format",
        ),
        ("-2 1 1\n", "adbench-size"),
        ("2 -1 1\n", "adbench-size"),
        ("2 1 -5\n", "adbench-size"),
        ("0 1 1\n", "adbench-size"),
        ("2 0 1\n", "adbench-size"),
        ("1000000000000 1 1\n0.5\n", "adbench-size"),
        ("99999999999999999999999 1 1\n", "adbench-size"),
        ("2 4611686018427387904 1\n", "adbench-size"),
        ("2 1 9223372036854775807\n", "adbench-size"),
        // Absurd but addressable: the file simply ends.
        ("1000000 1 1\n0.5\n0.1\n", "adbench-eof"),
        (
            "2 1 1\n0.5\n0.1 0.2\n0.3 -0.4 0.25\n1 2\n1 0\n7\n",
            "adbench-trailing-data",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(code(read_gmm(text)), expected, "input {text:?}");
    }
    // Replicated mode caps the points it builds.
    assert_eq!(
        code(read_gmm_replicated(
            "2 1 1000000000000\n0.5\n0.1 0.2\n0.3 -0.4 0.25\n1 2\n1 0\n"
        )),
        "adbench-size"
    );
}

#[test]
fn gmm_errors_point_at_the_token() {
    let text = "2 1 1\n0.5\n0.1 zwei\n";
    let err = read_gmm(text).expect_err("malformed");
    let span = err.span();
    assert_eq!(&text[span.start as usize..span.end as usize], "zwei");
    assert!(err.to_string().contains("token 6"), "{err}");
    assert!(err.to_string().contains("means[0][1]"), "{err}");

    let err = read_gmm("2 1 1\n0.5\n").expect_err("truncated");
    assert_eq!(err.span().start as usize, "2 1 1\n0.5\n".len());
    assert!(err.to_string().contains("asks for 13"), "{err}");
    assert!(err.to_string().contains("means[0][0]"), "{err}");

    let text = "1000000000000 1 1\n";
    let err = read_gmm(text).expect_err("absurd");
    assert_eq!((err.span().start, err.span().end), (0, 13));
}

/// The GMM golden through the command line's code path, in every AD mode:
/// the flat-parameter objective, differentiated by forward mode (D[[·]]),
/// by the tape, and by central differences (looser).
#[test]
fn gmm_golden_gradient_in_every_mode() {
    use fsmooth::adbench::gmm::{GMM_SOURCE, read_gmm};
    use fsmooth::eval::Limits;
    use fsmooth::gradient::{Mode, Plan};
    use fsmooth::pipeline::{Checkpointing, Engine};
    let text = adbench_file("data/gmm/test.txt");
    let golden: serde_json::Value =
        serde_json::from_str(&adbench_file("goldens/gmm_test.json")).expect("golden json");
    let want: Vec<f64> = golden["gradient"]
        .as_array()
        .expect("gradient")
        .iter()
        .map(|x| x.as_f64().expect("number"))
        .collect();
    let objective = golden["objective"].as_f64().expect("objective");
    let input = read_gmm(&text).expect("reads");
    let session = Session::load(GMM_SOURCE).expect("builds");
    let args = input.flat_args();
    let limits = Limits::default();
    for (mode, tol) in [
        (Mode::Fwd, 1e-8),
        (Mode::Rev, 1e-8),
        (Mode::Tape, 1e-8),
        (Mode::Fd, 1e-6),
    ] {
        let plan = Plan::new(
            &session,
            "gmmObjectiveFlat",
            "theta",
            mode,
            Engine::Eval,
            Checkpointing::default(),
        )
        .expect("builds");
        let cols = plan
            .columns(args.clone(), Engine::Eval, limits)
            .expect("differentiates");
        let mode = mode.name();
        let got = cols.gradient(&args[0]);
        let mut g = Vec::new();
        fsmooth::eval::flatten(&got, &mut g);
        assert_eq!(g.len(), want.len(), "{mode}");
        let v = cols.value.as_f64().expect("scalar");
        assert!(
            fsmooth::numeric::rho(v, objective) <= 1e-8,
            "{mode}: objective {v}"
        );
        for (i, (a, b)) in g.iter().zip(&want).enumerate() {
            assert!(
                fsmooth::numeric::rho(*a, *b) <= tol,
                "{mode}: gradient[{i}] = {a}, golden {b}"
            );
        }
    }
}

/// `adbench gmm --engine native` reproduces the ADBench golden with the
/// forward and reverse derivative programs, and with the batched data
/// term (`--batched`), and `--repeat` adds timings.
/// (fwd-opt on native code is tested on the dot product in
/// `native::programs::native_engine_from_the_command_line_matches_the_evaluator`;
/// optimising GMM under `opt --check` takes minutes in a debug build.)
#[test]
fn gmm_golden_from_the_command_line_with_native_code() {
    let golden: serde_json::Value =
        serde_json::from_str(&adbench_file("goldens/gmm_test.json")).expect("golden json");
    let want = golden["gradient"].as_array().expect("gradient").clone();
    let file =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/adbench/data/gmm/test.txt");
    for (mode, batched) in [("fwd", false), ("rev", false), ("rev", true)] {
        let mut args = vec![
            "adbench",
            "gmm",
            file.to_str().unwrap(),
            "--mode",
            mode,
            "--engine",
            "native",
            "--repeat",
            "2",
        ];
        if batched {
            args.push("--batched");
        }
        let o = crate::common::cli(&args);
        assert!(
            o.status.success(),
            "{mode}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let out: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        let v = out["objective"].as_f64().unwrap();
        assert!(fsmooth::numeric::rho(v, golden["objective"].as_f64().unwrap()) <= 1e-8);
        fn numbers(j: &serde_json::Value, out: &mut Vec<f64>) {
            match j {
                serde_json::Value::Array(items) => items.iter().for_each(|x| numbers(x, out)),
                other => out.push(other.as_f64().expect("a number")),
            }
        }
        let mut got = Vec::new();
        numbers(&out["gradient"], &mut got);
        assert_eq!(got.len(), want.len(), "{mode}");
        for (a, b) in got.iter().zip(&want) {
            assert!(
                fsmooth::numeric::rho(*a, b.as_f64().unwrap()) <= 1e-8,
                "{mode}"
            );
        }
        let t = &out["timings"];
        assert_eq!(t["engine"], "native");
        assert!(t["objective_ms"].as_f64().unwrap() > 0.0 && t["ratio"].as_f64().unwrap() > 0.0);
    }
}
