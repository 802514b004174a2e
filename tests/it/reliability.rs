//! Regression tests of the reliability issue's findings: each test fails
//! without its fix. A closed output pipe ends a command quietly; `opt`
//! prints a program that runs as its input does.

use std::io::Read;
use std::process::{Command, Stdio};

use crate::common::{cli, root, temp_file};

/// A program whose output is long: 200,000 Doubles.
const BIG: &str = "let main = build 200000 (fun i -> toDouble i)\n";

/// Finding 1: a reader that goes away (`fsmooth … | head -c 10`) ends
/// every printing command quietly with the shell's SIGPIPE status, not a
/// panic.
#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    let big = temp_file("big.fsm", BIG);
    let big = big.to_str().expect("path");
    let hello = root().join("examples/hello.fsm");
    let hello = hello.to_str().expect("path");
    let commands: Vec<Vec<&str>> = vec![
        vec!["run", big],
        vec!["run", big, "--engine", "native"],
        vec!["print", big],
        vec!["check", hello, "--prelude"],
        vec!["rules", "list"],
    ];
    for args in commands {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fsmooth"))
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("fsmooth starts");
        let mut first = [0u8; 10];
        let mut out = child.stdout.take().expect("stdout");
        out.read_exact(&mut first).expect("some output");
        drop(out);
        let o = child.wait_with_output().expect("fsmooth ends");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(
            matches!(o.status.code(), Some(0) | Some(141)),
            "{args:?}: {:?} {stderr}",
            o.status
        );
    }
}

/// Finding 8: `opt` prints the entry under its own name with its own
/// parameter names, so its output runs with the same `--entry` and input
/// and gives the same value.
#[test]
fn opt_output_runs_as_its_input() {
    let input = r#"{"v1": [1, 2, 3], "v2": [4, 5, 6]}"#;
    let hello = root().join("examples/hello.fsm");
    let o = cli(&["opt", hello.to_str().expect("path"), "--entry", "main"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(text.starts_with("let main = fun (v1: "), "{text}");
    let optimised = temp_file("hello_opt.fsm", &text);
    let run = |p: &str| {
        let o = cli(&["run", p, "--input", input]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    assert_eq!(
        run(optimised.to_str().expect("path")),
        run(hello.to_str().expect("path"))
    );
    // A parameter named like a binder of the normal form keeps the
    // program's meaning: the binder is not captured.
    let clash = temp_file(
        "clash.fsm",
        "let main = fun (x'n5: Vector) -> vectorSum (vectorMap x'n5 (fun a -> a * a))\n",
    );
    let o = cli(&["opt", clash.to_str().expect("path")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    let again = temp_file("clash_opt.fsm", &text);
    let o = cli(&["run", again.to_str().expect("path"), "--input", "[1, 2, 3]"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "14.0", "{text}");
}

/// A directory holding one rule file `mine.rules` with `text`.
fn rules_dir(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("fsmooth-rel-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("mine.rules"), text).expect("rule file");
    dir
}

/// Findings 4 and 7: the loader rejects, with a located error, a rule the
/// e-graph cannot represent soundly (a binder around a term, which made
/// `opt` grow past 4 GB on `x + x`), text after a pattern, `fresh` on a
/// variable the left side binds, and a rule that changes a term's type
/// (which failed inside `opt` as an internal type mismatch) — in every
/// command that loads rules.
#[test]
fn malformed_rules_are_rejected_when_loaded() {
    let cases = [
        (
            "## x\nrule v : (+ ?a ?b) => (var (+ ?a ?b))\n",
            "binder-not-a-name",
        ),
        (
            "## x\nrule l : (+ ?a ?b) => (lam (+ ?a ?b) ?a)\n",
            "binder-not-a-name",
        ),
        ("## x\nrule p : (+ ?a ?b) => (+ ?b ?a))\n", "pattern-syntax"),
        (
            "## x\nrule f : (lam ?x ?b) => (lam ?x ?b)\n  if fresh ?x\n",
            "fresh-bound-variable",
        ),
        (
            "## x\nrule t : (+ ?a 0.0) => (< ?a 1.0)\n",
            "rule-type-mismatch",
        ),
    ];
    let p = temp_file("twice.fsm", "let main = fun (x: Double) -> x + x\n");
    let p = p.to_str().expect("path");
    for (k, (text, code)) in cases.iter().enumerate() {
        let dir = rules_dir(&format!("bad{k}"), text);
        let dir = dir.to_str().expect("dir");
        for args in [
            vec!["opt", p, "--rules", dir],
            vec!["opt", p, "--check", "--rules", dir],
            vec![
                "grad", p, "--wrt", "x", "--mode", "fwd-opt", "--input", "[1.0]", "--rules", dir,
            ],
            vec!["rules", "check", "--rules", dir, "--cases", "3"],
        ] {
            let o = cli(&args);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{code} {args:?}: {err}");
            assert!(err.contains(&format!("error[{code}]")), "{code}: {err}");
            assert!(err.contains("mine.rules:2:"), "{code}: {err}");
        }
    }
    // The shipped rules all load (none is rejected by the new checks).
    assert!(fsmooth::opt::load(None).expect("defaults load").len() >= 90);
}

/// Finding 3: a rule name of 65,536 characters is listed and checked (it
/// used to overflow a formatting width and panic `rules check`).
#[test]
fn long_rule_names_do_not_panic() {
    let name = "r".repeat(65_536);
    let dir = rules_dir(
        "long",
        &format!("## x = x\nrule {name} : (neg (neg ?x)) => ?x\n"),
    );
    let dir = dir.to_str().expect("dir");
    for args in [
        vec![
            "rules", "check", "--rules", dir, "--family", "mine", "--cases", "5",
        ],
        vec!["rules", "list", "--rules", dir],
    ] {
        let o = cli(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(String::from_utf8_lossy(&o.stdout).contains(&name));
    }
}

/// Finding 9: Example 1 of seed 001, ∂(u M vᵀ)/∂M, from the command line
/// with `grad --mode fwd-opt` (no `opt --check`): the optimised derivative
/// is the paper's `u[i] * v[j]` for every entry, so its cost grows as n²
/// (it grew as n⁴, while `deriv` in the language, optimised with the
/// check on, gave n²: the optimiser's result depended on whether egg
/// explained it — Note [Explanations always]).
#[test]
fn the_command_lines_optimised_mode_gets_what_the_language_gets() {
    let src = temp_file(
        "umv.fsm",
        "let f = fun (u: Vector) (M: Matrix) (v: Vector) -> vectorDot u (matrixVectorMul M v)\n",
    );
    let src = src.to_str().expect("path");
    let ops = |n: usize| -> u64 {
        let row = vec!["1.5"; n].join(", ");
        let m = vec![format!("[{row}]"); n].join(", ");
        let input = format!("{{\"u\": [{row}], \"M\": [{m}], \"v\": [{row}]}}");
        // Without FSMOOTH_OPT_CHECK: what a user runs.
        let o = Command::new(env!("CARGO_BIN_EXE_fsmooth"))
            .args([
                "grad", src, "--entry", "f", "--wrt", "M", "--mode", "fwd-opt",
            ])
            .args(["--stats", "--input", &input])
            .output()
            .expect("runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let stats: serde_json::Value =
            serde_json::from_str(String::from_utf8_lossy(&o.stderr).trim()).expect("stats");
        stats["ops"].as_u64().expect("ops")
    };
    let (a, b, c) = (ops(4), ops(8), ops(16));
    // Quadratic: doubling n multiplies the work by about 4 (cubic: 8).
    assert!(b * 10 < a * 50 && c * 10 < b * 50, "ops {a}, {b}, {c}");
    let printed = Command::new(env!("CARGO_BIN_EXE_fsmooth"))
        .args(["ad", src, "--entry", "f", "--wrt", "M", "--mode", "fwd-opt"])
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&printed.stdout);
    assert!(!text.contains("ifold"), "{text}");
}

/// Findings 5 and 6: an array past `--max-elements` is `array-too-large`
/// in both engines — also `length (build n f)`, which native code never
/// builds (the evaluator aborted on it, native code printed n) — and
/// `--fuel` bounds native loops (a fold of 2⁶³ iterations ran forever).
#[test]
fn resource_limits_end_work_cleanly_in_both_engines() {
    let big = temp_file(
        "big_build.fsm",
        "let main = length (build 9223372036854775807 (fun i -> 1.0))\n",
    );
    let long = temp_file(
        "long_fold.fsm",
        "let main = ifold (fun s i -> s + 1.0) 0.0 9223372036854775807\n",
    );
    let small = temp_file(
        "small.fsm",
        "let main = fun (n: Index) -> vectorSum (build n (fun i -> toDouble i))\n",
    );
    let (big, long, small) = (
        big.to_str().expect("path"),
        long.to_str().expect("path"),
        small.to_str().expect("path"),
    );
    for engine in ["eval", "native"] {
        let code = |args: &[&str]| {
            let mut all = vec!["run", "--engine", engine];
            all.extend(args);
            let o = cli(&all);
            let err = String::from_utf8_lossy(&o.stderr).to_string();
            assert!(!err.contains("panicked"), "{err}");
            let out = String::from_utf8_lossy(&o.stdout).trim().to_string();
            (o.status.code(), err, out)
        };
        let (status, err, _) = code(&[big]);
        assert_eq!(status, Some(1), "{engine}: {err}");
        assert!(err.contains("error[array-too-large]"), "{engine}: {err}");
        let (status, err, _) = code(&[long, "--fuel", "1000000"]);
        assert_eq!(status, Some(1), "{engine}: {err}");
        assert!(err.contains("error[out-of-fuel]"), "{engine}: {err}");
        // The limit is configurable. Past it the evaluator stops; native
        // code stops too, or gives the sum, its array never made
        // (spec/semantics.md §3.8: the limit is not an observation).
        let (status, err, out) = code(&[small, "--input", "[100]", "--max-elements", "99"]);
        if engine == "eval" || status != Some(0) {
            assert_eq!(status, Some(1), "{engine}: {err}");
            assert!(err.contains("error[array-too-large]"), "{engine}: {err}");
        } else {
            assert_eq!(out, "4950.0", "{engine}: the sum");
        }
        let (status, err, out) = code(&[small, "--input", "[100]", "--max-elements", "100"]);
        assert_eq!(status, Some(0), "{engine}: {err}");
        assert_eq!(out, "4950.0", "{engine}");
    }
}

/// Fuel in native code (spec/semantics.md §3.8, Note [Native limits]): a
/// loop's iterations are charged when it starts, so a run the evaluator
/// ends with a value within `--fuel N` ends with it natively — here with
/// exactly the evaluator's steps — while a loop whose ⊥ comes early, on
/// a fuel too small for all of it, is refused at its start: `out-of-fuel`
/// natively where the evaluator, which stops at the ⊥ within the fuel,
/// says `division-by-zero`. With the fuel for the whole loop, native code
/// stops at the ⊥ too.
#[test]
fn native_fuel_is_charged_when_a_loop_starts() {
    let src = temp_file(
        "fuel_first.fsm",
        "let main = fun (v: Vector) -> build (length v) (fun i -> 1.0 / v[i])\n",
    );
    let src = src.to_str().expect("path");
    let input = |first: f64| {
        let v: Vec<String> = std::iter::once(first)
            .chain(std::iter::repeat_n(1.0, 999))
            .map(|x| format!("{x:?}"))
            .collect();
        format!("[[{}]]", v.join(", "))
    };
    let run = |engine: &str, input: &str, fuel: &str, stats: bool| {
        let mut args = vec![
            "run", src, "--engine", engine, "--input", input, "--fuel", fuel,
        ];
        if stats {
            args.push("--stats");
        }
        let o = cli(&args);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(!err.contains("panicked"), "{err}");
        (
            o.status.code(),
            err,
            String::from_utf8_lossy(&o.stdout).to_string(),
        )
    };
    // A value: the evaluator's steps are enough natively.
    let ones = input(1.0);
    let (status, err, want) = run("eval", &ones, "1000000", true);
    assert_eq!(status, Some(0), "{err}");
    let steps = err
        .split("\"steps\": ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .expect("the steps");
    let (status, err, got) = run("native", &ones, steps, false);
    assert_eq!(status, Some(0), "{err}");
    assert_eq!(got, want);
    // A ⊥ at the first element.
    let zero = input(0.0);
    let (_, err, _) = run("eval", &zero, "50", false);
    assert!(err.contains("error[division-by-zero]"), "{err}");
    let (_, err, _) = run("native", &zero, "50", false);
    assert!(err.contains("error[out-of-fuel]"), "{err}");
    assert!(
        err.contains("a loop of 1000 iterations with 50 left"),
        "{err}"
    );
    let (_, err, _) = run("native", &zero, "1000", false);
    assert!(err.contains("error[division-by-zero]"), "{err}");
    // An interchanged nest (Note [Interchange]) with two divisions runs
    // again as written at a zero divisor, having given back the 4 × 40
    // iterations it was charged: within 165, as the evaluator.
    let nest = temp_file(
        "fuel_nest.fsm",
        "let main = fun (u: Vector) (w: Vector) (xs: Vector) (ys: Vector) -> build (length u) (fun i -> ifold (fun acc j -> acc + (xs[j] / u[i] + ys[i] / w[j])) 0.0 (length xs))\n",
    );
    let forty = |first: &str| format!("[{first}{}]", ", 1.0".repeat(39));
    let input = format!(
        "[[1.0, 0.0, 1.0, 1.0], {}, {}, [1.0, 1.0, 1.0, 1.0]]",
        forty("1.0, 0.0"),
        forty("1.0")
    );
    for engine in ["eval", "native"] {
        let o = cli(&[
            "run",
            nest.to_str().expect("path"),
            "--engine",
            engine,
            "--input",
            &input,
            "--fuel",
            "165",
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("error[division-by-zero]"), "{engine}: {err}");
    }
}

/// E-Limit in native code (spec/semantics.md §3.8): a run the evaluator
/// ends within `--max-elements` ends within it natively — an invariant
/// `build` is not made before a loop that never runs (Note [Hoisting],
/// "Limits"; it was, and stopped such runs) — and where the evaluator
/// stops at the limit, native code stops with the same code or gives
/// what the program gives without the limit. A ⊥ in a hoisted or an
/// unrolled copy is located at its original (`codegen::passes::Copies`;
/// both were located at the entry).
#[test]
fn native_code_meets_the_element_limit_only_where_the_evaluator_does() {
    let run = |name: &str, src: &str, input: &str, limit: &str| {
        let f = temp_file(name, src);
        let f = f.to_str().expect("path");
        let mut out = Vec::new();
        for engine in ["eval", "native"] {
            let o = cli(&[
                "run",
                f,
                "--entry",
                "f",
                "--input",
                input,
                "--engine",
                engine,
                "--max-elements",
                limit,
            ]);
            let err = String::from_utf8_lossy(&o.stderr).to_string();
            assert!(!err.contains("panicked"), "{engine}: {err}");
            let first = err.lines().next().unwrap_or("").to_string();
            out.push((
                o.status.code(),
                String::from_utf8_lossy(&o.stdout).trim().to_string(),
                first,
            ));
        }
        (out.remove(0), out.remove(0))
    };
    // An invariant array in a fold and in a build that run zero times:
    // no array is made, in either engine; when they run, both stop at it.
    let fold = "let f = fun (k: Index) -> ifold (fun s c ->\n  let r = build 1000 (fun j -> toDouble j * 2.0) in s + vectorSum r + r[c]) 0.0 k\n";
    let build = "let f = fun (k: Index) -> build k (fun c ->\n  let r = build 1000 (fun j -> toDouble j) in vectorSum r + r[c])\n";
    for (name, src, none) in [
        ("lim_fold.fsm", fold, "0.0"),
        ("lim_build.fsm", build, "[]"),
    ] {
        let (e, n) = run(name, src, "[0]", "100");
        assert_eq!((e.0, e.1.as_str()), (Some(0), none), "{src}: {e:?}");
        assert_eq!(n, e, "{src}");
        let (e, n) = run(name, src, "[3]", "100");
        assert!(
            e.2.contains(":2:11: error[array-too-large]"),
            "{src}: {e:?}"
        );
        assert_eq!(n, e, "{src}: the hoisted build's ⊥, at its span");
    }
    // Arrays native code never makes: a build fused into its sum, and a
    // hoisted inner build whose negative size comes first natively.
    let fused = "let f = fun (v: Vector) -> vectorSum (build (length v) (fun j -> v[j] * 2.0))\n";
    let (e, n) = run("lim_fused.fsm", fused, "[1, 2, 3]", "2");
    assert!(e.2.contains("error[array-too-large]"), "{e:?}");
    assert!(n == e || (n.0, n.1.as_str()) == (Some(0), "12.0"), "{n:?}");
    let inner = "let f = fun (e: Index) (k: Index) -> build k (fun c ->\n  let r = build e (fun j -> toDouble j) in r[c])\n";
    let (e, n) = run("lim_inner.fsm", inner, "[-6, 5]", "4");
    assert!(e.2.contains(":1:38: error[array-too-large]"), "{e:?}");
    assert!(
        n == e || n.2.contains(":2:11: error[negative-size]"),
        "{n:?}"
    );
    // An unrolled fold's ⊥ at the division, as the evaluator reports it.
    let unrolled = "let f = fun (v: Vector) -> ifold (fun s i -> s + 1.0 / v[i]) 0.0 3\n";
    let (e, n) = run("lim_unrolled.fsm", unrolled, "[1, 0, 3]", "100");
    assert!(e.2.contains(":1:50: error[division-by-zero]"), "{e:?}");
    assert_eq!(n, e);
}

/// Finding 2: every run-time error, from either engine and every AD mode,
/// carries its code and a location in the user's program — the operation
/// that failed (`file:3:3`, the division; derivative programs keep the
/// span of what they differentiate, native code the span of the failing
/// test), or at worst the entry's definition. Native code and the
/// derivative programs used to print a bare `error[code]`.
#[test]
fn runtime_errors_point_into_the_users_program() {
    let src = temp_file(
        "located.fsm",
        "let g = fun (x: Double) (y: Double) ->\n  let a = x * y\n  a / (y - y) + sqrt x\n",
    );
    let path = src.to_str().expect("path").to_string();
    let at = format!("{path}:3:3: error[division-by-zero]");
    let o = cli(&[
        "run",
        &path,
        "--entry",
        "g",
        "--input",
        "[1.0, 2.0]",
        "--engine",
        "native",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).starts_with(&at));
    for mode in ["fwd", "fwd-vec", "fwd-opt", "fwd-rows", "rev", "tape", "fd"] {
        for engine in ["eval", "native"] {
            if engine == "native" && matches!(mode, "tape" | "fd") {
                continue;
            }
            let (wrt, input) = if mode == "fwd-rows" {
                // The rows need a Vector variable.
                ("v", "[1.0, 2.0]")
            } else {
                ("x", "[1.0, 2.0]")
            };
            let (file, entry) = if mode == "fwd-rows" {
                let p = temp_file(
                    "located_rows.fsm",
                    "let h = fun (v: Vector) ->\n  let a = v[0] * v[1]\n  [a / (v[1] - v[1]), a]\n",
                );
                (p.to_str().expect("path").to_string(), "h")
            } else {
                (path.clone(), "g")
            };
            let o = cli(&[
                "jacobian", &file, "--entry", entry, "--wrt", wrt, "--mode", mode, "--engine",
                engine, "--input", input,
            ]);
            let err = String::from_utf8_lossy(&o.stderr).to_string();
            assert_eq!(o.status.code(), Some(1), "{mode} {engine}: {err}");
            let want = format!("{file}:3:");
            assert!(
                err.starts_with(&want) && err.contains("error[division-by-zero]"),
                "{mode} {engine}: {err}"
            );
        }
    }
}

/// Finding 10: `difftest` no longer lets a disagreement on definedness or
/// on NaN pass unseen. `sqrt (p - p)` at 0.7: forward mode gives 0 (its
/// zero-seed guard), reverse mode divides by zero, the tape gives NaN —
/// a singular point of `sqrt` (a non-finite partial at a finite result),
/// which the check now names and counts apart instead of dropping; and a
/// smooth program's points are all compared (no NaN taken for agreement).
#[test]
fn difftest_names_singular_points_and_compares_the_rest() {
    let limits = fsmooth::eval::Limits::with_fuel(200_000);
    let singular =
        fsmooth::difftest::check_scalar("let main = fun (p: Double) -> sqrt (p - p)\n", limits)
            .expect("singular points are explained, not failures");
    assert_eq!(singular.defined, 3);
    assert_eq!(singular.singular, 3, "{singular:?}");
    assert_eq!(singular.compared, 0, "{singular:?}");
    let smooth = fsmooth::difftest::check_scalar(
        "let main = fun (p: Double) -> sqrt (p * p + 1.0) * sin p\n",
        limits,
    )
    .expect("agrees");
    assert_eq!(smooth.compared, 3, "{smooth:?}");
    assert_eq!(smooth.fd, 3, "{smooth:?}");
    assert_eq!(smooth.singular, 0, "{smooth:?}");
    let taped = |src: &str| {
        let s = fsmooth::pipeline::Session::load(src).expect("loads");
        let e = s.entry("main").expect("entry");
        fsmooth::tape::vjp(
            &e.program,
            &e.name_in_program(),
            vec![fsmooth::eval::Value::Double(0.7)],
            0,
            None,
            limits,
        )
        .expect("tapes")
        .singular
    };
    assert!(taped("let main = fun (p: Double) -> sqrt (p - p)\n"));
    assert!(!taped("let main = fun (p: Double) -> sqrt (p * p)\n"));
    // Found by CI's property test: the norm of an empty vector is `sqrt` of
    // a constant 0, singular although its argument does not depend on `p`;
    // reverse mode, which cannot see that, divides by zero there.
    let empty = "let main = fun (p: Double) -> vectorNorm (build 0 (fun i -> p))\n";
    assert!(taped(empty));
    let counts = fsmooth::difftest::check_scalar(empty, limits).expect("explained");
    assert_eq!(counts.singular, 3, "{counts:?}");
    // Found by `fsmooth difftest --only-while`: where the agreed derivative
    // says the function changes by more than its scale over the stencil
    // (cos (exp (p ** p)) near 2.9: d ≈ −3·10¹⁰), finite differences sample
    // an oscillation; the modes are compared, finite differences are not.
    let fast = "let main = fun (p: Double) -> cos (exp (p ** p))\n";
    let counts = fsmooth::difftest::check_scalar(fast, limits).expect("no false alarm");
    assert!(counts.compared > counts.fd, "{counts:?}");
}

/// Found by `fsmooth fuzz --target native`: the Jacobian of an entry
/// whose result holds an Index has a row per Double of the result in
/// every mode. The modes that read a tangent-only program (`fwd-opt`,
/// and `fwd-vec` on native code) gave the Index part a row of zeros too:
/// `(i, v[0])` had the Jacobian `[[0, 0], [1, 0]]` there and `[[1, 0]]`
/// in the others.
#[test]
fn a_jacobian_has_rows_for_doubles_only_in_every_mode() {
    let p = temp_file(
        "index_result.fsm",
        "let main = fun (v: Vector) (i: Index) -> (i, v[0])\nlet count = fun (v: Vector) (i: Index) -> i\n",
    );
    let p = p.to_str().expect("path");
    for (entry, want) in [
        ("main", r#"{"value": [3, 1.0], "jacobian": [[1.0, 0.0]]}"#),
        ("count", r#"{"value": 3, "jacobian": []}"#),
    ] {
        for mode in ["fwd", "fwd-opt", "fwd-vec", "fwd-rows", "rev"] {
            for engine in ["eval", "native"] {
                let o = cli(&[
                    "jacobian",
                    p,
                    "--entry",
                    entry,
                    "--wrt",
                    "v",
                    "--mode",
                    mode,
                    "--engine",
                    engine,
                    "--input",
                    "[[1.0, 2.0], 3]",
                ]);
                let out = String::from_utf8_lossy(&o.stdout);
                assert_eq!(
                    out.trim(),
                    want,
                    "{entry} {mode} {engine}: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
            }
        }
    }
}

/// Found by `fsmooth fuzz --target check`: the printer round-trips a
/// program nested close to the parser's limit. `-(-(… x))` was printed
/// with parentheses around each negated negation, two levels of nesting
/// per minus sign, so 5,001 minus signs (which parse) printed as a
/// program the parser rejects (`nesting-too-deep`).
#[test]
fn printed_negations_nest_as_deep_as_the_source() {
    let src = format!("let main = fun (x: Double) -> {}x\n", "-".repeat(5_001));
    let p = fsmooth::pipeline::parse(&src).expect("parses");
    let printed = fsmooth::syntax::print_program(&p);
    assert!(printed.contains("---x"), "{}", &printed[..80]);
    let again = fsmooth::pipeline::parse(&printed).expect("the printed program parses");
    assert_eq!(fsmooth::syntax::print_program(&again), printed);
    // Negations of other operators keep their parentheses.
    let p = fsmooth::pipeline::parse("let f = fun (x: Double) -> -(x * 2.0) - -(-x ** 2.0)\n")
        .expect("parses");
    let printed = fsmooth::syntax::print_program(&p);
    assert!(printed.contains("-(x * 2.0) - --x ** 2.0"), "{printed}");
}

/// Found by `fsmooth fuzz --target opt`: the optimised entry has the
/// entry's type. `if false then i else 1` (an Index) was optimised to `1`,
/// which, inferred alone, defaulted to a Double: `opt` printed `1.0` and
/// its output ran to `1.0` where the program gives `1`. Now the output
/// keeps the entry's type as an annotation where it needs one.
#[test]
fn opt_keeps_the_type_of_the_entry() {
    let p = temp_file(
        "index_if.fsm",
        "let main = fun (i: Index) -> if false then i else 1\nlet two = fun (i: Index) -> if true then 2 else i\nlet three = fun (i: Index) -> if true then i + 2 else i\n",
    );
    let p = p.to_str().expect("path");
    for (entry, want, annotated) in [
        ("main", "1", true),
        ("two", "2", true),
        ("three", "7", false),
    ] {
        let o = cli(&["opt", p, "--entry", entry, "--check"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(!text.contains(".0"), "{text}");
        // Only an output that inference alone would type differently is
        // annotated.
        assert_eq!(text.contains(" : Index -> Index ="), annotated, "{text}");
        let optimised = temp_file(&format!("index_if_{entry}.fsm"), &text);
        for file in [p, optimised.to_str().expect("path")] {
            let o = cli(&["run", file, "--entry", entry, "--input", "[5]"]);
            assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), want, "{file}");
        }
    }
}

/// Found by `fsmooth fuzz --target grad`: a construct an AD mode does not
/// support yet is reported at the construct (`ad-unsupported` had no
/// location): `addAt` in vector forward mode (reverse mode has R-AddAt
/// now).
#[test]
fn unsupported_ad_is_located() {
    let p = temp_file(
        "bump.fsm",
        "let bump = fun (a: Vector) (i: Index) ->\n  addAt a i 1.0\n",
    );
    let p = p.to_str().expect("path");
    for (cmd, mode) in [("grad", "fwd-rows"), ("grad", "fwd-vec")] {
        let mut args = vec![cmd, p, "--entry", "bump", "--wrt", "a", "--mode", mode];
        args.extend(["--input", "[[1.0, 2.0], 0]"]);
        if cmd == "vjp" {
            args.push("--cotangent=[1.0, 1.0]");
        }
        let o = cli(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{mode}");
        assert!(err.contains("error[ad-unsupported]"), "{mode}: {err}");
        assert!(err.contains("bump.fsm:2:3:"), "{mode}: {err}");
    }
}

/// Found by `fsmooth fuzz --target opt`: egg's explanation of this small
/// program is ~10⁸ steps long once flattened, so the flat replay gave up
/// (`opt-check-incomplete`, located at the entry). The tree replay
/// (spec/rules-format.md §13) walks each shared sub-proof once and
/// verifies every step; and the difftest case whose 7 502-step chain over
/// a 97-node term was too long for the flat bound is in
/// `tests/difftest/native-seed9001-case778.fsm`.
#[test]
fn a_long_explanation_is_verified_in_full() {
    let p = crate::common::root().join("tests/data/opt-check-explosion.fsm");
    let o = cli(&[
        "opt",
        p.to_str().expect("path"),
        "--entry",
        "f'entry",
        "--check",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("opt-check-incomplete"), "{err}");
    let verified: usize = err
        .split("// check: ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("a check summary");
    assert!(verified >= 100, "{err}");
}

/// Found by `fsmooth fuzz --target native`: the definitions before the
/// entry are computed in program order in both engines (semantics.md §1).
/// A ⊥ definition that only a never-applied function mentions made the
/// evaluator's run ⊥ while native code, which inlined it into that
/// function's (dead) body, returned a value.
#[test]
fn both_engines_compute_the_definitions_before_the_entry() {
    let p = temp_file(
        "dead_global.fsm",
        "let h = [1.0][2]\nlet main = let f = fun x -> h in 2.0\n",
    );
    for engine in ["eval", "native"] {
        let o = cli(&["run", p.to_str().expect("path"), "--engine", engine]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("error[index-out-of-bounds]"),
            "{engine}: {err}"
        );
        assert!(err.contains("dead_global.fsm:1:9:"), "{engine}: {err}");
    }
}

/// Found by `fsmooth fuzz --target native`: a 311-atom vector-mode
/// program grew to 83,705 atoms in the hoisting pass (each speculated
/// invariant is also kept in its loop, so nested loops were copied 2^k
/// times) and native compilation never finished; growth is now bounded
/// (Note [Bounded speculation]) and native code gives the evaluator's
/// Jacobian.
#[test]
fn hoisting_cannot_blow_up_a_program() {
    let p = crate::common::root().join("tests/data/hoist-blowup.fsm");
    let p = p.to_str().expect("path");
    let input = r#"{"p1": [1.0, 3.5], "p2": [0, -2, 0.5, 1, 2]}"#;
    let mut out = Vec::new();
    for engine in ["eval", "native"] {
        let o = cli(&[
            "jacobian", p, "--entry", "main", "--wrt", "p2", "--mode", "fwd-vec", "--engine",
            engine, "--input", input,
        ]);
        assert!(
            o.status.success(),
            "{engine}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        out.push(String::from_utf8_lossy(&o.stdout).to_string());
    }
    assert_eq!(out[0], out[1]);
}

/// Found by `fsmooth fuzz --target native`: a data definition that is ⊥
/// makes every derivative of the program ⊥, as it makes the program ⊥
/// (semantics.md §1). Vector mode translated it into a function computed
/// only when called, so where only an untaken branch used it, `fwd-vec` on
/// the evaluator gave a value and the other modes ⊥.
#[test]
fn a_bottom_definition_is_bottom_in_every_mode() {
    let p = temp_file(
        "bottom_definition.fsm",
        "let h = [1.0][2] * 2.0\nlet main = fun (v: Vector) -> if true then v[0] else h\n",
    );
    let p = p.to_str().expect("path");
    for mode in ["fwd", "fwd-vec", "fwd-opt", "rev"] {
        for engine in ["eval", "native"] {
            let o = cli(&[
                "jacobian",
                p,
                "--wrt",
                "v",
                "--mode",
                mode,
                "--engine",
                engine,
                "--input",
                r#"{"v": [1.0, 2.0]}"#,
            ]);
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                err.contains("error[index-out-of-bounds]"),
                "{mode} {engine}: {err}"
            );
        }
    }
}

/// Found by `fsmooth fuzz --target grad` once its oracle stopped excusing
/// unlocated errors: a ⊥ of the optimised derivative program (`fwd-opt`,
/// whose optimised code keeps no spans) had no location; it is reported
/// at the entry it comes from, on both engines.
#[test]
fn optimised_derivative_errors_are_located() {
    let p = temp_file(
        "oob_opt.fsm",
        "let main = fun (v: Vector) (i: Index) ->\n  v[i] * v[0]\n",
    );
    let p = p.to_str().expect("path");
    for engine in ["eval", "native"] {
        let o = cli(&[
            "grad",
            p,
            "--wrt",
            "v",
            "--mode",
            "fwd-opt",
            "--engine",
            engine,
            "--input",
            r#"{"v": [1.0, 2.0], "i": 5}"#,
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("error[index-out-of-bounds]"),
            "{engine}: {err}"
        );
        assert!(err.contains("oob_opt.fsm:1:5:"), "{engine}: {err}");
    }
}

/// Found by `fsmooth fuzz --target native` (a subprocess run): `run
/// --engine native` printed a ⊥ raised in fused, unrolled loops (a bounds
/// guard) without a location. It was then located at the entry; since
/// the rewrites' copies keep their originals' spans
/// (`codegen::passes::Copies`), it is where the evaluator locates it: the
/// read in the prelude's `vectorMap2`.
#[test]
fn native_run_errors_of_fused_loops_are_located() {
    let p = temp_file(
        "mm.fsm",
        "let main (p2: Double) =\n  matrixMul (matrixMul [[p2, p2], [p2, p2], [p2, pi]] [[0.1]]) [[4.0, p2, p2]]\n",
    );
    let first = |engine: &str| {
        let o = cli(&[
            "run",
            p.to_str().expect("path"),
            "--input",
            "[0.0]",
            "--engine",
            engine,
        ]);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        err.lines().next().unwrap_or("").to_string()
    };
    let native = first("native");
    assert!(native.contains("error[index-out-of-bounds]"), "{native}");
    assert!(native.starts_with("<prelude>:"), "{native}");
    assert_eq!(native, first("eval"));
}

/// JSON arguments are read correctly rounded: every Double written in its
/// shortest form, or with 17 significant digits, reads back as the same
/// bits (serde_json's default reader was one ulp off for some, such as
/// 0.9906722147985887, so `run` of the identity printed …888).
#[test]
fn json_numbers_are_read_correctly_rounded() {
    let session = fsmooth::pipeline::Session::load("let id (xs: Vector) = xs\n").expect("loads");
    let entry = session.entry("id").expect("entry");
    let mut rng = 0x51_7cc1_b727_220au64;
    let mut xs = vec![
        0.9906722147985887,
        0.1,
        1e-300,
        5e-324,
        f64::MAX,
        f64::MIN_POSITIVE,
    ];
    for _ in 0..20_000 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let x = f64::from_bits(rng & !(0x7FFu64 << 52) | ((rng >> 52) % 2047) << 52);
        xs.push(x);
    }
    for text in [
        xs.iter().map(|x| format!("{x:?}")).collect::<Vec<_>>(),
        xs.iter().map(|x| format!("{x:.16e}")).collect(),
    ] {
        let json = format!("[[{}]]", text.join(", "));
        let args = entry.read_input(Some(&json)).expect("reads");
        let got = args[0]
            .with_elements(|v| {
                v.iter()
                    .map(|x| x.as_f64().expect("a Double"))
                    .collect::<Vec<_>>()
            })
            .expect("an array");
        for (x, (t, g)) in xs.iter().zip(text.iter().zip(&got)) {
            assert_eq!(x.to_bits(), g.to_bits(), "{t} read as {g:?}");
        }
    }
}
