//! GradBench's own evals against `fsmooth gradbench` (issue 32): the
//! Python evals of the GradBench snapshot, each on its smallest
//! workloads with validation on, talk to the tool through a relay (what
//! `gradbench run` does: each eval line to the tool, the tool's one answer
//! back). Every eval except hello, particle and saddle checks each value
//! against GradBench's hand-written `manual` tool at run time, so this is
//! the most independent test of fsmooth's derivatives. `.ci/gradbench`
//! (run by `.ci/deps`) prepares the evals and builds `manual` under
//! `target/gradbench`.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::common::root;

/// The evals fsmooth implements with their smallest workloads (GradBench's
/// `run.py` flags), and how many analyses each must send.
const EVALS: &[(&str, &[&str], usize)] = &[
    ("hello", &[], 8),
    ("gmm", &["-d", "2", "-k", "5", "-n", "10"], 2),
    ("lstm", &["-l", "1", "-c", "16"], 2),
    ("ba", &["--min", "1", "--max", "1"], 2),
    (
        "ht",
        &[
            "--min",
            "1",
            "--max",
            "1",
            "--model",
            "small",
            "--variant",
            "simple",
        ],
        2,
    ),
    (
        "ht",
        &[
            "--min",
            "1",
            "--max",
            "1",
            "--model",
            "small",
            "--variant",
            "complicated",
        ],
        2,
    ),
    ("lse", &["-n", "10"], 2),
    ("llsq", &["-n", "16", "-m", "4"], 2),
    ("det", &["-l", "2", "3"], 4),
    ("ode", &["-n", "4", "-s", "1"], 2),
    ("kmeans", &["-k", "2", "-n", "10", "-d", "2"], 2),
    ("particle", &[], 4),
    ("saddle", &[], 4),
];

fn prepared() -> PathBuf {
    let dir = root().join("target/gradbench");
    assert!(
        dir.join(".ready").exists(),
        "GradBench's evals are not prepared in {}: run .ci/gradbench (part of .ci/deps, the README's test command)",
        dir.display()
    );
    dir
}

/// Runs eval `name` with `args` against `fsmooth gradbench`; returns each
/// analysis message the eval sent and each response the tool gave.
fn relay(dir: &PathBuf, name: &str, args: &[&str]) -> (Vec<serde_json::Value>, Vec<String>) {
    let mut eval = Command::new(dir.join("venv/bin/python"))
        .arg(format!("python/gradbench/gradbench/evals/{name}/run.py"))
        .args(args)
        .args(
            ["--min-runs", "1", "--min-seconds", "0"]
                .iter()
                .filter(|_| name != "hello"),
        )
        .current_dir(dir)
        .env("PYTHONPATH", "python/gradbench")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the eval starts");
    let mut tool = Command::new(env!("CARGO_BIN_EXE_fsmooth"))
        .arg("gradbench")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the tool starts");
    let mut to_eval = eval.stdin.take().expect("piped");
    let from_eval = BufReader::new(eval.stdout.take().expect("piped"));
    let mut to_tool = tool.stdin.take().expect("piped");
    let mut from_tool = BufReader::new(tool.stdout.take().expect("piped"));
    let mut analyses = Vec::new();
    let mut responses = Vec::new();
    for line in from_eval.lines() {
        let line = line.expect("the eval's line");
        let msg: serde_json::Value = serde_json::from_str(&line).expect("the eval sends JSON");
        writeln!(to_tool, "{line}").expect("the tool reads");
        to_tool.flush().expect("flush");
        let mut answer = String::new();
        from_tool.read_line(&mut answer).expect("the tool answers");
        assert!(
            !answer.is_empty(),
            "{name}: the tool closed its output on {line}"
        );
        if msg["kind"] == "analysis" {
            analyses.push(msg);
        }
        responses.push(answer.trim().to_string());
        to_eval
            .write_all(answer.as_bytes())
            .expect("the eval reads");
        to_eval.flush().expect("flush");
    }
    drop(to_tool);
    let _ = tool.wait();
    let _ = eval.wait();
    (analyses, responses)
}

/// Every eval fsmooth implements passes GradBench's own validation on its
/// smallest workloads: each evaluate succeeds and each analysis says
/// `valid: true`; stdout carries only protocol lines.
#[test]
fn gradbench_evals_validate_fsmooth() {
    let dir = prepared();
    for (name, args, expected) in EVALS {
        let (analyses, responses) = relay(&dir, name, args);
        for r in &responses {
            let j: serde_json::Value = serde_json::from_str(r)
                .unwrap_or_else(|e| panic!("{name}: a response that is not JSON ({e}): {r}"));
            assert_ne!(j["success"], false, "{name}: {r}");
        }
        assert_eq!(analyses.len(), *expected, "{name}: {responses:?}");
        for a in &analyses {
            assert_eq!(a["valid"], true, "{name}: {a}");
        }
    }
}

/// The protocol's edge cases: a module fsmooth lacks, garbage, an input of
/// the wrong shape and a function that fails are `success: false` with a
/// message, never a crash; timings are integers, one per run.
#[test]
fn gradbench_protocol_answers_every_message() {
    let mut tool = Command::new(env!("CARGO_BIN_EXE_fsmooth"))
        .arg("gradbench")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the tool starts");
    let input = [
        r#"{"id": 0, "kind": "start", "eval": "lse"}"#,
        r#"{"id": 1, "kind": "define", "module": "no-such-eval"}"#,
        r#"not json"#,
        r#"{"id": 2, "kind": "define", "module": "lse"}"#,
        r#"{"id": 3, "kind": "evaluate", "module": "lse", "function": "primal", "input": {"x": [1.0, 2.0], "min_runs": 3, "min_seconds": 0}}"#,
        r#"{"id": 4, "kind": "evaluate", "module": "lse", "function": "primal", "input": {"x": "oops"}}"#,
        r#"{"id": 5, "kind": "evaluate", "module": "lse", "function": "nope", "input": {"x": [1.0]}}"#,
        r#"{"id": 6, "kind": "evaluate", "module": "lse", "function": "primal", "input": {"x": []}}"#,
        r#"{"id": 7, "kind": "analysis", "of": 3, "valid": true}"#,
    ];
    let mut stdin = tool.stdin.take().expect("piped");
    for l in input {
        writeln!(stdin, "{l}").expect("write");
    }
    drop(stdin);
    let out = tool.wait_with_output().expect("the tool ends");
    assert!(out.status.success());
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(lines.len(), input.len());
    assert_eq!(lines[0]["tool"], "fsmooth");
    assert_eq!(lines[1]["success"], false);
    assert!(
        lines[1]["error"]
            .as_str()
            .expect("error")
            .contains("no-such-eval")
    );
    assert_eq!(lines[2]["success"], false);
    assert_eq!(lines[3]["success"], true);
    assert!(
        lines[3]["timings"][0]["nanoseconds"].is_u64(),
        "{}",
        lines[3]
    );
    assert_eq!(lines[4]["success"], true);
    let lse = 2.0 + (1.0f64 + (-1.0f64).exp()).ln();
    assert!((lines[4]["output"].as_f64().expect("a number") - lse).abs() < 1e-15);
    assert_eq!(lines[4]["timings"].as_array().expect("timings").len(), 3);
    for k in [5, 6, 7] {
        assert_eq!(lines[k]["success"], false, "{}", lines[k]);
        assert!(lines[k]["error"].is_string(), "{}", lines[k]);
    }
    assert_eq!(lines[8], serde_json::json!({"id": 7}));
}

/// The tool directory is in GradBench's layout (`tools/fsmooth/` with a
/// Dockerfile, a README and `evals.txt`), and `evals.txt` lists exactly the
/// modules the tool implements.
#[test]
fn tool_directory_lists_what_the_tool_implements() {
    let dir = root().join("tools/fsmooth");
    for f in ["Dockerfile", "README.md", "evals.txt"] {
        assert!(dir.join(f).exists(), "tools/fsmooth/{f}");
    }
    let listed = std::fs::read_to_string(dir.join("evals.txt")).expect("evals.txt");
    let o = crate::common::cli(&["gradbench", "--list"]);
    let mut implemented: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    implemented.sort();
    let listed: Vec<String> = listed.lines().map(str::to_string).collect();
    assert_eq!(listed, implemented);
    for (name, _, _) in EVALS {
        assert!(
            listed.iter().any(|l| l == name),
            "{name} is tested but not listed"
        );
    }
    assert_eq!(
        listed.len(),
        EVALS
            .iter()
            .map(|e| e.0)
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        "every implemented eval is relayed by gradbench_evals_validate_fsmooth"
    );
}
