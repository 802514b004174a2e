//! The command line's grammar (clap): commands, their arguments, and the
//! options several commands share (`#[command(flatten)]`). Library enums
//! (`Mode`, `Engine`, `Checkpointing`, `Property`) are used directly.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::ad::Checkpointing;
use crate::codegen::{FpContract, NativeOptions};
use crate::difftest::Property;
use crate::eval::Limits;
use crate::fuzz::Target;
use crate::gradient::Mode;
use crate::pipeline::Engine;

#[derive(Parser, Debug)]
#[command(
    name = "fsmooth",
    version,
    about = "F-smooth: a differentiable functional array language"
)]
pub struct Cli {
    /// Print how often each pass ran and how long it took, as one JSON
    /// line on stderr, when the command ends.
    #[arg(long, global = true)]
    pub passes: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
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
        #[command(flatten)]
        rules: RulesArg,
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
        /// Leave out the `ieee-inexact` rules (exact over the reals only):
        /// the optimised program then computes the entry's binary64
        /// values bit for bit, and is ⊥ exactly where the entry is
        /// (spec/rules-format.md §7.2).
        #[arg(long)]
        exact: bool,
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
        #[arg(long, value_enum, default_value_t = Property::Ad)]
        property: Property,
        /// Check only the generated programs that contain a `while` loop
        /// (about one in twelve; the others are generated and skipped, and
        /// `programs` counts the checked ones).
        #[arg(long)]
        only_while: bool,
        /// Check only the generated programs that apply a derivative
        /// operator to a function value (`jvp`, `vjp`, or the prelude's
        /// `derivative` and `gradient`; about one in five).
        #[arg(long)]
        only_operators: bool,
    },
    /// Fuzz the command line's entry points with generated and mutated
    /// programs, JSON inputs and rule files; oracles in process and, for a
    /// sample, as a subprocess of this binary. Prints one JSON line of
    /// outcome counts per target; saves each failing input (shrunk) under
    /// --save with the command that reproduces it; exits 1 on a failure.
    Fuzz(FuzzArgs),
    /// The rewrite-rule set: listing and per-rule soundness checking.
    #[command(subcommand)]
    Rules(RulesCmd),
    /// ADBench workloads: objective and gradient from ADBench's input files.
    #[command(subcommand)]
    Adbench(AdbenchCmd),
    /// Act as a GradBench tool: read the eval's messages (one JSON object
    /// per line) on standard input and answer each on standard output
    /// (GradBench's protocol: start, define, evaluate, analysis). Every
    /// eval is an F̃ program compiled to native code at `define`.
    Gradbench {
        /// What runs the functions.
        #[arg(long, value_enum, default_value_t = Engine::Native)]
        engine: Engine,
        /// Evaluator steps per run, or native loop iterations (no limit by
        /// default: GradBench's workloads are large).
        #[arg(long, default_value_t = u64::MAX)]
        fuel: u64,
        /// The most elements an array may have (E-Limit).
        #[arg(long, default_value_t = Limits::ELEMENTS)]
        max_elements: u64,
        /// Print the modules fsmooth implements, one per line (GradBench's
        /// `evals.txt`), and exit.
        #[arg(long)]
        list: bool,
    },
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
        /// With `--mode fwd-opt`.
        #[command(flatten)]
        rules: RulesArg,
        #[command(flatten)]
        checkpoint: CheckpointArg,
    },
}

#[derive(Subcommand, Debug)]
pub enum RulesCmd {
    /// Check every rule against the reference evaluator: random well-typed
    /// instances of its metavariables that satisfy its side conditions,
    /// left and right side evaluated, refinement checked (exact unless the
    /// rule is tagged `ieee-inexact`). Prints a table per rule; a failure
    /// prints a shrunk counterexample and exits 1.
    Check {
        #[command(flatten)]
        rules: RulesArg,
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
    /// Prove each scalar rule (arithmetic, comparisons, conditionals) with
    /// the SMT solver z3, over the reals and in IEEE binary64, with F̃'s ⊥
    /// explicit; derives whether each rule is exact in binary64 and checks
    /// its `ieee-inexact` tag. A counterexample is printed as an instance
    /// and replayed on the evaluator; exits 1 on a rule that is wrong as
    /// written (spec/rules-format.md §14). Needs `z3` on the PATH.
    Prove {
        #[command(flatten)]
        rules: RulesArg,
        /// Only these rules (repeatable).
        #[arg(long = "rule")]
        only: Vec<String>,
        /// Only the rules of these families (repeatable).
        #[arg(long = "family")]
        families: Vec<String>,
        /// The solver's time limit per query, in milliseconds.
        #[arg(long, default_value_t = 10_000)]
        timeout_ms: u64,
        /// Print each rule's SMT-LIB queries instead of solving them.
        #[arg(long)]
        smt: bool,
        /// Instances `rules check` tries on each rule out of scope for SMT,
        /// to refute it with a counterexample replayed on the evaluator
        /// (0: none). Proving such a rule is Coq's (`fsmooth rules coq`).
        #[arg(long, default_value_t = 200)]
        search: u64,
    },
    /// Write the structural rules (binders, loops, arrays, tuples,
    /// conditionals) as Coq propositions over proofs/coq/Semantics.v: the
    /// text of proofs/coq/Statements.v, which the Coq development proves
    /// (spec/rules-format.md §15).
    Coq {
        #[command(flatten)]
        rules: RulesArg,
    },
    /// List the loaded rules: name, family, tags, identity.
    List {
        #[command(flatten)]
        rules: RulesArg,
    },
}

#[derive(Subcommand, Debug)]
pub enum AdbenchCmd {
    /// GMM: `{"objective": …, "gradient": [alphas, means, icf]}`.
    Gmm {
        file: PathBuf,
        /// The file holds one point line for all n points (ADBench's 2.5M files).
        #[arg(long)]
        replicate_point: bool,
        /// Differentiate `gmmObjectiveBatchedFlat`, the data term for all
        /// points at once (the same bits), instead of `gmmObjectiveFlat`,
        /// point by point (examples/adbench/gmm.fsm).
        #[arg(long)]
        batched: bool,
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

/// `--rules DIR`.
#[derive(Args, Debug)]
pub struct RulesArg {
    /// A directory of `*.rules` files adding to (or replacing, by family
    /// name) the default rule set.
    #[arg(long = "rules")]
    pub dir: Option<PathBuf>,
}

/// `--checkpoint`.
#[derive(Args, Debug)]
pub struct CheckpointArg {
    /// Reverse mode (`--mode rev`): which loops recompute their iterations
    /// instead of taping them.
    #[arg(long = "checkpoint", value_enum, default_value_t)]
    pub policy: Checkpointing,
}

/// `--fuel`, `--max-elements` and `--engine`.
#[derive(Args, Debug)]
pub struct EngineArgs {
    /// Maximum number of evaluator steps (per run); native code counts
    /// loop iterations against it.
    #[arg(long, default_value_t = Limits::default().fuel)]
    pub fuel: u64,
    /// The most elements an array may have, in both engines (E-Limit).
    #[arg(long, default_value_t = Limits::ELEMENTS)]
    pub max_elements: u64,
    /// What runs the programs (`native`: modes fwd, fwd-opt, fwd-vec,
    /// fwd-rows and rev have derivative programs it can compile).
    #[arg(long, value_enum, default_value_t)]
    pub engine: Engine,
    /// Native code's floating-point contract (spec/semantics.md §7):
    /// `strict` returns the evaluator's bits; `relaxed` may regroup sums
    /// (innermost sums in SIMD lanes; with --threads, folds that only add
    /// to their state run on several threads) and computes `log` and `exp`
    /// in lanes within 2 ulp, within the bound §7 states.
    #[arg(long, value_enum, default_value_t)]
    pub fp: FpContract,
    /// The threads native code may run a loop of the entry's own block on
    /// (Note [Parallel loops]): its `build`s under either contract, its
    /// folds under `--fp relaxed`. Results are deterministic for a given N.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: u16,
}

impl EngineArgs {
    pub fn limits(&self) -> Limits {
        Limits {
            fuel: self.fuel,
            elements: self.max_elements,
        }
    }

    /// How native code is compiled.
    pub fn native(&self) -> NativeOptions {
        NativeOptions {
            fp: self.fp,
            threads: usize::from(self.threads),
        }
    }
}

/// `--input JSON` or `--input-file PATH`.
#[derive(Args, Debug)]
pub struct InputArgs {
    /// Arguments as JSON: an object keyed by parameter name, or an array.
    #[arg(long, conflicts_with = "input_file")]
    pub input: Option<String>,
    /// Read the JSON arguments from a file.
    #[arg(long)]
    pub input_file: Option<PathBuf>,
}

/// The options every `adbench` workload takes.
#[derive(Args, Debug)]
pub struct WorkloadArgs {
    #[arg(long, value_enum, default_value_t = Mode::Fwd)]
    pub mode: Mode,
    /// Print `{"steps": …, "ops": …, "time_ms": …}` of the derivative to stderr.
    #[arg(long)]
    pub stats: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Time N runs of the objective and of the derivative (after one
    /// warm-up run, which compiles native code) and add
    /// `"timings": {…}` with the minimum times and their ratio J/F.
    /// Natively, GMM, LSTM and hand tracking time the compiled objective
    /// and derivative program alone, on arguments converted once (as
    /// `grad --repeat`), when the programs take them as slices; BA times
    /// its whole runs.
    #[arg(long)]
    pub repeat: Option<u32>,
    #[command(flatten)]
    pub checkpoint: CheckpointArg,
}

#[derive(Args, Debug)]
pub struct DerivArgs {
    pub file: PathBuf,
    #[arg(long, default_value = "main")]
    pub entry: String,
    /// The independent variable: a parameter of the entry (Double, Vector
    /// or Matrix in the forward modes; any data type — tuples, arrays of
    /// any rank — in `rev`, `tape` and `fd`). `grad` and `jacobian` take
    /// several, separated by commas (`--wrt a,b`), and print their
    /// derivatives as an object keyed by parameter.
    #[arg(long)]
    pub wrt: String,
    #[arg(long, value_enum, default_value_t = Mode::Fwd)]
    pub mode: Mode,
    #[command(flatten)]
    pub input: InputArgs,
    /// Print `{"steps": …, "ops": …}` to stderr as one JSON line.
    #[arg(long)]
    pub stats: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// With `--mode fwd-opt`.
    #[command(flatten)]
    pub rules: RulesArg,
    #[command(flatten)]
    pub checkpoint: CheckpointArg,
    /// With `--engine native`.
    #[command(flatten)]
    pub gate: GateArgs,
    /// Time N more computations of the (first) derivative after the first
    /// (which compiles native code) and print `{"repeat": N, "min_ms":
    /// …}`, the fastest, to stderr as one JSON line.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: Option<u32>,
}

/// The program `compile` compiles.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CompileMode {
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

impl CompileMode {
    /// The gradient mode whose program this is (`None`: the entry itself).
    pub fn mode(self) -> Option<Mode> {
        match self {
            CompileMode::Objective => None,
            CompileMode::Fwd => Some(Mode::Fwd),
            CompileMode::FwdOpt => Some(Mode::FwdOpt),
            CompileMode::FwdVec => Some(Mode::FwdVec),
            CompileMode::FwdRows => Some(Mode::FwdRows),
            CompileMode::Rev => Some(Mode::Rev),
        }
    }
}

#[derive(Args, Debug)]
pub struct CompileArgs {
    pub file: PathBuf,
    #[arg(long, default_value = "main")]
    pub entry: String,
    /// The object's floating-point contract (spec/semantics.md §7):
    /// `strict` returns the evaluator's bits; `relaxed` runs innermost sums
    /// and `log`/`exp` in SIMD lanes, within the bound §7 states. Object
    /// code is single-threaded under either.
    #[arg(long, value_enum, default_value_t)]
    pub fp: FpContract,
    /// The object file to write.
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// The C header to write.
    #[arg(long)]
    pub header: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t)]
    pub mode: CompileMode,
    /// The independent variable (modes fwd, fwd-opt, fwd-vec, fwd-rows, rev).
    #[arg(long)]
    pub wrt: Option<String>,
    /// The C symbol of the typed entry (default: the entry's name with
    /// every character outside [A-Za-z0-9_] made `_`, plus `_fwd`,
    /// `_fwd_opt`, `_fwd_vec`, `_fwd_rows` or `_rev`). The slot-level entry is `SYMBOL_slots`.
    #[arg(long)]
    pub symbol: Option<String>,
    /// Also write the slot-level entry's Cranelift IR, as lowered from the
    /// normal form (after fusion and hoisting, before Cranelift's passes),
    /// and its machine code, to this file.
    #[arg(long)]
    pub listing: Option<PathBuf>,
    #[command(flatten)]
    pub checkpoint: CheckpointArg,
    /// The rules of `--mode fwd-opt`.
    #[command(flatten)]
    pub rules: RulesArg,
    #[command(flatten)]
    pub gate: GateArgs,
}

/// The validation gate before native code (spec/cli.md, "The validation
/// gate"): on by default for `compile` and for derivatives run with
/// `--engine native`.
#[derive(Args, Debug, Default)]
pub struct GateArgs {
    /// Emit or run native code without the validation gate: no replay of
    /// the optimiser's steps, no check of the derivative and of native code
    /// on sample inputs.
    #[arg(long)]
    pub no_gate: bool,
    /// An input at which the gate checks (JSON as for --input, or the path
    /// of a file holding it); repeatable. The gate also generates inputs
    /// from the parameter types.
    #[arg(long = "sample-input", value_name = "JSON|FILE")]
    pub sample_inputs: Vec<String>,
    /// How many inputs the gate generates from the parameter types.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub gate_samples: usize,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    pub file: PathBuf,
    /// The definition to run.
    #[arg(long, default_value = "main")]
    pub entry: String,
    #[command(flatten)]
    pub input: InputArgs,
    /// Print `{"steps": …, "ops": …}` to stderr as one JSON line; with
    /// `--engine native`, `{"engine", "compile_ms", "run_ms",
    /// "parallel_loops", "parallel_runs"}`: the loops compiled to run on
    /// several threads, and how many of them did (Note [Parallel loops]).
    #[arg(long)]
    pub stats: bool,
    /// Print every reduction step (rule name and focus) to stderr.
    #[arg(long, conflicts_with = "engine")]
    pub trace: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Time N more runs of the entry after the first (which compiles
    /// native code) and print `{"repeat": N, "min_ms": …}`, the fastest,
    /// to stderr as one JSON line.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: Option<u32>,
}

#[derive(Args, Debug)]
pub struct FuzzArgs {
    /// Which entry point to fuzz (`all`: each in turn).
    #[arg(long, value_enum, default_value_t = Target::All)]
    pub target: Target,
    /// Generated inputs per target.
    #[arg(long, default_value_t = 1000)]
    pub cases: u64,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Stop each target after this many seconds.
    #[arg(long, value_name = "SECS")]
    pub time_limit: Option<f64>,
    /// Where failing inputs are saved (one directory each, with
    /// `command.sh`).
    #[arg(long, default_value = "target/fuzz-failures")]
    pub save: PathBuf,
    /// Every K-th input also runs as a subprocess of this binary (0: none).
    #[arg(long, value_name = "K", default_value_t = 50)]
    pub sample: u64,
    /// The wall-clock limit of one input, in process and as a subprocess.
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    pub case_timeout: f64,
    /// Evaluator fuel per run.
    #[arg(long, default_value_t = 100_000)]
    pub fuel: u64,
    /// The repository whose examples, golden files and rule files are
    /// the mutation seeds (the built-in seeds are used in any case).
    #[arg(long, default_value = ".")]
    pub corpus: PathBuf,
    /// Report failures as found, unshrunk.
    #[arg(long)]
    pub no_shrink: bool,
}
