//! The optimiser as a stage of the pipeline (`Artefact::Optimised`, `fsmooth
//! opt`, `--mode fwd-opt`): an entry's first-order normal form saturated
//! with the rule set phase by phase (seed 001 §5, `opt`), then made an
//! entry again — type-checked, normalised once more so that repeated
//! subterms are shared by `let`s, and checked.

use std::rc::Rc;

use super::passes::{Pass, timed};
use super::typed::{check, entry_of};
use super::{Artefact, Entry, ForwardMode};
use crate::diagnostic::{Diagnostic, Span};
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
        && !c.failures.is_empty()
    {
        return Err(Diagnostic {
            code: "opt-check-failed",
            message: format!(
                "{} optimisation step(s) are not instances of the loaded rules:\n{}",
                c.failures.len(),
                c.failures.join("\n")
            ),
            span: Span::generated(),
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
    let typing = check(&report.program)?;
    let tree = entry_of(
        artefact.clone(),
        &report.program,
        &typing,
        &name,
        ForwardMode::Scalar,
        false,
    )?;
    let shared = tree.normal().map_err(|err| Diagnostic::from(&err))?;
    let mut shared = crate::anf::to_ir::program_of(&shared);
    crate::opt::inline_single_uses(&mut shared);
    let typing = check(&shared)?;
    let entry = entry_of(
        artefact,
        &shared,
        &typing,
        "anf'entry",
        ForwardMode::Scalar,
        false,
    )?;
    Ok(Optimised {
        entry: Rc::new(entry),
        report,
        rules: rules.to_vec(),
    })
}
