//! Ahead-of-time output (`fsmooth compile`) against the reference
//! evaluator: the object files are linked into C programs with gcc, run,
//! and their printed results compared with the evaluator's on the same
//! program and inputs (ρ ≤ 1e-12; exact for Index and Bool; the same
//! error code, and details, where the evaluator reaches ⊥). The generated
//! headers must compile with `-std=c11 -Wall -Wextra -Werror -pedantic`.
//!
//! gcc is required: these tests fail (never skip) without it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fsmooth::diagnostic::Diagnose;
use fsmooth::eval::{EvalError, Limits};
use fsmooth::gradient::Mode;
use fsmooth::numeric::rho;
use fsmooth::pipeline::Session;

use crate::common::{self, root};

const TOLERANCE: f64 = 1e-12;

/// A fresh directory for one test's files.
fn work_dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fsmooth-aot-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn gcc(args: &[&str], dir: &Path) -> Output {
    match Command::new("gcc").args(args).current_dir(dir).output() {
        Ok(o) => o,
        Err(e) => panic!(
            "gcc is required for the ahead-of-time tests (tests/it/aot.rs) but could not be run: {e}; install gcc (Debian: apt-get install gcc)"
        ),
    }
}

fn check(o: &Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Writes `source` to `dir/driver.c`, links it with `objects` under strict
/// warnings, runs it, and returns what it printed.
fn run_driver(dir: &Path, source: &str, objects: &[&str]) -> String {
    std::fs::write(dir.join("driver.c"), source).unwrap();
    let mut args = vec![
        "-std=c11", "-Wall", "-Wextra", "-Werror", "-o", "driver", "driver.c",
    ];
    args.extend_from_slice(objects);
    args.push("-lm");
    check(&gcc(&args, dir), "gcc (driver.c)");
    check(
        &Command::new(dir.join("driver"))
            .output()
            .expect("driver runs"),
        "driver",
    )
}

/// `fsmooth compile FILE ARGS…` into `dir`.
/// Writes `KINDS` to `dir` and compiles its entry `kinds` there
/// (`kinds.o`, `kinds.h`); the source file, for further compilations.
fn compile_kinds(dir: &Path) -> PathBuf {
    let file = dir.join("kinds.fsm");
    std::fs::write(&file, KINDS).unwrap();
    compile(
        &file,
        &["--entry", "kinds", "-o", "kinds.o", "--header", "kinds.h"],
        dir,
    );
    file
}

fn compile(file: &Path, args: &[&str], dir: &Path) {
    let f = file.display().to_string();
    let mut all = vec!["compile", f.as_str()];
    all.extend_from_slice(args);
    let o = Command::new(env!("CARGO_BIN_EXE_fsmooth"))
        .args(&all)
        .current_dir(dir)
        .env("FSMOOTH_OPT_CHECK", "1")
        .output()
        .expect("fsmooth binary runs");
    check(&o, &format!("fsmooth {}", all.join(" ")));
}

fn json_numbers(xs: &[f64]) -> String {
    let parts: Vec<String> = xs.iter().map(|x| format!("{x:?}")).collect();
    format!("[{}]", parts.join(", "))
}

fn assert_close(native: f64, eval: f64, what: &str) {
    assert!(
        rho(native, eval) <= TOLERANCE,
        "{what}: native {native:?}, evaluator {eval:?}"
    );
}

/// Compares a value printed by a C driver (JSON, numbers by ρ) with the
/// evaluator's.
fn assert_json_close(native: &serde_json::Value, eval: &serde_json::Value, what: &str) {
    use serde_json::Value as J;
    match (native, eval) {
        (J::Number(a), J::Number(b)) => {
            let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            assert_close(a, b, what);
        }
        (J::Array(a), J::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{what}: {native} vs {eval}");
            for (x, y) in a.iter().zip(b) {
                assert_json_close(x, y, what);
            }
        }
        _ => assert_eq!(native, eval, "{what}"),
    }
}

/// The example of `examples/aot/`: `dot` and its reverse-mode gradient,
/// linked into `main.c` exactly as its README says, on several inputs and
/// one out-of-bounds index.
#[test]
fn aot_example_links_and_agrees_with_the_evaluator() {
    let dir = work_dir("example");
    let dot = root().join("examples/dot.fsm");
    compile(
        &dot,
        &["--entry", "dot", "-o", "dot.o", "--header", "dot.h"],
        &dir,
    );
    compile(
        &dot,
        &[
            "--entry",
            "dot",
            "--mode",
            "rev",
            "--wrt",
            "u",
            "-o",
            "dot_rev.o",
            "--header",
            "dot_rev.h",
        ],
        &dir,
    );
    let main_c = root().join("examples/aot/main.c").display().to_string();
    check(
        &gcc(
            &[
                "-std=c11",
                "-O2",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-I.",
                "-o",
                "dot_demo",
                &main_c,
                "dot.o",
                "dot_rev.o",
                "-lm",
            ],
            &dir,
        ),
        "gcc (examples/aot/main.c)",
    );
    let src = std::fs::read_to_string(&dot).unwrap();
    let objective = Session::load(&src).unwrap().entry("dot").unwrap();
    let rev = common::plan(&src, "dot", "u", Mode::Rev).unwrap();
    let rev = rev.program().unwrap();
    let cases: [(&[f64], &[f64]); 6] = [
        (&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]),
        (&[0.5, -2.25, 1e3, 1.0 / 3.0], &[3.0, 0.125, -7.0, 0.1]),
        (&[], &[]),
        (&[1.5], &[-2.0, 9.0]),
        (&[1e-300, 2.5e200], &[1e-10, -4e100]),
        // ⊥: v[2] with length v = 2.
        (&[1.0, 2.0, 3.0], &[4.0, 5.0]),
    ];
    let mut bottoms = 0;
    for (u, v) in cases {
        let fmt = |xs: &[f64]| {
            let parts: Vec<String> = xs.iter().map(|x| format!("{x:e}")).collect();
            parts.join(",")
        };
        let o = Command::new(dir.join("dot_demo"))
            .args([fmt(u), fmt(v)])
            .output()
            .expect("dot_demo runs");
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "dot_demo printed:\n{out}");
        let input = format!("[{}, {}]", json_numbers(u), json_numbers(v));
        for (line, entry, name) in [(lines[0], &objective, "dot"), (lines[1], rev, "dot_rev")] {
            let args = entry.read_input(Some(&input)).unwrap();
            let expected = entry.run(args, Limits::default(), &mut |_, _| {});
            let what = format!("{name} on {input}");
            let rest = line
                .strip_prefix(&format!("{name}: "))
                .unwrap_or_else(|| panic!("{what}: unexpected line `{line}`"));
            let words: Vec<&str> = rest.split_whitespace().collect();
            match expected {
                Ok((value, _)) => {
                    assert_eq!(words[0], "ok", "{what}: {line}");
                    let nums: Vec<f64> = words[1..].iter().map(|w| w.parse().unwrap()).collect();
                    let mut want = Vec::new();
                    fsmooth::eval::flatten(&value, &mut want);
                    assert_eq!(nums.len(), want.len(), "{what}: {line} vs {value}");
                    for (a, b) in nums.iter().zip(&want) {
                        assert_close(*a, *b, &what);
                    }
                }
                Err(e) => {
                    bottoms += 1;
                    assert_eq!(words[0], "error", "{what}: {line}");
                    assert_eq!(words[1], e.code(), "{what}");
                    let EvalError::IndexOutOfBounds { index, len, .. } = e else {
                        panic!("{what}: unexpected evaluator error {e}");
                    };
                    assert_eq!(words[2], format!("a={index}"), "{what}");
                    assert_eq!(words[3], format!("b={len}"), "{what}");
                }
            }
        }
        assert_eq!(o.status.success(), !out.contains("error"), "{out}");
    }
    assert_eq!(bottoms, 2, "the ⊥ case reaches ⊥ in both entries");
}

const KINDS: &str = "\
let kinds = fun (x: Double) (k: Index) (b: Bool) (xs: Array<Double>) (m: Array<Array<Index>>) ->
  let p = k ** 3
  let s = if b then sin x + log x ** 2.5 else cos (x / 2.0)
  let ys = build (length xs) (fun i -> xs[i] * toDouble (i + p))
  let rows = build (length m) (fun i -> length (m[i]))
  let flags = build k (fun i -> i < 2)
  (s, p, not b, ys, rows, flags, exp x + sqrt (tan x * tan x))

let ipow = fun (x: Index) (y: Index) -> x ** y
";

/// The C driver of [`KINDS`]: prints each case's result as the
/// evaluator's JSON would nest it, or `error CODE`.
const KINDS_DRIVER: &str = r#"
#include <inttypes.h>
#include <stdio.h>
#include "kinds.h"
#include "ipow.h"

static void doubles(const double *p, int64_t n) {
    printf("[");
    for (int64_t i = 0; i < n; i++) printf("%s%.17g", i ? ", " : "", p[i]);
    printf("]");
}

static void run_kinds(fsmooth_ctx *ctx, double x, int64_t k, bool b, const double *xs,
                      int64_t nxs, const fsmooth_array *m, int64_t nm) {
    double s, t;
    int64_t p, nys, nrows, nflags;
    bool nb;
    const double *ys;
    const int64_t *rows;
    const fsmooth_bool *flags;
    int64_t st = kinds(ctx, x, k, b, xs, nxs, m, nm, &s, &p, &nb, &ys, &nys, &rows, &nrows,
                       &flags, &nflags, &t);
    if (st != FSMOOTH_OK) {
        printf("error %s\n", fsmooth_status_name(st));
        return;
    }
    printf("[%.17g, [%" PRId64 ", [%s, [", s, p, nb ? "true" : "false");
    doubles(ys, nys);
    printf(", [[");
    for (int64_t i = 0; i < nrows; i++) printf("%s%" PRId64, i ? ", " : "", rows[i]);
    printf("], [[");
    for (int64_t i = 0; i < nflags; i++) printf("%s%s", i ? ", " : "", flags[i].value ? "true" : "false");
    printf("], %.17g]]]]]]\n", t);
}

static void run_ipow(fsmooth_ctx *ctx, int64_t x, int64_t y) {
    int64_t r;
    int64_t st = ipow(ctx, x, y, &r);
    if (st != FSMOOTH_OK) printf("error %s\n", fsmooth_status_name(st));
    else printf("%" PRId64 "\n", r);
}

int main(void) {
    fsmooth_ctx ctx = FSMOOTH_CTX_INIT;
    static const double none[1] = {0};
    static const fsmooth_array no_rows[1] = {{0, 0}};
    (void)none;
    (void)no_rows;
CASES
    fsmooth_ctx_release(&ctx);
    /* A context that may hold 64 bytes: `build 1000` needs 8000. */
    fsmooth_ctx small = FSMOOTH_CTX_INIT;
    small.limit = 64;
    run_kinds(&small, 1.0, 1000, false, none, 0, no_rows, 0);
    fsmooth_ctx_release(&small);
    return 0;
}
"#;

/// Every kind of parameter and result leaf (Double, Index, Bool, arrays of
/// Double, Index, Bool and arrays of arrays), the math functions, Index
/// `**` (the object's own helper), ⊥ codes, and a context's memory limit,
/// through the typed entries.
#[test]
fn aot_every_leaf_kind_and_index_power_agree_with_the_evaluator() {
    let dir = work_dir("kinds");
    let file = compile_kinds(&dir);
    compile(
        &file,
        &["--entry", "ipow", "-o", "ipow.o", "--header", "ipow.h"],
        &dir,
    );
    // (x, k, b, xs, m)
    type Kinds<'a> = (f64, i64, bool, &'a [f64], &'a [&'a [i64]]);
    let kinds: [Kinds; 6] = [
        (1.7, 3, true, &[1.0, 2.5], &[&[1, 2], &[], &[3]]),
        (-0.3, 0, false, &[], &[]),
        (2.0, 1, true, &[-1.0], &[&[]]),
        (0.7, 2, true, &[1.0], &[]),       // log 0.7 ** 2.5: domain-error
        (1.0, -1, false, &[], &[]),        // build (-1): negative-size
        (1.0, 3_000_000, false, &[], &[]), // k ** 3: integer-overflow
    ];
    let ipows: [(i64, i64); 14] = [
        (2, 62),
        (2, 63),
        (-2, 63),
        (-2, 64),
        (-1, i64::MAX),
        (-1, 1 << 40),
        (0, 0),
        (0, 5),
        (1, i64::MAX),
        (3, -1),
        (7, 0),
        (3, 39),
        (3, 40),
        (i64::MIN, 1),
    ];
    let mut cases = String::new();
    let mut expected = Vec::new();
    let src = KINDS;
    for (n, (x, k, b, xs, m)) in kinds.iter().enumerate() {
        let c_doubles = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{x:e}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        cases.push_str("    {\n");
        let xs_name = if xs.is_empty() {
            "none".to_string()
        } else {
            cases.push_str(&format!(
                "        static const double xs{n}[] = {{{}}};\n",
                c_doubles(xs)
            ));
            format!("xs{n}")
        };
        let mut descs = Vec::new();
        for (r, row) in m.iter().enumerate() {
            let items: Vec<String> = row.iter().map(i64::to_string).collect();
            cases.push_str(&format!(
                "        static const int64_t m{n}_{r}[] = {{{}}};\n",
                if items.is_empty() {
                    "0".to_string()
                } else {
                    items.join(", ")
                }
            ));
            descs.push(format!("{{m{n}_{r}, {}}}", row.len()));
        }
        let m_name = if m.is_empty() {
            "no_rows".to_string()
        } else {
            cases.push_str(&format!(
                "        const fsmooth_array m{n}[] = {{{}}};\n",
                descs.join(", ")
            ));
            format!("m{n}")
        };
        cases.push_str(&format!(
            "        run_kinds(&ctx, {x:e}, INT64_C({k}), {b}, {xs_name}, {}, {m_name}, {});\n    }}\n",
            xs.len(),
            m.len()
        ));
        let rows: Vec<String> = m
            .iter()
            .map(|r| {
                format!(
                    "[{}]",
                    r.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        let input = format!(
            "[{x:?}, {k}, {b}, {}, [{}]]",
            json_numbers(xs),
            rows.join(", ")
        );
        expected.push((
            format!("kinds {input}"),
            common::run_text(src, "kinds", Some(&input)),
        ));
    }
    for (x, y) in ipows {
        // INT64_MIN cannot be written as a literal.
        let cx = if x == i64::MIN {
            "INT64_MIN".to_string()
        } else {
            format!("INT64_C({x})")
        };
        cases.push_str(&format!("    run_ipow(&ctx, {cx}, INT64_C({y}));\n"));
        let input = format!("[{x}, {y}]");
        expected.push((
            format!("ipow {input}"),
            common::run_text(src, "ipow", Some(&input)),
        ));
    }
    // Not the evaluator's: the driver's last call runs out of its context's
    // `limit` (native code's one extra ⊥).
    expected.push((
        "kinds with ctx.limit = 64".to_string(),
        "error[out-of-memory]".to_string(),
    ));
    let out = run_driver(
        &dir,
        &KINDS_DRIVER.replace("CASES", &cases),
        &["kinds.o", "ipow.o"],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), expected.len(), "driver printed:\n{out}");
    let mut bottoms = 0;
    for (line, (what, want)) in lines.iter().zip(&expected) {
        if let Some(code) = want.strip_prefix("error[") {
            bottoms += 1;
            assert_eq!(
                *line,
                format!("error {}", code.trim_end_matches(']')),
                "{what}"
            );
            continue;
        }
        let native: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{what}: `{line}` is not JSON: {e}"));
        let eval: serde_json::Value = serde_json::from_str(want).unwrap();
        assert_json_close(&native, &eval, what);
    }
    assert!(bottoms >= 6, "the ⊥ cases were reached: {bottoms}");
}

/// Headers of several entries, with every kind of parameter, compile
/// together in one translation unit under strict warnings (C11 and C++).
#[test]
fn aot_headers_compile_with_warnings_as_errors() {
    let dir = work_dir("headers");
    compile_kinds(&dir);
    let dot = root().join("examples/dot.fsm");
    compile(
        &dot,
        &[
            "--entry",
            "dot",
            "--mode",
            "fwd",
            "--wrt",
            "v",
            "--symbol",
            "dot_tangent",
            "-o",
            "fwd.o",
            "--header",
            "fwd.h",
        ],
        &dir,
    );
    compile(
        &dot,
        &["--entry", "main", "-o", "main.o", "--header", "main.h"],
        &dir,
    );
    std::fs::write(
        dir.join("all.c"),
        "#include \"kinds.h\"\n#include \"fwd.h\"\n#include \"main.h\"\n#include \"kinds.h\"\n\
         int touch(void);\nint touch(void) { fsmooth_ctx c = FSMOOTH_CTX_INIT; (void)c; return 0; }\n",
    )
    .unwrap();
    check(
        &gcc(
            &[
                "-std=c11",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-pedantic",
                "-c",
                "all.c",
            ],
            &dir,
        ),
        "gcc -std=c11 -Wall -Wextra -Werror -pedantic",
    );
    let h = std::fs::read_to_string(dir.join("fwd.h")).unwrap();
    assert!(h.contains("int64_t dot_tangent(fsmooth_ctx *ctx"), "{h}");
    assert!(h.contains("int64_t dot_tangent_slots("), "{h}");
}

/// Usage and output errors are diagnostics with stable codes.
#[test]
fn aot_compile_errors_are_diagnostics() {
    let dot = root().join("examples/dot.fsm").display().to_string();
    let dir = work_dir("errors");
    let out = |name: &str| dir.join(name).display().to_string();
    let cases: [(Vec<String>, &str); 6] = [
        (
            vec![
                "--entry".into(),
                "dot".into(),
                "--mode".into(),
                "rev".into(),
                "-o".into(),
                out("a.o"),
            ],
            "error[usage]",
        ),
        (
            vec![
                "--entry".into(),
                "dot".into(),
                "-o".into(),
                "/nonexistent/dir/a.o".into(),
            ],
            "error[io]",
        ),
        (
            vec![
                "--entry".into(),
                "dot".into(),
                "--symbol".into(),
                "2bad'name".into(),
                "-o".into(),
                out("b.o"),
            ],
            "error[invalid-symbol]",
        ),
        (
            // A name the C program or the object links against.
            vec![
                "--entry".into(),
                "dot".into(),
                "--symbol".into(),
                "main".into(),
                "-o".into(),
                out("m.o"),
            ],
            "error[invalid-symbol]",
        ),
        (
            vec![
                "--entry".into(),
                "dot".into(),
                "--symbol".into(),
                "double".into(),
                "-o".into(),
                out("k.o"),
            ],
            "error[invalid-symbol]",
        ),
        (
            vec!["--entry".into(), "nope".into(), "-o".into(), out("c.o")],
            "error[",
        ),
    ];
    for (args, code) in cases {
        let mut all = vec!["compile".to_string(), dot.clone()];
        all.extend(args);
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        let o = common::cli(&refs);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{all:?}: {err}");
        assert!(err.contains(code), "{all:?}: {err}");
        assert!(!err.contains("panicked"), "{all:?}: {err}");
    }
}

/// `fsmooth compile --listing`: the slot-level entry's normal form and
/// Cranelift IR as lowered, then its machine code, next to the object
/// file.
#[test]
fn compile_writes_a_listing_of_ir_and_machine_code() {
    let dir = work_dir("listing");
    let file = dir.join("scale.fsm");
    std::fs::write(
        &file,
        "let scale (x: Double) (v: Vector) = build (length v) (fun i -> v[i] * sin x)\n",
    )
    .unwrap();
    compile(
        &file,
        &[
            "--entry",
            "scale",
            "-o",
            "scale.o",
            "--listing",
            "scale.lst",
        ],
        &dir,
    );
    let text = std::fs::read_to_string(dir.join("scale.lst")).expect("the listing is written");
    // The normal form first: `sin x` hoisted out of the loop over `v`.
    let normal = text
        .find(";; normal form of `scale_slots`, as lowered")
        .expect("normal form header");
    let hoisted = text[normal..]
        .lines()
        .position(|l| l.contains("= sin("))
        .expect("sin in the normal form");
    let body = text[normal..]
        .lines()
        .position(|l| l.contains("= build "))
        .expect("the loop in the normal form");
    assert!(hoisted < body, "{text}");
    let ir = text
        .find(";; Cranelift IR of `scale_slots`, as lowered")
        .expect("IR header");
    let code = text
        .find(";; machine code of `scale_slots`")
        .expect("machine code header");
    assert!(normal < ir && ir < code, "{text}");
    let (ir_text, code_text) = (&text[ir..code], &text[code..]);
    assert!(
        ir_text.contains("function ") && ir_text.contains("fmul"),
        "{ir_text}"
    );
    assert!(
        code_text.lines().count() > 10 && code_text.contains("ret"),
        "{code_text}"
    );
    assert!(dir.join("scale.o").exists());
}

/// Note [Scratch arrays] in an object file: the two scratch stacks are
/// lists of `malloc`ed blocks in the caller's context. The driver calls
/// entries whose loops build arrays nobody keeps (both stacks, a large
/// block before each pass's temporaries), one whose arrays outlive their
/// iteration through a fold's state, and one that stops with ⊥ in the
/// middle of a loop, on one context; results equal the evaluator's,
/// `ctx.used` stays a few blocks where keeping every iteration's arrays
/// would hold 60 MB, the context works after the ⊥, and
/// `fsmooth_ctx_release` leaves nothing.
#[test]
fn aot_scratch_arrays_are_freed_per_iteration() {
    let dir = work_dir("scratch");
    let src = "let colsum (v: Vector) (m: Index) = ifold (fun s c -> let ps = build (length v) (fun i -> let t = build m (fun k -> v[i] / toDouble (k + c + 1)) in build 2 (fun j -> t[j] * 2.0)) in s + ifold (fun a k -> a + ps[k][0] * ps[k][1]) 0.0 (length v)) 0.0 4\n\
               let large (v: Vector) (m: Index) = ifold (fun r c -> let big = build m (fun k -> toDouble (k + c) / 2.0) in r + ifold (fun s i -> let t = build 8 (fun k -> big[k + i] / v[i]) in s + t[7]) 0.0 (length v)) 0.0 3\n\
               let best (v: Vector) = let r = ifold (fun s i -> let t = build 3 (fun k -> v[i] / toDouble (k + 1)) in if t[0] > fst s then (t[0], t) else s) (0.0 - 1000.0, v) (length v) in fst r + (snd r)[0] * 10.0 + (snd r)[2]\n";
    let file = dir.join("scratch.fsm");
    std::fs::write(&file, src).unwrap();
    for f in ["colsum", "large", "best"] {
        compile(
            &file,
            &[
                "--entry",
                f,
                "-o",
                &format!("{f}.o"),
                "--header",
                &format!("{f}.h"),
            ],
            &dir,
        );
    }
    let driver = r#"#include <stdio.h>
#include <stdlib.h>
#include "colsum.h"
#include "large.h"
#include "best.h"

static void show(int64_t status, const double *x) {
    if (status == FSMOOTH_OK) printf("%.17g\n", *x);
    else printf("error %s\n", fsmooth_status_name(status));
}

int main(void) {
    fsmooth_ctx ctx = FSMOOTH_CTX_INIT;
    enum { N = 20000 };
    double *v = malloc(N * sizeof *v);
    for (int i = 0; i < N; i++) v[i] = 1.0 + i * 1e-3;
    double x = 0.0;
    show(colsum(&ctx, v, 500, 7, &x), &x);
    show(large(&ctx, v, 500, 100000, &x), &x);
    show(best(&ctx, v, 7, &x), &x);
    double w[5] = {5.0, 1.0, 7.0, 2.0, 3.0};
    show(best(&ctx, w, 5, &x), &x);
    v[300] = 0.0; /* 1 / 0 in the middle of `large`'s second loop */
    show(large(&ctx, v, 500, 1000, &x), &x);
    v[300] = 1.0 + 300 * 1e-3;
    /* 4 passes of 20000 points, 800 bytes of temporaries each. */
    show(colsum(&ctx, v, N, 100, &x), &x);
    printf("%s\n", ctx.used <= (8 << 20) ? "few blocks" : "too many blocks");
    fsmooth_ctx_release(&ctx);
    printf("released %lld\n", (long long)ctx.used);
    free(v);
    return 0;
}
"#;
    let out = run_driver(&dir, driver, &["colsum.o", "large.o", "best.o"]);
    let lines: Vec<&str> = out.lines().collect();
    let v = |n: usize, zero: Option<usize>| {
        let xs: Vec<f64> = (0..n)
            .map(|i| {
                if Some(i) == zero {
                    0.0
                } else {
                    1.0 + i as f64 * 1e-3
                }
            })
            .collect();
        json_numbers(&xs)
    };
    let expected = [
        ("colsum", format!("[{}, 7]", v(500, None))),
        ("large", format!("[{}, 100000]", v(500, None))),
        ("best", format!("{{\"v\": {}}}", v(7, None))),
        ("best", "{\"v\": [5.0, 1.0, 7.0, 2.0, 3.0]}".to_string()),
        ("large", format!("[{}, 1000]", v(500, Some(300)))),
        ("colsum", format!("[{}, 100]", v(20000, None))),
    ];
    assert_eq!(lines.len(), expected.len() + 2, "driver printed:\n{out}");
    for (line, (f, input)) in lines.iter().zip(&expected) {
        let want = common::run_text(src, f, Some(input));
        if let Some(code) = want.strip_prefix("error[") {
            assert_eq!(
                *line,
                format!("error {}", code.trim_end_matches(']')),
                "{f}"
            );
            continue;
        }
        let native: f64 = line
            .parse()
            .unwrap_or_else(|e| panic!("{f}: `{line}`: {e}"));
        assert_close(native, want.parse().unwrap(), f);
    }
    assert_eq!(lines[expected.len()], "few blocks", "{out}");
    assert_eq!(lines[expected.len() + 1], "released 0", "{out}");
}

/// Note [AOT memory]: arrays come from chunks of the context's arena, one
/// after another (a call's small rows are adjacent, not one `malloc`
/// each), and `fsmooth_ctx_reset` keeps the chunks for the next call: the
/// same call then gets the same memory back and holds as many bytes, a
/// reset context holds none, `ctx.limit` still refuses a call that needs
/// more than it allows (kept memory or not), and `fsmooth_ctx_release`
/// frees everything. Results equal the evaluator's on every call.
#[test]
fn aot_reset_keeps_the_arena_for_the_next_call() {
    let dir = work_dir("reset");
    let src = "let rows (v: Vector) (m: Index) = let big = build m (fun k -> toDouble k / 4.0) in build (length v) (fun i -> build 3 (fun j -> v[i] * toDouble (j + 1) + big[i]))\n";
    let file = dir.join("rows.fsm");
    std::fs::write(&file, src).unwrap();
    compile(
        &file,
        &["--entry", "rows", "-o", "rows.o", "--header", "rows.h"],
        &dir,
    );
    let driver = r#"#include <stdio.h>
#include <stdlib.h>
#include "rows.h"

static const fsmooth_array *call(fsmooth_ctx *ctx, const double *v, int64_t n, int64_t m) {
    const fsmooth_array *out = 0;
    int64_t len = 0;
    int64_t st = rows(ctx, v, n, m, &out, &len);
    if (st != FSMOOTH_OK) {
        printf("error %s\n", fsmooth_status_name(st));
        return 0;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < len; i++)
        for (int64_t j = 0; j < out[i].len; j++)
            sum += ((const double *)out[i].data)[j] * (double)(i % 7 + j + 1);
    printf("%.17g\n", sum);
    return out;
}

int main(void) {
    enum { N = 3000, M = 200000 };
    double *v = malloc(N * sizeof *v);
    for (int i = 0; i < N; i++) v[i] = 0.5 + i * 1e-3;
    fsmooth_ctx ctx = FSMOOTH_CTX_INIT;
    const fsmooth_array *a = call(&ctx, v, N, M);
    int64_t used = ctx.used;
    /* Rows of 3 doubles, one after another in a chunk. */
    printf("%s\n", (const char *)a[1].data - (const char *)a[0].data == 24 ? "adjacent" : "apart");
    fsmooth_ctx_reset(&ctx);
    printf("after reset %lld\n", (long long)ctx.used);
    const fsmooth_array *b = call(&ctx, v, N, M);
    printf("%s\n", a == b && a[0].data == b[0].data ? "same memory" : "new memory");
    printf("%s\n", ctx.used == used ? "same bytes" : "other bytes");
    fsmooth_ctx_reset(&ctx);
    ctx.limit = used - 1;
    call(&ctx, v, N, M);
    ctx.limit = 0;
    fsmooth_ctx_reset(&ctx);
    call(&ctx, v, 10, 20);
    fsmooth_ctx_release(&ctx);
    printf("released %lld\n", (long long)ctx.used);
    free(v);
    return 0;
}
"#;
    let out = run_driver(&dir, driver, &["rows.o"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 9, "driver printed:\n{out}");
    // The checksum of `rows`, from the evaluator's result.
    let expect = |n: usize, m: usize| {
        let v: Vec<f64> = (0..n).map(|i| 0.5 + i as f64 * 1e-3).collect();
        let r = common::run_text(src, "rows", Some(&format!("[{}, {m}]", json_numbers(&v))));
        let rows: Vec<Vec<f64>> = serde_json::from_str(&r).expect("rows as JSON");
        let mut sum = 0.0;
        for (i, row) in rows.iter().enumerate() {
            for (j, x) in row.iter().enumerate() {
                sum += x * (i % 7 + j + 1) as f64;
            }
        }
        sum
    };
    let big = expect(3000, 200_000);
    let num = |l: &str| {
        l.parse::<f64>()
            .unwrap_or_else(|e| panic!("`{l}`: {e}\n{out}"))
    };
    assert_close(num(lines[0]), big, "first call");
    assert_eq!(lines[1], "adjacent", "{out}");
    assert_eq!(lines[2], "after reset 0", "{out}");
    assert_close(num(lines[3]), big, "after reset");
    assert_eq!(lines[4], "same memory", "{out}");
    assert_eq!(lines[5], "same bytes", "{out}");
    assert_eq!(lines[6], "error out-of-memory", "{out}");
    assert_close(num(lines[7]), expect(10, 20), "small call");
    assert_eq!(lines[8], "released 0", "{out}");
}

/// Note [AOT memory]: a scratch block that a loop releases becomes one of
/// the context's spares, and a later scratch block is a spare when one
/// fits: a loop whose iterations each need blocks beyond the one its stack
/// keeps (two arrays too large to share a block) takes no memory from the
/// system on a second call after `fsmooth_ctx_reset` (no `malloc` at all),
/// and each call's result equals the evaluator's. Freeing and mallocing
/// those blocks again, blocks of glibc's `mmap` size, faulted their pages
/// in at every iteration (BA's `fwd-opt` Jacobian: 8 000 page faults a
/// call, 88 → 58 ms).
#[test]
fn aot_released_scratch_blocks_are_reused() {
    let dir = work_dir("spares");
    // Per iteration of the loop over c: 20 000 two-element rows and the
    // array of them, on the scratch stacks (about 640 KB, ten blocks).
    let src = "let twice (v: Vector) (r: Index) = ifold (fun s c -> let ps = build (length v) (fun i -> [v[i] * toDouble c, v[i] + 1.0]) in let flat = build (2 * length v) (fun k -> ps[k / 2][k - 2 * (k / 2)]) in s + flat[2 * c] + flat[1] + ps[c][0]) 0.0 r\n";
    let file = dir.join("twice.fsm");
    std::fs::write(&file, src).unwrap();
    compile(
        &file,
        &["--entry", "twice", "-o", "twice.o", "--header", "twice.h"],
        &dir,
    );
    let driver = r#"#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include "twice.h"

/* Every malloc of the program, counted (glibc's own entry point). */
extern void *__libc_malloc(size_t);
static long mallocs = 0;
void *malloc(size_t n) {
    mallocs++;
    return __libc_malloc(n);
}

int main(void) {
    enum { N = 20000, R = 30 };
    double *v = __libc_malloc(N * sizeof *v);
    for (int i = 0; i < N; i++) v[i] = 1.0 + i * 0.25;
    fsmooth_ctx ctx = FSMOOTH_CTX_INIT;
    for (int call = 0; call < 3; call++) {
        double x = 0.0;
        long before = mallocs;
        int64_t st = twice(&ctx, v, N, R, &x);
        long taken = mallocs - before;
        if (st != FSMOOTH_OK) printf("error %s\n", fsmooth_status_name(st));
        else printf("%.17g %ld\n", x, taken);
        fsmooth_ctx_reset(&ctx);
    }
    fsmooth_ctx_release(&ctx);
    printf("released %lld\n", (long long)ctx.used);
    free(v);
    return 0;
}
"#;
    let out = run_driver(&dir, driver, &["twice.o"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "driver printed:\n{out}");
    let v: Vec<f64> = (0..20000).map(|i| 1.0 + i as f64 * 0.25).collect();
    let want: f64 = common::run_text(src, "twice", Some(&format!("[{}, 30]", json_numbers(&v))))
        .parse()
        .expect("a Double");
    for (k, line) in lines[..3].iter().enumerate() {
        let (x, taken) = line.split_once(' ').expect("value and mallocs");
        assert_close(x.parse().expect("a number"), want, "twice");
        let taken: u64 = taken.parse().expect("a count");
        if k == 0 {
            assert!(taken > 0, "the first call allocates: {out}");
        } else {
            assert_eq!(taken, 0, "call {k} after a reset: {out}");
        }
    }
    assert_eq!(lines[3], "released 0", "{out}");
}

/// `compile --mode fwd-rows` (D-Vec-Rows): BA's `projectAll` Jacobian as
/// rows, linked from C, on three points: every row equals the
/// evaluator's run of the same rows program (ρ ≤ 1e-12), and the header
/// types it as an array of rows.
#[test]
fn aot_jacobian_rows_link_and_agree_with_the_evaluator() {
    let dir = work_dir("rows");
    let src = format!(
        "{}\nlet projectAll = fun (cam: Vector) (xs: Matrix) ->\n  \
         let ps = build (length xs) (fun i -> project cam xs[i])\n  \
         build (2 * length xs) (fun k -> ps[k / 2][k - 2 * (k / 2)])\n",
        std::fs::read_to_string(root().join("examples/ba_project.fsm")).unwrap()
    );
    let file = dir.join("ba.fsm");
    std::fs::write(&file, &src).unwrap();
    compile(
        &file,
        &[
            "--entry",
            "projectAll",
            "--mode",
            "fwd-rows",
            "--wrt",
            "cam",
            "--symbol",
            "jac_rows",
            "-o",
            "rows.o",
            "--header",
            "rows.h",
        ],
        &dir,
    );
    let header = std::fs::read_to_string(dir.join("rows.h")).unwrap();
    assert!(
        header.contains("const fsmooth_array **out"),
        "rows are arrays: {header}"
    );
    let cam = [
        0.1, -0.2, 0.3, 0.5, -0.4, -3.0, 2.0, 0.25, -0.125, 0.01, -0.002,
    ];
    let points = [[0.7, 1.1, 2.2], [-0.3, 0.4, 1.9], [1.5, -0.8, 3.1]];
    let c_doubles = |xs: &[f64]| {
        let parts: Vec<String> = xs.iter().map(|x| format!("{x:?}")).collect();
        parts.join(", ")
    };
    let rows_c: Vec<String> = points
        .iter()
        .enumerate()
        .map(|(i, p)| format!("static const double x{i}[3] = {{{}}};", c_doubles(p)))
        .collect();
    let driver = format!(
        r#"#include <stdio.h>
#include "rows.h"
{rows}
int main(void) {{
    const double cam[11] = {{{cam}}};
    fsmooth_array xs[3] = {{{{x0, 3}}, {{x1, 3}}, {{x2, 3}}}};
    fsmooth_ctx ctx = FSMOOTH_CTX_INIT;
    const fsmooth_array *out; int64_t n;
    int64_t s = jac_rows(&ctx, cam, 11, xs, 3, &out, &n);
    if (s != FSMOOTH_OK) {{ printf("status %s\n", fsmooth_status_name(s)); return 1; }}
    printf("[");
    for (int64_t i = 0; i < n; i++) {{
        const double *r = out[i].data;
        printf(i ? ", [" : "[");
        for (int64_t j = 0; j < out[i].len; j++) printf(j ? ", %.17g" : "%.17g", r[j]);
        printf("]");
    }}
    printf("]\n");
    fsmooth_ctx_release(&ctx);
    return 0;
}}
"#,
        rows = rows_c.join("\n"),
        cam = c_doubles(&cam)
    );
    let printed = run_driver(&dir, &driver, &["-I.", "rows.o"]);
    let native: serde_json::Value = serde_json::from_str(printed.trim()).expect("JSON rows");
    let r = common::plan(&src, "projectAll", "cam", Mode::FwdRows).expect("rows");
    let input = format!(
        "{{\"cam\": {}, \"xs\": [{}]}}",
        json_numbers(&cam),
        points
            .iter()
            .map(|p| json_numbers(p))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let args = r.base.read_input(Some(&input)).expect("input");
    let (want, _) = r
        .program()
        .expect("the rows program")
        .run(args, Limits::default(), &mut |_, _| {})
        .expect("the evaluator runs the rows");
    let want: serde_json::Value = serde_json::from_str(&want.to_string()).expect("JSON");
    assert_eq!(native.as_array().map(Vec::len), Some(6), "{printed}");
    assert_eq!(native[0].as_array().map(Vec::len), Some(11), "{printed}");
    assert_json_close(&native, &want, "projectAll rows");
}

/// `compile --fp relaxed` (spec/semantics.md §7): NNMF's objective as an
/// object whose row sums and `log`s run in SIMD lanes, linked into C and
/// called single-threaded. Its value is within ρ ≤ 1e-12 of the strict
/// object's (the evaluator's bits) and is not the same bits (the lanes
/// ran); a row with a non-positive entry fails with the evaluator's
/// status and details from either; the header says the contract.
#[test]
fn aot_relaxed_objects_agree_within_the_contract() {
    let dir = work_dir("relaxed");
    let file = root().join("examples/nnmf.fsm");
    for (fp, name) in [("strict", "strict"), ("relaxed", "relaxed")] {
        let o = format!("{name}.o");
        let h = format!("{name}.h");
        let sym = format!("nnmf_{name}");
        let args = [
            "--entry", "nnmf", "--fp", fp, "--symbol", &sym, "-o", &o, "--header", &h,
        ];
        compile(&file, &args, &dir);
    }
    let header = std::fs::read_to_string(dir.join("relaxed.h")).unwrap();
    assert!(
        header.contains("relaxed floating-point contract"),
        "{header}"
    );
    let strict_header = std::fs::read_to_string(dir.join("strict.h")).unwrap();
    assert!(!strict_header.contains("relaxed"), "{strict_header}");
    let driver = r#"#include <stdio.h>
#include <string.h>
#include "strict.h"
#include "relaxed.h"
enum { M = 37, N = 101 };
static double u[M], v[N], rows[M][N];
static fsmooth_array a[M];
static void run(const char *name, int64_t (*f)(fsmooth_ctx *, const double *, int64_t, const double *, int64_t, const fsmooth_array *, int64_t, double *)) {
    fsmooth_ctx ctx = FSMOOTH_CTX_INIT;
    double out = 0.0;
    int64_t s = f(&ctx, u, M, v, N, a, M, &out);
    unsigned long long bits; memcpy(&bits, &out, sizeof bits);
    printf("%s %s %lld %.17g %llx\n", name, fsmooth_status_name(s), (long long)ctx.a, out, bits);
    fsmooth_ctx_release(&ctx);
}
int main(void) {
    for (int i = 0; i < M; i++) u[i] = 0.5 + (i % 7) * 0.25;
    for (int j = 0; j < N; j++) v[j] = 0.75 + (j % 11) * 0.125;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) rows[i][j] = 1.0 + ((i * N + j) % 13) / 8.0;
        a[i].data = rows[i]; a[i].len = N;
    }
    run("strict", nnmf_strict);
    run("relaxed", nnmf_relaxed);
    v[57] = -1.0;
    run("strict", nnmf_strict);
    run("relaxed", nnmf_relaxed);
    return 0;
}
"#;
    let out = run_driver(&dir, driver, &["strict.o", "relaxed.o"]);
    let lines: Vec<Vec<&str>> = out.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.len(), 4, "{out}");
    let value = |k: usize| lines[k][3].parse::<f64>().expect("a Double");
    assert_eq!((lines[0][1], lines[1][1]), ("ok", "ok"), "{out}");
    assert!(rho(value(0), value(1)) <= TOLERANCE, "{out}");
    assert_ne!(
        lines[0][4], lines[1][4],
        "the same bits: no lanes ran\n{out}"
    );
    // log (u_i · v_57) with v_57 < 0: the same status and details (the
    // argument's bits) from both.
    assert_eq!(lines[2][1], "domain-error", "{out}");
    assert_eq!(lines[2][1..3], lines[3][1..3], "{out}");
}
