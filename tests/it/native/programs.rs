//! Whole programs natively, against the evaluator: every entry of
//! `examples/` on sampled arguments, the `// run:` lines of the golden
//! files, one call of every prelude function, arrays of pairs, of arrays
//! and of Bools (Note [Native layout]), and `run`/`grad --engine native`
//! from the command line.

use fsmooth::diagnostic::Diagnose;
use fsmooth::eval::Value;
use fsmooth::ir::Type;
use fsmooth::pipeline::{self, Session};

use super::{Outcome, compare, compare_src, compile, files_under, native_error, vector};
use crate::common;

/// Deterministic arguments of type `t`: small positive sizes, arrays of
/// three elements, doubles in (−2, 2).
fn sample(t: &Type, seed: &mut u64) -> Value {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let r = (*seed >> 33) as f64 / (1u64 << 31) as f64;
    match t {
        Type::Double => Value::Double(4.0 * r - 2.0),
        Type::Index => Value::Index(1 + (*seed >> 40) as i64 % 3),
        Type::Bool => Value::Bool(r < 0.5),
        Type::Array(e) => Value::array((0..3).map(|_| sample(e, seed)).collect()),
        Type::Pair(a, b) => Value::pair(sample(a, seed), sample(b, seed)),
        Type::Fun(..) => unreachable!("entries take data"),
    }
}

/// Every user definition of every example that is an entry (data in,
/// data out) runs natively on sampled arguments, with the evaluator's
/// result.
#[test]
fn native_examples_agree_with_the_evaluator() {
    let mut files = Vec::new();
    files_under(&common::root().join("examples"), "fsm", &mut files);
    let (mut values, mut entries) = (0, 0);
    for f in &files {
        let src = std::fs::read_to_string(f).expect("example readable");
        let loaded = Session::load(&src).expect("examples load");
        let names: Vec<String> = loaded
            .program()
            .defs
            .iter()
            .filter(|d| !d.prelude)
            .map(|d| d.name.to_string())
            .collect();
        for name in names {
            let Ok(e) = loaded.entry(&name) else {
                continue; // higher-order or polymorphic: not an entry
            };
            entries += 1;
            let n = compile(&e);
            let mut seed = 7;
            for _ in 0..3 {
                let args: Vec<Value> = e.params.iter().map(|(_, t)| sample(t, &mut seed)).collect();
                match compare(&e, &n, &args) {
                    Ok(Outcome::Value) => values += 1,
                    Ok(_) => {}
                    Err(m) => panic!("{} `{name}`: {m}", f.display()),
                }
            }
        }
    }
    assert!(entries >= 15, "only {entries} entries in examples/");
    assert!(values >= 30, "only {values} values compared");
}

/// `// run: EXPR => …` lines of the golden files: EXPR compiled natively
/// gives the evaluator's value or ⊥.
#[test]
fn native_golden_run_lines_agree_with_the_evaluator() {
    let mut files = Vec::new();
    files_under(&common::root().join("tests/golden"), "fsm", &mut files);
    let (mut values, mut bottoms) = (0, 0);
    for f in &files {
        let src = std::fs::read_to_string(f).expect("golden readable");
        if Session::load(&src).is_err() {
            continue; // the error goldens
        }
        for line in src.lines() {
            let Some((expr, _)) = line
                .strip_prefix("// run:")
                .and_then(|r| r.rsplit_once(" => "))
            else {
                continue;
            };
            let full = format!("{src}\nlet golden'expr = {}\n", expr.trim());
            let Ok(e) = Session::load(&full).and_then(|l| l.entry("golden'expr")) else {
                continue; // golden lines that fail to type-check
            };
            let n = compile(&e);
            match compare(&e, &n, &[]) {
                Ok(Outcome::Value) => values += 1,
                Ok(Outcome::Bottom) => bottoms += 1,
                Ok(Outcome::Skipped) => {}
                Err(m) => panic!("{}: `{}`: {m}", f.display(), expr.trim()),
            }
        }
    }
    assert!(values >= 100, "only {values} golden values compared");
    assert!(bottoms >= 5, "only {bottoms} golden ⊥ compared");
}

/// One call of every prelude function, at the types the benchmarks use.
const PRELUDE_CALLS: &[&str] = &[
    "pi",
    "square 1.5",
    "max 2.0 3.0",
    "min 2 3",
    "abs (0.0 - 2.5)",
    "tanh (0.0 - 0.75)",
    "vectorRange 4",
    "vectorFill 3 2.5",
    "vectorAdd (vectorZeros 3) v",
    "vectorAdd (vectorOnes 3) v",
    "vectorEMul (vectorHot 3 1) v",
    "vectorMap v (fun a -> a * a)",
    "vectorMap2 v w (fun a b -> a - b)",
    "vectorZip v w",
    "vectorAdd v w",
    "vectorSub v w",
    "vectorEMul v w",
    "vectorEDiv v w",
    "vectorSMul v 3.0",
    "vectorNeg v",
    "vectorSum v",
    "vectorDot v w",
    "vectorNorm v",
    "vectorNormSq v",
    "vectorMax v",
    "vectorMin v",
    "vectorLogSumExp v",
    "vectorSlice v 1 2",
    "vectorConcat v w",
    "vectorCross v w",
    "vectorToMatrix v",
    "matrixRows m",
    "matrixCols m",
    "matrixAdd (matrixZeros 2 3) m",
    "matrixAdd (matrixOnes 2 3) m",
    "matrixMul (matrixEye 2) m",
    "matrixAdd (matrixHot 2 3 1 2) m",
    "matrixMap m vectorNeg",
    "matrixMap2 m m vectorAdd",
    "matrixZip m m",
    "matrixAdd m m",
    "matrixSub m m",
    "matrixSMul m 2.0",
    "matrixTranspose m",
    "matrixMul m (matrixTranspose m)",
    "matrixMult m (matrixTranspose m)",
    "matrixVectorMul m w",
    "matrixTrace (matrixMul m (matrixTranspose m))",
    "matrixSum m",
    "vectorOutProd v w",
    "gradient (fun x -> vectorDot x x * x[0]) v",
    "derivative (fun a -> vectorSMul w (sin a)) 1.5",
    "gradientFwd (fun x -> vectorDot x w * x[1]) v",
    "hessianVector (fun x -> vectorDot x x * x[0]) v w",
    "jacobianFwd (fun x -> vectorEMul x (vectorMap x sin)) v",
    "jacobianRev (fun x -> matrixVectorMul m (vectorMap x exp)) v",
    "argminWith gradient (fun x -> vectorNormSq (vectorSub x w)) v",
    "argmaxWith gradientFwd (fun x -> 0.0 - vectorNormSq (vectorSub x w)) v",
    "maxWith gradient (fun x -> 0.0 - vectorNormSq (vectorSub x v)) w",
    "argmin (fun x -> vectorNormSq x) w",
    "argmax (fun x -> 0.0 - vectorNormSq x) w",
];

#[test]
fn native_prelude_functions_agree_with_the_evaluator() {
    // Every prelude definition is called at least once above.
    let prelude = pipeline::parse("").expect("prelude parses");
    for d in &prelude.defs {
        assert!(
            PRELUDE_CALLS.iter().any(|c| c
                .split(|ch: char| !ch.is_alphanumeric())
                .any(|w| w == &*d.name)),
            "prelude function `{}` has no native test call",
            d.name
        );
    }
    let mut values = 0;
    for call in PRELUDE_CALLS {
        let src = format!("let prelude'call (v: Vector) (w: Vector) (m: Matrix) = {call}\n");
        let args = [
            vector(&[0.5, -1.25, 2.0]),
            vector(&[1.5, 0.75, -3.0]),
            Value::array(vec![vector(&[1.0, 2.0, -0.5]), vector(&[0.25, -4.0, 3.0])]),
        ];
        if compare_src(&src, "prelude'call", &args) == Outcome::Value {
            values += 1;
        }
    }
    assert_eq!(
        values,
        PRELUDE_CALLS.len(),
        "every prelude call gives a value"
    );
}

/// Arrays of pairs, of arrays and of Bools, `iscan` over a pair state,
/// `concat` and `accum` with pair and array cotangents: the layouts of
/// Note [Native layout].
#[test]
fn native_nested_layouts_agree_with_the_evaluator() {
    let src = "\
let nested (v: Vector) (n: Index) =
  let ps = build n (fun i -> (v[i], (i, v[i] > 0.0)))
  let rows = build n (fun i -> build (i + 1) (fun j -> toDouble (i * j) + v[j]))
  let st = iscan (fun s i -> (snd s, fst s + v[i])) (0.0, 1.0) n
  let flat = concat rows
  let acc = accum (0.0, (n, true)) n [(1, (2.0, (7, false))), (0, (0.5, (8, false))), (1, (0.25, (9, false)))]
  let lists = accum [(0, 1.0)] n [(1, [(3, 2.0)]), (1, [(4, 3.0), (5, 4.0)])]
  (ps, (rows, (st, (flat, (acc, (lists, [[true], [false, true]]))))))
";
    let args = [vector(&[0.5, -1.5, 2.0]), Value::Index(3)];
    assert_eq!(compare_src(src, "nested", &args), Outcome::Value);
    let args = [vector(&[0.5, -1.5, 2.0]), Value::Index(0)];
    let e = native_error(src, "nested", &args);
    assert_eq!(e.code(), "index-out-of-bounds", "accum index 1 of 0 slots");
}

/// `run --engine native` and `grad --engine native` print what the
/// evaluator prints, in every mode that runs a derivative program.
#[test]
fn native_engine_from_the_command_line_matches_the_evaluator() {
    let dot = common::root().join("examples/dot.fsm");
    let dot = dot.to_str().unwrap();
    let out = |args: &[&str]| {
        let o = common::cli(args);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    assert_eq!(
        out(&["run", dot, "--engine", "native"]),
        out(&["run", dot, "--engine", "eval"])
    );
    let input = r#"{"u": [1.5, -2, 3], "v": [4, 0.25, -6]}"#;
    for mode in ["fwd", "fwd-opt", "rev"] {
        let grad = |engine: &str| {
            out(&[
                "grad", dot, "--entry", "dot", "--wrt", "u", "--mode", mode, "--engine", engine,
                "--input", input,
            ])
        };
        assert_eq!(grad("native"), grad("eval"), "mode {mode}");
    }
}
