//! The e-graph optimiser (spec/rules-format.md; seed 001 §5). The only
//! module that names egg.
//!
//! - [`lang`]: the typed e-graph language;
//! - [`analysis`]: free variables with projections, constants, loop sizes;
//! - [`rules`]: rule files, side conditions, the loader;
//! - [`engine`]: the phases of Fig. 9, limits, extraction, explanations;
//! - `convert`: IR ↔ egg.
//!
//! [`optimise`] takes a program in first-order normal form (one
//! definition, see `anf::normal_program`) and returns it optimised.

pub mod analysis;
pub mod check;
pub mod convert;
pub mod engine;
mod inline;
pub use inline::uniquify;
pub mod lang;
pub mod pattern;
pub mod rules;
pub mod schedule;

use crate::ir::{Def, Expr, Program};

pub use engine::{OptLimits, PhaseStats};
pub use rules::{RuleDef, RuleError, RuleFile, load};

/// Substitutes the single-use and cheap `let`s of the last definition's
/// body: after common-subexpression elimination, what stays bound is shared.
pub fn inline_single_uses(prog: &mut Program) {
    let Some(d) = prog.defs.last().cloned() else {
        return;
    };
    let body = inline::inline_single_uses(prog, d.body);
    if let Some(last) = prog.defs.last_mut() {
        last.body = body;
    }
}

/// The optimised program and a report of what happened.
pub struct Optimised {
    pub program: Program,
    pub phases: Vec<PhaseStats>,
    /// The rewrite steps, per phase, as egg's flat explanation lines.
    pub explanation: Vec<(String, Vec<String>)>,
    /// With `check`: every step of every phase replayed against the rules.
    pub check: Option<check::CheckReport>,
}

impl Optimised {
    /// The rules applied, per phase, in the order of the explanation: the
    /// rule name of each of egg's flat explanation lines that is a rewrite
    /// (`… (Rewrite=> name …)`).
    pub fn rules_applied(&self) -> Vec<(&str, Vec<&str>)> {
        self.explanation
            .iter()
            .map(|(phase, steps)| {
                let rules = steps
                    .iter()
                    .filter_map(|line| {
                        line.split("Rewrite").nth(1).and_then(|r| {
                            r.trim_start_matches(['=', '<', '>'])
                                .split([' ', ')'])
                                .find(|w| !w.is_empty())
                        })
                    })
                    .collect();
                (phase.as_str(), rules)
            })
            .collect()
    }
}

/// The largest term a phase saturates.
const MAX_TERM: usize = 20_000;

/// A variable of `e` bound neither inside it nor in `allowed`.
fn unbound(
    prog: &Program,
    e: crate::ir::ExprId,
    allowed: &[std::rc::Rc<str>],
) -> Option<std::rc::Rc<str>> {
    let mut scope: Vec<std::rc::Rc<str>> = allowed.to_vec();
    fn go(
        prog: &Program,
        e: crate::ir::ExprId,
        scope: &mut Vec<std::rc::Rc<str>>,
    ) -> Option<std::rc::Rc<str>> {
        match prog.expr(e) {
            Expr::Var(x) => (!scope.contains(x)).then(|| x.clone()),
            Expr::Lam { param, body, .. } => {
                scope.push(param.clone());
                let r = go(prog, *body, scope);
                scope.pop();
                r
            }
            Expr::Let {
                name, value, body, ..
            } => {
                if let Some(x) = go(prog, *value, scope) {
                    return Some(x);
                }
                scope.push(name.clone());
                let r = go(prog, *body, scope);
                scope.pop();
                r
            }
            other => other
                .children()
                .into_iter()
                .find_map(|c| go(prog, c, scope)),
        }
    }
    go(prog, e, &mut scope)
}

/// Optimises the single definition of `prog` (a function of its leading
/// lambdas' parameters) with `rules`, phase by phase.
pub fn optimise(
    prog: &Program,
    rules: &[RuleDef],
    limits: OptLimits,
    explain: bool,
    check: bool,
) -> Optimised {
    let def = prog.defs.last().expect("one definition").clone();
    let mut params = Vec::new();
    let mut body = def.body;
    while let Expr::Lam {
        param,
        ann,
        body: b,
    } = prog.expr(body)
    {
        params.push((param.clone(), ann.clone()));
        body = *b;
    }
    // Phase 1 of Fig. 9 inlines definitions to expose fusion: bindings of
    // pull arrays and single-use bindings are substituted into their uses.
    let mut work = prog.clone();
    let body = inline::inline_lets(&mut work, body);
    let (mut expr, bounds) = convert::to_recexpr(&work, body);
    let mut bounds: Vec<(egg::Symbol, usize)> = bounds
        .into_iter()
        .map(|(s, id)| (s, usize::from(id)))
        .collect();
    bounds.sort_by_key(|(s, _)| s.to_string());
    // What the parameters' types say about their reads (`double ?e`).
    let seeds: rustc_hash::FxHashMap<egg::Symbol, u8> = params
        .iter()
        .filter_map(|(p, t)| Some((egg::Symbol::from(&**p), analysis::type_depth(t.as_ref()?)?)))
        .collect();
    let mut phases = Vec::new();
    let mut explanation = Vec::new();
    let mut report = check::CheckReport::default();
    // Fig. 9 runs the sequence of phases twice: once focused on the
    // differentiated code, once on the whole program.
    let schedule = schedule::schedule();
    for (nonce, phase) in schedule.iter().copied().enumerate() {
        if expr.as_ref().len() > MAX_TERM {
            // Graceful: a term too large to saturate is left as it is.
            phases.push(engine::PhaseStats {
                phase,
                iterations: 0,
                nodes: expr.as_ref().len(),
                classes: 0,
                time: std::time::Duration::ZERO,
                stop: format!("skipped: the term has more than {MAX_TERM} nodes"),
                applied: Default::default(),
                cost_before: 0.0,
                cost_after: 0.0,
                split: Default::default(),
            });
            continue;
        }
        let group: Vec<&RuleDef> = rules
            .iter()
            .filter(|r| {
                let ps = r.phases();
                ps.is_empty() || ps.contains(&phase)
            })
            .collect();
        let (best, mut stats, steps, mut checked) = engine::run_phase(
            phase,
            &expr,
            &bounds,
            &group,
            if nonce < schedule::PHASES.len() {
                limits
            } else {
                OptLimits {
                    iterations: limits.refine_iterations,
                    ..limits
                }
            },
            engine::PhaseRun {
                explain,
                check,
                nonce: nonce as u32,
                seeds: seeds.clone(),
            },
        );
        for f in checked
            .failures
            .iter_mut()
            .chain(&mut checked.backward_refines)
        {
            *f = format!("phase {phase}: {f}");
        }
        report.add(checked);
        // Loop sizes are re-recorded on the new term. A result that mentions
        // a variable out of its scope is rejected, keeping the phase's input
        // (a defence in depth: the conditions should make it impossible).
        let mut out = Program::new();
        let mut root = convert::from_recexpr(&best, &mut out);
        let allowed: Vec<std::rc::Rc<str>> = params.iter().map(|(p, _)| p.clone()).collect();
        if let Some(x) = unbound(&out, root, &allowed) {
            stats.stop = format!("{} (result rejected: `{x}` out of scope)", stats.stop);
            out = Program::new();
            root = convert::from_recexpr(&expr, &mut out);
        }
        // Substitute cheap and single-use bindings again, so the next phase
        // sees the fused term rather than pushing lets through it. Pull
        // arrays are fused only if the next phase has the rules that finish
        // the job (`get-of-build`, `length-of-build`): left as it is,
        // `(build n f)[i]` builds the whole array per read, and a phase
        // without those rules keeps it (BA's Jacobian: 2 750× the cost).
        let next = schedule.get(nonce + 1);
        let fuses = next.is_some_and(|p| {
            ["get-of-build", "length-of-build"].iter().all(|name| {
                rules
                    .iter()
                    .any(|r| r.name == *name && (r.phases().is_empty() || r.phases().contains(p)))
            })
        });
        let root = if fuses {
            inline::inline_lets(&mut out, root)
        } else {
            inline::inline_single_uses(&mut out, root)
        };
        let (e2, b2) = convert::to_recexpr(&out, root);
        expr = e2;
        bounds = b2.into_iter().map(|(s, id)| (s, usize::from(id))).collect();
        bounds.sort_by_key(|(s, _)| s.to_string());
        if !steps.is_empty() {
            explanation.push((phase.to_string(), steps));
        }
        phases.push(stats);
    }
    let mut out = Program::new();
    let mut body = convert::from_recexpr(&expr, &mut out);
    for (p, ann) in params.into_iter().rev() {
        body = out.add(
            Expr::Lam {
                param: p,
                ann,
                body,
            },
            crate::diagnostic::Span::generated(),
        );
    }
    out.defs.push(Def {
        name: def.name.clone(),
        span: def.span,
        ann: None,
        body,
        prelude: false,
    });
    Optimised {
        program: out,
        phases,
        explanation,
        check: check.then_some(report),
    }
}
