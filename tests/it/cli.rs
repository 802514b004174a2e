//! End-to-end tests of the `fsmooth` binary: `run` (inputs, `--stats`,
//! `--trace`, `--fuel`), `check`, `print`, exit statuses (0 success, 1 an
//! error in the program or its input, 2 a usage error; never a panic), the
//! `file:line:col: error[code]:` shape of error output, hostile inputs
//! (empty, invalid UTF-8, garbage, nesting 100 000 levels deep) and every
//! example under `examples/`.

use std::process::Output;

use fsmooth::pipeline::Session;

use crate::common::{cli, root, temp_file};

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).expect("stderr is UTF-8")
}

/// Asserts a successful run and returns its stdout.
fn ok(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "expected success\nstdout: {}\nstderr: {}",
        stdout(o),
        stderr(o)
    );
    stdout(o)
}

/// Asserts that `o` failed with exit status 1 and stderr starting with
/// `path:line:col: error[code]: `; returns (line, col).
fn located_error(o: &Output, path: &str, code: &str) -> (usize, usize) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "expected exit 1, stderr:\n{err}");
    let rest = err
        .strip_prefix(path)
        .and_then(|r| r.strip_prefix(':'))
        .unwrap_or_else(|| panic!("stderr does not start with `{path}:`:\n{err}"));
    let mut parts = rest.splitn(3, ':');
    let line = parts.next().and_then(|s| s.parse().ok());
    let col = parts.next().and_then(|s| s.parse().ok());
    let tail = parts.next().unwrap_or("");
    let (Some(line), Some(col)) = (line, col) else {
        panic!("stderr does not start with `{path}:line:col:`:\n{err}");
    };
    let head = format!(" error[{code}]: ");
    assert!(
        tail.starts_with(&head),
        "expected `{head}` after the location:\n{err}"
    );
    assert!(o.stdout.is_empty(), "nothing on stdout on error");
    (line, col)
}

/// Writes `src` to a temporary file named `name`; returns its path as text.
fn file(name: &str, src: &str) -> String {
    temp_file(name, src).display().to_string()
}

const DOT: &str = "\
let main = fun (u: Vector) (v: Vector) ->
  ifold (fun acc i -> acc + u[i] * v[i]) 0.0 (length u)
";

// ---- run -------------------------------------------------------------------

#[test]
fn run_prints_json_result() {
    let p = file(
        "run_plain.fsm",
        "let main =\n  let v = [1.0, 2.0, 3.0]\n  (vectorSum v, length v, v[0] < v[1])\n",
    );
    let o = cli(&["run", &p]);
    assert_eq!(ok(&o), "[6.0, [3, true]]\n");
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
}

#[test]
fn run_input_object() {
    let p = file("run_obj.fsm", DOT);
    let o = cli(&["run", &p, "--input", r#"{"v": [3, 4], "u": [1, 2]}"#]);
    assert_eq!(ok(&o), "11.0\n");
}

#[test]
fn run_input_positional_array() {
    let p = file("run_pos.fsm", DOT);
    let o = cli(&["run", &p, "--input", "[[1, 2], [3, 4]]"]);
    assert_eq!(ok(&o), "11.0\n");
}

#[test]
fn run_input_single_array_parameter() {
    let p = file(
        "run_single.fsm",
        "let main = fun (v: Vector) -> vectorSum v\n",
    );
    let o = cli(&["run", &p, "--input", "[1, 2, 3.5]"]);
    assert_eq!(ok(&o), "6.5\n");
    // Positionally too (spec/syntax.md §8.2): `[[…]]` is no Vector.
    let o = cli(&["run", &p, "--input", "[[1, 2, 3.5]]"]);
    assert_eq!(ok(&o), "6.5\n");
    // Neither reading fits: the bare reading's error.
    let o = cli(&["run", &p, "--input", "[[1, 2], [3]]"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("error[input-mismatch]: input v[0]"), "{err}");
}

#[test]
fn run_input_file() {
    let p = file("run_file.fsm", DOT);
    let input = file("run_file.json", r#"{"u": [1.5, 2], "v": [2, 0.25]}"#);
    let o = cli(&["run", &p, "--input-file", &input]);
    assert_eq!(ok(&o), "3.5\n");
}

#[test]
fn run_named_entry() {
    let p = file(
        "run_entry.fsm",
        "let twice = fun (x: Index) -> 2 * x\nlet main = 0.0\n",
    );
    let o = cli(&["run", &p, "--entry", "twice", "--input", "21"]);
    assert_eq!(ok(&o), "42\n");
}

#[test]
fn run_stats_is_one_json_line() {
    let p = file("run_stats.fsm", DOT);
    let o = cli(&["run", &p, "--input", "[[1, 2], [3, 4]]", "--stats"]);
    assert_eq!(ok(&o), "11.0\n");
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "one line on stderr: {err}");
    let j: serde_json::Value = serde_json::from_str(err.trim()).expect("stats are JSON");
    let steps = j["steps"].as_u64().expect("integer steps");
    let ops = j["ops"].as_u64().expect("integer ops");
    assert!(steps > 0 && ops > 0, "{j}");
    assert!(ops <= steps, "every op is a step: {j}");
    assert!(j["time_ms"].is_number(), "{j}");
}

#[test]
fn run_trace_prints_one_line_per_step() {
    let p = file("run_trace.fsm", DOT);
    let traced = cli(&["run", &p, "--input", "[[1, 2], [3, 4]]", "--trace"]);
    assert_eq!(ok(&traced), "11.0\n");
    let trace = stderr(&traced);
    assert!(!trace.is_empty());
    for line in trace.lines() {
        let mut words = line.split_whitespace();
        let step = words.next().and_then(|s| s.parse::<u64>().ok());
        let rule = words.next().unwrap_or("");
        assert!(step.is_some(), "no step number: {line}");
        assert!(rule.starts_with("E-"), "not a rule name: {line}");
    }
    let stats = cli(&["run", &p, "--input", "[[1, 2], [3, 4]]", "--stats"]);
    let j: serde_json::Value = serde_json::from_str(stderr(&stats).trim()).expect("JSON");
    assert_eq!(
        trace.lines().count() as u64,
        j["steps"].as_u64().unwrap(),
        "one trace line per step"
    );
}

#[test]
fn run_out_of_fuel() {
    let p = file(
        "run_fuel.fsm",
        "let main = ifold (fun acc i -> acc + toDouble i) 0.0 1000000\n",
    );
    let o = cli(&["run", &p, "--fuel", "50"]);
    let err = stderr(&o);
    located_error(&o, &p, "out-of-fuel");
    assert!(err.contains("after 50 steps"), "{err}");
    assert!(
        err.contains("--fuel"),
        "the note says how to raise it: {err}"
    );
}

// ---- check and print -------------------------------------------------------

#[test]
fn check_prints_types() {
    let p = file(
        "check_types.fsm",
        "let sq = fun x -> x * x\nlet dot = fun (u: Vector) v -> vectorSum (vectorEMul u v)\nlet n = length [true]\n",
    );
    let out = ok(&cli(&["check", &p]));
    assert_eq!(
        out,
        "sq : 'a -> 'a where num 'a\n\
         dot : Array<Double> -> Array<Double> -> Double\n\
         n : Index\n"
    );
}

#[test]
fn check_prelude_lists_library() {
    let p = file("check_prelude.fsm", "let main = 1.0\n");
    let out = ok(&cli(&["check", &p, "--prelude"]));
    assert!(out.lines().any(|l| l.starts_with("vectorDot : ")), "{out}");
    assert_eq!(out.lines().last(), Some("main : Double"));
    for line in out.lines() {
        assert!(line.contains(" : "), "not `name : type`: {line}");
    }
}

#[test]
fn print_output_reparses() {
    let src = "\
let f = fun (x: Double) (n: Index) ->
  let y = x * x
  let z = if n > 2 && y < 10.0 then y else -y
  (z, [y, 2.0 ** 3.0], (+) 1 n)
let main = f 3.0 4
";
    let p = file("print_src.fsm", src);
    let printed = ok(&cli(&["print", &p]));
    let q = file("print_out.fsm", &printed);
    assert_eq!(ok(&cli(&["check", &q])), ok(&cli(&["check", &p])));
    assert_eq!(ok(&cli(&["run", &q])), ok(&cli(&["run", &p])));
    // Printing is idempotent on printed text.
    assert_eq!(ok(&cli(&["print", &q])), printed);
}

// ---- errors ------------------------------------------------------------------

#[test]
fn type_error_is_located() {
    let p = file("err_type.fsm", "let main =\n  let x = 1.0\n  x + true\n");
    assert_eq!(cli(&["check", &p]).status.code(), Some(1));
    assert_eq!(
        located_error(&cli(&["run", &p]), &p, "type-mismatch"),
        (3, 7)
    );
}

#[test]
fn parse_error_is_located_in_every_command() {
    let p = file("err_parse.fsm", "let main = 1.0 $ 2.0\n");
    for cmd in ["check", "run", "print"] {
        let at = located_error(&cli(&[cmd, &p]), &p, "unexpected-character");
        assert_eq!(at, (1, 16), "{cmd}");
    }
}

#[test]
fn runtime_error_is_located() {
    let p = file("err_run.fsm", "let main = fun (v: Vector) -> v[length v]\n");
    let o = cli(&["run", &p, "--input", "[1, 2]"]);
    assert_eq!(located_error(&o, &p, "index-out-of-bounds"), (1, 31));
}

#[test]
fn input_errors_are_located() {
    let p = file("err_input.fsm", DOT);
    let cases = [
        (None, "input-parameters"),
        (Some("{\"u\": [1]"), "invalid-json"),
        (Some(r#"{"u": [1], "v": "x"}"#), "input-mismatch"),
        (Some(r#"{"u": [1]}"#), "input-parameters"),
        (Some(r#"{"u": [1], "v": [2], "w": 3}"#), "input-parameters"),
    ];
    for (input, code) in cases {
        let mut args = vec!["run", p.as_str()];
        if let Some(i) = input {
            args.extend(["--input", i]);
        }
        located_error(&cli(&args), &p, code);
    }
}

#[test]
fn no_such_entry() {
    let p = file("err_entry.fsm", "let main = 1.0\n");
    let o = cli(&["run", &p, "--entry", "nope"]);
    located_error(&o, &p, "no-entry");
    assert!(stderr(&o).contains("main"), "lists the definitions");
}

#[test]
fn empty_file() {
    let p = file("empty.fsm", "");
    located_error(&cli(&["run", &p]), &p, "no-entry");
    // An empty program is well formed: nothing to check, nothing to print.
    assert_eq!(ok(&cli(&["check", &p])), "");
    assert_eq!(ok(&cli(&["print", &p])), "");
}

#[test]
fn invalid_utf8_is_an_error_not_a_crash() {
    let p = temp_file("invalid_utf8.fsm", "");
    std::fs::write(&p, b"let main = 1.0 \xff\xfe\x80 + 2.0\n").expect("write");
    for cmd in ["check", "run", "print"] {
        let o = cli(&[cmd, p.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{cmd}: {}", stderr(&o));
        assert!(stderr(&o).contains("error["), "{}", stderr(&o));
    }
}

/// A deterministic stream of pseudo-random bytes (64-bit LCG).
fn random_bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 56) as u8
        })
        .collect()
}

#[test]
fn random_bytes_are_errors_not_crashes() {
    for seed in 0..4u64 {
        let bytes = random_bytes(seed, 300);
        let p = temp_file(&format!("random_{seed}.fsm"), "");
        std::fs::write(&p, &bytes).expect("write");
        let o = cli(&["run", p.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        // Printable ASCII noise (valid UTF-8) must get a located error.
        let text: String = bytes.iter().map(|b| (b' ' + b % 95) as char).collect();
        let q = file(&format!("noise_{seed}.fsm"), &text);
        let o = cli(&["run", &q]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(stderr(&o).starts_with(&format!("{q}:")), "{}", stderr(&o));
    }
}

const DEEP: usize = 100_000;

#[test]
fn deep_parentheses() {
    let src = format!("let main = {}1{}\n", "(".repeat(DEEP), ")".repeat(DEEP));
    let p = file("deep_parens.fsm", &src);
    located_error(&cli(&["run", &p]), &p, "nesting-too-deep");
}

#[test]
fn deep_operator_chain() {
    let src = format!("let main = 1{}\n", " + 1".repeat(DEEP - 1));
    let p = file("deep_chain.fsm", &src);
    located_error(&cli(&["check", &p]), &p, "nesting-too-deep");
}

#[test]
fn deep_layout_lets() {
    let mut src = String::from("let main =\n");
    for i in 0..DEEP {
        src.push_str(&format!("  let x{i} = {i}\n"));
    }
    src.push_str("  x0\n");
    let p = file("deep_lets.fsm", &src);
    located_error(&cli(&["run", &p]), &p, "nesting-too-deep");
}

#[test]
fn missing_file() {
    let p = root().join("tests/it/no-such-file.fsm");
    let o = cli(&["run", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).starts_with("error[io]: "), "{}", stderr(&o));
    let q = file("missing_input.fsm", DOT);
    let o = cli(&["run", &q, "--input-file", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).starts_with("error[io]: "), "{}", stderr(&o));
}

#[test]
fn usage_errors_exit_2() {
    let p = file("usage.fsm", "let main = 1.0\n");
    for args in [
        vec!["frobnicate", p.as_str()],
        vec!["run", p.as_str(), "--bogus"],
        vec!["run"],
        vec!["run", p.as_str(), "--fuel", "lots"],
        vec!["run", p.as_str(), "--input", "1", "--input-file", "x.json"],
        vec![],
    ] {
        let o = cli(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    assert_eq!(cli(&["--help"]).status.code(), Some(0));
}

// ---- examples ----------------------------------------------------------------

#[test]
fn examples_run() {
    let mut ran = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(root().join("examples"))
        .expect("examples/ exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "fsm"))
        .collect();
    paths.sort();
    for path in paths {
        let src = std::fs::read_to_string(&path).expect("read example");
        let loaded = Session::load(&src)
            .unwrap_or_else(|d| panic!("{} does not check: {d}", path.display()));
        let Ok(entry) = loaded.entry("main") else {
            continue;
        };
        if !entry.params.is_empty() {
            continue;
        }
        let out = ok(&cli(&["run", path.to_str().unwrap()]));
        serde_json::from_str::<serde_json::Value>(&out)
            .unwrap_or_else(|e| panic!("{}: output is not JSON ({e}): {out}", path.display()));
        ran.push(path);
    }
    assert!(ran.len() >= 3, "examples with a `main`: {ran:?}");
}

#[test]
fn ba_project_example_matches_paper_golden() {
    let p = root().join("examples/ba_project.fsm");
    let out = ok(&cli(&["run", p.to_str().unwrap()]));
    assert_eq!(out, "[-0.21283695632113153, 0.18982342172738026]\n");
}

/// `examples/nnmf.fsm` (seed 001 §7): its value, and its gradient in
/// reverse and optimised forward mode equals the update rule derived by
/// hand, Σᵢ uᵢ (1/(uᵢvⱼ) − Aᵢⱼ/(uᵢvⱼ)²) = [-8, -2/3, -1/2] here.
#[test]
fn nnmf_example_gradient_is_the_hand_derived_update_rule() {
    let p = root().join("examples/nnmf.fsm");
    let p = p.to_str().unwrap();
    assert_eq!(ok(&cli(&["run", p])), "2.6931471805599454\n");
    let input = r#"{"u": [1, 2], "v": [0.5, 1.5, 2], "a": [[1, 2, 3], [4, 5, 6]]}"#;
    for mode in ["rev", "fwd-opt"] {
        let out = ok(&cli(&[
            "grad", p, "--entry", "nnmf", "--wrt", "v", "--mode", mode, "--input", input,
        ]));
        let j: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        let g: Vec<f64> = j["gradient"]
            .as_array()
            .expect("a gradient")
            .iter()
            .map(|x| x.as_f64().expect("a number"))
            .collect();
        for (a, b) in g.iter().zip([-8.0, -2.0 / 3.0, -0.5]) {
            assert!((a - b).abs() <= 1e-12, "{mode}: {g:?}");
        }
    }
}

/// `--checkpoint off|loops` (spec/ad-reverse.md §4.4, R-Checkpoint): the
/// same gradient either way, from `grad` (evaluator and native) and from
/// `adbench gmm` on ADBench's test file; `ad --mode rev` prints the
/// taped program with `off` (an `iscan` per taped loop) and the
/// checkpointed one by default; an unknown policy is a usage error.
#[test]
fn checkpointing_is_a_choice_with_the_same_gradient() {
    let p = root().join("examples/nnmf.fsm");
    let p = p.to_str().unwrap();
    let input = r#"{"u": [1, 2], "v": [0.5, 1.5, 2], "a": [[1, 2, 3], [4, 5, 6]]}"#;
    // `cmd` of NNMF's reverse mode with respect to v, then `extra`, with
    // the policy `c`.
    let nnmf_rev = |cmd: &str, extra: &[&str], c: &str| {
        let mut args = vec![
            cmd,
            p,
            "--entry",
            "nnmf",
            "--wrt",
            "v",
            "--mode",
            "rev",
            "--checkpoint",
            c,
        ];
        args.extend(extra);
        ok(&cli(&args))
    };
    for engine in ["eval", "native"] {
        let grad = |c: &str| nnmf_rev("grad", &["--input", input, "--engine", engine], c);
        assert_eq!(grad("off"), grad("loops"), "{engine}");
    }
    let ad = |c: &str| nnmf_rev("ad", &[], c);
    assert!(ad("off").matches("iscan").count() > ad("loops").matches("iscan").count());
    let gmm = root().join("tests/data/adbench/data/gmm/test.txt");
    let gmm = gmm.to_str().unwrap();
    let run = |c: &str| {
        ok(&cli(&[
            "adbench",
            "gmm",
            gmm,
            "--mode",
            "rev",
            "--engine",
            "native",
            "--checkpoint",
            c,
        ]))
    };
    assert_eq!(run("off"), run("loops"));
    let bad = cli(&[
        "grad",
        p,
        "--wrt",
        "v",
        "--mode",
        "rev",
        "--checkpoint",
        "some",
    ]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
}

#[test]
fn readme_hello_command() {
    // The command README.md shows first.
    let p = root().join("examples/hello.fsm");
    let input = r#"{"v1": [1, 2, 3], "v2": [4, 5, 6]}"#;
    let out = ok(&cli(&["run", p.to_str().unwrap(), "--input", input]));
    assert_eq!(out, "1024.0\n");
}

/// `fsmooth difftest` runs a reproducible campaign and prints its summary.
#[test]
fn difftest_runs_a_campaign() {
    let dir = std::env::temp_dir().join(format!("fsmooth-difftest-{}", std::process::id()));
    let save = dir.to_str().expect("utf-8");
    let a = cli(&["difftest", "--cases", "40", "--seed", "7", "--save", save]);
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    let j: serde_json::Value = serde_json::from_slice(&a.stdout).expect("JSON summary");
    assert_eq!(j["programs"], 40);
    assert_eq!(j["failures"], 0);
    assert!(j["compared"].as_u64().is_some_and(|c| c > 40), "{j}");
    let b = cli(&["difftest", "--cases", "40", "--seed", "7", "--save", save]);
    let k: serde_json::Value = serde_json::from_slice(&b.stdout).expect("JSON summary");
    assert_eq!(j["compared"], k["compared"], "the seed fixes the campaign");
    assert!(!dir.exists(), "nothing saved without a failure");
}

/// `fsmooth difftest --property` runs each property of issue 6 at scale:
/// fwd-opt = fwd, eval(opt p) ⊒ eval(p), the dot-product test, and
/// native code = the evaluator.
#[test]
fn difftest_runs_every_property() {
    let dir = std::env::temp_dir().join(format!("fsmooth-difftest-p-{}", std::process::id()));
    let save = dir.to_str().expect("utf-8");
    for (property, cases) in [
        ("fwd-opt", "4"),
        ("opt", "4"),
        ("dot", "30"),
        ("native", "6"),
    ] {
        let o = cli(&[
            "difftest",
            "--property",
            property,
            "--cases",
            cases,
            "--seed",
            "3",
            "--save",
            save,
        ]);
        assert!(
            o.status.success(),
            "{property}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON summary");
        assert_eq!(j["property"], property);
        assert_eq!(j["failures"], 0);
        assert!(j["compared"].as_u64().is_some_and(|c| c > 0), "{j}");
    }
    assert!(!dir.exists(), "nothing saved without a failure");
}
