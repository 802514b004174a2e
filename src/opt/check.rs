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

use rustc_hash::FxHashMap as HashMap;

use egg::{ENodeOrVar, FlatTerm, Id, Language, PatternAst, RecExpr, Searcher, Symbol, Var};

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
    /// Phases whose explanation was too large to replay (not verified).
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
    let mut report = CheckReport::default();
    let mut memo: HashMap<(Symbol, bool, String, String), Result<Conditions, String>> =
        HashMap::default();
    // Whether a class may hold terms equal only as reals.
    let inexact = rules.iter().any(|r| r.has_tag("ieee-inexact"));
    for k in 1..flat.len() {
        let Some((old, new, rule, forward)) = rewritten(&flat[k - 1], &flat[k]) else {
            report.failures.push(format!(
                "step {k}: no rewritten position in the explanation ({} => {})",
                flat[k - 1].get_recexpr(),
                flat[k].get_recexpr()
            ));
            continue;
        };
        let (a, b) = (old.get_recexpr(), new.get_recexpr());
        if rule.as_str() == "const-fold" {
            match check_fold(&a, &b, forward) {
                Some(Ok(Fold::Exact)) => report.folds += 1,
                Some(Ok(Fold::Reals)) if inexact => {
                    report.folds += 1;
                    report.inexact_folds.push(format!("step {k}: const-fold {a} = {b}"));
                }
                Some(Ok(Fold::Reals)) => report.failures.push(format!(
                    "step {k}: const-fold {a} = {b} holds over the reals only, and no rule of the set is `ieee-inexact`"
                )),
                Some(Err(why)) => report.failures.push(format!("step {k}: const-fold {why}")),
                None => report.trusted_folds += 1,
            }
            continue;
        }
        let Some(def) = rules.iter().find(|r| r.name == rule.as_str()) else {
            report.failures.push(format!(
                "step {k}: `{rule}` is not a rule of the loaded set"
            ));
            continue;
        };
        // The term in which the left side was matched: the whole term when
        // a condition needs the sizes of enclosing loops, else the subterm
        // (every other condition is a property of the subterms).
        let needs_context = def
            .conds
            .iter()
            .any(|c| matches!(c, Cond::InBounds(..) | Cond::Index(..)));
        let (lhs, rhs) = if forward { (a, b) } else { (b, a) };
        let whole = match (needs_context, forward) {
            (false, _) => lhs.clone(),
            (true, true) => flat[k - 1].get_recexpr(),
            (true, false) => flat[k].get_recexpr(),
        };
        // Explanations repeat steps (a `let` pushed through the same term
        // in several places): verify each distinct one once.
        let key = (rule, forward, lhs.to_string(), rhs.to_string());
        let verdict = match (needs_context, memo.get(&key)) {
            (false, Some(v)) => v.clone(),
            _ => {
                let v = instance_of(def, (&whole, var_depth), &lhs, &rhs);
                memo.insert(key, v.clone());
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
    }
    report
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
