//! ADBench LSTM: the objective of `examples/adbench/lstm.fsm` and its
//! gradient with respect to [main_params, extra_params], against ADBench's
//! golden (`tests/data/adbench/goldens/lstm_l2_c1024.json`), from the
//! command line on native code and on the evaluator; and the reader.
//!
//! Forward mode needs 266 passes: on native code it reproduces the golden
//! too (about 2 s per gradient in a release build), but it is left out here
//! to keep the suite short; reverse mode gives the whole gradient in one
//! run on either engine.

use fsmooth::adbench::lstm::{LstmInput, read_lstm};
use fsmooth::diagnostic::Diagnose;
use serde_json::Value as Json;

use crate::common::{cli, root};

/// ADBench's tolerance: |expected − actual| ≤ 1e-8, elementwise.
const TOLERANCE: f64 = 1e-8;

fn data(rel: &str) -> std::path::PathBuf {
    root().join("tests/data/adbench").join(rel)
}

fn flatten(j: &Json, out: &mut Vec<f64>) {
    match j {
        Json::Array(items) => items.iter().for_each(|x| flatten(x, out)),
        other => out.push(other.as_f64().expect("a number")),
    }
}

/// The objective and every gradient entry of the golden, from
/// `fsmooth adbench lstm --mode rev` on `engine`.
fn check_golden(engine: &str, extra: &[&str]) -> Json {
    let golden: Json = serde_json::from_str(
        &std::fs::read_to_string(data("goldens/lstm_l2_c1024.json")).expect("golden"),
    )
    .expect("golden json");
    let file = data("data/lstm/lstm_l2_c1024.txt");
    let mut args = vec![
        "adbench",
        "lstm",
        file.to_str().expect("utf-8 path"),
        "--mode",
        "rev",
        "--engine",
        engine,
    ];
    args.extend(extra);
    let o = cli(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out: Json = serde_json::from_slice(&o.stdout).expect("json output");
    let objective = out["objective"].as_f64().expect("objective");
    let want = golden["objective"].as_f64().expect("golden objective");
    assert!(
        (objective - want).abs() <= TOLERANCE,
        "{engine}: objective {objective}, golden {want}"
    );
    let mut got = Vec::new();
    flatten(&out["gradient"], &mut got);
    let mut want = Vec::new();
    flatten(&golden["gradient"], &mut want);
    assert_eq!(got.len(), 266);
    assert_eq!(got.len(), want.len());
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        assert!(
            (a - b).abs() <= TOLERANCE,
            "{engine}: gradient[{i}] = {a}, golden {b}"
        );
    }
    out
}

#[test]
fn lstm_golden_on_native_code() {
    let out = check_golden("native", &["--repeat", "1"]);
    let t = &out["timings"];
    assert_eq!(t["engine"], "native");
    assert!(t["objective_ms"].as_f64().unwrap() > 0.0 && t["gradient_ms"].as_f64().unwrap() > 0.0);
}

/// The whole gradient on the reference evaluator (about 10 s: 1023 steps
/// of a 2-layer LSTM, then its adjoint).
#[test]
fn lstm_golden_on_the_evaluator() {
    check_golden("eval", &[]);
}

#[test]
fn lstm_reader_reads_the_sections() {
    let text = std::fs::read_to_string(data("data/lstm/lstm_l2_c1024.txt")).expect("data");
    let input = read_lstm(&text).expect("reads");
    assert_eq!((input.l, input.c, input.b), (2, 1024, 14));
    assert_eq!(input.main_params.len(), 8 * 2 * 14);
    assert_eq!(input.extra_params.len(), 3 * 14);
    assert_eq!((input.state.len(), input.sequence.len()), (4, 1024));
    assert!(
        input
            .sequence
            .iter()
            .flatten()
            .all(|&x| x == 0.0 || x == 1.0)
    );
    assert_eq!(input.flat_args()[0].to_string().matches(',').count(), 265);
}

fn code(r: Result<LstmInput, fsmooth::adbench::read::AdbenchError>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(e) => e.code(),
    }
}

#[test]
fn lstm_malformed_files_give_error_codes() {
    // l = 1, c = 2, b = 1: 8 main, 3 extra, 2 state, 2 sequence values.
    let good = "1 2 1\n1 2 3 4 5 6 7 8\n1 2 3\n0 0\n1\n0\n";
    assert_eq!(code(read_lstm(good)), "ok");
    let cases = [
        ("", "adbench-eof"),
        ("1 2 1\n1 2 3 4 5 6 7 8\n1 2 3\n0 0\n1\n", "adbench-eof"),
        ("1 2 0\n", "adbench-size"),
        ("1 1 1\n", "adbench-size"),
        ("1 2 -1\n", "adbench-size"),
        ("1 2 4611686018427387904\n", "adbench-size"),
        ("1 x 1\n", "adbench-format"),
        ("1 2 1\n1 2 3 4 5 6 7 eight\n", "adbench-format"),
        (
            "1 2 1\n1 2 3 4 5 6 7 8\n1 2 3\n0 0\n1\n0\n1\n",
            "adbench-trailing-data",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(code(read_lstm(text)), expected, "input {text:?}");
    }
}

/// The prelude's `tanh` (F̃ has no primitive) against Rust's, and its
/// forward-mode derivative against 1 − tanh².
#[test]
fn prelude_tanh_matches_the_c_library() {
    let src = "let f (x: Double) = tanh x\n";
    let d =
        crate::common::plan(src, "f", "x", fsmooth::gradient::Mode::Fwd).expect("differentiates");
    for k in -80..=80 {
        let x = f64::from(k) * 0.125 + 0.01;
        let cols = d
            .columns(
                vec![fsmooth::eval::Value::Double(x)],
                fsmooth::pipeline::Engine::Eval,
                fsmooth::eval::Limits::default(),
            )
            .expect("runs");
        let t = cols.value.as_f64().expect("a Double");
        assert!(
            (t - x.tanh()).abs() <= 4.0 * f64::EPSILON * x.tanh().abs().max(0.05),
            "tanh {x} = {t}, libm {}",
            x.tanh()
        );
        let dt = cols.columns[0][0];
        assert!(
            (dt - (1.0 - x.tanh().powi(2))).abs() <= 1e-15,
            "tanh' {x} = {dt}"
        );
    }
    let (v, _) = crate::common::run(src, "f", Some("[\"-Infinity\"]")).expect("runs");
    assert_eq!(v.as_f64(), Some(-1.0));
}
