//! Reverse mode: agreement of the four gradients (source-to-source
//! reverse, the tape, forward mode, finite differences) on the whole M̃
//! library, and the cheap-gradient criterion measured in operations.

use fsmooth::eval::Limits;
use fsmooth::gradient::{self, Columns, Mode, Plan};
use fsmooth::pipeline::{Engine, Session};

use crate::common::plan;
use crate::forward::{LIBRARY, assert_columns_close, library_cases};

/// Reverse mode's plan (`rev`) for `entry` w.r.t. `wrt`.
fn reverse(src: &str, entry: &str, wrt: &str) -> Plan {
    plan(src, entry, wrt, Mode::Rev).expect("reverse program")
}

/// The printed reverse-mode program of a plan of `rev`.
fn printed(r: &Plan) -> String {
    fsmooth::syntax::print_program(&r.program().expect("the reverse program").program)
}

fn rev_columns(src: &str, entry: &str, wrt: &str, input: &str) -> (Columns, Columns) {
    let r = plan(src, entry, wrt, Mode::Rev).expect("reverse program builds");
    let args = r.base.read_input(Some(input)).expect("input");
    let limits = Limits::default();
    let rev = r
        .columns(args.clone(), Engine::Eval, limits)
        .expect("reverse runs");
    let tape = gradient::tape(&r.base, r.wrt, args, limits).expect("tape runs");
    (rev, tape)
}

/// The reverse-mode gradient of `f` with respect to `wrt` on `input`,
/// checked equal to the tape oracle's and to forward mode's.
fn rev_checked(src: &str, f: &str, wrt: &str, input: &str) -> Columns {
    let what = format!("{f} wrt {wrt}");
    let (rev, tape) = rev_columns(src, f, wrt, input);
    assert_columns_close(&format!("rev vs tape: {what}"), &rev, &tape, 1e-12);
    let d = plan(src, f, wrt, Mode::Fwd).expect("forward");
    let args = d.base.read_input(Some(input)).expect("input");
    let fwd = d
        .columns(args, Engine::Eval, Limits::default())
        .expect("forward runs");
    assert_columns_close(&format!("rev vs fwd: {what}"), &rev, &fwd, 1e-12);
    rev
}

/// R-* rules on every prelude function: reverse = tape = forward = fd.
#[test]
fn reverse_mode_matches_the_tape_forward_mode_and_finite_differences_on_the_prelude() {
    let mut entries = 0;
    for (name, input) in library_cases() {
        let entry = format!("e_{name}");
        let session = Session::load(LIBRARY).expect("LIBRARY loads");
        let base = session.entry(&entry).expect("entry");
        for (p, _) in &base.params {
            let what = format!("{entry} {input} wrt {p}");
            let (rev, tape) = rev_columns(LIBRARY, &entry, p, &input);
            let d = plan(LIBRARY, &entry, p, Mode::Fwd).expect("forward");
            let args = base.read_input(Some(&input)).expect("input");
            let fwd = d
                .columns(args.clone(), Engine::Eval, Limits::default())
                .expect("forward runs");
            let fd = gradient::finite_differences(&d.base, d.wrt, args, Limits::default())
                .expect("fd runs");
            entries += assert_columns_close(&format!("rev vs tape: {what}"), &rev, &tape, 1e-12);
            assert_columns_close(&format!("rev vs fwd: {what}"), &rev, &fwd, 1e-12);
            assert_columns_close(&format!("rev vs fd: {what}"), &rev, &fd, 1e-6);
        }
    }
    assert!(entries > 300, "only {entries} Jacobian entries compared");
}

/// The cost model of the cheap-gradient criterion: operations (and steps)
/// of the reverse-mode gradient divided by those of the function, at
/// growing sizes. The ratio must stay below 5 (at most 4.15 since
/// R-IFold-Linear) and must not grow with n.
struct Workload {
    name: &'static str,
    src: &'static str,
    entry: &'static str,
    wrt: &'static str,
    input: fn(usize) -> String,
}

fn vector(n: usize, seed: f64) -> String {
    let xs: Vec<String> = (0..n)
        .map(|i| format!("{:.6}", ((i as f64 + seed) * 0.37).sin()))
        .collect();
    format!("[{}]", xs.join(", "))
}

fn matrix(r: usize, c: usize, seed: f64) -> String {
    let rows: Vec<String> = (0..r).map(|i| vector(c, seed + i as f64 * 1.3)).collect();
    format!("[{}]", rows.join(", "))
}

const WORKLOADS: [Workload; 5] = [
    Workload {
        name: "dot product",
        src: "let f = fun (a: Vector) (b: Vector) -> vectorDot a b",
        entry: "f",
        wrt: "a",
        input: |n| format!("[{}, {}]", vector(n, 0.0), vector(n, 1.0)),
    },
    Workload {
        name: "sum of squares",
        src: "let f = fun (a: Vector) -> vectorSum (vectorMap a (fun x -> x * x))",
        entry: "f",
        wrt: "a",
        input: |n| vector(n, 0.5),
    },
    Workload {
        name: "matrix-vector product (n x 10)",
        src: "let f = fun (m: Matrix) (v: Vector) -> vectorSum (matrixVectorMul m v)",
        entry: "f",
        wrt: "m",
        input: |n| format!("[{}, {}]", matrix(n, 10, 0.0), vector(10, 2.0)),
    },
    Workload {
        // seed 001 §7: D(A | WH) = Σ log Ã + A / Ã with Ã = u vᵀ (rank 1).
        name: "NNMF objective (n x 10)",
        src: "let f = fun (a: Matrix) (u: Vector) (v: Vector) ->
  ifold (fun s i -> s + ifold (fun t j ->
      let at = u[i] * v[j]
      t + log at + a[i][j] / at) 0.0 (length v)) 0.0 (length u)",
        entry: "f",
        wrt: "u",
        input: |n| {
            let pos = |k: usize, s: f64| {
                let xs: Vec<String> = (0..k)
                    .map(|i| format!("{:.6}", 1.5 + ((i as f64 + s) * 0.7).sin()))
                    .collect();
                format!("[{}]", xs.join(", "))
            };
            let rows: Vec<String> = (0..n).map(|i| pos(10, i as f64)).collect();
            format!("[[{}], {}, {}]", rows.join(", "), pos(n, 3.0), pos(10, 5.0))
        },
    },
    Workload {
        name: "GMM objective (d = 2, k = 3, n points)",
        src: "",
        entry: "gmmObjectiveFlat",
        wrt: "theta",
        input: |n| {
            let theta = "[0.1, -0.3, 0.2, 0.5, 0.1, -0.4, 0.3, 0.0, -0.2, 0.2, -0.1, 0.3, 0.1, 0.2, -0.3, 0.05, 0.1, -0.1]";
            format!("[{theta}, {}, 1.0, 0]", matrix(n, 2, 0.3))
        },
    },
];

fn ops(src: &str, w: &Workload, n: usize) -> (u64, u64, u64, u64) {
    let r = reverse(src, w.entry, w.wrt);
    let args = r.base.read_input(Some(&(w.input)(n))).expect("input");
    let (_, primal) = r
        .base
        .run(args.clone(), Limits::default(), &mut |_, _| {})
        .expect("primal");
    let rev = r
        .columns(args, Engine::Eval, Limits::default())
        .expect("gradient");
    (primal.ops, rev.stats.ops, primal.steps, rev.stats.steps)
}

#[test]
fn gradient_costs_a_bounded_factor_more_than_the_function() {
    let gmm = fsmooth::adbench::gmm::GMM_SOURCE;
    let mut table = String::from(
        "| workload | n | primal ops | gradient ops | ratio | steps ratio |\n|---|---|---|---|---|---|\n",
    );
    for w in &WORKLOADS {
        let src = if w.src.is_empty() { gmm } else { w.src };
        let mut ratios = Vec::new();
        for n in [10, 100, 1000] {
            let (p, g, ps, gs) = ops(src, w, n);
            let ratio = g as f64 / p as f64;
            table.push_str(&format!(
                "| {} | {n} | {p} | {g} | {ratio:.2} | {:.2} |\n",
                w.name,
                gs as f64 / ps as f64
            ));
            ratios.push(ratio);
        }
        assert!(
            ratios.iter().all(|r| *r <= 5.0),
            "{}: ratios {ratios:?} exceed 5",
            w.name
        );
        // Fixed costs amortise between 10 and 100; from 100 to 1000 the
        // ratio must be flat (a growing ratio would mean O(n²) work).
        assert!(
            ratios[2] <= ratios[1] * 1.02,
            "{}: the ratio grows with n: {ratios:?}",
            w.name
        );
    }
    eprintln!("{table}");
}

/// Forward-over-reverse: the reverse-mode program is ordinary F̃ (its
/// printed form parses and type-checks), so `deriv` can differentiate it:
/// the Hessian–vector product of f = 2x² + 3xy + 4y² at (3, 4) along
/// (7, 8) is (52, 85) (test-cases NE3).
#[test]
fn forward_over_reverse_gives_the_hessian_vector_product() {
    let src =
        "let f = fun (v: Vector) -> 2.0 * v[0] * v[0] + 3.0 * v[0] * v[1] + 4.0 * v[1] * v[1]";
    let printed = printed(&reverse(src, "f", "v"));
    let hvp = format!(
        "{printed}
let hvp = fun (v: Vector) (u: Vector) ->
  let h = deriv (snd (rev'entry v)) v
  build (length v) (fun i -> ifold (fun s j -> s + snd (h[j][i]) * u[j]) 0.0 (length v))
"
    );
    let got = crate::common::run_text(&hvp, "hvp", Some("[[3.0, 4.0], [7.0, 8.0]]"));
    assert_eq!(got, "[52.0, 85.0]");
}

/// Reverse-over-forward: reverse mode of a program that uses `deriv`.
#[test]
fn reverse_over_forward_gives_the_hessian_vector_product() {
    let src = "let f = fun x y -> 2.0 * x * x + 3.0 * x * y + 4.0 * y * y
let hv = fun (x: Double) (y: Double) -> snd (deriv (f x y) x) * 7.0 + snd (deriv (f x y) y) * 8.0";
    let mut got = Vec::new();
    for wrt in ["x", "y"] {
        let (rev, _) = rev_columns(src, "hv", wrt, "[3.0, 4.0]");
        got.push(rev.columns[0][0]);
    }
    assert_eq!(got, vec![52.0, 85.0]);
}

/// `fsmooth vjp` in every mode, and `grad --mode rev` from the CLI.
#[test]
fn cli_vjp_and_reverse_gradients() {
    let p = crate::common::temp_file(
        "rev_cli.fsm",
        "let f = fun (x: Vector) -> vectorAdd x (vectorSMul x 2.0)\nlet g = fun (a: Vector) (b: Vector) -> vectorDot a b\n",
    );
    let p = p.to_str().expect("utf-8 path");
    for mode in ["rev", "tape", "fwd"] {
        let o = crate::common::cli(&[
            "vjp",
            p,
            "--entry",
            "f",
            "--wrt",
            "x",
            "--input",
            "[1, 2]",
            "--cotangent",
            "[0.5, -1]",
            "--mode",
            mode,
        ]);
        assert!(
            o.status.success(),
            "{mode}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            r#"{"value": [3.0, 6.0], "vjp": [1.5, -3.0]}"#,
            "{mode}"
        );
    }
    let o = crate::common::cli(&[
        "grad",
        p,
        "--entry",
        "g",
        "--wrt",
        "a",
        "--input",
        r#"{"a": [1, 2, 3], "b": [4, 5, 6]}"#,
        "--mode",
        "rev",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        r#"{"value": 32.0, "gradient": [4.0, 5.0, 6.0]}"#
    );
    // The reverse program prints as source that parses again.
    let o = crate::common::cli(&["ad", p, "--entry", "g", "--wrt", "a", "--mode", "rev"]);
    assert!(o.status.success());
    let printed = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(printed.contains("let rev'entry"), "{printed}");
    assert!(
        Session::load(&printed).is_ok(),
        "printed reverse program does not load:\n{printed}"
    );
}

/// R-IFold-Linear and untaped loops (spec/ad-reverse.md §4.1, §5.5): a
/// fold whose state reaches its result through additions alone runs
/// backwards as a map over its iterations (no backward `iscan`), and one
/// whose body also binds only recomputed values keeps no tape (no
/// forward `iscan` either). A state used otherwise (`a[i] - s`,
/// `s + s * a[i]`) keeps its forward scan; its backward loop threads the
/// accumulator of `a` (R-IFold-Acc, §5.6), so it is an `ifold`, not a
/// scan that records every iteration's contributions. Every gradient
/// equals the tape oracle's and forward mode's.
#[test]
fn linear_folds_run_backwards_as_maps_and_untaped_loops_keep_no_tape() {
    let src = "let sumsq (a: Vector) = ifold (fun s i -> s + a[i] * a[i]) 0.0 (length a)\n\
               let left (a: Vector) (c: Double) = ifold (fun s i -> a[i] * c + s) c (length a)\n\
               let minus (a: Vector) = ifold (fun s i -> let y = s - a[i] in y + exp (a[i])) 0.5 (length a)\n\
               let flipped (a: Vector) = ifold (fun s i -> a[i] - s) 0.0 (length a)\n\
               let twice (a: Vector) = ifold (fun s i -> s + s * a[i]) 1.0 (length a)\n";
    let a = "[1.5, -2.0, 3.0, 0.25, -0.75]";
    // (entry, parameter, input (one parameter's value, or all of them in
    // a list), `iscan`s in the reverse program)
    for (f, wrt, input, scans) in [
        ("sumsq", "a", a.to_string(), 0),
        ("left", "a", format!("[{a}, 0.7]"), 0),
        ("left", "c", format!("[{a}, 0.7]"), 0),
        ("minus", "a", a.to_string(), 1),
        ("flipped", "a", a.to_string(), 1),
        ("twice", "a", a.to_string(), 1),
    ] {
        let what = format!("{f} wrt {wrt}");
        rev_checked(src, f, wrt, &input);
        let text = printed(&reverse(src, f, wrt));
        assert_eq!(text.matches("iscan").count(), scans, "{what}:\n{text}");
    }
}

/// The loops R-Checkpoint recomputes (spec/ad-reverse.md §4.4): a linear
/// fold and a `build` of the entry's own block whose bodies hold loops —
/// a map of `exp`, a non-linear inner fold (taped inside the
/// recomputation), a conditional with a loop in one branch — and a fold
/// that is not linear, which keeps its tape. Every gradient equals the
/// tape oracle's and forward mode's; the checkpointed loops' forward
/// sweep is the plain loop, so the printed reverse program has no forward
/// `iscan` for them (taped, each had one); the non-linear fold keeps its
/// forward `iscan`. `inner`'s sum of a map is one fold (R-Defer-Sum),
/// deferred: the reverse sweep recomputes each row's inner fold (its one
/// `iscan`) for the row's value as well as its reverse.
#[test]
fn checkpointed_loops_recompute_their_iterations() {
    let src = "let rows (w: Vector) (m: Matrix) =\n\
               \x20 ifold (fun s i -> s + vectorSum (build (length w) (fun j -> exp (w[j] * m[i][j])))) 0.0 (length m)\n\
               let inner (w: Vector) (m: Matrix) =\n\
               \x20 vectorSum (build (length m) (fun i -> ifold (fun t j -> t * 0.5 + sin (w[j] * m[i][j])) 1.0 (length w)))\n\
               let branch (w: Vector) (m: Matrix) =\n\
               \x20 ifold (fun s i -> s + (if m[i][0] > 0.0 then vectorNormSq (vectorEMul w m[i]) else exp (w[0] * m[i][1]))) 0.0 (length m)\n\
               let scaled (w: Vector) (m: Matrix) =\n\
               \x20 ifold (fun s i -> s * 0.5 + vectorSum (build (length w) (fun j -> exp (w[j] * m[i][j])))) 0.0 (length m)\n";
    let input = "[[0.5, -1.25, 2.0], [[1.0, 0.5, -0.25], [-2.0, 1.5, 0.75], [0.125, -0.5, 3.0], [1.5, 2.5, -1.0]]]";
    // (entry, `iscan`s in the reverse program)
    for (f, scans) in [("rows", 0), ("inner", 1), ("branch", 0), ("scaled", 1)] {
        for wrt in ["w", "m"] {
            let what = format!("{f} wrt {wrt}");
            rev_checked(src, f, wrt, input);
            let text = printed(&reverse(src, f, wrt));
            // A Matrix parameter's accumulator offsets add one `iscan`.
            let scans = scans + usize::from(wrt == "m");
            assert_eq!(text.matches("iscan").count(), scans, "{what}:\n{text}");
        }
    }
}

/// R-Defer (spec/ad-reverse.md §4.5): a linear fold of the entry's own
/// block that keeps no tape and reaches the result through additions
/// alone is computed by the reverse sweep, not the forward one — fused
/// into its backward loop when that loop threads accumulators (`rows`,
/// `pair` wrt `w`), on its own where it does not (wrt the Double `c`),
/// plainly at the end when it gets no cotangent (`rows` wrt `m0`, which it
/// does not read). The value is the primal's, bit for bit (the same
/// additions in the same order), and the gradient the tape's and forward
/// mode's; the forward sweep of `rows` and `pair` holds no loop at all.
/// `used` reads the fold's value elsewhere (`t * t`), and `nested`'s fold
/// reaches the result through a product: neither is deferred, and their
/// forward sweeps keep the fold. R-Defer-Sum: `summap`'s sum of a map
/// becomes one fold, deferred; `twice` reads the map again (`b[0]`), so
/// its map stays in the forward sweep.
#[test]
fn deferred_folds_are_computed_by_the_reverse_sweep() {
    let src = "let rows (w: Vector) (m: Matrix) (c: Double) (m0: Vector) =\n\
               \x20 let t = ifold (fun s i -> let y = s + vectorSum (build (length w) (fun j -> exp (w[j] * m[i][j]))) in y - c * m[i][0]) 0.5 (length m)\n\
               \x20 c * 2.0 + t - m0[1]\n\
               let pair (w: Vector) (m: Matrix) (c: Double) (m0: Vector) =\n\
               \x20 let a = ifold (fun s i -> s + w[i] * c) 0.0 (length w)\n\
               \x20 let b = ifold (fun s i -> s + vectorNormSq (vectorEMul w m[i])) 0.0 (length m)\n\
               \x20 a + b\n\
               let used (w: Vector) (m: Matrix) (c: Double) (m0: Vector) =\n\
               \x20 let t = ifold (fun s i -> s + vectorNormSq (vectorEMul w m[i])) 0.0 (length m)\n\
               \x20 t + t * t\n\
               let nested (w: Vector) (m: Matrix) (c: Double) (m0: Vector) =\n\
               \x20 c * ifold (fun s i -> s + vectorNormSq (vectorEMul w m[i])) 0.0 (length m)\n\
               let summap (w: Vector) (m: Matrix) (c: Double) (m0: Vector) =\n\
               \x20 vectorSum (build (length m) (fun i -> vectorNormSq (vectorEMul w m[i]) / c)) + c\n\
               let twice (w: Vector) (m: Matrix) (c: Double) (m0: Vector) =\n\
               \x20 let b = build (length m) (fun i -> vectorNormSq (vectorEMul w m[i]) / c) in vectorSum b + b[0]\n";
    let input = "[[0.5, -1.25, 2.0], [[1.0, 0.5, -0.25], [-2.0, 1.5, 0.75], [0.125, -0.5, 3.0]], 0.75, [1.0, 2.0]]";
    // (entry, whether its forward sweep holds a loop)
    for (f, loops) in [
        ("rows", false),
        ("pair", false),
        ("used", true),
        ("nested", true),
        ("summap", false),
        ("twice", true),
    ] {
        for wrt in ["w", "m", "c", "m0"] {
            let what = format!("{f} wrt {wrt}");
            let rev = rev_checked(src, f, wrt, input);
            let r = reverse(src, f, wrt);
            let args = r.base.read_input(Some(input)).expect("input");
            let (primal, _) = r
                .base
                .run(args, Limits::default(), &mut |_, _| {})
                .expect("the primal runs");
            assert!(
                rev.value.same(&primal),
                "{what}: value {} against the primal's {primal}",
                rev.value
            );
            let text = printed(&r);
            let sweep = &text[..text.find("let seed'").expect("the seed")];
            assert_eq!(sweep.contains("ifold"), loops, "{what}:\n{text}");
        }
    }
}
