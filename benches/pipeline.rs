//! Criterion benchmarks of the pipeline's stages, on inputs built here so
//! that the benchmarks need nothing outside the repository:
//!
//! - `frontend`: parse and type-check the prelude with a program;
//! - `eval/gmm`: the reference evaluator on the ADBench GMM objective
//!   (d = 2, K = 5, n = 10 / 100 / 1000);
//! - `gradient/dot`: the gradient of `vectorDot` by every mode
//!   (`fwd`, `fwd-opt`, `rev`, `tape`) at n = 10 / 100 / 1000 — forward
//!   mode is quadratic, the others linear; this is the wall-clock side of
//!   the operation counts `--stats` reports;
//! - `opt`: equality saturation of the forward-mode dot gradient;
//! - `native/dot`: the dot gradient as native code (`fwd-opt`, `rev`) at
//!   n = 10³ … 10⁶, with the objective for J/F;
//! - `native/gmm`: the GMM objective and its `rev` and `fwd` gradients as
//!   native code (d = 2, K = 5, n = 1000: ADBench's `1k/gmm_d2_K5` shape),
//!   and the time to compile the reverse program (parse → native code).
//!
//! Run with `cargo bench --bench pipeline`; `-- <filter>` picks a group.

mod common;

use std::hint::black_box;

use common::numbers;
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};
use fsmooth::adbench::gmm::{GMM_SOURCE, read_gmm};
use fsmooth::eval::{Limits, Value};
use fsmooth::gradient::{Mode, Plan};
use fsmooth::pipeline::{Checkpointing, Engine, Session};

const DOT: &str = "let f = fun (v1: Vector) (v2: Vector) -> vectorDot v1 v2";

fn vector(n: usize, seed: u64) -> Value {
    Value::array(numbers(seed).take(n).map(Value::Double).collect())
}

/// A GMM input in ADBench's text format.
fn gmm_text(d: usize, k: usize, n: usize) -> String {
    let mut xs = numbers(42);
    let mut row = |len: usize| -> String {
        let cells: Vec<String> = (0..len)
            .map(|_| format!("{:.6}", xs.next().unwrap_or(0.0)))
            .collect();
        cells.join(" ") + "\n"
    };
    let mut t = format!("{d} {k} {n}\n");
    for _ in 0..k {
        t += &row(1);
    }
    for _ in 0..k {
        t += &row(d);
    }
    for _ in 0..k {
        t += &row(d * (d + 1) / 2);
    }
    for _ in 0..n {
        t += &row(d);
    }
    t + "1.000000 0\n"
}

fn frontend(c: &mut Criterion) {
    c.bench_function("frontend/load-gmm", |b| {
        b.iter(|| Session::load(black_box(GMM_SOURCE)).expect("loads"))
    });
}

fn eval_gmm(c: &mut Criterion) {
    let loaded = Session::load(GMM_SOURCE).expect("gmm.fsm loads");
    let entry = loaded.entry("gmmObjective").expect("entry");
    let mut g = c.benchmark_group("eval/gmm");
    for n in [10, 100, 1000] {
        let input = read_gmm(&gmm_text(2, 5, n)).expect("generated input reads");
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &input.args(), |b, args| {
            b.iter(|| {
                entry
                    .run(args.clone(), Limits::default(), &mut |_, _| {})
                    .expect("evaluates")
            })
        });
    }
    g.finish();
}

/// The plan of `mode` for `entry` of `src` w.r.t. `wrt`: the mode's own
/// program, run on either engine.
fn plan(src: &str, entry: &str, wrt: &str, mode: Mode) -> Plan {
    let session = Session::load(src).expect("loads");
    Plan::new(
        &session,
        entry,
        wrt,
        mode,
        Engine::Eval,
        Checkpointing::default(),
    )
    .unwrap_or_else(|d| panic!("{}: {d}", mode.name()))
}

/// The dot product's gradient plans: forward, reverse, optimised forward.
fn dot_programs() -> (Plan, Plan, Plan) {
    (
        plan(DOT, "f", "v1", Mode::Fwd),
        plan(DOT, "f", "v1", Mode::Rev),
        plan(DOT, "f", "v1", Mode::FwdOpt),
    )
}

fn gradient_dot(c: &mut Criterion) {
    let (fwd, rev, fwd_opt) = dot_programs();
    let limits = Limits::default();
    let mut g = c.benchmark_group("gradient/dot");
    g.sample_size(10);
    for n in [10, 100, 1000] {
        let args = vec![vector(n, 1), vector(n, 2)];
        g.throughput(Throughput::Elements(n as u64));
        if n <= 100 {
            // Forward mode is O(n²): 15 M operations at n = 1000.
            g.bench_with_input(BenchmarkId::new("fwd", n), &args, |b, a| {
                b.iter(|| fwd.columns(a.clone(), Engine::Eval, limits).expect("fwd"))
            });
        }
        g.bench_with_input(BenchmarkId::new("fwd-opt", n), &args, |b, a| {
            b.iter(|| {
                fwd_opt
                    .columns(a.clone(), Engine::Eval, limits)
                    .expect("fwd-opt")
            })
        });
        g.bench_with_input(BenchmarkId::new("rev", n), &args, |b, a| {
            b.iter(|| rev.columns(a.clone(), Engine::Eval, limits).expect("rev"))
        });
        g.bench_with_input(BenchmarkId::new("tape", n), &args, |b, a| {
            b.iter(|| fsmooth::gradient::tape(&rev.base, 0, a.clone(), limits).expect("tape"))
        });
    }
    g.finish();
}

fn optimise(c: &mut Criterion) {
    // A session optimises an artefact once: each run gets a fresh one,
    // the tangent-only wrapper built beforehand (not timed); the rules'
    // loading and the saturation are timed.
    let v1 = Session::load(DOT)
        .and_then(|s| s.param("f", "v1"))
        .expect("a parameter v1");
    let tangents = Mode::Fwd
        .tangent_program("f".into(), v1)
        .expect("forward mode has a tangent-only program");
    let session = || {
        let s = Session::load(DOT).expect("loads");
        s.get(&tangents).expect("tangent");
        s
    };
    let mut g = c.benchmark_group("opt");
    g.sample_size(10);
    g.bench_function("dot-gradient", |b| {
        b.iter_batched_ref(
            session,
            |s| s.optimise(&tangents, false).expect("optimises"),
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

fn native_dot(c: &mut Criterion) {
    let (fwd, rev, fwd_opt) = dot_programs();
    let base = &fwd.base;
    let engine = Engine::Native;
    let limits = Limits::default();
    let mut g = c.benchmark_group("native/dot");
    g.sample_size(10);
    for n in [1_000, 10_000, 100_000, 1_000_000] {
        let args = vec![vector(n, 1), vector(n, 2)];
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::new("objective", n), &args, |b, a| {
            b.iter(|| base.run_on(engine, a.clone(), limits).expect("objective"))
        });
        g.bench_with_input(BenchmarkId::new("fwd-opt", n), &args, |b, a| {
            b.iter(|| fwd_opt.columns(a.clone(), engine, limits).expect("fwd-opt"))
        });
        g.bench_with_input(BenchmarkId::new("rev", n), &args, |b, a| {
            b.iter(|| rev.columns(a.clone(), engine, limits).expect("rev"))
        });
    }
    g.finish();
}

fn native_gmm(c: &mut Criterion) {
    let input = read_gmm(&gmm_text(2, 5, 1000)).expect("generated input reads");
    let args = input.flat_args();
    let fwd = plan(GMM_SOURCE, "gmmObjectiveFlat", "theta", Mode::Fwd);
    let rev = plan(GMM_SOURCE, "gmmObjectiveFlat", "theta", Mode::Rev);
    let engine = Engine::Native;
    let limits = Limits::default();
    let mut g = c.benchmark_group("native/gmm");
    g.sample_size(10);
    g.bench_function("objective", |b| {
        b.iter(|| {
            fwd.base
                .run_on(engine, args.clone(), limits)
                .expect("objective")
        })
    });
    g.bench_function("rev", |b| {
        b.iter(|| rev.columns(args.clone(), engine, limits).expect("rev"))
    });
    g.bench_function("fwd", |b| {
        b.iter(|| fwd.columns(args.clone(), engine, limits).expect("fwd"))
    });
    g.bench_function("compile-rev", |b| {
        b.iter(|| {
            let r = plan(GMM_SOURCE, "gmmObjectiveFlat", "theta", Mode::Rev);
            let rev = r.program().expect("the reverse program");
            fsmooth::codegen::Native::compile(&rev.normal().expect("normalises")).expect("compiles")
        })
    });
    g.finish();
}

fn main() {
    // The evaluator and the transformations recurse on the program's
    // nesting; give them the binary's stack.
    let run = std::thread::Builder::new()
        .stack_size(1 << 30)
        .spawn(|| {
            let mut c = Criterion::default().configure_from_args();
            frontend(&mut c);
            eval_gmm(&mut c);
            gradient_dot(&mut c);
            optimise(&mut c);
            native_dot(&mut c);
            native_gmm(&mut c);
            c.final_summary();
        })
        .expect("benchmark thread starts");
    run.join().expect("benchmarks finish");
}
