//! The validation gate before native code (README, "The validation
//! gate"; `src/gate.rs`): `compile` and `--engine native` check the
//! derivative on sample inputs against reverse mode, optimised forward
//! mode and finite differences, and native code against the evaluator,
//! before anything is emitted or run.

use std::path::PathBuf;

use crate::common::{cli, root};

/// A scratch file with `text`, named for the test.
fn program(name: &str, text: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gate");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p
}

fn broken_rules() -> String {
    root().join("tests/data/gate-rules").display().to_string()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// An unsound rule passed with `--rules` (`a * b ⇝ a`) breaks the
/// optimised derivative; its steps are instances of the rule, so the
/// replay accepts them, but the values do not: the gate stops `compile`
/// before it writes the object, names the input and the three values, and
/// `--no-gate` emits it anyway. The sound rule set passes.
#[test]
fn the_gate_stops_the_emission_of_a_derivative_broken_by_an_unsound_rule() {
    let src = program(
        "product.fsm",
        "let main (x: Double) (y: Double) = x * y + sin x\n",
    );
    let out = program("product.o", "");
    std::fs::remove_file(&out).expect("fresh");
    let (file, obj) = (src.to_str().unwrap(), out.to_str().unwrap());
    let base = [
        "compile", file, "--mode", "fwd-opt", "--wrt", "x", "-o", obj,
    ];
    let rules = broken_rules();

    let stopped = cli(&[&base[..], &["--rules", &rules]].concat());
    assert_eq!(stopped.status.code(), Some(1), "{}", stderr(&stopped));
    let err = stderr(&stopped);
    assert!(err.contains("error[gate-failed]"), "{err}");
    assert!(
        err.contains("the fwd-opt derivative disagrees with rev"),
        "{err}"
    );
    assert!(err.contains("central finite differences"), "{err}");
    assert!(err.contains("generated sample 1 (x = "), "{err}");
    assert!(err.contains("native code was not emitted"), "{err}");
    assert!(!out.exists(), "the object must not be written");

    let forced = cli(&[&base[..], &["--rules", &rules, "--no-gate"]].concat());
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert!(out.exists(), "--no-gate emits the object");
    std::fs::remove_file(&out).expect("remove");

    let sound = cli(&base);
    assert!(sound.status.success(), "{}", stderr(&sound));
    assert!(stderr(&sound).is_empty(), "{}", stderr(&sound));
    assert!(out.exists());
}

/// `grad --engine native` is gated the same way, and checks at the
/// command's own input too; `--no-gate` runs the broken derivative.
#[test]
fn the_gate_stops_a_broken_derivative_before_native_code_runs_it() {
    let src = program(
        "product_grad.fsm",
        "let main (x: Double) (y: Double) = x * y + sin x\n",
    );
    let file = src.to_str().unwrap();
    let rules = broken_rules();
    let base = [
        "grad",
        file,
        "--wrt",
        "x",
        "--mode",
        "fwd-opt",
        "--engine",
        "native",
        "--input",
        "[0.5, 2.0]",
    ];
    let stopped = cli(&[&base[..], &["--rules", &rules, "--gate-samples", "0"]].concat());
    assert_eq!(stopped.status.code(), Some(1));
    assert!(stopped.stdout.is_empty(), "nothing is printed");
    let err = stderr(&stopped);
    assert!(err.contains("at the input (x = 0.5, y = 2.0)"), "{err}");
    assert!(err.contains("native code was not run"), "{err}");

    let forced = cli(&[&base[..], &["--rules", &rules, "--no-gate"]].concat());
    assert!(forced.status.success());
    let sound = cli(&base);
    assert!(sound.status.success(), "{}", stderr(&sound));
    let j: serde_json::Value = serde_json::from_slice(&sound.stdout).expect("json");
    let g = j["gradient"].as_f64().expect("gradient");
    assert!((g - (2.0 + 0.5f64.cos())).abs() < 1e-12, "{g}");
}

/// Where no generated input is in the entry's domain the gate says so
/// (`warning[gate-unchecked]`) and lets the code through; an input given
/// with `--sample-input` (JSON, or a file) is checked, and stops the
/// broken derivative.
#[test]
fn the_gate_checks_at_the_users_sample_inputs() {
    let src = program("far.fsm", "let main (v: Vector) = v[5] * v[5]\n");
    let sample = program("far.json", "[[1, 2, 3, 4, 5, 6.5]]");
    let file = src.to_str().unwrap();
    let out = program("far.o", "");
    let obj = out.to_str().unwrap();
    let rules = broken_rules();
    let base = [
        "compile", file, "--mode", "fwd-opt", "--wrt", "v", "-o", obj, "--rules", &rules,
    ];

    let unchecked = cli(&base);
    assert!(unchecked.status.success(), "{}", stderr(&unchecked));
    let err = stderr(&unchecked);
    assert!(err.contains("warning[gate-unchecked]"), "{err}");
    assert!(err.contains("index-out-of-bounds"), "{err}");

    for given in ["[[1, 2, 3, 4, 5, 6.5]]", sample.to_str().unwrap()] {
        let stopped = cli(&[&base[..], &["--sample-input", given]].concat());
        assert_eq!(stopped.status.code(), Some(1), "{}", stderr(&stopped));
        let err = stderr(&stopped);
        assert!(
            err.contains("at --sample-input 1 (v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.5])"),
            "{err}"
        );
    }
}

/// The objective and every derivative mode pass the gate with the default
/// rules, on a program with a loop, a branch and a matrix.
#[test]
fn sound_programs_pass_the_gate_in_every_mode() {
    let src = program(
        "mixed.fsm",
        "let main (m: Matrix) (v: Vector) =\n  vectorSum (build (length m) (fun i -> if v[i] > 0.0 then exp (v[i] * vectorSum m[i]) else v[i] * v[i]))\n",
    );
    let file = src.to_str().unwrap();
    let out = program("mixed.o", "");
    let obj = out.to_str().unwrap();
    for mode in ["objective", "fwd", "fwd-opt", "fwd-vec", "fwd-rows", "rev"] {
        let mut args = vec!["compile", file, "--mode", mode, "-o", obj];
        if mode != "objective" {
            args.extend(["--wrt", "v"]);
        }
        let o = cli(&args);
        assert!(o.status.success(), "{mode}: {}", stderr(&o));
        assert!(stderr(&o).is_empty(), "{mode}: {}", stderr(&o));
    }
}

/// Found by `fsmooth fuzz --target native` (seeds 12 and 13): at a
/// singular point of a primitive the derivative rules are ⊥ even where
/// the entry is defined — `sqrt` at 0 in forward mode, though its value
/// is not used; reverse mode through the norm of a zero vector — and the
/// modes may differ there (spec/ad-forward.md §7.2). The gate failed
/// such a run with an unlocated `gate-failed`; it now has no verdict at
/// that input, and native code reports the evaluator's ⊥ at its source.
#[test]
fn a_derivative_bottom_at_a_singular_point_is_the_evaluators_not_the_gates() {
    let cases = [
        (
            "dead_sqrt.fsm",
            "let main = fun (p: Double) -> (fun x1 -> x1) ((fun x2 -> p) (sqrt p))\n",
            "fwd",
            "[0.0]",
        ),
        (
            "zero_norm.fsm",
            "let main = fun (p: Double) -> 2.0 * vectorNorm (vectorMap [p, -1.5] (fun x1 -> -0.0))\n",
            "rev",
            "[1e-300]",
        ),
    ];
    for (name, text, mode, input) in cases {
        let src = program(name, text);
        let src = src.to_str().expect("path");
        let first = |engine: &str| {
            let o = cli(&[
                "jacobian", src, "--wrt", "p", "--mode", mode, "--input", input, "--engine", engine,
            ]);
            assert_eq!(o.status.code(), Some(1), "{name} {engine}: {}", stderr(&o));
            stderr(&o).lines().next().unwrap_or("").to_string()
        };
        let eval = first("eval");
        assert!(eval.contains("error[division-by-zero]"), "{name}: {eval}");
        assert_eq!(first("native"), eval, "{name}");
    }
}

/// Found by `fsmooth fuzz --target native` (seeds 21, 32, 51, 54, 61): the gate
/// compared modes at a NaN input, where forward mode's tangents carry NaN
/// that reverse mode's cotangents do not (spec/ad-forward.md §7.2,
/// "Non-finite points and kinks"); finite differences at `abs`'s kink at
/// 0, where they give 0 and every mode 1; and modes at a singular point,
/// `p · log p` at the smallest subnormal, where forward mode's 1/p
/// overflows to ∞ and reverse mode's product does not. All three failed
/// runs that are right; now native code runs there, and gives the
/// evaluator's values.
#[test]
fn the_gate_has_no_verdict_where_the_modes_may_differ() {
    let cases = [
        (
            "nan_cross.fsm",
            "let main (p1: Matrix) (p2: Double) =\n  vectorCross [p2, 0.75, p2, p2] [p2, p2, 2., 2.0]\n",
            "p1",
            "rev",
            r#"{"p1": [[-0.0], [3.5], [0], [1], [0]], "p2": "NaN"}"#,
        ),
        (
            // Seed 54: forward mode is defined; reverse mode, the gate's
            // reference, is ⊥ at the norm of a zero vector.
            "zero_norm_fwd.fsm",
            "let main = fun (p: Double) -> vectorNorm (build (length [p, p, -1.5]) (fun x1 -> -0.0)) + 3.25\n",
            "p",
            "fwd",
            "[0.0]",
        ),
        (
            "subnormal_log.fsm",
            "let main = fun (p: Double) -> p * log p\n",
            "p",
            "fwd",
            "[5e-324]",
        ),
        (
            // Found with seed 51: 0.5 · 1.8e308 in the dot product
            // absorbs the change of p1[0] by h, so central differences
            // give 0 where the derivative is 0.25 (rounding, which the
            // comparison now allows for, as difftest does).
            "absorbed.fsm",
            "let main (p1: Vector) = vectorDot [0.5, 0.5, 0.5, 0.5] p1 * 0.5\n",
            "p1",
            "fwd-vec",
            r#"{"p1": [-1.3, 1.7976931348623157e308, 0.4, 100.25, 0]}"#,
        ),
        (
            // Seed 61: the same absorption inside the run, with a result
            // of size 1 (`cos` of the sum): the rounding bound takes the
            // largest value the run passes through.
            "absorbed_inside.fsm",
            "let main (p1: Array<Vector>) = cos (matrixSum p1)\n",
            "p1",
            "fwd",
            r#"{"p1": [[3.5, 1.7976931348623157e308, 3.5], [100.25, -1.3, 0]]}"#,
        ),
        (
            "abs_kink.fsm",
            "let main (p2: Double) = abs p2\n",
            "p2",
            "rev",
            "[0.0]",
        ),
    ];
    for (name, text, wrt, mode, input) in cases {
        let src = program(name, text);
        let src = src.to_str().expect("path");
        let out = |engine: &str| {
            let o = cli(&[
                "jacobian", src, "--wrt", wrt, "--mode", mode, "--input", input, "--engine", engine,
            ]);
            assert_eq!(o.status.code(), Some(0), "{name} {engine}: {}", stderr(&o));
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        assert_eq!(out("native"), out("eval"), "{name}");
    }
    // The kink test itself: `abs` at 0 and `max` at a tie are kinks; a
    // smooth point, of `abs` away from 0 or of a square, is not.
    let session =
        fsmooth::pipeline::Session::load("let a (x: Double) = abs x\nlet m (x: Double) = max x 1.0\nlet q (x: Double) = x * x * 3.0\n")
            .expect("loads");
    let limits = fsmooth::eval::Limits::default();
    let kink = |f: &str, x: f64| {
        let e = session.entry(f).expect("entry");
        fsmooth::gradient::kink(&e, 0, &[fsmooth::eval::Value::Double(x)], (0, 0), limits)
    };
    assert_eq!(kink("a", 0.0), Some(true));
    assert_eq!(kink("m", 1.0), Some(true));
    assert_eq!(kink("a", 0.5), Some(false));
    assert_eq!(kink("m", 3.0), Some(false));
    assert_eq!(kink("q", 100.0), Some(false));
}
