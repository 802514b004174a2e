//! Derivative programs natively: the reverse- and forward-mode programs
//! of the examples and of the golden files' `// grad:` lines agree with
//! the evaluator, and reverse mode's memory: recomputed conditionals and
//! reads keep no tape, checkpointed loops keep one iteration's, arrays
//! read once contribute bare pairs.

use fsmooth::ad::Checkpointing;
use fsmooth::codegen::Native;
use fsmooth::eval::Value;
use fsmooth::gradient::{Mode, Plan};
use fsmooth::pipeline::{Engine, Session};

use super::{FUEL, compile, example, files_under, gradient_programs_agree, vector};
use crate::common;

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
            let Ok(rev) = common::plan(&src, fun, p, Mode::Rev) else {
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
        let rev = common::plan(src, f, "v", Mode::Rev).expect("reverse mode");
        let o = compile(rev.program().expect("the reverse program"))
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
        let rev = common::plan(src, f, "w", Mode::Rev).expect("reverse mode");
        let native = compile(rev.program().expect("the reverse program"));
        let (few, many) = (arena(&native, 2_000), arena(&native, 20_000));
        if f == "scaled" {
            assert!(many > few + (1 << 20), "{f}: {few} and {many} arena bytes");
        } else {
            assert_eq!(few, many, "{f}: arena bytes at 2 000 and 20 000 rows");
        }
    }
    // `--checkpoint off`: the same loop keeps every row's tape.
    let session = Session::load(src).expect("loads");
    let off = Plan::new(
        &session,
        "rows",
        "w",
        Mode::Rev,
        Engine::Eval,
        Checkpointing::Off,
    )
    .expect("reverse mode");
    let native = compile(off.program().expect("the reverse program"));
    let (few, many) = (arena(&native, 2_000), arena(&native, 20_000));
    assert!(many > few + (1 << 20), "off: {few} and {many} arena bytes");
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
    let rev = common::plan(src, "dot", "a", Mode::Rev).expect("reverse mode");
    let text = fsmooth::syntax::print_program(&rev.program().expect("the reverse program").program);
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
    let rev = common::plan(src, "dot", "a", Mode::Rev).expect("reverse mode");
    let n = 100_000;
    let (u, v): (Vec<f64>, Vec<f64>) = (0..n).map(|k| (k as f64, 1.0 - k as f64)).unzip();
    let o = compile(rev.program().expect("the reverse program"))
        .call_slices(&[Arg::F64s(&u), Arg::F64s(&v)])
        .expect("runs");
    assert!(
        o.arena_bytes() <= 10 * n,
        "{} arena bytes at n = {n}",
        o.arena_bytes()
    );
}
