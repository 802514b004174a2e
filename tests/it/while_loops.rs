//! `while`, the loop whose trip count the data decide (issue "Loops whose
//! length depends on the data"): T-While, E-While / E-While-Step /
//! E-While-Done, D-While and R-While, from the command line and the
//! library, on both engines and in every AD mode.

use fsmooth::eval::Limits;
use fsmooth::gradient::Mode;
use fsmooth::pipeline::Engine;

use crate::common::{cli, plan, run_text, temp_file};

/// Programs with `while` loops, each with its input, value and gradient
/// (computed by hand).
const PROGRAMS: &str = "\
// Halve until at most 1, multiplying the states: x⁴/64 at x = 10
// (states 10, 5, 2.5, 1.25).
let halve = fun (x: Double) ->
  let r = while (fun s -> fst s > 1.0) (fun s -> (fst s / 2.0, snd s * fst s)) (x, 1.0) in
  snd r
// An array state: doubled by x until its sum passes 100.
let grow = fun (x: Double) ->
  let v = while (fun v -> vectorSum v < 100.0) (fun v -> build (length v) (fun i -> v[i] * x + toDouble i)) [x, 1.0, x * x] in
  vectorSum v
// A loop that runs no step: the state is the result.
let none = fun (x: Double) -> while (fun s -> s > 100.0) (fun s -> s * 2.0) (x * x)
// Nested: each of three outer steps runs an inner loop to a count it decides.
let nested = fun (x: Double) ->
  fst (while (fun s -> snd s < 3) (fun s -> (while (fun t -> t > 1.0) (fun t -> t / 2.0) (fst s * x * 3.0), snd s + 1)) (x, 0))
// Inside a build: a loop per element, with a trip count per element.
let perElement = fun (x: Double) ->
  vectorSum (build 3 (fun i -> while (fun s -> s < 50.0) (fun s -> s * x + toDouble i) x))
// A counter with a data-dependent bound.
let counted = fun (x: Double) ->
  snd (while (fun s -> fst s < x * 10.0) (fun s -> (fst s + 1.0, snd s + sin (fst s * x))) (0.0, 0.0))
";

const CASES: &[(&str, &str, f64, f64)] = &[
    ("halve", "[10.0]", 156.25, 62.5),
    ("none", "[2.0]", 4.0, 4.0),
];

fn rho(x: f64, y: f64) -> f64 {
    (x - y).abs() / f64::max(1.0, x.abs() + y.abs())
}

/// The gradient of `entry` at `input` with respect to `x` from `fsmooth
/// grad`, as (value, gradient).
fn grad(file: &str, entry: &str, input: &str, mode: &str, engine: &str) -> (f64, f64) {
    grad_wrt(file, entry, "x", input, mode, engine)
}

fn grad_wrt(
    file: &str,
    entry: &str,
    wrt: &str,
    input: &str,
    mode: &str,
    engine: &str,
) -> (f64, f64) {
    let (v, g) = crate::common::grad_cli(
        file,
        &[
            "--entry", entry, "--wrt", wrt, "--mode", mode, "--engine", engine, "--input", input,
        ],
    );
    (v, g[0])
}

/// D-While and R-While: every mode on both engines gives the same value
/// and gradient (ρ ≤ 1e-12 against forward mode on the evaluator, and
/// against finite differences within 1e-6), and the hand-computed ones
/// where the table has them; the tape oracle and finite differences run
/// on the evaluator.
#[test]
fn d_while_and_r_while_agree_in_every_mode_and_engine() {
    let p = temp_file("while_programs.fsm", PROGRAMS);
    let p = p.to_str().expect("path");
    let entries = [
        ("halve", "[10.0]"),
        ("grow", "[1.5]"),
        ("none", "[2.0]"),
        ("nested", "[1.3]"),
        ("perElement", "[2.0]"),
        ("counted", "[0.75]"),
    ];
    for (entry, input) in entries {
        let (v0, g0) = grad(p, entry, input, "fwd", "eval");
        for mode in ["fwd", "fwd-opt", "fwd-vec", "rev", "tape", "fd"] {
            let engines: &[&str] = if matches!(mode, "tape" | "fd") {
                &["eval"]
            } else {
                &["eval", "native"]
            };
            for engine in engines {
                let (v, g) = grad(p, entry, input, mode, engine);
                let tol = if mode == "fd" { 1e-6 } else { 1e-12 };
                assert!(
                    rho(v, v0) <= 1e-12,
                    "{entry} {mode} {engine}: value {v} vs {v0}"
                );
                assert!(
                    rho(g, g0) <= tol,
                    "{entry} {mode} {engine}: gradient {g} vs {g0}"
                );
            }
        }
        if let Some((_, _, v, g)) = CASES.iter().find(|c| c.0 == entry) {
            assert_eq!((v0, g0), (*v, *g), "{entry}");
        }
    }
}

/// D-While nests without perturbation confusion: a `deriv` inside the
/// step of a loop that is itself differentiated. Each of three steps adds
/// `x * ∂(x + y)/∂y = x`, so the result is 3x and its derivative 3 (a
/// confused tangent would count x's perturbation inside the inner
/// `deriv` too).
#[test]
fn d_while_nests_without_perturbation_confusion() {
    let src = "let f = fun (x: Double) ->
  fst (while (fun s -> snd s < 3) (fun s -> (let y = fst s in fst s + x * snd (deriv (x + y) y), snd s + 1)) (0.0, 0))
";
    let p = temp_file("while_nested_deriv.fsm", src);
    let p = p.to_str().expect("path");
    for mode in ["fwd", "rev", "tape"] {
        assert_eq!(grad(p, "f", "[2.5]", mode, "eval"), (7.5, 3.0), "{mode}");
    }
    assert_eq!(grad(p, "f", "[2.5]", "fwd", "native"), (7.5, 3.0));
}

/// T-While: the state is data and the test a Bool; the printer's output
/// parses back to the same program (print ∘ parse is a fixed point).
#[test]
fn t_while_types_and_the_printer_round_trips() {
    let p = temp_file("while_types.fsm", PROGRAMS);
    let o = cli(&["check", p.to_str().expect("path")]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("halve : Double -> Double"), "{out}");
    let parsed = fsmooth::pipeline::parse(PROGRAMS).expect("parses");
    let printed = fsmooth::syntax::print_program(&parsed);
    assert!(printed.contains("while (fun s -> "), "{printed}");
    let again = fsmooth::pipeline::parse(&printed).expect("the printed program parses");
    assert_eq!(fsmooth::syntax::print_program(&again), printed);
    for (src, code) in [
        // The test must be a Bool.
        (
            "let f = fun (x: Double) -> while (fun s -> s) (fun s -> s) x\n",
            "type-mismatch",
        ),
        // The step keeps the state's type.
        (
            "let f = fun (x: Double) -> while (fun s -> s > 1.0) (fun s -> s > 2.0) x\n",
            "type-mismatch",
        ),
        // A function is not data.
        (
            "let f = fun (x: Double) -> while (fun g -> true) (fun g -> g) (fun y -> y)\n",
            "function-as-data",
        ),
    ] {
        let p = temp_file("while_bad.fsm", src);
        let o = cli(&["check", p.to_str().expect("path")]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(&format!("error[{code}]")), "{src}: {err}");
        assert!(err.contains("while_bad.fsm:1:"), "located: {err}");
    }
}

/// E-While, E-While-Step, E-While-Done: the evaluator's trace names the
/// rules; a loop that never ends runs out of fuel cleanly, located at the
/// `while`, on both engines.
#[test]
fn e_while_steps_and_a_loop_that_never_ends_runs_out_of_fuel() {
    let p = temp_file(
        "while_run.fsm",
        "let main = fun (x: Double) -> while (fun s -> s < 10.0) (fun s -> s * 2.0) x\n\
         let forever = fun (x: Double) ->\n  while (fun s -> s > 0.0) (fun s -> s + x) x\n",
    );
    let p = p.to_str().expect("path");
    let o = cli(&["run", p, "--input", "[1.5]", "--trace"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "12.0");
    let trace = String::from_utf8_lossy(&o.stderr);
    for rule in ["E-While", "E-While-Step", "E-While-Done"] {
        assert!(
            trace.contains(&format!("{rule} ")) || trace.contains(&format!("{rule}\n")),
            "{rule}: {trace}"
        );
    }
    // 1.5 → 3 → 6 → 12: four tests, three steps.
    assert_eq!(trace.matches("E-While-Step").count(), 3, "{trace}");
    for engine in ["eval", "native"] {
        let o = cli(&[
            "run", p, "--entry", "forever", "--input", "[1.0]", "--fuel", "100000", "--engine",
            engine,
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{engine}");
        assert!(err.contains("error[out-of-fuel]"), "{engine}: {err}");
        assert!(err.contains("while_run.fsm:3:"), "{engine}: {err}");
    }
    assert_eq!(
        run_text(
            "let main = fun (x: Double) -> while (fun s -> s < 10.0) (fun s -> s * 2.0) x",
            "main",
            Some("[1.5]")
        ),
        "12.0"
    );
}

/// R-While keeps the cheap-gradient bound: ops(gradient) / ops(primal)
/// stays below 5 and does not grow with the trip count (10, 100, 1000).
#[test]
fn r_while_gradient_cost_is_bounded_in_the_trip_count() {
    let src = "let f = fun (x: Double) (n: Double) ->
  fst (while (fun s -> snd s < n) (fun s -> (sin (fst s) * x + 1.0, snd s + 1.0)) (x, 0.0))
";
    let mut ratios = Vec::new();
    for n in [10, 100, 1000] {
        let r = plan(src, "f", "x", Mode::Rev).expect("reverse program");
        let args = r
            .base
            .read_input(Some(&format!("[0.5, {n}.0]")))
            .expect("input");
        let (_, primal) = r
            .base
            .run(args.clone(), Limits::default(), &mut |_, _| {})
            .expect("primal");
        let rev = r
            .columns(args, Engine::Eval, Limits::default())
            .expect("gradient");
        ratios.push(rev.stats.ops as f64 / primal.ops as f64);
    }
    assert!(ratios.iter().all(|r| *r <= 5.0), "{ratios:?}");
    assert!(ratios[2] <= ratios[1] * 1.02, "the ratio grows: {ratios:?}");
}

/// R-Invariant (spec/ad-reverse.md §4.6): an array a loop's state carries
/// and reads costs its reads, not a copy of its cotangent list per
/// iteration — for `ifold` and `while` alike, the ratio ops(gradient) /
/// ops(primal) stays put as n grows (it was 30.8 / 55.8 / 105.8 / 205.8
/// for the fold at n = 100 / 200 / 400 / 800, and 18.4 … 118.4 for the
/// while), and the gradient is forward mode's.
#[test]
fn r_invariant_array_state_costs_its_reads() {
    let src = "let fold = fun (v: Vector) ->
  snd (ifold (fun s i -> (fst s, snd s + (fst s)[i] * (fst s)[i])) (v, 0.0) (length v))
let loop = fun (v: Vector) ->
  snd (snd (while (fun s -> toDouble (fst (snd s)) < toDouble (length (fst s)))
    (fun s -> (fst s, (fst (snd s) + 1, snd (snd s) + (fst s)[fst (snd s)] * 2.0)))
    (v, (0, 0.0))))
";
    for entry in ["fold", "loop"] {
        let mut ratios = Vec::new();
        for n in [100, 200, 400, 800] {
            let v: Vec<String> = (0..n)
                .map(|i| format!("{}", 1.0 + i as f64 / 64.0))
                .collect();
            let input = format!("[{}]", v.join(", "));
            let r = plan(src, entry, "v", Mode::Rev).expect("reverse program");
            let args = r.base.read_input(Some(&input)).expect("input");
            let (_, primal) = r
                .base
                .run(args.clone(), Limits::default(), &mut |_, _| {})
                .expect("primal");
            let rev = r
                .columns(args.clone(), Engine::Eval, Limits::default())
                .expect("gradient");
            ratios.push(rev.stats.ops as f64 / primal.ops as f64);
            if n == 100 {
                let fwd = plan(src, entry, "v", Mode::Fwd).expect("forward program");
                let fwd = fwd
                    .columns(args, Engine::Eval, Limits::default())
                    .expect("fwd");
                let (a, b) = (rev.columns.concat(), fwd.columns.concat());
                assert_eq!(a.len(), n, "{entry}");
                let rho = |x: f64, y: f64| (x - y).abs() / (x.abs() + y.abs()).max(1.0);
                assert!(
                    a.iter().zip(&b).all(|(x, y)| rho(*x, *y) < 1e-12),
                    "{entry}: {a:?} {b:?}"
                );
            }
        }
        assert!(ratios.iter().all(|r| *r <= 6.0), "{entry}: {ratios:?}");
        assert!(ratios[3] <= ratios[0] * 1.02, "{entry} grows: {ratios:?}");
    }
}

/// Where the trip count changes, the derivative is the piecewise one
/// (spec/ad-reverse.md, R-While): at x = 1.0 `halve` stops before its
/// first step (the test `1.0 > 1.0` is false), so its value is 1 and
/// every mode gives the derivative of the loop that ran no step, 0 — just
/// above, the loop runs once and the function is x.
#[test]
fn the_derivative_where_the_trip_count_changes_is_piecewise() {
    let p = temp_file("while_piecewise.fsm", PROGRAMS);
    let p = p.to_str().expect("path");
    for mode in ["fwd", "rev", "tape"] {
        assert_eq!(
            grad(p, "halve", "[1.0]", mode, "eval"),
            (1.0, 0.0),
            "{mode}"
        );
        assert_eq!(
            grad(p, "halve", "[1.5]", mode, "eval"),
            (1.5, 1.0),
            "{mode}"
        );
    }
}

/// The generator makes `while` loops that terminate (a counter capped at
/// a literal, tested against a data-dependent bound or any Bool), and
/// every property checks them: the AD modes against each other and finite
/// differences, and native code against the evaluator. `fsmooth difftest
/// --only-while` runs a long campaign of them.
#[test]
fn generated_while_loops_pass_every_property() {
    use fsmooth::difftest::{Campaign, Property, run};
    for (property, cases) in [
        (Property::Ad, 150),
        (Property::FwdOpt, 8),
        (Property::Native, 8),
    ] {
        let s = run(Campaign {
            cases: cases * 12,
            seed: 7,
            max_size: 4,
            limits: Limits::with_fuel(200_000),
            property,
            only_while: true,
            only_operators: false,
        });
        if let Some(f) = s.failure {
            panic!(
                "{property:?} case {} ({} shrinks): {}\n{}",
                f.case, f.shrinks, f.message, f.program
            );
        }
        assert_eq!(s.with_while, s.programs, "{property:?}");
        assert!(
            s.programs >= cases / 2,
            "{property:?}: only {} programs",
            s.programs
        );
        assert!(
            s.counts.compared >= s.programs as usize,
            "{property:?}: {:?}",
            s.counts
        );
    }
}

/// GradBench's minimiser (`gd.hpp`) over a Vector state
/// (`examples/stalingrad/gd.fsm`): in both engines the point and the
/// number of tests are those of a line-by-line binary64 transcription of
/// `multivariate_argmin` (Python floats, the objective's gradient in
/// forward mode's order of operations), bit for bit; the derivative of
/// the minimum through the whole search agrees in every mode and engine,
/// and with the envelope theorem's exact value 26/31 (the minimiser
/// stops within 1e-5 of the optimum).
#[test]
fn gradbench_minimiser_over_a_vector_state() {
    let gd = crate::common::root().join("examples/stalingrad/gd.fsm");
    let gd = gd.to_str().expect("path");
    for engine in ["eval", "native"] {
        let o = cli(&[
            "run", gd, "--entry", "argmin", "--input", "[1.0]", "--engine", engine,
        ]);
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "[[0.7741824849405952, 0.9032284180796651, 1.0, 0.9999999999991982], 170.0]\n",
            "{engine}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let (v, d) = grad_wrt(gd, "minimum", "c", "[1.0]", "fwd", "eval");
    assert_eq!(v, 0.41935483883127167);
    assert!((d - 26.0 / 31.0).abs() <= 1e-8, "{d}");
    for (mode, engine) in [
        ("rev", "eval"),
        ("tape", "eval"),
        ("fwd", "native"),
        ("rev", "native"),
    ] {
        let (v1, d1) = grad_wrt(gd, "minimum", "c", "[1.0]", mode, engine);
        assert_eq!(v1, v, "{mode} {engine}");
        assert!(rho(d1, d) <= 1e-12, "{mode} {engine}: {d1} against {d}");
    }
}

/// R-Checkpoint-Sqrt and R-Checkpoint-State (spec/ad-reverse.md §4.7):
/// `--checkpoint sqrt` runs a
/// nonlinear fold (a `while`'s, a fold over a Vector state, a fold carrying
/// an array and a Double) as ⌈√n⌉ segments and keeps only the states
/// between them. Its values are `loops`'s bit for bit and its gradients
/// within rounding (a free variable's contributions are summed segment by
/// segment), in both engines; and it keeps no array of n entries: with
/// arrays limited to 1,000 elements (E-Limit) a 10⁵-trip `while`'s
/// gradient fails under `loops` (its tape has 10⁵ + 1 entries) and runs
/// under `sqrt`.
#[test]
fn r_checkpoint_sqrt_keeps_the_states_between_segments() {
    let src = "let f = fun (x: Double) (n: Double) ->
  fst (while (fun s -> snd s < n) (fun s -> (sin (fst s) * x + 1.0, snd s + 1.0)) (x, 0.0))
let g = fun (v: Vector) ->
  vectorSum (ifold (fun s i -> build (length s) (fun j -> sin (s[j]) * 0.5 + v[j])) v 10)
let h = fun (v: Vector) -> snd (ifold (fun s i -> (fst s, snd s * 0.9 + sin ((fst s)[i]) * snd s)) (v, 1.0) (length v))
";
    let p = crate::common::temp_file("sqrt_checkpoint.fsm", src);
    let p = p.to_str().expect("path");
    let gd = crate::common::root().join("examples/stalingrad/gd.fsm");
    let gd = gd.to_str().expect("path");
    let cases = [
        (p, "f", "x", "[0.5, 37.0]"),
        (p, "g", "v", "[[0.1, 0.2, 0.3]]"),
        (p, "h", "v", "[[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]]"),
        (gd, "minimum", "c", "[1.0]"),
    ];
    let grad = |file: &str, entry: &str, wrt: &str, input: &str, policy: &str, engine: &str| {
        crate::common::grad_cli(
            file,
            &[
                "--entry",
                entry,
                "--wrt",
                wrt,
                "--mode",
                "rev",
                "--engine",
                engine,
                "--input",
                input,
                "--checkpoint",
                policy,
            ],
        )
    };
    for (file, entry, wrt, input) in cases {
        let (v0, g0) = grad(file, entry, wrt, input, "loops", "eval");
        for engine in ["eval", "native"] {
            let (v1, g1) = grad(file, entry, wrt, input, "sqrt", engine);
            assert_eq!(v1, v0, "{entry} {engine}");
            assert_eq!(g1.len(), g0.len(), "{entry} {engine}");
            for (a, b) in g1.iter().zip(&g0) {
                assert!(rho(*a, *b) <= 1e-12, "{entry} {engine}: {g1:?} vs {g0:?}");
            }
        }
    }
    for engine in ["eval", "native"] {
        let run = |policy: &str| {
            cli(&[
                "grad",
                p,
                "--entry",
                "f",
                "--wrt",
                "x",
                "--mode",
                "rev",
                "--engine",
                engine,
                "--input",
                "[0.5, 100000.0]",
                "--checkpoint",
                policy,
                "--max-elements",
                "1000",
            ])
        };
        let loops = run("loops");
        let err = String::from_utf8_lossy(&loops.stderr);
        assert!(err.contains("error[array-too-large]"), "{engine}: {err}");
        let sqrt = run("sqrt");
        assert!(
            sqrt.status.success(),
            "{engine}: {}",
            String::from_utf8_lossy(&sqrt.stderr)
        );
    }
}

/// R-Checkpoint-Sqrt segments only folds whose count cannot be negative:
/// a fold over the second component of a user's `while` (Index state, so
/// not R-While's trip count) is ⊥ at a negative count (E-IFold-Bot) under
/// `sqrt` as under `loops`, not the initial state that zero segments
/// would give.
#[test]
fn r_checkpoint_sqrt_keeps_the_bottom_of_a_negative_count() {
    let p = crate::common::temp_file(
        "sqrt_negative.fsm",
        "let f = fun (x: Double) ->
  let m = length [x] in
  let p = while (fun s -> false) (fun s -> s) (m, 0 - m - 4) in
  ifold (fun s i -> s * s + x) x (snd p)
",
    );
    for policy in ["loops", "sqrt"] {
        let o = cli(&[
            "grad",
            p.to_str().expect("path"),
            "--entry",
            "f",
            "--wrt",
            "x",
            "--mode",
            "rev",
            "--input",
            "[0.5]",
            "--checkpoint",
            policy,
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("error[negative-count]"), "{policy}: {err}");
    }
}
