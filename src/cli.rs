//! The command-line interface: the only module that reads files or prints.
//! Errors are rendered as `file:line:col: error[code]: message` followed by
//! a source excerpt; the process exits with 1 on any error in the program
//! or its input and 2 on a usage error.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};

use crate::ad::ForwardMode;
use crate::diagnostic::{Diagnostic, SourceId, Span};
use crate::eval::{Limits, Stats};
use crate::pipeline::{self, PRELUDE};
use crate::syntax::print_expr;

#[derive(Parser, Debug)]
#[command(
    name = "fsmooth",
    version,
    about = "F-smooth: a differentiable functional array language"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Parse and type-check a program; print the type of every definition.
    Check {
        file: PathBuf,
        /// Also list the prelude's definitions.
        #[arg(long)]
        prelude: bool,
    },
    /// Evaluate an entry definition with the reference evaluator and print
    /// the result as JSON.
    Run(RunArgs),
    /// Print the program's core form (desugared) as source text.
    Print { file: PathBuf },
    /// The gradient of a Double-valued entry with respect to one parameter:
    /// `{"value": …, "gradient": …}`, the gradient shaped like the parameter.
    Grad(DerivArgs),
    /// The Jacobian J[i][j] = ∂outᵢ/∂inⱼ of an entry with respect to one
    /// parameter: `{"value": …, "jacobian": …}`.
    Jacobian(DerivArgs),
    /// A vector–Jacobian product wᵀJ of an entry with respect to one
    /// parameter: `{"value": …, "vjp": …}`, shaped like the parameter.
    Vjp {
        #[command(flatten)]
        args: DerivArgs,
        /// The cotangent w of the result, as JSON shaped like the result.
        #[arg(long)]
        cotangent: String,
    },
    /// Optimise an entry with the rewrite rules (e-graph, seed 001 §5) and
    /// print the optimised program.
    Opt {
        file: PathBuf,
        #[arg(long, default_value = "main")]
        entry: String,
        /// A directory of `*.rules` files adding to (or replacing, by family
        /// name) the default rule set.
        #[arg(long)]
        rules: Option<PathBuf>,
        /// Print the chain of rule applications, with their identities.
        #[arg(long)]
        explain: bool,
        /// Print e-graph sizes, iterations, time and rule applications per
        /// phase to stderr.
        #[arg(long)]
        stats: bool,
        /// Replay egg's explanation of every phase and verify that each
        /// step is an instance of a loaded rule whose side conditions hold;
        /// prints a summary to stderr, exits 1 on a step that is not.
        #[arg(long)]
        check: bool,
    },
    /// Differential testing of the AD modes on random programs
    /// `fun (p: Double) -> e`: fwd = rev = tape = finite differences (where
    /// the stencil is smooth). Prints a JSON summary; a failure is shrunk,
    /// printed, saved as a regression case under --save, and exits 1.
    Difftest {
        #[arg(long, default_value_t = 1000)]
        cases: u64,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Maximum nesting depth of generated expressions.
        #[arg(long, default_value_t = 4)]
        max_size: u32,
        /// Where a failing program is saved (`cargo test` replays it).
        #[arg(long, default_value = "tests/difftest")]
        save: PathBuf,
        /// Evaluator fuel per run.
        #[arg(long, default_value_t = 200_000)]
        fuel: u64,
        /// Which property of the differential tests to check.
        #[arg(long, value_enum, default_value_t = PropertyArg::Ad)]
        property: PropertyArg,
    },
    /// The rewrite-rule set: listing and per-rule soundness checking.
    #[command(subcommand)]
    Rules(RulesCmd),
    /// ADBench workloads: objective and gradient from ADBench's input files.
    #[command(subcommand)]
    Adbench(AdbenchCmd),
    /// Compile an entry (or the derivative program of a mode) ahead of time
    /// into a C-ABI object file for this host, with a C header:
    /// `gcc main.c out.o -lm` links it.
    Compile(CompileArgs),
    /// Print the differentiated program: the entry's derivative with
    /// respect to a parameter, after source-to-source AD.
    Ad {
        file: PathBuf,
        #[arg(long, default_value = "main")]
        entry: String,
        /// The independent variable (a parameter of the entry).
        #[arg(long)]
        wrt: String,
        /// `fwd` prints D[[·]] of the entry; `rev` its reverse-mode program.
        #[arg(long, value_enum, default_value_t = Mode::Fwd)]
        mode: Mode,
        /// With `--mode fwd-opt`: a directory of `*.rules` files adding to
        /// (or replacing, by family name) the default rule set.
        #[arg(long)]
        rules: Option<PathBuf>,
        /// With `--mode rev`: which loops recompute their iterations instead
        /// of taping them.
        #[arg(long, value_enum, default_value_t)]
        checkpoint: CheckpointArg,
    },
}

#[derive(Subcommand, Debug)]
enum RulesCmd {
    /// Check every rule against the reference evaluator: random well-typed
    /// instances of its metavariables that satisfy its side conditions,
    /// left and right side evaluated, refinement checked (exact unless the
    /// rule is tagged `ieee-inexact`). Prints a table per rule; a failure
    /// prints a shrunk counterexample and exits 1.
    Check {
        /// A directory of `*.rules` files adding to (or replacing, by
        /// family name) the default rule set.
        #[arg(long)]
        rules: Option<PathBuf>,
        /// Instances tried per rule.
        #[arg(long, default_value_t = 300)]
        cases: u64,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Only these rules (repeatable).
        #[arg(long = "rule")]
        only: Vec<String>,
        /// Only the rules of these families (repeatable).
        #[arg(long = "family")]
        families: Vec<String>,
        /// Nesting depth of generated metavariable instances.
        #[arg(long, default_value_t = 3)]
        depth: u32,
        /// Evaluator fuel per side.
        #[arg(long, default_value_t = 200_000)]
        fuel: u64,
    },
    /// List the loaded rules: name, family, tags, identity.
    List {
        #[arg(long)]
        rules: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
enum AdbenchCmd {
    /// GMM: `{"objective": …, "gradient": [alphas, means, icf]}`.
    Gmm {
        file: PathBuf,
        /// The file holds one point line for all n points (ADBench's 2.5M files).
        #[arg(long)]
        replicate_point: bool,
        #[command(flatten)]
        run: WorkloadArgs,
    },
    /// Bundle adjustment: `{"reproj_err": […], "w_err": […], "jacobian":
    /// {"nrows", "ncols", "rows", "cols", "vals"}}`, the Jacobian in
    /// ADBench's CSR layout, one 3 × 15 Jacobian per observation.
    Ba {
        file: PathBuf,
        #[command(flatten)]
        run: WorkloadArgs,
    },
    /// LSTM: `{"objective": …, "gradient": [main_params, extra_params]}`.
    Lstm {
        file: PathBuf,
        #[command(flatten)]
        run: WorkloadArgs,
    },
    /// Hand tracking: `{"objective": [3N residuals], "jacobian_shape":
    /// {"nrows", "ncols"}, "jacobian_colmajor": […], "jacobian_rows":
    /// […]}`, the dense 3N × 26 Jacobian (3N × 28 with `--complicated`:
    /// the two packed u columns first).
    Hand {
        file: PathBuf,
        /// The model directory (`bones.txt`, `vertices.txt`, `triangles.txt`).
        #[arg(long)]
        model: PathBuf,
        /// The file is a complicated-mode instance (triangle
        /// correspondences and barycentric weights); the file does not say.
        #[arg(long)]
        complicated: bool,
        #[command(flatten)]
        run: WorkloadArgs,
    },
}

/// The options every `adbench` workload takes.
#[derive(Args, Debug)]
struct WorkloadArgs {
    #[arg(long, value_enum, default_value_t = Mode::Fwd)]
    mode: Mode,
    /// Print `{"steps": …, "ops": …, "time_ms": …}` of the derivative to stderr.
    #[arg(long)]
    stats: bool,
    #[arg(long, default_value_t = Limits::default().fuel)]
    fuel: u64,
    /// What runs the objective and the derivative program (`native`:
    /// modes fwd, fwd-opt, fwd-vec, rev).
    #[arg(long, value_enum, default_value_t)]
    engine: EngineKind,
    /// Time N runs of the objective and of the derivative (after one
    /// warm-up run, which compiles native code) and add
    /// `"timings": {…}` with the minimum times and their ratio J/F.
    #[arg(long)]
    repeat: Option<u32>,
    /// Reverse mode (`--mode rev`): which loops recompute their iterations
    /// instead of taping them.
    #[arg(long, value_enum, default_value_t)]
    checkpoint: CheckpointArg,
}

/// A property of the differential tests (issue 6).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum PropertyArg {
    /// fwd = rev = tape = finite differences.
    Ad,
    /// optimised forward mode = forward mode.
    FwdOpt,
    /// eval(opt p) refines eval(p).
    Opt,
    /// the dot-product test <J u, w> = <u, J^T w> on Vector -> Vector (and fwd-vec, fwd-rows = fwd bit for bit).
    Dot,
    /// native code = the evaluator: the value and the fwd, fwd-opt and rev
    /// gradients (equal, or ⊥ with the same error code).
    Native,
}

/// How reverse mode trades time for memory (spec/ad-reverse.md §4.4).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
enum CheckpointArg {
    /// The entry's own maps and sums whose bodies hold loops keep no tape:
    /// the reverse sweep computes each iteration again (R-Checkpoint).
    #[default]
    Loops,
    /// Every loop keeps its tape: no recomputation, memory that grows with
    /// the iterations.
    Off,
}

impl From<CheckpointArg> for crate::ad::Checkpointing {
    fn from(c: CheckpointArg) -> Self {
        match c {
            CheckpointArg::Loops => crate::ad::Checkpointing::Loops,
            CheckpointArg::Off => crate::ad::Checkpointing::Off,
        }
    }
}

/// What runs the program.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
enum EngineKind {
    /// The reference evaluator (the semantics; has fuel, --trace, --stats).
    #[default]
    Eval,
    /// Native code through Cranelift (JIT): same results and ⊥ codes.
    Native,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Forward mode: D[[·]] of seed 001, one pass per input element.
    Fwd,
    /// Central finite differences on the reference evaluator.
    Fd,
    /// Reverse mode by taping: an interpreter that records every scalar
    /// operation, then one backward sweep per output.
    Tape,
    /// Source-to-source reverse mode: the program's adjoint, run by the
    /// reference evaluator, one run per output.
    Rev,
    /// Forward mode after the optimiser (dF̃).
    FwdOpt,
    /// Vector forward mode: one pass of D[[·]] carrying a tangent per
    /// element of a Vector variable (spec/ad-forward.md §4.6); the same
    /// results as fwd.
    FwdVec,
    /// Vector forward mode returning the Jacobian's rows (D-Vec-Rows,
    /// spec/ad-forward.md §4.6): every Double of the result carries its
    /// gradient; no transposition. A Vector variable only.
    FwdRows,
}

#[derive(Args, Debug)]
struct DerivArgs {
    file: PathBuf,
    #[arg(long, default_value = "main")]
    entry: String,
    /// The independent variable: a parameter of type Double, Vector or Matrix.
    #[arg(long)]
    wrt: String,
    #[arg(long, value_enum, default_value_t = Mode::Fwd)]
    mode: Mode,
    /// Arguments as JSON: an object keyed by parameter name, or an array.
    #[arg(long, conflicts_with = "input_file")]
    input: Option<String>,
    /// Read the JSON arguments from a file.
    #[arg(long)]
    input_file: Option<PathBuf>,
    /// Print `{"steps": …, "ops": …}` to stderr as one JSON line.
    #[arg(long)]
    stats: bool,
    /// Maximum number of evaluator steps (per run).
    #[arg(long, default_value_t = Limits::default().fuel)]
    fuel: u64,
    /// What runs the derivative programs (`native`: modes fwd, fwd-opt, fwd-vec, rev).
    #[arg(long, value_enum, default_value_t)]
    engine: EngineKind,
    /// With `--mode fwd-opt`: a directory of `*.rules` files adding to (or
    /// replacing, by family name) the default rule set.
    #[arg(long)]
    rules: Option<PathBuf>,
    /// Reverse mode (`--mode rev`): which loops recompute their iterations
    /// instead of taping them.
    #[arg(long, value_enum, default_value_t)]
    checkpoint: CheckpointArg,
}

impl DerivArgs {
    /// The reverse-mode program of the entry with respect to `--wrt`, with
    /// the `--checkpoint` policy.
    fn reverse(&self, src: &str) -> Result<pipeline::ReverseDerivative, Diagnostic> {
        pipeline::reverse_derivative_with(src, &self.entry, &self.wrt, self.checkpoint.into())
    }
}

/// The program `compile` compiles.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
enum CompileMode {
    /// The entry itself.
    #[default]
    Objective,
    /// The forward-mode wrapper: one dual result per element of --wrt.
    Fwd,
    /// The optimised tangent-only forward wrapper.
    FwdOpt,
    /// The forward-mode wrapper in vector mode (one pass carrying a
    /// tangent per element of a Vector --wrt): the same result as fwd.
    FwdVec,
    /// The Jacobian's rows in vector forward mode (D-Vec-Rows): the
    /// entry's result with every Double replaced by its gradient with
    /// respect to a Vector --wrt (for a Vector result, row i is ∂outᵢ/∂wrt),
    /// with no transposition and no values.
    FwdRows,
    /// The reverse-mode program: the value and the gradient (with the
    /// result's cotangent as a last parameter unless the result is a Double).
    Rev,
}

#[derive(Args, Debug)]
struct CompileArgs {
    file: PathBuf,
    #[arg(long, default_value = "main")]
    entry: String,
    /// The object file to write.
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    /// The C header to write.
    #[arg(long)]
    header: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t)]
    mode: CompileMode,
    /// The independent variable (modes fwd, fwd-opt, fwd-vec, fwd-rows, rev).
    #[arg(long)]
    wrt: Option<String>,
    /// The C symbol of the typed entry (default: the entry's name with
    /// every character outside [A-Za-z0-9_] made `_`, plus `_fwd`,
    /// `_fwd_opt`, `_fwd_vec`, `_fwd_rows` or `_rev`). The slot-level entry is `SYMBOL_slots`.
    #[arg(long)]
    symbol: Option<String>,
    /// Also write the slot-level entry's Cranelift IR, as lowered from the
    /// normal form (after fusion and hoisting, before Cranelift's passes),
    /// and its machine code, to this file.
    #[arg(long)]
    listing: Option<PathBuf>,
    /// Reverse mode (`--mode rev`): which loops recompute their iterations
    /// instead of taping them.
    #[arg(long, value_enum, default_value_t)]
    checkpoint: CheckpointArg,
}

#[derive(Args, Debug)]
struct RunArgs {
    file: PathBuf,
    /// The definition to run.
    #[arg(long, default_value = "main")]
    entry: String,
    /// Arguments as JSON: an object keyed by parameter name, or an array.
    #[arg(long, conflicts_with = "input_file")]
    input: Option<String>,
    /// Read the JSON arguments from a file.
    #[arg(long)]
    input_file: Option<PathBuf>,
    /// Print `{"steps": …, "ops": …}` to stderr as one JSON line.
    #[arg(long)]
    stats: bool,
    /// Print every reduction step (rule name and focus) to stderr.
    #[arg(long)]
    trace: bool,
    /// Maximum number of evaluator steps.
    #[arg(long, default_value_t = Limits::default().fuel)]
    fuel: u64,
    /// What runs the program. `native` compiles it with Cranelift first
    /// (--stats then reports compile and run times).
    #[arg(long, value_enum, default_value_t, conflicts_with = "trace")]
    engine: EngineKind,
}

/// Source texts for rendering spans.
struct Files {
    main_path: String,
    main_src: String,
}

impl Files {
    /// Reads the program at `path`.
    fn read(path: &std::path::Path) -> Result<Files, Failure> {
        Ok(Files {
            main_path: path.display().to_string(),
            main_src: read(path)?,
        })
    }

    fn get(&self, id: SourceId) -> Option<(&str, &str)> {
        match id {
            SourceId::PRELUDE => Some(("<prelude>", PRELUDE)),
            SourceId::MAIN => Some((&self.main_path, &self.main_src)),
            _ => None,
        }
    }
}

/// Renders a diagnostic about the program in `path` (text `src`) as the CLI
/// prints it: `path:line:col: error[code]: message`, an excerpt, notes.
pub fn render_diagnostic(d: &Diagnostic, path: &str, src: &str) -> String {
    render(
        d,
        &Files {
            main_path: path.to_string(),
            main_src: src.to_string(),
        },
    )
}

fn render(d: &Diagnostic, files: &Files) -> String {
    let mut out = String::new();
    match files.get(d.span.source) {
        Some((path, src)) => {
            let (line, col) = line_col(src, d.span.start as usize);
            out.push_str(&format!(
                "{path}:{line}:{col}: error[{}]: {}\n",
                d.code, d.message
            ));
            if !d.span.is_whole_file() {
                out.push_str(&excerpt(src, d.span, line, col));
            }
        }
        None => out.push_str(&format!("error[{}]: {}\n", d.code, d.message)),
    }
    for n in &d.notes {
        out.push_str(&format!("  = note: {n}\n"));
    }
    out
}

fn char_floor(src: &str, mut i: usize) -> usize {
    i = i.min(src.len());
    while !src.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let offset = char_floor(src, offset);
    let before = &src[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let col = src[line_start..offset].chars().count() + 1;
    (line, col)
}

/// The source line with a caret line under the span (its first line
/// only). Long lines are cut to a window around the span; tabs in the
/// padding are kept so the carets line up.
fn excerpt(src: &str, span: Span, line: usize, col: usize) -> String {
    const WIDTH: usize = 120;
    let text: Vec<char> = src.lines().nth(line - 1).unwrap_or("").chars().collect();
    let start = char_floor(src, span.start as usize);
    let end = char_floor(src, (span.end as usize).max(span.start as usize));
    let first_line_end = src[start..end].find('\n').map(|i| start + i).unwrap_or(end);
    let len = src[start..first_line_end].chars().count().max(1);
    let c0 = col - 1;
    let from = if c0 > WIDTH / 2 { c0 - WIDTH / 3 } else { 0 };
    let to = text.len().min(from + WIDTH);
    let mut shown: String = if from > 0 {
        "…".to_string()
    } else {
        String::new()
    };
    shown.extend(&text[from.min(text.len())..to]);
    if to < text.len() {
        shown.push('…');
    }
    let mut pad: String = if from > 0 {
        " ".to_string()
    } else {
        String::new()
    };
    pad.extend(
        text[from.min(text.len())..c0.min(text.len())]
            .iter()
            .map(|c| if *c == '\t' { '\t' } else { ' ' }),
    );
    let carets = "^".repeat(len.min(WIDTH.saturating_sub(c0 - from)).max(1));
    let gutter = " ".repeat(line.to_string().len());
    format!("{gutter} |\n{line} | {shown}\n{gutter} | {pad}{carets}\n")
}

struct Failure(String);

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
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(msg)) => {
            let _ = std::io::stderr().write_all(msg.as_bytes());
            ExitCode::from(1)
        }
    }
}

fn write(path: &std::path::Path, bytes: &[u8]) -> Result<(), Failure> {
    std::fs::write(path, bytes)
        .map_err(|e| Failure(format!("error[io]: cannot write {}: {e}\n", path.display())))
}

fn read(path: &std::path::Path) -> Result<String, Failure> {
    let bytes = std::fs::read(path)
        .map_err(|e| Failure(format!("error[io]: cannot read {}: {e}\n", path.display())))?;
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
            Err(Failure(render_diagnostic(
                &d,
                &path.display().to_string(),
                &lossy,
            )))
        }
    }
}

fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Check { file, prelude } => {
            let files = Files::read(&file)?;
            let loaded =
                pipeline::load(&files.main_src).map_err(|d| Failure(render(&d, &files)))?;
            let mut out = String::new();
            for (i, d) in loaded.program.defs.iter().enumerate() {
                if prelude || !d.prelude {
                    out.push_str(&format!(
                        "{} : {}\n",
                        d.name,
                        loaded.typing.scheme_string(i)
                    ));
                }
            }
            print!("{out}");
            Ok(())
        }
        Command::Print { file } => {
            let files = Files::read(&file)?;
            let prog = pipeline::parse(&files.main_src).map_err(|d| Failure(render(&d, &files)))?;
            print!("{}", crate::syntax::print_program(&prog));
            Ok(())
        }
        Command::Run(args) => run_cmd(args),
        Command::Compile(args) => compile_cmd(args),
        Command::Grad(args) => deriv_cmd(args, false),
        Command::Opt {
            file,
            entry,
            rules,
            explain,
            stats,
            check,
        } => opt_cmd(&file, &entry, rules, explain, stats, check),
        Command::Vjp { args, cotangent } => vjp_cmd(args, &cotangent),
        Command::Difftest {
            cases,
            seed,
            max_size,
            save,
            fuel,
            property,
        } => difftest_cmd(
            crate::difftest::Campaign {
                cases,
                seed,
                max_size,
                limits: Limits { fuel },
                property: match property {
                    PropertyArg::Ad => crate::difftest::Property::Ad,
                    PropertyArg::FwdOpt => crate::difftest::Property::FwdOpt,
                    PropertyArg::Opt => crate::difftest::Property::Opt,
                    PropertyArg::Dot => crate::difftest::Property::Dot,
                    PropertyArg::Native => crate::difftest::Property::Native,
                },
            },
            &save,
        ),
        Command::Rules(RulesCmd::Check {
            rules,
            cases,
            seed,
            only,
            families,
            depth,
            fuel,
        }) => rules_check_cmd(
            rules.as_deref(),
            &only,
            &families,
            crate::rulecheck::Options {
                cases,
                seed,
                depth,
                fuel,
            },
        ),
        Command::Rules(RulesCmd::List { rules }) => {
            for r in load_rules(rules.as_deref())? {
                println!(
                    "{:<22} {:<9} [{}]  {}",
                    r.name,
                    r.family,
                    r.tags.join(", "),
                    r.doc
                );
            }
            Ok(())
        }
        Command::Adbench(cmd) => adbench_cmd(cmd),
        Command::Jacobian(args) => deriv_cmd(args, true),
        Command::Ad {
            file,
            entry,
            wrt,
            mode,
            rules,
            checkpoint,
        } => {
            let files = Files::read(&file)?;
            let fail = |d: Diagnostic| Failure(render(&d, &files));
            let prog = match mode {
                Mode::Rev => {
                    pipeline::reverse_derivative_with(
                        &files.main_src,
                        &entry,
                        &wrt,
                        checkpoint.into(),
                    )
                    .map_err(fail)?
                    .rev
                    .program
                }
                Mode::Fwd | Mode::FwdVec => {
                    pipeline::derivative_with(&files.main_src, &entry, &wrt, forward_mode(mode))
                        .map_err(fail)?
                        .wrapper
                        .program
                }
                Mode::FwdRows => {
                    pipeline::rows_derivative(&files.main_src, &entry, &wrt)
                        .map_err(fail)?
                        .rows
                        .program
                }
                Mode::FwdOpt => {
                    pipeline::optimised_derivative(
                        &files.main_src,
                        &entry,
                        &wrt,
                        &opt_options_with(rules),
                    )
                    .map_err(fail)?
                    .wrapper
                    .program
                }
                Mode::Fd | Mode::Tape => {
                    return Err(Failure(
                        "error[usage]: `ad` prints source-to-source programs: --mode fwd, fwd-opt, fwd-vec, fwd-rows or rev\n"
                            .to_string(),
                    ));
                }
            };
            print!("{}", crate::syntax::print_program(&prog));
            Ok(())
        }
    }
}

fn stats_json(s: Stats, elapsed: std::time::Duration) -> String {
    format!(
        "{{\"steps\": {}, \"ops\": {}, \"time_ms\": {:.3}}}",
        s.steps,
        s.ops,
        elapsed.as_secs_f64() * 1e3
    )
}

fn adbench_cmd(cmd: AdbenchCmd) -> Result<(), Failure> {
    use crate::adbench::{ba, gmm, hand, lstm};
    match cmd {
        AdbenchCmd::Gmm {
            file,
            replicate_point,
            run,
        } => {
            let input = read_data(&file, |t| {
                if replicate_point {
                    gmm::read_gmm_replicated(t)
                } else {
                    gmm::read_gmm(t)
                }
            })?;
            let source = ("examples/adbench/gmm.fsm", gmm::GMM_SOURCE);
            scalar_workload(source, "gmmObjectiveFlat", input.flat_args(), &run)
        }
        AdbenchCmd::Lstm { file, run } => {
            let input = read_data(&file, lstm::read_lstm)?;
            let source = ("examples/adbench/lstm.fsm", lstm::LSTM_SOURCE);
            scalar_workload(source, "lstmObjectiveFlat", input.flat_args(), &run)
        }
        AdbenchCmd::Ba { file, run } => ba_cmd(&read_data(&file, ba::read_ba)?, &run),
        AdbenchCmd::Hand {
            file,
            model,
            complicated,
            run,
        } => {
            let bones = read_data(&model.join("bones.txt"), hand::read_bones)?;
            let vertices = read_data(&model.join("vertices.txt"), |t| {
                hand::read_vertices(t, bones.names.len())
            })?;
            let triangles = read_data(&model.join("triangles.txt"), |t| {
                hand::read_triangles(t, vertices.positions.len())
            })?;
            let model = hand::HandModel {
                bones,
                vertices,
                triangles,
            };
            let input = read_data(&file, |t| hand::read_hand_instance(t, complicated, &model))?;
            hand_cmd(&input, &model, &run)
        }
    }
}

/// Reads an ADBench data file with `reader`, rendering its errors against
/// the file.
fn read_data<T>(
    file: &std::path::Path,
    reader: impl FnOnce(&str) -> Result<T, crate::adbench::read::AdbenchError>,
) -> Result<T, Failure> {
    let text = read(file)?;
    reader(&text).map_err(|e| {
        // The span points into the data file, which is rendered as the
        // main file here.
        let mut d = Diagnostic::from(&e);
        d.span.source = SourceId::MAIN;
        Failure(render_diagnostic(&d, &file.display().to_string(), &text))
    })
}

/// The engine of a workload, after checking that it can run the mode.
fn workload_engine(run: &WorkloadArgs) -> Result<crate::gradient::Engine, Failure> {
    use crate::gradient::Engine;
    match run.engine {
        EngineKind::Eval => Ok(Engine::Eval(Limits { fuel: run.fuel })),
        EngineKind::Native if adbench_mode(run.mode).runs_natively() => Ok(Engine::native()),
        EngineKind::Native => Err(Failure(
            "error[usage]: --engine native runs the derivative programs of modes fwd, fwd-opt, fwd-vec, fwd-rows and rev\n"
                .to_string(),
        )),
    }
}

/// How a mode expands `deriv` with respect to a Vector.
fn forward_mode(mode: Mode) -> ForwardMode {
    if matches!(mode, Mode::FwdVec | Mode::FwdRows) {
        ForwardMode::Vector
    } else {
        ForwardMode::Scalar
    }
}

fn adbench_mode(mode: Mode) -> crate::adbench::modes::Mode {
    use crate::adbench::modes::Mode as M;
    match mode {
        Mode::Fwd => M::Fwd,
        Mode::FwdOpt => M::FwdOpt,
        Mode::FwdVec => M::FwdVec,
        Mode::FwdRows => M::FwdRows,
        Mode::Rev => M::Rev,
        Mode::Tape => M::Tape,
        Mode::Fd => M::Fd,
    }
}

/// The minimum time of `n` runs of `f`, in milliseconds.
fn min_ms(n: u32, f: &mut dyn FnMut() -> Result<(), Failure>) -> Result<f64, Failure> {
    let mut best = f64::INFINITY;
    for _ in 0..n.max(1) {
        let t = Instant::now();
        f()?;
        best = best.min(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(best)
}

/// The derivative's columns, the time they took, and with `--repeat N`
/// the `"timings"` member (objective and derivative, minimum of N runs
/// after a warm-up run, which compiles native code).
fn timed_columns(
    diff: &crate::adbench::modes::Differentiator,
    args: &[crate::eval::Value],
    engine: &crate::gradient::Engine,
    run: &WorkloadArgs,
    j_name: &str,
    run_fail: &dyn Fn(crate::gradient::RunError) -> Failure,
) -> Result<(crate::gradient::Columns, std::time::Duration, String), Failure> {
    let start = Instant::now();
    let cols = diff.columns(args.to_vec(), engine).map_err(run_fail)?;
    let elapsed = start.elapsed();
    let mut timings = String::new();
    if let Some(n) = run.repeat {
        engine.run(diff.base(), args.to_vec()).map_err(run_fail)?; // warm-up
        let f_ms = min_ms(n, &mut || {
            engine.run(diff.base(), args.to_vec()).map_err(run_fail)?;
            Ok(())
        })?;
        let j_ms = min_ms(n, &mut || {
            diff.columns(args.to_vec(), engine).map_err(run_fail)?;
            Ok(())
        })?;
        timings = timings_json(run, n, f_ms, j_ms, j_name);
    }
    Ok((cols, elapsed, timings))
}

/// `, "timings": {…}` for objective and derivative times `f_ms`, `j_ms`.
fn timings_json(run: &WorkloadArgs, n: u32, f_ms: f64, j_ms: f64, j_name: &str) -> String {
    format!(
        ", \"timings\": {{\"engine\": \"{}\", \"repeat\": {}, \"objective_ms\": {f_ms:.4}, \"{j_name}_ms\": {j_ms:.4}, \"ratio\": {:.3}}}",
        if run.engine == EngineKind::Native {
            "native"
        } else {
            "eval"
        },
        n.max(1),
        j_ms / f_ms
    )
}

/// A workload with a Double objective of a flat parameter vector `theta`
/// (GMM, LSTM): prints `{"objective", "gradient"[, "timings"]}`.
fn scalar_workload(
    (label, src): (&str, &str),
    entry: &str,
    args: Vec<crate::eval::Value>,
    run: &WorkloadArgs,
) -> Result<(), Failure> {
    use crate::adbench::modes::Differentiator;
    use crate::gradient::RunError;
    let fail = |d: Diagnostic| Failure(render_diagnostic(&d, label, src));
    let run_fail = |e: RunError| fail(Diagnostic::from(&e));
    let engine = workload_engine(run)?;
    let diff = Differentiator::new(
        src,
        entry,
        "theta",
        adbench_mode(run.mode),
        &opt_options(),
        run.checkpoint.into(),
    )
    .map_err(fail)?;
    let (cols, elapsed, timings) =
        timed_columns(&diff, &args, &engine, run, "gradient", &run_fail)?;
    println!(
        "{{\"objective\": {}, \"gradient\": {}{timings}}}",
        cols.value,
        cols.gradient(&args[0])
    );
    if run.stats {
        eprintln!("{}", stats_json(cols.stats, elapsed));
    }
    Ok(())
}

/// Bundle adjustment: the residuals from one run of `baObjective`, the
/// Jacobian from one small Jacobian of `baObservation` per observation
/// (each derivative program compiled once).
fn ba_cmd(input: &crate::adbench::ba::BaInput, run: &WorkloadArgs) -> Result<(), Failure> {
    use crate::adbench::ba;
    use crate::adbench::modes::Differentiator;
    use crate::eval::Value;
    use crate::gradient::RunError;
    let (label, src) = ("examples/adbench/ba.fsm", ba::BA_SOURCE);
    let fail = |d: Diagnostic| Failure(render_diagnostic(&d, label, src));
    let run_fail = |e: RunError| fail(Diagnostic::from(&e));
    let engine = workload_engine(run)?;
    let loaded = pipeline::load(src).map_err(fail)?;
    let objective = pipeline::entry(&loaded, "baObjective").map_err(fail)?;
    let diff = Differentiator::new(
        src,
        "baObservation",
        "params",
        adbench_mode(run.mode),
        &opt_options(),
        run.checkpoint.into(),
    )
    .map_err(fail)?;
    let args = input.objective_args();
    // Native forward modes with a tangent-only program run every
    // observation in one call (`pipeline::batched`), not one call each.
    // Mode fwd-rows batches the Jacobian's rows (an observation's 3 rows
    // of 15), the others their columns (15 columns of 3).
    let program = match (diff.tangents(), diff.rows()) {
        (Some(d), _) => Some((&d.wrapper, &d.base, false)),
        (None, Some(r)) => Some((&r.rows, &r.base, true)),
        (None, None) => None,
    };
    let batch = match (&engine, program) {
        (crate::gradient::Engine::Native(_), Some((tangents, base, by_rows))) => Some((
            pipeline::batched(tangents).map_err(fail)?,
            pipeline::batched(base).map_err(fail)?,
            input.observations_args(),
            by_rows,
        )),
        _ => None,
    };
    let residuals = || -> Result<(Value, Value), Failure> {
        match engine.run(&objective, args.clone()).map_err(run_fail)?.0 {
            Value::Pair(p) => Ok((p.0.clone(), p.1.clone())),
            other => Err(fail(Diagnostic::from(&RunError::Eval(
                crate::eval::EvalError::Internal {
                    message: format!("baObjective returned {other}"),
                    span: objective.span,
                },
            )))),
        }
    };
    let jacobian = || {
        let mut stats = Stats::default();
        if let Some((wrapper, base, obs, by_rows)) = &batch
            && let Some(tangents) = engine.run_flat(wrapper, obs)
            && let Some(values) = engine.run_flat(base, obs)
        {
            // Per observation: 3 values, and 15 columns of 3 tangents (or
            // 3 rows of 15).
            let (tangents, values) = (tangents.map_err(run_fail)?, values.map_err(run_fail)?);
            let (v, t) = (3, 3 * ba::ROW_ENTRIES);
            let r = ba::assemble(input, |i, value, tangent| {
                value.extend(values.get(v * i..v * (i + 1)).unwrap_or_default());
                let mine = tangents.get(t * i..t * (i + 1)).unwrap_or_default();
                if !by_rows {
                    tangent.extend(mine);
                } else if mine.len() == t {
                    let column = |j| (0..3).map(move |k| mine[ba::ROW_ENTRIES * k + j]);
                    tangent.extend((0..ba::ROW_ENTRIES).flat_map(column));
                }
                Ok::<_, Failure>(())
            })?;
            return Ok::<_, Failure>((r, stats));
        }
        let r = ba::assemble(input, |i, value, tangents| {
            let c = diff
                .columns(input.observation_args(i), &engine)
                .map_err(run_fail)?;
            stats.steps += c.stats.steps;
            stats.ops += c.stats.ops;
            crate::gradient::flatten(&c.value, value);
            for col in &c.columns {
                tangents.extend((0..3).map(|k| col.get(k).copied().unwrap_or(f64::NAN)));
            }
            Ok::<_, Failure>(())
        })?;
        Ok::<_, Failure>((r, stats))
    };
    let start = Instant::now();
    let (result, stats) = jacobian()?;
    let elapsed = start.elapsed();
    let (reproj_err, w_err) = residuals()?;
    let mut timings = String::new();
    if let Some(n) = run.repeat {
        let f_ms = min_ms(n, &mut || residuals().map(|_| ()))?;
        let j_ms = min_ms(n, &mut || jacobian().map(|_| ()))?;
        timings = timings_json(run, n, f_ms, j_ms, "jacobian");
    }
    let list = |xs: &[usize]| {
        xs.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let j = &result.jacobian;
    let vals = Value::array(j.vals.iter().map(|&v| Value::Double(v)).collect());
    println!(
        "{{\"reproj_err\": {reproj_err}, \"w_err\": {w_err}, \"jacobian\": {{\"nrows\": {}, \"ncols\": {}, \"rows\": [{}], \"cols\": [{}], \"vals\": {vals}}}{timings}}}",
        j.nrows,
        j.ncols,
        list(&j.rows),
        list(&j.cols),
    );
    if run.stats {
        eprintln!("{}", stats_json(stats, elapsed));
    }
    Ok(())
}

/// Hand tracking: the residuals and the dense Jacobian of the instance's
/// entry (26 theta columns, or 2 packed u columns and 26 theta columns).
fn hand_cmd(
    input: &crate::adbench::hand::HandInput,
    model: &crate::adbench::hand::HandModel,
    run: &WorkloadArgs,
) -> Result<(), Failure> {
    use crate::adbench::hand::{HAND_SOURCE, HandResult};
    use crate::adbench::modes::Differentiator;
    use crate::eval::Value;
    use crate::gradient::RunError;
    let label = "examples/adbench/hand.fsm";
    let fail = |d: Diagnostic| Failure(render_diagnostic(&d, label, HAND_SOURCE));
    let run_fail = |e: RunError| fail(Diagnostic::from(&e));
    let engine = workload_engine(run)?;
    let diff = Differentiator::new(
        HAND_SOURCE,
        input.entry(),
        input.wrt(),
        adbench_mode(run.mode),
        &opt_options(),
        run.checkpoint.into(),
    )
    .map_err(fail)?;
    let args = input.args(model);
    let (cols, elapsed, timings) =
        timed_columns(&diff, &args, &engine, run, "jacobian", &run_fail)?;
    let r = HandResult::from_columns(&cols);
    let doubles = |xs: &[f64]| Value::array(xs.iter().map(|&v| Value::Double(v)).collect());
    let rows = (0..r.nrows)
        .map(|i| doubles(&r.row(i)).to_string())
        .collect::<Vec<_>>()
        .join(", ");
    println!(
        "{{\"objective\": {}, \"jacobian_shape\": {{\"nrows\": {}, \"ncols\": {}}}, \"jacobian_colmajor\": {}, \"jacobian_rows\": [{rows}]{timings}}}",
        doubles(&r.objective),
        r.nrows,
        r.ncols,
        doubles(&r.colmajor),
    );
    if run.stats {
        eprintln!("{}", stats_json(cols.stats, elapsed));
    }
    Ok(())
}

/// Optimiser options for the commands that optimise implicitly
/// (`--mode fwd-opt`): `FSMOOTH_OPT_CHECK=1` turns on `opt --check` for
/// every optimisation (the test suite sets it).
fn opt_options() -> pipeline::OptOptions {
    pipeline::OptOptions {
        check: std::env::var_os("FSMOOTH_OPT_CHECK").is_some_and(|v| v == "1"),
        ..Default::default()
    }
}

/// [`opt_options`] with a `--rules` directory.
fn opt_options_with(rules: Option<PathBuf>) -> pipeline::OptOptions {
    pipeline::OptOptions {
        rules_dir: rules,
        ..opt_options()
    }
}

fn opt_cmd(
    file: &std::path::Path,
    entry: &str,
    rules: Option<PathBuf>,
    explain: bool,
    stats: bool,
    check: bool,
) -> Result<(), Failure> {
    let files = Files::read(file)?;
    let fail = |d: Diagnostic| {
        if d.span == Span::generated() && d.message.contains(": error[") {
            // A rule-file error renders itself.
            Failure(d.message.clone())
        } else {
            Failure(render(&d, &files))
        }
    };
    let loaded = pipeline::load(&files.main_src).map_err(fail)?;
    let e = pipeline::entry(&loaded, entry).map_err(fail)?;
    let opts = pipeline::OptOptions {
        rules_dir: rules,
        explain,
        check: check || opt_options().check,
        ..Default::default()
    };
    let o = pipeline::optimise_entry(&e, &opts).map_err(fail)?;
    // The summary is printed for an explicit --check (FSMOOTH_OPT_CHECK
    // only turns the verification on).
    if let Some(c) = o.report.check.as_ref().filter(|_| check) {
        eprintln!(
            "// check: {} rewrite step(s) verified against the rules, {} constant fold(s) re-evaluated, {} fold(s) of open terms trusted",
            c.verified, c.folds, c.trusted_folds
        );
        for why in &c.skipped {
            eprintln!("// note: not verified: {why}");
        }
        if !c.inexact_folds.is_empty() {
            eprintln!(
                "// note: {} constant fold(s) hold over the reals only (a literal equal to the term's value but for the sign of zero; its class was merged by an `ieee-inexact` rule)",
                c.inexact_folds.len()
            );
        }
        if !c.class_conditions.is_empty() {
            eprintln!(
                "// note: {} verified step(s) have side conditions that hold only as judged on e-classes, not on the explained terms",
                c.class_conditions.len()
            );
        }
        if !c.backward_refines.is_empty() {
            eprintln!(
                "// note: {} verified step(s) use a `refines` rule right to left, so egg's chain does not by itself show that the output refines the input (spec/rules-format.md §7.3):",
                c.backward_refines.len()
            );
            for b in &c.backward_refines {
                eprintln!("//   {b}");
            }
        }
    }
    print!("{}", crate::syntax::print_program(&o.entry.program));
    if explain {
        for (phase, steps) in &o.report.explanation {
            println!("// phase {phase}:");
            for line in steps {
                let rule = line.split("Rewrite").nth(1).and_then(|r| {
                    r.trim_start_matches(['=', '<', '>'])
                        .split([' ', ')'])
                        .find(|w| !w.is_empty())
                });
                match rule.and_then(|r| o.rules.iter().find(|d| d.name == r)) {
                    Some(d) => println!("//   {}   -- {}", d.name, d.doc),
                    None => {
                        if let Some(r) = rule {
                            println!("//   {r}");
                        }
                    }
                }
            }
        }
    }
    if stats {
        for p in &o.report.phases {
            let applied: Vec<String> = p
                .applied
                .iter()
                .map(|(k, v)| format!("\"{k}\": {v}"))
                .collect();
            eprintln!(
                "{{\"phase\": \"{}\", \"iterations\": {}, \"nodes\": {}, \"classes\": {}, \"time_ms\": {:.1}, \"search_ms\": {:.1}, \"apply_ms\": {:.1}, \"rebuild_ms\": {:.1}, \"extract_ms\": {:.1}, \"stop\": \"{}\", \"cost_before\": {:.1}, \"cost_after\": {:.1}, \"applied\": {{{}}}}}",
                p.phase,
                p.iterations,
                p.nodes,
                p.classes,
                p.time.as_secs_f64() * 1e3,
                p.split.search.as_secs_f64() * 1e3,
                p.split.apply.as_secs_f64() * 1e3,
                p.split.rebuild.as_secs_f64() * 1e3,
                p.split.extract.as_secs_f64() * 1e3,
                p.stop,
                p.cost_before,
                p.cost_after,
                applied.join(", ")
            );
        }
    }
    Ok(())
}

/// Same structure: array lengths and tuple nesting agree.
fn same_shape(a: &crate::eval::Value, b: &crate::eval::Value) -> bool {
    use crate::eval::Value;
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| same_shape(p, q))
        }
        (Value::Pair(x), Value::Pair(y)) => same_shape(&x.0, &y.0) && same_shape(&x.1, &y.1),
        (Value::Array(_) | Value::Pair(_), _) | (_, Value::Array(_) | Value::Pair(_)) => false,
        _ => true,
    }
}

/// The `--input` text, or the contents of `--input-file`.
fn input_text(input: &Option<String>, file: &Option<PathBuf>) -> Result<Option<String>, Failure> {
    match file {
        Some(p) => Ok(Some(read(p)?)),
        None => Ok(input.clone()),
    }
}

fn vjp_cmd(args: DerivArgs, cotangent: &str) -> Result<(), Failure> {
    let files = Files::read(&args.file)?;
    let fail = |d: Diagnostic| Failure(render(&d, &files));
    let input = input_text(&args.input, &args.input_file)?;
    let r = args.reverse(&files.main_src).map_err(fail)?;
    let values = r.base.read_input(input.as_deref()).map_err(fail)?;
    let like = values[r.wrt].clone();
    let w = serde_json::from_str::<serde_json::Value>(cotangent)
        .map_err(|e| {
            fail(Diagnostic {
                code: "invalid-json",
                message: format!("--cotangent is not valid JSON: {e}"),
                span: Span::whole_file(),
                notes: Vec::new(),
            })
        })
        .and_then(|j| {
            crate::interchange::value_from_json(&j, &r.base.result, "cotangent", r.base.span)
                .map_err(|e| fail(Diagnostic::from(&e)))
        })?;
    let limits = Limits { fuel: args.fuel };
    // The cotangent must have the result's shape, not just its type.
    let (result, _) = r
        .base
        .run(values.clone(), limits, &mut |_, _| {})
        .map_err(|e| fail(Diagnostic::from(&e)))?;
    if !same_shape(&result, &w) {
        return Err(fail(Diagnostic::from(
            &crate::interchange::InputError::Shape {
                path: "cotangent".to_string(),
                expected: format!("a value shaped like the result {result}"),
                found: cotangent.to_string(),
                span: r.base.span,
            },
        )));
    }
    let start = Instant::now();
    let (value, g, stats) = match args.mode {
        Mode::Rev => {
            let mut a = values.clone();
            if r.seeded {
                a.push(w.clone());
            }
            let (res, stats) = r
                .rev
                .run(a, limits, &mut |_, _| {})
                .map_err(|e| fail(Diagnostic::from(&e)))?;
            let crate::eval::Value::Pair(p) = res else {
                return Err(fail(Diagnostic::from(&crate::eval::EvalError::Internal {
                    message: "reverse program returned no pair".into(),
                    span: r.rev.span,
                })));
            };
            let mut g = p.1.clone();
            if !r.seeded {
                // A Double result: the program used the seed 1.
                let s = w.as_f64().unwrap_or(1.0);
                let mut xs = Vec::new();
                crate::gradient::flatten(&g, &mut xs);
                g = crate::gradient::unflatten(&g, &mut xs.into_iter().map(|x| x * s));
            }
            (p.0.clone(), g, stats)
        }
        Mode::Tape => {
            let name = r.base.name_in_program();
            let t = crate::tape::vjp(&r.base.program, &name, values, r.wrt, Some(&w), limits)
                .map_err(|e| fail(Diagnostic::from(&e)))?;
            (t.value, t.gradient, t.stats)
        }
        Mode::Fwd | Mode::Fd | Mode::FwdOpt | Mode::FwdVec | Mode::FwdRows => {
            let fm = forward_mode(args.mode);
            let cols = if args.mode == Mode::FwdRows {
                let d = pipeline::rows_derivative(&files.main_src, &args.entry, &args.wrt)
                    .map_err(fail)?;
                crate::gradient::rows_on(&d, values, &crate::gradient::Engine::Eval(limits))
                    .map_err(|e| fail(Diagnostic::from(&e)))?
            } else {
                let d = pipeline::derivative_with(&files.main_src, &args.entry, &args.wrt, fm)
                    .map_err(fail)?;
                if args.mode != Mode::Fd {
                    crate::gradient::forward(&d, values, limits)
                } else {
                    crate::gradient::finite_differences(&d.base, d.wrt, values, limits)
                }
                .map_err(|e| fail(Diagnostic::from(&e)))?
            };
            let mut ws = Vec::new();
            crate::gradient::flatten(&w, &mut ws);
            let dots = cols
                .columns
                .iter()
                .map(|c| c.iter().zip(&ws).map(|(a, b)| a * b).sum::<f64>());
            let g = crate::gradient::unflatten(&like, &mut dots.collect::<Vec<_>>().into_iter());
            (cols.value, g, cols.stats)
        }
    };
    let elapsed = start.elapsed();
    println!("{{\"value\": {value}, \"vjp\": {g}}}");
    if args.stats {
        eprintln!("{}", stats_json(stats, elapsed));
    }
    Ok(())
}

fn deriv_cmd(args: DerivArgs, jacobian: bool) -> Result<(), Failure> {
    let files = Files::read(&args.file)?;
    let fail = |d: Diagnostic| Failure(render(&d, &files));
    let input = input_text(&args.input, &args.input_file)?;
    let d = pipeline::derivative_with(
        &files.main_src,
        &args.entry,
        &args.wrt,
        forward_mode(args.mode),
    )
    .map_err(fail)?;
    if !jacobian && d.base.result != crate::ir::Type::Double {
        return Err(fail(Diagnostic {
            code: "not-scalar",
            message: format!(
                "`grad` needs a Double-valued entry; `{}` returns {} (use `jacobian`)",
                args.entry, d.base.result
            ),
            span: d.base.span,
            notes: Vec::new(),
        }));
    }
    let values = d.base.read_input(input.as_deref()).map_err(fail)?;
    let like = values[d.wrt].clone();
    let limits = Limits { fuel: args.fuel };
    let engine = match args.engine {
        EngineKind::Eval => crate::gradient::Engine::Eval(limits),
        EngineKind::Native => crate::gradient::Engine::native(),
    };
    if args.engine == EngineKind::Native && matches!(args.mode, Mode::Fd | Mode::Tape) {
        return Err(Failure(format!(
            "error[usage]: --engine native runs the derivative programs of modes fwd, fwd-opt, fwd-vec, fwd-rows and rev; `{}` is an interpreter on the evaluator\n",
            if args.mode == Mode::Fd { "fd" } else { "tape" }
        )));
    }
    let start = Instant::now();
    let run_fail = |e: crate::gradient::RunError| fail(Diagnostic::from(&e));
    let cols = match args.mode {
        Mode::Fwd | Mode::FwdVec => {
            crate::gradient::forward_on(&d, values, &engine).map_err(run_fail)?
        }
        Mode::FwdRows => {
            let r =
                pipeline::rows_derivative(&files.main_src, &args.entry, &args.wrt).map_err(fail)?;
            crate::gradient::rows_on(&r, values, &engine).map_err(run_fail)?
        }
        Mode::Fd => crate::gradient::finite_differences(&d.base, d.wrt, values, limits)
            .map_err(|e| fail(Diagnostic::from(&e)))?,
        Mode::Tape => crate::gradient::tape(&d.base, d.wrt, values, limits)
            .map_err(|e| fail(Diagnostic::from(&e)))?,
        Mode::Rev => {
            let r = args.reverse(&files.main_src).map_err(fail)?;
            crate::gradient::reverse_on(&r, values, &engine).map_err(run_fail)?
        }
        Mode::FwdOpt => {
            let d = pipeline::optimised_derivative(
                &files.main_src,
                &args.entry,
                &args.wrt,
                &opt_options_with(args.rules.clone()),
            )
            .map_err(fail)?;
            crate::gradient::forward_on(&d, values, &engine).map_err(run_fail)?
        }
    };
    let elapsed = start.elapsed();
    if jacobian {
        println!(
            "{{\"value\": {}, \"jacobian\": {}}}",
            cols.value,
            cols.jacobian()
        );
    } else {
        println!(
            "{{\"value\": {}, \"gradient\": {}}}",
            cols.value,
            cols.gradient(&like)
        );
    }
    if args.stats {
        eprintln!("{}", stats_json(cols.stats, elapsed));
    }
    Ok(())
}

fn run_cmd(args: RunArgs) -> Result<(), Failure> {
    let files = Files::read(&args.file)?;
    let fail = |d: Diagnostic| Failure(render(&d, &files));
    let input = input_text(&args.input, &args.input_file)?;
    let loaded = pipeline::load(&files.main_src).map_err(fail)?;
    let entry = pipeline::entry(&loaded, &args.entry).map_err(fail)?;
    let values = entry.read_input(input.as_deref()).map_err(fail)?;
    if args.engine == EngineKind::Native {
        return run_native(&entry, values, args.stats).map_err(|e| fail(Diagnostic::from(&e)));
    }
    let limits = Limits { fuel: args.fuel };
    let start = Instant::now();
    let result = if args.trace {
        let stderr = std::io::stderr();
        let mut lock = stderr.lock();
        let prog = &entry.program;
        entry.run(values, limits, &mut |ev, _| {
            let focus = ev
                .focus
                .map(|e| one_line(&print_expr(prog, e), 100))
                .unwrap_or_default();
            let _ = writeln!(lock, "{:>8}  {:<14} {}", ev.step, ev.rule, focus);
        })
    } else {
        entry.run(values, limits, &mut |_, _| {})
    };
    let elapsed = start.elapsed();
    let stats_of = |s: Stats| stats_json(s, elapsed);
    match result {
        Ok((v, stats)) => {
            println!("{v}");
            if args.stats {
                eprintln!("{}", stats_of(stats));
            }
            Ok(())
        }
        Err(e) => Err(fail(Diagnostic::from(&e))),
    }
}

/// `compile`: the program of the mode, compiled into an object file and a
/// header.
fn compile_cmd(args: CompileArgs) -> Result<(), Failure> {
    let files = Files::read(&args.file)?;
    let fail = |d: Diagnostic| Failure(render(&d, &files));
    let src = &files.main_src;
    let mode = clap::ValueEnum::to_possible_value(&args.mode).map(|v| v.get_name().to_string());
    let mode = mode.unwrap_or_default();
    let wrt = match (args.mode, &args.wrt) {
        (CompileMode::Objective, None) => "",
        (CompileMode::Objective, Some(_)) => {
            return Err(Failure(
                "error[usage]: --wrt needs --mode fwd, fwd-opt, fwd-vec, fwd-rows or rev\n"
                    .to_string(),
            ));
        }
        (_, Some(w)) => w.as_str(),
        (_, None) => {
            return Err(Failure(format!(
                "error[usage]: --mode {mode} needs --wrt NAME (the independent variable)\n"
            )));
        }
    };
    let (base, mut entry, suffix) = match args.mode {
        CompileMode::Objective => {
            let loaded = pipeline::load(src).map_err(fail)?;
            let e = pipeline::entry(&loaded, &args.entry).map_err(fail)?;
            (e.params.clone(), e, "")
        }
        CompileMode::Fwd => {
            let d = pipeline::derivative(src, &args.entry, wrt).map_err(fail)?;
            (d.base.params, d.wrapper, "_fwd")
        }
        CompileMode::FwdOpt => {
            let d = pipeline::optimised_derivative(src, &args.entry, wrt, &opt_options())
                .map_err(fail)?;
            (d.base.params, d.wrapper, "_fwd_opt")
        }
        CompileMode::FwdVec => {
            let d = pipeline::derivative_with(src, &args.entry, wrt, ForwardMode::Vector)
                .map_err(fail)?;
            (d.base.params, d.wrapper, "_fwd_vec")
        }
        CompileMode::FwdRows => {
            let d = pipeline::rows_derivative(src, &args.entry, wrt).map_err(fail)?;
            (d.base.params, d.rows, "_fwd_rows")
        }
        CompileMode::Rev => {
            let r =
                pipeline::reverse_derivative_with(src, &args.entry, wrt, args.checkpoint.into())
                    .map_err(fail)?;
            (r.base.params, r.rev, "_rev")
        }
    };
    // The derivative programs take the entry's parameters (reverse mode
    // then the result's cotangent): give them the entry's names.
    for (k, (name, _)) in entry.params.iter_mut().enumerate() {
        *name = base
            .get(k)
            .map_or_else(|| "cotangent".to_string(), |(n, _)| n.clone());
    }
    let symbol = args
        .symbol
        .clone()
        .unwrap_or_else(|| crate::codegen::default_symbol(&args.entry, suffix));
    let mut origin = format!(
        "{}, entry `{}`, mode {mode}",
        args.file.display(),
        args.entry
    );
    if !wrt.is_empty() {
        origin.push_str(&format!(" with respect to `{wrt}`"));
    }
    let options = crate::codegen::AotOptions {
        symbol,
        origin,
        listing: args.listing.is_some(),
    };
    let code =
        crate::codegen::compile_object(&entry, &options).map_err(|e| fail(Diagnostic::from(&e)))?;
    write(&args.output, &code.object)?;
    if let Some(h) = &args.header {
        write(h, code.header.as_bytes())?;
    }
    if let (Some(path), Some(text)) = (&args.listing, &code.listing) {
        write(path, text.as_bytes())?;
    }
    Ok(())
}

/// `run --engine native`: compile, call, print; with --stats, the compile
/// and run times as one JSON line on stderr.
fn run_native(
    entry: &pipeline::Entry,
    values: Vec<crate::eval::Value>,
    stats: bool,
) -> Result<(), crate::codegen::CodegenError> {
    let native = crate::codegen::Native::compile(entry)?;
    let start = Instant::now();
    let v = native.call(&values)?;
    let run = start.elapsed();
    println!("{v}");
    if stats {
        eprintln!(
            "{{\"engine\": \"native\", \"compile_ms\": {:.3}, \"run_ms\": {:.3}}}",
            native.compile_time().as_secs_f64() * 1e3,
            run.as_secs_f64() * 1e3
        );
    }
    Ok(())
}

fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        let mut t: String = flat.chars().take(max).collect();
        t.push_str(" …");
        t
    } else {
        flat
    }
}

fn load_rules(dir: Option<&std::path::Path>) -> Result<Vec<crate::opt::RuleDef>, Failure> {
    crate::opt::load(dir).map_err(|r| Failure(r.render()))
}

fn rules_check_cmd(
    dir: Option<&std::path::Path>,
    only: &[String],
    families: &[String],
    opts: crate::rulecheck::Options,
) -> Result<(), Failure> {
    let all = load_rules(dir)?;
    for name in only {
        if !all.iter().any(|r| &r.name == name) {
            return Err(Failure(format!(
                "error[unknown-rule]: no rule named `{name}` in the loaded rule set\n"
            )));
        }
    }
    let rules: Vec<_> = all
        .into_iter()
        .filter(|r| only.is_empty() || only.contains(&r.name))
        .filter(|r| families.is_empty() || families.contains(&r.family))
        .collect();
    let start = Instant::now();
    let reports = crate::rulecheck::check_rules(&rules, &opts);
    print!("{}", crate::rulecheck::table(&reports));
    let failed: Vec<_> = reports.iter().filter(|r| r.failed > 0).collect();
    println!(
        "{} rule(s), {} instance(s) with conditions holding, {} failing rule(s), {:.1} s",
        reports.len(),
        reports.iter().map(|r| r.held).sum::<u64>(),
        failed.len(),
        start.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        return Ok(());
    }
    let mut msg = String::new();
    for r in failed {
        let def = rules.iter().find(|d| d.name == r.name);
        msg.push_str(&format!(
            "error[rule-unsound]: rule `{}` (family `{}`, line {}) fails on {} of {} instance(s)\n",
            r.name,
            r.family,
            def.map_or(0, |d| d.line),
            r.failed,
            r.held
        ));
        if let Some(d) = def {
            msg.push_str(&format!("  {}\n", d.doc));
        }
        if let Some(c) = &r.counterexample {
            msg.push_str(&format!("{c}\n"));
        }
    }
    Err(Failure(msg))
}

fn difftest_cmd(c: crate::difftest::Campaign, save: &std::path::Path) -> Result<(), Failure> {
    let start = Instant::now();
    let s = crate::difftest::run(c);
    println!(
        "{{\"property\": \"{}\", \"programs\": {}, \"seed\": {}, \"max_size\": {}, \"defined_points\": {}, \"compared\": {}, \"finite_differences\": {}, \"ieee_overflow\": {}, \"ieee_rounding\": {}, \"bottom_agreements\": {}, \"failures\": {}, \"seconds\": {:.3}}}",
        c.property.name(),
        s.programs,
        c.seed,
        c.max_size,
        s.counts.defined,
        s.counts.compared,
        s.counts.fd,
        s.counts.ieee,
        s.counts.rounding,
        s.counts.bottoms,
        usize::from(s.failure.is_some()),
        start.elapsed().as_secs_f64()
    );
    let Some(f) = s.failure else {
        return Ok(());
    };
    let name = format!("{}-seed{}-case{}.fsm", c.property.name(), c.seed, f.case);
    let text = format!(
        "// property: {}\n// Found by `fsmooth difftest --property {} --seed {} --max-size {}` (case {}, {} shrinks):\n// {}\n{}",
        c.property.name(),
        c.property.name(),
        c.seed,
        c.max_size,
        f.case,
        f.shrinks,
        f.message.replace('\n', "\n// "),
        f.program.trim_end()
    ) + "\n";
    let saved = std::fs::create_dir_all(save)
        .and_then(|()| std::fs::write(save.join(&name), &text))
        .map(|()| format!("saved as {}", save.join(&name).display()))
        .unwrap_or_else(|e| format!("not saved ({}: {e})", save.display()));
    Err(Failure(format!(
        "error[difftest-disagreement]: case {} of seed {}: {}\n{}\n{saved}\n",
        f.case,
        c.seed,
        f.message,
        f.program.trim_end()
    )))
}
