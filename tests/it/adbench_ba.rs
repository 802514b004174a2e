//! ADBench bundle adjustment: the residuals of `examples/adbench/ba.fsm`
//! and the sparse Jacobian that `fsmooth adbench ba` assembles from one
//! 3 × 15 Jacobian per observation, against ADBench's golden
//! (`tests/data/adbench/goldens/ba_test.json`) in several modes and on
//! both engines; the layout identities of the data README on a problem
//! with more cameras and points; the exact-zero rotation branch; and the
//! reader's error codes.

use fsmooth::adbench::ba::{BaInput, read_ba};
use fsmooth::diagnostic::Diagnose;
use serde_json::Value as Json;

use crate::common::{cli, root, temp_file};

/// ADBench's tolerance: |expected − actual| ≤ 1e-8, elementwise.
const TOLERANCE: f64 = 1e-8;

fn golden() -> Json {
    let path = root().join("tests/data/adbench/goldens/ba_test.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("golden")).expect("golden json")
}

fn numbers(j: &Json) -> Vec<f64> {
    j.as_array()
        .expect("an array")
        .iter()
        .map(|x| x.as_f64().expect("a number"))
        .collect()
}

fn indices(j: &Json) -> Vec<u64> {
    j.as_array()
        .expect("an array")
        .iter()
        .map(|x| x.as_u64().expect("an index"))
        .collect()
}

/// `fsmooth adbench ba FILE ARGS…` as JSON.
fn ba_cli(file: &std::path::Path, args: &[&str]) -> Json {
    let mut all = vec!["adbench", "ba", file.to_str().expect("utf-8 path")];
    all.extend(args);
    let o = cli(&all);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("json output")
}

fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!((a - b).abs() <= tol, "{what}[{i}] = {a}, golden {b}");
    }
}

/// Every value of the golden: residuals, Jacobian values, CSR index
/// arrays and sizes, from the command line, with forward mode (one pass
/// per direction and vector mode) and reverse mode on the evaluator and on
/// native code, and with the tape. Finite
/// differences get ADBench's finite-difference tolerance, 1e-6. (fwd-opt
/// gives the same numbers but optimising under `opt --check` takes over a
/// minute, so it is not run here.)
#[test]
fn ba_golden_from_the_command_line_in_every_mode() {
    let g = golden();
    let file = root().join("tests/data/adbench/data/ba/test.txt");
    let jac = &g["jacobian"];
    for (mode, engine, tol) in [
        ("fwd", "eval", TOLERANCE),
        ("rev", "eval", TOLERANCE),
        ("tape", "eval", TOLERANCE),
        ("fd", "eval", 1e-6),
        ("fwd", "native", TOLERANCE),
        ("rev", "native", TOLERANCE),
        // D-Vec-Deriv: one pass per observation for its 15 directions.
        ("fwd-vec", "eval", TOLERANCE),
        ("fwd-vec", "native", TOLERANCE),
        // D-Vec-Rows: natively, every observation's 3 rows in one call.
        ("fwd-rows", "eval", TOLERANCE),
        ("fwd-rows", "native", TOLERANCE),
    ] {
        let out = ba_cli(&file, &["--mode", mode, "--engine", engine]);
        let what = |s: &str| format!("{mode}/{engine}: {s}");
        assert_close(
            &what("reproj_err"),
            &numbers(&out["reproj_err"]),
            &numbers(&g["reproj_err"]["values"]),
            TOLERANCE,
        );
        assert_close(
            &what("w_err"),
            &numbers(&out["w_err"]),
            &numbers(&g["w_err"]["values"]),
            TOLERANCE,
        );
        let j = &out["jacobian"];
        assert_eq!(j["nrows"], jac["nrows"], "{mode}/{engine}");
        assert_eq!(j["ncols"], jac["ncols"], "{mode}/{engine}");
        assert_eq!(indices(&j["rows"]), indices(&jac["rows_derived"]));
        assert_eq!(indices(&j["cols"]), indices(&jac["cols_derived"]));
        assert_close(
            &what("vals"),
            &numbers(&j["vals"]),
            &numbers(&jac["vals"]),
            tol,
        );
    }
}

/// `--repeat` adds the timings of the objective and of the Jacobian.
#[test]
fn ba_repeat_reports_timings() {
    let file = root().join("tests/data/adbench/data/ba/test.txt");
    let out = ba_cli(&file, &["--engine", "native", "--repeat", "2"]);
    let t = &out["timings"];
    assert_eq!(t["engine"], "native");
    assert_eq!(t["repeat"], 2);
    assert!(t["objective_ms"].as_f64().unwrap() > 0.0);
    assert!(t["jacobian_ms"].as_f64().unwrap() > 0.0);
}

/// On a problem with 3 cameras, 4 points and 7 observations: the CSR
/// structure of the data README (observation i in the columns of camera
/// i % 3, point i % 4, weight i) and its identities
/// ∂e/∂u0 = (w, 0), ∂e/∂v0 = (0, w), ∂e/∂X = −∂e/∂C, ∂e/∂w = proj − feat = e / w,
/// and the weight row −2w.
#[test]
fn ba_jacobian_layout_and_identities() {
    let text = "3 4 7\n0.1 -0.2 0.3 0.5 -0.4 -3.0 2.0 0.25 -0.125 0.01 -0.002\n0.7 1.1 2.2\n0.8\n0.3 -0.1\n";
    let input = read_ba(text).expect("reads");
    let (n, m, p) = (3, 4, 7);
    let file = temp_file("ba_3_4_7.txt", text);
    let out = ba_cli(&file, &["--mode", "rev"]);
    let j = &out["jacobian"];
    let (rows, cols, vals) = (
        indices(&j["rows"]),
        indices(&j["cols"]),
        numbers(&j["vals"]),
    );
    assert_eq!(
        (j["nrows"].as_u64(), j["ncols"].as_u64()),
        (Some(3 * 7), Some(11 * 3 + 3 * 4 + 7))
    );
    assert_eq!(rows.len(), 3 * p + 1);
    assert_eq!((cols.len(), vals.len()), (31 * p, 31 * p));
    let w = input.w;
    let e = numbers(&out["reproj_err"]);
    for i in 0..p {
        for k in 0..2 {
            let r = 2 * i + k;
            let (s, t) = (rows[r] as usize, rows[r + 1] as usize);
            assert_eq!(t - s, 15, "row {r}");
            let want: Vec<u64> = (0..11)
                .map(|c| 11 * (i % n) + c)
                .chain((0..3).map(|c| 11 * n + 3 * (i % m) + c))
                .chain([11 * n + 3 * m + i])
                .map(|c| c as u64)
                .collect();
            assert_eq!(&cols[s..t], &want[..], "row {r}");
            let v = &vals[s..t];
            // u0 is parameter 7, v0 parameter 8.
            assert_eq!((v[7], v[8]), if k == 0 { (w, 0.0) } else { (0.0, w) });
            for c in 0..3 {
                assert!((v[11 + c] + v[3 + c]).abs() <= 1e-9 * v[3 + c].abs().max(1.0));
            }
            assert!((v[14] - e[r] / w).abs() <= 1e-12);
        }
        let r = 2 * p + i;
        let s = rows[r] as usize;
        assert_eq!(rows[r + 1] as usize - s, 1);
        assert_eq!(cols[s] as usize, 11 * n + 3 * m + i);
        assert_eq!(vals[s], -2.0 * w);
    }
}

/// A zero rotation takes ADBench's exact-zero branch (pt + r × pt); its
/// derivative in r agrees with finite differences, which straddle zero.
#[test]
fn ba_zero_rotation_branch() {
    let text =
        "1 1 1\n0 0 0 0.5 -0.4 -3.0 2.0 0.25 -0.125 0.01 -0.002\n0.7 1.1 2.2\n0.8\n0.3 -0.1\n";
    let file = temp_file("ba_zero_rotation.txt", text);
    let fwd = ba_cli(&file, &["--mode", "fwd"]);
    let fd = ba_cli(&file, &["--mode", "fd"]);
    assert_close(
        "zero rotation: vals",
        &numbers(&fwd["jacobian"]["vals"]),
        &numbers(&fd["jacobian"]["vals"]),
        1e-6,
    );
    // No rotation: Xcam = X - C = (0.2, 1.5, 5.2).
    let (u, v) = (0.2 / 5.2, 1.5 / 5.2);
    let l = 1.0 + 0.01 * (u * u + v * v) + -0.002 * (u * u + v * v) * (u * u + v * v);
    let want = [
        0.8 * (2.0 * u * l + 0.25 - 0.3),
        0.8 * (2.0 * v * l - 0.125 + 0.1),
    ];
    assert_close(
        "zero rotation: reproj_err",
        &numbers(&fwd["reproj_err"]),
        &want,
        1e-12,
    );
}

fn code(r: Result<BaInput, fsmooth::adbench::read::AdbenchError>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(e) => e.code(),
    }
}

#[test]
fn ba_malformed_files_give_error_codes() {
    let body = "1 2 3 4 5 6 7 8 9 10 11\n1 2 3\n0.5\n1 2\n";
    assert_eq!(code(read_ba(&format!("2 10 10\n{body}"))), "ok");
    let cases = [
        ("", "adbench-eof"),
        ("2 10", "adbench-eof"),
        ("2 10 10\n1 2 3", "adbench-eof"),
        ("0 10 10\n", "adbench-size"),
        ("2 0 10\n", "adbench-size"),
        ("2 10 -1\n", "adbench-size"),
        ("2 10 99999999999999\n", "adbench-size"),
        ("2.5 10 10\n", "adbench-format"),
        ("2 10 10\n1 2 x\n", "adbench-format"),
    ];
    for (text, expected) in cases {
        assert_eq!(code(read_ba(text)), expected, "input {text:?}");
    }
    assert_eq!(
        code(read_ba(&format!("2 10 10\n{body}7\n"))),
        "adbench-trailing-data"
    );
    // p = 0 is a problem with no observations.
    assert_eq!(code(read_ba(&format!("2 10 0\n{body}"))), "ok");
}

/// ba.fsm's `baProject` (ADBench's statement order) agrees with the
/// paper's Fig. 14 `project` of `examples/ba_project.fsm` on its example.
#[test]
fn ba_project_agrees_with_the_paper_transcription() {
    let input = r#"{"cam": [0.1, -0.2, 0.3, 0.5, -0.4, -3.0, 2.0, 0.25, -0.125, 0.01, -0.002], "x": [0.7, 1.1, 2.2]}"#;
    let paper = std::fs::read_to_string(root().join("examples/ba_project.fsm")).expect("example");
    let (a, _) = crate::common::run(&paper, "project", Some(input)).expect("paper project runs");
    let (b, _) = crate::common::run(fsmooth::adbench::ba::BA_SOURCE, "baProject", Some(input))
        .expect("baProject runs");
    let (mut xa, mut xb) = (Vec::new(), Vec::new());
    fsmooth::eval::flatten(&a, &mut xa);
    fsmooth::eval::flatten(&b, &mut xb);
    assert_close("baProject vs Fig. 14", &xb, &xa, 1e-14);
}

/// Modes `tape` and `fd` have no derivative program to compile.
#[test]
fn ba_native_engine_rejects_tape_and_fd() {
    let file = root().join("tests/data/adbench/data/ba/test.txt");
    for mode in ["tape", "fd"] {
        let o = cli(&[
            "adbench",
            "ba",
            file.to_str().unwrap(),
            "--mode",
            mode,
            "--engine",
            "native",
        ]);
        assert!(!o.status.success(), "{mode}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("error[usage]"),
            "{mode}"
        );
    }
}

/// A malformed file is reported against the file, with its code.
#[test]
fn ba_reader_errors_from_the_command_line() {
    let file = temp_file("ba_bad.txt", "2 10 10\n1 2 x\n");
    let o = cli(&["adbench", "ba", file.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("error[adbench-format]") && err.contains("ba_bad.txt:2:5"),
        "{err}"
    );
}
