//! `opt`: an entry optimised with the rewrite rules, printed, with its
//! explanation (`--explain`), the e-graph's statistics per phase
//! (`--stats`) and the replay of every step against the rules (`--check`).

use std::path::Path;

use super::args::RulesArg;
use super::derivative::check_from_env;
use super::{Failure, Sources, err_json, json, out, rule_files};
use crate::diagnostic::{Diagnostic, Span};
use crate::pipeline::{Artefact, OptOptions, Session};

pub fn opt(
    file: &Path,
    entry: &str,
    rules: RulesArg,
    (explain, stats, check): (bool, bool, bool),
    exact: bool,
) -> Result<(), Failure> {
    let src = Sources::read(file)?;
    let fail = |d: &Diagnostic| {
        if d.span == Span::generated() && d.message.contains(": error[") {
            // A rule-file error renders itself.
            Failure::Error(d.message.clone())
        } else {
            src.fail(d)
        }
    };
    let opts = OptOptions {
        rules: rule_files(rules.dir.as_deref())?,
        explain,
        check: check || check_from_env(),
        ..OptOptions::default()
    };
    let session = Session::load(&src.main_src)
        .map_err(|d| fail(&d))?
        .with_options(opts);
    let o = session
        .optimise(&Artefact::entry(entry), exact)
        .map_err(|d| fail(&d))?;
    // The summary is printed for an explicit --check (FSMOOTH_OPT_CHECK
    // only turns the verification on).
    if let Some(c) = o.report.check.as_ref().filter(|_| check) {
        let mut e = format!(
            "// check: {} rewrite step(s) verified against the rules, {} constant fold(s) re-evaluated, {} fold(s) of open terms trusted\n",
            c.verified, c.folds, c.trusted_folds
        );
        if !c.inexact_folds.is_empty() {
            e.push_str(&format!(
                "// note: {} constant fold(s) hold over the reals only (a literal equal to the term's value but for the sign of zero; its class was merged by an `ieee-inexact` rule)\n",
                c.inexact_folds.len()
            ));
        }
        if !c.class_conditions.is_empty() {
            e.push_str(&format!(
                "// note: {} verified step(s) have side conditions that hold only as judged on e-classes, not on the explained terms\n",
                c.class_conditions.len()
            ));
        }
        if !c.backward_refines.is_empty() {
            e.push_str(&format!(
                "// note: {} verified step(s) use a `refines` rule right to left, so egg's chain does not by itself show that the output refines the input (spec/rules-format.md §7.3):\n",
                c.backward_refines.len()
            ));
            for b in &c.backward_refines {
                e.push_str(&format!("//   {b}\n"));
            }
        }
        eprint!("{e}");
    }
    let mut text = crate::syntax::print_program(&o.entry.program);
    if explain {
        for (phase, rules) in o.report.rules_applied() {
            text.push_str(&format!("// phase {phase}:\n"));
            for r in rules {
                match o.rules.iter().find(|d| d.name == r) {
                    Some(d) => text.push_str(&format!("//   {}   -- {}\n", d.name, d.doc)),
                    None => text.push_str(&format!("//   {r}\n")),
                }
            }
        }
    }
    out(&text)?;
    if stats {
        for p in &o.report.phases {
            let ms = |d: std::time::Duration| json::rounded(d.as_secs_f64() * 1e3, 1);
            err_json(&serde_json::json!({
                "phase": p.phase,
                "iterations": p.iterations,
                "nodes": p.nodes,
                "classes": p.classes,
                "time_ms": ms(p.time),
                "search_ms": ms(p.split.search),
                "apply_ms": ms(p.split.apply),
                "rebuild_ms": ms(p.split.rebuild),
                "extract_ms": ms(p.split.extract),
                "stop": p.stop,
                "cost_before": json::rounded(p.cost_before, 1),
                "cost_after": json::rounded(p.cost_after, 1),
                "applied": p.applied,
            }));
        }
    }
    Ok(())
}
