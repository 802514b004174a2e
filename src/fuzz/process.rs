//! The subprocess oracle: a case run by the real `fsmooth` binary, for
//! what no in-process check can see — signals and aborts (a stack
//! overflow, an allocation failure), exit statuses, what the command
//! line prints, a closed output pipe, hangs (a wall-clock limit).
//!
//! Running a process means writing the case's files and spawning, which
//! is the command line's business (only `cli/` touches files): the
//! library defines what a run is ([`Runner`], [`Exit`]) and judges it
//! ([`judge`]); `cli/fuzz.rs` implements the runner, and a test may
//! implement its own.
//!
//! A clean failure exits with status 1 and prints, on its first
//! `error[` line, `file:line:col: error[code]: message` — the location
//! may be left out only for usage and I/O errors, a rule-file error that
//! concerns no line, the optimiser's errors about a whole rule set, and
//! the known unlocated runtime errors of Note [Known defects]. Status
//! 141 is clean only when the harness closed the output pipe.

use super::case::{Arg, Case, Command};
use super::oracle::{KNOWN_UNLOCATED, is_code, is_internal, uses_derivatives};
use super::{Outcome, Verdict};
use crate::pipeline::is_resource_limit;

/// How a process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Code(i32),
    Signal(i32),
    /// Killed at the wall-clock limit.
    Timeout,
}

/// What a run of the binary gave.
#[derive(Clone, Debug)]
pub struct Exit {
    pub status: Status,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Runs command lines of the `fsmooth` binary.
pub trait Runner {
    /// Runs `line` with the case's files in place of the file arguments;
    /// with `close_stdout`, the output pipe is closed before the process
    /// writes (a reader that went away).
    fn run(&self, case: &Case, line: &[Arg], close_stdout: bool) -> Exit;
}

/// Runs the case's command lines with `runner` and judges them; for
/// `Native` the two runs' outputs are compared.
pub fn judge(case: &Case, runner: &dyn Runner, close_stdout: bool) -> Verdict {
    let lines = case.command_lines();
    let compare = matches!(case.command, Command::Native { .. });
    let mut exits = Vec::new();
    for line in &lines {
        let exit = runner.run(case, line, close_stdout && !compare);
        let v = judge_exit(case, line, &exit, close_stdout && !compare);
        if v.outcome > Outcome::Known {
            return v;
        }
        exits.push((exit, v));
    }
    if compare && let [(e, _), (n, _)] = exits.as_slice() {
        return compare_outputs(e, n);
    }
    exits
        .into_iter()
        .map(|(_, v)| v)
        .max_by_key(|v| v.outcome)
        .unwrap_or_else(Verdict::ok)
}

/// Judges one exit.
pub fn judge_exit(case: &Case, line: &[Arg], exit: &Exit, closed: bool) -> Verdict {
    let stderr = String::from_utf8_lossy(&exit.stderr);
    let tail = || {
        let t: Vec<&str> = stderr.lines().take(6).collect();
        t.join(" | ")
    };
    if stderr.contains("panicked at") || stderr.contains("internal error (the worker thread") {
        return Verdict::new(Outcome::Panic, format!("the binary panicked: {}", tail()));
    }
    let code = match &exit.status {
        Status::Timeout => return Verdict::new(Outcome::Timeout, "the binary hit the time limit"),
        Status::Signal(s) => {
            return Verdict::new(Outcome::Signal, format!("killed by signal {s}: {}", tail()));
        }
        Status::Code(c) => *c,
    };
    match code {
        0 => Verdict::ok(),
        141 if closed => Verdict::ok(),
        1 => judge_error_text(case, line, &stderr),
        101 | 70 => Verdict::new(Outcome::Panic, format!("exit status {code}: {}", tail())),
        _ => Verdict::new(
            Outcome::Unclean,
            format!("unexpected exit status {code}: {}", tail()),
        ),
    }
}

/// The first `error[` line of a command's standard error.
struct ErrorLine {
    /// `file:line:col`, when printed.
    location: Option<(String, u64, u64)>,
    code: String,
    message: String,
}

fn error_line(stderr: &str) -> Option<ErrorLine> {
    let line = stderr.lines().find(|l| l.contains("error["))?;
    let at = line.find("error[")?;
    let (head, rest) = line.split_at(at);
    let rest = &rest["error[".len()..];
    let close = rest.find("]: ")?;
    let location = head.strip_suffix(": ").and_then(|h| {
        let mut parts = h.rsplitn(3, ':');
        let col = parts.next()?.parse().ok()?;
        let line = parts.next()?.parse().ok()?;
        let path = parts.next()?.to_string();
        Some((path, line, col))
    });
    Some(ErrorLine {
        location,
        code: rest[..close].to_string(),
        message: rest[close + 3..].to_string(),
    })
}

fn judge_error_text(case: &Case, line: &[Arg], stderr: &str) -> Verdict {
    let Some(ErrorLine {
        location,
        code,
        message,
    }) = error_line(stderr)
    else {
        return Verdict::new(
            Outcome::Unclean,
            format!(
                "exit status 1 without an error line: {}",
                stderr.lines().next().unwrap_or("")
            ),
        );
    };
    if !is_code(&code) {
        return Verdict::new(Outcome::Unclean, format!("no stable code: error[{code}]"));
    }
    if is_internal(&code, stderr) {
        return Verdict::new(
            Outcome::Unclean,
            format!("internal error: error[{code}]: {message}"),
        );
    }
    let located = location
        .as_ref()
        .is_some_and(|(_, l, c)| *l >= 1 && *c >= 1);
    if located || matches!(code.as_str(), "usage" | "io" | "rules-dir" | "rules-file") {
        return Verdict::new(Outcome::CleanError, code);
    }
    let rules = matches!(
        case.command,
        Command::RulesOpt | Command::RulesCheck { .. } | Command::RulesList
    );
    if rules && code.starts_with("opt-") {
        return Verdict::new(Outcome::CleanError, code);
    }
    let native = line.iter().any(|a| *a == Arg::Lit("native".into()));
    let derivative = matches!(
        case.command,
        Command::Grad { .. } | Command::Native { wrt: Some(_) }
    );
    let expanded = uses_derivatives(&String::from_utf8_lossy(&case.program));
    if KNOWN_UNLOCATED && (native || derivative || expanded) {
        return Verdict::new(
            Outcome::Known,
            format!("runtime error without a location: error[{code}]: {message}"),
        );
    }
    Verdict::new(
        Outcome::Unclean,
        format!("no location: error[{code}]: {message}"),
    )
}

/// The evaluator's run `e` against native code's `n` (both judged
/// clean or known): the same JSON within ρ ≤ 1e-12, or the same error
/// code; an evaluator out of fuel is not compared.
fn compare_outputs(e: &Exit, n: &Exit) -> Verdict {
    let code_of = |x: &Exit| error_line(&String::from_utf8_lossy(&x.stderr)).map(|l| l.code);
    match (&e.status, &n.status) {
        (Status::Code(0), Status::Code(0)) => {
            let parse = |x: &Exit| serde_json::from_slice::<serde_json::Value>(&x.stdout);
            match (parse(e), parse(n)) {
                (Ok(a), Ok(b)) if json_agree(&a, &b) => Verdict::ok(),
                _ => Verdict::new(
                    Outcome::Disagree,
                    format!(
                        "the evaluator prints {}, native code {}",
                        String::from_utf8_lossy(&e.stdout).trim(),
                        String::from_utf8_lossy(&n.stdout).trim()
                    ),
                ),
            }
        }
        // A resource limit (E-Fuel, E-Limit) is no verdict: native code
        // need not stop where the evaluator does (spec/semantics.md §9).
        _ if code_of(e).is_some_and(|c| is_resource_limit(&c)) => {
            Verdict::new(Outcome::CleanError, code_of(e).unwrap_or_default())
        }
        (Status::Code(1), Status::Code(1)) if code_of(e) == code_of(n) => {
            Verdict::new(Outcome::CleanError, code_of(e).unwrap_or_default())
        }
        _ => Verdict::new(
            Outcome::Disagree,
            format!(
                "the evaluator ends {:?} ({}), native code {:?} ({})",
                e.status,
                code_of(e).unwrap_or_default(),
                n.status,
                code_of(n).unwrap_or_default()
            ),
        ),
    }
}

/// JSON values equal up to ρ ≤ 1e-12 on numbers (NaN and infinities
/// print as strings and compare as text).
fn json_agree(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as V;
    match (a, b) {
        (V::Number(x), V::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x.to_bits() == y.to_bits() || crate::numeric::rho(x, y) <= 1e-12,
            _ => x == y,
        },
        (V::Array(xs), V::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| json_agree(x, y))
        }
        (V::Object(xs), V::Object(ys)) => {
            xs.len() == ys.len()
                && xs
                    .iter()
                    .all(|(k, x)| ys.get(k).is_some_and(|y| json_agree(x, y)))
        }
        _ => a == b,
    }
}
