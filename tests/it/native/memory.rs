//! Where arrays live natively: copies of arrays bound outside loops are
//! views of their buffer, an `addAt` updates in place only where the old
//! array is dead (Note [In-place updates]), and arrays an iteration builds
//! and nobody keeps are freed per iteration (Note [Scratch arrays]).

use fsmooth::codegen::CodegenError;
use fsmooth::eval::Value;

use super::{Outcome, compare_src, compile, listing_of, load_entry, vector};

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
    let err = compile(&e)
        .call(&[a.clone(), Value::Index(4)])
        .unwrap_err()
        .unlocated();
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
/// place (`+`) or into a copy (`-`). A buffer in two components of a
/// pair (`twice`) is not linear: its `addAt`s copy.
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
               let rows (m: Matrix) = let r = m[0] in addAt r 0 1.0\n\
               let twice (n: Index) = let z = build n (fun i -> 0.0) in ifold (fun s i -> (addAt (fst s) i 1.0, addAt (snd s) i 2.0)) (z, z) n\n";
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
        // One buffer in both components of the state (`pair z z`): a
        // review found both written in place, each seeing the other's
        // additions.
        ("twice", vec![Value::Index(3)], &["-", "-"]),
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

/// Note [Scratch arrays], `while`: an iteration is a test and a step, and
/// an array either builds that the next state does not reach is freed
/// when the iteration ends; an array the state keeps (here a growing
/// history) stays in the main arena. Each program agrees with the
/// evaluator, and 1 000 steps that each copy 10⁴ elements twice take a
/// few chunks where keeping every step's copy would take 160 MB; the
/// last test's arrays, after which no step runs, are released too.
#[test]
fn while_steps_free_the_arrays_the_state_does_not_keep() {
    use fsmooth::codegen::Arg;
    let src = "let copies (x: Vector) (k: Index) = while (fun s -> fst s < k) (fun s -> let c = concat [x, x] in (fst s + 1, snd s + c[fst s] + c[length x])) (0, 0.0)\n\
               let tests (x: Vector) (k: Index) = while (fun s -> let t = build (length x) (fun j -> x[j] / toDouble (fst s + 1)) in fst s < k && t[0] < 1000.0) (fun s -> (fst s + 1, snd s + 1.0)) (0, 0.0)\n\
               let history (x: Vector) (k: Index) = while (fun s -> length s < k) (fun s -> let c = concat [x, x] in concat [s, build 1 (fun j -> c[length s])]) (build 1 (fun j -> x[0]))\n\
               let nested (x: Vector) (k: Index) = while (fun s -> fst s < k) (fun s -> let r = build 3 (fun c -> let t = build (length x) (fun j -> x[j] / toDouble (c + 1)) in t[fst s]) in (fst s + 1, snd s + r[0] + r[2])) (0, 0.0)\n\
               let lastTests (x: Vector) (k: Index) = build k (fun i -> snd (while (fun s -> let t = build (length x) (fun j -> x[j] / toDouble (i + 1)) in t[0] < 0.0) (fun s -> (fst s + 1, snd s + 1.0)) (0, 0.0)))\n";
    let i = Value::Index;
    let x = vector(&[5.0, 1.0, 2.0, 3.0]);
    let cases: Vec<(&str, Vec<Value>, Outcome)> = vec![
        ("copies", vec![x.clone(), i(4)], Outcome::Value),
        ("copies", vec![x.clone(), i(0)], Outcome::Value),
        ("copies", vec![x.clone(), i(9)], Outcome::Bottom),
        ("tests", vec![x.clone(), i(3)], Outcome::Value),
        ("history", vec![x.clone(), i(6)], Outcome::Value),
        ("nested", vec![x.clone(), i(4)], Outcome::Value),
        ("lastTests", vec![x.clone(), i(3)], Outcome::Value),
    ];
    for (f, args, want) in cases {
        assert_eq!(compare_src(src, f, &args), want, "{f} {args:?}");
    }
    let x: Vec<f64> = (0..10_000).map(|k| 1.0 + k as f64 * 1e-4).collect();
    // `lastTests` runs 1 000 `while`s of one test each, in a `build`
    // that releases nothing of its own: the last test's array is
    // released on the way out (kept: 80 MB).
    for f in ["copies", "tests", "nested", "lastTests"] {
        let o = compile(&load_entry(src, f))
            .call_slices(&[Arg::F64s(&x), Arg::I64(1_000)])
            .expect("runs");
        assert!(
            o.arena_bytes() <= 4 << 20,
            "{f}: {} arena bytes",
            o.arena_bytes()
        );
    }
    // The step's copy (its first `concat`) is released by the `while`;
    // the history (the step's result) is not.
    let listing = listing_of(src, "history");
    let lines: Vec<&str> = listing.lines().collect();
    let step = lines.iter().position(|l| *l == "step").expect("a step");
    let bound = |l: &str| l.trim().split(" = ").next().map(str::to_string);
    let copy = lines[step..]
        .iter()
        .find(|l| l.contains(" = concat("))
        .and_then(|l| bound(l))
        .expect("the copy");
    let kept = lines[step..]
        .iter()
        .find_map(|l| l.strip_prefix("  => "))
        .expect("the step's result");
    let row = lines
        .iter()
        .find(|l| l.contains(" releases stack 0: "))
        .unwrap_or_else(|| panic!("no release: {listing}"));
    let released: Vec<&str> = row.split(": ").nth(1).unwrap_or("").split(", ").collect();
    assert!(released.contains(&copy.as_str()), "{copy}: {listing}");
    assert!(!released.contains(&kept), "{kept}: {listing}");
}
