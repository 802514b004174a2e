//! Vector forward mode (spec/ad-forward.md §4.6): D-Vec-Deriv against
//! D-Deriv-Vector, bit for bit, on every prelude function with a Vector
//! input, on bundle adjustment's `project` and `projectAll`, on nested
//! `deriv`s and on the API macros; ⊥ and empty vectors; the evaluator's
//! step count (the primal is computed once); native code against the
//! evaluator; and `--mode fwd-vec` on the command line. D-Vec-Rows (the
//! Jacobian's rows, `--mode fwd-rows`) against both, on the same cases.

use std::rc::Rc;

use fsmooth::ad::ForwardMode;
use fsmooth::eval::{self, Limits, Value};
use fsmooth::gradient::{Columns, Mode, Plan};
use fsmooth::pipeline::{Artefact, Engine, Entry, Session};

use crate::common::{cli, plan, root, temp_file};
use crate::forward::{LIBRARY, library_cases};

/// The gradient mode of `deriv`'s expansion `mode` (`fwd`, `fwd-vec`).
fn gradient_mode(mode: ForwardMode) -> Mode {
    match mode {
        ForwardMode::Scalar => Mode::Fwd,
        ForwardMode::Vector => Mode::FwdVec,
    }
}

/// The plan of forward mode (scalar or vector) for `entry` w.r.t. `wrt`:
/// its `deriv` wrapper, whose dual results either engine reads.
fn derivative(src: &str, entry: &str, wrt: &str, mode: ForwardMode) -> Plan {
    plan(src, entry, wrt, gradient_mode(mode))
        .unwrap_or_else(|d| panic!("{entry} wrt {wrt} ({mode:?}): {d}"))
}

/// The derivative program of a plan (the wrapper, or the rows).
fn program(p: &Plan) -> &Rc<Entry> {
    p.program().expect("a derivative program")
}

fn columns(d: &Plan, input: &str, engine: Engine) -> Columns {
    let args = d.base.read_input(Some(input)).expect("input");
    d.columns(args, engine, Limits::default())
        .unwrap_or_else(|e| panic!("{input}: forward mode: {e}"))
}

fn rows(src: &str, entry: &str, wrt: &str) -> Plan {
    plan(src, entry, wrt, Mode::FwdRows).unwrap_or_else(|d| panic!("{entry} wrt {wrt} (rows): {d}"))
}

fn row_columns(r: &Plan, input: &str, engine: Engine) -> Columns {
    let args = r.base.read_input(Some(input)).expect("input");
    r.columns(args, engine, Limits::default())
        .unwrap_or_else(|e| panic!("{input}: rows: {e}"))
}

fn column_bits(c: &Columns) -> Vec<Vec<u64>> {
    let col = |xs: &Vec<f64>| xs.iter().map(|x| x.to_bits()).collect();
    c.columns.iter().map(col).collect()
}

fn bits(v: &Value) -> Vec<u64> {
    let mut xs = Vec::new();
    eval::flatten(v, &mut xs);
    xs.iter().map(|x| x.to_bits()).collect()
}

/// Both expansions of `entry` w.r.t. `wrt` at `input` on the evaluator;
/// asserts the same value and columns, bit for bit, and returns the
/// (scalar, vector) results.
fn same_bits(src: &str, entry: &str, wrt: &str, input: &str) -> (Columns, Columns) {
    let eval = Engine::Eval;
    let scalar = derivative(src, entry, wrt, ForwardMode::Scalar);
    let s = columns(&scalar, input, eval);
    let v = columns(
        &derivative(src, entry, wrt, ForwardMode::Vector),
        input,
        eval,
    );
    assert_eq!(bits(&s.value), bits(&v.value), "{entry} wrt {wrt}: value");
    assert_eq!(
        s.columns.len(),
        v.columns.len(),
        "{entry} wrt {wrt}: columns"
    );
    for (j, (a, b)) in s.columns.iter().zip(&v.columns).enumerate() {
        let (a, b): (Vec<u64>, Vec<u64>) = (
            a.iter().map(|x| x.to_bits()).collect(),
            b.iter().map(|x| x.to_bits()).collect(),
        );
        assert_eq!(a, b, "{entry} wrt {wrt} at {input}: column {j}");
    }
    // D-Vec-Rows (a Vector variable): the same tangent computations,
    // read out by rows.
    if scalar.base.params[scalar.wrt].1.to_string() == "Array<Double>" {
        let r = row_columns(&rows(src, entry, wrt), input, eval);
        assert_eq!(
            bits(&r.value),
            bits(&v.value),
            "{entry} wrt {wrt}: rows' value"
        );
        assert_eq!(
            column_bits(&r),
            column_bits(&v),
            "{entry} wrt {wrt} at {input}: rows"
        );
    }
    (s, v)
}

/// The names of the definitions of the wrapper program.
fn defs(d: &Plan) -> Vec<String> {
    program(d)
        .program
        .defs
        .iter()
        .map(|d| d.name.to_string())
        .collect()
}

// D-Vec-Deriv, D-Vec-Scalar, D-Vec-Const, D-Vec-Var on the whole prelude:
// every case of forward.rs with a Vector parameter.
#[test]
fn vector_mode_equals_scalar_mode_bit_for_bit_on_the_prelude() {
    let mut compared = 0;
    for (name, input) in library_cases() {
        let entry = format!("e_{name}");
        let session = Session::load(LIBRARY).expect("LIBRARY loads");
        let base = session.entry(&entry).expect("entry");
        for (p, t) in &base.params {
            if t.to_string() != "Array<Double>" {
                continue;
            }
            let (_, v) = same_bits(LIBRARY, &entry, p, &input);
            compared += v.columns.iter().map(Vec::len).sum::<usize>();
            // D-Vec-Var: the prelude function is translated as `name'V`.
            let d = derivative(LIBRARY, &entry, p, ForwardMode::Vector);
            let names = defs(&d);
            assert!(
                names.iter().any(|n| n == &format!("{name}'V")),
                "{entry}: no `{name}'V` among {names:?}"
            );
            assert!(
                !names.iter().any(|n| n.ends_with("'D")),
                "{entry}: a scalar translation in vector mode: {names:?}"
            );
        }
    }
    assert!(compared > 150, "only {compared} Jacobian entries compared");
}

const BA: &str = concat!(
    include_str!("../../examples/ba_project.fsm"),
    "\nlet projectAll = fun (cam: Vector) (xs: Matrix) ->\n",
    "  let ps = build (length xs) (fun i -> project cam xs[i])\n",
    "  build (2 * length xs) (fun k -> ps[k / 2][k - 2 * (k / 2)])\n"
);

const CAM: &str = "[0.1, -0.2, 0.3, 0.5, -0.4, -3.0, 2.0, 0.25, -0.125, 0.01, -0.002]";

fn points(n: usize) -> String {
    let rows: Vec<String> = (0..n)
        .map(|i| {
            let f = i as f64;
            format!(
                "[{}, {}, {}]",
                (f * 0.37).sin(),
                (f * 0.11).cos(),
                3.0 + (f * 0.07).sin()
            )
        })
        .collect();
    format!("[{}]", rows.join(", "))
}

// The primal of a Jacobian is computed once: on bundle adjustment with 11
// directions, vector mode takes far fewer evaluator steps than one pass
// per direction, for the same bits.
#[test]
fn vector_mode_computes_the_primal_once() {
    let input = format!("{{\"cam\": {CAM}, \"xs\": {}}}", points(12));
    let (s, v) = same_bits(BA, "projectAll", "cam", &input);
    assert_eq!(v.columns.len(), 11);
    assert_eq!(v.columns[0].len(), 24);
    assert!(
        v.stats.steps * 3 < s.stats.steps * 2,
        "vector mode {} steps, scalar mode {}",
        v.stats.steps,
        s.stats.steps
    );
    // `project` alone, and with respect to the point.
    let one = format!("{{\"cam\": {CAM}, \"x\": [0.7, 1.1, 2.2]}}");
    same_bits(BA, "project", "cam", &one);
    same_bits(BA, "project", "x", &one);
}

// Nested `deriv`s, the API macros, `deriv` with respect to a Double and a
// Matrix (which keep D-Deriv-Double and D-Deriv-Matrix), a free Vector
// variable with zero tangents, pairs and arrays of arrays in the result.
#[test]
fn vector_mode_handles_nesting_the_api_and_other_variables() {
    let src = "
let f = fun (v: Vector) -> vectorSum (vectorMap v (fun a -> a * a * a)) + v[0] * v[1]
let g = fun (v: Vector) -> build (length v) (fun j -> snd (deriv (f v) v)[j])
let hess = fun (v: Vector) ->
  build (length v) (fun i -> build (length v) (fun j -> snd (deriv (g v) v)[i][j]))
let hessApi = fun (v: Vector) -> jacob (fun u -> vectorMap (grad f u) snd) v
let mixed = fun (v: Vector) (s: Double) (w: Vector) ->
  let d = deriv (vectorSMul v (s * vectorDot v w)) s in
  (snd d[0] + v[1] * s, [vectorEMul v w, vectorSMul w (fst d[1])])
let mat = fun (m: Matrix) (v: Vector) -> matrixVectorMul m (vectorMap v sin)
";
    let v = "[0.3, -1.2, 2.5]";
    // A single argument is given as itself, not in a list.
    for entry in ["f", "g", "hess", "hessApi"] {
        same_bits(src, entry, "v", v);
    }
    let m = format!("[{v}, 0.7, [1.7, 0.4, -0.9]]");
    for wrt in ["v", "s", "w"] {
        same_bits(src, "mixed", wrt, &m);
    }
    let mat = "[[[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], [0.3, -1.2, 2.5]]";
    same_bits(src, "mat", "m", mat);
    same_bits(src, "mat", "v", mat);
    // The nested `deriv`s of `hess` expanded in vector mode: the Hessian
    // of f, 6 vᵢ on the diagonal and 1 at (0, 1) and (1, 0).
    let loaded = Session::load(src).expect("loads");
    let e = loaded
        .get(&Artefact::Entry {
            name: Rc::from("hess"),
            mode: ForwardMode::Vector,
        })
        .expect("entry");
    let args = e.read_input(Some(v)).expect("input");
    let (h, _) = e
        .run(args, Limits::default(), &mut |_, _| {})
        .expect("runs");
    let expected =
        "[[1.7999999999999998, 1.0, 0.0], [1.0, -7.199999999999999, 0.0], [0.0, 0.0, 15.0]]";
    assert_eq!(h.to_string(), expected);
    assert!(
        e.program.defs.iter().any(|d| d.name.ends_with("'V")),
        "hess: no vector-mode translation"
    );
}

// D-Vec-Deriv's one-element array: with no directions nothing runs (so a
// ⊥ in the body is not reached, as with D-Deriv-Vector); with directions,
// ⊥ in the primal is the same error in both modes.
#[test]
fn vector_mode_runs_the_body_exactly_when_scalar_mode_does() {
    let src = "let f = fun (v: Vector) (d: Double) -> vectorSMul v (1.0 / d)\n";
    for mode in [ForwardMode::Scalar, ForwardMode::Vector] {
        let d = derivative(src, "f", "v", mode);
        let args = program(&d).read_input(Some("[[], 0.0]")).expect("input");
        let (r, _) = program(&d)
            .run(args, Limits::default(), &mut |_, _| {})
            .unwrap_or_else(|e| panic!("{mode:?}: the body ran: {e}"));
        assert_eq!(r.to_string(), "[]", "{mode:?}");
    }
    let mut codes = Vec::new();
    for mode in [ForwardMode::Scalar, ForwardMode::Vector] {
        let d = derivative(src, "f", "v", mode);
        let args = d.base.read_input(Some("[[1.0, 2.0], 0.0]")).expect("input");
        let err = match d.columns(args, Engine::Eval, Limits::default()) {
            Ok(c) => panic!("{mode:?}: not ⊥: {}", c.value),
            Err(e) => e,
        };
        codes.push(fsmooth::diagnostic::Diagnostic::from(&err).code);
    }
    assert_eq!(codes, ["division-by-zero", "division-by-zero"]);
    // A zero tangent guards D-Sqrt's partial in every direction alike.
    let src = "let g = fun (v: Vector) -> sqrt (v[0] * v[0]) + v[1]\n";
    same_bits(src, "g", "v", "[0.0, 2.0]");
}

// Native code runs the vector-mode program like the evaluator (D-Vec-Deriv).
#[test]
fn vector_mode_native_matches_the_evaluator() {
    let input = format!("{{\"cam\": {CAM}, \"xs\": {}}}", points(7));
    for (src, entry, wrt, input) in [
        (BA, "projectAll", "cam", input.as_str()),
        (
            LIBRARY,
            "e_vectorCross",
            "v1",
            "[[0.3, -1.2, 2.5], [1.7, 0.4, -0.9]]",
        ),
        (LIBRARY, "e_vectorLogSumExp", "v", "[0.3, -1.2, 2.5]"),
        (LIBRARY, "e_vectorMax", "v", "[0.3, -1.2, 2.5]"),
    ] {
        let d = derivative(src, entry, wrt, ForwardMode::Vector);
        let e = columns(&d, input, Engine::Eval);
        let n = columns(&d, input, Engine::Native);
        assert_eq!(bits(&e.value), bits(&n.value), "{entry}: value");
        assert_eq!(e.columns, n.columns, "{entry}: columns");
        // D-Vec-Rows natively: the rows program through `call_slices`.
        let r = rows(src, entry, wrt);
        let nr = row_columns(&r, input, Engine::Native);
        assert_eq!(bits(&nr.value), bits(&e.value), "{entry}: rows' value");
        assert_eq!(column_bits(&nr), column_bits(&e), "{entry}: rows");
    }
}

// D-Vec-Rows runs D_V[[e]] once even with no directions (each Double's
// gradient is then empty), so a ⊥ of the body is reached there where
// D-Vec-Deriv's is not; a Double or Matrix variable is an input error.
#[test]
fn jacobian_rows_run_the_body_once() {
    let src = "
let f = fun (v: Vector) (d: Double) -> vectorSMul v (1.0 / d)
let g = fun (v: Vector) (d: Double) -> (v[0] * d, build 2 (fun i -> d))
let h = fun (m: Matrix) -> m[0][0] * m[1][0]
";
    let r = rows(src, "f", "v");
    let run = |r: &Plan, input: &str| {
        let args = program(r).read_input(Some(input)).expect("input");
        program(r)
            .run(args, Limits::default(), &mut |_, _| {})
            .map(|(v, _)| v.to_string())
    };
    let err = run(&r, "[[], 0.0]").expect_err("the body runs with no directions");
    assert_eq!(
        fsmooth::diagnostic::Diagnostic::from(&err).code,
        "division-by-zero"
    );
    assert_eq!(run(&r, "[[], 2.0]").expect("runs"), "[]");
    assert_eq!(
        run(&r, "[[1.0, 3.0], 2.0]").expect("runs"),
        "[[0.5, 0.0], [0.0, 0.5]]"
    );
    // A pair result: every Double its gradient (the zero vector when it
    // does not depend on v).
    let r = rows(src, "g", "v");
    assert_eq!(
        run(&r, "[[1.0, 3.0], 2.0]").expect("runs"),
        "[[2.0, 0.0], [[0.0, 0.0], [0.0, 0.0]]]"
    );
    // An entry named like the wrapper's parameters (found in review: the
    // parameter `p'1` shadowed the entry, in every mode).
    let named = "let p'1 = fun (x: Vector) (y: Vector) -> x[0] * y[1]\n";
    let input = "{\"x\": [3.0, 1.0], \"y\": [1.0, 2.0]}";
    let eval = Engine::Eval;
    for (wrt, want) in [("x", [[2.0], [0.0]]), ("y", [[0.0], [3.0]])] {
        let r = row_columns(&rows(named, "p'1", wrt), input, eval);
        let f = columns(
            &derivative(named, "p'1", wrt, ForwardMode::Scalar),
            input,
            eval,
        );
        assert_eq!(r.columns, want, "p'1 wrt {wrt}: rows");
        assert_eq!(f.columns, want, "p'1 wrt {wrt}: fwd");
    }
    for (entry, wrt) in [("f", "d"), ("h", "m")] {
        let e = plan(src, entry, wrt, Mode::FwdRows)
            .err()
            .expect("rows need a Vector variable");
        assert_eq!(e.code, "input-parameters", "{e}");
    }
}

// `fsmooth jacobian`, `grad`, `ad` and `compile` with `--mode fwd-vec`.
#[test]
fn cli_fwd_vec_mode() {
    let file = temp_file("vector_mode_ba.fsm", BA);
    let f = file.to_str().expect("utf-8");
    let input = format!("{{\"cam\": {CAM}, \"xs\": {}}}", points(3));
    let jac = |mode: &str, engine: &str| {
        let o = cli(&[
            "jacobian",
            f,
            "--entry",
            "projectAll",
            "--wrt",
            "cam",
            "--mode",
            mode,
            "--engine",
            engine,
            "--input",
            &input,
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).expect("utf-8")
    };
    let fwd = jac("fwd", "eval");
    assert!(fwd.contains("\"jacobian\""));
    assert_eq!(jac("fwd-vec", "eval"), fwd);
    assert_eq!(jac("fwd-vec", "native"), fwd);
    assert_eq!(jac("fwd-rows", "eval"), fwd);
    assert_eq!(jac("fwd-rows", "native"), fwd);

    let o = cli(&[
        "ad", f, "--entry", "project", "--wrt", "cam", "--mode", "fwd-vec",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let printed = String::from_utf8(o.stdout).expect("utf-8");
    assert!(printed.contains("let project'V = fun "), "{printed}");
    assert!(!printed.contains("project'D"), "{printed}");

    let dot = root().join("examples/dot.fsm");
    // `dot u v` is `vectorDot`'s twin written with `ifold`.
    let g = |mode: &str| {
        let o = cli(&[
            "grad",
            dot.to_str().expect("utf-8"),
            "--entry",
            "dot",
            "--wrt",
            "u",
            "--mode",
            mode,
            "--input",
            "[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).expect("utf-8")
    };
    assert_eq!(g("fwd-vec"), g("fwd"));
    assert_eq!(g("fwd-rows"), g("fwd"));

    let obj = std::env::temp_dir().join("fsmooth_vector_mode_ba.o");
    let hdr = std::env::temp_dir().join("fsmooth_vector_mode_ba.h");
    // `compile --mode MODE`: the header written.
    let compile = |mode: &str| {
        let o = cli(&[
            "compile",
            f,
            "--entry",
            "projectAll",
            "--mode",
            mode,
            "--wrt",
            "cam",
            "-o",
            obj.to_str().expect("utf-8"),
            "--header",
            hdr.to_str().expect("utf-8"),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read_to_string(&hdr).expect("header written")
    };
    let header = compile("fwd-vec");
    assert!(header.contains("projectAll_fwd_vec("), "{header}");
    assert!(std::fs::metadata(&obj).expect("object written").len() > 0);

    // `--mode fwd-rows`: the rows program, printed and compiled.
    let o = cli(&[
        "ad",
        f,
        "--entry",
        "projectAll",
        "--wrt",
        "cam",
        "--mode",
        "fwd-rows",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let printed = String::from_utf8(o.stdout).expect("utf-8");
    assert!(printed.contains("projectAll'V"), "{printed}");
    let header = compile("fwd-rows");
    assert!(
        header.contains(
            "projectAll_fwd_rows: (cam: Array<Double>) -> (xs: Array<Array<Double>>) -> Array<Array<Double>>"
        ),
        "{header}"
    );
}

/// ⊕ on a vector-mode dual would join tangent vectors, so D-Accum and
/// D-AddAt on values with Doubles are rejected there (spec/ad-forward.md
/// §4.6), while scalar forward mode differentiates them, and so does
/// reverse mode (R-Accum, R-AddAt).
#[test]
fn accumulations_are_rejected_where_their_sum_would_be_wrong() {
    let src = "let f (v: Vector) = let a = accum 0.0 2 [(0, v[0]), (1, v[1] * v[0])] in a[0] + a[1]\n\
               let g (v: Vector) = let a = addAt v 0 (v[1] * v[1]) in a[0] + a[1]\n";
    for entry in ["f", "g"] {
        let err = plan(src, entry, "v", Mode::FwdVec)
            .err()
            .unwrap_or_else(|| panic!("{entry}: vector mode must reject it"));
        assert_eq!(err.code, "ad-unsupported", "{entry}: {err}");
    }
    // Scalar forward mode: d(v0 + v0 v1)/dv = [1 + v1, v0]; d(v0 + v1² + v1)/dv = [1, 2 v1 + 1].
    let eval = Engine::Eval;
    let f = columns(
        &derivative(src, "f", "v", ForwardMode::Scalar),
        "{\"v\": [2.0, 3.0]}",
        eval,
    );
    assert_eq!(f.columns, vec![vec![4.0], vec![2.0]]);
    let g = columns(
        &derivative(src, "g", "v", ForwardMode::Scalar),
        "{\"v\": [2.0, 3.0]}",
        eval,
    );
    assert_eq!(g.columns, vec![vec![1.0], vec![7.0]]);
    for (entry, want) in [("f", [4.0, 2.0]), ("g", [1.0, 7.0])] {
        let rev = plan(src, entry, "v", Mode::Rev).expect("R-Accum, R-AddAt");
        let c = columns(&rev, "{\"v\": [2.0, 3.0]}", eval);
        assert_eq!(c.columns, vec![vec![want[0]], vec![want[1]]], "{entry}");
    }
}
