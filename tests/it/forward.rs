//! Forward-mode AD (spec/ad-forward.md; seed 001 §4): every differentiable
//! primitive against its analytic derivative; forward mode against central
//! finite differences on every M̃ prelude function with Double, Vector or
//! Matrix inputs and result, and on bundle adjustment's `project` (Fig. 14);
//! Stalingrad's rearrangement law (seed 000: the tangent of a function that
//! only moves data is that function applied to the tangent); printed
//! values of the FW/NE cases that hold only to a tolerance; a snapshot of
//! the differentiated program; and `fsmooth grad`, `jacobian` and `ad`.
//! The exact rule-by-rule cases are golden files, `tests/golden/ad/`.
//!
//! Tolerances follow shared/notes/test-cases.md §12, in ADBench's
//! ρ(x, y) = |x − y| / max(1, |x| + |y|): 1e-12 for AD against formulas,
//! 1e-6 for AD against central differences.

use std::process::Output;

use fsmooth::eval::{self, Limits, Value};
use fsmooth::gradient::{self, Columns, Mode, Plan, finite_differences};
use fsmooth::ir::Type;
use fsmooth::numeric::rho;
use fsmooth::pipeline::{self, Engine, Session};

use crate::common::{cli, plan, temp_file};

// ---- helpers ---------------------------------------------------------------

/// Loads `src` and runs `entry` on the JSON `input`.
fn eval(src: &str, entry: &str, input: &str) -> (Value, Type) {
    let session = Session::load(src).unwrap_or_else(|d| panic!("{d}\n{src}"));
    let e = session
        .entry(entry)
        .unwrap_or_else(|d| panic!("{d}\n{src}"));
    let args = e.read_input(Some(input)).unwrap_or_else(|d| panic!("{d}"));
    let (v, _) = e
        .run(args, Limits::default(), &mut |_, _| {})
        .unwrap_or_else(|err| panic!("{entry} {input}: {err}"));
    (v, e.result.clone())
}

fn doubles(v: &Value) -> Vec<f64> {
    let mut out = Vec::new();
    eval::flatten(v, &mut out);
    out
}

/// Forward mode's plan (`fwd`) for `entry` w.r.t. `wrt`.
fn derivative(src: &str, entry: &str, wrt: &str) -> Plan {
    plan(src, entry, wrt, Mode::Fwd).unwrap_or_else(|d| panic!("{entry} wrt {wrt}: {d}"))
}

/// Forward mode and central differences for `entry` w.r.t. `wrt` at `input`.
fn both_ways(src: &str, entry: &str, wrt: &str, input: &str) -> (Columns, Columns) {
    let d = derivative(src, entry, wrt);
    let args = d.base.read_input(Some(input)).expect("input");
    let fwd = d
        .columns(args.clone(), Engine::Eval, Limits::default())
        .unwrap_or_else(|e| panic!("{entry} wrt {wrt}: forward: {e}"));
    let fd = finite_differences(&d.base, d.wrt, args, Limits::default())
        .unwrap_or_else(|e| panic!("{entry} wrt {wrt}: fd: {e}"));
    (fwd, fd)
}

/// Asserts that two Jacobians (by columns) have the same shape and agree
/// entry by entry within ρ ≤ `tol`; returns the number of entries.
pub(crate) fn assert_columns_close(what: &str, a: &Columns, b: &Columns, tol: f64) -> usize {
    assert_eq!(
        a.columns.len(),
        b.columns.len(),
        "{what}: number of columns"
    );
    let mut n = 0;
    for (j, (ca, cb)) in a.columns.iter().zip(&b.columns).enumerate() {
        assert_eq!(ca.len(), cb.len(), "{what}: length of column {j}");
        for (i, (x, y)) in ca.iter().zip(cb).enumerate() {
            assert!(
                rho(*x, *y) <= tol,
                "{what}: J[{i}][{j}] = {x} vs {y} (ρ = {:e})",
                rho(*x, *y)
            );
            n += 1;
        }
    }
    n
}

fn assert_rho(what: &str, actual: f64, expected: f64, tol: f64) {
    assert!(
        rho(actual, expected) <= tol,
        "{what}: {actual} vs {expected} (ρ = {:e})",
        rho(actual, expected)
    );
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).expect("stderr is UTF-8")
}

/// Asserts success and one JSON object on stdout; returns stdout.
fn ok_json(o: &Output) -> String {
    let out = stdout(o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "expected success\nstdout: {out}\nstderr: {}",
        stderr(o)
    );
    let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(j.is_object(), "{out}");
    out
}

/// The numbers of the field `key` of the JSON object printed in `text`,
/// parsed by Rust (correctly rounded; serde_json's default float parser
/// may be one ulp off, which would spoil exact comparisons).
fn field_doubles(text: &str, key: &str) -> Vec<f64> {
    let head = format!("\"{key}\": ");
    let start = text
        .find(&head)
        .unwrap_or_else(|| panic!("no {key} in {text}"))
        + head.len();
    let rest = &text[start..];
    let end = if rest.starts_with('[') {
        let mut depth = 0;
        rest.char_indices()
            .find_map(|(i, c)| {
                match c {
                    '[' => depth += 1,
                    ']' => depth -= 1,
                    _ => {}
                }
                (depth == 0).then_some(i + 1)
            })
            .expect("balanced brackets")
    } else {
        rest.find([',', '}']).expect("end of field")
    };
    rest[..end]
        .split(|c: char| c == '[' || c == ']' || c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .map(|t| t.parse().unwrap_or_else(|e| panic!("{e}: {t}")))
        .collect()
}

/// Asserts exit status 1 with `error[code]` in the first line of stderr.
fn fails_with(o: &Output, code: &str) -> String {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "expected exit 1, stderr:\n{err}");
    let first = err.lines().next().unwrap_or("");
    assert!(
        first.contains(&format!(": error[{code}]: ")),
        "expected error[{code}]:\n{err}"
    );
    assert!(o.stdout.is_empty(), "nothing on stdout on error");
    err
}

// ---- primitives against their analytic derivatives -------------------------

/// A binary primitive, its value and its partial derivatives.
type Binary = (&'static str, fn(f64, f64) -> f64, fn(f64, f64) -> [f64; 2]);

const BINARY: [Binary; 5] = [
    ("+", |a, b| a + b, |_, _| [1.0, 1.0]),
    ("-", |a, b| a - b, |_, _| [1.0, -1.0]),
    ("*", |a, b| a * b, |a, b| [b, a]),
    ("/", |a, b| a / b, |a, b| [1.0 / b, -a / (b * b)]),
    ("**", f64::powf, |a, b| {
        [b * a.powf(b - 1.0), a.powf(b) * a.ln()]
    }),
];

/// A unary primitive, its value, its derivative and its domain.
type Unary = (
    &'static str,
    fn(f64) -> f64,
    fn(f64) -> f64,
    fn(f64) -> bool,
);

const UNARY: [Unary; 7] = [
    ("-", |x| -x, |_| -1.0, |_| true),
    ("sin", f64::sin, f64::cos, |_| true),
    ("cos", f64::cos, |x| -x.sin(), |_| true),
    ("tan", f64::tan, |x| 1.0 + x.tan() * x.tan(), |_| true),
    ("log", f64::ln, |x| 1.0 / x, |x| x > 0.0),
    ("exp", f64::exp, f64::exp, |_| true),
    ("sqrt", f64::sqrt, |x| 0.5 / x.sqrt(), |x| x > 0.0),
];

const POINTS: [f64; 8] = [-2.5, -1.0, -0.3, 0.2, 0.7, 1.0, 1.9, 3.25];

#[test]
fn binary_primitives_match_their_partial_derivatives() {
    for (op, value, partials) in BINARY {
        let pow = op == "**";
        // The partials w.r.t. each argument, and d/dx of `x op x`.
        let src = format!(
            "let main = fun (a: Double) (b: Double) -> (deriv (a {op} b) a, deriv (a {op} b) b)\n"
        );
        let same = format!("let main = fun (a: Double) -> deriv (a {op} a) a\n");
        let mut checked = 0;
        for a in POINTS {
            // `**`: a negative base only with an integral exponent, and no
            // partial w.r.t. the exponent there (aᵇ is undefined nearby).
            if !(pow && a < 0.0) {
                let (v, _) = eval(&same, "main", &format!("{a:?}"));
                let xs = doubles(&v);
                let [d1, d2] = partials(a, a);
                assert_rho(
                    &format!("{a:?} {op} {a:?}: value"),
                    xs[0],
                    value(a, a),
                    1e-12,
                );
                assert_rho(&format!("d/dx x {op} x at {a:?}"), xs[1], d1 + d2, 1e-12);
            }
            for b in POINTS {
                if pow && a < 0.0 && b.fract() != 0.0 {
                    continue;
                }
                let (v, _) = eval(&src, "main", &format!("[{a:?}, {b:?}]"));
                let xs = doubles(&v);
                let [da, db] = partials(a, b);
                let what = |k: &str| format!("{a:?} {op} {b:?}: {k}");
                assert_rho(&what("value"), xs[0], value(a, b), 1e-12);
                assert_rho(&what("∂/∂a"), xs[1], da, 1e-12);
                assert_rho(&what("value"), xs[2], value(a, b), 1e-12);
                if !(pow && a < 0.0) {
                    assert_rho(&what("∂/∂b"), xs[3], db, 1e-12);
                }
                checked += 1;
            }
        }
        assert!(checked >= 40, "{op}: only {checked} points");
    }
}

#[test]
fn power_with_negative_base_and_integral_exponent() {
    // x ** n for x < 0: n xⁿ⁻¹, including odd, even, zero and negative n.
    let src = "let main = fun (x: Double) (n: Double) -> snd (deriv (x ** n) x)\n";
    for x in [-3.0f64, -1.5, -0.5] {
        for n in [-2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.0] {
            let (v, _) = eval(src, "main", &format!("[{x:?}, {n:?}]"));
            let expected = if n == 0.0 {
                0.0
            } else {
                n * x.powi(n as i32 - 1)
            };
            assert_rho(&format!("d/dx {x} ** {n}"), doubles(&v)[0], expected, 1e-12);
        }
    }
}

#[test]
fn unary_primitives_match_their_derivatives() {
    for (op, value, deriv, domain) in UNARY {
        let src =
            format!("let main = fun (x: Double) -> (deriv ({op} x) x, deriv ({op} (x * x)) x)\n");
        let points: Vec<f64> = POINTS.iter().copied().filter(|x| domain(*x)).collect();
        assert!(points.len() >= 5, "{op}");
        for x in points {
            let (v, _) = eval(&src, "main", &format!("{x:?}"));
            let xs = doubles(&v);
            let what = |k: &str| format!("{op} {x:?}: {k}");
            assert_rho(&what("value"), xs[0], value(x), 1e-12);
            assert_rho(&what("derivative"), xs[1], deriv(x), 1e-12);
            // The chain rule through x²: f'(x²) · 2x.
            assert_rho(&what("value at x²"), xs[2], value(x * x), 1e-12);
            assert_rho(&what("chain rule"), xs[3], deriv(x * x) * 2.0 * x, 1e-12);
        }
    }
}

// ---- the M̃ library: forward mode = finite differences ----------------------

/// One entry per prelude function with Double/Vector/Matrix inputs and
/// result (`vectorMap`, `matrixMap`, … with a fixed function argument),
/// and the arguments to differentiate at: nowhere near a branch point of
/// `max`, `min`, `abs`, `vectorMax`, `vectorMin`.
pub(crate) const LIBRARY: &str = "
let e_square = fun (x: Double) -> square x
let e_max = fun (a: Double) (b: Double) -> max a b
let e_min = fun (a: Double) (b: Double) -> min a b
let e_abs = fun (x: Double) -> abs x
let e_tanh = fun (x: Double) -> tanh x
let e_vectorFill = fun (e: Double) -> vectorFill 3 e
let e_vectorMap = fun (v: Vector) -> vectorMap v (fun a -> sin a * a)
let e_vectorMap2 = fun (v1: Vector) (v2: Vector) -> vectorMap2 v1 v2 (fun a b -> a * exp b)
let e_vectorAdd = fun (v1: Vector) (v2: Vector) -> vectorAdd v1 v2
let e_vectorSub = fun (v1: Vector) (v2: Vector) -> vectorSub v1 v2
let e_vectorEMul = fun (v1: Vector) (v2: Vector) -> vectorEMul v1 v2
let e_vectorEDiv = fun (v1: Vector) (v2: Vector) -> vectorEDiv v1 v2
let e_vectorSMul = fun (v: Vector) (s: Double) -> vectorSMul v s
let e_vectorNeg = fun (v: Vector) -> vectorNeg v
let e_vectorSum = fun (v: Vector) -> vectorSum v
let e_vectorDot = fun (v1: Vector) (v2: Vector) -> vectorDot v1 v2
let e_vectorNorm = fun (v: Vector) -> vectorNorm v
let e_vectorNormSq = fun (v: Vector) -> vectorNormSq v
let e_vectorMax = fun (v: Vector) -> vectorMax v
let e_vectorMin = fun (v: Vector) -> vectorMin v
let e_vectorLogSumExp = fun (v: Vector) -> vectorLogSumExp v
let e_vectorSlice = fun (v: Vector) -> vectorSlice v 1 2
let e_vectorConcat = fun (v1: Vector) (v2: Vector) -> vectorConcat v1 v2
let e_vectorCross = fun (v1: Vector) (v2: Vector) -> vectorCross v1 v2
let e_vectorToMatrix = fun (v: Vector) -> vectorToMatrix v
let e_matrixMap = fun (m: Matrix) -> matrixMap m (fun r -> vectorMap r exp)
let e_matrixMap2 = fun (m1: Matrix) (m2: Matrix) -> matrixMap2 m1 m2 vectorEMul
let e_matrixAdd = fun (m1: Matrix) (m2: Matrix) -> matrixAdd m1 m2
let e_matrixSub = fun (m1: Matrix) (m2: Matrix) -> matrixSub m1 m2
let e_matrixSMul = fun (m: Matrix) (s: Double) -> matrixSMul m s
let e_matrixTranspose = fun (m: Matrix) -> matrixTranspose m
let e_matrixMul = fun (m1: Matrix) (m2: Matrix) -> matrixMul m1 m2
let e_matrixMult = fun (m1: Matrix) (m2: Matrix) -> matrixMult m1 m2
let e_matrixVectorMul = fun (m: Matrix) (v: Vector) -> matrixVectorMul m v
let e_matrixTrace = fun (m: Matrix) -> matrixTrace m
let e_matrixSum = fun (m: Matrix) -> matrixSum m
let e_vectorOutProd = fun (v1: Vector) (v2: Vector) -> vectorOutProd v1 v2
";

const V: &str = "[0.3, -1.2, 2.5]";
const W: &str = "[1.7, 0.4, -0.9]";
const M23: &str = "[[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]";
const N23: &str = "[[-0.3, 0.8, 1.1], [0.6, -1.4, 0.2]]";
const M32: &str = "[[0.9, -0.2], [0.4, 1.3], [-1.1, 0.7]]";
const M33: &str = "[[0.9, -0.2, 0.5], [0.4, 1.3, -0.6], [-1.1, 0.7, 2.2]]";

/// (entry, arguments as a JSON array).
pub(crate) fn library_cases() -> Vec<(&'static str, String)> {
    let two = |a: &str, b: &str| format!("[{a}, {b}]");
    vec![
        ("square", "[-1.3]".into()),
        ("max", "[0.7, -0.4]".into()),
        ("max", "[-0.7, 0.4]".into()),
        ("min", "[0.7, -0.4]".into()),
        ("min", "[-0.7, 0.4]".into()),
        ("abs", "[-1.3]".into()),
        ("abs", "[0.8]".into()),
        ("tanh", "[-0.9]".into()),
        ("tanh", "[1.7]".into()),
        ("vectorFill", "[-0.6]".into()),
        ("vectorMap", V.into()),
        ("vectorMap2", two(V, W)),
        ("vectorAdd", two(V, W)),
        ("vectorSub", two(V, W)),
        ("vectorEMul", two(V, W)),
        ("vectorEDiv", two(V, W)),
        ("vectorSMul", two(V, "-1.7")),
        ("vectorNeg", V.into()),
        ("vectorSum", V.into()),
        ("vectorDot", two(V, W)),
        ("vectorNorm", V.into()),
        ("vectorNormSq", V.into()),
        ("vectorMax", V.into()),
        ("vectorMin", V.into()),
        ("vectorLogSumExp", V.into()),
        ("vectorSlice", "[0.3, -1.2, 2.5, 0.8]".into()),
        ("vectorConcat", two(V, "[0.6, -0.1]")),
        ("vectorCross", two(V, W)),
        ("vectorToMatrix", V.into()),
        ("matrixMap", M23.into()),
        ("matrixMap2", two(M23, N23)),
        ("matrixAdd", two(M23, N23)),
        ("matrixSub", two(M23, N23)),
        ("matrixSMul", two(M23, "0.35")),
        ("matrixTranspose", M23.into()),
        ("matrixMul", two(M23, M32)),
        ("matrixMult", two(M32, M23)),
        ("matrixVectorMul", two(M23, V)),
        ("matrixTrace", M33.into()),
        ("matrixSum", M23.into()),
        ("vectorOutProd", two(V, "[0.6, -0.1]")),
    ]
}

/// Prelude definitions left out of the comparison, and why.
const NOT_DIFFERENTIABLE: [(&str, &str); 24] = [
    ("gradient", "takes a function (tests/it/operators.rs)"),
    ("derivative", "takes a function (tests/it/operators.rs)"),
    ("gradientFwd", "takes a function (tests/it/operators.rs)"),
    ("hessianVector", "takes a function (tests/it/operators.rs)"),
    ("jacobianFwd", "takes a function (tests/it/operators.rs)"),
    ("jacobianRev", "takes a function (tests/it/operators.rs)"),
    ("argminWith", "takes a function (tests/it/operators.rs)"),
    ("argmaxWith", "takes a function (tests/it/operators.rs)"),
    ("maxWith", "takes a function (tests/it/operators.rs)"),
    ("argmin", "takes a function (tests/it/operators.rs)"),
    ("argmax", "takes a function (tests/it/operators.rs)"),
    ("pi", "no input"),
    ("vectorRange", "Index input"),
    ("vectorZeros", "Index input"),
    ("vectorOnes", "Index input"),
    ("vectorHot", "Index inputs"),
    ("vectorZip", "pair result (rearrangement law below)"),
    ("matrixRows", "Index result"),
    ("matrixCols", "Index result"),
    ("matrixZeros", "Index inputs"),
    ("matrixOnes", "Index inputs"),
    ("matrixEye", "Index input"),
    ("matrixHot", "Index inputs"),
    ("matrixZip", "pair result (rearrangement law below)"),
];

#[test]
fn library_cases_cover_the_whole_prelude() {
    let prog = pipeline::parse("").expect("the prelude parses");
    let cases = library_cases();
    for d in prog.defs.iter().filter(|d| d.prelude) {
        let name = &*d.name;
        let covered = cases.iter().any(|(e, _)| *e == name);
        let excluded = NOT_DIFFERENTIABLE.iter().any(|(e, _)| *e == name);
        assert!(
            covered != excluded,
            "prelude `{name}`: add a forward-vs-fd case or exclude it (covered {covered}, excluded {excluded})"
        );
        assert_eq!(
            covered,
            LIBRARY.contains(&format!("let e_{name} = ")),
            "{name}: an entry in LIBRARY"
        );
    }
}

#[test]
fn forward_mode_matches_finite_differences_on_the_prelude() {
    let mut entries = 0;
    for (name, input) in library_cases() {
        let entry = format!("e_{name}");
        let session = Session::load(LIBRARY).expect("LIBRARY loads");
        let base = session.entry(&entry).expect("entry");
        let params: Vec<_> = base.params.clone();
        assert!(!params.is_empty());
        for (p, t) in &params {
            assert!(
                matches!(
                    t.to_string().as_str(),
                    "Double" | "Array<Double>" | "Array<Array<Double>>"
                ),
                "{entry}: parameter {p}: {t}"
            );
            let (fwd, fd) = both_ways(LIBRARY, &entry, p, &input);
            // The primal value is the function's own value.
            assert!(
                fwd.value.max_rho(&fd.value).is_some_and(|r| r <= 1e-12),
                "{entry}: value {} vs {}",
                fwd.value,
                fd.value
            );
            let n = assert_columns_close(&format!("{entry} {input} wrt {p}"), &fwd, &fd, 1e-6);
            let (arg_len, res_len) = {
                let args = base.read_input(Some(&input)).expect("input");
                let k = params.iter().position(|(q, _)| q == p).expect("param");
                (doubles(&args[k]).len(), doubles(&fd.value).len())
            };
            assert_eq!(n, arg_len * res_len, "{entry} wrt {p}: Jacobian size");
            entries += n;
        }
    }
    assert!(entries > 300, "only {entries} Jacobian entries compared");
}

#[test]
fn gradient_and_jacobian_have_the_documented_shapes() {
    // ∂(Σ m)/∂m is all ones, shaped like m; the Jacobian of m ↦ mᵀ is a
    // permutation matrix over the row-major elements.
    let (fwd, _) = both_ways(LIBRARY, "e_matrixSum", "m", M23);
    let like = base_args(LIBRARY, "e_matrixSum", M23).remove(0);
    assert_eq!(
        fwd.gradient(&like).to_string(),
        "[[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]"
    );
    let (fwd, _) = both_ways(LIBRARY, "e_matrixTranspose", "m", M23);
    let j = fwd.jacobian();
    let rows: Vec<Vec<f64>> = match &j {
        Value::Array(rs) => rs.iter().map(doubles).collect(),
        _ => panic!("a matrix"),
    };
    assert_eq!(rows.len(), 6);
    for (i, r) in rows.iter().enumerate() {
        // Output element i = (c, r') of the 3×2 transpose reads input
        // (r', c) = element r' * 3 + c.
        let (c, rr) = (i / 2, i % 2);
        let mut expected = vec![0.0; 6];
        expected[rr * 3 + c] = 1.0;
        assert_eq!(r, &expected, "row {i} of {j}");
    }
}

fn base_args(src: &str, entry: &str, input: &str) -> Vec<Value> {
    let e = Session::load(src)
        .expect("loads")
        .entry(entry)
        .expect("entry");
    e.read_input(Some(input)).expect("input")
}

// ---- bundle adjustment: the Jacobian of `project` --------------------------

/// Seed 001 Fig. 14, as in tests/golden/paper/fig14_project.fsm.
const PROJECT: &str = "
let distort = fun (radical: Vector) (proj: Vector) ->
  let rsq = vectorNormSq proj
  let L = 1.0 + radical.[0] * rsq + radical.[1] * rsq * rsq
  vectorSMul proj L
let rodrigues = fun (rotation: Vector) (x: Vector) ->
  let sqtheta = vectorNormSq rotation
  let theta = sqrt sqtheta
  let thetaInv = 1.0 / theta
  let w = vectorSMul rotation thetaInv
  let wCrossX = vectorCross w x
  let tmp = (vectorDot w x) * (1.0 - (cos theta))
  let v1 = vectorSMul x (cos theta)
  let v2 = vectorSMul wCrossX (sin theta)
  vectorAdd (vectorAdd v1 v2) (vectorSMul w tmp)
let project = fun (cam: Vector) (x: Vector) ->
  let Xcam = rodrigues (vectorSlice cam 0 2) (
    vectorSub x (vectorSlice cam 3 5) )
  let distorted = distort (vectorSlice cam 9 10) (
    vectorSMul (vectorSlice Xcam 0 1) (1.0/Xcam.[2]) )
  vectorAdd (vectorSlice cam 7 8) (
    vectorSMul distorted cam.[6] )
";

const CAMERAS: [(&str, &str); 3] = [
    (
        "[0.1, -0.2, 0.3, 0.5, -0.4, -3.0, 2.0, 0.25, -0.125, 0.01, -0.002]",
        "[0.7, 1.1, 2.2]",
    ),
    (
        "[-0.7, 0.35, 1.2, 0.1, 0.2, -5.0, 1.3, -0.5, 0.75, -0.03, 0.004]",
        "[-1.5, 0.4, 1.0]",
    ),
    (
        "[1.9, 0.8, -0.4, -2.0, 1.0, -8.0, 0.9, 0.0, 0.0, 0.2, -0.05]",
        "[2.5, -3.0, 0.5]",
    ),
];

#[test]
fn project_jacobian_matches_finite_differences() {
    for (cam, x) in CAMERAS {
        let input = format!("{{\"cam\": {cam}, \"x\": {x}}}");
        let (fwd, fd) = both_ways(PROJECT, "project", "cam", &input);
        assert_eq!(fwd.columns.len(), 11, "one column per camera parameter");
        assert!(fwd.columns.iter().all(|c| c.len() == 2));
        assert_columns_close(&format!("project at {cam}"), &fwd, &fd, 1e-6);
        // ∂/∂x0 and ∂/∂y0 (the principal point) are the unit vectors.
        assert_eq!(fwd.columns[7], vec![1.0, 0.0]);
        assert_eq!(fwd.columns[8], vec![0.0, 1.0]);
        // With respect to the point, too.
        let (fwd, fd) = both_ways(PROJECT, "project", "x", &input);
        assert_eq!(fwd.columns.len(), 3);
        assert_columns_close(&format!("project at {cam} wrt x"), &fwd, &fd, 1e-6);
    }
}

// ---- Stalingrad's rearrangement law (seed 000) -----------------------------

/// Functions that only rearrange data: each takes a Vector or a Matrix.
/// (name, definition, parameter type, argument, seed direction).
const REARRANGE: [(&str, &str, &str, &str, &str); 9] = [
    (
        "transpose",
        "fun (m: Matrix) -> matrixTranspose m",
        "Matrix",
        M23,
        N23,
    ),
    (
        "slice",
        "fun (v: Vector) -> vectorSlice v 1 3",
        "Vector",
        "[0.3, -1.2, 2.5, 0.8, 4.0]",
        "[1.5, -0.25, 3.0, -7.0, 0.125]",
    ),
    (
        "reverse",
        "fun (v: Vector) -> build (length v) (fun i -> v[length v - 1 - i])",
        "Vector",
        V,
        W,
    ),
    (
        "zip",
        "fun (v: Vector) -> vectorZip (vectorSlice v 0 1) (vectorSlice v 2 3)",
        "Vector",
        "[0.3, -1.2, 2.5, 0.8]",
        "[1.5, -0.25, 3.0, -7.0]",
    ),
    (
        "unzip",
        "fun (v: Vector) -> let z = vectorZip (vectorSlice v 0 1) (build 2 (fun i -> v[2 - i])) in (vectorMap z snd, vectorMap z fst)",
        "Vector",
        V,
        W,
    ),
    (
        "pairs",
        "fun (v: Vector) -> ((v[2], v), (v[0], [v[1], v[1]]))",
        "Vector",
        V,
        W,
    ),
    (
        "toMatrix",
        "fun (v: Vector) -> vectorToMatrix v",
        "Vector",
        V,
        W,
    ),
    (
        "matrixZipRows",
        "fun (m: Matrix) -> matrixZip m (build (length m) (fun i -> m[length m - 1 - i]))",
        "Matrix",
        M23,
        N23,
    ),
    (
        "concatRows",
        "fun (m: Matrix) -> vectorConcat m[1] (vectorConcat m[0] m[1])",
        "Matrix",
        M23,
        N23,
    ),
];

#[test]
fn tangent_of_a_rearrangement_is_the_rearranged_tangent() {
    for (name, def, ty, x, dx) in REARRANGE {
        // x + t·ẋ, differentiated at t = 0 along t: the tangent is exactly
        // f(ẋ) (every tangent element is 1 · ẋᵢ, no rounding).
        let shifted = match ty {
            "Vector" => "vectorAdd x (vectorSMul dx t)",
            _ => "matrixAdd x (matrixSMul dx t)",
        };
        let src = format!(
            "let f = {def}\nlet dual = fun (x: {ty}) (dx: {ty}) (t: Double) -> deriv (f ({shifted})) t\nlet plain = fun (x: {ty}) -> f x\n"
        );
        let (d, _) = eval(&src, "dual", &format!("[{x}, {dx}, 0.0]"));
        let (fx, rt) = eval(&src, "plain", &format!("{{\"x\": {x}}}"));
        let (fdx, _) = eval(&src, "plain", &format!("{{\"x\": {dx}}}"));
        let tangent = gradient::tangent(&d, &rt);
        let primal = gradient::primal(&d, &rt);
        assert!(
            tangent.same(&fdx),
            "{name}: tangent {tangent}, f(dx) = {fdx}"
        );
        assert!(primal.same(&fx), "{name}: primal {primal}, f(x) = {fx}");

        // Column by column (one-hot seeds, D-Deriv-Vector/Matrix): column j
        // of the Jacobian is f(eⱼ).
        let d = derivative(&src, "plain", "x");
        let args = d
            .base
            .read_input(Some(&format!("{{\"x\": {x}}}")))
            .expect("input");
        let cols = d
            .columns(args.clone(), Engine::Eval, Limits::default())
            .expect("forward");
        let n = doubles(&args[0]).len();
        assert_eq!(cols.columns.len(), n, "{name}");
        for (j, col) in cols.columns.iter().enumerate() {
            let mut hot = (0..n).map(|k| if k == j { 1.0 } else { 0.0 });
            let e_j = eval::unflatten(&args[0], &mut hot);
            let (fe, _) = eval(&src, "plain", &format!("{{\"x\": {e_j}}}"));
            assert_eq!(col, &doubles(&fe), "{name}: column {j}");
        }
    }
}

// ---- printed values that hold to a tolerance -------------------------------

#[test]
fn printed_values_within_tolerance() {
    let src = "
let fw10h = fun t -> cos t * cos t * cos t * sin t * sin t
let fw10 = fun (t: Double) -> snd (diff (fun t2 -> snd (diff (fun t1 -> snd (diff fw10h t1)) t2)) t)
let rv2 = fun (x: Double) -> snd (diff (fun y -> let e = exp y in sin e * cos e) x)
let lighthouse = fun (p: Vector) ->
  let nu = p[0]
  let gamma = p[1]
  let omega = p[2]
  let t = p[3]
  let tw = tan (omega * t)
  let y1 = nu * tw / (gamma - tw)
  [y1, gamma * y1]
let lighthouseJ = fun (p: Vector) ->
  matrixTranspose (matrixMap (jacob lighthouse p) (fun c -> vectorMap c snd))
let ne4f = fun (x: Vector) -> exp (0.5 * vectorNormSq x)
let ne4hvp = fun (x: Vector) (v: Vector) ->
  let t = 0.0
  vectorMap (deriv (vectorMap (grad ne4f (vectorAdd x (vectorSMul v t))) snd) t) snd
";
    // FW10 (num-dual documentation example).
    let (v, _) = eval(src, "fw10", "1.0");
    assert_rho("FW10", doubles(&v)[0], 7.358639755305733, 1e-12);
    // RV2: (sin(eˣ) cos(eˣ))' at 0 = cos 2.
    let (v, _) = eval(src, "rv2", "0.0");
    assert_rho("RV2", doubles(&v)[0], -0.4161468365471424, 1e-12);
    // FW8: Griewank's lighthouse, the 2×4 Jacobian by 4 jvps.
    let (v, _) = eval(src, "lighthouseJ", "[2.0, 1.5, 0.4, 2.1]");
    let expected = [
        2.902513633461043,
        -15.102798701184362,
        95.71780341846966,
        18.23196255589898,
        4.353770450191565,
        -16.849170784854458,
        143.57670512770449,
        27.347943833848472,
    ];
    for (k, (a, e)) in doubles(&v).iter().zip(expected).enumerate() {
        assert_rho(&format!("FW8 J[{}][{}]", k / 4, k % 4), *a, e, 1e-12);
    }
    // NE4: H·v of exp(½|x|²), forward over forward.
    let (v, _) = eval(src, "ne4hvp", "[[0.1, 0.2, 0.3], [0.2, 0.3, 0.4]]");
    let expected = [0.23595179987592768, 0.3646527816264336, 0.49335376337693965];
    let got = doubles(&v);
    assert_eq!(got.len(), 3);
    for (k, (a, e)) in got.iter().zip(expected).enumerate() {
        assert_rho(&format!("NE4 (Hv)[{k}]"), *a, e, 1e-12);
    }
}

// ---- the shape of the transformation ---------------------------------------

/// A small program touching let, if, a lambda, build, ifold, a pair, an
/// index, a comparison, `toDouble` and a prelude function.
const SHAPE: &str = "let main = fun (x: Double) (v: Vector) ->
  let s = ifold (fun acc i -> acc + v[i] * x) 0.0 (length v)
  let w = build 2 (fun i -> sin (x * toDouble i))
  let p = (s / x, vectorSum w)
  if x > 0.0 then fst p * snd p else exp (-x)
";

#[test]
fn differentiated_program_shape() {
    let path = temp_file("forward_shape.fsm", SHAPE);
    let path = path.to_str().expect("UTF-8 path");
    let o = cli(&["ad", path, "--entry", "main", "--wrt", "x"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let printed = stdout(&o);
    // The CLI prints exactly the library's wrapper program.
    let d = derivative(SHAPE, "main", "x");
    let wrapper = d.program().expect("the wrapper");
    assert_eq!(printed, fsmooth::syntax::print_program(&wrapper.program));
    insta::assert_snapshot!("ad_shape", printed);
    // And it computes the derivative.
    for x in ["0.5", "-0.5"] {
        let input = format!("[{x}, [1.0, -2.0, 3.0]]");
        let (fwd, fd) = both_ways(SHAPE, "main", "x", &input);
        assert_columns_close(&format!("shape program at {x}"), &fwd, &fd, 1e-6);
    }
}

// ---- the command line ------------------------------------------------------

const DOT: &str = "let dot = fun (v1: Vector) (v2: Vector) -> vectorDot v1 v2
let scaled = fun (v: Vector) (s: Double) -> vectorSMul v s
let flags = fun (v: Vector) (n: Index) (b: Bool) -> if b then vectorSum v * toDouble n else 0.0
let higher = fun (g: Double -> Double) (x: Double) -> deriv (g x) x
let main = higher (fun y -> y * y) 2.0
";

fn dot_file() -> String {
    temp_file("forward_dot.fsm", DOT)
        .to_str()
        .expect("UTF-8 path")
        .to_string()
}

#[test]
fn cli_grad_of_dot_is_the_other_vector() {
    let p = dot_file();
    let v2 = [4.5, -1.25, 0.1, 3.0];
    let input = format!("{{\"v1\": [0.3, -2.0, 1.7, 5.5], \"v2\": {v2:?}}}");
    let grad = |mode: Option<&str>| {
        let mut args = vec![
            "grad", &p, "--entry", "dot", "--wrt", "v1", "--input", &input,
        ];
        if let Some(m) = mode {
            args.extend(["--mode", m]);
        }
        ok_json(&cli(&args))
    };
    // Exactly v2 in forward mode (the default, and spelt out).
    let fwd = grad(None);
    assert_eq!(field_doubles(&fwd, "gradient"), v2.to_vec(), "{fwd}");
    assert_eq!(fwd, grad(Some("fwd")));
    let value = 0.3 * 4.5 + -2.0 * -1.25 + 1.7 * 0.1 + 5.5 * 3.0;
    assert_rho("value", field_doubles(&fwd, "value")[0], value, 1e-15);
    // Within 1e-6 by finite differences.
    let fd = grad(Some("fd"));
    assert_eq!(field_doubles(&fd, "value"), field_doubles(&fwd, "value"));
    let g = field_doubles(&fd, "gradient");
    assert_eq!(g.len(), 4);
    for (a, e) in g.iter().zip(v2) {
        assert_rho("fd gradient", *a, e, 1e-6);
    }
}

#[test]
fn cli_jacobian_of_project_matches_finite_differences() {
    let p = temp_file("forward_project.fsm", PROJECT);
    let p = p.to_str().expect("UTF-8 path");
    let (cam, x) = CAMERAS[0];
    let input = format!("{{\"cam\": {cam}, \"x\": {x}}}");
    let run = |mode: &str| {
        ok_json(&cli(&[
            "jacobian", p, "--entry", "project", "--wrt", "cam", "--mode", mode, "--input", &input,
        ]))
    };
    let (fwd, fd) = (run("fwd"), run("fd"));
    // The value of tests/golden/paper/fig14_project.fsm, in both modes.
    let value = vec![-0.21283695632113153, 0.18982342172738026];
    assert_eq!(field_doubles(&fwd, "value"), value, "{fwd}");
    assert_eq!(field_doubles(&fd, "value"), value, "{fd}");
    let j: serde_json::Value = serde_json::from_str(&fwd).expect("JSON");
    let rows = j["jacobian"].as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r.as_array().map(Vec::len) == Some(11)));
    let (a, b) = (
        field_doubles(&fwd, "jacobian"),
        field_doubles(&fd, "jacobian"),
    );
    assert_eq!(a.len(), 22);
    assert_eq!(b.len(), 22);
    for (k, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_rho(&format!("J[{}][{}]", k / 11, k % 11), *x, *y, 1e-6);
    }
}

#[test]
fn cli_stats_reports_steps_and_ops() {
    let p = dot_file();
    let input = "[[1.0, 2.0], [3.0, 4.0]]";
    for mode in ["fwd", "fd"] {
        let o = cli(&[
            "grad", &p, "--entry", "dot", "--wrt", "v2", "--mode", mode, "--input", input,
            "--stats",
        ]);
        let out = ok_json(&o);
        let g = field_doubles(&out, "gradient");
        assert_eq!(g.len(), 2);
        assert_rho("∂/∂v2[0]", g[0], 1.0, 1e-6);
        assert_rho("∂/∂v2[1]", g[1], 2.0, 1e-6);
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        let stats: serde_json::Value =
            serde_json::from_str(err.trim()).unwrap_or_else(|e| panic!("{e}: {err}"));
        for k in ["steps", "ops"] {
            assert!(
                stats[k].as_u64().is_some_and(|n| n > 0),
                "{mode}: {k} in {err}"
            );
        }
        assert!(stats["time_ms"].as_f64().is_some(), "{err}");
    }
    // Without --stats, nothing on stderr.
    let o = cli(&[
        "grad", &p, "--entry", "dot", "--wrt", "v2", "--input", input,
    ]);
    ok_json(&o);
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
}

#[test]
fn cli_errors() {
    let p = dot_file();
    // `grad` of a Vector-valued entry.
    let err = fails_with(
        &cli(&[
            "grad",
            &p,
            "--entry",
            "scaled",
            "--wrt",
            "s",
            "--input",
            "[[1.0], 2.0]",
        ]),
        "not-scalar",
    );
    assert!(err.contains("jacobian"), "{err}");
    // …which `jacobian` accepts.
    let j = ok_json(&cli(&[
        "jacobian",
        &p,
        "--entry",
        "scaled",
        "--wrt",
        "s",
        "--input",
        "[[1.0, -3.0], 2.0]",
    ]));
    assert_eq!(field_doubles(&j, "jacobian"), vec![1.0, -3.0]);
    // An unknown independent variable.
    let err = fails_with(
        &cli(&[
            "grad",
            &p,
            "--entry",
            "dot",
            "--wrt",
            "v3",
            "--input",
            "[[1.0], [2.0]]",
        ]),
        "input-parameters",
    );
    assert!(err.contains("`v3`"), "{err}");
    // Index and Bool independent variables.
    for (wrt, ty) in [("n", "Index"), ("b", "Bool")] {
        let err = fails_with(
            &cli(&[
                "grad",
                &p,
                "--entry",
                "flags",
                "--wrt",
                wrt,
                "--input",
                "[[1.0], 2, true]",
            ]),
            "input-parameters",
        );
        assert!(err.contains(ty), "{err}");
    }
    // `deriv` whose free variable is a lambda-bound function: S-App
    // (specialisation, spec/ad-forward.md §10.2) resolves it; d(x²) at 2.
    let o = cli(&["run", &p]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "[4.0, 4.0]\n",
        "{}",
        stderr(&o)
    );
}
