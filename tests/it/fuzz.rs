//! The fuzzing harness (`fsmooth fuzz`, `src/fuzz/`): a bounded campaign
//! of every target with fixed seeds, run by the binary as a user runs it
//! (in-process oracles, a subprocess sample, closed pipes), must find no
//! panic, signal, timeout, disagreement or unclean error; and the
//! oracles themselves must see a failure when there is one. Long
//! campaigns: `fsmooth fuzz --target all --cases N --seed S`.

use std::time::Duration;

use fsmooth::diagnostic::{Diagnostic, Span};
use fsmooth::fuzz::case::{Arg, Case, Command};
use fsmooth::fuzz::oracle::{Subject, clean};
use fsmooth::fuzz::process::{Exit, Runner, Status, judge};
use fsmooth::fuzz::{Config, Corpus, Outcome, Target, run_target};
use fsmooth::pipeline::Engine;

use crate::common::root;

/// Runs `fsmooth fuzz --target T` and checks its summary line.
fn campaign(target: &str, cases: u64, sample: u64) {
    let save = std::env::temp_dir().join(format!("fsmooth-fuzz-test-{}", std::process::id()));
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_fsmooth"))
        .args(["fuzz", "--target", target, "--seed", "1"])
        .args(["--cases", &cases.to_string()])
        .args(["--sample", &sample.to_string()])
        // A hang detector with room for a debug build on a loaded 2-core
        // machine: `opt --check` of the particle's argmin (corpus:
        // examples/stalingrad/) alone takes ~17 s there, and its oracle
        // optimises and runs it more than once.
        .args(["--case-timeout", "180"])
        // The evaluator's runs of the corpus's heaviest programs (the
        // Stalingrad examples: seconds each in a debug build) end at this
        // fuel, inconclusive, instead of taking the case past its limit.
        .args(["--fuel", "1000000"])
        .arg("--save")
        .arg(&save)
        .arg("--corpus")
        .arg(root())
        .output()
        .expect("fsmooth runs");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{target}: {stdout}\n{stderr}");
    let line: serde_json::Value =
        serde_json::from_str(stdout.trim()).expect("one JSON summary line");
    assert_eq!(line["target"], target);
    assert_eq!(line["cases"], cases, "{line}");
    for bad in ["panic", "signal", "timeout", "disagree", "unclean_error"] {
        assert_eq!(line[bad], 0, "{target}: {bad} in {line}\n{stderr}");
    }
    let sum: u64 = ["ok", "clean_error", "known"]
        .iter()
        .map(|k| line[k].as_u64().expect("a count"))
        .sum();
    assert_eq!(sum, cases, "{line}");
    assert!(line["subprocess"].as_u64().expect("a count") > 0, "{line}");
}

#[test]
fn fuzz_check() {
    campaign("check", 400, 40);
}

#[test]
fn fuzz_run() {
    campaign("run", 250, 25);
}

#[test]
fn fuzz_input() {
    campaign("input", 250, 25);
}

#[test]
fn fuzz_grad() {
    campaign("grad", 120, 20);
}

#[test]
fn fuzz_native() {
    campaign("native", 120, 20);
}

#[test]
fn fuzz_opt() {
    campaign("opt", 25, 8);
}

#[test]
fn fuzz_rules() {
    campaign("rules", 60, 15);
}

/// A runner that returns one canned exit.
struct Canned(Exit);

impl Runner for Canned {
    fn run(&self, _: &Case, _: &[Arg], _: bool) -> Exit {
        self.0.clone()
    }
}

fn case(command: Command) -> Case {
    Case {
        target: Target::Run,
        command,
        program: b"let main = 1.0\n".to_vec(),
        entry: "main".into(),
        input: None,
        rules: None,
        fuel: 1000,
        origin: "test".into(),
    }
}

/// The subprocess oracle sees a panic, a signal, a timeout, an error
/// without a location or a code, and a disagreement between engines.
#[test]
fn the_subprocess_oracle_sees_failures() {
    let run = case(Command::Run {
        engine: Engine::Eval,
    });
    let exit = |status, stdout: &str, stderr: &str| {
        Canned(Exit {
            status,
            stdout: stdout.as_bytes().to_vec(),
            stderr: stderr.as_bytes().to_vec(),
        })
    };
    let verdict = |r: &Canned, c: &Case| judge(c, r, false).outcome;
    let cases = [
        (
            exit(
                Status::Code(70),
                "",
                "thread 'fsmooth' panicked at src/x.rs:1:1",
            ),
            Outcome::Panic,
        ),
        (exit(Status::Signal(6), "", ""), Outcome::Signal),
        (exit(Status::Timeout, "", ""), Outcome::Timeout),
        (
            exit(Status::Code(1), "", "error[index-out-of-bounds]: index 3\n"),
            Outcome::Unclean,
        ),
        (
            exit(Status::Code(1), "", "p.fsm:1:1: error[Bad Code]: x\n"),
            Outcome::Unclean,
        ),
        (exit(Status::Code(141), "", ""), Outcome::Unclean),
        (exit(Status::Code(3), "", ""), Outcome::Unclean),
        (
            exit(Status::Code(1), "", "p.fsm:2:7: error[type-mismatch]: x\n"),
            Outcome::CleanError,
        ),
        (exit(Status::Code(0), "1.0\n", ""), Outcome::Ok),
    ];
    for (r, want) in &cases {
        assert_eq!(verdict(r, &run), *want, "{:?}", r.0);
    }
    // The two engines' runs print different values: a disagreement.
    struct Differ;
    impl Runner for Differ {
        fn run(&self, _: &Case, line: &[Arg], _: bool) -> Exit {
            let native = line.iter().any(|a| *a == Arg::Lit("native".into()));
            Exit {
                status: Status::Code(0),
                stdout: if native {
                    b"2.0\n".to_vec()
                } else {
                    b"1.0\n".to_vec()
                },
                stderr: Vec::new(),
            }
        }
    }
    let native = case(Command::Native { wrt: None });
    assert_eq!(judge(&native, &Differ, false).outcome, Outcome::Disagree);
}

/// The in-process oracle judges an error without a location in the
/// user's program unclean, and a panic in a library call is a panic.
#[test]
fn the_in_process_oracle_sees_failures() {
    let d = Diagnostic {
        code: "index-out-of-bounds",
        message: "index 3".into(),
        span: Span::generated(),
        notes: Vec::new(),
    };
    assert_eq!(clean(&d, Subject::Program).outcome, Outcome::Unclean);
    let located = Diagnostic {
        span: Span::whole_file(),
        ..d.clone()
    };
    assert_eq!(
        clean(&located, Subject::Program).outcome,
        Outcome::CleanError
    );
    let internal = Diagnostic {
        code: "internal-error",
        ..located
    };
    assert_eq!(clean(&internal, Subject::Program).outcome, Outcome::Unclean);
    // A campaign through the library, without a subprocess: the counts
    // add up and nothing fails.
    let mut corpus = Corpus::builtin();
    corpus.index();
    let config = Config {
        cases: 30,
        seed: 7,
        case_timeout: Duration::from_secs(60),
        sample: 0,
        ..Config::default()
    };
    let s = run_target(Target::Check, &config, &corpus, None, &mut |_| {});
    assert_eq!(s.cases, 30);
    assert_eq!(s.failed(), 0, "{:?}", s.kinds);
    assert_eq!(s.subprocess, 0);
}

/// The generator's well-typed programs type-check (nearly all: a
/// generated `vectorMap (grad …) snd` at a type the generator does not
/// track may not), and its near misses mostly do not: else the oracles
/// that compare engines would see few programs.
#[test]
fn well_typed_programs_type_check() {
    use fsmooth::fuzz::choices::Choices;
    use fsmooth::fuzz::programs::{Shape, program};
    let mut state = 1u64;
    let mut failures = Vec::new();
    let mut near_ok = 0;
    for k in 0..300 {
        let choices: Vec<u32> = (0..3000)
            .map(|_| fsmooth::difftest::next(&mut state) as u32)
            .collect();
        let shape = if k % 3 == 2 {
            Shape::NearMiss
        } else {
            Shape::WellTyped
        };
        let g = program(&mut Choices::new(&choices), shape, 1 + k % 5);
        let loaded = fsmooth::pipeline::Session::load(&g.source).and_then(|s| {
            s.entry(&g.entry)?;
            Ok(())
        });
        match (shape, loaded) {
            (Shape::WellTyped, Err(d)) => failures.push(format!("{d}\n{}", g.source)),
            (Shape::NearMiss, Ok(())) => near_ok += 1,
            _ => {}
        }
    }
    assert!(
        failures.len() <= 2,
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert!(near_ok < 50, "{near_ok} of 100 near misses type-check");
}
