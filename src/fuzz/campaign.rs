//! A campaign over one target ([`run_target`]): proptest's `TestRunner`,
//! seeded from `--seed` and the target's name, draws a choice sequence
//! per case; `targets::generate` decodes it into a [`Case`]; the
//! in-process oracle judges it on a worker thread (1 GiB of stack, like
//! the binary's) under `catch_unwind` and a wall-clock limit; every
//! `sample`-th case is also run as a subprocess of the real binary (every
//! fourth of those with its output pipe closed). A case counts once, as
//! the worst of its verdicts.
//!
//! A failure is shrunk where that is cheap — the choice sequence through
//! proptest's value tree, then the program's lines — as long as it fails
//! the same way, and handed to the caller, which saves it with the
//! command that reproduces it. Timeouts are not shrunk (each try costs
//! the limit), nor inputs over 1 MiB.
//!
//! A worker stuck past the limit cannot be stopped: it is left behind
//! (it holds one core until its case ends) and a new worker takes over.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

use proptest::prelude::any;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{RngAlgorithm, TestRng, TestRunner};

use super::case::Case;
use super::corpus::Corpus;
use super::process::Runner;
use super::{Outcome, Target, Verdict};

/// A campaign's settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Cases per target.
    pub cases: u64,
    pub seed: u64,
    /// Stop a target after this long (cases not yet run are not counted).
    pub time_limit: Option<Duration>,
    /// The wall-clock limit of one case, in process and as a subprocess.
    pub case_timeout: Duration,
    /// Every `sample`-th case also runs as a subprocess (0: none).
    pub sample: u64,
    /// Evaluator fuel per run.
    pub fuel: u64,
    /// Shrink failures.
    pub shrink: bool,
    /// At most this many failures of one kind are reported per target.
    pub keep: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            cases: 1000,
            seed: 0,
            time_limit: None,
            case_timeout: Duration::from_secs(30),
            sample: 50,
            fuel: 100_000,
            shrink: true,
            keep: 3,
        }
    }
}

/// A failing input, shrunk.
#[derive(Clone, Debug)]
pub struct Failure {
    pub target: Target,
    /// Which case of the campaign (0-based).
    pub index: u64,
    pub case: Case,
    pub verdict: Verdict,
    /// Whether the failure showed in a subprocess (else in process).
    pub subprocess: bool,
    /// Successful shrinking steps.
    pub shrinks: usize,
}

/// What a campaign over one target found.
#[derive(Clone, Debug)]
pub struct Summary {
    pub target: Target,
    pub cases: u64,
    pub counts: BTreeMap<Outcome, u64>,
    /// Cases also run as a subprocess.
    pub subprocess: u64,
    /// Clean error codes seen, with counts.
    pub codes: BTreeMap<String, u64>,
    /// Known and failing verdicts by kind (outcome and detail's first
    /// words), with counts.
    pub kinds: BTreeMap<String, u64>,
    pub seconds: f64,
    pub failures: Vec<Failure>,
}

impl Summary {
    pub fn count(&self, o: Outcome) -> u64 {
        self.counts.get(&o).copied().unwrap_or(0)
    }

    /// Cases whose outcome is a failure.
    pub fn failed(&self) -> u64 {
        Outcome::ALL
            .iter()
            .filter(|o| o.is_failure())
            .map(|o| self.count(*o))
            .sum()
    }
}

/// The longest choice sequence a case draws.
const CHOICES: usize = 3000;

/// The name the worker thread has (the panic hook recognises it).
const WORKER: &str = "fsmooth-fuzz-worker";

thread_local! {
    /// The last panic's message on this thread.
    static PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// The in-process oracle on a thread of its own.
struct Worker {
    jobs: Sender<Case>,
    verdicts: Receiver<Verdict>,
}

impl Worker {
    fn spawn() -> Worker {
        let (jobs, rx) = channel::<Case>();
        let (tx, verdicts) = channel();
        let spawned = std::thread::Builder::new()
            .name(WORKER.to_string())
            .stack_size(1 << 30)
            .spawn(move || {
                for case in rx {
                    let v = catch_unwind(AssertUnwindSafe(|| super::oracle::judge(&case)))
                        .unwrap_or_else(|_| {
                            let m = PANIC.with(|p| p.borrow_mut().take()).unwrap_or_default();
                            Verdict::new(Outcome::Panic, m)
                        });
                    if tx.send(v).is_err() {
                        break;
                    }
                }
            });
        if spawned.is_err() {
            // No thread: every job's channel is closed, judged a panic.
            let (jobs, _) = channel();
            let (_, verdicts) = channel();
            return Worker { jobs, verdicts };
        }
        Worker { jobs, verdicts }
    }

    /// Judges `case`; a case past `timeout` leaves the worker behind.
    fn judge(&mut self, case: &Case, timeout: Duration) -> Verdict {
        if self.jobs.send(case.clone()).is_err() {
            *self = Worker::spawn();
            return Verdict::new(Outcome::Panic, "the worker thread could not be started");
        }
        match self.verdicts.recv_timeout(timeout) {
            Ok(v) => v,
            Err(RecvTimeoutError::Timeout) => {
                *self = Worker::spawn();
                Verdict::new(
                    Outcome::Timeout,
                    format!("in process, past {} s", timeout.as_secs_f64()),
                )
            }
            Err(RecvTimeoutError::Disconnected) => {
                *self = Worker::spawn();
                Verdict::new(Outcome::Panic, "the worker thread died")
            }
        }
    }
}

/// Installs a panic hook that keeps the worker's panic messages (and
/// prints nothing for them); returns a guard that restores the old hook.
struct QuietPanics {
    previous: Arc<dyn Fn(&std::panic::PanicHookInfo<'_>) + Send + Sync>,
}

impl QuietPanics {
    fn install() -> QuietPanics {
        let previous: Arc<dyn Fn(&std::panic::PanicHookInfo<'_>) + Send + Sync> =
            Arc::from(std::panic::take_hook());
        let p = previous.clone();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().name() == Some(WORKER) {
                let m = format!("{info}").replace('\n', " ");
                PANIC.with(|x| *x.borrow_mut() = Some(m));
            } else {
                p(info)
            }
        }));
        QuietPanics { previous }
    }
}

impl Drop for QuietPanics {
    fn drop(&mut self) {
        let p = self.previous.clone();
        std::panic::set_hook(Box::new(move |info| p(info)));
    }
}

/// The seed of a target's random stream: `seed` and the target's name.
fn rng_seed(seed: u64, target: Target) -> [u8; 32] {
    let mut out = [0u8; 32];
    out[..8].copy_from_slice(&seed.to_le_bytes());
    for (i, b) in target.name().bytes().enumerate() {
        out[8 + i % 24] ^= b;
    }
    out
}

/// The kind of a verdict, for grouping: the outcome and the detail's
/// gist (a panic's location, an error's code).
fn kind(v: &Verdict) -> String {
    let gist: String = match v.outcome {
        Outcome::Panic => v
            .detail
            .split(" at ")
            .nth(1)
            .and_then(|s| s.split(':').next())
            .unwrap_or(&v.detail)
            .chars()
            .take(60)
            .collect(),
        Outcome::Disagree => v
            .detail
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        _ => {
            // error[code] when there is one, else the first words.
            match v.detail.find("error[") {
                Some(i) => v.detail[i..].split(']').next().unwrap_or("").to_string() + "]",
                None => v
                    .detail
                    .split(':')
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(60)
                    .collect(),
            }
        }
    };
    format!("{}: {gist}", v.outcome.name())
}

/// Runs a campaign over `target` (not `All`): `runner` runs the
/// subprocess sample (none without it); `failed` is told of each
/// reported failure as soon as it is shrunk.
pub fn run_target(
    target: Target,
    config: &Config,
    corpus: &Corpus,
    runner: Option<&dyn Runner>,
    failed: &mut dyn FnMut(&Failure),
) -> Summary {
    let _quiet = QuietPanics::install();
    let start = Instant::now();
    let mut worker = Worker::spawn();
    let strategy = proptest::collection::vec(any::<u32>(), 0..=CHOICES);
    let mut rng = TestRunner::new_with_rng(
        proptest::test_runner::Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &rng_seed(config.seed, target)),
    );
    let mut summary = Summary {
        target,
        cases: 0,
        counts: BTreeMap::new(),
        subprocess: 0,
        codes: BTreeMap::new(),
        kinds: BTreeMap::new(),
        seconds: 0.0,
        failures: Vec::new(),
    };
    for index in 0..config.cases {
        if config
            .time_limit
            .is_some_and(|limit| start.elapsed() >= limit)
        {
            break;
        }
        let Ok(mut tree) = strategy.new_tree(&mut rng) else {
            break;
        };
        let case = super::targets::generate(target, &tree.current(), corpus, config.fuel);
        let mut verdict = worker.judge(&case, config.case_timeout);
        let mut subprocess = false;
        let sampled = config.sample > 0
            && index % config.sample == 0
            && (!case.is_large() || index % (config.sample * 16) == 0);
        if let Some(r) = runner.filter(|_| sampled) {
            summary.subprocess += 1;
            let close = (index / config.sample.max(1)) % 4 == 3;
            let p = super::process::judge(&case, r, close);
            if p.outcome > verdict.outcome && p.outcome > Outcome::CleanError {
                verdict = p;
                subprocess = true;
            }
        }
        summary.cases += 1;
        *summary.counts.entry(verdict.outcome).or_default() += 1;
        if verdict.outcome == Outcome::CleanError {
            *summary.codes.entry(verdict.detail.clone()).or_default() += 1;
        }
        if verdict.outcome < Outcome::Known {
            continue;
        }
        let k = kind(&verdict);
        let seen = summary.kinds.entry(k).or_default();
        *seen += 1;
        if !verdict.outcome.is_failure() || *seen as usize > config.keep {
            continue;
        }
        let judge = |c: &Case, worker: &mut Worker| -> Verdict {
            if subprocess {
                match runner {
                    Some(r) => super::process::judge(c, r, false),
                    None => Verdict::ok(),
                }
            } else {
                worker.judge(c, config.case_timeout)
            }
        };
        let mut failure = Failure {
            target,
            index,
            case,
            verdict,
            subprocess,
            shrinks: 0,
        };
        if config.shrink && failure.verdict.outcome != Outcome::Timeout && !failure.case.is_large()
        {
            shrink(&mut failure, &mut tree, corpus, config, &mut worker, &judge);
        }
        failed(&failure);
        summary.failures.push(failure);
    }
    summary.seconds = start.elapsed().as_secs_f64();
    summary
}

/// Shrinks `f` in place: its choices through proptest's value tree, then
/// its program line by line, keeping each change after which it fails
/// the same way (at most 300 tries or 60 s).
fn shrink(
    f: &mut Failure,
    tree: &mut impl ValueTree<Value = Vec<u32>>,
    corpus: &Corpus,
    config: &Config,
    worker: &mut Worker,
    judge: &dyn Fn(&Case, &mut Worker) -> Verdict,
) {
    let start = Instant::now();
    let want = kind(&f.verdict);
    let mut tries = 0;
    let budget = |tries: usize| tries < 300 && start.elapsed() < Duration::from_secs(60);
    // The choices.
    if tree.simplify() {
        while budget(tries) {
            tries += 1;
            let c = super::targets::generate(f.target, &tree.current(), corpus, config.fuel);
            let v = judge(&c, worker);
            if kind(&v) == want {
                f.case = c;
                f.verdict = v;
                f.shrinks += 1;
                if !tree.simplify() {
                    break;
                }
            } else if !tree.complicate() {
                break;
            }
        }
    }
    // The program's lines, last first.
    let mut k = f.case.program.split(|b| *b == b'\n').count();
    while k > 0 && budget(tries) {
        k -= 1;
        let lines: Vec<&[u8]> = f.case.program.split(|b| *b == b'\n').collect();
        if k >= lines.len() || lines.len() < 2 {
            continue;
        }
        let mut c = f.case.clone();
        c.program = lines
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != k)
            .map(|(_, l)| *l)
            .collect::<Vec<_>>()
            .join(&b'\n');
        tries += 1;
        let v = judge(&c, worker);
        if kind(&v) == want {
            f.case = c;
            f.verdict = v;
            f.shrinks += 1;
        }
    }
}
