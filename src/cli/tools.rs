//! `rules` (list the rule set, check each rule against the evaluator) and
//! `difftest` (differential testing campaigns): commands about fsmooth
//! itself rather than about a program.

use std::path::Path;
use std::time::Instant;

use super::args::RulesCmd;
use super::{Failure, json, out, out_json, rule_files};
use crate::opt::RuleDef;

fn load_rules(dir: Option<&Path>) -> Result<Vec<RuleDef>, Failure> {
    let files = rule_files(dir)?;
    crate::opt::load(files.as_deref()).map_err(|r| Failure::Error(r.render()))
}

pub fn rules(cmd: RulesCmd) -> Result<(), Failure> {
    match cmd {
        RulesCmd::List { rules } => {
            let mut text = String::new();
            for r in load_rules(rules.dir.as_deref())? {
                text.push_str(&format!(
                    "{:<22} {:<9} [{}]  {}\n",
                    r.name,
                    r.family,
                    r.tags.join(", "),
                    r.doc
                ));
            }
            out(&text)
        }
        RulesCmd::Check {
            rules,
            cases,
            seed,
            only,
            families,
            depth,
            fuel,
        } => check(
            rules.dir.as_deref(),
            &only,
            &families,
            crate::rulecheck::Options {
                cases,
                seed,
                depth,
                fuel,
            },
        ),
        RulesCmd::Coq { rules } => {
            let all = load_rules(rules.dir.as_deref())?;
            let text = crate::prove::coq::statements(&all)
                .map_err(|why| Failure::Error(format!("error[rule-not-stated]: {why}\n")))?;
            out(&text)
        }
        RulesCmd::Prove {
            rules,
            only,
            families,
            timeout_ms,
            smt,
            search,
        } => prove(
            rules.dir.as_deref(),
            (&only, &families),
            (timeout_ms, search),
            smt,
        ),
    }
}

/// Where a rule is written, `FILE:LINE:1`: its family's file under
/// `--rules`, or the shipped `rewrite-rules/` file.
fn rule_location(dir: Option<&Path>, r: &crate::opt::RuleDef) -> String {
    let file = dir
        .map(|d| d.join(format!("{}.rules", r.family)))
        .filter(|p| p.is_file())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| format!("rewrite-rules/{}.rules", r.family));
    format!("{file}:{}:1", r.line)
}

/// The loaded rules, those named by `--rule` and `--family` (an unknown
/// name is an error).
fn selected(
    dir: Option<&Path>,
    only: &[String],
    families: &[String],
) -> Result<Vec<crate::opt::RuleDef>, Failure> {
    let all = load_rules(dir)?;
    for name in only {
        if !all.iter().any(|r| &r.name == name) {
            return Err(Failure::Error(format!(
                "error[unknown-rule]: no rule named `{name}` in the loaded rule set\n"
            )));
        }
    }
    Ok(all
        .into_iter()
        .filter(|r| only.is_empty() || only.contains(&r.name))
        .filter(|r| families.is_empty() || families.contains(&r.family))
        .collect())
}

fn prove(
    dir: Option<&Path>,
    (only, families): (&[String], &[String]),
    (timeout_ms, search): (u64, u64),
    smt: bool,
) -> Result<(), Failure> {
    use crate::prove::smt::{Reading, query, typings};
    let rules = selected(dir, only, families)?;
    if smt {
        let mut text = String::new();
        for r in &rules {
            text.push_str(&format!("; rule {}\n", r.name));
            match typings(r) {
                Err(why) => text.push_str(&format!("; out of scope: {why}\n")),
                Ok(ts) => {
                    for t in &ts {
                        for reading in [Reading::Reals, Reading::Ieee] {
                            text.push_str(&format!("; {reading:?}\n"));
                            match query(r, t, reading) {
                                Ok(q) => text.push_str(&q),
                                Err(why) => text.push_str(&format!("; out of scope: {why}\n")),
                            }
                        }
                    }
                }
            }
        }
        return out(&text);
    }
    if !crate::prove::z3::available() {
        return Err(Failure::Error(
            "error[solver-missing]: `fsmooth rules prove` needs the SMT solver z3 on the PATH (Debian: `apt-get install z3`; `.ci/run` installs it)\n"
                .to_string(),
        ));
    }
    let start = Instant::now();
    let opts = crate::prove::Options {
        timeout_ms,
        search,
        ..crate::prove::Options::default()
    };
    let reports = crate::prove::prove_rules(&rules, &opts);
    let mut text = format!(
        "{:<22} {:<7} {:<15} {:<15}\n",
        "rule", "family", "reals", "binary64"
    );
    for r in &reports {
        text.push_str(&format!("{r}\n"));
    }
    let count = |f: &dyn Fn(&crate::prove::Report) -> bool| reports.iter().filter(|r| f(r)).count();
    use crate::prove::Verdict::{OutOfScope, Proved};
    let coq = rules
        .iter()
        .filter(|r| crate::prove::coq::covered(r))
        .count();
    text.push_str(&format!(
        "{coq} of these rule(s) are stated in Coq (`fsmooth rules coq`), where proofs/coq proves them\n"
    ));
    text.push_str(&format!(
        "{} rule(s): {} proved over the reals, {} exact in binary64, {} out of scope, {} wrong as written, {:.1} s\n",
        reports.len(),
        count(&|r| matches!(r.reals, Proved)),
        count(&|r| matches!(r.ieee, Proved)),
        count(&|r| matches!(r.reals, OutOfScope(_))),
        count(&|r| r.error.is_some()),
        start.elapsed().as_secs_f64()
    ));
    out(&text)?;
    let wrong: Vec<_> = reports.iter().filter(|r| r.error.is_some()).collect();
    if wrong.is_empty() {
        return Ok(());
    }
    let mut msg = String::new();
    for r in wrong {
        let at = rules
            .iter()
            .find(|d| d.name == r.name)
            .map_or_else(String::new, |d| format!("{}: ", rule_location(dir, d)));
        msg.push_str(&format!(
            "{at}error[rule-disproved]: rule `{}` (family `{}`): {}\n",
            r.name,
            r.family,
            r.error.as_deref().unwrap_or("")
        ));
    }
    Err(Failure::Error(msg))
}

fn check(
    dir: Option<&Path>,
    only: &[String],
    families: &[String],
    opts: crate::rulecheck::Options,
) -> Result<(), Failure> {
    let rules = selected(dir, only, families)?;
    let start = Instant::now();
    let reports = crate::rulecheck::check_rules(&rules, &opts);
    let failed: Vec<_> = reports.iter().filter(|r| r.failed > 0).collect();
    out(&format!(
        "{}{} rule(s), {} instance(s) with conditions holding, {} failing rule(s), {:.1} s\n",
        crate::rulecheck::table(&reports),
        reports.len(),
        reports.iter().map(|r| r.held).sum::<u64>(),
        failed.len(),
        start.elapsed().as_secs_f64()
    ))?;
    if failed.is_empty() {
        return Ok(());
    }
    let mut msg = String::new();
    for r in failed {
        let def = rules.iter().find(|d| d.name == r.name);
        let at = def.map_or_else(
            || format!("rewrite-rules/{}.rules:1:1", r.family),
            |d| rule_location(dir, d),
        );
        msg.push_str(&format!(
            "{at}: error[rule-unsound]: rule `{}` (family `{}`) fails on {} of {} instance(s)\n",
            r.name, r.family, r.failed, r.held
        ));
        if let Some(d) = def {
            msg.push_str(&format!("  {}\n", d.doc));
        }
        if let Some(c) = &r.counterexample {
            msg.push_str(&format!("{c}\n"));
        }
    }
    Err(Failure::Error(msg))
}

pub fn difftest(c: crate::difftest::Campaign, save: &Path) -> Result<(), Failure> {
    let start = Instant::now();
    let s = crate::difftest::run(c);
    out_json(&serde_json::json!({
        "property": c.property.name(),
        "programs": s.programs,
        "with_while": s.with_while,
        "with_operators": s.with_operators,
        "seed": c.seed,
        "max_size": c.max_size,
        "defined_points": s.counts.defined,
        "compared": s.counts.compared,
        "finite_differences": s.counts.fd,
        "ieee_overflow": s.counts.ieee,
        "ieee_rounding": s.counts.rounding,
        "bottom_agreements": s.counts.bottoms,
        "singular_points": s.counts.singular,
        "failures": usize::from(s.failure.is_some()),
        "seconds": json::rounded(start.elapsed().as_secs_f64(), 3),
    }))?;
    let Some(f) = s.failure else {
        return Ok(());
    };
    let name = format!("{}-seed{}-case{}.fsm", c.property.name(), c.seed, f.case);
    let text = format!(
        "// property: {}\n// Found by `fsmooth difftest --property {} --seed {} --max-size {}` (case {}, {} shrinks):\n// {}\n{}",
        c.property.name(),
        c.property.name(),
        c.seed,
        c.max_size,
        f.case,
        f.shrinks,
        f.message.replace('\n', "\n// "),
        f.program.trim_end()
    ) + "\n";
    let saved = std::fs::create_dir_all(save)
        .and_then(|()| std::fs::write(save.join(&name), &text))
        .map(|()| format!("saved as {}", save.join(&name).display()))
        .unwrap_or_else(|e| format!("not saved ({}: {e})", save.display()));
    Err(Failure::Error(format!(
        "error[difftest-disagreement]: case {} of seed {}: {}\n{}\n{saved}\n",
        f.case,
        c.seed,
        f.message,
        f.program.trim_end()
    )))
}
