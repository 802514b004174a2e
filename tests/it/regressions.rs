//! Regression tests for bugs found by review (one test per bug).

use crate::common::{cli, temp_file};

fn out(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn err(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// A user definition named `deriv` (or `snd`) must not change what the
/// command line's forward-mode wrapper computes.
#[test]
fn user_definitions_cannot_shadow_the_derivative_wrapper() {
    let p = temp_file(
        "shadow_deriv.fsm",
        "let deriv = fun (a: Double) (b: Double) -> (a, 42.0)\nlet snd = 3.0\nlet main = fun (x: Double) -> x * x\n",
    );
    let p = p.to_str().expect("path");
    for mode in ["fwd", "fwd-opt", "rev", "tape"] {
        let o = cli(&[
            "grad",
            p,
            "--wrt",
            "x",
            "--input",
            r#"{"x": 3}"#,
            "--mode",
            mode,
        ]);
        assert_eq!(
            out(&o),
            r#"{"value": 9.0, "gradient": 6.0}"#,
            "{mode}: {}",
            err(&o)
        );
    }
}

/// Index parts of a result have no derivative: every mode skips them, so
/// Jacobian rows line up.
#[test]
fn jacobian_rows_skip_index_outputs_in_every_mode() {
    let p = temp_file(
        "index_out.fsm",
        "let main = fun (v: Vector) -> (v[0] * 3.0, (length v, v[1] * 5.0))\n",
    );
    let p = p.to_str().expect("path");
    for mode in ["fwd", "rev", "tape"] {
        let o = cli(&[
            "jacobian",
            p,
            "--wrt",
            "v",
            "--input",
            r#"{"v": [1, 2]}"#,
            "--mode",
            mode,
        ]);
        assert!(
            out(&o).ends_with(r#""jacobian": [[3.0, 0.0], [0.0, 5.0]]}"#),
            "{mode}: {}",
            out(&o)
        );
    }
}

/// A cotangent of the wrong shape is an input error, in every mode.
#[test]
fn vjp_checks_the_shape_of_the_cotangent() {
    let p = temp_file(
        "vjp_shape.fsm",
        "let main = fun (v: Vector) -> (build 2 (fun i -> v[i] * 2.0), v[0])\n",
    );
    let p = p.to_str().expect("path");
    for mode in ["fwd", "rev", "tape", "fd"] {
        let o = cli(&[
            "vjp",
            p,
            "--wrt",
            "v",
            "--input",
            "[1, 2]",
            "--cotangent",
            "[[1], 3]",
            "--mode",
            mode,
        ]);
        assert_eq!(o.status.code(), Some(1), "{mode}");
        assert!(
            err(&o).contains("error[input-mismatch]"),
            "{mode}: {}",
            err(&o)
        );
    }
}

/// Finite differences across a change of the result's shape, and a huge
/// `accum`, end in errors, not panics.
#[test]
fn shape_changes_and_huge_arrays_are_errors() {
    let p = temp_file(
        "no_panic.fsm",
        "let m2 = fun (v: Vector) -> build (if v[1] > 5.0 then 1 else 3) (fun i -> v[0])\nlet big = fun (x: Double) -> let v : Array<Double> = accum 0.0 4611686018427387904 [] in x\n",
    );
    let p = p.to_str().expect("path");
    let o = cli(&[
        "jacobian",
        p,
        "--entry",
        "m2",
        "--wrt",
        "v",
        "--input",
        r#"{"v": [1, 5]}"#,
        "--mode",
        "fd",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("error[domain-error]"), "{}", err(&o));
    // Past the element limit (E-Limit, which precedes the fuel test that
    // used to catch it).
    let o = cli(&["run", p, "--entry", "big", "--input", "[1]"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("error[array-too-large]"), "{}", err(&o));
}

/// Found by `props::forward_reverse_and_tape_gradients_agree` at depth 7:
/// `x ** x` overflows on a path `fst` discards. Over the reals its
/// contribution is 0, and fwd, tape and fd agree on a finite derivative.
/// The reverse program used to multiply R-Fst's zero cotangent by the
/// infinite partial (NaN); structural zeros (spec/ad-reverse.md §5.4) drop
/// it. The test's overflow detector must see the ∞.
#[test]
fn rev_of_a_discarded_overflow() {
    let src = "let main = fun (p: Double) ->\n  fst (sin (sin p), ifold (fun x i -> x ** x) ((p * p) ** p ** p) 1)\n";
    let f = temp_file("discarded_overflow.fsm", src);
    let f = f.to_str().expect("utf-8 path");
    let grad = |mode: &str| -> serde_json::Value {
        let o = cli(&[
            "grad", f, "--entry", "main", "--wrt", "p", "--mode", mode, "--input", "[2.9]",
        ]);
        assert!(o.status.success(), "{mode}: {}", err(&o));
        serde_json::from_str(&out(&o)).expect("JSON")
    };
    let exact = (2.9f64).sin().cos() * (2.9f64).cos();
    for mode in ["fwd", "tape", "fd"] {
        let g = grad(mode)["gradient"].as_f64().expect("a number");
        assert!(
            fsmooth::numeric::rho(g, exact) <= 1e-6,
            "{mode}: {g} vs {exact}"
        );
    }
    let rev = grad("rev");
    let value = rev["value"].as_f64().expect("a number");
    assert!(fsmooth::numeric::rho(value, (2.9f64).sin().sin()) <= 1e-12);
    let g = rev["gradient"].as_f64().expect("rev: a number, not NaN");
    assert!(
        fsmooth::numeric::rho(g, exact) <= 1e-9,
        "rev: {g} vs {exact}"
    );
    let loaded = fsmooth::pipeline::Session::load(src).expect("loads");
    let entry = loaded.entry("main").expect("entry");
    let args = vec![fsmooth::eval::Value::Double(2.9)];
    assert!(fsmooth::difftest::overflows(
        &entry,
        args,
        fsmooth::eval::Limits::default()
    ));
}
