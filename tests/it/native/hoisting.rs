//! What moves or copies code before lowering, with the evaluator's
//! values and first ⊥: Note [Hoisting] (loop invariants, rule 2's order of
//! failing bindings, rule 3's speculative regions, projections leaving
//! loops, identity Index arithmetic folded), Note [Versioning] and
//! Note [Unrolling].

use fsmooth::codegen::CodegenError;
use fsmooth::diagnostic::Diagnose;
use fsmooth::eval::Value;

use super::{
    FUEL, Outcome, assert_cases, compare_src, compile, exactly, listing_of, load_entry,
    lowered_normal_form, native_error, vector,
};

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
    // The case that failed: ⊥ of the read, not of the power, located at
    // the read (the hoisted copy keeps its span, `passes::Copies`).
    let e = load_entry(src, "f");
    let got = compile(&e).call(&[vector(&[1.0]), d(0.7)]);
    let Err(CodegenError::Located { error, span }) = &got else {
        panic!("a located ⊥: {got:?}");
    };
    assert!(
        matches!(
            error.as_ref(),
            CodegenError::IndexOutOfBounds { index: 3, len: 1 }
        ),
        "{got:?}"
    );
    assert_eq!(&src[span.start as usize..span.end as usize], "v[3]");
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
    let run = |f: &str, args: &[Value]| {
        compile(&load_entry(src, f))
            .call(args)
            .map_err(CodegenError::unlocated)
    };
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
