//! Per-rule soundness checking (`fsmooth rules check`,
//! spec/rules-format.md "Checking rules"): every default rule refines on
//! random instances whose side conditions hold, and the deliberately
//! unsound fixture rules are caught with shrunk counterexamples.

use fsmooth::opt::{RuleDef, load};
use fsmooth::rulecheck::{Options, RuleReport, check_rule, check_rules};

use crate::common::{cli, root};

fn fixture_rules() -> Vec<RuleDef> {
    family("unsound")
}

/// The rules of one fixture family of `tests/data/unsound-rules`.
fn family(name: &str) -> Vec<RuleDef> {
    let dir = root().join("tests/data/unsound-rules");
    load(Some(&crate::common::rule_files(&dir)))
        .expect("the fixture rule files load")
        .into_iter()
        .filter(|r| r.family == name)
        .collect()
}

fn opts(cases: u64) -> Options {
    Options {
        cases,
        ..Options::default()
    }
}

#[test]
fn every_default_rule_refines_on_random_instances() {
    let rules = load(None).expect("default rules load");
    let reports = check_rules(&rules, &opts(150));
    let failing: Vec<&RuleReport> = reports.iter().filter(|r| r.failed > 0).collect();
    assert!(
        failing.is_empty(),
        "unsound default rules:\n{}",
        failing
            .iter()
            .map(|r| format!("{}: {}", r.name, r.counterexample.as_ref().unwrap()))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The check is not vacuous: every rule's pattern can be typed, and its
    // conditions held on some instance. A rule whose conditions are rare on
    // random instances (`in-bounds` of two constants: about 1 in 300) gets
    // a longer run of its own.
    for (r, rule) in reports.iter().zip(&rules) {
        assert!(r.untypable.is_none(), "{}: {:?}", r.name, r.untypable);
        let held = if r.held > 0 {
            r.held
        } else {
            let long = check_rule(rule, &opts(3000));
            assert_eq!(long.failed, 0, "{}: {:?}", r.name, long.counterexample);
            long.held
        };
        assert!(held > 0, "{}: no instance satisfied the conditions", r.name);
    }
}

#[test]
fn unsound_fixture_rules_are_caught_with_shrunk_counterexamples() {
    let rules = fixture_rules();
    let names: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "unsound-get-of-build",
            "unsound-div-self",
            "unsound-let-dead",
            "unsound-let-lam-capture"
        ]
    );
    for r in &rules {
        let report = check_rule(r, &opts(200));
        assert!(report.failed > 0, "{} was not caught", r.name);
        let c = report.counterexample.expect("a counterexample");
        // Shrunk: the instance is small (the context lets are fixed).
        let size: usize = c.bindings.iter().map(|(_, t)| t.len()).sum();
        assert!(size <= 40, "{}: counterexample not shrunk: {c}", r.name);
        let expected = match r.name.as_str() {
            // Equivalence claimed, but the left side is ⊥ and the right is not.
            "unsound-get-of-build" => "left side is ⊥ (index-out-of-bounds)",
            "unsound-div-self" => "left side is ⊥ (division-by-zero)",
            "unsound-let-dead" => "the rule claims equivalence",
            // Capture: the moved `let` sees the lambda's parameter.
            _ => "right side",
        };
        assert!(c.why.contains(expected), "{}: {}", r.name, c.why);
    }
}

#[test]
fn boundary_cases_catch_rules_wrong_only_at_a_boundary() {
    // Each fixture rule is wrong at one class of boundary instances only
    // (spec/rules-format.md §12): the default check catches it in a
    // boundary case (random cases may catch it too: an empty array or a
    // zero is a random leaf as well, the extreme Index values are not).
    let rules = family("boundary");
    let expected = [
        (
            "boundary-zero",
            "the left side is 0.0 but the right side is -0.0",
        ),
        ("boundary-overflow", "left side is ⊥ (integer-overflow)"),
        ("boundary-empty", "differ"),
        (
            "boundary-equal",
            "the left side is true but the right side is false",
        ),
        (
            "boundary-out-of-range",
            "left side is ⊥ (index-out-of-bounds)",
        ),
    ];
    let names: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, expected.map(|(n, _)| n));
    for (r, (_, why)) in rules.iter().zip(expected) {
        let report = check_rule(r, &Options::default());
        let c = report
            .counterexample
            .unwrap_or_else(|| panic!("{} was not caught", r.name));
        assert!(
            report.boundary_failed > 0,
            "{}: not caught in a boundary case",
            r.name
        );
        assert!(c.why.contains(why), "{}: {c}", r.name);
        if r.name == "boundary-overflow" {
            // Random terms never reach i64::MAX: only boundary cases can.
            assert_eq!(report.failed, report.boundary_failed);
        }
    }
}

#[test]
fn a_sound_rule_stays_sound_when_its_condition_is_kept() {
    // The default get-of-build is tagged `refines`: ⊥ may become a value.
    let rules = load(None).expect("default rules load");
    let gob = rules.iter().find(|r| r.name == "get-of-build").unwrap();
    assert!(gob.has_tag("refines"));
    let r = check_rule(gob, &opts(200));
    assert_eq!(r.failed, 0);
    assert!(r.held == r.typed && r.held > 100);
}

#[test]
fn rules_check_is_deterministic_per_seed() {
    let rules = fixture_rules();
    let a = check_rule(&rules[1], &opts(60));
    let b = check_rule(&rules[1], &opts(60));
    assert_eq!((a.held, a.failed), (b.held, b.failed));
    let (ca, cb) = (a.counterexample.unwrap(), b.counterexample.unwrap());
    assert_eq!(ca.choices, cb.choices);
}

#[test]
fn rules_check_cli_prints_a_table_and_exits_zero_on_sound_rules() {
    let o = cli(&[
        "rules", "check", "--rule", "beta", "--rule", "let-dead", "--cases", "40",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.lines().next().unwrap().starts_with("rule"));
    assert!(out.contains("beta") && out.contains("let-dead"));
    assert!(out.contains("2 rule(s)") && out.contains("0 failing rule(s)"));
}

#[test]
fn rules_check_cli_rejects_an_unsound_rule_file_with_a_counterexample() {
    let dir = root().join("tests/data/unsound-rules");
    let o = cli(&[
        "rules",
        "check",
        "--rules",
        dir.to_str().unwrap(),
        "--family",
        "unsound",
        "--cases",
        "100",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("error[rule-unsound]").count(), 4, "{err}");
    assert!(err.contains("instance:") && err.contains("left side:"));
    // Located at the rule (found by `fsmooth fuzz --target rules`: the
    // error named the line but not the file).
    assert!(
        err.contains("unsound.rules:6:1: error[rule-unsound]: rule `unsound-get-of-build`"),
        "{err}"
    );
}

#[test]
fn rules_check_cli_reports_an_unknown_rule() {
    let o = cli(&["rules", "check", "--rule", "no-such-rule"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("error[unknown-rule]"));
}
