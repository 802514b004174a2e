//! The first-class derivative operators `jvp` and `vjp` (T-Jvp, T-Vjp,
//! D-Jvp, R-Vjp, R-Vjp-Nested; spec/ad-forward.md §10, spec/ad-reverse.md
//! §10) and specialisation (S-App, S-Let-Data, S-Let-Fun, S-Residual): on
//! any function value, nested in every mode pair, with respect to any data
//! type; the rows NE and RV of notes/test-cases.md; the Stalingrad
//! programs with one generic minimiser.

use fsmooth::eval::{Value, flatten};
use fsmooth::numeric::rho;

use crate::common::{cli, root, run, run_text, temp_file};

/// The Doubles of `entry`'s value on the evaluator.
fn doubles(src: &str, entry: &str, input: &str) -> Vec<f64> {
    let (v, _) = run(src, entry, Some(input)).unwrap_or_else(|d| panic!("{entry}: {d}"));
    let mut out = Vec::new();
    flatten(&v, &mut out);
    out
}

fn ops(src: &str, entry: &str, input: &str) -> u64 {
    run(src, entry, Some(input))
        .unwrap_or_else(|d| panic!("{entry}: {d}"))
        .1
        .ops
}

fn close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?} against {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(rho(*g, *w) <= tol, "{what}: {got:?} against {want:?}");
    }
}

/// Forward and reverse derivatives of scalar functions, as users write
/// them; every test below nests them.
const MODES: &str = "
let dF = fun f (x: Double) -> snd (jvp f x 1.0)
let dR = fun f (x: Double) -> snd (vjp f x 1.0)
let gF = fun f (x: Vector) -> gradientFwd f x
let gR = fun f (x: Vector) -> gradient f x
";

/// T-Jvp, T-Vjp: the operators' types, polymorphic in the function's
/// argument (a tuple here), and their errors located at the argument.
#[test]
fn t_jvp_and_t_vjp_type_the_operators() {
    let src = "let f = fun (p: Double * Double) -> fst p * snd p
let j = fun (p: Double * Double) -> jvp f p (1.0, 0.0)
let v = fun (p: Double * Double) -> vjp f p 1.0
let g = fun h x -> snd (vjp h x 1.0)
";
    let p = temp_file("operators_types.fsm", src);
    let o = cli(&["check", p.to_str().expect("path")]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("j : Double * Double -> Double * Double"),
        "{out}"
    );
    assert!(
        out.contains("v : Double * Double -> Double * Double * Double"),
        "{out}"
    );
    assert!(out.contains("g : ('a -> Double) -> 'a -> 'a"), "{out}");
    // The tangent must have the argument's type; the cotangent the result's.
    for (bad, code) in [
        (
            "let e = fun (x: Double) -> jvp sin x [1.0]",
            "type-mismatch",
        ),
        (
            "let e = fun (x: Double) -> vjp (fun y -> [y]) x 1.0",
            "type-mismatch",
        ),
        (
            "let e = fun (x: Double) -> jvp (fun g -> g 1.0) sin sin",
            "function-as-data",
        ),
    ] {
        let p = temp_file("operators_bad.fsm", bad);
        let o = cli(&["check", p.to_str().expect("path")]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{bad}");
        assert!(err.contains(&format!("error[{code}]")), "{bad}: {err}");
        assert!(err.contains("operators_bad.fsm:1:"), "{bad}: {err}");
    }
}

/// D-Jvp and R-Vjp on every kind of function value: a λ, a top-level
/// function, a partial application, a parameter of a higher-order
/// function (S-App), a function bound by `let` (S-Let-Fun), the result of
/// another operator, and the paper's API used as a value.
#[test]
fn operators_differentiate_any_function_value() {
    let src = format!(
        "{MODES}
let cube = fun (x: Double) -> x * x * x
let scale = fun (k: Double) (x: Double) -> k * sin x
let twice = fun g (x: Double) -> g (g x)
let lam = fun (x: Double) -> (jvp (fun y -> y * y) x 1.0, vjp (fun y -> y * y) x 1.0)
let top = fun (x: Double) -> (dF cube x, dR cube x)
let partial = fun (x: Double) -> (dF (scale 3.0) x, dR (scale 3.0) x)
let higher = fun (x: Double) -> (dF (twice sin) x, dR (twice sin) x)
let bound = fun (x: Double) -> let h = fun y -> exp y * x in (dF h x, dR h x)
let second = fun (x: Double) -> (dF (dR sin) x, dR (dF sin) x, derivative (derivative sin) x)
let api = fun (x: Double) -> let d = diff sin in (snd (d x), dF (fun y -> snd (diff cos y)) x)
"
    );
    let x: f64 = 0.7;
    let cases: [(&str, Vec<f64>); 7] = [
        ("lam", vec![x * x, 2.0 * x, x * x, 2.0 * x]),
        ("top", vec![3.0 * x * x, 3.0 * x * x]),
        ("partial", vec![3.0 * x.cos(), 3.0 * x.cos()]),
        (
            "higher",
            vec![x.sin().cos() * x.cos(), x.sin().cos() * x.cos()],
        ),
        ("bound", vec![x.exp() * x, x.exp() * x]),
        ("second", vec![-x.sin(), -x.sin(), -x.sin()]),
        ("api", vec![x.cos(), -x.cos()]),
    ];
    for (entry, want) in cases {
        close(&doubles(&src, entry, "[0.7]"), &want, 1e-14, entry);
    }
}

/// NE1 and NE2 (notes/test-cases.md): perturbation confusion, in all
/// four mode pairs. Tagged (correct) 1 and 2; untagged 2 and 3.
#[test]
fn no_perturbation_confusion_in_any_mode_pair() {
    let mut src = MODES.to_string();
    for (o, i) in [("F", "F"), ("F", "R"), ("R", "F"), ("R", "R")] {
        src.push_str(&format!(
            "let ne1{o}{i} = fun (x0: Double) -> d{o} (fun x -> x * d{i} (fun y -> x + y) 1.0) x0\n\
             let ne2{o}{i} = fun (x0: Double) -> d{o} (fun x -> x * d{i} (fun y -> x * y) 2.0) x0\n"
        ));
    }
    for pair in ["FF", "FR", "RF", "RR"] {
        assert_eq!(
            run_text(&src, &format!("ne1{pair}"), Some("[1.0]")),
            "1.0",
            "NE1 {pair}"
        );
        assert_eq!(
            run_text(&src, &format!("ne2{pair}"), Some("[1.0]")),
            "2.0",
            "NE2 {pair}"
        );
    }
}

/// NE3 and NE4: Hessian–vector products in every mode pair
/// (forward-over-forward, forward-over-reverse, reverse-over-forward,
/// reverse-over-reverse) and by the prelude's `hessianVector`; NE4's
/// finite-difference-over-reverse too.
#[test]
fn hessian_vector_products_in_every_mode_pair() {
    let src = format!(
        "{MODES}
let ne3 = fun (v: Vector) -> 2.0 * v[0] * v[0] + 3.0 * v[0] * v[1] + 4.0 * v[1] * v[1]
let ne4 = fun (v: Vector) -> exp (0.5 * vectorNormSq v)
let hvpFF = fun f (x: Vector) (v: Vector) -> snd (jvp (gF f) x v)
let hvpFR = fun f (x: Vector) (v: Vector) -> snd (jvp (gR f) x v)
let hvpRF = fun f (x: Vector) (v: Vector) -> gR (fun y -> snd (jvp f y v)) x
let hvpRR = fun f (x: Vector) (v: Vector) -> snd (vjp (gR f) x v)
let hvpFD = fun f (x: Vector) (v: Vector) ->
  let h = 1e-6
  vectorSMul (vectorSub (gR f (vectorAdd x (vectorSMul v h))) (gR f (vectorSub x (vectorSMul v h)))) (0.5 / h)
let ne3FF = fun (x: Vector) (v: Vector) -> hvpFF ne3 x v
let ne3FR = fun (x: Vector) (v: Vector) -> hvpFR ne3 x v
let ne3RF = fun (x: Vector) (v: Vector) -> hvpRF ne3 x v
let ne3RR = fun (x: Vector) (v: Vector) -> hvpRR ne3 x v
let ne3Prelude = fun (x: Vector) (v: Vector) -> hessianVector ne3 x v
let ne4FF = fun (x: Vector) (v: Vector) -> hvpFF ne4 x v
let ne4FR = fun (x: Vector) (v: Vector) -> hvpFR ne4 x v
let ne4RF = fun (x: Vector) (v: Vector) -> hvpRF ne4 x v
let ne4RR = fun (x: Vector) (v: Vector) -> hvpRR ne4 x v
let ne4FD = fun (x: Vector) (v: Vector) -> hvpFD ne4 x v
"
    );
    for pair in ["FF", "FR", "RF", "RR", "Prelude"] {
        let got = doubles(&src, &format!("ne3{pair}"), "[[3.0, 4.0], [7.0, 8.0]]");
        assert_eq!(got, [52.0, 85.0], "NE3 {pair}");
    }
    let ne4 = [0.23595179987592768, 0.3646527816264336, 0.49335376337693965];
    let input = "[[0.1, 0.2, 0.3], [0.2, 0.3, 0.4]]";
    for pair in ["FF", "FR", "RF", "RR"] {
        close(
            &doubles(&src, &format!("ne4{pair}"), input),
            &ne4,
            1e-12,
            pair,
        );
    }
    close(
        &doubles(&src, "ne4FD", input),
        &ne4,
        1e-6,
        "FD over reverse",
    );
}

/// Third order, mixing modes: d³/dx³ x⁴ = 24x in each of the eight
/// orders of F and R.
#[test]
fn third_derivatives_in_every_mode_order() {
    let mut src = MODES.to_string();
    src.push_str("let quartic = fun (x: Double) -> x * x * x * x\n");
    let mut names = Vec::new();
    for a in ["F", "R"] {
        for b in ["F", "R"] {
            for c in ["F", "R"] {
                let n = format!("d{a}{b}{c}");
                src.push_str(&format!(
                    "let {n} = fun (x: Double) -> d{a} (fun y -> d{b} (fun z -> d{c} quartic z) y) x\n"
                ));
                names.push(n);
            }
        }
    }
    for n in names {
        assert_eq!(doubles(&src, &n, "[1.5]"), [36.0], "{n}");
    }
}

/// The RV rows of notes/test-cases.md by the reverse operator (with the
/// function's several inputs as a tuple: structured independent
/// variables), each against its recorded value.
#[test]
fn rv_rows_by_the_reverse_operator() {
    let src = "
let rv1 = fun (a: Double) -> vjp (fun a -> ((fun b -> fun c -> b) a) 1.0) a 1.0
let rv2 = fun (x: Double) -> vjp (fun x -> sin (exp x) * cos (exp x)) x 1.0
let rv3 = fun (x: Double) -> vjp (fun x -> x * x) x 1.0
let rv4 = fun (p: Double * Double) ->
  vjp (fun q -> let x = fst q in let y = snd q in let a = x * y in let b = x + a in b * a) p 1.0
let rv5 = fun (a: Double) -> vjp (fun a -> let b = a + 1.0 in if b > 0.0 then a * b else b) a 1.0
let rv6 = fun (p: Double * Double) -> vjp (fun q -> let z = fst q + snd q in fst q * z) p 1.0
let rv9 = fun (p: Double * Double) ->
  vjp (fun q -> let x = fst q in let y = snd q in let f = fun z -> x * z + y in f y * f x) p 1.0
let rv10 = fun (p: Double * Double) ->
  vjp (fun q -> let x = fst q in let y = snd q in
         let f = fun z -> z * z in let g = fun z -> 2.0 * (x - z) + y in
         let h = fun z -> g (f z) in h y + f (g x)) p 1.0
let rv14 = fun (x: Double) -> vjp (fun x -> 3.0) x 1.0
";
    let cases: [(&str, &str, Vec<f64>); 10] = [
        ("rv1", "[4.0]", vec![4.0, 1.0]),
        (
            "rv2",
            "[0.0]",
            vec![0.4546487134128409, -0.4161468365471424],
        ),
        ("rv3", "[3.0]", vec![9.0, 6.0]),
        ("rv4", "[[2.0, 3.0]]", vec![48.0, 48.0, 28.0]),
        ("rv5", "[2.0]", vec![6.0, 5.0]),
        ("rv5", "[-3.0]", vec![-2.0, 1.0]),
        ("rv6", "[[12.0, 13.0]]", vec![300.0, 37.0, 12.0]),
        ("rv9", "[[1.0, 2.0]]", vec![12.0, 14.0, 10.0]),
        // ∇ = (2, −2y + 1) at (0.5, 3): value h y + f (g x) = g 9 + f 3 = −14 + 9.
        ("rv10", "[[0.5, 3.0]]", vec![-5.0, 2.0, -5.0]),
        ("rv14", "[42.0]", vec![3.0, 0.0]),
    ];
    for (entry, input, want) in cases {
        close(&doubles(src, entry, input), &want, 1e-15, entry);
    }
}

/// RV16: the Jacobian by columns (forward) equals the Jacobian by rows
/// (reverse); and the dot-product test ⟨J t, w⟩ = ⟨t, Jᵀ w⟩ between
/// the two operators, on a function of a Matrix (rank 2) to a Vector.
#[test]
fn forward_and_reverse_operators_are_transposes() {
    let src = "
let f = fun (x: Vector) -> [x[0] * x[1], sin (x[1]) + x[2] * x[0], exp (x[2]) / (1.0 + x[0] * x[0]), x[1]]
let cols = fun (x: Vector) -> jacobianFwd f x
let rows = fun (x: Vector) -> jacobianRev f x
let g = fun (m: Matrix) -> build (length m) (fun i -> vectorDot (m[i]) (m[i]) * m[i][0])
let dot = fun (m: Matrix) (t: Matrix) (w: Vector) ->
  let jt = snd (jvp g m t)
  let jw = snd (vjp g m w)
  (vectorDot jt w, matrixSum (matrixMap2 t jw vectorEMul))
";
    let x = "[[0.3, -1.2, 0.8]]";
    let c = doubles(src, "cols", x);
    let r = doubles(src, "rows", x);
    assert_eq!(c.len(), 12);
    close(&c, &r, 1e-15, "columns against rows");
    let d = doubles(
        src,
        "dot",
        "[[[0.5, 1.5], [-2.0, 0.25], [1.0, 1.0]], [[0.1, -0.3], [0.7, 0.2], [-1.1, 0.4]], [2.0, -1.0, 0.5]]",
    );
    assert!(
        rho(d[0], d[1]) <= 1e-15,
        "⟨Jt, w⟩ = {} but ⟨t, Jᵀw⟩ = {}",
        d[0],
        d[1]
    );
}

/// Structured independent variables: `gradient` with respect to a
/// tuple of a Double and a Vector, and to an array of rank 3, in both
/// engines; an Index component carries a placeholder.
#[test]
fn gradients_with_respect_to_tuples_and_rank_three_arrays() {
    let src = "
let tup = fun (a: Double) (v: Vector) -> gradient (fun p -> fst p * vectorSum (snd p)) (a, v)
let cube = fun (t: Array<Array<Vector>>) ->
  gradient (fun u -> matrixSum (build (length u) (fun i -> build (length (u[i])) (fun j -> vectorNormSq (u[i][j]))))) t
let withIndex = fun (x: Double) (k: Index) -> gradient (fun p -> fst p * toDouble (snd p)) (x, k)
";
    let t = "[[[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, -8.0]]]]";
    for engine in ["eval", "native"] {
        let p = temp_file("operators_structured.fsm", src);
        let p = p.to_str().expect("path");
        let out = |entry: &str, input: &str| {
            let o = cli(&[
                "run", p, "--entry", entry, "--input", input, "--engine", engine,
            ]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        };
        assert_eq!(
            out("tup", "[2.0, [1.0, 3.0]]"),
            "[4.0, [2.0, 2.0]]",
            "{engine}"
        );
        assert_eq!(
            out("cube", t),
            "[[[2.0, 4.0], [6.0, 8.0]], [[10.0, 12.0], [14.0, -16.0]]]",
            "{engine}"
        );
        assert_eq!(out("withIndex", "[1.5, 4]"), "[4.0, 0]", "{engine}");
    }
}

/// R-Vjp-Nested: reverse over reverse (through R-Concat, R-Accum and
/// R-AddAt) keeps the cheap-gradient bound —
/// ops(Hessian–vector product by reverse over reverse) / ops(f) does not
/// grow with n (a vjp nested in a vjp keeps sparse cotangents; with dense
/// accumulators it grew linearly, 137 → 1012 from n = 100 to 800).
#[test]
fn r_vjp_nested_keeps_the_cheap_gradient_bound() {
    let src = "
let f = fun (v: Vector) ->
  ifold (fun s i -> s + sin (v[i]) * v[if i + 1 < length v then i + 1 else 0]) 0.0 (length v)
let prim = fun (x: Vector) (v: Vector) -> f x
let hvpRR = fun (x: Vector) (v: Vector) -> snd (vjp (fun y -> gradient f y) x v)
";
    let mut ratios = Vec::new();
    for n in [100, 200, 400, 800] {
        let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
        let v: Vec<f64> = (0..n).map(|i| (i as f64 * 0.11).cos()).collect();
        let input = format!("[{x:?}, {v:?}]");
        ratios.push(ops(src, "hvpRR", &input) as f64 / ops(src, "prim", &input) as f64);
    }
    for r in &ratios {
        assert!(*r < 30.0, "ops ratio {ratios:?}");
        assert!(
            (r - ratios[0]).abs() <= 0.05 * ratios[0],
            "ops ratio grows: {ratios:?}"
        );
    }
}

/// Specialisation is a pass of its own, run once per entry, and only for
/// programs that need it (`--passes`).
#[test]
fn specialisation_runs_once_and_only_when_needed() {
    let passes = |src: &str| -> String {
        let p = temp_file("operators_passes.fsm", src);
        let o = cli(&[
            "--passes",
            "run",
            p.to_str().expect("path"),
            "--input",
            "[0.5]",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    let with = passes("let main = fun (x: Double) -> gradient (fun y -> y * sin y) x\n");
    assert!(
        with.contains("{\"pass\": \"specialise\", \"count\": 1,"),
        "{with}"
    );
    let without = passes("let main = fun (x: Double) -> snd (diff (fun y -> y * sin y) x)\n");
    assert!(!without.contains("specialise"), "{without}");
}

/// The Stalingrad programs with one generic minimiser (the prelude's
/// `argminWith`), in GradBench's four variants each, on native code:
/// particle's w* from w = 0 and the saddle point from (1, 1) are
/// GradBench's values; particle's E(0) and dE/dw(0) (NB2) in forward and
/// reverse mode through the Euler loop whose steps take reverse-mode
/// gradients.
#[test]
fn stalingrad_programs_in_four_variants_give_gradbench_values() {
    let dir = root().join("examples/stalingrad");
    let particle = dir.join("particle.fsm");
    let particle = particle.to_str().expect("path");
    let saddle = dir.join("saddle.fsm");
    let saddle = saddle.to_str().expect("path");
    let numbers = |file: &str, entry: &str, input: &str| -> Vec<f64> {
        let o = cli(&[
            "run", file, "--entry", entry, "--input", input, "--engine", "native",
        ]);
        assert!(
            o.status.success(),
            "{entry}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: Value = serde_json::from_slice::<serde_json::Value>(&o.stdout)
            .map(|j| json_value(&j))
            .expect("JSON");
        let mut out = Vec::new();
        flatten(&v, &mut out);
        out
    };
    for variant in ["ff", "fr", "rf", "rr"] {
        let w = numbers(particle, variant, "[0.0]");
        close(&w, &[0.2071918746486116], 1e-12, variant);
        let s = numbers(saddle, variant, "[[1.0, 1.0]]");
        close(&s, &[8.246324826140356e-06; 4], 1e-12, variant);
    }
    for mode in ["fwd", "rev"] {
        let (e, de) = crate::common::grad_cli(
            particle,
            &[
                "--entry", "energy", "--wrt", "w", "--mode", mode, "--input", "[0.0]",
            ],
        );
        assert!(rho(e, 3.199079002508199) <= 1e-9, "{mode}: E(0) = {e}");
        assert!(
            rho(de[0], -19.404636450028196) <= 1e-9,
            "{mode}: dE/dw(0) = {de:?}"
        );
    }
}

fn json_value(j: &serde_json::Value) -> Value {
    match j {
        serde_json::Value::Array(items) => Value::array(items.iter().map(json_value).collect()),
        serde_json::Value::Number(n) => Value::Double(n.as_f64().expect("a number")),
        other => panic!("unexpected {other}"),
    }
}

/// Structured independent variables at the command line: `--wrt` of a
/// tuple and of an array of rank 3 in reverse mode, and several
/// parameters at once (`--wrt a,v`) in every mode, keyed by name; the
/// forward modes, which need a Double, Vector or Matrix, say so.
#[test]
fn the_command_line_differentiates_with_respect_to_structured_and_several_parameters() {
    let src = "let f = fun (p: Double * Vector) (t: Array<Array<Vector>>) (n: Index) ->
  fst p * vectorSum (snd p) * toDouble n
    + matrixSum (build (length t) (fun i -> build (length (t[i])) (fun j -> vectorNormSq (t[i][j]))))
let g = fun (a: Double) (v: Vector) -> a * vectorSum v + sin a
";
    let p = temp_file("operators_cli_wrt.fsm", src);
    let p = p.to_str().expect("path");
    let input = "[[2.0, [1.0, 3.0]], [[[1.0, 2.0]], [[0.5, -1.0], [3.0, 0.0]]], 2]";
    let grad = |entry: &str, wrt: &str, mode: &str, input: &str| {
        let o = cli(&[
            "grad", p, "--entry", entry, "--wrt", wrt, "--mode", mode, "--input", input,
        ]);
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).trim().to_string(),
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };
    let (ok, out, err) = grad("f", "p,t", "rev", input);
    assert!(ok, "{err}");
    assert_eq!(
        out,
        "{\"value\": 31.25, \"gradient\": {\"p\": [8.0, [4.0, 4.0]], \"t\": [[[2.0, 4.0]], [[1.0, -2.0], [6.0, 0.0]]]}}"
    );
    let want = (0.5f64.cos() + 3.0, 0.5);
    for mode in ["fwd", "fwd-opt", "fwd-vec", "rev", "tape"] {
        let (ok, out, err) = grad("g", "a,v", mode, "[0.5, [1.0, 2.0]]");
        assert!(ok, "{mode}: {err}");
        let j: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        let a = j["gradient"]["a"].as_f64().expect("a");
        let v = &j["gradient"]["v"];
        assert!(rho(a, want.0) <= 1e-15, "{mode}: {out}");
        assert_eq!(v, &serde_json::json!([want.1, want.1]), "{mode}: {out}");
    }
    let (ok, _, err) = grad("f", "p", "fwd", input);
    assert!(!ok);
    assert!(
        err.contains("error[input-parameters]") && err.contains("rev"),
        "{err}"
    );
}

/// A function value that cannot be written out as first-order code — an
/// entry whose parameter is a function, here the prelude's `gradient` — is
/// `unresolved-function` at the definition, never a crash or a silent
/// fallback (S-Residual).
#[test]
fn an_entry_taking_a_function_is_unresolved() {
    let p = temp_file(
        "operators_unresolved.fsm",
        "let main = fun (x: Double) -> x\n",
    );
    let o = cli(&[
        "run",
        p.to_str().expect("path"),
        "--entry",
        "gradient",
        "--input",
        "[1.0]",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("error[unresolved-function]"), "{err}");
    assert!(
        err.contains("<prelude>:"),
        "located at the definition: {err}"
    );
}

/// R-Vjp-Tuple: a gradient with respect to a tuple of arrays keeps a dense
/// accumulator per component, so it costs what the gradient with respect
/// to each array alone costs (ops on the evaluator, within 10%), and gives
/// the same values.
#[test]
fn r_vjp_tuple_keeps_an_accumulator_per_component() {
    let src = "
let f = fun (mu: Matrix) (x: Matrix) ->
  ifold (fun acc i ->
    let xi = x[i]
    let b = build (length mu) (fun c -> vectorNormSq (vectorSub xi (mu[c])))
    acc + vectorSum b) 0.0 (length x)
let single = fun (mu: Matrix) (w: Vector) (x: Matrix) -> gradient (fun a -> f a x) mu
let pair = fun (mu: Matrix) (w: Vector) (x: Matrix) -> fst (gradient (fun p -> f (fst p) x + vectorSum (snd p)) (mu, w))
";
    let rows = |n: usize, d: usize, s: f64| -> String {
        let r: Vec<String> = (0..n)
            .map(|i| {
                let v: Vec<f64> = (0..d).map(|j| ((i * d + j) as f64 * s).sin()).collect();
                format!("{v:?}")
            })
            .collect();
        format!("[{}]", r.join(", "))
    };
    let input = format!("[{}, [1.0, 2.0], {}]", rows(5, 4, 0.3), rows(400, 4, 0.7));
    let (one, two) = (doubles(src, "single", &input), doubles(src, "pair", &input));
    close(&two, &one, 1e-15, "pair against single");
    let (a, b) = (ops(src, "single", &input), ops(src, "pair", &input));
    assert!((b as f64) <= 1.1 * a as f64, "ops: pair {b}, single {a}");
}
