//! Every side condition of the shipped rules is needed (issue
//! "Reliability", finding 12): the rule set with just that `if` line
//! removed fails the check the condition serves. A condition the rule's
//! claim needs is caught by `rules check` (`rulecheck::check_rule` on the
//! rule without it finds a counterexample within a fixed seed's first
//! `cases` cases); a `fresh` condition by the loader (the right side
//! would use an unbound variable); a condition that protects the e-graph
//! rather than the rule's soundness by an optimiser test that shows the
//! harm: `free-in` and the like, a phase's e-graph at least twice as large
//! for the same result; `not-known-zero`, a phase that equates two
//! constants and keeps its input (Note [Conflicting constants]).
//!
//! `CHECKS` lists, per condition, the check that catches its deletion. It
//! is complete: a condition added to a rule file without an entry fails
//! `every_side_condition_has_a_check`, and an entry for a condition that
//! no longer exists fails it too. The seed of a `Rules` entry is the one
//! of `0..12` whose stream fails soonest, and `cases` the number of cases
//! it needs, found by running `check_rule` (a change to the generator in
//! `src/rulecheck/` changes the streams: find them again the same way).

use egg::{ENodeOrVar, Id, Language, RecExpr};
use fsmooth::opt::engine::{OptLimits, PhaseRun, PhaseStats, run_phase};
use fsmooth::opt::lang::Fsm;
use fsmooth::opt::rules::DEFAULT_FAMILIES;
use fsmooth::opt::{RuleDef, RuleError, RuleFile, load};
use fsmooth::rulecheck::{Options, check_rule};

/// What catches the deletion of one condition.
#[derive(Clone, Copy, Debug)]
enum Check {
    /// `rules check` on the rule without the condition fails within the
    /// first `cases` cases of `seed`.
    Rules { seed: u64, cases: u64 },
    /// The rule without the condition does not load: its right side uses
    /// the variable the `fresh` condition binds (`unbound-pattern-variable`).
    Loader,
    /// `let d = 1.0 in` (three such dead `let`s) around six nested copies
    /// of the construct the rule pushes a `let` into (`dead_lets`); then as
    /// `Grows`: without `free-in` the dead `let`s are pushed into every
    /// copy.
    DeadLets,
    /// The e-graph of a `simplify` phase on the term grows to at least
    /// twice its size without the condition, for the same result.
    Grows(&'static str),
    /// A `simplify` phase on the term equates two different constants
    /// without the condition (so it keeps its input), and not with it.
    Conflict(&'static str),
}

use Check::{Conflict, DeadLets, Grows, Loader, Rules};

/// The check that catches the deletion of each condition of the shipped
/// rules: (rule, condition as written after `if`, check).
const CHECKS: &[(&str, &str, Check)] = &[
    // subst
    (
        "let-var-other",
        "distinct ?x ?y",
        Rules { seed: 2, cases: 1 },
    ),
    ("let-const", "const ?c", Rules { seed: 6, cases: 2 }),
    ("let-lam-other", "free-in ?x ?b", DeadLets),
    (
        "let-lam-other",
        "distinct ?x ?y",
        Rules { seed: 1, cases: 5 },
    ),
    (
        "let-lam-other",
        "not-free ?y ?e",
        Rules {
            seed: 11,
            cases: 21,
        },
    ),
    ("let-lam-other", "total ?e", Rules { seed: 11, cases: 1 }),
    // Dead `let`s of values that mention the binder `y` below them.
    (
        "let-lam-rename",
        "free-in ?x ?b",
        Grows(
            "(let d0 (var y) (let d1 (var y) (let d2 (var y) (lam y (lam y (lam y (lam y (lam y (lam y (var a))))))))))",
        ),
    ),
    // A `let` of `x` over a `fun x` that shadows it: `let-lam-same` drops
    // the `let`; without the condition the binder is renamed as well.
    (
        "let-lam-rename",
        "distinct ?x ?y",
        Grows("(let x (var x) (lam x (+ (var x) (var a))))"),
    ),
    // A `let` whose value does not mention the binders below it: pushed
    // in by `let-lam-other`; without the condition, each binder is also
    // renamed.
    (
        "let-lam-rename",
        "free-in ?y ?e",
        Grows(
            "(let x (var c) (lam y0 (lam y1 (lam y2 (lam y3 (lam y4 (lam y5 (+ (var x) (var a)))))))))",
        ),
    ),
    ("let-lam-rename", "total ?e", Rules { seed: 5, cases: 15 }),
    ("let-lam-rename", "fresh ?z", Loader),
    // Dead `let`s of `x` over `let`s of `x` whose values do not use it.
    (
        "let-let-same",
        "free-in ?x ?v",
        Grows(
            "(let x 1.0 (let x 2.0 (let x 3.0 (let x (+ (var a) 4.0) (let x (+ (var a) 5.0) (let x (+ (var a) 6.0) (var x)))))))",
        ),
    ),
    ("let-let-other", "free-in ?x ?v ?b", DeadLets),
    (
        "let-let-other",
        "distinct ?x ?y",
        Rules { seed: 1, cases: 5 },
    ),
    (
        "let-let-other",
        "not-free ?y ?e",
        Rules { seed: 5, cases: 3 },
    ),
    ("let-add", "free-in ?x ?a ?b", DeadLets),
    ("let-sub", "free-in ?x ?a ?b", DeadLets),
    ("let-mul", "free-in ?x ?a ?b", DeadLets),
    ("let-div", "free-in ?x ?a ?b", DeadLets),
    ("let-pow", "free-in ?x ?a ?b", DeadLets),
    ("let-lt", "free-in ?x ?a ?b", DeadLets),
    ("let-gt", "free-in ?x ?a ?b", DeadLets),
    ("let-le", "free-in ?x ?a ?b", DeadLets),
    ("let-ge", "free-in ?x ?a ?b", DeadLets),
    ("let-eq", "free-in ?x ?a ?b", DeadLets),
    ("let-ne", "free-in ?x ?a ?b", DeadLets),
    ("let-get", "free-in ?x ?a ?b", DeadLets),
    ("let-pair", "free-in ?x ?a ?b", DeadLets),
    ("let-app", "free-in ?x ?a ?b", DeadLets),
    ("let-neg", "free-in ?x ?a", DeadLets),
    ("let-not", "free-in ?x ?a", DeadLets),
    ("let-sin", "free-in ?x ?a", DeadLets),
    ("let-cos", "free-in ?x ?a", DeadLets),
    ("let-tan", "free-in ?x ?a", DeadLets),
    ("let-log", "free-in ?x ?a", DeadLets),
    ("let-exp", "free-in ?x ?a", DeadLets),
    ("let-sqrt", "free-in ?x ?a", DeadLets),
    ("let-to-double", "free-in ?x ?a", DeadLets),
    ("let-length", "free-in ?x ?a", DeadLets),
    ("let-fst", "free-in ?x ?a", DeadLets),
    ("let-snd", "free-in ?x ?a", DeadLets),
    ("let-concat", "free-in ?x ?a", DeadLets),
    ("let-if", "free-in ?x ?a ?b ?c", DeadLets),
    ("let-ifold", "free-in ?x ?a ?b ?c", DeadLets),
    ("let-iscan", "free-in ?x ?a ?b ?c", DeadLets),
    ("let-accum", "free-in ?x ?a ?b ?c", DeadLets),
    ("let-build", "free-in ?x ?n ?f", DeadLets),
    // lambda
    ("let-dead", "not-free ?x ?e1", Rules { seed: 1, cases: 3 }),
    ("let-float", "not-free ?y ?e2", Rules { seed: 0, cases: 2 }),
    (
        "let-cse",
        "not-free ?x ?e0",
        Rules {
            seed: 10,
            cases: 10,
        },
    ),
    ("licm-build", "distinct ?x ?i", Rules { seed: 6, cases: 3 }),
    ("licm-build", "not-free ?x ?n", Rules { seed: 1, cases: 2 }),
    (
        "licm-build",
        "not-free ?i ?e0",
        Rules { seed: 0, cases: 17 },
    ),
    ("licm-build", "total ?e0", Rules { seed: 1, cases: 7 }),
    ("licm-ifold", "distinct ?x ?i", Rules { seed: 4, cases: 15 }),
    ("licm-ifold", "distinct ?x ?a", Rules { seed: 9, cases: 8 }),
    ("licm-ifold", "not-free ?x ?z", Rules { seed: 2, cases: 6 }),
    ("licm-ifold", "not-free ?x ?n", Rules { seed: 11, cases: 3 }),
    (
        "licm-ifold",
        "not-free ?a ?e0",
        Rules { seed: 6, cases: 12 },
    ),
    (
        "licm-ifold",
        "not-free ?i ?e0",
        Rules { seed: 7, cases: 68 },
    ),
    ("licm-ifold", "total ?e0", Rules { seed: 0, cases: 55 }),
    (
        "licm-build-guarded",
        "distinct ?x ?i",
        Rules { seed: 8, cases: 3 },
    ),
    (
        "licm-build-guarded",
        "not-free ?i ?e0",
        Rules { seed: 0, cases: 3 },
    ),
    ("licm-build-guarded", "fresh ?k", Loader),
    (
        "licm-ifold-guarded",
        "distinct ?x ?i",
        Rules { seed: 8, cases: 4 },
    ),
    (
        "licm-ifold-guarded",
        "distinct ?x ?a",
        Rules { seed: 3, cases: 3 },
    ),
    (
        "licm-ifold-guarded",
        "not-free ?a ?e0",
        Rules { seed: 11, cases: 3 },
    ),
    (
        "licm-ifold-guarded",
        "not-free ?i ?e0",
        Rules { seed: 4, cases: 18 },
    ),
    ("licm-ifold-guarded", "fresh ?w", Loader),
    ("licm-ifold-guarded", "fresh ?k", Loader),
    ("licm-while", "distinct ?x ?s", Rules { seed: 4, cases: 8 }),
    ("licm-while", "not-free ?x ?c", Rules { seed: 7, cases: 24 }),
    ("licm-while", "not-free ?x ?z", Rules { seed: 1, cases: 3 }),
    (
        "licm-while",
        "not-free ?s ?e0",
        Rules { seed: 10, cases: 2 },
    ),
    ("licm-while", "total ?e0", Rules { seed: 5, cases: 1 }),
    (
        "licm-while-cond",
        "distinct ?x ?s",
        Rules { seed: 6, cases: 2 },
    ),
    (
        "licm-while-cond",
        "not-free ?x ?f",
        Rules { seed: 11, cases: 2 },
    ),
    (
        "licm-while-cond",
        "not-free ?s ?e0",
        Rules { seed: 2, cases: 2 },
    ),
    ("licm-while-cond", "fresh ?w", Loader),
    // ring
    ("add-neg", "double ?e", Rules { seed: 1, cases: 2 }),
    ("sub-self", "double ?e", Rules { seed: 0, cases: 1 }),
    (
        "zero-div",
        "not-known-zero ?e",
        Conflict("(- 1.0 (* 0.0 (/ 0.0 (/ (/ 0.0 0.0) 1.0))))"),
    ),
    ("add-neg-sub", "double ?b", Rules { seed: 10, cases: 1 }),
    ("factor", "double ?b", Rules { seed: 2, cases: 10 }),
    (
        "div-add",
        "not-known-zero ?c",
        Conflict("(/ (+ (- 1.0 0.0) 1.0) (/ 0.0 (/ 0.0 (* (var q) 0.0))))"),
    ),
    ("div-add", "double ?a", Rules { seed: 0, cases: 2 }),
    (
        "div-sub",
        "not-known-zero ?c",
        Conflict("(/ (- (- 1.0 0.0) 1.0) (/ 0.0 (/ 0.0 (* (var q) 0.0))))"),
    ),
    ("div-sub", "double ?a", Rules { seed: 7, cases: 4 }),
    (
        "sub-mul-div",
        "not-known-zero ?d",
        Conflict("(- 1.0 (* 0.0 (/ 0.0 0.0)))"),
    ),
    ("sub-mul-div", "double ?a", Rules { seed: 0, cases: 2 }),
    (
        "div-div",
        "not-known-zero ?b",
        Conflict("(/ 0.0 (/ (* (* 1.0 0.0) (- 1.0 0.0)) (neg 0.0)))"),
    ),
    (
        "div-div",
        "not-known-zero ?c",
        Conflict("(/ 0.0 (/ (* (* 1.0 0.0) (- 1.0 0.0)) (neg 0.0)))"),
    ),
    ("div-div", "double ?a", Rules { seed: 0, cases: 1 }),
    // cond
    ("index-nonneg", "index ?i", Rules { seed: 0, cases: 1 }),
    (
        "in-bounds-lt",
        "in-bounds ?i ?n",
        Rules { seed: 0, cases: 1 },
    ),
    // loop
    (
        "ifold-unchanged",
        "distinct ?a ?i",
        Rules { seed: 10, cases: 6 },
    ),
    (
        "ifold-single",
        "distinct ?a ?i",
        Rules { seed: 3, cases: 1 },
    ),
    (
        "ifold-single",
        "in-bounds ?e0 ?n",
        Rules { seed: 7, cases: 5 },
    ),
    (
        "ifold-single",
        "not-free ?a ?e0",
        Rules { seed: 9, cases: 34 },
    ),
    (
        "ifold-single",
        "not-free ?i ?e0",
        Rules { seed: 5, cases: 4 },
    ),
    (
        "ifold-single-sym",
        "distinct ?a ?i",
        Rules {
            seed: 11,
            cases: 10,
        },
    ),
    (
        "ifold-single-sym",
        "in-bounds ?e0 ?n",
        Rules { seed: 5, cases: 5 },
    ),
    (
        "ifold-single-sym",
        "not-free ?a ?e0",
        Rules { seed: 9, cases: 13 },
    ),
    (
        "ifold-single-sym",
        "not-free ?i ?e0",
        Rules { seed: 3, cases: 3 },
    ),
    (
        "ifold-single-guarded",
        "distinct ?a ?i",
        Rules { seed: 7, cases: 2 },
    ),
    (
        "ifold-single-guarded",
        "not-free ?a ?e0",
        Rules { seed: 5, cases: 8 },
    ),
    (
        "ifold-single-guarded",
        "not-free ?i ?e0",
        Rules { seed: 11, cases: 2 },
    ),
    (
        "ifold-single-guarded",
        "total ?e0",
        Rules { seed: 5, cases: 13 },
    ),
    ("ifold-single-guarded", "fresh ?w", Loader),
    ("ifold-single-guarded", "fresh ?k", Loader),
    ("ifold-single-guarded", "fresh ?j", Loader),
    (
        "ifold-single-guarded-sym",
        "distinct ?a ?i",
        Rules { seed: 4, cases: 11 },
    ),
    (
        "ifold-single-guarded-sym",
        "not-free ?a ?e0",
        Rules { seed: 10, cases: 2 },
    ),
    (
        "ifold-single-guarded-sym",
        "not-free ?i ?e0",
        Rules { seed: 2, cases: 3 },
    ),
    (
        "ifold-single-guarded-sym",
        "total ?e0",
        Rules { seed: 1, cases: 7 },
    ),
    ("ifold-single-guarded-sym", "fresh ?w", Loader),
    ("ifold-single-guarded-sym", "fresh ?k", Loader),
    ("ifold-single-guarded-sym", "fresh ?j", Loader),
    (
        "ifold-unswitch",
        "distinct ?a ?i",
        Rules { seed: 2, cases: 4 },
    ),
    (
        "ifold-unswitch",
        "not-free ?a ?c",
        Rules { seed: 1, cases: 3 },
    ),
    (
        "ifold-unswitch",
        "not-free ?i ?c",
        Rules {
            seed: 10,
            cases: 21,
        },
    ),
    ("ifold-unswitch", "total ?c", Rules { seed: 5, cases: 4 }),
    ("ifold-unswitch", "fresh ?s", Loader),
    // fission
    (
        "fission-fst",
        "only-fst ?a ?b0",
        Rules { seed: 4, cases: 2 },
    ),
    (
        "fission-fst",
        "not-free ?i ?z1",
        Rules { seed: 6, cases: 2 },
    ),
    ("fission-fst", "fresh ?s", Loader),
    (
        "fission-snd",
        "only-snd ?a ?b1",
        Rules { seed: 1, cases: 1 },
    ),
    (
        "fission-snd",
        "not-free ?i ?z0",
        Rules { seed: 1, cases: 2 },
    ),
    ("fission-snd", "fresh ?s", Loader),
    (
        "ifold-onehot",
        "only-fst ?s ?c",
        Rules { seed: 10, cases: 5 },
    ),
    (
        "ifold-onehot",
        "only-fst ?s ?a",
        Rules { seed: 9, cases: 2 },
    ),
    (
        "ifold-onehot",
        "only-fst ?s ?k",
        Rules { seed: 4, cases: 14 },
    ),
    (
        "ifold-onehot",
        "not-free ?s ?i",
        Rules {
            seed: 6,
            cases: 343,
        },
    ),
    (
        "ifold-onehot",
        "not-free ?j ?i",
        Rules { seed: 1, cases: 10 },
    ),
    ("ifold-onehot", "fresh ?m", Loader),
];

/// One condition of a shipped rule: the rule, the condition's index among
/// its `if` lines, and its text.
struct Condition<'a> {
    rule: &'a RuleDef,
    index: usize,
    text: String,
}

/// Every condition of the shipped rules, in rule-file order.
fn conditions(rules: &[RuleDef]) -> Vec<Condition<'_>> {
    rules
        .iter()
        .flat_map(|rule| {
            rule.conds
                .iter()
                .enumerate()
                .map(move |(index, c)| Condition {
                    rule,
                    index,
                    text: c.to_string(),
                })
        })
        .collect()
}

fn check_of(c: &Condition) -> Option<Check> {
    CHECKS
        .iter()
        .find(|(r, t, _)| *r == c.rule.name && *t == c.text)
        .map(|(_, _, k)| *k)
}

/// The shipped rule set with the condition's `if` line removed from its
/// family's file (which then replaces the default family), as `--rules`
/// would load it.
fn without(c: &Condition) -> Result<Vec<RuleDef>, RuleError> {
    let (_, text) = DEFAULT_FAMILIES
        .iter()
        .find(|(f, _)| *f == c.rule.family)
        .expect("a default family");
    let lines: Vec<&str> = text.lines().collect();
    // The rule's `if` lines follow its `rule` line, in the order of `conds`.
    let at = lines
        .iter()
        .enumerate()
        .skip(c.rule.line)
        .filter(|(_, l)| l.trim_start().starts_with("if "))
        .nth(c.index)
        .map(|(k, _)| k)
        .expect("the condition's line");
    assert_eq!(
        lines[at].trim(),
        format!("if {}", c.text),
        "{}",
        c.rule.name
    );
    let edited: String = lines
        .iter()
        .enumerate()
        .filter(|(k, _)| *k != at)
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    load(Some(&[RuleFile {
        path: format!("{}.rules", c.rule.family),
        text: edited,
    }]))
}

#[test]
fn every_side_condition_has_a_check() {
    let rules = load(None).expect("default rules load");
    let conds = conditions(&rules);
    let missing: Vec<String> = conds
        .iter()
        .filter(|c| check_of(c).is_none())
        .map(|c| format!("({:?}, {:?})", c.rule.name, c.text))
        .collect();
    assert!(
        missing.is_empty(),
        "conditions without a check that catches their deletion (add them to CHECKS):\n{}",
        missing.join("\n")
    );
    let stale: Vec<String> = CHECKS
        .iter()
        .filter(|(r, t, _)| !conds.iter().any(|c| c.rule.name == *r && c.text == *t))
        .map(|(r, t, _)| format!("({r:?}, {t:?})"))
        .collect();
    assert!(stale.is_empty(), "entries for no condition: {stale:?}");
    assert_eq!(CHECKS.len(), conds.len(), "a condition listed twice");
}

/// The rule of `rules` named like `c`'s.
fn rule_of<'a>(rules: &'a [RuleDef], c: &Condition) -> &'a RuleDef {
    rules
        .iter()
        .find(|r| r.name == c.rule.name)
        .expect("the rule is still loaded")
}

#[test]
fn deleting_a_condition_the_claim_needs_fails_rules_check() {
    let rules = load(None).expect("default rules load");
    let mut caught = 0;
    for c in conditions(&rules) {
        match check_of(&c) {
            Some(Rules { seed, cases }) => {
                let without = without(&c).expect("loads without the condition");
                let rule = rule_of(&without, &c);
                assert_eq!(rule.conds.len() + 1, c.rule.conds.len());
                let report = check_rule(
                    rule,
                    &Options {
                        cases,
                        seed,
                        ..Options::default()
                    },
                );
                assert!(
                    report.failed > 0,
                    "{} without `{}`: no counterexample in {cases} cases of seed {seed}",
                    c.rule.name,
                    c.text
                );
                caught += 1;
            }
            Some(Loader) => {
                let err = without(&c).expect_err("a rule without its `fresh` does not load");
                assert_eq!(err.code, "unbound-pattern-variable", "{err}");
                caught += 1;
            }
            _ => {}
        }
    }
    assert!(caught > 0);
}

/// A `simplify` phase of the optimiser on `term` with `rules`, with `p`
/// and `q` known to be Doubles.
fn simplify(rules: &[RuleDef], term: &RecExpr<Fsm>) -> (RecExpr<Fsm>, PhaseStats) {
    let group: Vec<&RuleDef> = rules
        .iter()
        .filter(|r| r.phases().is_empty() || r.phases().contains(&"simplify"))
        .collect();
    let seeds = ["p", "q"]
        .into_iter()
        .map(|v| (egg::Symbol::from(v), 0))
        .collect();
    let (best, stats, _, _) = run_phase(
        "simplify",
        term,
        &[],
        &group,
        OptLimits::default(),
        PhaseRun {
            seeds,
            ..PhaseRun::default()
        },
    );
    (best, stats)
}

/// Three dead `let`s around six nested copies of the construct that
/// `rule` (`(let ?x ?e BODY)`, a `subst` rule) pushes a `let` into: BODY
/// with its first operand the next copy and its others variables.
fn dead_lets(rule: &RuleDef) -> RecExpr<Fsm> {
    let ast = rule.lhs.ast.as_ref();
    let body = match ast.last() {
        Some(ENodeOrVar::ENode(Fsm::Let([_, _, b]))) => &ast[usize::from(*b)],
        _ => panic!("{}: not a `let` pattern", rule.name),
    };
    let mut nodes: Vec<Fsm> = Vec::new();
    let add = |n: Fsm, nodes: &mut Vec<Fsm>| {
        nodes.push(n);
        Id::from(nodes.len() - 1)
    };
    let sym = |s: &str, nodes: &mut Vec<Fsm>| {
        nodes.push(Fsm::Symbol(egg::Symbol::from(s)));
        Id::from(nodes.len() - 1)
    };
    let a = sym("a", &mut nodes);
    let mut top = add(Fsm::Var(a), &mut nodes);
    for level in 0..6 {
        top = match body {
            // `(lam ?y ?b)`, `(let ?y ?v ?b)` with `?y` not the outer
            // `let`'s `?x`: a binder of its own per level, the next copy as
            // the body.
            ENodeOrVar::ENode(Fsm::Lam(_)) => {
                let y = sym(&format!("y{level}"), &mut nodes);
                add(Fsm::Lam([y, top]), &mut nodes)
            }
            ENodeOrVar::ENode(Fsm::Let(_)) => {
                let y = sym(&format!("y{level}"), &mut nodes);
                let v = sym("b", &mut nodes);
                let v = add(Fsm::Var(v), &mut nodes);
                add(Fsm::Let([y, v, top]), &mut nodes)
            }
            ENodeOrVar::ENode(n) => {
                let mut k = 0;
                let n = n.clone().map_children(|_| {
                    k += 1;
                    if k == 1 {
                        top
                    } else {
                        let b = sym(&format!("b{k}"), &mut nodes);
                        add(Fsm::Var(b), &mut nodes)
                    }
                });
                add(n, &mut nodes)
            }
            ENodeOrVar::Var(_) => panic!("{}: no construct below the `let`", rule.name),
        };
    }
    for d in 0..3 {
        let x = sym(&format!("d{d}"), &mut nodes);
        let one = add(Fsm::Double(fsmooth::opt::lang::Dbl::new(1.0)), &mut nodes);
        top = add(Fsm::Let([x, one, top]), &mut nodes);
    }
    RecExpr::from(nodes)
}

#[test]
fn deleting_a_condition_the_e_graph_needs_harms_the_optimiser() {
    let rules = load(None).expect("default rules load");
    let mut caught = 0;
    for c in conditions(&rules) {
        let check = check_of(&c);
        let term: RecExpr<Fsm> = match check {
            Some(DeadLets) => dead_lets(c.rule),
            Some(Grows(t) | Conflict(t)) => t.parse().expect("a term"),
            _ => continue,
        };
        let without = without(&c).expect("loads without the condition");
        let (kept, with_it) = simplify(&rules, &term);
        let (lost, without_it) = simplify(&without, &term);
        let what = format!("{} without `{}` on {term}", c.rule.name, c.text);
        match check {
            Some(Conflict(_)) => {
                let equated = |s: &PhaseStats| s.stop.contains("the e-graph equated the constants");
                assert!(!equated(&with_it), "{what}: {}", with_it.stop);
                assert!(equated(&without_it), "{what}: {}", without_it.stop);
                assert_eq!(lost, term, "{what}: the phase keeps its input");
                assert_ne!(
                    kept, term,
                    "{what}: with the condition, the phase simplifies"
                );
            }
            _ => {
                assert_eq!(kept, lost, "{what}: the same result");
                assert!(
                    without_it.nodes >= 2 * with_it.nodes,
                    "{what}: {} nodes, {} with the condition",
                    without_it.nodes,
                    with_it.nodes
                );
            }
        }
        caught += 1;
    }
    assert!(caught > 0);
}
