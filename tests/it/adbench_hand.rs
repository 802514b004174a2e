//! ADBench hand tracking: the residuals of `examples/adbench/hand.fsm` and
//! the dense Jacobian that `fsmooth adbench hand` prints, against ADBench's
//! golden (`tests/data/adbench/goldens/hand_test.json`: the simple instance
//! `test.txt` and the complicated one `hand_complicated.txt`, both with the
//! model `data/hand/model/`), from the command line in forward and reverse
//! mode on native code and in forward mode on the evaluator; the angle-axis
//! identity branch; and the readers' error codes.
//!
//! `--mode fwd-opt` reproduces the golden too (and runs the Jacobian 3 to
//! 13 times faster than `fwd` on native code), but optimising the forward
//! program takes about 40 s in the test profile, so it is not run here.
//! Compiling the reverse program takes most of the 8 s of each native
//! `rev` test.

use fsmooth::adbench::hand::{
    HandInput, HandModel, read_bones, read_hand_instance, read_triangles, read_vertices,
};
use fsmooth::adbench::read::AdbenchError;
use fsmooth::diagnostic::Diagnose;
use serde_json::Value as Json;

use crate::common::{cli, root, temp_file};

/// ADBench's tolerance: |expected − actual| ≤ 1e-8, elementwise.
const TOLERANCE: f64 = 1e-8;

fn data(rel: &str) -> std::path::PathBuf {
    root().join("tests/data/adbench").join(rel)
}

fn numbers(j: &Json) -> Vec<f64> {
    j.as_array()
        .expect("an array")
        .iter()
        .map(|x| x.as_f64().expect("a number"))
        .collect()
}

fn assert_close(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!((a - b).abs() <= TOLERANCE, "{what}[{i}] = {a}, golden {b}");
    }
}

/// `fsmooth adbench hand` on the golden's `case` ("simple" or
/// "complicated") in `mode` on `engine`, checked against every number of
/// the golden: residuals, shape, the column-major Jacobian and its rows.
fn check_golden(case: &str, mode: &str, engine: &str) {
    let golden: Json = serde_json::from_str(
        &std::fs::read_to_string(data("goldens/hand_test.json")).expect("golden"),
    )
    .expect("golden json");
    let g = &golden[case];
    let file = data(g["input"].as_str().expect("input"));
    let model = data("data/hand/model");
    let mut args = vec![
        "adbench",
        "hand",
        file.to_str().expect("utf-8 path"),
        "--model",
        model.to_str().expect("utf-8 path"),
        "--mode",
        mode,
        "--engine",
        engine,
    ];
    if case == "complicated" {
        args.push("--complicated");
    }
    let o = cli(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out: Json = serde_json::from_slice(&o.stdout).expect("json output");
    let what = |s: &str| format!("{case}/{mode}/{engine}: {s}");
    assert_close(
        &what("objective"),
        &numbers(&out["objective"]),
        &numbers(&g["objective"]),
    );
    assert_eq!(out["jacobian_shape"], g["jacobian_shape"], "{case}");
    assert_close(
        &what("jacobian_colmajor"),
        &numbers(&out["jacobian_colmajor"]),
        &numbers(&g["jacobian_colmajor"]),
    );
    let rows = out["jacobian_rows"].as_array().expect("rows");
    let want = g["jacobian_rows"].as_array().expect("golden rows");
    assert_eq!(rows.len(), want.len());
    for (r, (a, b)) in rows.iter().zip(want).enumerate() {
        assert_close(
            &what(&format!("jacobian_rows[{r}]")),
            &numbers(a),
            &numbers(b),
        );
    }
}

#[test]
fn hand_simple_golden_native_fwd() {
    check_golden("simple", "fwd", "native");
}

#[test]
fn hand_complicated_golden_native_fwd() {
    check_golden("complicated", "fwd", "native");
}

/// Reverse mode: one run of the adjoint program per residual (6 here).
#[test]
fn hand_simple_golden_native_rev() {
    check_golden("simple", "rev", "native");
}

#[test]
fn hand_complicated_golden_native_rev() {
    check_golden("complicated", "rev", "native");
}

/// The whole Jacobian on the reference evaluator (about 2 s each).
#[test]
fn hand_golden_on_the_evaluator() {
    check_golden("simple", "fwd", "eval");
    check_golden("complicated", "fwd", "eval");
}

fn model() -> HandModel {
    let read = |f: &str| std::fs::read_to_string(data(&format!("data/hand/model/{f}"))).unwrap();
    let bones = read_bones(&read("bones.txt")).expect("bones");
    let vertices = read_vertices(&read("vertices.txt"), bones.names.len()).expect("vertices");
    let triangles = read_triangles(&read("triangles.txt"), vertices.positions.len()).expect("tris");
    HandModel {
        bones,
        vertices,
        triangles,
    }
}

#[test]
fn hand_reader_reads_the_model_and_instances() {
    let m = model();
    assert_eq!(m.bones.names.len(), 22);
    assert_eq!(
        (m.bones.names[0].as_str(), m.bones.parents[0]),
        ("wrist", -1)
    );
    assert_eq!(m.vertices.positions.len(), 544);
    assert_eq!(m.triangles.len(), 1084);
    // Weights: each listed pair, the rest 0; they sum to 1 per vertex.
    for w in &m.vertices.weights {
        assert_eq!(w.len(), 22);
        assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-6);
    }
    let text = std::fs::read_to_string(data("data/hand/hand_complicated.txt")).unwrap();
    let input = read_hand_instance(&text, true, &m).expect("complicated");
    assert_eq!(input.correspondences, vec![309, 387]);
    assert_eq!(input.us, Some(vec![[0.2, 0.25], [0.4, 0.5]]));
    assert_eq!(input.theta.len(), 26);
    assert_eq!(input.entry(), "handObjectiveComplicatedPacked");
}

/// Below a rotation norm of 1e-4 ADBench uses the identity, so the
/// Jacobian's three rotation columns are zero (tape on the evaluator).
#[test]
fn hand_small_rotation_takes_the_identity_branch() {
    let text = "1 26\n309 0.9 -1.2 -1.4\n1e-5\n-2e-5\n3e-5\n0.6\n-1\n-1.5\n\
                -0.2 -1.7 -0.7 0.9 0.4 0.8 -0.1 1.3 0.04 -0.7 0.6 -1.4 -0.5 -0.1 -0.7 -0.9 0.4 2.1 -1.1 0.2\n";
    let file = temp_file("hand_small_rotation.txt", text);
    let model = data("data/hand/model");
    let o = cli(&[
        "adbench",
        "hand",
        file.to_str().unwrap(),
        "--model",
        model.to_str().unwrap(),
        "--mode",
        "tape",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out: Json = serde_json::from_slice(&o.stdout).expect("json output");
    for row in out["jacobian_rows"].as_array().unwrap() {
        let row = numbers(row);
        assert_eq!(&row[0..3], &[0.0, 0.0, 0.0], "{row:?}");
        // The translation enters with coefficient -1 (G is the identity).
        assert!(
            row[3..6].iter().filter(|&&x| x == -1.0).count() == 1,
            "{row:?}"
        );
    }
}

fn code<T>(r: Result<T, AdbenchError>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(e) => e.code(),
    }
}

#[test]
fn hand_malformed_files_give_error_codes() {
    let m = model();
    let bone = |name: &str, parent: &str| format!("{name}:{parent}{}\n", ":0".repeat(32));
    let bones21: String = (0..21)
        .map(|b| bone("b", if b == 0 { "-1" } else { "0" }))
        .collect();
    assert_eq!(code(read_bones(&bones21)), "ok");
    let cases = [
        (bones21.replacen(":-1:", ":1:", 1), "adbench-size"),
        (bones21.replacen(":-1:", ":x:", 1), "adbench-format"),
        (
            bones21.lines().take(20).collect::<Vec<_>>().join("\n"),
            "adbench-eof",
        ),
        (format!("{bones21}b:0:1:2\n"), "adbench-eof"),
    ];
    for (text, expected) in cases {
        assert_eq!(code(read_bones(&text)), expected, "bones {text:?}");
    }
    assert_eq!(code(read_vertices("1:2:3:0:0:0:0:0:1:21:1.0\n", 22)), "ok");
    assert_eq!(
        code(read_vertices("1:2:3:0:0:0:0:0:1:22:1.0\n", 22)),
        "adbench-size"
    );
    assert_eq!(
        code(read_vertices("1:2:3:0:0:0:0:0:2:1:1.0\n", 22)),
        "adbench-eof"
    );
    assert_eq!(code(read_triangles("0:1:2\n", 3)), "ok");
    assert_eq!(code(read_triangles("0:1:3\n", 3)), "adbench-size");
    let theta = "0 ".repeat(26);
    let instance = |head: &str| -> Result<HandInput, AdbenchError> {
        read_hand_instance(&format!("{head}\n{theta}"), false, &m)
    };
    assert_eq!(code(instance("1 26\n543 0 0 0")), "ok");
    assert_eq!(code(instance("1 26\n544 0 0 0")), "adbench-size");
    assert_eq!(code(instance("1 25\n0 0 0 0")), "adbench-size");
    assert_eq!(code(instance("1 26\n0 0 x 0")), "adbench-format");
    assert_eq!(code(instance("1 26\n0 0 0 0 0")), "adbench-trailing-data");
    // A triangle index in complicated mode: 1084 triangles.
    let c = format!("1 26\n1083 0 0 0\n0.2 0.3\n{theta}");
    assert_eq!(code(read_hand_instance(&c, true, &m)), "ok");
    assert_eq!(code(read_hand_instance(&c, false, &m)), "adbench-size");
}

/// A simple-mode file read with `--complicated` is reported against the
/// file, with the code and the note that says what to do.
#[test]
fn hand_reader_errors_from_the_command_line() {
    let file = data("data/hand/test.txt");
    let model = data("data/hand/model");
    let o = cli(&[
        "adbench",
        "hand",
        file.to_str().unwrap(),
        "--model",
        model.to_str().unwrap(),
        "--complicated",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("error[adbench-eof]")
            && err.contains("test.txt:30:1")
            && err.contains("leave out --complicated"),
        "{err}"
    );
    let bad = temp_file("hand_bad_triangles.txt", "0:1:2\n3:4:99999\n");
    let dir = bad.parent().unwrap().join("hand_bad_model");
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["bones.txt", "vertices.txt"] {
        std::fs::copy(data(&format!("data/hand/model/{f}")), dir.join(f)).unwrap();
    }
    std::fs::copy(&bad, dir.join("triangles.txt")).unwrap();
    let o = cli(&[
        "adbench",
        "hand",
        file.to_str().unwrap(),
        "--model",
        dir.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("error[adbench-size]") && err.contains("triangles.txt:2:5"),
        "{err}"
    );
}
