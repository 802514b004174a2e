//! The optimiser as a stage of the pipeline (`Artefact::Optimised`, `fsmooth
//! opt`, `--mode fwd-opt`): an entry's first-order normal form saturated
//! with the rule set phase by phase (seed 001 §5, `opt`), then made an
//! entry again — type-checked, normalised once more so that repeated
//! subterms are shared by `let`s, and checked.

use std::rc::Rc;

use super::passes::{Pass, timed};
use super::typed::{check, entry_of};
use super::{Artefact, Entry, ForwardMode};
use crate::diagnostic::Diagnostic;
use crate::ir::{Expr, Name, Program, Type};
use crate::opt::RuleDef;

/// Options of the optimiser, as the command line gives them.
#[derive(Default, Clone)]
pub struct OptOptions {
    /// Rule files adding to (or replacing, by family name) the default
    /// rule set (`--rules DIR`, read by the command line).
    pub rules: Option<Vec<crate::opt::RuleFile>>,
    pub limits: crate::opt::OptLimits,
    pub explain: bool,
    /// Replay egg's explanation of every phase and verify each step against
    /// the rules (`opt --check`, spec/rules-format.md §13); a step that
    /// fails is an `opt-check-failed` error.
    pub check: bool,
}

/// An optimised entry, with the optimiser's report.
pub struct Optimised {
    pub entry: Rc<Entry>,
    pub report: crate::opt::Optimised,
    /// The rules it ran with.
    pub rules: Vec<RuleDef>,
}

/// Normalises `e` to first-order form and optimises it with `rules`: the
/// result is an entry like any other, type-checked again.
pub(super) fn optimise(
    artefact: Artefact,
    e: &Entry,
    rules: &[RuleDef],
    opts: &OptOptions,
) -> Result<Optimised, Diagnostic> {
    let normal = e.normal().map_err(|err| Diagnostic::from(&err))?;
    let normal = crate::anf::to_ir::program_of(&normal);
    let report = timed(Pass::Optimise, || {
        crate::opt::optimise(&normal, rules, opts.limits, opts.explain, opts.check)
    });
    if let Some(c) = &report.check
        && !c.skipped.is_empty()
    {
        // `opt --check` promises every step verified: a phase it could not
        // replay is a failed check, not a silent pass.
        return Err(Diagnostic {
            code: "opt-check-incomplete",
            message: format!(
                "{} optimisation phase(s) could not be verified:\n{}",
                c.skipped.len(),
                c.skipped.join("\n")
            ),
            // At the entry whose optimisation it is.
            span: e.span,
            notes: vec![
                "the explanation is too long to replay; optimise without --check (or FSMOOTH_OPT_CHECK) to accept the result unverified".to_string(),
            ],
        });
    }
    if let Some(c) = &report.check
        && !c.failures.is_empty()
    {
        return Err(Diagnostic {
            code: "opt-check-failed",
            message: format!(
                "{} optimisation step(s) are not instances of the loaded rules:\n{}",
                c.failures.len(),
                c.failures.join("\n")
            ),
            span: e.span,
            notes: vec!["this is a bug in the optimiser or a rule; please report it".to_string()],
        });
    }
    // The optimiser's output is ordinary code: type-check it again, then
    // re-normalise, which binds repeated subterms to `let`s once per scope
    // (extraction produced a tree; this restores the sharing).
    let name = report
        .program
        .defs
        .last()
        .expect("one definition")
        .name
        .to_string();
    let output = with_type_of(&report.program, e);
    let typing = check(&output)?;
    let tree = entry_of(
        artefact.clone(),
        &output,
        &typing,
        &name,
        ForwardMode::Scalar,
        false,
    )?;
    let shared = tree.normal().map_err(|err| Diagnostic::from(&err))?;
    let mut shared = crate::anf::to_ir::program_of(&shared);
    crate::opt::inline_single_uses(&mut shared);
    // The output is the input with its own name and parameter names, so
    // that it can be run, checked and compared as the input is.
    let params: Vec<&str> = e.params.iter().map(|(n, _)| n.as_str()).collect();
    rename_entry(&mut shared, &e.name, &params);
    let typing = check(&shared)?;
    let mut entry = entry_of(
        artefact.clone(),
        &shared,
        &typing,
        &e.name,
        ForwardMode::Scalar,
        false,
    )?;
    // Printed without its annotation, the output would change type (a
    // literal that only its removed context made an Index): it keeps it.
    if entry.params != e.params || entry.result != e.result {
        let shared = with_type_of(&shared, e);
        let typing = check(&shared)?;
        entry = entry_of(
            artefact,
            &shared,
            &typing,
            &e.name,
            ForwardMode::Scalar,
            false,
        )?;
    }
    // A ⊥ of the optimised program that keeps no span of its own is
    // reported at the entry it comes from (`Entry::locate`).
    entry.span = e.span;
    Ok(Optimised {
        entry: Rc::new(entry),
        report,
        rules: rules.to_vec(),
    })
}

/// `program` with its last definition (the optimised entry) annotated
/// with the type of the entry `e` it was optimised from. Inference then
/// gives every literal the type it had: a rewrite can remove the context
/// that made an integer literal an Index (`if false then i else 1` is
/// `1`), and alone the literal would default to a Double, changing the
/// entry's type (found by `fsmooth fuzz --target opt`). The annotation
/// is printed with the output, which then runs as its input does.
fn with_type_of(program: &Program, e: &Entry) -> Program {
    let ty = e
        .params
        .iter()
        .rev()
        .fold(e.result.clone(), |acc, (_, t)| Type::fun(t.clone(), acc));
    let mut p = program.clone();
    if let Some(d) = p.defs.last_mut() {
        d.ann = Some(ty);
    }
    p
}

/// Names the one definition of the normal-form program `prog` `name`, and
/// its leading parameters `params` (in order), in place. The normal form's
/// binders are fresh and unique, so a parameter is renamed everywhere it
/// occurs; a wanted name that another binder already uses gets primes
/// until it is free (so nothing is captured).
fn rename_entry(prog: &mut Program, name: &str, params: &[&str]) {
    let Some(def) = prog.defs.last().cloned() else {
        return;
    };
    let mut taken = prog.all_names();
    let mut renames: Vec<(Name, Name)> = Vec::new();
    let mut cur = def.body;
    for wanted in params {
        let Expr::Lam { param, body, .. } = prog.expr(cur) else {
            break;
        };
        let (old, next) = (param.clone(), *body);
        let mut new = wanted.to_string();
        while taken.contains(new.as_str()) && new != *old {
            new.push('\'');
        }
        let new: Name = Rc::from(new);
        taken.insert(new.clone());
        renames.push((old, new));
        cur = next;
    }
    for e in prog.exprs.values_mut() {
        match e {
            Expr::Var(x) | Expr::Lam { param: x, .. } => {
                if let Some((_, new)) = renames.iter().find(|(old, _)| old == x) {
                    *x = new.clone();
                }
            }
            _ => {}
        }
    }
    if let Some(last) = prog.defs.last_mut() {
        last.name = Rc::from(name);
    }
}
