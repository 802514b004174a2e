//! The transformation strategy of seed 001 §5.2 (Fig. 9) on egg: phases
//! run one after the other, each an equality saturation over its rule
//! group, bounded by node, iteration and time limits, followed by
//! extraction of the cheapest term, which starts the next phase. A phase
//! that hits a limit ends gracefully with the best term found so far.
//!
//! Extraction cost counts loops by their trip counts: a loop's body costs
//! `TRIP` times its size, so a nested loop costs `TRIP²`; `n` is unknown at
//! compile time, and any large constant orders programs by their
//! asymptotic cost.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use egg::{CostFunction, Extractor, Id, Language, RecExpr, Runner, StopReason, TreeTerm};

use super::analysis::{FsmAnalysis, Graph, node_free, node_total};
use super::check::{CheckReport, check_tree_with};
use super::lang::{Fsm, subexpr};
use super::rules::{RuleDef, rewrite};

/// Resource limits of one phase (spec/rules-format.md §9.1: the
/// iteration limit is the one most phases reach).
#[derive(Copy, Clone, Debug)]
pub struct OptLimits {
    pub nodes: usize,
    /// Iterations of a phase of the first pass of Fig. 9's sequence ...
    pub iterations: usize,
    /// ... and of the phases after it, which refine its result.
    pub refine_iterations: usize,
    pub time: Duration,
}

impl Default for OptLimits {
    fn default() -> OptLimits {
        OptLimits {
            nodes: 20_000,
            iterations: 16,
            refine_iterations: 6,
            // A safety net, not a limit that decides results: the node and
            // iteration limits do, the same on any machine under any load
            // (spec/rules-format.md §9.1).
            time: Duration::from_secs(60),
        }
    }
}

/// What a phase did.
#[derive(Clone, Debug)]
pub struct PhaseStats {
    pub phase: &'static str,
    pub iterations: usize,
    pub nodes: usize,
    pub classes: usize,
    pub time: Duration,
    pub stop: String,
    /// Applications per rule, by name.
    pub applied: BTreeMap<String, usize>,
    pub cost_before: f64,
    pub cost_after: f64,
    /// Where `time` went.
    pub split: PhaseSplit,
}

/// A phase's time by activity: egg's e-matching, rule application and
/// rebuilding, summed over the iterations, and the final extraction.
#[derive(Copy, Clone, Debug, Default)]
pub struct PhaseSplit {
    pub search: Duration,
    pub apply: Duration,
    pub rebuild: Duration,
    pub extract: Duration,
}

/// Loop-aware extraction cost.
pub struct LoopCost {
    /// The members of the e-graph extracted from that may not be
    /// extracted: a node is eligible only if it uses exactly its class's
    /// free variables (see `new`). Judged once per node, not once per
    /// visit of the extractor's fixpoint.
    ineligible: HashSet<Fsm>,
}

impl LoopCost {
    pub fn new(egraph: &Graph) -> LoopCost {
        // Classes merge their free variables by intersection (analysis.rs):
        // a member that uses more than its class, such as the dead
        // `let x = e in y` in the class of `y`, is never extracted, so the
        // conditions judged on classes (`not-free`, `only-fst`, …) hold
        // of the output. Every class holds one eligible member in
        // practice (the term that dropped the variable); one without any
        // costs infinity, and a phase whose root does keeps its input.
        // Likewise `total` (merged by OR, one total member makes the class
        // total): in a total class only a total member is eligible, so
        // what `total ?e` allowed holds of the term extracted. (The graph
        // is rebuilt before extraction: its nodes are canonical, as the
        // extractor asks for them.)
        let mut ineligible = HashSet::default();
        for class in egraph.classes() {
            for node in &class.nodes {
                if node_free(egraph, node) != class.data.free
                    || (class.data.total && !node_total(egraph, node))
                {
                    ineligible.insert(node.clone());
                }
            }
        }
        LoopCost { ineligible }
    }
}

/// The assumed trip count of every loop.
pub const TRIP: f64 = 100.0;

/// The cost of a division node besides its operands: a double division's
/// throughput is about a quarter of a multiplication's (x86-64: `divsd`
/// one per 4–5 cycles, `mulsd` two per cycle).
pub const DIV: f64 = 4.0;

impl CostFunction<Fsm> for LoopCost {
    type Cost = f64;
    fn cost<C>(&mut self, enode: &Fsm, mut costs: C) -> f64
    where
        C: FnMut(Id) -> f64,
    {
        if self.ineligible.contains(enode) {
            return f64::INFINITY;
        }
        match enode {
            Fsm::Symbol(_) | Fsm::Bool(_) | Fsm::Int(_) | Fsm::Double(_) => 0.1,
            Fsm::Var(_) => 0.2,
            Fsm::Lam([_, b]) => costs(*b),
            // A `let` is nearly free: it names a value.
            Fsm::Let([_, v, b]) => 0.05 + costs(*v) + costs(*b),
            Fsm::Build([n, f]) => 1.0 + costs(*n) + TRIP * costs(*f),
            Fsm::IFold([f, z, n]) | Fsm::IScan([f, z, n]) => {
                1.0 + costs(*z) + costs(*n) + TRIP * costs(*f)
            }
            // The test runs once more than the step: both count TRIP times.
            Fsm::While([c, f, z]) => 1.0 + costs(*z) + TRIP * (costs(*c) + costs(*f)),
            // Calls are inlined away when possible.
            Fsm::App([f, a]) => 2.0 + costs(*f) + costs(*a),
            // A division costs several multiplications (spec/rules-format.md §9.2).
            Fsm::Div([a, b]) => DIV + costs(*a) + costs(*b),
            _ => enode.fold(1.0, |acc, c| acc + costs(c)),
        }
    }
}

/// The most term nodes a flat explanation that `opt --explain` prints may
/// hold (all its steps' terms): the flat form copies the whole term once
/// per step. (`opt --check` replays the tree form, `check_tree_with`.)
const MAX_FLAT_EXPLANATION: u64 = 1_000_000;

/// The number of rewrite steps of an explanation once flattened (shared
/// sub-proofs counted once per use), saturating.
fn flat_steps(proof: &[Rc<TreeTerm<Fsm>>], memo: &mut HashMap<*const TreeTerm<Fsm>, u64>) -> u64 {
    let mut n: u64 = 0;
    for t in proof {
        let key = Rc::as_ptr(t);
        let k = match memo.get(&key) {
            Some(k) => *k,
            None => {
                let own = u64::from(t.forward_rule.is_some() || t.backward_rule.is_some());
                let k = t
                    .child_proofs
                    .iter()
                    .fold(own, |acc, c| acc.saturating_add(flat_steps(c, memo)));
                memo.insert(key, k);
                k
            }
        };
        n = n.saturating_add(k);
    }
    n
}

/// How one phase runs: with explanations (`--explain`), with every step
/// verified (`--check`), and its ordinal among the phase runs of one
/// optimisation (part of `fresh` names).
#[derive(Clone, Debug, Default)]
pub struct PhaseRun {
    pub explain: bool,
    pub check: bool,
    pub nonce: u32,
    /// The [`Data::depth`](super::analysis::Data::depth) of the entry's
    /// parameters.
    pub seeds: HashMap<egg::Symbol, u8>,
}

/// One phase: saturate `expr` with `rules` and extract the best term.
pub fn run_phase(
    phase: &'static str,
    expr: &RecExpr<Fsm>,
    bounds: &[(egg::Symbol, usize)],
    rules: &[&RuleDef],
    limits: OptLimits,
    run: PhaseRun,
) -> (RecExpr<Fsm>, PhaseStats, Vec<String>, CheckReport) {
    let PhaseRun {
        explain,
        check,
        nonce,
        seeds,
    } = run;
    let var_depth = seeds;
    let start = Instant::now();
    let rewrites: Vec<_> = rules.iter().map(|r| rewrite(r)).collect();
    let mut egraph = Graph::new(FsmAnalysis {
        nonce,
        var_depth: var_depth.clone(),
        ..FsmAnalysis::default()
    });
    // Note [Explanations always]: egg's explanation mode adds and unions
    // nodes differently (every node added gets a class of its own, then
    // is unioned with its equals), so classes are numbered differently,
    // the backoff scheduler sees other match counts, and `fresh` names
    // differ: a phase reaches other terms within its limits. With it on
    // only under `--check`, the CLI's `--mode fwd-opt` of ∂(u M vᵀ)/∂M
    // was O(n³) while the tests (which check) saw the paper's O(n²)
    // `u[i] * v[j]`. The optimiser's result must not depend on whether it
    // is explained or checked, so explanations are always on; they cost
    // about as much time in these programs.
    egraph = egraph.with_explanations_enabled();
    let root = egraph.add_expr(expr);
    // Loop sizes by index symbol, as e-classes of this graph.
    for (s, idx) in bounds {
        let sub = subexpr(expr, Id::from(*idx));
        let id = egraph.add_expr(&sub);
        egraph.analysis.loop_bounds.insert(*s, id);
    }
    egraph.rebuild();
    let cost_before = Extractor::new(&egraph, LoopCost::new(&egraph))
        .find_best(root)
        .0;
    let mut runner = Runner::default()
        .with_scheduler(egg::BackoffScheduler::default().with_initial_match_limit(200))
        .with_egraph(egraph)
        .with_node_limit(limits.nodes)
        .with_iter_limit(limits.iterations)
        .with_time_limit(limits.time)
        .run(&rewrites);
    let mut split = PhaseSplit::default();
    for it in &runner.iterations {
        split.search += Duration::from_secs_f64(it.search_time);
        split.apply += Duration::from_secs_f64(it.apply_time);
        split.rebuild += Duration::from_secs_f64(it.rebuild_time);
    }
    let extract_start = Instant::now();
    let root = runner.egraph.find(root);
    let (cost_after, best) =
        Extractor::new(&runner.egraph, LoopCost::new(&runner.egraph)).find_best(root);
    split.extract = extract_start.elapsed();
    let mut applied: BTreeMap<String, usize> = BTreeMap::new();
    for it in &runner.iterations {
        for (r, n) in &it.applied {
            *applied.entry(r.to_string()).or_insert(0) += n;
        }
    }
    let mut stop = match &runner.stop_reason {
        Some(StopReason::Saturated) => "saturated".to_string(),
        Some(StopReason::IterationLimit(n)) => format!("iteration limit ({n})"),
        Some(StopReason::NodeLimit(n)) => format!("node limit ({n})"),
        Some(StopReason::TimeLimit(t)) => format!("time limit ({t:.1} s)"),
        Some(StopReason::Other(s)) => s.clone(),
        None => "not run".to_string(),
    };
    // No eligible member (see `LoopCost`) cheaper than the input: keep it.
    // Nor when the e-graph equated two different constants (Note
    // [Conflicting constants] in `analysis.rs`).
    let conflict = runner.egraph.analysis.conflict.clone();
    let (cost_after, best) = if let Some((a, b)) = &conflict {
        stop.push_str(&format!(
            " (input kept: the e-graph equated the constants {a} and {b}, a ⊥ refined to two values)"
        ));
        (cost_before, expr.clone())
    } else if cost_after.is_finite() && cost_after <= cost_before {
        (cost_after, best)
    } else {
        stop.push_str(" (input kept: no eligible term as cheap)");
        (cost_before, expr.clone())
    };
    let mut steps = Vec::new();
    let mut checked = CheckReport::default();
    if (explain && cost_after < cost_before) || (check && best != *expr) {
        let mut ex = runner.explain_equivalence(expr, &best);
        if check {
            // The tree form: each step on the subterm it rewrites.
            checked = check_tree_with(&ex.explanation_trees, rules, &var_depth);
            for why in &mut checked.skipped {
                *why = format!("phase {phase}: {why}");
            }
        }
        if explain && cost_after < cost_before {
            // The flat form copies the whole term once per step, and shared
            // sub-proofs are copied once per use: bound it before making it.
            let n = flat_steps(&ex.explanation_trees, &mut HashMap::default());
            let size = n.saturating_mul((expr.as_ref().len() + best.as_ref().len()) as u64);
            steps = if size > MAX_FLAT_EXPLANATION {
                vec![format!(
                    "(phase {phase}: explanation of {n} steps over terms of {} nodes is too long to print)",
                    expr.as_ref().len()
                )]
            } else {
                ex.get_flat_strings()
            };
        }
    }
    let stats = PhaseStats {
        phase,
        iterations: runner.iterations.len(),
        nodes: runner.egraph.total_size(),
        classes: runner.egraph.number_of_classes(),
        time: start.elapsed(),
        stop,
        applied,
        cost_before,
        cost_after,
        split,
    };
    (best, stats, steps, checked)
}
