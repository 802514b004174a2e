//! [`Case`]: one generated input — a program's bytes, its entry, a JSON
//! input, a rule file — and the command that runs it ([`Command`]), as
//! the in-process oracles call the library and as the command line runs
//! it ([`Case::command_lines`], with files named `program.fsm`,
//! `input.json` and `rules/NAME.rules`: what a saved failure holds and
//! its `command.sh` runs).

use crate::gradient::Mode;
use crate::pipeline::Engine;

use super::Target;

/// What a case runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// `fsmooth check` (and, in process, the printer's round trip).
    Check,
    /// `fsmooth run` on one engine.
    Run { engine: Engine },
    /// `fsmooth grad`, `jacobian` or `vjp`.
    Grad {
        kind: GradKind,
        wrt: String,
        mode: Mode,
        engine: Engine,
    },
    /// `fsmooth opt`, and the optimised program must refine the input.
    Opt { check: bool },
    /// `fsmooth opt --check --rules DIR`: a mutated rule file used.
    RulesOpt,
    /// `fsmooth rules check --rules DIR --family F --cases 3`.
    RulesCheck { family: String },
    /// `fsmooth rules list --rules DIR`.
    RulesList,
    /// Native code against the evaluator: `run` on both engines, or, with
    /// a variable, `grad`/`jacobian` in `mode` on both.
    Native { wrt: Option<(String, Mode)> },
}

/// Which derivative command.
#[derive(Clone, Debug, PartialEq)]
pub enum GradKind {
    Grad,
    Jacobian,
    /// With the cotangent's JSON.
    Vjp(String),
}

/// One argument of a command line: text, or the path of one of the
/// case's files (substituted by whoever runs it).
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    Lit(String),
    /// `program.fsm`
    Program,
    /// `input.json`
    Input,
    /// The directory holding the rule file.
    RulesDir,
}

/// One generated input.
#[derive(Clone, Debug)]
pub struct Case {
    pub target: Target,
    pub command: Command,
    /// The program file's bytes (may be invalid UTF-8).
    pub program: Vec<u8>,
    pub entry: String,
    /// The JSON input's bytes, when the command takes one.
    pub input: Option<Vec<u8>>,
    /// A rule file (its file name, which names its family, and bytes).
    pub rules: Option<(String, Vec<u8>)>,
    /// Evaluator fuel per run.
    pub fuel: u64,
    /// How the case was made (generator, seed file, mutations).
    pub origin: String,
}

/// The file names of a saved case.
pub const PROGRAM_FILE: &str = "program.fsm";
pub const INPUT_FILE: &str = "input.json";
pub const RULES_DIR: &str = "rules";

impl Case {
    /// The command lines that run the case: one, or two for `Native`
    /// (the evaluator's, then native code's), whose outputs must agree.
    pub fn command_lines(&self) -> Vec<Vec<Arg>> {
        let lit = |s: &str| Arg::Lit(s.to_string());
        let fuel = vec![lit("--fuel"), Arg::Lit(self.fuel.to_string())];
        let entry = vec![lit("--entry"), Arg::Lit(self.entry.clone())];
        let input = || -> Vec<Arg> {
            match &self.input {
                Some(_) => vec![lit("--input-file"), Arg::Input],
                None => Vec::new(),
            }
        };
        let engine = |e: Engine| vec![lit("--engine"), lit(engine_name(e))];
        let rules = vec![lit("--rules"), Arg::RulesDir];
        let mut line = Vec::new();
        match &self.command {
            Command::Check => {
                line.extend([lit("check"), Arg::Program]);
            }
            Command::Run { engine: e } => {
                line.extend([lit("run"), Arg::Program]);
                line.extend(entry);
                line.extend(input());
                line.extend(fuel);
                if *e == Engine::Native {
                    line.extend(engine(*e));
                }
            }
            Command::Grad {
                kind,
                wrt,
                mode,
                engine: e,
            } => {
                let name = match kind {
                    GradKind::Grad => "grad",
                    GradKind::Jacobian => "jacobian",
                    GradKind::Vjp(_) => "vjp",
                };
                line.extend([lit(name), Arg::Program]);
                line.extend(entry);
                line.extend([lit("--wrt"), Arg::Lit(wrt.clone())]);
                line.extend([lit("--mode"), lit(mode.name())]);
                if let GradKind::Vjp(w) = kind {
                    line.push(Arg::Lit(format!("--cotangent={w}")));
                }
                line.extend(input());
                line.extend(fuel);
                line.extend(engine(*e));
            }
            Command::Opt { check } => {
                line.extend([lit("opt"), Arg::Program]);
                line.extend(entry);
                if *check {
                    line.push(lit("--check"));
                }
            }
            Command::RulesOpt => {
                line.extend([lit("opt"), Arg::Program]);
                line.extend(entry);
                line.push(lit("--check"));
                line.extend(rules);
            }
            Command::RulesCheck { family } => {
                line.extend([lit("rules"), lit("check")]);
                line.extend(rules);
                line.extend([lit("--family"), Arg::Lit(family.clone())]);
                line.extend([lit("--cases"), lit("3"), lit("--depth"), lit("2")]);
                line.extend(fuel);
            }
            Command::RulesList => {
                line.extend([lit("rules"), lit("list")]);
                line.extend(rules);
            }
            Command::Native { wrt } => {
                let mut base = Vec::new();
                match wrt {
                    None => {
                        base.extend([lit("run"), Arg::Program]);
                        base.extend(entry);
                    }
                    Some((w, mode)) => {
                        base.extend([lit("jacobian"), Arg::Program]);
                        base.extend(entry);
                        base.extend([lit("--wrt"), Arg::Lit(w.clone())]);
                        base.extend([lit("--mode"), lit(mode.name())]);
                    }
                }
                base.extend(input());
                base.extend(fuel);
                let mut native = base.clone();
                native.extend(engine(Engine::Native));
                return vec![base, native];
            }
        }
        vec![line]
    }

    /// The command lines as shell text, run from the directory of a saved
    /// case (`fsmooth` on the path).
    pub fn shell(&self) -> String {
        self.command_lines()
            .iter()
            .map(|line| {
                let words: Vec<String> = line
                    .iter()
                    .map(|a| match a {
                        Arg::Lit(s) => quote(s),
                        Arg::Program => PROGRAM_FILE.to_string(),
                        Arg::Input => INPUT_FILE.to_string(),
                        Arg::RulesDir => RULES_DIR.to_string(),
                    })
                    .collect();
                format!("fsmooth {}", words.join(" "))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Whether the case's program or input is too large to shrink
    /// cheaply or to run in a subprocess often.
    pub fn is_large(&self) -> bool {
        self.program.len() + self.input.as_ref().map_or(0, Vec::len) > 1 << 20
    }
}

pub fn engine_name(e: Engine) -> &'static str {
    match e {
        Engine::Eval => "eval",
        Engine::Native => "native",
    }
}

/// `s` quoted for a POSIX shell when it needs to be.
fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
