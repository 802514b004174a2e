//! `fuzz`: a fuzzing campaign (`fuzz::run_target`) over one target or
//! all, with what only the command line may do — reading the seed files
//! (`examples/**/*.fsm`, `tests/golden/**/*.fsm`, `rewrite-rules/*.rules`
//! and `tests/data/unsound-rules/*.rules` under `--corpus`), running the
//! subprocess sample (this same binary, with the case's files in a
//! scratch directory and a wall-clock limit), and saving each failure
//! under `--save` as `TARGET-seedS-caseI/` with its files, the verdict,
//! and `command.sh`, which reproduces it. Prints one JSON line per
//! target; exits 1 when any input failed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::args::FuzzArgs;
use super::{Failure, out_json};
use crate::fuzz::case::{Arg, Case, INPUT_FILE, PROGRAM_FILE, RULES_DIR};
use crate::fuzz::process::{Exit, Runner, Status};
use crate::fuzz::{Config, Corpus, Outcome};

pub fn fuzz(args: FuzzArgs) -> Result<(), Failure> {
    let mut corpus = Corpus::builtin();
    read_corpus(&args.corpus, &mut corpus);
    corpus.index();
    let config = Config {
        cases: args.cases,
        seed: args.seed,
        time_limit: args.time_limit.map(Duration::from_secs_f64),
        case_timeout: Duration::from_secs_f64(args.case_timeout),
        sample: args.sample,
        fuel: args.fuel,
        shrink: !args.no_shrink,
        ..Config::default()
    };
    let exe = std::env::current_exe()
        .map_err(|e| Failure::usage(format!("cannot find this program's path: {e}")))?;
    let scratch = std::env::temp_dir().join(format!("fsmooth-fuzz-{}", std::process::id()));
    let runner = Process {
        exe,
        scratch: scratch.clone(),
        timeout: config.case_timeout,
    };
    let mut failing = 0;
    for target in args.target.each() {
        let mut save = |f: &crate::fuzz::Failure| {
            let saved = save_failure(&args.save, config.seed, f);
            eprintln!(
                "fuzz: {} case {}: {}: {} ({}{} shrinks; {saved})",
                f.target.name(),
                f.index,
                f.verdict.outcome.name(),
                f.verdict.detail,
                if f.subprocess { "subprocess, " } else { "" },
                f.shrinks
            );
        };
        let s = crate::fuzz::run_target(target, &config, &corpus, Some(&runner), &mut save);
        failing += s.failed();
        let mut line = serde_json::Map::new();
        line.insert("target".into(), target.name().into());
        line.insert("seed".into(), config.seed.into());
        line.insert("cases".into(), s.cases.into());
        for o in Outcome::ALL {
            line.insert(o.name().into(), s.count(o).into());
        }
        line.insert("subprocess".into(), s.subprocess.into());
        line.insert("seconds".into(), super::json::rounded(s.seconds, 1).into());
        line.insert(
            "kinds".into(),
            serde_json::to_value(&s.kinds).unwrap_or_default(),
        );
        line.insert(
            "codes".into(),
            serde_json::to_value(&s.codes).unwrap_or_default(),
        );
        out_json(&serde_json::Value::Object(line))?;
    }
    let _ = std::fs::remove_dir_all(&scratch);
    if failing > 0 {
        return Err(Failure::Error(format!(
            "error[fuzz-failure]: {failing} failing input(s); the first of each kind are saved under {}\n",
            args.save.display()
        )));
    }
    Ok(())
}

/// Adds the seed files under `root` to `corpus` (missing directories are
/// skipped: the built-in seeds remain).
fn read_corpus(root: &Path, corpus: &mut Corpus) {
    let mut programs = Vec::new();
    for dir in ["examples", "tests/golden"] {
        files(&root.join(dir), "fsm", &mut programs);
    }
    programs.sort();
    for p in programs {
        if let Ok(text) = std::fs::read(&p) {
            let name = p.strip_prefix(root).unwrap_or(&p).display().to_string();
            corpus.add_program(&name, text);
        }
    }
    let mut rules = Vec::new();
    for dir in ["rewrite-rules", "tests/data/unsound-rules"] {
        files(&root.join(dir), "rules", &mut rules);
    }
    rules.sort();
    for p in rules {
        if let Ok(text) = std::fs::read(&p) {
            let name = p.strip_prefix(root).unwrap_or(&p).display().to_string();
            corpus.add_rules(&name, text);
        }
    }
}

/// The files under `dir` (recursively) whose extension is `ext`.
fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, ext, out);
        } else if p.extension().is_some_and(|x| x == ext) {
            out.push(p);
        }
    }
}

/// Writes the case's files into `dir`.
fn write_case(dir: &Path, case: &Case) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(PROGRAM_FILE), &case.program)?;
    if let Some(i) = &case.input {
        std::fs::write(dir.join(INPUT_FILE), i)?;
    }
    let rules = dir.join(RULES_DIR);
    let _ = std::fs::remove_dir_all(&rules);
    if let Some((name, text)) = &case.rules {
        std::fs::create_dir_all(&rules)?;
        std::fs::write(rules.join(name), text)?;
    }
    Ok(())
}

/// Saves a failure under `save`; says where (or why not).
fn save_failure(save: &Path, seed: u64, f: &crate::fuzz::Failure) -> String {
    let dir = save.join(format!("{}-seed{seed}-case{}", f.target.name(), f.index));
    let script = format!(
        "#!/bin/sh\n# fsmooth fuzz --target {} --seed {seed}: case {} ({} shrinks)\n# {}: {}\n# {}\n# origin: {}\ncd \"$(dirname \"$0\")\"\n{}\n",
        f.target.name(),
        f.index,
        f.shrinks,
        f.verdict.outcome.name(),
        f.verdict.detail.replace('\n', "\n# "),
        if f.subprocess {
            "found by running the binary"
        } else {
            "found in process"
        },
        f.case.origin.replace('\n', " "),
        f.case.shell()
    );
    let written =
        write_case(&dir, &f.case).and_then(|()| std::fs::write(dir.join("command.sh"), script));
    match written {
        Ok(()) => format!("saved as {}", dir.display()),
        Err(e) => format!("not saved: {e}"),
    }
}

/// The subprocess runner: this binary, the case's files in a scratch
/// directory, a wall-clock limit.
struct Process {
    exe: PathBuf,
    scratch: PathBuf,
    timeout: Duration,
}

/// At most this much of each output stream is kept.
const KEEP: usize = 1 << 20;

impl Runner for Process {
    fn run(&self, case: &Case, line: &[Arg], close_stdout: bool) -> Exit {
        let failed = |why: String| Exit {
            status: Status::Code(-1),
            stdout: Vec::new(),
            stderr: why.into_bytes(),
        };
        if let Err(e) = write_case(&self.scratch, case) {
            return failed(format!("error[io]: cannot write the case: {e}"));
        }
        let args: Vec<String> = line
            .iter()
            .map(|a| match a {
                Arg::Lit(s) => s.clone(),
                Arg::Program => self.scratch.join(PROGRAM_FILE).display().to_string(),
                Arg::Input => self.scratch.join(INPUT_FILE).display().to_string(),
                Arg::RulesDir => self.scratch.join(RULES_DIR).display().to_string(),
            })
            .collect();
        let child = Command::new(&self.exe)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                return failed(format!(
                    "error[io]: cannot start {}: {e}",
                    self.exe.display()
                ));
            }
        };
        let reader = |s: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut kept = Vec::new();
                if let Some(mut s) = s {
                    let mut buf = [0u8; 1 << 16];
                    while let Ok(n) = s.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        if kept.len() < KEEP {
                            kept.extend_from_slice(&buf[..n.min(KEEP - kept.len())]);
                        }
                    }
                }
                kept
            })
        };
        let stdout = child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>);
        // A reader that went away: the pipe is closed before any output.
        // (Dropped here: a shadowed pipe would stay open to the end of
        // the function, and a child writing more than the pipe holds —
        // `opt --check` on Stalingrad's particle, 77 KB — blocked until
        // the time limit.)
        let stdout = if close_stdout {
            drop(stdout);
            None
        } else {
            stdout
        };
        let out = reader(stdout);
        let err = reader(
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        );
        let start = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if start.elapsed() < self.timeout => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        };
        let status = match status {
            None => Status::Timeout,
            Some(s) => {
                use std::os::unix::process::ExitStatusExt;
                match (s.code(), s.signal()) {
                    (Some(c), _) => Status::Code(c),
                    (None, Some(sig)) => Status::Signal(sig),
                    (None, None) => Status::Code(-1),
                }
            }
        };
        Exit {
            status,
            stdout: out.join().unwrap_or_default(),
            stderr: err.join().unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzz::Target;
    use crate::fuzz::case::Command as CaseCommand;
    use crate::pipeline::Engine;

    /// A closed output pipe is closed: a child that writes more than a
    /// pipe holds ends (by SIGPIPE or status 141), it does not block until
    /// the time limit (found by `fsmooth fuzz --target opt --seed 2812`).
    #[test]
    fn a_closed_pipe_does_not_block_a_large_writer() {
        let scratch = std::env::temp_dir().join(format!("fsmooth-pipe-{}", std::process::id()));
        let runner = Process {
            exe: PathBuf::from("sh"),
            scratch: scratch.clone(),
            timeout: Duration::from_secs(10),
        };
        let case = Case {
            target: Target::Run,
            command: CaseCommand::Run {
                engine: Engine::Eval,
            },
            program: b"let main = 1.0\n".to_vec(),
            entry: "main".into(),
            input: None,
            rules: None,
            fuel: 1000,
            origin: "test".into(),
        };
        let line = [
            Arg::Lit("-c".into()),
            Arg::Lit("exec head -c 1000000 /dev/zero".into()),
        ];
        let exit = runner.run(&case, &line, true);
        let _ = std::fs::remove_dir_all(&scratch);
        assert_ne!(exit.status, Status::Timeout);
    }
}
