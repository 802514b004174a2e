//! The fuzzing harness (`fsmooth fuzz`): generated and mutated inputs for
//! every entry point, judged by oracles in process and, for a
//! deterministic sample, as a subprocess of the real binary.
//!
//! - [`choices`]: the choice-sequence decoder every generator reads;
//! - [`programs`]: structured source programs (well-typed, near misses,
//!   deep); `testgen`'s functions and closed programs are used too;
//! - [`mutate`]: mutation of seed files (bytes, tokens, lines, nesting,
//!   literals, encodings); [`corpus`]: the seeds;
//! - [`inputs`]: JSON inputs against an entry's parameter types;
//! - [`targets`]: what each target generates, as a [`case::Case`];
//! - [`oracle`]: the in-process oracles; [`process`]: the subprocess
//!   oracle (the command line supplies the runner);
//! - [`campaign`]: runs a target — sampling, time limits, shrinking,
//!   counts.
//!
//! Built on proptest (Note [Why proptest] below).
//!
//! Outcomes ([`Outcome`]): `ok`; `clean_error` (a stable code, and a
//! location when it concerns the program); `known` (an unclean error of
//! a class being fixed elsewhere, Note [Known defects] in `oracle.rs`);
//! `unclean_error`; `disagree` (an oracle's comparison failed); `timeout`;
//! `panic`; `signal`. A case counts once, as the worst of its verdicts.
//!
//! Resource limits: every evaluator run has the case's fuel (small, by
//! default 100,000 steps); generated programs keep arrays small and
//! native code runs only those (`targets.rs`). Until the engines get
//! their array-size limit (being added elsewhere) no generated program
//! legitimately needs more than about 10⁶ elements; the mutations that
//! write huge literals are run by the evaluator, whose fuel bounds them.

// Note [Why proptest]
// ~~~~~~~~~~~~~~~~~~~
// cargo-fuzz needs a nightly toolchain, which cannot be installed here,
// so the harness is built on proptest rather than libFuzzer. Its
// `TestRunner` gives a seedable, platform-independent random stream
// (ChaCha) and its `Vec<u32>` strategy a value tree that shrinks; every
// generator is a decoder of a choice sequence ([`choices::Choices`],
// `testgen`'s design), so one strategy — a vector of choices — serves
// programs, mutations, JSON and rule files alike, and shrinking a
// failing input is shrinking its choices (fewer choices decode to
// simpler inputs), with no shrinker per input kind. `arbitrary` would
// decode bytes the same way but brings no runner and no shrinking;
// proptest is already the project's property-testing library. Were a
// nightly toolchain available, a libFuzzer target could feed the same
// decoders its bytes.

pub mod campaign;
pub mod case;
pub mod choices;
pub mod corpus;
pub mod inputs;
pub mod mutate;
pub mod oracle;
pub mod process;
pub mod programs;
pub mod targets;

pub use campaign::{Config, Failure, Summary, run_target};
pub use corpus::Corpus;

/// An entry point of the command line under test.
#[derive(clap::ValueEnum, Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// `run` on the evaluator: programs structured and mutated.
    Run,
    /// `check` (parsing, types) and the printer's round trip.
    Check,
    /// `grad`, `jacobian` and `vjp` in every mode, on both engines.
    Grad,
    /// `opt`: the optimised program refines the program.
    Opt,
    /// Mutated rule files: `rules list`, `rules check`, `opt --rules`.
    Rules,
    /// JSON inputs against the entries' parameter types.
    Input,
    /// Native code against the evaluator (values and ⊥ codes).
    Native,
    /// Every target in turn.
    All,
}

impl Target {
    /// Every target but `All`, in the order `all` runs them.
    pub const EACH: [Target; 7] = [
        Target::Check,
        Target::Run,
        Target::Input,
        Target::Grad,
        Target::Native,
        Target::Opt,
        Target::Rules,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Target::Run => "run",
            Target::Check => "check",
            Target::Grad => "grad",
            Target::Opt => "opt",
            Target::Rules => "rules",
            Target::Input => "input",
            Target::Native => "native",
            Target::All => "all",
        }
    }

    /// The targets `self` stands for.
    pub fn each(self) -> Vec<Target> {
        if self == Target::All {
            Target::EACH.to_vec()
        } else {
            vec![self]
        }
    }
}

/// How one input fared, from best to worst.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    Ok,
    CleanError,
    /// An unclean error of a class being fixed elsewhere.
    Known,
    Unclean,
    Disagree,
    Timeout,
    Panic,
    Signal,
}

impl Outcome {
    pub const ALL: [Outcome; 8] = [
        Outcome::Ok,
        Outcome::CleanError,
        Outcome::Known,
        Outcome::Unclean,
        Outcome::Disagree,
        Outcome::Timeout,
        Outcome::Panic,
        Outcome::Signal,
    ];

    /// The key of the summary's JSON.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::CleanError => "clean_error",
            Outcome::Known => "known",
            Outcome::Unclean => "unclean_error",
            Outcome::Disagree => "disagree",
            Outcome::Timeout => "timeout",
            Outcome::Panic => "panic",
            Outcome::Signal => "signal",
        }
    }

    /// Whether this outcome is a failure of the harness's contract.
    pub fn is_failure(self) -> bool {
        self > Outcome::Known
    }
}

/// An oracle's judgement of one input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub outcome: Outcome,
    /// The error code of a clean error, or what went wrong.
    pub detail: String,
}

impl Verdict {
    pub fn new(outcome: Outcome, detail: impl Into<String>) -> Verdict {
        Verdict {
            outcome,
            detail: detail.into(),
        }
    }

    pub fn ok() -> Verdict {
        Verdict::new(Outcome::Ok, "")
    }
}
