//! The native backend (`fsmooth::codegen`) against the reference
//! evaluator. Values must agree to ρ ≤ 1e-12 (exactly for Index and Bool;
//! bit for bit in the tests that say "exactly"); where the evaluator
//! reaches ⊥ the native code must report the same error code. One
//! submodule per subject:
//!
//! | module | what it tests |
//! | --- | --- |
//! | `programs` | examples, golden `run` lines, the prelude, nested layouts, `--engine native` |
//! | `errors` | ⊥ codes and error exits, and what the backend refuses |
//! | `random` | random programs and random gradient programs from `testgen` |
//! | `gradients` | derivative programs of examples and goldens; tapes, checkpoints, recomputation |
//! | `gmm` | the ADBench GMM objective and its gradients |
//! | `abi` | `call_slices`, arenas across calls, tangent columns, batched entries |
//! | `memory` | in-place `addAt`, views of arguments, scratch arrays |
//! | `fusion` | pull arrays, accumulations, small arrays in registers, vertical fusion |
//! | `horizontal` | sibling loops run as one (Note [Horizontal fusion]) |
//! | `hoisting` | hoisting and speculation, projections, versioning, unrolling |
//! | `interchange` | loop nests run i-major (Note [Interchange]) |
//! | `guards` | bounds tests, bounds guards, known counts, rotated loops |
//! | `lanes` | two elements per `f64x2`, pairs of `addAt`s, one-hot fills, selects |
//! | `trips` | jamming, skipping folds, folds two iterations per trip |
//! | `parallel` | folds on several threads under the relaxed contract (Note [Parallel loops]) |
//! | `lane_sums` | sums and `log` in `f64x2` lanes under the relaxed contract (Note [Lane sums]) |
//!
//! This file holds what they share: the comparison with the evaluator
//! (`compare`, `exactly`, `native_error` and their case tables), the
//! `compile --listing` text and its parts, and the comparison of an
//! entry's gradient programs.

mod abi;
mod errors;
mod fusion;
mod gmm;
mod gradients;
mod guards;
mod hoisting;
mod horizontal;
mod interchange;
mod lane_sums;
mod lanes;
mod memory;
mod parallel;
mod programs;
mod random;
mod trips;

use std::path::{Path, PathBuf};

use fsmooth::codegen::{AotOptions, CodegenError, Native};
use fsmooth::diagnostic::Diagnose;
use fsmooth::eval::{EvalError, Limits, Value};
use fsmooth::gradient::{How, Mode};
use fsmooth::pipeline::{Entry, Session};

use crate::common;

const TOLERANCE: f64 = 1e-12;

/// Enough fuel for every test program; runs that exhaust it are skipped
/// (native code has no fuel and would run to the end).
const FUEL: Limits = Limits::with_fuel(20_000_000);

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

fn load_entry(src: &str, name: &str) -> std::rc::Rc<Entry> {
    let loaded = Session::load(src).unwrap_or_else(|d| panic!("load: {d}\n{src}"));
    loaded
        .entry(name)
        .unwrap_or_else(|d| panic!("entry {name}: {d}"))
}

fn compile(entry: &Entry) -> Native {
    Native::compile(&entry.normal().expect("normalises"))
        .unwrap_or_else(|e| panic!("native compile of {}: {e}", entry.name))
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

/// `entry` compiled to native code with `options`.
fn compile_with(entry: &Entry, options: fsmooth::codegen::NativeOptions) -> Native {
    Native::compile_with(&entry.normal().expect("normalises"), options)
        .unwrap_or_else(|e| panic!("native compile of {}: {e}", entry.name))
}

/// `entry`'s value on `args` by the evaluator.
fn evaluate(entry: &Entry, args: &[Value]) -> Value {
    entry
        .run(args.to_vec(), FUEL, &mut |_, _| {})
        .expect("evaluates")
        .0
}

/// γ_m = m u / (1 − m u), u = 2⁻⁵³ (Higham §3.1): the relaxed contract's
/// bound on a regrouped sum of m addends is 2γ_m Σ|t|.
fn gamma(m: usize) -> f64 {
    let mu = m as f64 * f64::EPSILON / 2.0;
    mu / (1.0 - mu)
}

fn vector(xs: &[f64]) -> Value {
    Value::array(xs.iter().map(|x| Value::Double(*x)).collect())
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

fn native_error(src: &str, name: &str, args: &[Value]) -> CodegenError {
    let e = load_entry(src, name);
    let n = compile(&e);
    let expected = e.run(args.to_vec(), FUEL, &mut |_, _| {});
    let got = n.call(args);
    match (expected, got) {
        (Err(a), Err(b)) => {
            assert_eq!(a.code(), b.code(), "{src}: evaluator {a}, native {b}");
            // The error itself; where it is (Note [Failure sites]) is
            // `reliability::runtime_errors_point_into_the_users_program`'s.
            b.unlocated()
        }
        (a, b) => panic!("{src}: expected ⊥ from both, got {a:?} and {b:?}"),
    }
}

/// A cotangent shaped like `v`: its doubles replaced by 1, -0.5, 0.25, …
fn seed_like(v: &Value) -> Value {
    let mut k = 0;
    fsmooth::eval::unflatten(
        v,
        &mut std::iter::from_fn(|| {
            k += 1;
            Some((-0.5f64).powi(k - 1))
        }),
    )
}

/// Native reverse- and forward-mode programs of an entry agree with the
/// evaluator on `args`; returns how many values were compared.
fn gradient_programs_agree(src: &str, f: &str, p: &str, args: &[Value]) -> usize {
    let rev = common::plan(src, f, p, Mode::Rev).unwrap_or_else(|d| panic!("{f}/{p}: {d}"));
    let fwd = common::plan(src, f, p, Mode::Fwd).unwrap_or_else(|d| panic!("{f}/{p}: {d}"));
    let How::Reverse {
        rev: rev_program,
        seeded,
    } = &rev.how
    else {
        panic!("{f}/{p}: not a reverse-mode plan");
    };
    let mut rev_args = args.to_vec();
    if *seeded {
        let (out, _) = rev
            .base
            .run(args.to_vec(), FUEL, &mut |_, _| {})
            .expect("the base runs");
        rev_args.push(seed_like(&out));
    }
    let mut compared = 0;
    let wrapper = fwd.program().expect("the forward-mode wrapper");
    for (entry, a) in [(rev_program, &rev_args[..]), (wrapper, args)] {
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
        fp: fsmooth::codegen::FpContract::Strict,
    };
    let e = load_entry(src, name);
    e.object(&e.params, &options)
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
