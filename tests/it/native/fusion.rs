//! Note [Fusion] and Note [Vertical fusion] natively: pull arrays that
//! are never built, accumulations that read their parts in place, small
//! arrays in registers, producers built in the loop that reads them (and
//! merged again), and builds summed over a length merged into the fold;
//! values and first ⊥ stay the evaluator's.

use fsmooth::codegen::CodegenError;
use fsmooth::diagnostic::Diagnose;
use fsmooth::eval::Value;

use super::{
    Outcome, assert_cases, compare_src, compile, load_entry, lowered_normal_form, native_error,
    vector,
};

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

/// Note [Fusion], condition 3: a `build` read twice is recomputed at the
/// second read only when that repeats little work. One with an `exp`
/// (reverse mode's tape of a log-sum-exp, read by the forward sum and by
/// the reverse sweep) is built, once; a product of reads is not built.
/// Values as the evaluator's.
#[test]
fn a_costly_body_read_twice_is_built_once() {
    use fsmooth::codegen::Arg;
    let src = "let twice (u: Vector) (m: Double) = let e = build (length u) (fun i -> exp (u[i] - m)) in ifold (fun s i -> s + e[i]) 0.0 (length u) * ifold (fun s i -> s + e[i] * u[i]) 1.0 (length u)\n\
               let cheap (u: Vector) (m: Double) = let e = build (length u) (fun i -> u[i] * m) in ifold (fun s i -> s + e[i]) 0.0 (length u) * ifold (fun s i -> s + e[i] * u[i]) 1.0 (length u)\n";
    let u = vector(&[0.5, -1.25, 2.0]);
    for f in ["twice", "cheap"] {
        assert_eq!(
            compare_src(src, f, &[u.clone(), Value::Double(0.75)]),
            Outcome::Value,
            "{f}"
        );
    }
    let big: Vec<f64> = (0..1000).map(|k| k as f64 * 1e-3).collect();
    let bytes = |f: &str| {
        let n = compile(&load_entry(src, f));
        let o = n
            .call_slices(&[Arg::F64s(&big), Arg::F64(0.5)])
            .expect("runs");
        o.arena_bytes()
    };
    assert!(bytes("twice") > 0, "the exps were recomputed, not built");
    assert_eq!(bytes("cheap"), 0, "the products were built");
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
