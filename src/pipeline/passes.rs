//! How often each pass ran, and for how long: the evidence that a command
//! builds its program once (`fsmooth --passes COMMAND …` prints it; a test
//! asserts the counts per command).
//!
//! The pipeline is the only place passes are sequenced, so it is the one
//! place that counts them: every call of a pass from `pipeline/` goes
//! through [`timed`]. The counts are per thread (a command runs on one
//! thread) and start at zero; [`take`] reads and resets them.

use std::cell::RefCell;
use std::time::{Duration, Instant};

/// A pass the pipeline runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pass {
    /// The prelude and the program, parsed (one count for both).
    Parse,
    /// Type inference of the whole program (prelude included).
    Infer,
    /// Type inference of a definition the pipeline appended (a wrapper).
    InferAppended,
    /// Type inference of a program a pass generated (AD's output, the
    /// optimiser's, a monomorphic copy): the check that it is ordinary code.
    Check,
    /// Monomorphisation for an entry.
    Monomorphise,
    /// Every function value inlined before `jvp`, `vjp` or `deriv` of a
    /// function value is expanded (spec/ad-forward.md §10.2).
    Specialise,
    /// `deriv`, `jvp` and `vjp` expanded (D[[·]], and R-Vjp's reverse mode).
    Forward,
    /// Source-to-source reverse mode.
    Reverse,
    /// The first-order normal form (`anf`).
    Normalise,
    /// Equality saturation, all phases.
    Optimise,
    /// Native code generation (JIT or object file).
    Compile,
}

impl Pass {
    /// Every pass, in pipeline order.
    pub const ALL: [Pass; 11] = [
        Pass::Parse,
        Pass::Infer,
        Pass::InferAppended,
        Pass::Check,
        Pass::Monomorphise,
        Pass::Specialise,
        Pass::Forward,
        Pass::Reverse,
        Pass::Normalise,
        Pass::Optimise,
        Pass::Compile,
    ];

    /// The stable name printed by `--passes`.
    pub fn name(self) -> &'static str {
        match self {
            Pass::Parse => "parse",
            Pass::Infer => "infer",
            Pass::InferAppended => "infer-appended",
            Pass::Check => "check",
            Pass::Specialise => "specialise",
            Pass::Monomorphise => "monomorphise",
            Pass::Forward => "forward",
            Pass::Reverse => "reverse",
            Pass::Normalise => "normalise",
            Pass::Optimise => "optimise",
            Pass::Compile => "compile",
        }
    }
}

/// Runs of one pass.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Runs {
    pub count: u32,
    pub time: Duration,
}

thread_local! {
    static RUNS: RefCell<[Runs; Pass::ALL.len()]> = RefCell::new([Runs::default(); Pass::ALL.len()]);
}

/// Runs `f` as one run of `pass`.
pub fn timed<T>(pass: Pass, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    let time = start.elapsed();
    RUNS.with(|r| {
        let mut r = r.borrow_mut();
        let slot = &mut r[pass as usize];
        slot.count += 1;
        slot.time += time;
    });
    out
}

/// The runs of every pass on this thread since the last `take`, in
/// pipeline order; the counts start again at zero.
pub fn take() -> Vec<(Pass, Runs)> {
    RUNS.with(|r| {
        let taken = std::mem::take(&mut *r.borrow_mut());
        Pass::ALL.iter().map(|&p| (p, taken[p as usize])).collect()
    })
}
