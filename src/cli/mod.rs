//! The command-line interface: the only module that reads files or prints.
//! Errors are rendered as `file:line:col: error[code]: message` followed by
//! a source excerpt; the process exits with 1 on any error in the program
//! or its input (and a usage error a command finds), 2 on a usage error
//! of the argument grammar, and quietly with 141 (a shell's
//! status for SIGPIPE) when its output pipe is closed.
//!
//! - `args`: the grammar; `render`: diagnostics; `json`: the JSON layout;
//! - `program` (`check`, `print`, `run`), `derivative` (`grad`, `jacobian`,
//!   `vjp`, `ad`, `compile`), `optimise` (`opt`), `workload` (`adbench`),
//!   `tools` (`rules`, `difftest`), `fuzz`, `gradbench` (the GradBench
//!   protocol): the commands, each loading its
//!   program once into a `pipeline::Session`.

mod args;
mod derivative;
mod fuzz;
mod gradbench;
mod json;
mod optimise;
mod program;
mod render;
mod tools;
mod workload;

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use clap::Parser;

use crate::diagnostic::{Diagnostic, SourceId, Span};
use args::{Cli, Command};
use render::Sources;
pub use render::render_diagnostic;

/// Why a command stopped.
pub(crate) enum Failure {
    /// An error in the program or its input, rendered: exit status 1.
    Error(String),
    /// Standard output was closed (a reader such as `head` went away):
    /// nothing more to say, exit status 141.
    ClosedPipe,
}

impl Failure {
    /// A usage error the argument grammar cannot express (the grammar's
    /// own exit with 2; these, found by a command, with 1).
    fn usage(message: impl std::fmt::Display) -> Failure {
        Failure::Error(format!("error[usage]: {message}\n"))
    }
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let passes = cli.passes;
    let result = run(cli.command);
    if passes {
        let _ = print_passes();
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Error(msg)) => {
            let _ = std::io::stderr().write_all(msg.as_bytes());
            ExitCode::from(1)
        }
        Err(Failure::ClosedPipe) => ExitCode::from(141),
    }
}

fn run(command: Command) -> Result<(), Failure> {
    match command {
        Command::Check { file, prelude } => program::check(&file, prelude),
        Command::Print { file } => program::print(&file),
        Command::Run(args) => program::run(args),
        Command::Grad(args) => derivative::grad(args, false),
        Command::Jacobian(args) => derivative::grad(args, true),
        Command::Vjp { args, cotangent } => derivative::vjp(args, &cotangent),
        Command::Ad {
            file,
            entry,
            wrt,
            mode,
            rules,
            checkpoint,
        } => derivative::ad(&file, &entry, &wrt, mode, rules, checkpoint),
        Command::Compile(args) => derivative::compile(args),
        Command::Opt {
            file,
            entry,
            rules,
            explain,
            stats,
            check,
            exact,
        } => optimise::opt(&file, &entry, rules, (explain, stats, check), exact),
        Command::Adbench(cmd) => workload::adbench(cmd),
        Command::Gradbench {
            engine,
            fuel,
            max_elements,
            list,
        } => gradbench::serve(
            engine,
            crate::eval::Limits {
                fuel,
                elements: max_elements,
            },
            list,
        ),
        Command::Rules(cmd) => tools::rules(cmd),
        Command::Fuzz(args) => fuzz::fuzz(args),
        Command::Difftest {
            cases,
            seed,
            max_size,
            save,
            fuel,
            property,
            only_while,
            only_operators,
        } => tools::difftest(
            crate::difftest::Campaign {
                cases,
                seed,
                max_size,
                limits: crate::eval::Limits::with_fuel(fuel),
                property,
                only_while,
                only_operators,
            },
            &save,
        ),
    }
}

/// `--passes`: one JSON line on stderr.
fn print_passes() -> std::io::Result<()> {
    #[derive(serde::Serialize)]
    struct Row {
        pass: &'static str,
        count: u32,
        time_ms: f64,
    }
    let rows: Vec<Row> = crate::pipeline::passes::take()
        .into_iter()
        .filter(|(_, r)| r.count > 0)
        .map(|(p, r)| Row {
            pass: p.name(),
            count: r.count,
            time_ms: json::rounded(r.time.as_secs_f64() * 1e3, 3),
        })
        .collect();
    let line =
        json::to_line(&serde_json::json!({ "passes": rows })).map_err(std::io::Error::other)?;
    writeln!(std::io::stderr(), "{line}")
}

/// Writes `text` to standard output; a closed pipe ends the command.
pub(crate) fn out(text: &str) -> Result<(), Failure> {
    let mut o = std::io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|()| o.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Failure::ClosedPipe),
        Err(e) => Err(Failure::Error(format!(
            "error[io]: cannot write to standard output: {e}\n"
        ))),
    }
}

/// Writes `value` as one line of JSON to standard output.
pub(crate) fn out_json(value: &impl serde::Serialize) -> Result<(), Failure> {
    let line = json::to_line(value)
        .map_err(|e| Failure::Error(format!("error[internal-error]: {e}\n")))?;
    out(&format!("{line}\n"))
}

/// Writes `value` as one line of JSON to standard error (statistics).
pub(crate) fn err_json(value: &impl serde::Serialize) {
    if let Ok(line) = json::to_line(value) {
        let _ = writeln!(std::io::stderr(), "{line}");
    }
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    std::fs::write(path, bytes)
        .map_err(|e| Failure::Error(format!("error[io]: cannot write {}: {e}\n", path.display())))
}

fn read(path: &Path) -> Result<String, Failure> {
    let bytes = std::fs::read(path)
        .map_err(|e| Failure::Error(format!("error[io]: cannot read {}: {e}\n", path.display())))?;
    match String::from_utf8(bytes) {
        Ok(s) => Ok(s),
        Err(e) => {
            // Point at the first invalid byte: the valid prefix is the same
            // in the lossy text, so its offset is right there too.
            let at = e.utf8_error().valid_up_to();
            let lossy = String::from_utf8_lossy(e.as_bytes()).into_owned();
            let d = Diagnostic {
                code: "invalid-utf8",
                message: "the file is not valid UTF-8".to_string(),
                span: Span::new(SourceId::MAIN, at, at + 1),
                notes: Vec::new(),
            };
            Err(Failure::Error(render_diagnostic(
                &d,
                &path.display().to_string(),
                &lossy,
            )))
        }
    }
}

impl Sources {
    /// Reads the program at `path`.
    fn read(path: &Path) -> Result<Sources, Failure> {
        Ok(Sources {
            main_path: path.display().to_string(),
            main_src: read(path)?,
        })
    }

    /// A failure rendered against these sources.
    fn fail(&self, d: &Diagnostic) -> Failure {
        Failure::Error(self.render(d))
    }
}

/// The `--input` text, or the contents of `--input-file`.
fn input_text(input: &args::InputArgs) -> Result<Option<String>, Failure> {
    match &input.input_file {
        Some(p) => Ok(Some(read(p)?)),
        None => Ok(input.input.clone()),
    }
}

/// The rule files of `--rules DIR` (every `*.rules` file, sorted by name),
/// read here so that the optimiser reads no files.
fn rule_files(dir: Option<&Path>) -> Result<Option<Vec<crate::opt::RuleFile>>, Failure> {
    let Some(dir) = dir else {
        return Ok(None);
    };
    // The same errors (and rendering) as a malformed rule file's.
    let error = |file: &Path, code, message: String| {
        Failure::Error(
            crate::opt::RuleError {
                file: file.display().to_string(),
                line: 0,
                col: 0,
                code,
                message,
                text: String::new(),
            }
            .render(),
        )
    };
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| {
            error(
                dir,
                "rules-dir",
                format!("cannot read the rules directory: {e}"),
            )
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "rules"))
        .collect();
    paths.sort();
    let mut files = Vec::new();
    for p in paths {
        let text = std::fs::read_to_string(&p)
            .map_err(|e| error(&p, "rules-file", format!("cannot read: {e}")))?;
        files.push(crate::opt::RuleFile {
            path: p.display().to_string(),
            text,
        });
    }
    Ok(Some(files))
}

/// `{"steps": …, "ops": …, "time_ms": …}` on stderr.
fn stats_line(s: crate::eval::Stats, elapsed: std::time::Duration) {
    err_json(&serde_json::json!({
        "steps": s.steps,
        "ops": s.ops,
        "time_ms": json::rounded(elapsed.as_secs_f64() * 1e3, 3),
    }));
}

/// The minimum time of `n` runs of `f`, in milliseconds.
fn min_ms(n: u32, f: &mut dyn FnMut() -> Result<(), Failure>) -> Result<f64, Failure> {
    let mut best = f64::INFINITY;
    for _ in 0..n.max(1) {
        let t = std::time::Instant::now();
        f()?;
        best = best.min(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(best)
}

/// `{"repeat": N, "min_ms": …, "timed": what}` on stderr (`--repeat N`).
fn repeat_line(n: u32, best_ms: f64, what: &str) {
    err_json(&serde_json::json!({
        "repeat": n,
        "min_ms": json::rounded(best_ms, 4),
        "timed": what,
    }));
}
