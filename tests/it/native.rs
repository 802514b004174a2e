//! The native backend (`fsmooth::codegen`) against the reference
//! evaluator: examples, golden files, the prelude, ⊥ codes, random
//! programs from `testgen`, forward- and reverse-mode gradient programs,
//! and the ADBench GMM objective. Values must agree to ρ ≤ 1e-12
//! (exactly for Index and Bool); where the evaluator reaches ⊥ the native
//! code must report the same error code.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use fsmooth::ad::Checkpointing;
use fsmooth::adbench::gmm::read_gmm;
use fsmooth::codegen::{AotOptions, CodegenError, Native, compile_object};
use fsmooth::diagnostic::Diagnose;
use fsmooth::eval::{EvalError, Limits, Value};
use fsmooth::ir::Type;
use fsmooth::numeric::rho;
use fsmooth::pipeline::{self, Entry};
use fsmooth::syntax::print_program;
use fsmooth::testgen;

use crate::common;

const TOLERANCE: f64 = 1e-12;

/// Enough fuel for every test program; runs that exhaust it are skipped
/// (native code has no fuel and would run to the end).
const FUEL: Limits = Limits { fuel: 20_000_000 };

/// How one comparison ended.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// Both produced a value, and the values agree.
    Value,
    /// Both reached ⊥ with the same code.
    Bottom,
    /// The evaluator ran out of fuel: not compared.
    Skipped,
}

/// Runs `entry` on `args` with the evaluator and `native`, and compares.
fn compare(entry: &Entry, native: &Native, args: &[Value]) -> Result<Outcome, String> {
    let expected = entry.run(args.to_vec(), FUEL, &mut |_, _| {});
    if let Err(EvalError::OutOfFuel { .. }) = expected {
        return Ok(Outcome::Skipped);
    }
    let got = native.call(args);
    match (expected, got) {
        (Ok((a, _)), Ok(b)) => match a.max_rho(&b) {
            Some(r) if r <= TOLERANCE => Ok(Outcome::Value),
            _ => Err(format!("evaluator {a}, native {b}")),
        },
        (Err(a), Err(b)) if a.code() == b.code() => Ok(Outcome::Bottom),
        (a, b) => Err(format!(
            "evaluator {}, native {}",
            show(a.map(|(v, _)| v), |e| e.code()),
            show(b, |e: &CodegenError| e.code())
        )),
    }
}

fn show<E>(r: Result<Value, E>, code: impl Fn(&E) -> &'static str) -> String {
    match r {
        Ok(v) => v.to_string(),
        Err(e) => format!("error[{}]", code(&e)),
    }
}

fn load_entry(src: &str, name: &str) -> Entry {
    let loaded = pipeline::load(src).unwrap_or_else(|d| panic!("load: {d}\n{src}"));
    pipeline::entry(&loaded, name).unwrap_or_else(|d| panic!("entry {name}: {d}"))
}

fn compile(entry: &Entry) -> Native {
    Native::compile(entry).unwrap_or_else(|e| panic!("native compile of {}: {e}", entry.name))
}

fn compare_src(src: &str, name: &str, args: &[Value]) -> Outcome {
    let e = load_entry(src, name);
    let n = compile(&e);
    compare(&e, &n, args).unwrap_or_else(|m| panic!("{name}: {m}\n{src}"))
}

/// `f` of `src` on `args`, natively and by the evaluator: the same bits,
/// or the same ⊥ (an index out of bounds with the same index and length).
fn exactly(src: &str, f: &str, args: &[Value]) {
    let e = load_entry(src, f);
    exactly_on(&e, &compile(&e), f, args);
}

/// [`exactly`] for an entry compiled once.
fn exactly_on(e: &Entry, native: &Native, f: &str, args: &[Value]) {
    let expected = e.run(args.to_vec(), FUEL, &mut |_, _| {});
    let got = native.call(args);
    match (&expected, &got) {
        (Ok((a, _)), Ok(b)) => assert!(a.same(b), "{f} {args:?}: {a} vs {b}"),
        (
            Err(EvalError::IndexOutOfBounds { index, len, .. }),
            Err(CodegenError::IndexOutOfBounds { index: i2, len: l2 }),
        ) => assert_eq!((*index, *len as i64), (*i2, *l2), "{f} {args:?}"),
        (Err(a), Err(b)) => assert_eq!(a.code(), b.code(), "{f} {args:?}"),
        _ => panic!("{f} {args:?}: {expected:?} vs {got:?}"),
    }
}

/// [`exactly`] on every case, after [`compare_src`] gives the outcome.
fn exactly_all(src: &str, cases: &[(&str, Vec<Value>, Outcome)]) {
    for (f, args, want) in cases {
        assert_eq!(compare_src(src, f, args), *want, "{f} {args:?}");
        exactly(src, f, args);
    }
}

/// What the `compile --listing` line starting with `prefix` says.
fn listing_says(src: &str, f: &str, prefix: &str) -> String {
    listing_of(src, f)
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .map(str::to_string)
        .expect("the listing says")
}

fn vector(xs: &[f64]) -> Value {
    Value::array(xs.iter().map(|x| Value::Double(*x)).collect())
}

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

fn files_under(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("directory exists")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files_under(&p, ext, out);
        } else if p.extension().is_some_and(|e| e == ext) {
            out.push(p);
        }
    }
}

// ----- whole programs ---------------------------------------------------------

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
        let loaded = pipeline::load(&src).expect("examples load");
        let names: Vec<String> = loaded
            .program
            .defs
            .iter()
            .filter(|d| !d.prelude)
            .map(|d| d.name.to_string())
            .collect();
        for name in names {
            let Ok(e) = pipeline::entry(&loaded, &name) else {
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
        if pipeline::load(&src).is_err() {
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
            let Ok(e) = pipeline::load(&full).and_then(|l| pipeline::entry(&l, "golden'expr"))
            else {
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

// ----- ⊥ ------------------------------------------------------------------------

fn native_error(src: &str, name: &str, args: &[Value]) -> CodegenError {
    let e = load_entry(src, name);
    let n = compile(&e);
    let expected = e.run(args.to_vec(), FUEL, &mut |_, _| {});
    let got = n.call(args);
    match (expected, got) {
        (Err(a), Err(b)) => {
            assert_eq!(a.code(), b.code(), "{src}: evaluator {a}, native {b}");
            b
        }
        (a, b) => panic!("{src}: expected ⊥ from both, got {a:?} and {b:?}"),
    }
}

/// E-Get-Bot: an index outside the array is `index-out-of-bounds` with the
/// index and the length, never a crash, for every element layout.
#[test]
fn native_get_out_of_bounds_is_an_error_not_a_crash() {
    let src = "let at (v: Vector) (i: Index) = v[i]\n\
               let atPair (v: Vector) (i: Index) = (vectorZip v v)[i]\n\
               let atRow (m: Matrix) (i: Index) = m[i]\n";
    let v = vector(&[1.0, 2.0, 3.0]);
    for i in [3, -1, i64::MAX, i64::MIN] {
        for f in ["at", "atPair"] {
            let e = native_error(src, f, &[v.clone(), Value::Index(i)]);
            assert_eq!(e, CodegenError::IndexOutOfBounds { index: i, len: 3 });
        }
    }
    let m = Value::array(vec![v.clone()]);
    let e = native_error(src, "atRow", &[m.clone(), Value::Index(1)]);
    assert_eq!(e, CodegenError::IndexOutOfBounds { index: 1, len: 1 });
    assert_eq!(
        compare_src(src, "atRow", &[m, Value::Index(0)]),
        Outcome::Value
    );
    assert_eq!(
        compare_src(src, "at", &[v, Value::Index(2)]),
        Outcome::Value
    );
}

/// `build n (fun i -> a[i])` is lowered to one memcpy (the optimised
/// dot-product gradient): the same values as the loop, and past the end of
/// `a` the same ⊥ as the loop's first read out of bounds, at `length a`.
#[test]
fn native_copy_loop_is_a_memcpy_with_the_loops_bottom() {
    let src = "let take (n: Index) (v: Vector) = build n (fun i -> v[i])\n\
               let rows (n: Index) (m: Matrix) = build n (fun i -> m[i])\n\
               let pairs (n: Index) (v: Vector) = let z = vectorZip v v in build n (fun i -> z[i])\n";
    let v = vector(&[1.0, -2.5, 3.0]);
    let m = Value::array(vec![v.clone(), vector(&[4.0])]);
    for (f, a) in [("take", &v), ("rows", &m), ("pairs", &v)] {
        let len = if f == "rows" { 2 } else { 3 };
        for n in 0..=len {
            assert_eq!(
                compare_src(src, f, &[Value::Index(n), a.clone()]),
                Outcome::Value,
                "{f} {n}"
            );
        }
        let e = native_error(src, f, &[Value::Index(len + 2), a.clone()]);
        assert_eq!(e, CodegenError::IndexOutOfBounds { index: len, len });
        let e = native_error(src, f, &[Value::Index(-1), a.clone()]);
        assert_eq!(e.code(), "negative-size");
    }
}

/// Every ⊥ code of spec/semantics.md §5 but `out-of-fuel`, natively.
#[test]
fn native_bottoms_have_the_evaluators_codes() {
    let d = |x: f64| Value::Double(x);
    let i = Value::Index;
    let cases: Vec<(&str, Vec<Value>, &str)> = vec![
        // Dom(tan): x finite and cos x ≠ 0 (spec/semantics.md §4).
        (
            "fun (x: Double) -> tan x",
            vec![d(f64::INFINITY)],
            "domain-error",
        ),
        (
            "fun (x: Double) -> tan x",
            vec![d(f64::NAN)],
            "domain-error",
        ),
        (
            "fun (x: Double) (y: Double) -> x / y",
            vec![d(1.0), d(0.0)],
            "division-by-zero",
        ),
        (
            "fun (x: Double) (y: Double) -> x / y",
            vec![d(0.0), d(-0.0)],
            "division-by-zero",
        ),
        (
            "fun (x: Index) (y: Index) -> x / y",
            vec![i(7), i(0)],
            "division-by-zero",
        ),
        (
            "fun (x: Index) (y: Index) -> x / y",
            vec![i(i64::MIN), i(-1)],
            "integer-overflow",
        ),
        (
            "fun (x: Index) (y: Index) -> x + y",
            vec![i(i64::MAX), i(1)],
            "integer-overflow",
        ),
        (
            "fun (x: Index) (y: Index) -> x - y",
            vec![i(i64::MIN), i(1)],
            "integer-overflow",
        ),
        (
            "fun (x: Index) (y: Index) -> x * y",
            vec![i(1 << 40), i(1 << 40)],
            "integer-overflow",
        ),
        (
            "fun (x: Index) -> -x",
            vec![i(i64::MIN)],
            "integer-overflow",
        ),
        (
            "fun (x: Index) (y: Index) -> x ** y",
            vec![i(3), i(-1)],
            "domain-error",
        ),
        (
            "fun (x: Index) (y: Index) -> x ** y",
            vec![i(3), i(50)],
            "integer-overflow",
        ),
        (
            "fun (x: Double) (y: Double) -> x ** y",
            vec![d(-2.0), d(0.5)],
            "domain-error",
        ),
        (
            "fun (x: Double) (y: Double) -> x ** y",
            vec![d(f64::NAN), d(1.0)],
            "domain-error",
        ),
        (
            "fun (x: Double) (y: Double) -> x ** y",
            vec![d(-2.0), d(f64::INFINITY)],
            "domain-error",
        ),
        (
            "fun (x: Double) (y: Double) -> x ** y",
            vec![d(0.0), d(-1.0)],
            "domain-error",
        ),
        ("fun (x: Double) -> log x", vec![d(0.0)], "domain-error"),
        (
            "fun (x: Double) -> log x",
            vec![d(f64::NAN)],
            "domain-error",
        ),
        (
            "fun (x: Double) -> sqrt x",
            vec![d(-1e-300)],
            "domain-error",
        ),
        (
            "fun (n: Index) -> build n (fun i -> toDouble i)",
            vec![i(-1)],
            "negative-size",
        ),
        (
            "fun (n: Index) -> ifold (fun s i -> s + 1.0) 0.0 n",
            vec![i(-2)],
            "negative-count",
        ),
        (
            "fun (n: Index) -> iscan (fun s i -> s + 1.0) 0.0 n",
            vec![i(-2)],
            "negative-count",
        ),
        (
            "fun (n: Index) -> accum 0.0 n [(0, 1.0)]",
            vec![i(-1)],
            "negative-size",
        ),
        (
            "fun (n: Index) -> accum 0.0 n [(0, 1.0), (n, 2.0)]",
            vec![i(2)],
            "index-out-of-bounds",
        ),
    ];
    for (f, args, code) in cases {
        let src = format!("let bottom'case = {f}\n");
        let e = native_error(&src, "bottom'case", &args);
        assert_eq!(e.code(), code, "{f}");
    }
    // And the edges of those domains are values.
    let values: Vec<(&str, Vec<Value>)> = vec![
        (
            "fun (x: Double) (y: Double) -> x ** y",
            vec![d(0.0), d(0.0)],
        ),
        (
            "fun (x: Double) (y: Double) -> x ** y",
            vec![d(-2.0), d(3.0)],
        ),
        (
            "fun (x: Double) (y: Double) -> x ** y",
            vec![d(2.0), d(f64::NAN)],
        ),
        (
            "fun (x: Index) (y: Index) -> x ** y",
            vec![i(-1), i(1 << 40)],
        ),
        ("fun (x: Index) (y: Index) -> x ** y", vec![i(3), i(39)]),
        ("fun (x: Index) (y: Index) -> x / y", vec![i(-7), i(2)]),
        ("fun (x: Double) -> sqrt x", vec![d(-0.0)]),
        (
            "fun (x: Double) (y: Double) -> (x < y, x <> y, x = y, x >= y)",
            vec![d(f64::NAN), d(1.0)],
        ),
        (
            "fun (x: Double) (y: Double) -> (x < y, x <> y, x = y, x <= y)",
            vec![d(0.0), d(-0.0)],
        ),
        (
            "fun (n: Index) -> (build n (fun i -> i), iscan (fun s i -> s + i) 0 n)",
            vec![i(0)],
        ),
        ("fun (x: Index) -> toDouble x", vec![i((1 << 53) + 1)]),
    ];
    for (f, args) in values {
        let src = format!("let value'case = {f}\n");
        assert_eq!(
            compare_src(&src, "value'case", &args),
            Outcome::Value,
            "{f}"
        );
    }
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

// ----- random programs ------------------------------------------------------------

fn env_u32(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Closed random programs of every generated type: native = evaluator
/// (value, or ⊥ with the same code). FSMOOTH_NATIVE_CASES=N runs more.
#[test]
fn native_random_programs_agree_with_the_evaluator() {
    use std::cell::Cell;
    let (values, bottoms) = (Cell::new(0usize), Cell::new(0usize));
    let cases = env_u32("FSMOOTH_NATIVE_CASES", 300);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&prop::collection::vec(any::<u32>(), 0..400), |cs| {
        let (p, ty) = testgen::program(&cs, 6);
        let src = format!(
            "{}let typed'check = (fun (x: {}) -> x) main\n",
            print_program(&p),
            ty.to_type()
        );
        let e = load_entry(&src, "typed'check");
        let n = Native::compile(&e).map_err(|m| TestCaseError::fail(format!("{m}\n{src}")))?;
        match compare(&e, &n, &[]) {
            Ok(Outcome::Value) => values.set(values.get() + 1),
            Ok(Outcome::Bottom) => bottoms.set(bottoms.get() + 1),
            Ok(Outcome::Skipped) => {}
            Err(m) => return Err(TestCaseError::fail(format!("{m}\n{src}"))),
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    eprintln!(
        "native random programs: {} values, {} ⊥ ({cases} programs)",
        values.get(),
        bottoms.get()
    );
    assert!(
        values.get() >= cases as usize / 2,
        "only {} values",
        values.get()
    );
    assert!(bottoms.get() >= 1, "no ⊥ compared");
}

/// Random `fun (p: P) -> e`: the function itself, its forward-mode
/// derivative program and its reverse-mode program, native = evaluator at
/// the difftest points (Double) or on a fixed vector.
#[test]
fn native_random_gradient_programs_agree_with_the_evaluator() {
    use std::cell::Cell;
    let compared = Cell::new(0usize);
    let cases = env_u32("FSMOOTH_NATIVE_CASES", 300) / 3;
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(
        &(prop::collection::vec(any::<u32>(), 0..200), any::<bool>()),
        |(cs, vec_param)| {
            let (param, result) = if vec_param {
                (testgen::GenType::Vector, testgen::GenType::Vector)
            } else {
                (testgen::GenType::Double, testgen::GenType::Double)
            };
            let src = print_program(&testgen::function(&cs, 4, param, result));
            let points: Vec<Value> = if vec_param {
                vec![vector(&[0.7, -1.3, 2.9, 0.4])]
            } else {
                fsmooth::difftest::POINTS
                    .iter()
                    .map(|x| Value::Double(*x))
                    .collect()
            };
            let fail = |m: String| TestCaseError::fail(format!("{m}\n{src}"));
            let rev =
                pipeline::reverse_derivative(&src, "main", "p").map_err(|d| fail(d.to_string()))?;
            let fwd = pipeline::derivative(&src, "main", "p").map_err(|d| fail(d.to_string()))?;
            let programs = [
                (&rev.base, false),
                (&fwd.wrapper, false),
                (&rev.rev, rev.seeded),
            ];
            for (entry, seeded) in programs {
                let n = Native::compile(entry).map_err(|e| fail(format!("{}: {e}", entry.name)))?;
                for x in &points {
                    let mut args = vec![x.clone()];
                    if seeded {
                        // A dense cotangent shaped like the result.
                        let Ok((out, _)) = rev.base.run(args.clone(), FUEL, &mut |_, _| {}) else {
                            continue;
                        };
                        args.push(seed_like(&out));
                    }
                    match compare(entry, &n, &args) {
                        Ok(Outcome::Value) => compared.set(compared.get() + 1),
                        Ok(_) => {}
                        Err(m) => return Err(fail(format!("{} at {x}: {m}", entry.name))),
                    }
                }
            }
            Ok(())
        },
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    eprintln!(
        "native gradient programs: {} values compared",
        compared.get()
    );
    assert!(
        compared.get() >= cases as usize,
        "only {} values",
        compared.get()
    );
}

/// A cotangent shaped like `v`: its doubles replaced by 1, -0.5, 0.25, …
fn seed_like(v: &Value) -> Value {
    let mut k = 0;
    fsmooth::gradient::unflatten(
        v,
        &mut std::iter::from_fn(|| {
            k += 1;
            Some((-0.5f64).powi(k - 1))
        }),
    )
}

// ----- gradients of the examples and goldens ---------------------------------

/// Native reverse- and forward-mode programs of an entry agree with the
/// evaluator on `args`; returns how many values were compared.
fn gradient_programs_agree(src: &str, f: &str, p: &str, args: &[Value]) -> usize {
    let rev = pipeline::reverse_derivative(src, f, p).unwrap_or_else(|d| panic!("{f}/{p}: {d}"));
    let fwd = pipeline::derivative(src, f, p).unwrap_or_else(|d| panic!("{f}/{p}: {d}"));
    let mut rev_args = args.to_vec();
    if rev.seeded {
        let (out, _) = rev
            .base
            .run(args.to_vec(), FUEL, &mut |_, _| {})
            .expect("the base runs");
        rev_args.push(seed_like(&out));
    }
    let mut compared = 0;
    for (entry, a) in [(&rev.rev, &rev_args[..]), (&fwd.wrapper, args)] {
        let n = compile(entry);
        match compare(entry, &n, a) {
            Ok(Outcome::Value) => compared += 1,
            Ok(o) => panic!("{f}/{p} {}: {o:?}", entry.name),
            Err(m) => panic!("{f}/{p} {}: {m}", entry.name),
        }
    }
    compared
}

fn example(rel: &str) -> String {
    std::fs::read_to_string(common::root().join("examples").join(rel)).expect("example exists")
}

#[test]
fn native_gradients_of_the_examples_agree_with_the_evaluator() {
    let v = vector(&[0.5, -1.25, 2.0]);
    let w = vector(&[1.5, 0.75, -3.0]);
    let mut n = 0;
    n += gradient_programs_agree(&example("hello.fsm"), "main", "v1", &[v.clone(), w.clone()]);
    n += gradient_programs_agree(&example("dot.fsm"), "dot", "v", &[v.clone(), w.clone()]);
    let cam = vector(&[
        0.1, -0.2, 0.3, 0.5, -0.4, -3.0, 2.0, 0.25, -0.125, 0.01, -0.002,
    ]);
    let x = vector(&[0.7, 1.1, 2.2]);
    let ba = example("ba_project.fsm");
    n += gradient_programs_agree(&ba, "project", "cam", &[cam.clone(), x.clone()]);
    n += gradient_programs_agree(&ba, "project", "x", &[cam, x]);
    let m = Value::array(vec![v.clone(), w.clone()]);
    n += gradient_programs_agree(&example("transpose.fsm"), "transpose", "m", &[m]);
    assert_eq!(n, 10);
}

/// `// grad: F P INPUT` lines of the golden files: the native reverse and
/// forward programs give the evaluator's results.
#[test]
fn native_golden_gradients_agree_with_the_evaluator() {
    let mut files = Vec::new();
    files_under(&common::root().join("tests/golden"), "fsm", &mut files);
    let mut compared = 0;
    for f in &files {
        let src = std::fs::read_to_string(f).expect("golden readable");
        for line in src.lines() {
            let Some((spec, _)) = line
                .strip_prefix("// grad:")
                .and_then(|r| r.rsplit_once(" => "))
            else {
                continue;
            };
            let mut parts = spec.trim().splitn(3, ' ');
            let (Some(fun), Some(p), Some(input)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let Ok(rev) = pipeline::reverse_derivative(&src, fun, p) else {
                continue; // goldens of AD errors
            };
            let Ok(args) = rev.base.read_input(Some(input)) else {
                continue;
            };
            if rev.base.run(args.clone(), FUEL, &mut |_, _| {}).is_err() {
                continue;
            }
            compared += gradient_programs_agree(&src, fun, p, &args);
        }
    }
    assert!(
        compared >= 40,
        "only {compared} golden gradient programs compared"
    );
}

// ----- ADBench GMM --------------------------------------------------------------

fn adbench_file(rel: &str) -> String {
    std::fs::read_to_string(common::root().join("tests/data/adbench").join(rel))
        .expect("ADBench data file")
}

fn gmm_native() -> (Entry, Native) {
    let e = load_entry(&example("adbench/gmm.fsm"), "gmmObjective");
    let n = compile(&e);
    (e, n)
}

#[test]
fn native_gmm_objective_matches_the_adbench_golden() {
    let input = read_gmm(&adbench_file("data/gmm/test.txt")).expect("test.txt reads");
    let golden: serde_json::Value =
        serde_json::from_str(&adbench_file("goldens/gmm_test.json")).expect("golden JSON");
    let expected = golden["objective"].as_f64().expect("objective");
    let (e, n) = gmm_native();
    let got = n.call(&input.args()).expect("native GMM runs");
    let got = got.as_f64().expect("a Double");
    assert!(
        rho(got, expected) <= 1e-8,
        "native {got}, golden {expected}"
    );
    assert_eq!(compare(&e, &n, &input.args()), Ok(Outcome::Value));
}

#[test]
fn native_gmm_1k_agrees_with_the_evaluator() {
    let input = read_gmm(&adbench_file("data/gmm/1k/gmm_d2_K5.txt")).expect("file reads");
    let (e, n) = gmm_native();
    assert_eq!(compare(&e, &n, &input.args()), Ok(Outcome::Value));
}

/// The GMM gradient programs (reverse and forward mode, with respect to
/// each parameter block) natively, on ADBench's test.txt.
#[test]
fn native_gmm_gradients_agree_with_the_evaluator() {
    let input = read_gmm(&adbench_file("data/gmm/test.txt")).expect("test.txt reads");
    let src = example("adbench/gmm.fsm");
    let mut n = 0;
    for p in ["alphas", "means", "icf"] {
        n += gradient_programs_agree(&src, "gmmObjective", p, &input.args());
    }
    n += gradient_programs_agree(&src, "gmmObjectiveFlat", "theta", &input.flat_args());
    assert_eq!(n, 8);
}

/// Dense accumulators (spec/ad-reverse.md §5.6) natively: GMM's reverse
/// program joins no list and densifies none — every contribution is an
/// `addAt` — and each of them updates its accumulator in place (Note
/// [In-place updates]). The loop over the points is checkpointed
/// (R-Checkpoint), and an iteration's cotangent arrays are scratch arrays
/// (Note [Scratch arrays]), so the arena of the gradient on ADBench's
/// 1k-point files is one main chunk and the scratch chunks, as the
/// objective's: 1.1 MiB, where the lists took 5.1 MiB (d2_K5) and the
/// tapes 2.1 MiB (d2_K5) and 14.1 MiB (d10_K25). Its value and gradient
/// are the evaluator's on ADBench's test file.
#[test]
fn gmm_reverse_mode_adds_into_accumulators_in_place() {
    use fsmooth::codegen::Arg;
    let src = example("adbench/gmm.fsm");
    let rev = pipeline::reverse_derivative(&src, "gmmObjectiveFlat", "theta").expect("reverse");
    let text = print_program(&rev.rev.program);
    assert!(
        !text.contains("concat") && !text.contains("accum "),
        "{text}"
    );
    assert!(text.matches("addAt").count() >= 10, "{text}");
    let listing = compile_object(
        &rev.rev,
        &AotOptions {
            symbol: "g".into(),
            origin: "test".into(),
            listing: true,
        },
    )
    .expect("compiles")
    .listing
    .expect("a listing");
    assert!(listing.contains(";; into a copy: none\n"), "{listing}");
    let input = read_gmm(&adbench_file("data/gmm/test.txt")).expect("test.txt reads");
    assert_eq!(
        gradient_programs_agree(&src, "gmmObjectiveFlat", "theta", &input.flat_args()),
        2
    );
    let native = compile(&rev.rev);
    for file in ["gmm_d2_K5", "gmm_d10_K25"] {
        let big = read_gmm(&adbench_file(&format!("data/gmm/1k/{file}.txt"))).expect("reads");
        let theta: Vec<f64> = {
            let mut t = big.alphas.clone();
            t.extend(big.means.iter().flatten());
            t.extend(big.icf.iter().flatten());
            t
        };
        let rows: Vec<&[f64]> = big.x.iter().map(Vec::as_slice).collect();
        let o = native
            .call_slices(&[
                Arg::F64s(&theta),
                Arg::F64Rows(&rows),
                Arg::F64(big.gamma),
                Arg::I64(big.m),
            ])
            .expect("runs");
        assert!(
            o.arena_bytes() <= (1 << 20) + (128 << 10),
            "{file}: {} arena bytes",
            o.arena_bytes()
        );
    }
}

/// Recomputed conditionals (spec/ad-reverse.md §4.1): a conditional whose
/// branches bind only recomputed values has no tape entry; the reverse
/// sweep evaluates it again. The vector maximum's reverse then tapes only
/// its fold's states, 8 bytes per element (it kept the conditional's value
/// and both branches' empty tapes beside each state, 45.8 MiB at 10⁶);
/// a sum of a piecewise map keeps no tape at all (its `build` is untaped).
/// Gradients agree with the evaluator.
#[test]
fn recomputed_conditionals_keep_no_tape() {
    use fsmooth::codegen::Arg;
    let src = "let vmax (v: Vector) = vectorMax v\n\
               let pieces (v: Vector) = vectorSum (build (length v) (fun i -> if v[i] > 0.0 then v[i] * v[i] else 0.0 - v[i]))\n";
    let small = [vector(&[0.5, -1.5, 2.5, 3.0, -0.25])];
    let n = 200_000;
    let v: Vec<f64> = (0..n).map(|k| ((k * 7919) % 1000) as f64 - 500.0).collect();
    // (entry, most arena bytes: the gradient, the states, a chunk)
    for (f, most) in [("vmax", 16 * n + (2 << 20)), ("pieces", 8 * n + (2 << 20))] {
        assert_eq!(gradient_programs_agree(src, f, "v", &small), 2, "{f}");
        let rev = pipeline::reverse_derivative(src, f, "v").expect("reverse mode");
        let o = compile(&rev.rev)
            .call_slices(&[Arg::F64s(&v)])
            .expect("runs");
        assert!(
            o.arena_bytes() <= most,
            "{f}: {} arena bytes",
            o.arena_bytes()
        );
    }
}

/// R-Checkpoint (spec/ad-reverse.md §4.4) in native code: a checkpointed
/// loop's reverse keeps one iteration's tape at a time, on the scratch
/// stacks, so the arena of a gradient with respect to a short vector does
/// not grow with the number of rows: the same bytes at 2 000 and 20 000
/// rows of 8 (a tape of each row's `exp`s would be 1.3 MB more). The fold
/// that is not linear keeps its tape, whose growth the same measure sees,
/// as does `rows` with checkpointing off.
/// Values agree with the evaluator on a small input.
#[test]
fn checkpointed_gradients_keep_one_iteration_of_tape() {
    use fsmooth::codegen::Arg;
    let src = "let rows (w: Vector) (m: Matrix) =\n\
               \x20 ifold (fun s i -> s + vectorSum (build (length w) (fun j -> exp (w[j] * m[i][j])))) 0.0 (length m)\n\
               let branch (w: Vector) (m: Matrix) =\n\
               \x20 ifold (fun s i -> s + (if m[i][0] > 0.0 then vectorNormSq (vectorEMul w m[i]) else exp (w[0] * m[i][1]))) 0.0 (length m)\n\
               let scaled (w: Vector) (m: Matrix) =\n\
               \x20 ifold (fun s i -> s * 0.5 + vectorSum (build (length w) (fun j -> exp (w[j] * m[i][j])))) 0.0 (length m)\n";
    let w: Vec<f64> = (0..8).map(|j| 0.1 * j as f64 - 0.3).collect();
    let small = [
        vector(&w),
        Value::array(vec![
            vector(&[1.0, 0.5, -0.25, 2.0, 0.0, 1.5, -1.0, 0.75]),
            vector(&[-2.0, 1.5, 0.75, 0.5, -0.5, 0.25, 3.0, -1.5]),
        ]),
    ];
    let rows: Vec<Vec<f64>> = (0..20_000)
        .map(|i| (0..8).map(|j| ((i * 8 + j) as f64 * 0.37).sin()).collect())
        .collect();
    let arena = |native: &Native, n: usize| {
        let m: Vec<&[f64]> = rows[..n].iter().map(Vec::as_slice).collect();
        native
            .call_slices(&[Arg::F64s(&w), Arg::F64Rows(&m)])
            .expect("runs")
            .arena_bytes()
    };
    for f in ["rows", "branch", "scaled"] {
        assert_eq!(gradient_programs_agree(src, f, "w", &small), 2, "{f}");
        let rev = pipeline::reverse_derivative(src, f, "w").expect("reverse mode");
        let native = compile(&rev.rev);
        let (few, many) = (arena(&native, 2_000), arena(&native, 20_000));
        if f == "scaled" {
            assert!(many > few + (1 << 20), "{f}: {few} and {many} arena bytes");
        } else {
            assert_eq!(few, many, "{f}: arena bytes at 2 000 and 20 000 rows");
        }
    }
    // `--checkpoint off`: the same loop keeps every row's tape.
    let off = pipeline::reverse_derivative_with(src, "rows", "w", Checkpointing::Off)
        .expect("reverse mode");
    let native = compile(&off.rev);
    let (few, many) = (arena(&native, 2_000), arena(&native, 20_000));
    assert!(many > few + (1 << 20), "off: {few} and {many} arena bytes");
}

/// `build n (fun i -> a[i])` of an array bound outside every loop is a
/// view of its buffer, not a copy: the optimised gradient of the dot
/// product returns the other vector's own memory (`call_slices`). An
/// `addAt` on such a view copies (the view is not owned), so the array
/// it shares stays as it was; a short array is E-Get-Bot with the
/// evaluator's details.
#[test]
fn copies_of_arrays_outside_loops_share_their_buffer() {
    let src = "let f (a: Vector) (n: Index) = build n (fun i -> a[i])\n\
               let g (a: Vector) = let b = build (length a) (fun i -> a[i]) in (a, addAt b 0 1.0)\n\
               let h (a: Vector) (m: Matrix) = build (length m) (fun k -> vectorSum (build (length a) (fun i -> a[i] + m[k][0])))\n\
               let w (n: Index) = let a = build n (fun i -> toDouble i) in let x = build n (fun i -> a[i]) in (x, addAt a 0 1.0)\n";
    let a = vector(&[1.5, -2.0, 0.25]);
    let m = Value::array(vec![vector(&[1.0]), vector(&[2.0])]);
    let cases: Vec<(&str, Vec<Value>, Outcome)> = vec![
        ("f", vec![a.clone(), Value::Index(2)], Outcome::Value),
        ("f", vec![a.clone(), Value::Index(3)], Outcome::Value),
        ("f", vec![a.clone(), Value::Index(4)], Outcome::Bottom),
        ("g", vec![a.clone()], Outcome::Value),
        ("h", vec![a.clone(), m], Outcome::Value),
        // An `addAt` on the array a view shares copies: the view keeps
        // the old elements.
        ("w", vec![Value::Index(3)], Outcome::Value),
    ];
    for (f, args, want) in cases {
        assert_eq!(compare_src(src, f, &args), want, "{f} {args:?}");
    }
    let e = load_entry(src, "f");
    let err = compile(&e).call(&[a.clone(), Value::Index(4)]).unwrap_err();
    assert_eq!(err, CodegenError::IndexOutOfBounds { index: 3, len: 3 });
    // The view shares the argument's memory.
    let xs = [1.0, 2.0, 3.0, 4.0];
    let native = compile(&e);
    let o = native
        .call_slices(&[
            fsmooth::codegen::Arg::F64s(&xs),
            fsmooth::codegen::Arg::I64(3),
        ])
        .expect("runs");
    match o.get(0) {
        Some(fsmooth::codegen::Out::F64s(ys)) => {
            assert_eq!(ys, &xs[..3]);
            assert_eq!(ys.as_ptr(), xs.as_ptr());
        }
        other => panic!("{other:?}"),
    }
    let listing = listing_of(src, "g");
    assert!(
        listing.lines().any(|l| l.starts_with(";; into a copy: x")),
        "{listing}"
    );
}

/// Note [In-place updates]: an `addAt` writes into its operand's buffer
/// only where nothing can read the old array afterwards; everywhere else
/// it copies, and every value equals the evaluator's (persistent arrays).
/// `names` lists, per entry, the `addAt`s by the variable they bind, in
/// place (`+`) or into a copy (`-`).
#[test]
fn addat_updates_in_place_only_where_the_old_array_is_dead() {
    let src = "let chain (n: Index) = let a = build n (fun i -> 0.0) in let b = addAt a 0 1.0 in let c = addAt b 1 2.0 in c\n\
               let kept (n: Index) = let a = build n (fun i -> 0.0) in let b = addAt a 0 1.0 in (a, b)\n\
               let readlater (n: Index) = let a = build n (fun i -> 1.0) in let b = addAt a 0 1.0 in b[0] + a[0]\n\
               let readfirst (n: Index) = let a = build n (fun i -> 1.0) in let x = a[0] in let b = addAt a 0 x in b\n\
               let param (v: Vector) = addAt v 0 1.0\n\
               let looped (n: Index) = ifold (fun s i -> addAt s (i - n * (i / n)) 1.0) (build n (fun i -> 0.0)) (2 * n)\n\
               let invariant (n: Index) = let a = build n (fun i -> 0.0) in build 2 (fun i -> (addAt a i 1.0)[i])\n\
               let branches (n: Index) (c: Bool) = let a = build n (fun i -> 0.0) in if c then addAt a 0 1.0 else addAt a 1 2.0\n\
               let shared (n: Index) (c: Bool) = let a = build n (fun i -> 0.0) in let b = if c then addAt a 0 1.0 else a in (b, a[1])\n\
               let paired (n: Index) = let p = (build n (fun i -> 0.0), 3.0) in let q = ifold (fun s i -> (addAt (fst s) i (snd s), snd s)) p n in fst q\n\
               let rows (m: Matrix) = let r = m[0] in addAt r 0 1.0\n";
    let v3 = || vector(&[1.0, 2.0, 3.0]);
    let m = Value::array(vec![v3(), v3()]);
    let cases: Vec<(&str, Vec<Value>, &[&str])> = vec![
        ("chain", vec![Value::Index(3)], &["+", "+"]),
        ("kept", vec![Value::Index(3)], &["-"]),
        ("readlater", vec![Value::Index(3)], &["-"]),
        ("readfirst", vec![Value::Index(3)], &["+"]),
        ("param", vec![v3()], &["-"]),
        ("looped", vec![Value::Index(3)], &["+"]),
        // Unrolled: one copy per element.
        ("invariant", vec![Value::Index(3)], &["-", "-"]),
        (
            "branches",
            vec![Value::Index(3), Value::Bool(false)],
            &["+", "+"],
        ),
        ("shared", vec![Value::Index(3), Value::Bool(true)], &["-"]),
        ("paired", vec![Value::Index(3)], &["+"]),
        ("rows", vec![m], &["-"]),
    ];
    for (f, args, expect) in cases {
        assert_eq!(compare_src(src, f, &args), Outcome::Value, "{f}");
        let listing = listing_of(src, f);
        let line = |tag: &str| -> usize {
            listing
                .lines()
                .find_map(|l| l.strip_prefix(tag))
                .map_or(0, |rest| {
                    if rest == "none" {
                        0
                    } else {
                        rest.split(", ").count()
                    }
                })
        };
        let (inp, copies) = (line(";; in place: "), line(";; into a copy: "));
        let want_in = expect.iter().filter(|e| **e == "+").count();
        let want_copy = expect.len() - want_in;
        assert_eq!((inp, copies), (want_in, want_copy), "{f}:\n{listing}");
    }
}

/// Note [Hoisting], folding: an Index operation that returns its operand
/// unchanged (`0 + i`, `i * 1`, `i - 0`, `i / 1`) is that operand, with no
/// overflow test; and every test that can fail branches to a cold block of
/// its own, so no branch in the hot path passes arguments to the exit.
/// Values and ⊥ stay the evaluator's.
#[test]
fn identity_index_arithmetic_is_folded_and_tests_branch_to_cold_blocks() {
    let src = "let f (a: Vector) = build (length a) (fun i -> a[0 + i] * a[(i * 1 - 0) / 1] + a[i + 1 - 1])\n";
    for args in [vec![vector(&[1.0, 2.0, 3.0])], vec![vector(&[])]] {
        assert_eq!(compare_src(src, "f", &args), Outcome::Value);
    }
    let listing = listing_of(src, "f");
    let normal = lowered_normal_form(src, "f");
    // Both identities read `a` at the loop index itself.
    let index = normal
        .lines()
        .find_map(|l| l.trim().strip_prefix("x'n").and(l.split(" (").nth(1)))
        .and_then(|rest| rest.split(')').next())
        .expect("the loop index");
    assert_eq!(
        normal.matches(&format!(", {index})")).count(),
        2,
        "{normal}"
    );
    assert!(
        !normal.contains("/(") && !normal.contains("+(0,"),
        "{normal}"
    );
    // `i + 1 - 1` is not an identity: its overflow tests stay.
    assert!(normal.contains(&format!("+({index}, 1)")), "{normal}");
    let ir = listing
        .split(";; Cranelift IR")
        .nth(1)
        .and_then(|s| s.split(";; machine code").next())
        .expect("the IR");
    assert!(ir.contains("brif"), "{ir}");
    for line in ir.lines().filter(|l| l.contains("brif")) {
        assert!(
            !line.contains("block1("),
            "a test passes arguments to the exit: {line}"
        );
    }
}

/// Loops are rotated (`counted_loop`): a test before the loop, and at the
/// bottom of the body a conditional branch back to the body, with the
/// next index and state, or out; no unconditional jump goes back. Values
/// and ⊥ stay the evaluator's.
#[test]
fn loops_test_their_next_index_at_the_bottom() {
    let src = "let f (v: Vector) = vectorMax v\n";
    for xs in [&[3.0, 1.0, 4.0, 1.5][..], &[2.0]] {
        assert_eq!(
            compare_src(src, "f", &[vector(xs)]),
            Outcome::Value,
            "{xs:?}"
        );
    }
    assert_eq!(compare_src(src, "f", &[vector(&[])]), Outcome::Bottom);
    let listing = listing_of(src, "f");
    let ir = listing
        .split(";; Cranelift IR")
        .nth(1)
        .and_then(|s| s.split(";; machine code").next())
        .expect("the IR");
    // Back edges: branches to a block printed (laid out) earlier.
    let mut seen: Vec<String> = Vec::new();
    let (mut conditional, mut jumps) = (0, 0);
    for line in ir.lines() {
        if let Some(name) = line
            .strip_suffix(':')
            .and_then(|l| l.split(['(', ' ']).next())
        {
            seen.push(name.to_string());
            continue;
        }
        let back = seen.iter().any(|b| line.contains(&format!(" {b}(")));
        match line.split_whitespace().next() {
            Some("brif") if back => conditional += 1,
            Some("jump") if back => jumps += 1,
            _ => {}
        }
    }
    assert_eq!((conditional, jumps), (1, 0), "{ir}");
}

/// Note [Interchange]: a `build` of sums reading a matrix at `a[i][j]`
/// runs i-major behind a guard; every bit is the evaluator's, and so is
/// every ⊥: a short row (E-Get-Bot, the guard fails and the nest runs as
/// written), a division by zero (the same ⊥ from any element), a negative
/// size, a negative count only when there is an element. A body with a
/// `log` (whose ⊥ depends on the element) is not interchanged.
#[test]
fn builds_of_sums_run_interchanged_exactly() {
    let src = "let f (u: Vector) (v: Vector) (a: Matrix) = build (length v) (fun j -> ifold (fun s i -> s + u[i] * a[i][j] / v[j]) 0.5 (length u))\n\
               let g (n: Index) (m: Index) (u: Vector) = build n (fun j -> ifold (fun s i -> s + u[i] / u[j]) 0.0 m)\n\
               let h (u: Vector) (a: Matrix) = build (length u) (fun j -> ifold (fun s i -> s + log (a[i][j])) 0.0 (length a))\n\
               let k (u: Vector) (v: Vector) = build (length v) (fun j -> ifold (fun s i -> s + 1.0 / u[i] * v[j]) 0.0 (length u))\n";
    let m = |rows: &[&[f64]]| Value::array(rows.iter().map(|r| vector(r)).collect());
    let u = vector(&[1.5, -2.0, 0.25]);
    let v = vector(&[0.5, 3.0]);
    let cases: Vec<(&str, Vec<Value>, Outcome)> = vec![
        (
            "f",
            vec![
                u.clone(),
                v.clone(),
                m(&[&[1.0, 2.0], &[3.0, 4.0], &[5.0, 6.0]]),
            ],
            Outcome::Value,
        ),
        (
            "f",
            vec![u.clone(), v.clone(), m(&[&[1.0, 2.0], &[3.0], &[5.0, 6.0]])],
            Outcome::Bottom,
        ),
        (
            "f",
            vec![
                u.clone(),
                vector(&[0.5, 0.0]),
                m(&[&[1.0, 2.0], &[3.0, 4.0], &[5.0, 6.0]]),
            ],
            Outcome::Bottom,
        ),
        ("f", vec![vector(&[]), v.clone(), m(&[])], Outcome::Value),
        (
            "g",
            vec![Value::Index(-1), Value::Index(2), u.clone()],
            Outcome::Bottom,
        ),
        (
            "g",
            vec![Value::Index(2), Value::Index(-1), u.clone()],
            Outcome::Bottom,
        ),
        (
            "g",
            vec![Value::Index(0), Value::Index(-1), u.clone()],
            Outcome::Value,
        ),
        (
            "g",
            vec![Value::Index(3), Value::Index(4), u.clone()],
            Outcome::Bottom,
        ),
        (
            "g",
            vec![Value::Index(3), Value::Index(3), u.clone()],
            Outcome::Value,
        ),
        // Pairs of elements (Note [Interchange], pairs): an odd n (the
        // last element alone), a zero divisor in the last element, in the
        // second lane of a pair.
        (
            "f",
            vec![
                u.clone(),
                vector(&[0.5, 3.0, -0.75]),
                m(&[&[1.0, 2.0, 7.0], &[3.0, 4.0, 8.0], &[5.0, 6.0, 9.0]]),
            ],
            Outcome::Value,
        ),
        (
            "f",
            vec![
                u.clone(),
                vector(&[0.5, 3.0, 0.0]),
                m(&[&[1.0, 2.0, 7.0], &[3.0, 4.0, 8.0], &[5.0, 6.0, 9.0]]),
            ],
            Outcome::Bottom,
        ),
        (
            "f",
            vec![
                u.clone(),
                vector(&[0.5, 3.0, 2.0, 0.0]),
                m(&[
                    &[1.0, 2.0, 7.0, 1.0],
                    &[3.0, 4.0, 8.0, 1.0],
                    &[5.0, 6.0, 9.0, 1.0],
                ]),
            ],
            Outcome::Bottom,
        ),
        // A term without j, computed once per i: its division by zero is
        // a ⊥ only when there is an element.
        (
            "k",
            vec![u.clone(), vector(&[2.0, -1.0, 4.0])],
            Outcome::Value,
        ),
        (
            "k",
            vec![vector(&[1.0, 0.0]), vector(&[2.0, -1.0, 4.0])],
            Outcome::Bottom,
        ),
        ("k", vec![vector(&[1.0, 0.0]), vector(&[])], Outcome::Value),
    ];
    exactly_all(src, &cases);
    let said = |f: &str| listing_says(src, f, ";; loop nests interchanged (Note [Interchange]): ");
    assert_ne!(said("f"), "none");
    assert_ne!(said("g"), "none");
    assert_eq!(said("h"), "none");
    assert_ne!(said("k"), "none");
    // f's terms that depend on j run in the lanes of an f64x2.
    assert!(listing_of(src, "f").contains("f64x2"));
}

/// Note [Bounds guards]: an innermost loop whose reads and updates have
/// lengths known before it runs without their bounds tests (and without
/// the overflow test of `i + c`) when one guard says none can fire, and
/// as written otherwise. Every value and every ⊥ — code and details — is
/// the evaluator's: an offset read past the end, a negative offset, an
/// overflowing `i + c`, a constant index out of bounds, an accumulator in
/// the fold's state (its length the initial state's) too short, and a
/// state whose length changes (not guarded: its reads keep their tests).
#[test]
fn innermost_loops_run_behind_bounds_guards_exactly() {
    let src = "let f (u: Vector) (c: Index) (m: Index) = ifold (fun s i -> s + u[i + c]) 0.5 m\n\
               let g (u: Vector) (k: Index) (m: Index) = build m (fun i -> u[i] * u[k])\n\
               let h (n: Index) (o: Index) (v: Vector) = ifold (fun acc i -> addAt acc (o + i) (v[i] * 2.0)) (build n (fun j -> 0.0)) (length v)\n\
               let p (n: Index) (m: Index) = ifold (fun st i -> (addAt (fst st) i 1.0, snd st + 1.0)) (build n (fun j -> 0.0), 0.0) m\n\
               let k (u: Vector) (m: Index) = ifold (fun a i -> [a[i], a[i] + 1.0]) u m\n";
    let u = vector(&[1.5, -2.0, 0.25, 4.0]);
    let ix = Value::Index;
    let cases: Vec<(&str, Vec<Value>, Outcome)> = vec![
        ("f", vec![u.clone(), ix(1), ix(3)], Outcome::Value),
        ("f", vec![u.clone(), ix(2), ix(3)], Outcome::Bottom),
        ("f", vec![u.clone(), ix(-1), ix(2)], Outcome::Bottom),
        ("f", vec![u.clone(), ix(i64::MAX), ix(2)], Outcome::Bottom),
        ("f", vec![u.clone(), ix(-7), ix(0)], Outcome::Value),
        ("f", vec![u.clone(), ix(0), ix(-1)], Outcome::Bottom),
        ("g", vec![u.clone(), ix(3), ix(4)], Outcome::Value),
        ("g", vec![u.clone(), ix(4), ix(2)], Outcome::Bottom),
        ("g", vec![u.clone(), ix(0), ix(5)], Outcome::Bottom),
        ("h", vec![ix(6), ix(2), u.clone()], Outcome::Value),
        ("h", vec![ix(5), ix(2), u.clone()], Outcome::Bottom),
        ("h", vec![ix(6), ix(-1), u.clone()], Outcome::Bottom),
        ("p", vec![ix(3), ix(3)], Outcome::Value),
        ("p", vec![ix(3), ix(4)], Outcome::Bottom),
        ("k", vec![u.clone(), ix(2)], Outcome::Value),
        ("k", vec![u.clone(), ix(3)], Outcome::Bottom),
    ];
    exactly_all(src, &cases);
    let said = |f: &str| {
        listing_says(
            src,
            f,
            ";; loops behind a bounds guard (Note [Bounds guards]): ",
        )
    };
    for f in ["f", "g", "h", "p"] {
        assert_ne!(said(f), "none", "{f}");
    }
    assert_eq!(said("k"), "none");
}

/// Note [Bounds guards], pairs: an innermost `build` of Double arithmetic
/// on reads at its index that need no test (covered by the guard, or over
/// the array's length) runs two elements at a time in `f64x2` lanes, the
/// last alone when n is odd. Every bit and every ⊥ is the evaluator's: a
/// short array (the guard fails), a zero divisor in either lane or in the
/// last element.
#[test]
fn maps_run_two_elements_at_a_time_exactly() {
    let src = "let f (u: Vector) (v: Vector) = build (length u) (fun i -> u[i] * 2.0 - v[i] / u[i])\n\
               let g (u: Vector) (c: Double) = build (length u) (fun i -> -(u[i] * c))\n";
    let v = vector(&[0.5, -1.5, 2.5, 3.0, -0.25]);
    let cases: Vec<(&str, Vec<Value>, Outcome)> = vec![
        (
            "f",
            vec![vector(&[1.0, 2.0, 3.0]), v.clone()],
            Outcome::Value,
        ),
        (
            "f",
            vec![vector(&[1.0, 2.0, 3.0, -4.0]), v.clone()],
            Outcome::Value,
        ),
        ("f", vec![vector(&[]), v.clone()], Outcome::Value),
        ("f", vec![vector(&[1.0; 6]), v.clone()], Outcome::Bottom),
        (
            "f",
            vec![vector(&[1.0, 0.0, 3.0]), v.clone()],
            Outcome::Bottom,
        ),
        (
            "f",
            vec![vector(&[0.0, 1.0, 3.0, 2.0]), v.clone()],
            Outcome::Bottom,
        ),
        (
            "f",
            vec![vector(&[1.0, 2.0, 0.0]), v.clone()],
            Outcome::Bottom,
        ),
        ("g", vec![v.clone(), Value::Double(-0.1)], Outcome::Value),
    ];
    exactly_all(src, &cases);
    for f in ["f", "g"] {
        assert!(listing_of(src, f).contains("f64x2"), "{f}");
    }
}

/// Note [Bounds guards], pairs of `addAt`s: an innermost fold whose state
/// changes only by in-place `addAt`s at `i + c`, each into its own state
/// array, of Double arithmetic on reads at `i` (reverse mode's inner
/// loops), runs two iterations at a time, the last alone when n is odd,
/// and a literal leaf of its result is the state's after the first
/// iteration. Every bit and every ⊥ is the evaluator's: n odd, even and
/// zero, an offset past the end (the guard fails), a short array, a zero
/// divisor in either lane and in the last iteration. An `addAt` at a
/// constant index (every iteration adds into one slot), one whose value
/// reads the accumulator, and one into an array the loop also reads (not
/// in place) stay one iteration at a time.
#[test]
fn folds_of_addats_run_two_iterations_at_a_time_exactly() {
    let src = "let two (u: Vector) (v: Vector) (c: Index) =\n\
               \x20 let a = build (length u + c) (fun i -> 0.5)\n\
               \x20 let b = build (length v) (fun i -> toDouble i)\n\
               \x20 ifold (fun s i -> (addAt (fst s) (i + c) (u[i] * v[i]), addAt (snd s) i (u[i] / v[i] - 1.0))) (a, b) (length u)\n\
               let lit (u: Vector) (x: Double) =\n\
               \x20 let a = build (length u) (fun i -> 0.0)\n\
               \x20 ifold (fun s i -> (addAt (fst s) i (u[i] * 2.0), 1.5)) (a, x) (length u)\n\
               let same (u: Vector) = ifold (fun s i -> addAt s 0 u[i]) (build 3 (fun i -> 0.0)) (length u)\n\
               let reads (u: Vector) = ifold (fun s i -> addAt s i (s[i] * u[i])) (build (length u) (fun i -> 1.0)) (length u)\n\
               let alias (u: Vector) = let a = build (length u) (fun i -> u[i] * 2.0) in ifold (fun s i -> addAt s (i + 1) a[i]) a (length u - 1)\n";
    let ix = Value::Index;
    let u = |n: usize| vector(&(0..n).map(|k| 0.25 + k as f64 * 1.5).collect::<Vec<_>>());
    let mut cases: Vec<(&str, Vec<Value>, Outcome)> = Vec::new();
    for n in [0, 1, 4, 5] {
        for c in [0, 2] {
            cases.push(("two", vec![u(n), u(n + 1), ix(c)], Outcome::Value));
        }
        cases.push(("lit", vec![u(n), Value::Double(-3.0)], Outcome::Value));
        cases.push(("same", vec![u(n)], Outcome::Value));
        cases.push(("reads", vec![u(n)], Outcome::Value));
        if n > 0 {
            cases.push(("alias", vec![u(n)], Outcome::Value));
        }
    }
    // v shorter than u: a read past the end.
    cases.push(("two", vec![u(5), u(3), ix(1)], Outcome::Bottom));
    // A zero divisor in the first lane, the second, the last iteration.
    for zero in [0, 1, 4] {
        let mut v: Vec<f64> = (0..5).map(|k| 1.0 + k as f64).collect();
        v[zero] = 0.0;
        cases.push(("two", vec![u(5), vector(&v), ix(0)], Outcome::Bottom));
    }
    exactly_all(src, &cases);
    // A negative offset: the guard fails and the loop runs as written.
    exactly(src, "two", &[u(4), u(4), ix(-1)]);
    let prefix = ";; folds of addAts two iterations at a time (Note [Bounds guards], pairs of addAts), over: ";
    // `alias` reads the array it adds into (the state starts as `a`): its
    // `addAt` copies (Note [In-place updates]), so it is not paired.
    for (f, paired) in [
        ("two", true),
        ("lit", true),
        ("same", false),
        ("reads", false),
        ("alias", false),
    ] {
        assert_eq!(listing_says(src, f, prefix) != "none", paired, "{f}");
    }
}

/// A one-hot `build n (fun i -> if i = k then hot else cold)` (the
/// vector maximum's optimised gradient) is a fill with `cold` and one
/// store of `hot` (a fill of all-zero bits, `+0.0` but not `-0.0`, is a
/// `memset`): the evaluator's bits for every n (odd, even, zero) and k
/// (inside, negative, past the end), in either order of the test.
#[test]
fn one_hot_builds_fill_then_store_once() {
    let src = "let f (n: Index) (k: Index) (h: Double) = build n (fun i -> if i = k then h else 0.5)\n\
               let g (n: Index) (k: Index) = build n (fun i -> if k = i then 1.0 else 0.0)\n\
               let z (n: Index) (k: Index) (c: Double) = build n (fun i -> if i = k then 1.0 else c)\n\
               let v (x: Vector) = vectorMap (grad (fun y -> vectorMax y) x) snd\n";
    let ix = Value::Index;
    let mut cases: Vec<(&str, Vec<Value>, Outcome)> = Vec::new();
    for n in [0, 1, 4, 5] {
        for k in [-1, 0, 2, 4, 7] {
            cases.push((
                "f",
                vec![ix(n), ix(k), Value::Double(-2.25)],
                Outcome::Value,
            ));
            cases.push(("g", vec![ix(n), ix(k)], Outcome::Value));
            for c in [0.0, -0.0, 0.5] {
                cases.push(("z", vec![ix(n), ix(k), Value::Double(c)], Outcome::Value));
            }
        }
    }
    cases.push(("g", vec![ix(-1), ix(0)], Outcome::Bottom));
    cases.push((
        "v",
        vec![vector(&[1.0, 3.0, -2.0, 3.0, 0.5])],
        Outcome::Value,
    ));
    exactly_all(src, &cases);
    for f in ["f", "g"] {
        assert!(listing_of(src, f).contains("f64x2"), "{f}");
    }
}

/// Note [Interchange], builds of builds: `build n (fun k -> build m (fun
/// i -> e))` reading `a[i][k]` (or a row projected from `a[i]`) runs
/// i-major into rows allocated first, what does not depend on `k` once
/// per `i`; every bit is the evaluator's, and every ⊥ too: a short row, a
/// negative outer or inner size (the inner one only with a row to build),
/// a division by zero; no row and more `i` than `a` has rows is a value.
#[test]
fn builds_of_builds_run_transposed_exactly() {
    let src = "let t (a: Matrix) (n: Index) = build n (fun k -> build (length a) (fun i -> a[i][k] * 2.0))\n\
               let u (a: Matrix) (n: Index) =\n\
               \x20 let r = build (length a) (fun i -> (a[i][0], a[i]))\n\
               \x20 (r, build n (fun k -> build (length r) (fun i -> let e = r[i] in fst e + (snd e)[k])))\n\
               let w (a: Matrix) (n: Index) (m: Index) (d: Double) = build n (fun k -> build m (fun i -> a[i][k] / d))\n";
    let m = |rows: &[&[f64]]| Value::array(rows.iter().map(|r| vector(r)).collect());
    let a = m(&[&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]]);
    let short = m(&[&[1.0, 2.0, 3.0], &[4.0, 5.0]]);
    let ix = Value::Index;
    let cases: Vec<(&str, Vec<Value>, Outcome)> = vec![
        ("t", vec![a.clone(), ix(3)], Outcome::Value),
        ("t", vec![a.clone(), ix(0)], Outcome::Value),
        ("t", vec![m(&[]), ix(2)], Outcome::Value),
        ("t", vec![short.clone(), ix(3)], Outcome::Bottom),
        ("t", vec![a.clone(), ix(-1)], Outcome::Bottom),
        ("u", vec![a.clone(), ix(3)], Outcome::Value),
        ("u", vec![short.clone(), ix(3)], Outcome::Bottom),
        (
            "w",
            vec![a.clone(), ix(2), ix(2), Value::Double(0.5)],
            Outcome::Value,
        ),
        (
            "w",
            vec![a.clone(), ix(2), ix(-1), Value::Double(0.5)],
            Outcome::Bottom,
        ),
        (
            "w",
            vec![a.clone(), ix(0), ix(-1), Value::Double(0.5)],
            Outcome::Value,
        ),
        // No row, m beyond `a`'s rows: an empty matrix.
        (
            "w",
            vec![a.clone(), ix(0), ix(3), Value::Double(0.5)],
            Outcome::Value,
        ),
        (
            "w",
            vec![a.clone(), ix(2), ix(3), Value::Double(0.5)],
            Outcome::Bottom,
        ),
        (
            "w",
            vec![a.clone(), ix(2), ix(2), Value::Double(0.0)],
            Outcome::Bottom,
        ),
    ];
    exactly_all(src, &cases);
    for f in ["t", "u", "w"] {
        let said = listing_of(src, f)
            .lines()
            .find_map(|l| l.strip_prefix(";; loop nests interchanged (Note [Interchange]): "))
            .map(str::to_string)
            .expect("the listing says");
        assert_ne!(said, "none", "{f}");
    }
}

// ----- what the backend refuses -------------------------------------------------

/// What the backend cannot compile is a clean `native-unsupported`; a call
/// with arguments of the wrong shape is `native-argument`; an array beyond
/// the memory limit is `out-of-memory`. None of them panics.
#[test]
fn native_unsupported_bad_arguments_and_memory_limits_are_errors() {
    use fsmooth::anf::{Atom, Block, Normal};
    let f = Type::fun(Type::Double, Type::Double);
    let normal = Normal {
        params: vec![("f'n1".into(), f.clone())],
        body: Block {
            binds: Vec::new(),
            result: Atom::Var("f'n1".into(), f),
        },
    };
    let e = Native::compile_normal(&normal).expect_err("a function parameter");
    assert_eq!(e.code(), "native-unsupported", "{e}");

    let n = compile(&load_entry("let f (v: Vector) = vectorSum v\n", "f"));
    for bad in [
        vec![],
        vec![Value::Double(1.0)],
        vec![Value::array(vec![Value::Index(1)])],
    ] {
        let e = n.call(&bad).expect_err("wrong arguments");
        assert_eq!(e.code(), "native-argument", "{e}");
    }
    assert_eq!(
        n.call(&[vector(&[1.0, 2.0])]).ok().and_then(|v| v.as_f64()),
        Some(3.0)
    );

    let mut n = compile(&load_entry(
        "let f (n: Index) = build n (fun i -> toDouble i)\n",
        "f",
    ));
    n.limits.memory_bytes = 1 << 20;
    for size in [1 << 20, i64::MAX] {
        let e = n.call(&[Value::Index(size)]).expect_err("too large");
        assert_eq!(e.code(), "out-of-memory", "{e}");
    }
    assert!(n.call(&[Value::Index(1000)]).is_ok());
}

/// A call's arena is kept for the next call (`Arena::reset`): results of
/// reused chunks are right, results alive at once do not share an arena,
/// and the memory limit still holds per call, spare chunks or not.
#[test]
fn native_arenas_are_reused_across_calls() {
    use fsmooth::codegen::{Arg, Out};
    let mut n = compile(&load_entry(
        "let f (n: Index) = build n (fun i -> toDouble i * 0.5)\n",
        "f",
    ));
    let check = |o: &fsmooth::codegen::Outputs<'_>, len: usize| match o.get(0) {
        Some(Out::F64s(xs)) => {
            assert_eq!(xs.len(), len);
            assert!(xs.iter().enumerate().all(|(i, x)| *x == i as f64 * 0.5));
        }
        other => panic!("{other:?}"),
    };
    let big = 300_000; // 2.4 MB: a chunk of its own
    let first = n.call_slices(&[Arg::I64(big as i64)]).expect("runs");
    let bytes = first.arena_bytes();
    // Alive at the same time: a second arena.
    let small = n.call_slices(&[Arg::I64(1000)]).expect("runs");
    check(&first, big);
    check(&small, 1000);
    drop(first);
    drop(small);
    for _ in 0..3 {
        let again = n.call_slices(&[Arg::I64(big as i64)]).expect("runs");
        check(&again, big);
        assert_eq!(again.arena_bytes(), bytes);
        let v = n.call(&[Value::Index(5)]).expect("runs");
        assert_eq!(v.to_string(), "[0.0, 0.5, 1.0, 1.5, 2.0]");
    }
    // A spare 2.4 MB chunk does not lift a 1 MiB limit.
    n.limits.memory_bytes = 1 << 20;
    let e = n
        .call_slices(&[Arg::I64(big as i64)])
        .err()
        .expect("over the limit");
    assert_eq!(e.code(), "out-of-memory", "{e}");
    assert!(n.call(&[Value::Index(1000)]).is_ok());
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

#[test]
fn native_engine_errors_from_the_command_line() {
    let p = common::temp_file("oob.fsm", "let main = fun (v: Vector) -> v[5]\n");
    let o = common::cli(&[
        "run",
        p.to_str().unwrap(),
        "--engine",
        "native",
        "--input",
        "[1, 2]",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("error[index-out-of-bounds]"));
    // The tape and finite differences are interpreters: no native leg.
    let dot = common::root().join("examples/dot.fsm");
    let o = common::cli(&[
        "grad",
        dot.to_str().unwrap(),
        "--entry",
        "dot",
        "--wrt",
        "u",
        "--mode",
        "tape",
        "--engine",
        "native",
        "--input",
        "[[1], [2]]",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--engine native"));
}

/// The leaves of a value of type `t` (a tuple's components, in order).
fn value_leaves(v: &Value, t: &Type, out: &mut Vec<Value>) {
    match (v, t) {
        (Value::Pair(p), Type::Pair(a, b)) => {
            value_leaves(&p.0, a, out);
            value_leaves(&p.1, b, out);
        }
        _ => out.push(v.clone()),
    }
}

/// `Native::call_slices` (arguments read in place, results as slices of
/// the arena) returns exactly what `Native::call` returns, ⊥ included,
/// and a result may share an argument's buffer; matrices go in and come
/// out as rows.
#[test]
fn native_call_slices_agrees_with_call() {
    use fsmooth::codegen::{Arg, Out};
    let src = example("dot.fsm");
    let extra = "\nlet mixed = fun (xs: Array<Double>) (ks: Array<Index>) (k: Index) (b: Bool) ->\n  \
                 (xs, build k (fun i -> i * k + ks[i]), if b then xs[0] else 0.0, not b)\n\
                 let rows = fun (m: Matrix) (k: Index) -> (m, build k (fun i -> vectorSMul m[i] 2.0))\n";
    let src = format!("{src}{extra}");
    let dot = load_entry(&src, "dot");
    let rev = pipeline::reverse_derivative(&src, "dot", "u").unwrap().rev;
    let mixed = load_entry(&src, "mixed");
    let rows = load_entry(&src, "rows");
    let (r0, r1, r2) = ([1.0, 2.0], [-0.5], [3.0, 4.0, 5.0]);
    let m: [&[f64]; 3] = [&r0, &r1, &r2];
    let u = [0.5, -2.25, 1e3, 1.0 / 3.0];
    let v = [3.0, 0.125, -7.0, 0.1];
    let ks = [7, -8, 9];
    let to_value = |a: &Arg| match a {
        Arg::F64(x) => Value::Double(*x),
        Arg::I64(i) => Value::Index(*i),
        Arg::Bool(b) => Value::Bool(*b),
        Arg::F64s(xs) => vector(xs),
        Arg::I64s(xs) => Value::array(xs.iter().map(|i| Value::Index(*i)).collect()),
        Arg::F64Rows(rs) => Value::array(rs.iter().map(|r| vector(r)).collect()),
    };
    let cases: Vec<(&Entry, Vec<Arg>)> = vec![
        (&dot, vec![Arg::F64s(&u), Arg::F64s(&v)]),
        (&dot, vec![Arg::F64s(&[]), Arg::F64s(&[])]),
        (&rev, vec![Arg::F64s(&u), Arg::F64s(&v)]),
        (&dot, vec![Arg::F64s(&u), Arg::F64s(&v[..2])]), // ⊥
        (
            &mixed,
            vec![Arg::F64s(&u), Arg::I64s(&ks), Arg::I64(3), Arg::Bool(true)],
        ),
        (
            &mixed,
            vec![
                Arg::F64s(&[]),
                Arg::I64s(&ks),
                Arg::I64(0),
                Arg::Bool(false),
            ],
        ),
        (
            &mixed,
            vec![Arg::F64s(&[]), Arg::I64s(&ks), Arg::I64(1), Arg::Bool(true)],
        ), // ⊥
        (
            &mixed,
            vec![Arg::F64s(&u), Arg::I64s(&ks), Arg::I64(4), Arg::Bool(true)],
        ), // ⊥
        (&rows, vec![Arg::F64Rows(&m), Arg::I64(3)]),
        (&rows, vec![Arg::F64Rows(&[]), Arg::I64(0)]),
        (&rows, vec![Arg::F64Rows(&m), Arg::I64(4)]), // ⊥
    ];
    let (mut bottoms, mut shared) = (0, 0);
    for (entry, args) in &cases {
        let native = compile(entry);
        let values: Vec<Value> = args.iter().map(to_value).collect();
        let what = format!("{} on {args:?}", entry.name);
        match (native.call(&values), native.call_slices(args)) {
            (Ok(v), Ok(outs)) => {
                let mut want = Vec::new();
                value_leaves(&v, native.result(), &mut want);
                assert_eq!(outs.len(), want.len(), "{what}");
                for (k, w) in want.iter().enumerate() {
                    let got = match outs.get(k).unwrap() {
                        Out::F64(x) => Value::Double(x),
                        Out::I64(i) => Value::Index(i),
                        Out::Bool(b) => Value::Bool(b),
                        Out::F64s(xs) => vector(xs),
                        Out::I64s(xs) => {
                            Value::array(xs.iter().map(|i| Value::Index(*i)).collect())
                        }
                        Out::F64Rows(rs) => Value::array(rs.iter().map(vector).collect()),
                    };
                    assert!(got.same(w), "{what}: leaf {k}: {got} vs {w}");
                }
                if entry.name == "mixed"
                    && let (Arg::F64s(xs), Some(Out::F64s(r))) = (args[0], outs.get(0))
                    && !xs.is_empty()
                {
                    assert_eq!(xs.as_ptr(), r.as_ptr(), "{what}: the result shares `xs`");
                    shared += 1;
                }
                if let (Arg::F64Rows(ms), Some(Out::F64Rows(r))) = (args[0], outs.get(0))
                    && !ms.is_empty()
                {
                    assert_eq!(ms[1].as_ptr(), r.row(1).as_ptr(), "{what}: rows shared");
                    assert!(outs.arena_bytes() > 0, "{what}: the arena was used");
                    shared += 1;
                }
            }
            (Err(a), Err(b)) => {
                bottoms += 1;
                assert_eq!(a, b, "{what}");
            }
            (a, b) => panic!("{what}: call {a:?}, call_slices {:?}", b.map(|o| o.len())),
        }
    }
    assert_eq!((bottoms, shared), (4, 2));
    // Arguments of the wrong type, and layouts it does not take.
    let n = compile(&dot);
    let e = n
        .call_slices(&[Arg::F64s(&u), Arg::I64s(&ks)])
        .map(|o| o.len());
    assert!(matches!(e, Err(CodegenError::Argument { .. })), "{e:?}");
    let e = n.call_slices(&[Arg::F64s(&u)]).map(|o| o.len());
    assert!(matches!(e, Err(CodegenError::Argument { .. })), "{e:?}");
    let pairs = load_entry("let f = fun (v: Vector) -> vectorZip v v\n", "f");
    let e = compile(&pairs)
        .call_slices(&[Arg::F64s(&u)])
        .map(|o| o.len());
    assert!(matches!(e, Err(CodegenError::Argument { .. })), "{e:?}");
}

/// Note [Fusion] (`codegen/fuse.rs`): a pull array read only by `get` and
/// `length` is not built — the dot product's `vectorEMul`, a slice of a
/// difference, a chain of maps take no arena at all — and fusion is
/// exact: where some element is ⊥, read or not (E-Build evaluates them
/// all), the native code stops with the evaluator's ⊥ and its details.
#[test]
fn fused_pull_arrays_take_no_memory_and_keep_the_evaluators_bottoms() {
    use fsmooth::codegen::Arg;
    let src = "let dot (u: Vector) (v: Vector) = vectorDot u v\n\
               let sliced (u: Vector) (v: Vector) (s: Index) = vectorSum (vectorSlice (vectorSub u v) s (s + 1))\n\
               let chain (u: Vector) (v: Vector) = let a = vectorAdd u v in let b = vectorSMul a 3.0 in let c = vectorSub b u in c[1] + vectorSum c\n\
               let unread (u: Vector) (n: Index) = let y = build n (fun i -> u[i] * 2.0) in y[0]\n\
               let at (u: Vector) (k: Index) = let y = build 2 (fun i -> u[k] + toDouble i) in y[1] + toDouble (length y)\n\
               let lit (a: Double) (b: Double) = let w = [a, b, a * b] in w[0] + w[2] * toDouble (length w)\n\
               let seed (v: Vector) (r: Index) = let d = build (length v) (fun i -> (v[i], if i = r then 1.0 else 0.0)) in vectorSum (build (length v) (fun i -> fst d[i] * snd d[i]))\n";
    let (u, v) = (vector(&[1.0, 2.0, 3.0]), vector(&[4.0, -5.0, 6.5]));
    let short = vector(&[1.0, 2.0]);
    let i = Value::Index;
    let d = Value::Double;
    let values: Vec<(&str, Vec<Value>)> = vec![
        ("dot", vec![u.clone(), v.clone()]),
        ("dot", vec![vector(&[]), vector(&[])]),
        ("sliced", vec![u.clone(), v.clone(), i(0)]),
        ("sliced", vec![u.clone(), v.clone(), i(1)]),
        ("sliced", vec![short.clone(), v.clone(), i(0)]),
        ("chain", vec![u.clone(), v.clone()]),
        ("unread", vec![short.clone(), i(2)]),
        ("at", vec![short.clone(), i(1)]),
        ("lit", vec![d(2.0), d(-3.0)]),
        ("seed", vec![u.clone(), i(1)]),
        ("seed", vec![u.clone(), i(7)]),
    ];
    for (f, args) in &values {
        assert_eq!(compare_src(src, f, args), Outcome::Value, "{f} {args:?}");
    }
    let oob = |index, len| CodegenError::IndexOutOfBounds { index, len };
    let bottoms: Vec<(&str, Vec<Value>, CodegenError)> = vec![
        ("dot", vec![u.clone(), short.clone()], oob(2, 2)),
        ("sliced", vec![u.clone(), v.clone(), i(2)], oob(3, 3)),
        ("sliced", vec![u.clone(), v.clone(), i(-1)], oob(-1, 3)),
        ("sliced", vec![u.clone(), short.clone(), i(0)], oob(2, 2)),
        ("chain", vec![u.clone(), short.clone()], oob(2, 2)),
        // Only y[0] is read, but y[2] is ⊥.
        ("unread", vec![short.clone(), i(3)], oob(2, 2)),
        ("unread", vec![short.clone(), i(0)], oob(0, 0)),
        ("at", vec![short.clone(), i(2)], oob(2, 2)),
        ("at", vec![short.clone(), i(-1)], oob(-1, 2)),
    ];
    for (f, args, want) in &bottoms {
        assert_eq!(&native_error(src, f, args), want, "{f} {args:?}");
    }
    let e = native_error(src, "unread", &[short.clone(), i(-1)]);
    assert_eq!(e.code(), "negative-size");
    // No buffer at all: the arena never takes a chunk.
    let big: Vec<f64> = (0..200_000).map(|k| k as f64 * 0.5).collect();
    for f in ["dot", "chain"] {
        let n = compile(&load_entry(src, f));
        let o = n
            .call_slices(&[Arg::F64s(&big), Arg::F64s(&big)])
            .expect("runs");
        assert_eq!(o.arena_bytes(), 0, "{f}: an array was built");
    }
    // Forward mode's one-hot seed: a conditional whose branches cannot fail.
    let n = compile(&load_entry(src, "seed"));
    let o = n
        .call_slices(&[Arg::F64s(&big), Arg::I64(3)])
        .expect("runs");
    assert_eq!(o.arena_bytes(), 0, "seed: an array was built");
}

/// Note [Fusion], accumulations: `accum z n (concat parts)` reads the parts
/// in place (the joined list is never built), and when `parts` is a
/// `build` of literal lists, as reverse mode's scatter-adds are, no part is
/// built either: the arena holds the result and nothing else. Values and
/// ⊥ codes as the evaluator's, through tuples (projections are
/// forwarded), with parts that are not fused (Index arithmetic in the
/// body, array-valued contributions), and where a part is ⊥.
#[test]
fn accumulations_read_their_parts_in_place() {
    use fsmooth::codegen::Arg;
    let src = "let scatter (v: Vector) (n: Index) = accum 0.0 n (concat (build (length v) (fun i -> [(i, v[i] * 2.0)])))\n\
               let tupled (v: Vector) (n: Index) = let t = (concat (build (length v) (fun i -> [(i, v[i]), (0, 1.0)])), 1.0) in accum (snd t) n (fst t)\n\
               let reversed (v: Vector) (n: Index) = accum 0.0 n (concat (build (length v) (fun i -> [(n - 1 - i, v[i])])))\n\
               let lists (v: Vector) (n: Index) = accum [0.5] n (concat (build (length v) (fun i -> [(i, [v[i], 1.0])])))\n\
               let short (v: Vector) (m: Index) = accum 0.0 m (concat (build m (fun i -> [(i, v[i])])))\n\
               let direct (v: Vector) (n: Index) = accum 0.5 n (build (length v) (fun i -> (i, v[i] * 2.0)))\n";
    let v = vector(&[1.0, -2.0, 3.5]);
    let i = Value::Index;
    // `direct`: records at their own index, one pass when there are as
    // many as slots (n = 3), the general passes otherwise.
    for f in ["scatter", "tupled", "reversed", "lists", "direct"] {
        for n in [3, 5] {
            let args = [v.clone(), i(n)];
            assert_eq!(compare_src(src, f, &args), Outcome::Value, "{f} {n}");
        }
        // A contribution past the end: E-Accum-Bot.
        let e = native_error(src, f, &[v.clone(), i(2)]);
        assert_eq!(e.code(), "index-out-of-bounds", "{f}");
        let e = native_error(src, f, &[v.clone(), i(-1)]);
        assert!(
            ["negative-size", "index-out-of-bounds"].contains(&e.code()),
            "{f}: {e}"
        );
    }
    // A part is ⊥ (v[3]): the parts' guard fails and E-Build's ⊥ is kept.
    assert_eq!(
        compare_src(src, "short", &[v.clone(), i(3)]),
        Outcome::Value
    );
    let e = native_error(src, "short", &[v.clone(), i(4)]);
    assert_eq!(e, CodegenError::IndexOutOfBounds { index: 3, len: 3 });
    // Nothing but the result in the arena: 2·10⁵ doubles, 1.6 MB (the
    // parts, their descriptors and the joined list would be 9.6 MB more).
    let n = 200_000;
    let big: Vec<f64> = (0..n).map(|k| k as f64).collect();
    let native = compile(&load_entry(src, "scatter"));
    let o = native
        .call_slices(&[Arg::F64s(&big), Arg::I64(n as i64)])
        .expect("runs");
    assert!(
        o.arena_bytes() <= 2 * 8 * n,
        "scatter: {} arena bytes for a {}-byte result",
        o.arena_bytes(),
        8 * n
    );
}

/// Note [Fusion], small arrays: a `build` of a literal size of at most
/// four elements, read only by `get` and `length`, is computed at its
/// binding into registers (bundle adjustment's 3-vectors of dual
/// numbers), as is an array literal that small read at a variable index
/// (its cross product): no memory, and values and ⊥ codes as the evaluator's — a
/// read at a literal index, at a variable one (a chain of selects), out
/// of bounds either way, an element that is ⊥ (the first failing one, as
/// E-Build), elements that are pairs and arrays. A loop of 10⁵ iterations
/// each building a 3-vector takes no arena at all (2.4 MB built).
#[test]
fn small_arrays_live_in_registers() {
    use fsmooth::codegen::Arg;
    let src = "let lit (v: Vector) = let w = build 3 (fun k -> sin (v[k]) * 2.0) in w[0] + w[2] * toDouble (length w)\n\
               let var (v: Vector) (j: Index) = let w = build 4 (fun k -> sin (v[k]) + toDouble k) in w[j] * w[3 - j]\n\
               let bot (v: Vector) (d: Index) = let w = build 3 (fun k -> toDouble (10 / (k - d)) + sin (v[k])) in w[0] + w[1]\n\
               let pairs (v: Vector) (j: Index) = let w = build 2 (fun k -> (sin (v[k]), build (k + 1) (fun m -> v[m]))) in fst w[j] + (snd w[1 - j])[0]\n\
               let lits (v: Vector) (j: Index) = let w = [sin (v[0]), v[1] / 2.0, v[2]] in w[j] * toDouble (length w) + w[1]\n\
               let looped (v: Vector) = ifold (fun s i -> let w = build 3 (fun k -> v[i] / (toDouble k + 1.0)) in s + w[0] * w[1] + w[2] + w[i - 3 * (i / 3)]) 0.0 (length v)\n";
    let v = vector(&[0.5, -1.25, 2.0, 0.75]);
    let i = Value::Index;
    let cases: Vec<(&str, Vec<Value>, Outcome)> = vec![
        ("lit", vec![v.clone()], Outcome::Value),
        ("var", vec![v.clone(), i(1)], Outcome::Value),
        ("var", vec![v.clone(), i(3)], Outcome::Value),
        ("var", vec![v.clone(), i(4)], Outcome::Bottom),
        ("var", vec![v.clone(), i(-1)], Outcome::Bottom),
        ("bot", vec![v.clone(), i(5)], Outcome::Value),
        ("bot", vec![v.clone(), i(1)], Outcome::Bottom),
        ("pairs", vec![v.clone(), i(0)], Outcome::Value),
        ("pairs", vec![v.clone(), i(1)], Outcome::Value),
        ("pairs", vec![v.clone(), i(2)], Outcome::Bottom),
        ("lits", vec![v.clone(), i(2)], Outcome::Value),
        ("lits", vec![v.clone(), i(3)], Outcome::Bottom),
        ("looped", vec![v.clone()], Outcome::Value),
    ];
    for (f, args, want) in cases {
        assert_eq!(compare_src(src, f, &args), want, "{f} {args:?}");
    }
    assert_eq!(
        native_error(src, "var", &[v.clone(), i(4)]),
        CodegenError::IndexOutOfBounds { index: 4, len: 4 }
    );
    assert_eq!(
        native_error(src, "bot", &[v.clone(), i(1)]).code(),
        "division-by-zero"
    );
    let n = 100_000;
    let big: Vec<f64> = (0..n).map(|k| k as f64 * 1e-3).collect();
    let o = compile(&load_entry(src, "looped"))
        .call_slices(&[Arg::F64s(&big)])
        .expect("runs");
    assert_eq!(o.arena_bytes(), 0, "looped: arena bytes");
}

/// A loop over `0 .. length a` reads `a[i]` without a bounds test
/// (`codegen/lower.rs`, `in_bounds`); every other read keeps its test:
/// another array at the same index, the same array at another index, a
/// loop over another length.
#[test]
fn reads_at_a_loops_own_length_skip_only_their_own_test() {
    let src = "let dot (a: Vector) (b: Vector) = ifold (fun s i -> s + a[i] * b[i]) 0.0 (length a)\n\
               let next (a: Vector) = ifold (fun s i -> s + a[i] * a[i + 1]) 0.0 (length a)\n\
               let other (a: Vector) (b: Vector) = ifold (fun s i -> s + a[i]) 0.0 (length b)\n\
               let nested (m: Matrix) = ifold (fun s i -> s + ifold (fun t j -> t + m[i][j]) 0.0 (length m)) 0.0 (length m)\n";
    let (a, short) = (vector(&[1.0, 2.0, 3.0]), vector(&[4.0, 5.0]));
    assert_eq!(
        compare_src(src, "dot", &[a.clone(), a.clone()]),
        Outcome::Value
    );
    assert_eq!(
        compare_src(src, "other", &[a.clone(), short.clone()]),
        Outcome::Value
    );
    let oob = |index, len| CodegenError::IndexOutOfBounds { index, len };
    assert_eq!(
        native_error(src, "dot", &[a.clone(), short.clone()]),
        oob(2, 2)
    );
    assert_eq!(
        native_error(src, "next", std::slice::from_ref(&a)),
        oob(3, 3)
    );
    assert_eq!(
        native_error(src, "other", &[short.clone(), a.clone()]),
        oob(2, 2)
    );
    // Rows of different lengths: m[i][j] is not a read of `m` at its length.
    let ragged = Value::array(vec![a.clone(), short.clone(), a.clone()]);
    assert_eq!(native_error(src, "nested", &[ragged]), oob(2, 2));
}

/// Bare contributions (spec/ad-reverse.md): an array read once at the top
/// of a loop body, `a[i]`, contributes one pair `(i, ā)` per element or
/// iteration, which the backward loop stores bare; the list of
/// contributions is the array of those pairs, so the dot product's reverse
/// program joins nothing (it joined one one-element list per read). Native
/// and evaluator agree for each loop kind, an element that gets no
/// cotangent (a read only compared), and a read at a constant index.
#[test]
fn arrays_read_once_in_a_loop_contribute_bare_pairs() {
    let src = "let dot (a: Vector) (b: Vector) = ifold (fun s i -> s + a[i] * b[i]) 0.0 (length a)\n\
               let scan (a: Vector) = iscan (fun s i -> s * a[i]) 1.0 (length a)\n\
               let elems (a: Vector) (b: Vector) = build (length a) (fun i -> a[i] * b[0])\n\
               let unused (a: Vector) = ifold (fun s i -> let x = a[i] in if x > 0.0 then s + 1.0 else s * 2.0) 0.5 (length a)\n";
    let (a, b) = (vector(&[1.5, -2.0, 3.0]), vector(&[0.5, 4.0, -1.0]));
    for (f, p, args) in [
        ("dot", "a", vec![a.clone(), b.clone()]),
        ("dot", "b", vec![a.clone(), b.clone()]),
        ("scan", "a", vec![a.clone()]),
        ("elems", "a", vec![a.clone(), b.clone()]),
        ("elems", "b", vec![a.clone(), b.clone()]),
        ("unused", "a", vec![a.clone()]),
    ] {
        assert_eq!(gradient_programs_agree(src, f, p, &args), 2, "{f}/{p}");
    }
    let rev = pipeline::reverse_derivative(src, "dot", "a").expect("reverse mode");
    let text = fsmooth::syntax::print_program(&rev.rev.program);
    assert!(!text.contains("concat"), "{text}");
}

/// Recomputed bindings (spec/ad-reverse.md §4.1): `restore` evaluates
/// reads, `+ − *`, comparisons, pairs and projections again instead of
/// reading them from the tape, so a loop whose body has nothing else tapes
/// only its states — or, a sum being linear in its state (R-IFold-Linear),
/// nothing at all (§4.1, "Untaped loops"). The dot product's reverse
/// program at n = 10⁵: its arena is 0.8 MB, the gradient alone (the
/// products are a pull array read only for their length, and the pairs
/// `(i, b[i])` are added where they are computed: Note [Fusion],
/// "Accumulations"). Adding the built pairs made it 2.4 MB, taping the
/// states and the backward scan's records 7.2 MB, and a tape of the
/// body's four values per iteration 10.4 MB. The gradient is the
/// evaluator's, bit for bit, on both loop kinds and through a
/// conditional.
#[test]
fn restore_recomputes_reads_and_arithmetic_instead_of_taping_them() {
    use fsmooth::codegen::Arg;
    let src = "let dot (a: Vector) (b: Vector) = ifold (fun s i -> s + a[i] * b[i]) 0.0 (length a)\n\
               let prods (a: Vector) = iscan (fun s i -> s * (a[i] - 1.0)) 1.0 (length a)\n\
               let clip (a: Vector) = build (length a) (fun i -> let x = a[i] * 2.0 in if x < 1.0 then x * x else x / 3.0)\n";
    let a = vector(&[1.5, -2.0, 3.0, 0.25]);
    for (f, args) in [
        ("dot", vec![a.clone(), a.clone()]),
        ("prods", vec![a.clone()]),
        ("clip", vec![a.clone()]),
    ] {
        assert_eq!(gradient_programs_agree(src, f, "a", &args), 2, "{f}");
    }
    let rev = pipeline::reverse_derivative(src, "dot", "a").expect("reverse mode");
    let n = 100_000;
    let (u, v): (Vec<f64>, Vec<f64>) = (0..n).map(|k| (k as f64, 1.0 - k as f64)).unzip();
    let o = compile(&rev.rev)
        .call_slices(&[Arg::F64s(&u), Arg::F64s(&v)])
        .expect("runs");
    assert!(
        o.arena_bytes() <= 10 * n,
        "{} arena bytes at n = {n}",
        o.arena_bytes()
    );
}

/// Note [Hoisting] (`codegen/hoist.rs`): a loop's invariant bindings are
/// computed once before it, and still give E-Build's and E-IFold-Succ's
/// first ⊥: none when the loop runs zero times (`empty`, `folded`), the
/// loop's own for a negative size (`neg`), an earlier failing read's
/// (`order`), and the first of several moved values of every shape
/// (`many`: Double, array, pair and Index under one `0 < n` test), with
/// the cheap bindings a moved one needs (`chain`); speculated past a
/// binding that can fail (rule 3: `spec`, `specdep`, and `speclen`, whose
/// speculated length feeds a speculated loop that fails).
#[test]
fn loop_invariants_move_out_and_keep_the_first_bottom() {
    use fsmooth::codegen::Arg;
    let src = "let empty (x: Double) (v: Vector) = build (length v) (fun i -> v[i] + 1.0 / x)\n\
               let order (x: Double) (v: Vector) = build (length v) (fun i -> v[i + 5] + 1.0 / x)\n\
               let safe (x: Double) (v: Vector) = build (length v) (fun i -> let a = v[i] * 2.0 in a + sqrt x)\n\
               let folded (x: Double) (v: Vector) = ifold (fun s i -> s + v[i] * log x) 0.0 (length v)\n\
               let neg (x: Double) (k: Index) = build (k - 3) (fun i -> toDouble i + 1.0 / x)\n\
               let many (x: Double) (v: Vector) (m: Index) = build (length v) (fun i -> let a = 1.0 / x in let w = build m (fun k -> toDouble k / x) in let p = if x > 1.0 then (a, w) else (a + 1.0, w) in let q = 10 / m in v[i] * fst p + toDouble q + (snd p)[0])\n\
               let nested (x: Double) (m: Matrix) = build (length m) (fun i -> build (length m[i]) (fun j -> m[i][j] * (1.0 / x) + sin x))\n\
               let chain (x: Double) (v: Vector) = build (length v) (fun i -> let c = x * 2.0 in let d = 1.0 / c in v[i] * d + c)\n\
               let spec (x: Double) (v: Vector) (k: Index) = build (length v) (fun i -> let a = 10 / (i - k) in toDouble a + sqrt x)\n\
               let specdep (x: Double) (v: Vector) = build (length v) (fun i -> let a = 1.0 / v[i] in let s = sqrt x in let w = build 2 (fun j -> 1.0 / (s - toDouble j)) in a + cos s + w[1])\n\
               let speclen (v: Vector) = build (length v) (fun i -> let a = 1.0 / v[i] in let w = build 2 (fun j -> toDouble j + 1.0) in let u = build (length w) (fun j -> w[j] / 0.0) in a + u[0])\n\
               let specarena (v: Vector) (w: Vector) = ifold (fun s i -> let a = 1.0 / v[i] in let u = build (length w) (fun k -> w[k] / 2.0) in s + a * (concat [u, u])[i]) 0.0 (length v)\n\
               let copies (v: Vector) (w: Vector) = ifold (fun s i -> let u = concat [w, w] in s + u[i] * v[i]) 0.0 (length v)\n";
    let (d, i) = (Value::Double, Value::Index);
    let v = vector(&[0.5, -1.25, 2.0]);
    let e = vector(&[]);
    let m =
        |rows: &[&[f64]]| Value::Array(std::rc::Rc::new(rows.iter().map(|r| vector(r)).collect()));
    let cases: Vec<(&str, Vec<Value>, Outcome, Option<&str>)> = vec![
        ("empty", vec![d(0.0), e.clone()], Outcome::Value, None),
        (
            "empty",
            vec![d(0.0), v.clone()],
            Outcome::Bottom,
            Some("division-by-zero"),
        ),
        ("empty", vec![d(4.0), v.clone()], Outcome::Value, None),
        (
            "order",
            vec![d(0.0), v.clone()],
            Outcome::Bottom,
            Some("index-out-of-bounds"),
        ),
        (
            "safe",
            vec![d(-1.0), v.clone()],
            Outcome::Bottom,
            Some("domain-error"),
        ),
        ("safe", vec![d(-1.0), e.clone()], Outcome::Value, None),
        ("folded", vec![d(-1.0), e.clone()], Outcome::Value, None),
        (
            "folded",
            vec![d(-1.0), v.clone()],
            Outcome::Bottom,
            Some("domain-error"),
        ),
        ("folded", vec![d(3.0), v.clone()], Outcome::Value, None),
        (
            "neg",
            vec![d(0.0), i(1)],
            Outcome::Bottom,
            Some("negative-size"),
        ),
        ("neg", vec![d(0.0), i(3)], Outcome::Value, None),
        (
            "neg",
            vec![d(0.0), i(5)],
            Outcome::Bottom,
            Some("division-by-zero"),
        ),
        ("neg", vec![d(2.0), i(5)], Outcome::Value, None),
        ("many", vec![d(2.0), v.clone(), i(2)], Outcome::Value, None),
        ("many", vec![d(2.0), e.clone(), i(0)], Outcome::Value, None),
        (
            "many",
            vec![d(2.0), v.clone(), i(0)],
            Outcome::Bottom,
            Some("division-by-zero"),
        ),
        (
            "many",
            vec![d(0.0), v.clone(), i(2)],
            Outcome::Bottom,
            Some("division-by-zero"),
        ),
        (
            "many",
            vec![d(2.0), v.clone(), i(-1)],
            Outcome::Bottom,
            Some("negative-size"),
        ),
        ("nested", vec![d(0.0), m(&[&[], &[]])], Outcome::Value, None),
        (
            "nested",
            vec![d(0.0), m(&[&[], &[1.0, 2.0]])],
            Outcome::Bottom,
            Some("division-by-zero"),
        ),
        (
            "nested",
            vec![d(2.0), m(&[&[3.0], &[1.0, 2.0]])],
            Outcome::Value,
            None,
        ),
        ("chain", vec![d(0.0), e.clone()], Outcome::Value, None),
        (
            "chain",
            vec![d(0.0), v.clone()],
            Outcome::Bottom,
            Some("division-by-zero"),
        ),
        ("chain", vec![d(0.5), v.clone()], Outcome::Value, None),
        (
            "spec",
            vec![d(-1.0), v.clone(), i(0)],
            Outcome::Bottom,
            Some("division-by-zero"),
        ),
        (
            "spec",
            vec![d(-1.0), v.clone(), i(5)],
            Outcome::Bottom,
            Some("domain-error"),
        ),
        (
            "spec",
            vec![d(4.0), v.clone(), i(1)],
            Outcome::Bottom,
            Some("division-by-zero"),
        ),
        ("spec", vec![d(4.0), v.clone(), i(7)], Outcome::Value, None),
        ("spec", vec![d(-1.0), e.clone(), i(0)], Outcome::Value, None),
        (
            "specdep",
            vec![d(-1.0), vector(&[0.0])],
            Outcome::Bottom,
            Some("division-by-zero"),
        ),
        (
            "specdep",
            vec![d(-1.0), vector(&[2.0])],
            Outcome::Bottom,
            Some("domain-error"),
        ),
        (
            "specdep",
            vec![d(0.0), vector(&[2.0])],
            Outcome::Bottom,
            Some("division-by-zero"),
        ),
        (
            "specdep",
            vec![d(4.0), vector(&[2.0, 4.0])],
            Outcome::Value,
            None,
        ),
        (
            "speclen",
            vec![vector(&[0.0])],
            Outcome::Bottom,
            Some("division-by-zero"),
        ),
        (
            "speclen",
            vec![vector(&[2.0])],
            Outcome::Bottom,
            Some("division-by-zero"),
        ),
        ("speclen", vec![e.clone()], Outcome::Value, None),
        (
            "specarena",
            vec![v.clone(), v.clone()],
            Outcome::Value,
            None,
        ),
        ("copies", vec![v.clone(), v.clone()], Outcome::Value, None),
    ];
    assert_cases(src, cases);
    // The arena grows by chunks of at least 1 MiB: one chunk means the
    // invariant array was built once, not once per iteration.
    let arena = |f: &str, args: &[Arg]| {
        let o = compile(&load_entry(src, f))
            .call_slices(args)
            .expect("runs");
        assert!(
            o.arena_bytes() <= 1 << 20,
            "{f}: {} arena bytes",
            o.arena_bytes()
        );
    };
    let n = 1_000;
    let big: Vec<f64> = (0..n).map(|k| k as f64 * 1e-3).collect();
    // `concat [w, w]` is invariant (10³ iterations of 16 KB without
    // hoisting).
    arena("copies", &[Arg::F64s(&big), Arg::F64s(&big)]);
    // Rule 3: the invariant `u` after a division by `v[i]` is speculated,
    // built once (with `concat`, 16 KB per iteration otherwise).
    let nonzero: Vec<f64> = big.iter().map(|x| x + 1.0).collect();
    arena("specarena", &[Arg::F64s(&nonzero), Arg::F64s(&big)]);
}

/// Note [Scratch arrays]: arrays an iteration builds and nobody keeps
/// come from the scratch stacks and are freed when the iteration ends; an
/// array that can outlive its iteration (through a fold's state, a pair,
/// a conditional, an array of arrays) never is; a pair's components are
/// followed apart. Each program agrees with
/// the evaluator, the memory of the first two stays a few chunks where
/// keeping every iteration's arrays would take tens of MiB, and the
/// listing shows which loop releases which stack.
#[test]
fn scratch_arrays_are_freed_per_iteration_and_only_when_dead() {
    use fsmooth::codegen::Arg;
    // Division keeps the builds from being fused (Note [Fusion]); `m - m +
    // 4` is a size that is not a literal, so that loop is not unrolled
    // (Note [Unrolling]).
    let src = "let temps (v: Vector) (m: Index) = build (length v) (fun i -> let t = build m (fun k -> v[i] / toDouble (k + 1)) in t[0] + t[m - 1])\n\
               let columns (v: Vector) (m: Index) = build (m - m + 4) (fun c -> let ps = build (length v) (fun i -> let t = build m (fun k -> v[i] / toDouble (k + c + 1)) in build 2 (fun j -> t[j] * 2.0)) in build (2 * length v) (fun k -> ps[k / 2][k - 2 * (k / 2)]))\n\
               let large (v: Vector) (m: Index) = build 3 (fun c -> let big = build m (fun k -> toDouble (k + c) / 2.0) in ifold (fun s i -> let t = build 8 (fun k -> big[k + i] / v[i]) in s + t[7]) 0.0 (length v))\n\
               let best (v: Vector) = ifold (fun s i -> let t = build 3 (fun k -> v[i] / toDouble (k + 1)) in if t[0] > fst s then (t[0], t) else s) (0.0 - 1000.0, v) (length v)\n\
               let kept (v: Vector) = build (length v) (fun i -> let t = build 2 (fun k -> v[i] / toDouble (k + 1)) in t)\n\
               let folds (v: Vector) = build 2 (fun c -> let acc = ifold (fun s i -> build 2 (fun k -> s[1 - k] + v[i] / toDouble (c + 1))) (build 2 (fun k -> toDouble k)) (length v) in acc[0] * 10.0 + acc[1])\n\
               let failing (v: Vector) (m: Index) = build 3 (fun c -> let big = build m (fun k -> toDouble (k + c)) in ifold (fun s i -> let t = build 4 (fun k -> big[k + i] / v[i]) in s + t[3]) 0.0 (length v))\n";
    let i = Value::Index;
    let v = vector(&[5.0, 1.0, 2.0, 3.0]);
    let cases: Vec<(&str, Vec<Value>, Outcome)> = vec![
        ("temps", vec![v.clone(), i(3)], Outcome::Value),
        ("temps", vec![vector(&[]), i(3)], Outcome::Value),
        ("temps", vec![v.clone(), i(0)], Outcome::Bottom),
        ("columns", vec![v.clone(), i(3)], Outcome::Value),
        ("large", vec![v.clone(), i(40)], Outcome::Value),
        ("large", vec![v.clone(), i(9)], Outcome::Bottom),
        ("best", vec![v.clone()], Outcome::Value),
        ("kept", vec![v.clone()], Outcome::Value),
        ("folds", vec![v.clone()], Outcome::Value),
        ("failing", vec![v.clone(), i(10)], Outcome::Value),
        (
            "failing",
            vec![vector(&[1.0, 2.0, 0.0, 4.0]), i(10)],
            Outcome::Bottom,
        ),
    ];
    for (f, args, want) in cases {
        assert_eq!(compare_src(src, f, &args), want, "{f} {args:?}");
    }
    // Every iteration's arrays, kept: `temps` 8 MB, `columns` 4 × (8 MB of
    // temporaries + 0.5 MB of points). Freed per iteration: the result,
    // one chunk per stack, and one pass's points.
    let arena = |f: &str, args: &[Arg], most: usize| {
        let o = compile(&load_entry(src, f))
            .call_slices(args)
            .expect("runs");
        assert!(
            o.arena_bytes() <= most,
            "{f}: {} arena bytes",
            o.arena_bytes()
        );
    };
    let big: Vec<f64> = (0..1_000).map(|k| 1.0 + k as f64 * 1e-3).collect();
    arena("temps", &[Arg::F64s(&big), Arg::I64(1_000)], 3 << 20);
    let many: Vec<f64> = (0..10_000).map(|k| 1.0 + k as f64 * 1e-4).collect();
    arena("columns", &[Arg::F64s(&many), Arg::I64(100)], 4 << 20);
    // A large array (a chunk of its own) before each pass's temporaries.
    let large = compile(&load_entry(src, "large"))
        .call_slices(&[Arg::F64s(&many), Arg::I64(100_000)])
        .expect("runs");
    assert!(large.arena_bytes() <= 8 << 20, "{}", large.arena_bytes());
    // The listing names the releasing loops: in `columns`, the points'
    // loop releases its temporaries (stack 0); the columns' loop releases
    // `ps` (stack 0) and the points it holds, built in the points' loop
    // (stack 1).
    let listing = listing_of(src, "columns");
    let rows: Vec<&str> = listing
        .lines()
        .filter(|l| l.contains(" releases stack "))
        .collect();
    let stack = |k: &str| rows.iter().filter(|r| r.contains(k)).count();
    assert_eq!(rows.len(), 3, "{listing}");
    assert_eq!(stack("releases stack 0"), 2, "{listing}");
    assert_eq!(stack("releases stack 1"), 1, "{listing}");
    // The arrays that outlive an iteration stay in the main arena.
    for f in ["best", "kept"] {
        let listing = listing_of(src, f);
        assert!(
            listing.contains(";; none: every array is in the main arena"),
            "{f}: {listing}"
        );
    }
    // Flow is followed component by component: an iteration's array `z`
    // in a fold's state beside an accumulator that escapes (the shape of
    // reverse mode's inner loops) dies with the iteration; when the fold
    // swaps the components, `z` can become the accumulator, and stays in
    // the main arena.
    let src = "let paired (v: Vector) =\n\
               \x20 ifold (fun acc c ->\n\
               \x20     let z = build (length v) (fun k -> v[k] / toDouble (c + 1))\n\
               \x20     let st = ifold (fun s i -> (addAt (fst s) i (v[i] / 2.0), addAt (snd s) i v[i])) (acc, z) (length v)\n\
               \x20     addAt (fst st) 0 (snd st)[1])\n\
               \x20   (build (length v) (fun k -> toDouble k)) (length v)\n\
               let swapped (v: Vector) =\n\
               \x20 ifold (fun acc c ->\n\
               \x20     let z = build (length v) (fun k -> v[k] / toDouble (c + 1))\n\
               \x20     let st = ifold (fun s i -> (snd s, fst s)) (acc, z) (c + 1)\n\
               \x20     addAt (fst st) 0 1.0)\n\
               \x20   (build (length v) (fun k -> toDouble k)) (length v)\n";
    for (f, releases) in [("paired", 1), ("swapped", 0)] {
        assert_eq!(
            compare_src(src, f, std::slice::from_ref(&v)),
            Outcome::Value,
            "{f}"
        );
        let listing = listing_of(src, f);
        let rows = listing
            .lines()
            .filter(|l| l.contains(" releases stack 0: "))
            .count();
        assert_eq!(rows, releases, "{f}: {listing}");
    }
}

/// Note [Vertical fusion]: a `build` whose elements the next loop reads
/// one per iteration is computed in that loop, so only one element is
/// alive at a time; the first ⊥ stays the evaluator's, and the merge is
/// refused where the consumer or a binding in between can fail first.
#[test]
fn producers_are_built_in_the_loop_that_reads_them() {
    use fsmooth::codegen::Arg;
    let src = "let cols (v: Vector) (k: Index) = let d = build 8 (fun r -> build (length v) (fun i -> v[i] / toDouble (r - k))) in build (length d) (fun c -> let col = d[c] in build (length col) (fun i -> col[i] * 2.0))\n\
               let consfail (v: Vector) (k: Index) = let d = build 3 (fun r -> build (length v) (fun i -> v[i] / toDouble (r - k))) in build (length d) (fun c -> let col = d[c] in let z = v[c + 5] in build (length col) (fun i -> col[i] * z))\n\
               let between (v: Vector) (k: Index) = let d = build 3 (fun r -> build (length v) (fun i -> v[i] / toDouble (r - k))) in let z = v[k + 5] in build (length d) (fun c -> let col = d[c] in build (length col) (fun i -> col[i] + z))\n\
               let negsize (v: Vector) (k: Index) = let d = build (k - 2) (fun r -> build (length v) (fun i -> v[i] / toDouble (r + 1))) in build (length d) (fun c -> let col = d[c] in build (length col) (fun i -> col[i] * 2.0))\n\
               let folded (v: Vector) (k: Index) = let d = build 3 (fun r -> build (length v) (fun i -> v[i] / toDouble (r - k))) in ifold (fun s c -> let col = d[c] in s + ifold (fun a i -> a + col[i]) 0.0 (length col)) 0.0 3\n";
    let i = Value::Index;
    let v = vector(&[0.5, -1.25, 2.0]);
    let cases: Vec<(&str, Vec<Value>, Outcome, Option<&str>)> = vec![
        ("cols", vec![v.clone(), i(-1)], Outcome::Value, None),
        (
            "cols",
            vec![v.clone(), i(2)],
            Outcome::Bottom,
            Some("division-by-zero"),
        ),
        ("cols", vec![vector(&[]), i(2)], Outcome::Value, None),
        // The producer fails at r = 1 before the consumer's read out of
        // bounds at c = 0 (merged, the consumer would fail first).
        (
            "consfail",
            vec![v.clone(), i(1)],
            Outcome::Bottom,
            Some("division-by-zero"),
        ),
        (
            "consfail",
            vec![v.clone(), i(-1)],
            Outcome::Bottom,
            Some("index-out-of-bounds"),
        ),
        (
            "between",
            vec![v.clone(), i(1)],
            Outcome::Bottom,
            Some("division-by-zero"),
        ),
        (
            "between",
            vec![v.clone(), i(-1)],
            Outcome::Bottom,
            Some("index-out-of-bounds"),
        ),
        (
            "negsize",
            vec![v.clone(), i(0)],
            Outcome::Bottom,
            Some("negative-size"),
        ),
        ("negsize", vec![v.clone(), i(4)], Outcome::Value, None),
        ("folded", vec![v.clone(), i(-1)], Outcome::Value, None),
        (
            "folded",
            vec![v.clone(), i(2)],
            Outcome::Bottom,
            Some("division-by-zero"),
        ),
    ];
    assert_cases(src, cases);
    // Merged, one column of `d` is alive at a time: the result (6.4 MB)
    // and a column, not the result and all of `d` (12.8 MB).
    let big: Vec<f64> = (0..100_000).map(|k| 1.0 + k as f64 * 1e-5).collect();
    let o = compile(&load_entry(src, "cols"))
        .call_slices(&[Arg::F64s(&big), Arg::I64(-1)])
        .expect("runs");
    assert!(
        o.arena_bytes() <= 9 << 20,
        "{} arena bytes",
        o.arena_bytes()
    );
}

/// Note [Vertical fusion], nested: once a column's producer is merged into
/// the loop that reads the columns, the column itself (here a flattening,
/// as the Jacobian wrapper's) feeds that loop's inner loop and is merged
/// too, so it is never built; values and ⊥ stay the evaluator's.
#[test]
fn merged_columns_are_merged_again_into_their_readers() {
    let src = "let twice (v: Vector) (k: Index) = let d = build 8 (fun r -> let p = build (length v) (fun i -> v[i] / toDouble (r - k)) in build (2 * length v) (fun j -> p[j / 2] + toDouble j)) in build (length d) (fun c -> let col = d[c] in build (length col) (fun i -> col[i] * 2.0))\n";
    let i = Value::Index;
    let v = vector(&[0.5, -1.25, 2.0]);
    assert_eq!(
        compare_src(src, "twice", &[v.clone(), i(-1)]),
        Outcome::Value
    );
    assert_eq!(
        compare_src(src, "twice", &[vector(&[]), i(3)]),
        Outcome::Value
    );
    assert_eq!(
        compare_src(src, "twice", &[v.clone(), i(3)]),
        Outcome::Bottom
    );
    assert_eq!(
        native_error(src, "twice", &[v, i(3)]).code(),
        "division-by-zero"
    );
    // The normal form as lowered: the columns' loop, `p`, and the inner
    // loop that now computes the flattened column's elements itself.
    let normal = lowered_normal_form(src, "twice");
    let builds = normal.lines().filter(|l| l.contains("= build ")).count();
    assert_eq!(builds, 3, "{normal}");
}

/// Each case `(entry, arguments, outcome, ⊥ code)`: native code agrees
/// with the evaluator, with that outcome and, for a ⊥, that code.
fn assert_cases(src: &str, cases: Vec<(&str, Vec<Value>, Outcome, Option<&str>)>) {
    for (f, args, want, code) in cases {
        assert_eq!(compare_src(src, f, &args), want, "{f} {args:?}");
        if let Some(code) = code {
            assert_eq!(native_error(src, f, &args).code(), code, "{f} {args:?}");
        }
    }
}

/// The `compile --listing` text of entry `name`: its normal form as
/// lowered, where its arrays live, its Cranelift IR and machine code.
fn listing_of(src: &str, name: &str) -> String {
    let options = AotOptions {
        symbol: name.into(),
        origin: "test".into(),
        listing: true,
    };
    compile_object(&load_entry(src, name), &options)
        .expect("compiles")
        .listing
        .expect("a listing")
}

/// The normal form of `name` as the lowering sees it (after fusion's
/// forwarding, unrolling and hoisting), from `compile --listing`.
fn lowered_normal_form(src: &str, name: &str) -> String {
    listing_of(src, name)
        .split(";; Cranelift IR")
        .next()
        .expect("the normal form first")
        .to_string()
}

/// The Cranelift IR of `name`, as lowered, from `compile --listing`.
fn lowered_ir(src: &str, name: &str) -> String {
    let listing = listing_of(src, name);
    let ir = listing.split(";; Cranelift IR").nth(1).expect("the IR");
    ir.split(";; machine code")
        .next()
        .expect("the IR")
        .to_string()
}

/// Note [Vertical fusion]: a `build` summed by an `ifold` over its length
/// is merged into the fold when its size is a `length` (never negative,
/// so E-IFold-Bot and E-Build-Bot cannot differ): NNMF's rows then need
/// no buffer. Values and ⊥ (a short row, `log` of a negative) stay the
/// evaluator's.
#[test]
fn builds_summed_over_a_length_are_merged_into_the_fold() {
    let src = "let s (v: Vector) (a: Matrix) = vectorSum (build (length a) (fun i -> vectorSum (build (length v) (fun j -> log (v[j]) + a[i][j]))))\n";
    let rows = |rows: &[&[f64]]| Value::array(rows.iter().map(|r| vector(r)).collect());
    let v = vector(&[0.5, 2.0, 3.0]);
    assert_cases(
        src,
        vec![
            (
                "s",
                vec![v.clone(), rows(&[&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]])],
                Outcome::Value,
                None,
            ),
            (
                "s",
                vec![vector(&[]), rows(&[&[1.0]])],
                Outcome::Value,
                None,
            ),
            (
                "s",
                vec![v.clone(), rows(&[&[1.0, 2.0, 3.0], &[4.0, 5.0]])],
                Outcome::Bottom,
                Some("index-out-of-bounds"),
            ),
            (
                "s",
                vec![vector(&[0.5, -2.0]), rows(&[&[1.0, 2.0]])],
                Outcome::Bottom,
                Some("domain-error"),
            ),
        ],
    );
    let normal = lowered_normal_form(src, "s");
    assert!(!normal.contains("= build "), "{normal}");
}

/// Note [Hoisting]: a projection (or `length`) of a value bound outside a
/// loop leaves the loop, so a `build` reading the projected array at its
/// index is simple (Note [Fusion], condition 2) and computed where it is
/// read; Note [Fusion], "through tuples": the `length` of an array literal
/// is its number of items, and a literal kept only for it goes (its
/// items' reads stay, they can be ⊥). Values and ⊥ are the evaluator's.
#[test]
fn projections_leave_loops_and_literal_lengths_are_literals() {
    let src = "let proj (v: Vector) (w: Vector) = let q = ifold (fun s i -> (fst s + v[i], snd s)) (0.0, w) (length v) in let t = build (length v) (fun i -> (snd q)[i] * 2.0) in ifold (fun a i -> a + t[i] * fst q) 0.0 (length v)\n\
               let lit (v: Vector) = let t = [v[0] * 2.0, v[1], v[2]] in toDouble (length t) * v[1]\n";
    let v = vector(&[0.5, -1.25, 2.0]);
    let w = vector(&[3.0, 0.25, -4.0]);
    assert_eq!(compare_src(src, "proj", &[v.clone(), w]), Outcome::Value);
    assert_eq!(
        compare_src(src, "proj", &[v.clone(), vector(&[1.0])]),
        Outcome::Bottom
    );
    assert_eq!(
        compare_src(src, "lit", std::slice::from_ref(&v)),
        Outcome::Value
    );
    let short = [vector(&[1.0, 2.0])];
    assert_eq!(compare_src(src, "lit", &short), Outcome::Bottom);
    assert_eq!(
        native_error(src, "lit", &short).code(),
        "index-out-of-bounds"
    );
    // `snd q` at the top level, before the loop over `v` that reads it,
    // and `t` fused into that loop: one `build` fewer.
    let normal = lowered_normal_form(src, "proj");
    let lines: Vec<&str> = normal.lines().collect();
    let projection = lines
        .iter()
        .position(|l| l.contains("= snd(") && !l.starts_with(' '))
        .unwrap_or_else(|| panic!("no top-level projection:\n{normal}"));
    let reader = lines
        .iter()
        .position(|l| l.contains("= ifold ") && !l.starts_with(' ') && l.contains("0.0"))
        .unwrap_or_else(|| panic!("no top-level fold:\n{normal}"));
    assert!(projection < reader, "{normal}");
    // The literal is gone, its reads are not.
    let normal = lowered_normal_form(src, "lit");
    assert!(!normal.contains(" = ["), "{normal}");
    assert!(!normal.contains("length("), "{normal}");
    assert!(normal.contains("get(p'"), "{normal}");
}

/// Note [Versioning]: a loop whose array the rest of its block reads at
/// literal indices up to 2 runs, when its size is 3, in a copy of that rest
/// where the size is the literal 3 (unrolled: no `build` left there), and
/// as before otherwise; values and first ⊥ are the evaluator's either
/// way, and a speculative conditional (Note [Hoisting], rule 3) copied
/// into the versioned rest still continues rather than stops on a ⊥: with
/// `c[0] = 0` the speculated `r / c0` fails, yet the program's first ⊥ is
/// the read `xs[i][j + 3]` before it.
#[test]
fn loops_are_versioned_on_the_size_their_readers_imply() {
    let src = "let f (xs: Matrix) = build (length xs) (fun i -> let p = build (length xs[i]) (fun k -> 1.0 / xs[i][k]) in p[0] + p[1] * p[2])\n\
               let g (xs: Matrix) (c: Vector) = build (length xs) (fun i -> let p = build (length xs[i]) (fun k -> xs[i][k] * 2.0) in let r = p[2] in let c0 = c[0] in ifold (fun a j -> let q = xs[i][j + 3] in a + q * c[j] + r / c0 + p[1]) 0.0 (length c))\n";
    let rows = |rows: &[&[f64]]| Value::array(rows.iter().map(|r| vector(r)).collect());
    let cases: Vec<(&str, Vec<Value>, Outcome, Option<&str>)> = vec![
        (
            "f",
            vec![rows(&[&[1.0, 2.0, 4.0], &[0.5, 8.0, 2.0, 3.0]])],
            Outcome::Value,
            None,
        ),
        (
            "f",
            vec![rows(&[&[1.0, 2.0, 4.0], &[1.0, 2.0]])],
            Outcome::Bottom,
            Some("index-out-of-bounds"),
        ),
        // Element 1's division fails before the read of p[2] could.
        (
            "f",
            vec![rows(&[&[1.0, 0.0, 4.0]])],
            Outcome::Bottom,
            Some("division-by-zero"),
        ),
        (
            "f",
            vec![rows(&[&[1.0, 0.0]])],
            Outcome::Bottom,
            Some("division-by-zero"),
        ),
        ("f", vec![rows(&[])], Outcome::Value, None),
        (
            "g",
            vec![rows(&[&[1.0, 2.0, 3.0, 4.0, 5.0]]), vector(&[2.0, 1.0])],
            Outcome::Value,
            None,
        ),
        (
            "g",
            vec![rows(&[&[1.0, 2.0, 3.0]]), vector(&[0.0, 1.0])],
            Outcome::Bottom,
            Some("index-out-of-bounds"),
        ),
        (
            "g",
            vec![rows(&[&[1.0, 2.0, 3.0, 4.0]]), vector(&[0.0, 1.0])],
            Outcome::Bottom,
            Some("division-by-zero"),
        ),
        (
            "g",
            vec![rows(&[&[1.0, 2.0, 3.0]]), vector(&[])],
            Outcome::Bottom,
            Some("index-out-of-bounds"),
        ),
    ];
    assert_cases(src, cases);
    let normal = lowered_normal_form(src, "f");
    let versioned = normal
        .find("= if size'")
        .unwrap_or_else(|| panic!("not versioned:\n{normal}"));
    let special = &normal[versioned..];
    let special = &special[..special.find("else").expect("the generic branch")];
    assert!(!special.contains("= build "), "{normal}");
    assert!(normal[versioned..].contains("= build "), "{normal}");
}

/// Note [Unrolling]: a loop of a literal size of one to four iterations
/// (a literal, literal Index arithmetic, or the length of such an array)
/// becomes its copies in order, so values and the first ⊥ are the
/// evaluator's: in `order`, element 1's division by zero comes before
/// element 2's read out of bounds. A small array read at literal indices
/// after unrolling is never built; the same loop of a size that is not a
/// literal still is, on a scratch stack.
#[test]
fn small_loops_are_unrolled_exactly() {
    let src = "let order (v: Vector) (d: Double) = build 3 (fun k -> if k = 0 then v[0] else if k = 1 then 1.0 / d else v[k + 5])\n\
               let chain (v: Vector) = ifold (fun s i -> (fst s * v[i] + snd s, snd s - v[i])) (1.0, 0.0) 4\n\
               let nested (v: Vector) = build 2 (fun i -> build 3 (fun j -> v[i + j] * toDouble (i - j)))\n\
               let sizes (v: Vector) = let a = build (2 - 0 + 1) (fun i -> v[i] / 2.0) in ifold (fun s i -> s + a[i] * a[2 - i]) 0.0 (length a)\n\
               let local (v: Vector) = build (length v) (fun i -> let t = build 3 (fun k -> v[i] / toDouble (k + 1)) in t[0] + t[2])\n\
               let dynamic (v: Vector) (m: Index) = build (length v) (fun i -> let t = build (m - m + 3) (fun k -> v[i] / toDouble (k + 1)) in t[0] + t[2])\n";
    let i = Value::Index;
    let d = Value::Double;
    let v3 = vector(&[5.0, 1.0, 2.0]);
    let v10: Vec<f64> = (0..10).map(|k| 0.5 + k as f64).collect();
    let v10 = vector(&v10);
    let cases: Vec<(&str, Vec<Value>, Outcome)> = vec![
        ("order", vec![v10.clone(), d(2.0)], Outcome::Value),
        ("order", vec![v3.clone(), d(0.0)], Outcome::Bottom),
        ("order", vec![v3.clone(), d(2.0)], Outcome::Bottom),
        ("chain", vec![v10.clone()], Outcome::Value),
        ("chain", vec![v3.clone()], Outcome::Bottom),
        ("nested", vec![v10.clone()], Outcome::Value),
        ("nested", vec![vector(&[1.0, 2.0, 3.0])], Outcome::Bottom),
        ("sizes", vec![v3.clone()], Outcome::Value),
        ("local", vec![v10.clone()], Outcome::Value),
        ("dynamic", vec![v10.clone(), i(7)], Outcome::Value),
    ];
    for (f, args, want) in cases {
        assert_eq!(compare_src(src, f, &args), want, "{f} {args:?}");
    }
    // Which ⊥ comes first is the evaluator's.
    let e = load_entry(src, "order");
    let err = e
        .run(vec![v3.clone(), d(0.0)], FUEL, &mut |_, _| {})
        .expect_err("⊥");
    assert_eq!(err.code(), "division-by-zero");
    let releases = |f: &str| {
        let listing = listing_of(src, f);
        listing
            .lines()
            .filter(|l| l.contains(" releases stack "))
            .count()
    };
    assert_eq!(releases("local"), 0);
    assert_eq!(releases("dynamic"), 1);
}

/// Note [Jamming]: a loop whose iterations each run an inner scalar fold
/// runs two iterations at a time, the two folds in one loop (then the
/// longer one's rest): `build`, `ifold` and `iscan` over triangular and
/// ragged rows (either lane longer), a pair state, an inner fold that
/// reads the outer index; n odd, even, 0, 1. Every bit is the
/// evaluator's, and so is the first ⊥ when iteration r fails after its
/// fold while r + 1 would fail before its own: a read past a short row in
/// the second fold, a row past the end in the second `pre`, a negative
/// count — each with a division by zero in iteration r's `post`.
#[test]
fn inner_folds_of_two_iterations_run_jammed_exactly() {
    let src = "let tri (q: Matrix) (y: Vector) =\n\
               \x20 ifold (fun acc r -> let row = q[r] in let qy = ifold (fun t s -> t + row[s] * y[s]) 0.0 (r + 1) in acc + qy * qy) 0.0 (length q)\n\
               let rows (a: Matrix) (y: Vector) (d: Vector) =\n\
               \x20 build (length a) (fun r -> let q = ifold (fun t s -> t + a[r][s] * y[s]) 0.0 (length a[r]) in q / d[r])\n\
               let scan (a: Matrix) (y: Vector) =\n\
               \x20 iscan (fun acc r -> let row = a[r] in let p = ifold (fun t s -> (fst t + row[s], snd t * y[s])) (0.0, 1.0) (length row) in (fst acc * 0.5 + fst p, snd p)) (0.0, 1.0) (length a)\n\
               let idx (a: Matrix) (n: Index) (d: Vector) =\n\
               \x20 build n (fun r -> let k = r + 1 in let q = ifold (fun t s -> t + a[r][s] * toDouble k) 0.0 (length a[0]) in q / d[r])\n\
               let neg (y: Vector) (m: Index) (d: Vector) =\n\
               \x20 build (length d) (fun r -> let q = ifold (fun t s -> t + y[s]) 0.0 (m - r) in q / d[r])\n";
    let ix = Value::Index;
    let row = |len: usize, seed: f64| {
        vector(
            &(0..len)
                .map(|k| seed - 0.375 * k as f64)
                .collect::<Vec<_>>(),
        )
    };
    let matrix = |lens: &[usize]| {
        Value::array(
            lens.iter()
                .enumerate()
                .map(|(r, &len)| row(len, 1.25 + r as f64))
                .collect(),
        )
    };
    let tri = |n: usize| matrix(&(1..=n).collect::<Vec<_>>());
    let ones = |n: usize| vector(&vec![1.5; n]);
    let mut cases: Vec<(&str, Vec<Value>, Outcome)> = Vec::new();
    for n in [0, 1, 2, 5, 6] {
        cases.push(("tri", vec![tri(n), row(n, 0.5)], Outcome::Value));
        cases.push((
            "idx",
            vec![matrix(&vec![3; n]), ix(n as i64), ones(n)],
            Outcome::Value,
        ));
    }
    // Ragged rows: the first lane longer, the second, equal, empty.
    let ragged = [4, 2, 0, 3, 3, 1, 5];
    cases.push((
        "rows",
        vec![matrix(&ragged), row(5, 2.0), ones(7)],
        Outcome::Value,
    ));
    cases.push(("scan", vec![matrix(&ragged), row(5, 2.0)], Outcome::Value));
    cases.push(("scan", vec![matrix(&[]), row(5, 2.0)], Outcome::Value));
    cases.push(("neg", vec![row(4, 1.0), ix(4), ones(4)], Outcome::Value));
    // Iteration 2 divides by zero; iteration 3's fold reads past the
    // end of y, its `pre` past the matrix, its count is negative.
    let d = vector(&[1.5, 1.5, 0.0, 1.5]);
    let (short, three) = (matrix(&[2, 2, 2, 5]), matrix(&[3, 3, 3]));
    cases.push((
        "rows",
        vec![short.clone(), row(3, 2.0), d.clone()],
        Outcome::Bottom,
    ));
    cases.push((
        "idx",
        vec![three.clone(), ix(4), d.clone()],
        Outcome::Bottom,
    ));
    cases.push(("neg", vec![row(4, 1.0), ix(2), d], Outcome::Bottom));
    // Without the zero, those are the ⊥s.
    cases.push(("rows", vec![short, row(3, 2.0), ones(4)], Outcome::Bottom));
    cases.push(("idx", vec![three, ix(4), ones(4)], Outcome::Bottom));
    cases.push(("neg", vec![row(4, 1.0), ix(2), ones(4)], Outcome::Bottom));
    exactly_all(src, &cases);
    let prefix =
        ";; loops two iterations at a time, their inner folds jammed (Note [Jamming]), over: ";
    for f in ["tri", "rows", "scan", "idx", "neg"] {
        assert_ne!(listing_says(src, f, prefix), "none", "{f}");
    }
}

/// Note [Jamming]'s conditions: an inner fold that reads the outer
/// state, one with an array state, and one after a conditional are not
/// jammed; nor is the cold version of an interchanged build of sums
/// (Note [Interchange]), kept as written.
#[test]
fn loops_that_cannot_jam_run_one_iteration_at_a_time() {
    let src = "let state (y: Vector) (n: Index) = ifold (fun acc r -> acc + ifold (fun t s -> t + acc * y[s]) 0.0 (length y)) 0.0 n\n\
               let arrays (y: Vector) (n: Index) = build n (fun r -> ifold (fun t s -> addAt t s y[s]) (build 2 (fun i -> 0.0)) (length y))\n\
               let branch (a: Matrix) = build (length a) (fun r -> let v = a[r] in let w = if v[0] > 0.0 then v else a[0] in ifold (fun t s -> t + w[s]) 0.0 (length w))\n\
               let sums (a: Matrix) (n: Index) = build n (fun j -> ifold (fun s i -> s + a[i][j]) 0.0 (length a))\n";
    let prefix =
        ";; loops two iterations at a time, their inner folds jammed (Note [Jamming]), over: ";
    for f in ["state", "arrays", "branch", "sums"] {
        assert_eq!(listing_says(src, f, prefix), "none", "{f}");
    }
    let m = Value::array(
        (0..3)
            .map(|r| vector(&[1.0 + r as f64, 2.0, -0.5]))
            .collect(),
    );
    exactly(src, "state", &[vector(&[0.5, 1.5]), Value::Index(5)]);
    exactly(src, "arrays", &[vector(&[0.5, 1.5]), Value::Index(3)]);
    exactly(src, "branch", std::slice::from_ref(&m));
    exactly(src, "sums", &[m, Value::Index(3)]);
    let interchanged = ";; loop nests interchanged (Note [Interchange]): ";
    assert_ne!(listing_says(src, "sums", interchanged), "none");
}

/// Note [Selects]: a Double conditional of two atoms is a `select`; a
/// running maximum `if x > s then x else s` is `maxsd` and a minimum
/// `minsd`, whose IEEE behaviour (the second operand on NaN and on equal
/// zeros) is the conditional's. The evaluator's bits on NaNs anywhere
/// (first, middle, last), signed zeros in either order, infinities; an
/// argmax (a pair), branches that compute, and a branch that can be ⊥
/// keep their branches. In a paired `build` the select is lane-wise
/// (a ReLU is one `maxpd` per two elements), odd and even lengths.
#[test]
fn double_conditionals_of_atoms_are_selects() {
    let src = "let mx (v: Vector) = ifold (fun s i -> if v[i] > s then v[i] else s) v[0] (length v)\n\
               let mn (v: Vector) = ifold (fun s i -> if v[i] < s then v[i] else s) v[0] (length v)\n\
               let ge (v: Vector) = ifold (fun s i -> if v[i] >= s then v[i] else s) v[0] (length v)\n\
               let arg (v: Vector) = ifold (fun s i -> if v[i] > fst s then (v[i], i) else s) (v[0], 0) (length v)\n\
               let ops (v: Vector) = ifold (fun s i -> if v[i] > s then s * 0.5 + v[i] else s - 1.0) 0.0 (length v)\n\
               let div (v: Vector) = ifold (fun s i -> if v[i] > s then s / v[i] else s) 1.0 (length v)\n\
               let relu (v: Vector) = build (length v) (fun i -> if v[i] > 0.0 then v[i] else 0.0)\n\
               let clip (v: Vector) (w: Vector) = build (length v) (fun i -> let x = v[i] * 2.0 in let c = w[i] <= x in if c then w[i] else x)\n\
               let lo (v: Vector) = build (length v) (fun i -> if v[i] < 1.0 then 1.0 else v[i])\n";
    let nan = f64::NAN;
    let inputs: Vec<Vec<f64>> = vec![
        vec![1.0, 3.0, -2.0, 3.0, 0.5],
        vec![nan, 1.0, 2.0],
        vec![1.0, nan, 2.0, nan],
        vec![-0.0, 0.0, -0.0],
        vec![0.0, -0.0, 0.0],
        vec![f64::NEG_INFINITY, -1.0, f64::INFINITY, 2.0],
        (0..9).map(|k| k as f64 * 0.25).collect(),
        (0..9).map(|k| -(k as f64) * 0.25).collect(),
        vec![0.0, 0.0, 1.5, 0.0],
    ];
    for v in &inputs {
        for f in ["mx", "mn", "ge", "arg", "ops", "div", "relu", "lo"] {
            exactly(src, f, &[vector(v)]);
        }
        let w: Vec<f64> = v.iter().rev().copied().collect();
        exactly(src, "clip", &[vector(v), vector(&w)]);
    }
    assert!(listing_of(src, "mx").contains("maxsd"), "mx");
    assert!(listing_of(src, "mn").contains("minsd"), "mn");
    // Paired (Note [Bounds guards], pairs): two elements per `maxpd`.
    assert!(listing_of(src, "relu").contains("maxpd"), "relu");
    for f in ["clip", "lo"] {
        assert!(listing_of(src, f).contains("bitselect"), "{f}");
    }
    // The division can be ⊥ (a zero divisor): it keeps its branch.
    let ir = |f: &str| lowered_ir(src, f);
    for (f, select) in [("ge", true), ("arg", false), ("ops", false), ("div", false)] {
        assert_eq!(ir(f).contains("select"), select, "{f}");
    }
}

/// Note [Known counts]: a count that is a loop index's successor, a
/// length or a literal needs no E-IFold-Bot / E-Build-Bot test, and `i +
/// 1` of a loop index no overflow test; other counts and sums keep
/// theirs, with the evaluator's ⊥.
#[test]
fn known_counts_skip_their_tests() {
    let src = "let tri (v: Vector) = build (length v) (fun r -> ifold (fun t s -> t + v[s] * v[r]) 0.0 (r + 1))\n\
               let tri2 (v: Vector) = ifold (fun a r -> a + ifold (fun t s -> t + v[s]) 0.0 (1 + r)) 0.0 (length v)\n\
               let rows (v: Vector) = build (length v) (fun r -> build (r + 1) (fun s -> v[s] - v[r]))\n\
               let past (v: Vector) = build (length v) (fun r -> v[r + 1])\n\
               let back (v: Vector) (k: Index) = build (length v) (fun r -> ifold (fun t s -> t + v[s]) 0.0 (r + k))\n\
               let big (k: Index) = ifold (fun t s -> t + (s + k)) 0 3\n";
    for n in [0usize, 1, 2, 5] {
        let v: Vec<f64> = (0..n).map(|k| 0.5 + k as f64 * 1.25).collect();
        for f in ["tri", "tri2", "rows", "past"] {
            exactly(src, f, &[vector(&v)]);
        }
        for k in [-3, -1, 0, 2] {
            exactly(src, "back", &[vector(&v), Value::Index(k)]);
        }
    }
    // Overflow of `s + k` (not a successor) stays a ⊥.
    for k in [0, i64::MAX - 1, i64::MAX] {
        exactly(src, "big", &[Value::Index(k)]);
    }
    let ir = |f: &str| lowered_ir(src, f);
    // `n < 0` as lowered: `icmp slt n, z ; z = 0`.
    let negative_tests = |ir: &str| {
        ir.lines()
            .filter(|l| {
                let Some((ins, note)) = l.split_once(';') else {
                    return false;
                };
                let Some((_, ops)) = ins.split_once(" slt ") else {
                    return false;
                };
                let second = ops.split(',').nth(1).map(str::trim);
                second.is_some_and(|z| note.trim() == format!("{z} = 0"))
            })
            .count()
    };
    // `r + 1` is a plain addition; `(length v)` and `r + 1` are counts
    // known to be at least 0: no test compares them with 0.
    for f in ["tri", "tri2", "rows"] {
        let ir = ir(f);
        assert!(!ir.contains("sadd_overflow"), "{f}:\n{ir}");
        assert_eq!(negative_tests(&ir), 0, "{f}:\n{ir}");
    }
    // `r + k` may overflow and be negative: both tests stay.
    let back = ir("back");
    assert!(back.contains("sadd_overflow"), "{back}");
    assert!(negative_tests(&back) > 0, "{back}");
}

/// Note [Hoisting], rule 2: a loop-invariant binding that can fail moves
/// before its loop only if every failing binding before it is evaluated
/// first. A read left in the body (too cheap to move) before a power that
/// moved made the power's domain error come before the read's
/// index-out-of-bounds (`tests/difftest/native-seed3501-case1184.fsm`, in
/// the reverse-mode program); now the read moves with it.
#[test]
fn hoisting_keeps_the_order_of_failing_bindings() {
    let src = "let f (v: Vector) (p: Double) = ifold (fun s i -> let a = v[3] in let b = 0.0 ** (0.0 - p) in s + b + a) 0.0 (length v)\n\
               let g (v: Vector) (p: Double) = ifold (fun s i -> let a = v[i] in let b = 0.0 ** (0.0 - p) in let c = v[3] in s + b + a + c) 0.0 (length v)\n";
    let d = Value::Double;
    for f in ["f", "g"] {
        for v in [vec![1.0], vec![1.0, 2.0, 3.0, 4.0], vec![]] {
            for p in [0.7, -0.7] {
                exactly(src, f, &[vector(&v), d(p)]);
            }
        }
    }
    // The case that failed: ⊥ of the read, not of the power.
    let e = load_entry(src, "f");
    let got = compile(&e).call(&[vector(&[1.0]), d(0.7)]);
    assert!(
        matches!(
            got,
            Err(CodegenError::IndexOutOfBounds { index: 3, len: 1 })
        ),
        "{got:?}"
    );
}

/// Note [Hoisting], rule 3, moved twice: an inner fold's invariant that
/// can fail (`10 / k`, `log w`) is computed speculatively before the fold,
/// and that region, invariant in the outer `build` too, moves again
/// before the `build` under a new name. It stays speculative there (found
/// by a review fuzzer: the renamed region's ⊥ escaped, a division by zero
/// before the evaluator's earlier index out of bounds).
#[test]
fn speculative_regions_moved_twice_keep_catching_their_bottom() {
    let src = "let f (v: Vector) (k: Index) =\n\
               \x20 build (length v) (fun j -> ifold (fun s i -> s + v[i - 1] * toDouble (10 / k)) 0.0 (length v))\n\
               let g (v: Vector) (w: Double) (k: Index) =\n\
               \x20 build (length v) (fun j -> ifold (fun s i -> v[i + k] * log w) 1.0 (length v))\n";
    let (d, ix) = (Value::Double, Value::Index);
    for v in [vec![], vec![1.0], vec![1.0, 2.0], vec![0.5, 0.481, 2.5]] {
        for k in [-1, 0, 1, 2, 4] {
            exactly(src, "f", &[vector(&v), ix(k)]);
            for w in [-1.0, 0.0, 2.0] {
                exactly(src, "g", &[vector(&v), d(w), ix(k)]);
            }
        }
    }
    // The cases that failed: the read's ⊥, not the division's or `log`'s.
    let run = |f: &str, args: &[Value]| compile(&load_entry(src, f)).call(args);
    let got = run("f", &[vector(&[1.0, 2.0]), ix(0)]);
    assert!(
        matches!(
            got,
            Err(CodegenError::IndexOutOfBounds { index: -1, len: 2 })
        ),
        "{got:?}"
    );
    let got = run("g", &[vector(&[0.5, 0.481, 2.5]), d(-1.0), ix(4)]);
    assert!(
        matches!(
            got,
            Err(CodegenError::IndexOutOfBounds { index: 4, len: 3 })
        ),
        "{got:?}"
    );
}

/// Note [Horizontal fusion]: sibling `build`s of one count in a straight
/// line run as one loop behind a guard, the region's other bindings
/// first; any ⊥ or a failing guard continues in the region as written,
/// so values and the first ⊥ are the evaluator's: `a`'s short read (at
/// 2) comes before `q`'s (at 5) although the fused version reads `q`
/// first; a zero divisor, counts that differ at run time (`g`), an empty
/// loop with a zero divisor (no division runs); a pair holding a member
/// between two members (`h`: run after the loop, the member built).
#[test]
fn sibling_loops_run_as_one_with_the_evaluators_bottoms() {
    let src = "let f (v: Vector) (w: Vector) (p: Double) (k: Index) =\n\
               \x20 let a = build (length v) (fun i -> v[i] * p + w[i])\n\
               \x20 let q = w[k]\n\
               \x20 let b = build (length v) (fun i -> a[i] / q + w[i])\n\
               \x20 let c = build (length v) (fun i -> a[i] - b[i] * p)\n\
               \x20 (b, c)\n\
               let g (v: Vector) (w: Vector) (p: Double) =\n\
               \x20 let a = build (length v) (fun i -> v[i] * p)\n\
               \x20 let b = build (length w) (fun i -> a[i] + w[i])\n\
               \x20 build (length w) (fun i -> a[i] * b[i] - p)\n\
               let h (v: Vector) (w: Vector) (p: Double) (k: Index) =\n\
               \x20 let a = build (length v) (fun i -> v[i] * p)\n\
               \x20 let pr = (a, w[k])\n\
               \x20 let b = build (length v) (fun i -> a[i] + w[i])\n\
               \x20 (pr, b)\n";
    let groups = listing_says(src, "f", ";; loops run as one (Note [Horizontal fusion]): ");
    assert_eq!(
        groups.matches(", ").count(),
        2,
        "one group of three: {groups}"
    );
    assert!(
        groups.starts_with('[') && !groups.contains("], ["),
        "{groups}"
    );
    let groups = listing_says(src, "g", ";; loops run as one (Note [Horizontal fusion]): ");
    assert_ne!(groups, "none");
    // `pr` holds `a` and runs after the loop in the fused version.
    let groups = listing_says(src, "h", ";; loops run as one (Note [Horizontal fusion]): ");
    assert_eq!(
        groups.matches(", ").count(),
        1,
        "one group of two: {groups}"
    );
    let (d, i) = (Value::Double, Value::Index);
    let v3 = vector(&[1.0, -2.0, 3.5]);
    let w4 = vector(&[0.5, -1.25, 2.0, 4.0]);
    let w4z = vector(&[0.5, 0.0, 2.0, 4.0]);
    let w2 = vector(&[1.0, 2.0]);
    let v0 = vector(&[]);
    exactly_all(
        src,
        &[
            (
                "f",
                vec![v3.clone(), w4.clone(), d(1.5), i(1)],
                Outcome::Value,
            ),
            (
                "f",
                vec![v3.clone(), w4.clone(), d(1.5), i(7)],
                Outcome::Bottom,
            ),
            (
                "f",
                vec![v3.clone(), w4.clone(), d(1.5), i(-1)],
                Outcome::Bottom,
            ),
            (
                "f",
                vec![v3.clone(), w2.clone(), d(1.5), i(5)],
                Outcome::Bottom,
            ),
            (
                "f",
                vec![v3.clone(), w4z.clone(), d(1.5), i(1)],
                Outcome::Bottom,
            ),
            (
                "f",
                vec![v0.clone(), w4z.clone(), d(1.5), i(1)],
                Outcome::Value,
            ),
            ("g", vec![v3.clone(), w4.clone(), d(0.5)], Outcome::Bottom),
            ("g", vec![v3.clone(), w2.clone(), d(0.5)], Outcome::Value),
            ("g", vec![v3.clone(), v3.clone(), d(0.5)], Outcome::Value),
            ("g", vec![v0.clone(), v0.clone(), d(0.5)], Outcome::Value),
            (
                "h",
                vec![v3.clone(), w4.clone(), d(1.5), i(2)],
                Outcome::Value,
            ),
            (
                "h",
                vec![v3.clone(), w4.clone(), d(1.5), i(4)],
                Outcome::Bottom,
            ),
            (
                "h",
                vec![v3.clone(), w2.clone(), d(1.5), i(0)],
                Outcome::Bottom,
            ),
        ],
    );
    // The first ⊥ of `f` with a short `w` and `k = 5` is `a`'s read at 2.
    let e = native_error(src, "f", &[v3, w2, d(1.5), i(5)]);
    assert!(
        matches!(e, CodegenError::IndexOutOfBounds { index: 2, len: 2 }),
        "{e:?}"
    );
}

/// A tangent-only forward program on native code reads its arguments and
/// result as slices when they are Doubles, vectors and matrices of
/// Doubles (`gradient::forward_on`, ADBench BA's `fwd-opt` per
/// observation): the value and every column equal the evaluator's, bit
/// for bit, for each shape of variable and result it takes; a pair result
/// takes the `Value` path and agrees too.
#[test]
fn tangent_columns_through_slices_equal_the_evaluators() {
    use fsmooth::gradient::{Engine, forward_on};
    let src = "let vv (v: Vector) (s: Double) = build 3 (fun i -> v[i] * v[i] * s + sin s)\n\
               let vd (v: Vector) (s: Double) = vectorSum v * s\n\
               let dv (v: Vector) (s: Double) = build (length v) (fun i -> v[i] / s)\n\
               let dd (v: Vector) (s: Double) = s * s * v[0]\n\
               let vm (v: Vector) (m: Matrix) = build (length m) (fun i -> vectorDot m[i] v)\n\
               let vp (v: Vector) (s: Double) = (vectorSum v, v[1] * s)\n";
    let v = vector(&[0.5, -1.25, 2.0]);
    let m = Value::array(vec![vector(&[1.0, 2.0, 3.0]), vector(&[-0.5, 0.25, 4.0])]);
    for (f, wrt, args) in [
        ("vv", "v", vec![v.clone(), Value::Double(1.5)]),
        ("vv", "s", vec![v.clone(), Value::Double(1.5)]),
        ("vd", "v", vec![v.clone(), Value::Double(-0.75)]),
        ("dv", "s", vec![v.clone(), Value::Double(2.5)]),
        ("dd", "s", vec![v.clone(), Value::Double(2.5)]),
        ("vm", "v", vec![v.clone(), m.clone()]),
        ("vp", "v", vec![v.clone(), Value::Double(3.0)]),
    ] {
        let d = pipeline::tangent_derivative(src, f, wrt).expect("derivative");
        let e = forward_on(&d, args.clone(), &Engine::Eval(FUEL)).expect("evaluator");
        let n = forward_on(&d, args, &Engine::native()).expect("native");
        assert!(
            e.value.same(&n.value),
            "{f}/{wrt}: {} vs {}",
            e.value,
            n.value
        );
        let bits = |c: &[Vec<f64>]| -> Vec<Vec<u64>> {
            c.iter()
                .map(|x| x.iter().map(|y| y.to_bits()).collect())
                .collect()
        };
        assert_eq!(bits(&e.columns), bits(&n.columns), "{f}/{wrt}");
        assert!(!e.columns.is_empty(), "{f}/{wrt}");
    }
}

/// Note [Horizontal fusion] on random straight lines: `build`s over
/// `length v` or `length w` whose elements are Double arithmetic (with
/// divisions and selects) on reads at the index of the parameters and of
/// the earlier `build`s, between scalar bindings that can fail (a read at
/// `k`, a division, a square root) and pairs holding one of the arrays
/// (deferred past the loop), on vectors of lengths 0 to 4 and
/// divisors that may be zero. Every value and every first ⊥ (its index
/// and length for a read) is the evaluator's; most programs do run a
/// group as one loop.
#[test]
fn random_straight_lines_of_builds_agree_with_the_evaluator() {
    let mut seed = 0x5eed_2026_1126_u64;
    let mut next = move |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut fused_programs = 0;
    let programs = 60;
    for case in 0..programs {
        let mut lines = Vec::new();
        let mut arrays: Vec<String> = Vec::new();
        let mut scalars: Vec<String> = vec!["p".into(), "q".into()];
        let steps = 3 + next(5);
        let mut pairs: Vec<String> = Vec::new();
        for s in 0..steps {
            if !arrays.is_empty() && next(5) == 0 {
                // A pair holding an array (deferred past the loop).
                let x = format!("r{s}");
                let a = &arrays[next(arrays.len() as u64) as usize];
                let c = &scalars[next(scalars.len() as u64) as usize];
                lines.push(format!("  let {x} = ({a}, {c})"));
                pairs.push(x);
            } else if next(3) == 0 {
                let x = format!("s{s}");
                let rhs = match next(4) {
                    0 => "w[k]".to_string(),
                    1 => format!("p / {}", scalars[next(scalars.len() as u64) as usize]),
                    2 => "sqrt q".to_string(),
                    _ => format!("v[k] * {}", scalars[next(scalars.len() as u64) as usize]),
                };
                lines.push(format!("  let {x} = {rhs}"));
                scalars.push(x);
            } else {
                let x = format!("a{s}");
                let count = if next(4) == 0 { "length w" } else { "length v" };
                let leaf = |next: &mut dyn FnMut(u64) -> u64| -> String {
                    match next(4) {
                        0 => "v[i]".to_string(),
                        1 if !arrays.is_empty() => {
                            format!("{}[i]", arrays[next(arrays.len() as u64) as usize])
                        }
                        2 => scalars[next(scalars.len() as u64) as usize].clone(),
                        _ => "w[i]".to_string(),
                    }
                };
                let (a, b, c) = (leaf(&mut next), leaf(&mut next), leaf(&mut next));
                let body = match next(5) {
                    0 => format!("{a} * {b} + {c}"),
                    1 => format!("{a} / {b} - {c}"),
                    2 => format!("if {a} > {b} then {c} else {a}"),
                    3 => format!("-({a}) * {c}"),
                    _ => format!("{a} - {b} * {c}"),
                };
                lines.push(format!("  let {x} = build ({count}) (fun i -> {body})"));
                arrays.push(x);
            }
        }
        let result = match arrays.as_slice() {
            [] => "p".to_string(),
            [a] => format!("vectorSum {a}"),
            [.., a, b] => format!("({a}, vectorSum {b})"),
        };
        let result = match pairs.last() {
            Some(r) => format!("({result}, {r})"),
            None => result,
        };
        let src = format!(
            "let f (v: Vector) (w: Vector) (p: Double) (q: Double) (k: Index) =\n{}\n  {result}\n",
            lines.join("\n")
        );
        let groups = listing_says(
            &src,
            "f",
            ";; loops run as one (Note [Horizontal fusion]): ",
        );
        if groups != "none" {
            fused_programs += 1;
        }
        let (e, native) = {
            let e = load_entry(&src, "f");
            let n = compile(&e);
            (e, n)
        };
        let vs =
            |n: usize, off: f64| vector(&(0..n).map(|j| off + 0.75 * j as f64).collect::<Vec<_>>());
        for arg in 0..6 {
            let (nv, nw) = (next(5) as usize, next(5) as usize);
            let nw = if arg < 3 { nv.max(nw) } else { nw };
            let args = vec![
                vs(nv, -1.0),
                vs(nw, if next(3) == 0 { 0.0 } else { 0.5 }),
                Value::Double([1.5, 0.0, -2.0][next(3) as usize]),
                Value::Double([2.0, 0.0, -0.5][next(3) as usize]),
                Value::Index([0, 2, 5, -1][next(4) as usize]),
            ];
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                exactly_on(&e, &native, "f", &args)
            }));
            assert!(r.is_ok(), "case {case}: {args:?}\n{src}");
        }
    }
    assert!(
        fused_programs * 2 > programs,
        "{fused_programs} of {programs}"
    );
}

/// Note [Horizontal fusion]: the fused version of a region may be run and
/// then abandoned (a bail), so it must write no array that exists before
/// it. An `addAt` that updates its array in place (Note [In-place
/// updates]) between two members ends the group: here `b`'s count differs
/// from `a`'s at run time, so a fused version would bail after adding
/// into `z` once and the region as written would add again.
#[test]
fn in_place_updates_end_a_horizontal_group() {
    let src = "let u (v: Vector) (w: Vector) (k: Index) =\n\
               \x20 let z = build (length w) (fun i -> toDouble i)\n\
               \x20 let a = build (length v) (fun i -> v[i] * 2.0)\n\
               \x20 let z2 = addAt z k 1.0\n\
               \x20 let b = build (length w) (fun i -> a[i] + w[i])\n\
               \x20 (z2, b)\n";
    let (v3, w2) = (vector(&[1.0, 2.0, 3.0]), vector(&[1.0, 2.0]));
    exactly_all(
        src,
        &[
            (
                "u",
                vec![v3.clone(), w2.clone(), Value::Index(1)],
                Outcome::Value,
            ),
            (
                "u",
                vec![v3.clone(), v3.clone(), Value::Index(0)],
                Outcome::Value,
            ),
            (
                "u",
                vec![v3.clone(), w2.clone(), Value::Index(2)],
                Outcome::Bottom,
            ),
        ],
    );
    let updates = listing_says(src, "u", ";; in place: ");
    assert_ne!(updates, "none", "the addAt updates in place");
    let groups = listing_says(src, "u", ";; loops run as one (Note [Horizontal fusion]): ");
    assert_eq!(groups, "none");
}

/// `pipeline::batched`: the entry on every element of its argument lists
/// in one program (a matrix result's rows concatenated), on the
/// evaluator and natively through `Engine::run_flat` (ADBench BA's
/// per-observation Jacobians in one call); a shorter list is E-Get-Bot.
#[test]
fn batched_entries_run_every_element() {
    use fsmooth::gradient::Engine;
    // Entries named like the batch's binders (found in review: a
    // generated binder shadowed the entry it calls).
    let src = "let f (v: Vector) (s: Double) = build 2 (fun i -> build (length v) (fun j -> v[j] * s + toDouble i))\n\
               let g (v: Vector) (s: Double) = vectorSum v * s\n\
               let xs1 (v: Vector) (s: Double) = v[0] * s\n\
               let i (v: Vector) (s: Double) = v[1] - s\n";
    let vs = [vector(&[1.0, -2.0, 0.5]), vector(&[3.0, 0.25, -1.0])];
    let ss = [Value::Double(1.5), Value::Double(-0.5)];
    for f in ["f", "g", "xs1", "i"] {
        let e = load_entry(src, f);
        let b = pipeline::batched(&e).expect("batched");
        let args = vec![Value::array(vs.to_vec()), Value::array(ss.to_vec())];
        let (got, _) = b
            .run(args.clone(), FUEL, &mut |_, _| {})
            .expect("batch runs");
        let mut flat = Vec::new();
        fsmooth::gradient::flatten(&got, &mut flat);
        let mut want = Vec::new();
        for (v, s) in vs.iter().zip(&ss) {
            let (one, _) = e
                .run(vec![v.clone(), s.clone()], FUEL, &mut |_, _| {})
                .expect("runs");
            fsmooth::gradient::flatten(&one, &mut want);
        }
        assert_eq!(flat, want, "{f}");
        let native = Engine::native()
            .run_flat(&b, &args)
            .expect("slices")
            .expect("native runs");
        assert_eq!(native, want, "{f}");
        let short = vec![Value::array(vs.to_vec()), Value::array(ss[..1].to_vec())];
        let err = b.run(short, FUEL, &mut |_, _| {}).expect_err("short list");
        assert_eq!(err.code(), "index-out-of-bounds", "{f}");
    }
}

/// Note [Horizontal fusion]: a block inside a region is lowered twice
/// (once in each version). The first lowering may fuse an array that the
/// second, once an earlier kept member is built, groups and keeps: its
/// old fused reading must not survive (found in review: native code
/// generation failed with "the buffer of fused `x`").
#[test]
fn a_block_lowered_twice_groups_consistently() {
    let src = "let f (v: Vector) (m: Index) =\n\
               \x20 let a0 = build (length v) (fun i -> v[i] * 2.0)\n\
               \x20 let r = ifold (fun acc j ->\n\
               \x20     let a = build (length v) (fun i -> v[i] * acc)\n\
               \x20     let y = build (length v) (fun i -> a[i] + 1.0)\n\
               \x20     let s = vectorSum y\n\
               \x20     let x = build (length v) (fun i -> y[i] * 2.0)\n\
               \x20     let z = build (length v) (fun i -> x[i] + a[i])\n\
               \x20     s + x[0] + z[0]) 1.0 m\n\
               \x20 let b0 = build (length v) (fun i -> a0[i] + r)\n\
               \x20 b0\n";
    let v = vector(&[1.0, 2.0, 3.0]);
    exactly_all(
        src,
        &[
            ("f", vec![v.clone(), Value::Index(2)], Outcome::Value),
            ("f", vec![v.clone(), Value::Index(0)], Outcome::Value),
            ("f", vec![vector(&[]), Value::Index(2)], Outcome::Bottom),
        ],
    );
    let groups = listing_says(src, "f", ";; loops run as one (Note [Horizontal fusion]): ");
    assert!(groups.matches('[').count() >= 2, "{groups}");
}

/// Doubles for the fold properties: NaN, signed zeros, infinities, ties
/// at 1.0, and small values.
fn special_doubles() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(f64::NAN),
        Just(0.0),
        Just(-0.0),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(1.0),
        -4.0..4.0f64,
    ]
}

/// Note [Skipping folds]: folds whose body keeps the state unless a test
/// of `s` and `v[i]` says otherwise skip four iterations at a time; on
/// vectors of every length up to 13 (the tail), with NaNs, signed zeros,
/// infinities, ties and ascending runs (every iteration changes the
/// state), natively and by the evaluator: the same bits, or the same
/// first ⊥ (from `T`, the branch that changes the state, at the iteration
/// that runs it).
#[test]
fn folds_skip_iterations_that_keep_their_state() {
    let src = "
let argmax = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> if v[i] > fst s then (v[i], i) else s) (w, 0) (length v)
let argminScaled = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> if v[i] * w - 1.0 >= fst s then s else (v[i] * w - 1.0, i)) (w, 0) (length v)
let failsWhenTaken = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> if -v[i] < fst s then (-v[i], snd s + 10 / (i - 5)) else s) (w, 0) (length v)
let readsWhenTaken = fun (v: Vector) (w: Double) ->
  let u = build 6 (fun j -> toDouble j) in
  ifold (fun s i -> if v[i] > fst s then (v[i] + u[i], i) else s) (w, 0) (length v)
let divides = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> if v[i] / w > fst s then (v[i], i) else s) (0.0, 0) (length v)
";
    let skipping = ";; folds skipping four iterations at a time where they keep their state (Note [Skipping folds]), over: ";
    for f in ["argmax", "argminScaled", "failsWhenTaken", "readsWhenTaken"] {
        assert_ne!(listing_says(src, f, skipping), "none", "{f} skips");
    }
    // A division in the test could fail for a later iteration: as written.
    assert_eq!(listing_says(src, "divides", skipping), "none");
    // The maximum itself is a select (Note [Selects]), not skipped.
    let max = "let m = fun (v: Vector) -> ifold (fun s i -> if v[i] > s then v[i] else s) 0.0 (length v)\n";
    assert_eq!(listing_says(max, "m", skipping), "none");
    let entries: Vec<(&str, Entry, Native)> = [
        "argmax",
        "argminScaled",
        "failsWhenTaken",
        "readsWhenTaken",
        "divides",
    ]
    .into_iter()
    .map(|f| {
        let e = load_entry(src, f);
        let n = compile(&e);
        (f, e, n)
    })
    .collect();
    let inputs = (
        prop::collection::vec(special_doubles(), 0..14),
        -3.0..3.0f64,
        any::<bool>(),
    );
    let mut runner = TestRunner::new(Config {
        cases: 300,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&inputs, |(mut xs, w, ascending)| {
            if ascending {
                xs.sort_by(|a, b| a.total_cmp(b));
            }
            let args = [vector(&xs), Value::Double(w)];
            for (f, e, n) in &entries {
                exactly_on(e, n, f, &args);
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Note [Two iterations per trip]: a fold of a few scalar operations runs
/// iterations 2k and 2k + 1 per trip of its loop, then the last one alone
/// when the count is odd, with the evaluator's bits and first ⊥ (a read
/// out of bounds at an even or an odd iteration, a division by zero at
/// either, E-IFold-Bot of a negative count).
#[test]
fn folds_run_two_iterations_per_trip() {
    let src = "
let max = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> if v[i] > s then v[i] else s) w (length v)
let shifted = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> s + v[i + 2] * w) 0.0 (length v - 2)
let pairs = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> (fst s + v[i], snd s * w - v[i])) (w, 1.0) (length v)
let counts = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> (fst s + (if v[i] > w then 1 else 0), not (snd s))) (0, false) (length v)
let oddFails = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> s + v[2 * i] + toDouble (10 / (i - 3))) w (length v)
let evenFails = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> s * w + toDouble (10 / (i - 4))) w (length v)
let arrayState = fun (v: Vector) (w: Double) ->
  ifold (fun s i -> addAt s (i / 2) (v[i] * w)) (build (length v) (fun k -> w)) (length v)
";
    let doubled = ";; folds two iterations per trip (Note [Two iterations per trip]), over: ";
    let fs = ["max", "shifted", "pairs", "counts", "oddFails", "evenFails"];
    for f in fs {
        assert_ne!(
            listing_says(src, f, doubled),
            "none",
            "{f} runs two per trip"
        );
    }
    // A state with an array runs as written.
    assert_eq!(listing_says(src, "arrayState", doubled), "none");
    let entries: Vec<(&str, Entry, Native)> = fs
        .into_iter()
        .chain(["arrayState"])
        .map(|f| {
            let e = load_entry(src, f);
            let n = compile(&e);
            (f, e, n)
        })
        .collect();
    let inputs = (
        prop::collection::vec(special_doubles(), 0..12),
        -3.0..3.0f64,
    );
    let mut runner = TestRunner::new(Config {
        cases: 200,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&inputs, |(xs, w)| {
            let args = [vector(&xs), Value::Double(w)];
            for (f, e, n) in &entries {
                exactly_on(e, n, f, &args);
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    // Every count from 0 to 9 (both parities, the odd iteration alone),
    // and the ⊥s at their iterations.
    for len in 0..10 {
        let xs: Vec<f64> = (0..len).map(|k| (k as f64 * 0.7).sin()).collect();
        let args = [vector(&xs), Value::Double(0.5)];
        for (f, e, n) in &entries {
            exactly_on(e, n, f, &args);
        }
    }
}
