//! `fsmooth rules prove` (spec/rules-format.md §14): each scalar rule —
//! arithmetic, comparisons, conditionals over Double, Index and Bool —
//! translated to SMT-LIB (`smt.rs`) and decided by z3 (`z3.rs`) under two
//! readings: over the reals (the claim of an `ieee-inexact` rule, and a
//! necessary one of every rule) and in IEEE binary64, bit for bit, from
//! which the prover derives whether the rule is exact in binary64 and
//! checks its `ieee-inexact` tag. F̃'s ⊥ is explicit: every term is a pair
//! (defined, value), division by zero and Index overflow are ⊥, and a
//! metavariable may stand for a ⊥ term, so an equivalence is proved as
//! equivalence and a `refines` rule as refinement. A counterexample is
//! printed as an F̃ instance and replayed on the reference evaluator.
//! Rules with binders, loops or arrays are out of scope here (the
//! structural rules' route is a proof assistant).

mod classes;
pub mod coq;
pub mod smt;
pub mod z3;

use std::collections::HashMap;
use std::fmt;

use egg::{RecExpr, Var};

use crate::ir::Type;
use crate::opt::lang::{Dbl, Fsm};
use crate::opt::pattern::{Nodes, instantiate, root};
use crate::opt::rules::RuleDef;
use smt::{Reading, Ty, Typing};
use z3::{Answer, Sexp};

/// The solver's time limit per query, and the evaluator's fuel for a
/// replay.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub timeout_ms: u64,
    pub fuel: u64,
    /// Whether to decide the binary64 reading too (off: the reals only).
    pub ieee: bool,
    /// Instances `rules check` tries on a rule out of scope for SMT, to
    /// refute it (0: none). A structural rule's proof is Coq's
    /// (spec/rules-format.md §15); the search only finds counterexamples.
    pub search: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            timeout_ms: 10_000,
            fuel: 200_000,
            ieee: true,
            search: 200,
        }
    }
}

/// The outcome of one reading.
#[derive(Clone, Debug)]
pub enum Verdict {
    Proved,
    /// An instance where the claim fails: the metavariables' values, and
    /// the replay on the evaluator (`Err`: it confirms the failure).
    Counterexample {
        instance: Vec<(String, String)>,
        replay: Result<String, String>,
    },
    Unknown(String),
    OutOfScope(String),
}

impl Verdict {
    fn word(&self) -> &'static str {
        match self {
            Verdict::Proved => "proved",
            Verdict::Counterexample { .. } => "COUNTEREXAMPLE",
            Verdict::Unknown(_) => "unknown",
            Verdict::OutOfScope(_) => "out of scope",
        }
    }
}

/// One rule's proof.
#[derive(Clone, Debug)]
pub struct Report {
    pub name: String,
    pub family: String,
    pub reals: Verdict,
    pub ieee: Verdict,
    /// The rule is wrong as written: unsound over the reals, or its
    /// `ieee-inexact` tag disagrees with what binary64 gives.
    pub error: Option<String>,
}

/// Proves each of `rules`.
pub fn prove_rules(rules: &[RuleDef], opts: &Options) -> Vec<Report> {
    rules.iter().map(|r| prove_rule(r, opts)).collect()
}

/// Proves `rule` under both readings and judges its tags.
pub fn prove_rule(rule: &RuleDef, opts: &Options) -> Report {
    let (reals, ieee) = match smt::typings(rule) {
        Err(why) => match search(rule, opts) {
            // Found by search and confirmed on the evaluator, which is
            // the binary64 reading; over the reals it stands for ⊥ against
            // a value, or a capture, which no reading excuses.
            Some(v) => (v.clone(), v),
            None => (Verdict::OutOfScope(why.clone()), Verdict::OutOfScope(why)),
        },
        Ok(typings) => (
            reading(rule, &typings, Reading::Reals, opts),
            if opts.ieee {
                reading(rule, &typings, Reading::Ieee, opts)
            } else {
                Verdict::Unknown("not asked".into())
            },
        ),
    };
    let inexact = rule.has_tag("ieee-inexact");
    let structural = smt::typings(rule).is_err();
    let error = match (&reals, &ieee) {
        (Verdict::Counterexample { .. }, _) if structural => Some(
            "the rule does not hold: `rules check`'s search found an instance the evaluator confirms (the rule is out of scope for SMT)"
                .to_string(),
        ),
        (Verdict::Counterexample { .. }, _) => {
            Some("the rule does not hold over the reals".to_string())
        }
        (Verdict::Proved, Verdict::Proved) if inexact => {
            Some("the rule is exact in binary64: its `ieee-inexact` tag is not needed".to_string())
        }
        (_, Verdict::Counterexample { .. }) if !inexact => {
            Some("the rule does not hold in binary64 and is not tagged `ieee-inexact`".to_string())
        }
        _ => None,
    };
    Report {
        name: rule.name.clone(),
        family: rule.family.clone(),
        reals,
        ieee,
        error,
    }
}

/// A rule out of scope for SMT, refuted by `rules check`'s random
/// instances: its shrunk counterexample, evaluated on both sides.
fn search(rule: &RuleDef, opts: &Options) -> Option<Verdict> {
    if opts.search == 0 {
        return None;
    }
    let report = crate::rulecheck::check_rule(
        rule,
        &crate::rulecheck::Options {
            cases: opts.search,
            fuel: opts.fuel,
            ..crate::rulecheck::Options::default()
        },
    );
    let c = report.counterexample?;
    Some(Verdict::Counterexample {
        instance: c.bindings.clone(),
        replay: Err(format!(
            "confirmed (found by search): {}\n    left:  {}\n    right: {}",
            c.why,
            one_line(&c.lhs),
            one_line(&c.rhs)
        )),
    })
}

fn one_line(program: &str) -> String {
    program.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One reading: every typing proved, or the first that is not.
fn reading(rule: &RuleDef, typings: &[Typing], reading: Reading, opts: &Options) -> Verdict {
    for t in typings {
        let q = match smt::query(rule, t, reading) {
            Ok(q) => q,
            Err(why) => return Verdict::OutOfScope(why),
        };
        match z3::solve(&q, opts.timeout_ms) {
            Ok(Answer::Unsat) => continue,
            Ok(Answer::Sat(model)) => return counterexample(rule, t, &model, reading, opts),
            Ok(Answer::Unknown(why)) => return Verdict::Unknown(why),
            Err(why) => return Verdict::Unknown(why),
        }
    }
    Verdict::Proved
}

/// The model as an instance of the rule, replayed on the evaluator.
fn counterexample(
    rule: &RuleDef,
    t: &Typing,
    model: &[(String, Sexp)],
    reading: Reading,
    opts: &Options,
) -> Verdict {
    let get = |name: &str| model.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let mut nodes = Nodes(Vec::new());
    let mut binds: HashMap<Var, egg::Id> = HashMap::new();
    let mut instance = Vec::new();
    let mut data: Vec<String> = Vec::new();
    for (v, ty) in &t.vars {
        let m = smt::smt_name(v);
        let defined = get(&format!("{m}_d")) != Some(&Sexp::Atom("false".into()));
        let (id, shown) = if defined {
            let value = get(&format!("{m}_v"));
            literal(&mut nodes, *ty, value, &mut data)
        } else {
            bottom(&mut nodes, *ty)
        };
        binds.insert(*v, id);
        instance.push((v.to_string(), shown));
    }
    let side = |ast: &egg::PatternAst<Fsm>, nodes: &Nodes| {
        let mut out = Nodes(nodes.0.clone());
        instantiate(ast, root(ast), &mut out, &binds);
        RecExpr::from(out.0)
    };
    let (l, r) = (side(&rule.lhs.ast, &nodes), side(&rule.rhs.ast, &nodes));
    let ty = match t.result {
        Ty::Double | Ty::Any => Type::Double,
        Ty::Index => Type::Index,
        Ty::Bool => Type::Bool,
    };
    // A binary64 counterexample is replayed bit for bit (the rule without
    // its `ieee-inexact` tag): it shows the rule is not exact there.
    let mut judged = rule.clone();
    if reading == Reading::Ieee {
        judged.tags.retain(|t| t != "ieee-inexact");
    }
    let replay = crate::rulecheck::replay(&judged, (&l, &r), &ty, opts.fuel)
        .map(|ok| format!("not confirmed: {ok}"))
        .map_err(|why| format!("confirmed: {why}\n    left:  {l}\n    right: {r}"));
    Verdict::Counterexample { instance, replay }
}

/// A literal for a model value of type `ty` (an uninterpreted value, one
/// Double per distinct value), and how it is shown.
fn literal(
    nodes: &mut Nodes,
    ty: Ty,
    v: Option<&Sexp>,
    data: &mut Vec<String>,
) -> (egg::Id, String) {
    match ty {
        Ty::Double | Ty::Any => {
            let x = match (ty, v) {
                (Ty::Any, Some(Sexp::Atom(a))) => {
                    let k = data.iter().position(|d| d == a).unwrap_or_else(|| {
                        data.push(a.clone());
                        data.len() - 1
                    });
                    0.5 + k as f64
                }
                (_, Some(s)) => double_of(s).unwrap_or(f64::NAN),
                (_, None) => 0.0,
            };
            (nodes.add(Fsm::Double(Dbl::new(x))), format!("{x:?}"))
        }
        Ty::Index => {
            let i = v.and_then(index_of).unwrap_or(0);
            (nodes.add(Fsm::Int(i)), i.to_string())
        }
        Ty::Bool => {
            let b = v == Some(&Sexp::Atom("true".into()));
            (nodes.add(Fsm::Bool(b)), b.to_string())
        }
    }
}

/// A ⊥ term of type `ty`: a division by zero, or an Index overflow.
fn bottom(nodes: &mut Nodes, ty: Ty) -> (egg::Id, String) {
    let one = nodes.add(Fsm::Double(Dbl::new(1.0)));
    let zero = nodes.add(Fsm::Double(Dbl::new(0.0)));
    let div = nodes.add(Fsm::Div([one, zero]));
    match ty {
        Ty::Double | Ty::Any => (div, "1.0 / 0.0 (⊥)".into()),
        Ty::Index => {
            let max = nodes.add(Fsm::Int(i64::MAX));
            let one = nodes.add(Fsm::Int(1));
            (
                nodes.add(Fsm::Add([max, one])),
                "9223372036854775807 + 1 (⊥)".into(),
            )
        }
        Ty::Bool => (
            nodes.add(Fsm::Lt([div, zero])),
            "1.0 / 0.0 < 0.0 (⊥)".into(),
        ),
    }
}

/// A real or binary64 value of the solver as an f64.
fn double_of(s: &Sexp) -> Option<f64> {
    match s {
        Sexp::Atom(a) => a.parse().ok(),
        Sexp::List(items) => match items.as_slice() {
            [Sexp::Atom(op), x] if op == "-" => double_of(x).map(|x| -x),
            [Sexp::Atom(op), x, y] if op == "/" => Some(double_of(x)? / double_of(y)?),
            [Sexp::Atom(u), Sexp::Atom(k), _, _] if u == "_" => match k.as_str() {
                "+zero" => Some(0.0),
                "-zero" => Some(-0.0),
                "+oo" => Some(f64::INFINITY),
                "-oo" => Some(f64::NEG_INFINITY),
                "NaN" => Some(f64::NAN),
                _ => None,
            },
            [Sexp::Atom(f), Sexp::Atom(s), Sexp::Atom(e), Sexp::Atom(m)] if f == "fp" => {
                let (s, e, m) = (bits(s)?, bits(e)?, bits(m)?);
                Some(f64::from_bits((s << 63) | (e << 52) | m))
            }
            _ => None,
        },
    }
}

/// `#b…` or `#x…` as an integer.
fn bits(a: &str) -> Option<u64> {
    if let Some(b) = a.strip_prefix("#b") {
        u64::from_str_radix(b, 2).ok()
    } else if let Some(x) = a.strip_prefix("#x") {
        u64::from_str_radix(x, 16).ok()
    } else {
        None
    }
}

fn index_of(s: &Sexp) -> Option<i64> {
    match s {
        Sexp::Atom(a) => bits(a).map(|b| b as i64),
        Sexp::List(items) => match items.as_slice() {
            [Sexp::Atom(u), Sexp::Atom(bv), _] if u == "_" => {
                bv.strip_prefix("bv")?.parse::<u64>().ok().map(|b| b as i64)
            }
            _ => None,
        },
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<22} {:<7} {:<15} {:<15}",
            self.name,
            self.family,
            self.reals.word(),
            self.ieee.word()
        )?;
        if let Some(e) = &self.error {
            write!(f, "  error: {e}")?;
        }
        for (what, v) in [("reals", &self.reals), ("binary64", &self.ieee)] {
            match v {
                // A counterexample found by search stands for both readings.
                Verdict::Counterexample { replay, .. }
                    if what == "binary64"
                        && matches!(&self.reals, Verdict::Counterexample { replay: r, .. } if r == replay) =>
                    {}
                Verdict::Counterexample { instance, replay } => {
                    let inst: Vec<String> = instance
                        .iter()
                        .map(|(k, v)| format!("{k} := {v}"))
                        .collect();
                    write!(f, "\n    {what}: {}", inst.join(", "))?;
                    match replay {
                        Ok(why) => write!(f, "\n      replay {why}")?,
                        Err(why) => write!(f, "\n      replay {why}")?,
                    }
                }
                Verdict::Unknown(why) => write!(f, "\n    {what}: the solver gave up ({why})")?,
                _ => {}
            }
        }
        Ok(())
    }
}
