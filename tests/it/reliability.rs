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
