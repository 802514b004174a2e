//! `fsmooth opt --check`: every step of the optimiser's output is replayed
//! from egg's explanation and verified against the loaded rule set
//! (spec/rules-format.md §13).
//!
//! egg's flat explanation is a chain of terms from a phase's input to its
//! extracted output; each step rewrites one position, and names the rule
//! and its direction. A step is verified when, in an e-graph built from the
//! whole term the way the engine builds one (loop sizes recorded):
//!
//! - the rewritten subterm matches the rule's left side, and
//! - the new subterm is the rule's right side under that match, up to the
//!   names of bound variables, with a `fresh` variable given a symbol that
//!   occurs nowhere (so a reused name passes only if it captures nothing),
//! - and the rule's own side conditions hold on the terms. `distinct`
//!   must. The others hold of a class when they hold of *some* member
//!   (another member is a literal, is total, does not use a variable, ...),
//!   which the explanation does not record: steps that need that are
//!   counted apart, not failed. (Free variables merge by intersection, and
//!   extraction picks only members that use exactly their class's
//!   variables, so `not-free`, `only-fst` and `only-snd` judged on a class
//!   hold of the output; the engine also checks its scope.)
//!
//! A backward step (the new subterm is the left side, the old one the
//! right side) is verified the same way with the roles swapped. For a rule
//! tagged `refines` it is also listed apart: refinement holds left to
//! right only, so a chain with such a step does not by itself justify the
//! extraction (spec/rules-format.md §7.3). Constant folding (`const-fold`, the analysis's
//! named union) is verified by evaluating the folded term when it is
//! closed.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use std::rc::Rc;

use egg::{
    ENodeOrVar, FlatTerm, Id, Language, PatternAst, RecExpr, Searcher, Symbol, TreeTerm, Var,
};

use super::analysis::{FsmAnalysis, Graph};
use super::convert::{from_recexpr, to_recexpr};
use super::lang::{Fsm, subexpr};
use super::rules::{Cond, RuleDef, holds};
use crate::eval::Limits;
use crate::ir::Program;

/// What replaying one phase's explanation found.
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    /// Rewrite steps verified as instances of named rules.
    pub verified: usize,
    /// Constant-folding steps verified by evaluation.
    pub folds: usize,
    /// Constant-folding steps of open terms (the analysis folded them from
    /// constant children; not re-evaluated).
    pub trusted_folds: usize,
    /// Constant-folding steps whose literal equals the term's value as a
    /// real but not bit for bit (`0.0` for `-0.0`): the class also holds a
    /// term of the literal's value, merged by an `ieee-inexact` rule, so
    /// the step holds in the reals reading only (spec/rules-format.md §13).
    pub inexact_folds: Vec<String>,
    /// Verified steps that use a `refines` rule right to left. Each is an
    /// instance of its rule, but this chain does not show that the output
    /// refines the input (spec/rules-format.md §7.3): egg's explanation is
    /// one chain of equalities, which may pass through a less defined term
    /// and leave it again.
    pub backward_refines: Vec<String>,
    /// Verified instances whose side conditions hold only as the optimiser
    /// judged them on whole e-classes (for example `const ?c` where another
    /// member of the class of `c` is a literal), not on the explanation's
    /// terms.
    pub class_conditions: Vec<String>,
    /// Phases whose explanation was too long to replay to its end (not verified).
    pub skipped: Vec<String>,
    /// Steps that could not be verified, described.
    pub failures: Vec<String>,
}

impl CheckReport {
    pub fn add(&mut self, other: CheckReport) {
        self.verified += other.verified;
        self.folds += other.folds;
        self.trusted_folds += other.trusted_folds;
        self.inexact_folds.extend(other.inexact_folds);
        self.backward_refines.extend(other.backward_refines);
        self.class_conditions.extend(other.class_conditions);
        self.skipped.extend(other.skipped);
        self.failures.extend(other.failures);
    }
}

/// Verifies every step of a flat explanation.
pub fn check_chain(flat: &[FlatTerm<Fsm>], rules: &[&RuleDef]) -> CheckReport {
    check_chain_with(flat, rules, &HashMap::default())
}

/// [`check_chain`], judging `double` with the engine's depths of the
/// entry's parameters.
pub fn check_chain_with(
    flat: &[FlatTerm<Fsm>],
    rules: &[&RuleDef],
    var_depth: &HashMap<Symbol, u8>,
) -> CheckReport {
    let mut v = Verifier::new(rules, var_depth);
    for k in 1..flat.len() {
        let Some((old, new, rule, forward)) = rewritten(&flat[k - 1], &flat[k]) else {
            v.report.failures.push(format!(
                "step {k}: no rewritten position in the explanation ({} => {})",
                flat[k - 1].get_recexpr(),
                flat[k].get_recexpr()
            ));
            continue;
        };
        let whole = || {
            if forward {
                flat[k - 1].get_recexpr()
            } else {
                flat[k].get_recexpr()
            }
        };
        v.step(
            k,
            (old.get_recexpr(), new.get_recexpr()),
            rule,
            forward,
            whole,
        );
    }
    v.report
}

/// Verifies every step of egg's tree explanation (the chain of
/// [`check_chain`] before flattening). The flat form copies the whole term
/// once per step and a shared sub-proof once per use; here each step is
/// judged on the subterm it rewrites, and a sub-proof shared by several
/// positions is walked once — unless it holds a step whose conditions
/// depend on the enclosing loops (`in-bounds`, `index`), which is judged
/// again in each place, on the whole term rebuilt around it, as the flat
/// replay judges it. The same steps, the same verdicts, in time about the
/// size of the proof rather than steps × term.
pub fn check_tree_with(
    proof: &[Rc<TreeTerm<Fsm>>],
    rules: &[&RuleDef],
    var_depth: &HashMap<Symbol, u8>,
) -> CheckReport {
    let mut w = TreeWalk {
        v: Verifier::new(rules, var_depth),
        initial: HashMap::default(),
        last: HashMap::default(),
        done: HashSet::default(),
        steps: 0,
    };
    w.walk(proof, &mut Vec::new());
    w.v.report
}

/// The most steps one phase's tree walk judges (about 1 µs each without
/// context; bounds a phase's check to seconds).
const MAX_TREE_STEPS: usize = 2_000_000;

/// A term as a tree, its subterms shared: the terms of a tree explanation
/// before and after each step.
#[derive(Clone)]
struct Term(Rc<(Fsm, Vec<Term>)>);

impl Term {
    fn recexpr(&self) -> RecExpr<Fsm> {
        fn go(t: &Term, out: &mut RecExpr<Fsm>) -> Id {
            let (node, children) = &*t.0;
            let mut k = 0;
            let node = node.clone().map_children(|_| {
                let id = go(&children[k], out);
                k += 1;
                id
            });
            out.add(node)
        }
        let mut out = RecExpr::default();
        go(self, &mut out);
        out
    }
}

/// One enclosing position: its operator, its other operands as they stand,
/// and which operand is being rewritten.
struct Frame {
    node: Fsm,
    children: Vec<Term>,
    hole: usize,
}

struct TreeWalk<'a> {
    v: Verifier<'a>,
    initial: HashMap<*const TreeTerm<Fsm>, Term>,
    last: HashMap<*const TreeTerm<Fsm>, Term>,
    /// Sub-proofs walked already, with no step that depends on its place.
    done: HashSet<Vec<*const TreeTerm<Fsm>>>,
    steps: usize,
}

impl TreeWalk<'_> {
    /// The term `t` starts from: its operator on its operands' first terms.
    fn initial(&mut self, t: &Rc<TreeTerm<Fsm>>) -> Term {
        let key = Rc::as_ptr(t);
        if let Some(x) = self.initial.get(&key) {
            return x.clone();
        }
        let children = t.child_proofs.iter().map(|p| self.initial(&p[0])).collect();
        let x = Term(Rc::new((t.node.clone(), children)));
        self.initial.insert(key, x.clone());
        x
    }

    /// The term `t` ends with: its operator on its operands' last terms.
    fn last(&mut self, t: &Rc<TreeTerm<Fsm>>) -> Term {
        let key = Rc::as_ptr(t);
        if let Some(x) = self.last.get(&key) {
            return x.clone();
        }
        let children = t
            .child_proofs
            .iter()
            .map(|p| self.last(p.last().expect("a proof has a first term")))
            .collect();
        let x = Term(Rc::new((t.node.clone(), children)));
        self.last.insert(key, x.clone());
        x
    }

    /// Walks one chain of a position; returns whether a step in it needed
    /// the enclosing term.
    fn walk(&mut self, proof: &[Rc<TreeTerm<Fsm>>], frames: &mut Vec<Frame>) -> bool {
        let mut placed = false;
        for (i, t) in proof.iter().enumerate() {
            let rule = match (t.forward_rule, t.backward_rule) {
                (Some(r), _) => Some((r, true)),
                (None, Some(r)) => Some((r, false)),
                (None, None) => None,
            };
            if let Some((rule, forward)) = rule {
                self.steps += 1;
                let k = self.steps;
                if k > MAX_TREE_STEPS {
                    if self.v.report.skipped.is_empty() {
                        self.v.report.skipped.push(format!(
                            "an explanation of more than {MAX_TREE_STEPS} steps was not replayed to its end"
                        ));
                    }
                    return placed;
                }
                if i == 0 {
                    self.v.report.failures.push(format!(
                        "step {k}: `{rule}` rewrites a term the explanation does not give"
                    ));
                } else {
                    let old = self.last(&proof[i - 1]);
                    let new = self.initial(t);
                    let at = if forward { &old } else { &new };
                    let whole = || plug(at, frames).recexpr();
                    placed |= self
                        .v
                        .step(k, (old.recexpr(), new.recexpr()), rule, forward, whole);
                }
            }
            // The operands are rewritten left to right: those before the
            // one being rewritten are in their last form, those after it in
            // their first.
            for c in 0..t.child_proofs.len() {
                let sub = &t.child_proofs[c];
                let key: Vec<_> = sub.iter().map(Rc::as_ptr).collect();
                if self.done.contains(&key) {
                    continue;
                }
                let children = (0..t.child_proofs.len())
                    .map(|j| {
                        let p = &t.child_proofs[j];
                        if j < c {
                            self.last(p.last().expect("a proof has a first term"))
                        } else {
                            self.initial(&p[0])
                        }
                    })
                    .collect();
                frames.push(Frame {
                    node: t.node.clone(),
                    children,
                    hole: c,
                });
                let inner = self.walk(sub, frames);
                frames.pop();
                if inner {
                    placed = true;
                } else {
                    self.done.insert(key);
                }
            }
        }
        placed
    }
}

/// `t` in its place: the enclosing positions rebuilt around it.
fn plug(t: &Term, frames: &[Frame]) -> Term {
    let mut cur = t.clone();
    for f in frames.iter().rev() {
        let mut children = f.children.clone();
        children[f.hole] = cur;
        cur = Term(Rc::new((f.node.clone(), children)));
    }
    cur
}

/// Judges steps one at a time, remembering verdicts.
struct Verifier<'a> {
    rules: &'a [&'a RuleDef],
    var_depth: &'a HashMap<Symbol, u8>,
    report: CheckReport,
    memo: HashMap<(Symbol, bool, String, String), Result<Conditions, String>>,
    /// Whether a class may hold terms equal only as reals.
    inexact: bool,
}

impl<'a> Verifier<'a> {
    fn new(rules: &'a [&'a RuleDef], var_depth: &'a HashMap<Symbol, u8>) -> Self {
        Verifier {
            rules,
            var_depth,
            report: CheckReport::default(),
            memo: HashMap::default(),
            inexact: rules.iter().any(|r| r.has_tag("ieee-inexact")),
        }
    }

    /// Verifies step `k`, `a` rewritten to `b` by `rule`; `whole` gives the
    /// term in which its left side was matched. Returns whether the verdict
    /// needed that term.
    fn step(
        &mut self,
        k: usize,
        (a, b): (RecExpr<Fsm>, RecExpr<Fsm>),
        rule: Symbol,
        forward: bool,
        whole: impl FnOnce() -> RecExpr<Fsm>,
    ) -> bool {
        let report = &mut self.report;
        if rule.as_str() == "const-fold" {
            match check_fold(&a, &b, forward) {
                Some(Ok(Fold::Exact)) => report.folds += 1,
                Some(Ok(Fold::Reals)) if self.inexact => {
                    report.folds += 1;
                    report.inexact_folds.push(format!("step {k}: const-fold {a} = {b}"));
                }
                Some(Ok(Fold::Reals)) => report.failures.push(format!(
                    "step {k}: const-fold {a} = {b} holds over the reals only, and no rule of the set is `ieee-inexact`"
                )),
                Some(Err(why)) => report.failures.push(format!("step {k}: const-fold {why}")),
                None => report.trusted_folds += 1,
            }
            return false;
        }
        let Some(def) = self.rules.iter().find(|r| r.name == rule.as_str()) else {
            report.failures.push(format!(
                "step {k}: `{rule}` is not a rule of the loaded set"
            ));
            return false;
        };
        // The term in which the left side was matched: the whole term when
        // a condition needs the sizes of enclosing loops, else the subterm
        // (every other condition is a property of the subterms).
        let needs_context = def
            .conds
            .iter()
            .any(|c| matches!(c, Cond::InBounds(..) | Cond::Index(..)));
        let (lhs, rhs) = if forward { (a, b) } else { (b, a) };
        // Explanations repeat steps (a `let` pushed through the same term
        // in several places): verify each distinct one once.
        let key = (rule, forward, lhs.to_string(), rhs.to_string());
        let verdict = match (needs_context, self.memo.get(&key)) {
            (false, Some(v)) => v.clone(),
            _ => {
                let whole = if needs_context { whole() } else { lhs.clone() };
                let v = instance_of(def, (&whole, self.var_depth), &lhs, &rhs);
                self.memo.insert(key, v.clone());
                v
            }
        };
        match verdict {
            Ok(how) => {
                report.verified += 1;
                if matches!(how, Conditions::OnTheClass) {
                    report.class_conditions.push(format!("step {k}: `{rule}`"));
                }
                if !forward && def.has_tag("refines") {
                    report.backward_refines.push(format!("step {k}: `{rule}`"));
                }
            }
            Err(why) => report.failures.push(format!(
                "step {k}: `{rule}` does not apply: {why}\n    {lhs}\n => {rhs}"
            )),
        }
        needs_context
    }
}

/// The position a step rewrote: (old subterm, new subterm, rule, forward).
fn rewritten<'a>(
    old: &'a FlatTerm<Fsm>,
    new: &'a FlatTerm<Fsm>,
) -> Option<(&'a FlatTerm<Fsm>, &'a FlatTerm<Fsm>, Symbol, bool)> {
    if let Some(r) = new.forward_rule {
        return Some((old, new, r, true));
    }
    if let Some(r) = new.backward_rule {
        return Some((old, new, r, false));
    }
    old.children
        .iter()
        .zip(&new.children)
        .find_map(|(o, n)| rewritten(o, n))
}

/// Whether `rhs` is `def`'s right side for a match of its left side at
/// `lhs`, with the conditions holding (judged inside `whole`).
///
/// The match is syntactic, on the terms of the explanation; a `fresh`
/// variable gets a symbol that occurs nowhere, and the new term must equal
/// that right side up to the names of bound variables (α-equivalence), so
/// a reused "fresh" name is accepted exactly when it captures nothing.
/// `free-in` is not checked: it only keeps `let-lam-rename` from renaming
/// when there is no clash, and renaming is always sound.
fn instance_of(
    def: &RuleDef,
    (whole, var_depth): (&RecExpr<Fsm>, &HashMap<Symbol, u8>),
    lhs: &RecExpr<Fsm>,
    rhs: &RecExpr<Fsm>,
) -> Result<Conditions, String> {
    let mut binds: HashMap<Var, RecExpr<Fsm>> = HashMap::default();
    if !pmatch(
        &def.lhs.ast,
        root(def.lhs.ast.as_ref()),
        lhs,
        root(lhs.as_ref()),
        &mut binds,
    ) {
        return Err("the left side does not match".into());
    }
    // The conditions, as the engine judges them, on some match in an
    // e-graph of the term.
    let (mut egraph, _) = graph_of(whole, var_depth);
    let at = egraph.add_expr(lhs);
    egraph.rebuild();
    let at = egraph.find(at);
    let conds: Vec<Cond> = def
        .conds
        .iter()
        .filter(|c| !matches!(c, Cond::Fresh(_) | Cond::FreeIn(..)))
        .cloned()
        .collect();
    let substs = def
        .lhs
        .search_eclass(&egraph, at)
        .map(|m| m.substs)
        .unwrap_or_default();
    // `distinct` compares two symbols, so it must hold on the term; the
    // others hold of a class if they hold of some member (free variables
    // merge by intersection, and extraction picks a member that uses
    // exactly its class's variables: spec/rules-format.md §7.1).
    let every_member: Vec<Cond> = conds
        .iter()
        .filter(|c| matches!(c, Cond::Distinct(..)))
        .cloned()
        .collect();
    let vars = def.lhs.vars();
    let mut strict = false;
    let mut conditions = false;
    for mut s in substs {
        if holds(&every_member, &mut egraph, &mut s.clone(), at, &vars) {
            strict = true;
            if holds(&conds, &mut egraph, &mut s, at, &vars) {
                conditions = true;
                break;
            }
        }
    }
    if !strict {
        return Err("its side conditions do not hold".into());
    }
    // The right side, with truly fresh symbols.
    let mut taken = symbols(whole);
    taken.extend(symbols(rhs));
    for c in &def.conds {
        if let Cond::Fresh(v) = c {
            let mut k = 0;
            let sym = loop {
                let s = Symbol::from(format!(
                    "{}'check{k}",
                    v.to_string().trim_start_matches('?')
                ));
                if !taken.contains(&s) {
                    break s;
                }
                k += 1;
            };
            taken.push(sym);
            binds.insert(*v, RecExpr::from(vec![Fsm::Symbol(sym)]));
        }
    }
    let expected = build(&def.rhs.ast, root(def.rhs.ast.as_ref()), &binds);
    if canonical(&expected) != canonical(rhs) {
        Err("the new term is not the rule's right side".into())
    } else if conditions {
        Ok(Conditions::OnTheTerm)
    } else {
        Ok(Conditions::OnTheClass)
    }
}

/// Where a verified step's side conditions were established.
#[derive(Clone, Copy)]
enum Conditions {
    /// Re-derived on the terms of the explanation.
    OnTheTerm,
    /// Only in the optimiser's e-graph, from facts about the whole class
    /// (another member is a constant, is total, ...): the step is an
    /// instance of its rule, but the conditions cannot be re-derived from
    /// the explanation alone.
    OnTheClass,
}

fn root<T>(nodes: &[T]) -> Id {
    Id::from(nodes.len() - 1)
}

/// Syntactic matching of a pattern against a term (non-linear variables
/// must bind equal subterms).
fn pmatch(
    pat: &PatternAst<Fsm>,
    p: Id,
    term: &RecExpr<Fsm>,
    t: Id,
    binds: &mut HashMap<Var, RecExpr<Fsm>>,
) -> bool {
    match &pat[p] {
        ENodeOrVar::Var(v) => {
            let sub = subexpr(term, t);
            match binds.get(v) {
                Some(b) => canonical(b) == canonical(&sub),
                None => {
                    binds.insert(*v, sub);
                    true
                }
            }
        }
        ENodeOrVar::ENode(n) => {
            n.matches(&term[t])
                && n.children()
                    .iter()
                    .zip(term[t].children())
                    .all(|(pc, tc)| pmatch(pat, *pc, term, *tc, binds))
        }
    }
}

/// A pattern instantiated with terms.
fn build(pat: &PatternAst<Fsm>, p: Id, binds: &HashMap<Var, RecExpr<Fsm>>) -> RecExpr<Fsm> {
    let mut out: Vec<Fsm> = Vec::new();
    fn go(
        pat: &PatternAst<Fsm>,
        p: Id,
        binds: &HashMap<Var, RecExpr<Fsm>>,
        out: &mut Vec<Fsm>,
    ) -> Id {
        match &pat[p] {
            ENodeOrVar::Var(v) => {
                let e = &binds[v];
                let base = out.len();
                for n in e.as_ref() {
                    out.push(n.clone().map_children(|c| Id::from(usize::from(c) + base)));
                }
                Id::from(out.len() - 1)
            }
            ENodeOrVar::ENode(n) => {
                let n = n.clone().map_children(|c| go(pat, c, binds, out));
                out.push(n);
                Id::from(out.len() - 1)
            }
        }
    }
    go(pat, p, binds, &mut out);
    RecExpr::from(out)
}

/// A term as text with bound variables renamed in order of binding, so
/// α-equivalent terms give the same text.
fn canonical(e: &RecExpr<Fsm>) -> String {
    fn name(e: &RecExpr<Fsm>, id: Id) -> String {
        match &e[id] {
            Fsm::Symbol(s) => s.to_string(),
            other => other.to_string(),
        }
    }
    fn go(
        e: &RecExpr<Fsm>,
        id: Id,
        env: &mut Vec<(String, String)>,
        k: &mut usize,
        out: &mut String,
    ) {
        let bind = |x: Id, env: &mut Vec<(String, String)>, k: &mut usize| {
            *k += 1;
            let b = format!("#{k}");
            env.push((name(e, x), b.clone()));
            b
        };
        match &e[id] {
            Fsm::Var(x) => {
                let n = name(e, *x);
                let shown = env
                    .iter()
                    .rev()
                    .find(|(m, _)| *m == n)
                    .map_or(n.clone(), |(_, b)| b.clone());
                out.push_str(&format!("(var {shown})"));
            }
            Fsm::Lam([x, b]) => {
                let nb = bind(*x, env, k);
                out.push_str(&format!("(lam {nb} "));
                go(e, *b, env, k, out);
                env.pop();
                out.push(')');
            }
            Fsm::Let([x, v, b]) => {
                out.push_str("(let ");
                let mark = out.len();
                go(e, *v, env, k, out);
                let value = out.split_off(mark);
                let nb = bind(*x, env, k);
                out.push_str(&format!("{nb} {value} "));
                go(e, *b, env, k, out);
                env.pop();
                out.push(')');
            }
            n if n.is_leaf() => out.push_str(&n.to_string()),
            n => {
                out.push_str(&format!("({n}"));
                for c in n.children() {
                    out.push(' ');
                    go(e, *c, env, k, out);
                }
                out.push(')');
            }
        }
    }
    let mut out = String::new();
    go(e, root(e.as_ref()), &mut Vec::new(), &mut 0, &mut out);
    out
}

/// An e-graph holding `whole`, with its loop sizes and the depths of its
/// variables (`var_depth`, the engine's) recorded as the engine records
/// them, and `whole` as the engine converts it (its last node is the
/// root). The rule checker builds its e-graphs with it too.
pub fn graph_of(whole: &RecExpr<Fsm>, var_depth: &HashMap<Symbol, u8>) -> (Graph, RecExpr<Fsm>) {
    let mut scratch = Program::new();
    let e = from_recexpr(whole, &mut scratch);
    let (rec, bounds) = to_recexpr(&scratch, e);
    let mut egraph = Graph::new(FsmAnalysis {
        var_depth: var_depth.clone(),
        ..FsmAnalysis::default()
    });
    egraph.add_expr(&rec);
    for (s, idx) in bounds {
        let id = egraph.add_expr(&subexpr(&rec, idx));
        egraph.analysis.loop_bounds.insert(s, id);
    }
    (egraph, rec)
}

fn symbols(e: &RecExpr<Fsm>) -> Vec<Symbol> {
    e.as_ref()
        .iter()
        .filter_map(|n| match n {
            Fsm::Symbol(s) => Some(*s),
            _ => None,
        })
        .collect()
}

/// Checks a constant-folding step by evaluating the non-literal side
/// (None when it is not closed).
/// How a re-evaluated constant fold holds.
enum Fold {
    /// Bit for bit.
    Exact,
    /// As a real: a Double literal equal to the value under `==` with other
    /// bits (the two zeros).
    Reals,
}

fn check_fold(a: &RecExpr<Fsm>, b: &RecExpr<Fsm>, forward: bool) -> Option<Result<Fold, String>> {
    let (term, lit) = if forward { (a, b) } else { (b, a) };
    let root = |e: &RecExpr<Fsm>| e.as_ref().last().cloned();
    let lit = root(lit)?;
    if !lit.is_leaf() || symbols(term).iter().any(|_| true) {
        return None;
    }
    let mut p = Program::new();
    let body = from_recexpr(term, &mut p);
    p.defs.push(crate::ir::Def {
        name: "fold".into(),
        span: crate::diagnostic::Span::generated(),
        ann: None,
        body,
        prelude: false,
    });
    let mut ev = crate::eval::Evaluator::new(&p, Limits::with_fuel(100_000));
    let v = ev.call("fold", Vec::new(), &mut |_, _| {}).ok()?;
    let ok = match (&lit, &v) {
        (Fsm::Double(d), crate::eval::Value::Double(x)) if d.get().to_bits() == x.to_bits() => {
            Some(Fold::Exact)
        }
        (Fsm::Double(d), crate::eval::Value::Double(x)) => (d.get() == *x).then_some(Fold::Reals),
        (Fsm::Int(i), crate::eval::Value::Index(j)) => (i == j).then_some(Fold::Exact),
        (Fsm::Bool(b), crate::eval::Value::Bool(c)) => (b == c).then_some(Fold::Exact),
        _ => None,
    };
    Some(ok.ok_or_else(|| format!("{term} evaluates to {v}, not {lit}")))
}
