//! `fsmooth rules prove` (spec/rules-format.md §14): the scalar rules
//! decided by z3 over the reals and in IEEE binary64, with ⊥ explicit;
//! the `ieee-inexact` tags derived; counterexamples replayed on the
//! evaluator. These tests need z3 on the PATH (`.ci/run` installs it).

use fsmooth::opt::{RuleDef, load};
use fsmooth::prove::{Options, Report, Verdict, prove_rules};

use crate::common::{cli, root};

fn solver() {
    assert!(
        fsmooth::prove::z3::available(),
        "these tests need the SMT solver z3 on the PATH (Debian: `apt-get install z3`; .ci/run installs it)"
    );
}

fn opts() -> Options {
    Options {
        timeout_ms: 1_500,
        ..Options::default()
    }
}

fn find<'a>(reports: &'a [Report], name: &str) -> &'a Report {
    reports.iter().find(|r| r.name == name).expect(name)
}

fn confirmed(v: &Verdict) -> bool {
    matches!(v, Verdict::Counterexample { replay: Err(_), .. })
}

/// Every scalar rule of the default set (families `ring` and `cond`) is
/// right as written: none is disproved over the reals, and each one the
/// solver decides in binary64 has the `ieee-inexact` tag exactly when it
/// is not exact there. Binary64 counterexamples are confirmed bit for bit
/// on the evaluator (`add-zero` at −0.0, `eq-self` at NaN).
#[test]
fn the_scalar_rules_are_proved_and_their_tags_derived() {
    solver();
    let rules: Vec<RuleDef> = load(None)
        .expect("default rules")
        .into_iter()
        .filter(|r| r.family == "ring" || r.family == "cond")
        .collect();
    let reports = prove_rules(&rules, &opts());
    let wrong: Vec<String> = reports
        .iter()
        .filter(|r| r.error.is_some())
        .map(|r| r.to_string())
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let proved = reports
        .iter()
        .filter(|r| matches!(r.reals, Verdict::Proved))
        .count();
    assert!(
        proved >= 30,
        "{proved} of {} proved over the reals",
        reports.len()
    );
    for name in ["add-zero", "zero-add", "mul-zero", "eq-self"] {
        let r = find(&reports, name);
        assert!(matches!(r.reals, Verdict::Proved), "{r}");
        assert!(confirmed(&r.ieee), "{r}");
    }
    for name in [
        "add-neg-sub",
        "mul-one",
        "sub-zero",
        "if-same",
        "index-nonneg",
        "in-bounds-lt",
    ] {
        let r = find(&reports, name);
        assert!(
            matches!((&r.reals, &r.ieee), (Verdict::Proved, Verdict::Proved)),
            "{r}"
        );
    }
}

/// Every deliberately unsound fixture gets a counterexample the evaluator
/// confirms: the scalar ones from z3's model (`e / e = 1` at e = 0: ⊥
/// against 1.0; `e + 0.0 = e` at −0.0), the structural ones, out of scope
/// for SMT, from `rules check`'s search (a capture, a dropped ⊥, an index
/// out of bounds, an empty array).
#[test]
fn every_unsound_fixture_is_disproved_and_replayed() {
    solver();
    let dir = root().join("tests/data/unsound-rules");
    let rules: Vec<RuleDef> = load(Some(&crate::common::rule_files(&dir)))
        .expect("fixtures load")
        .into_iter()
        .filter(|r| r.family == "unsound" || r.family == "boundary")
        .collect();
    assert_eq!(rules.len(), 9);
    let reports = prove_rules(&rules, &opts());
    for r in &reports {
        assert!(r.error.is_some(), "{r}");
        let def = rules.iter().find(|d| d.name == r.name).expect("the rule");
        let smt = fsmooth::prove::smt::typings(def).is_ok();
        let refuted = confirmed(&r.reals) || confirmed(&r.ieee);
        assert!(refuted, "{r}");
        if !smt {
            assert!(format!("{r}").contains("found by search"), "{r}");
        }
    }
    let div = find(&reports, "unsound-div-self");
    assert!(confirmed(&div.reals), "{div}");
    let capture = find(&reports, "unsound-let-lam-capture");
    assert!(format!("{capture}").contains("?y := y"), "{capture}");
}

/// From the CLI: a rule file whose tag disagrees with binary64 fails with
/// `rule-disproved`; the shipped rule passes.
#[test]
fn rules_prove_from_the_cli() {
    solver();
    let o = cli(&[
        "rules",
        "prove",
        "--rule",
        "add-neg-sub",
        "--rule",
        "add-zero",
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        text.contains("2 rule(s): 2 proved over the reals, 1 exact in binary64"),
        "{text}"
    );
    let dir = std::env::temp_dir().join(format!("fsmooth-prove-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(
        dir.join("ring.rules"),
        "## a + (-b) = a - b\nrule add-neg-sub : (+ ?a (neg ?b)) => (- ?a ?b)\n  if double ?b\n  tags: ieee-inexact, phase=simplify\n\n## e + 0 = e\nrule add-zero : (+ ?e 0.0) => ?e\n  tags: phase=simplify\n",
    )
    .expect("rule file");
    let dir = dir.to_str().expect("path").to_string();
    let o = cli(&[
        "rules",
        "prove",
        "--rules",
        &dir,
        "--family",
        "ring",
        "--rule",
        "add-neg-sub",
        "--rule",
        "add-zero",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("ring.rules:2:1: error[rule-disproved]: rule `add-neg-sub`")
            && err.contains("is not needed"),
        "{err}"
    );
    assert!(
        err.contains("error[rule-disproved]: rule `add-zero`")
            && err.contains("not tagged `ieee-inexact`"),
        "{err}"
    );
}

/// Every default rule is proved over the reals by `rules prove` or in Coq
/// (a theorem `<rule>_holds` of proofs/coq, which tests/it/coq.rs builds),
/// or listed in `proofs/unproved.md` with its reason; and no listed rule
/// is proved (the list is exact, so it only shrinks).
#[test]
fn every_rule_is_machine_proved_or_listed_with_a_reason() {
    solver();
    let listed: Vec<String> = std::fs::read_to_string(root().join("proofs/unproved.md"))
        .expect("proofs/unproved.md")
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect();
    let rules = load(None).expect("default rules");
    // The reals only, with room for a loaded machine: a proof that takes
    // longer than its limit would look like a missing one.
    let reals = Options {
        timeout_ms: 8_000,
        ieee: false,
        search: 0,
        ..Options::default()
    };
    let reports = prove_rules(&rules, &reals);
    let coq = coq_theorems();
    let mut bad = Vec::new();
    for r in &reports {
        let proved = matches!(r.reals, Verdict::Proved)
            || coq.contains(&fsmooth::prove::coq::ident(&r.name));
        let on_list = listed.contains(&r.name);
        if proved == on_list {
            bad.push(format!(
                "{}: {} and {}",
                r.name,
                if proved { "proved" } else { "not proved" },
                if on_list { "listed" } else { "not listed" }
            ));
        }
    }
    for name in &listed {
        if !rules.iter().any(|r| &r.name == name) {
            bad.push(format!("{name}: listed but no such rule"));
        }
    }
    assert!(
        bad.is_empty(),
        "proofs/unproved.md is out of date:\n{}",
        bad.join("\n")
    );
}

/// The rules with a theorem `<rule>_holds` in the Coq development.
fn coq_theorems() -> Vec<String> {
    let dir = root().join("proofs/coq");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("proofs/coq") {
        let p = entry.expect("entry").path();
        if p.extension().is_some_and(|x| x == "v") {
            let text = std::fs::read_to_string(&p).expect("read");
            out.extend(
                text.lines()
                    .filter_map(|l| l.strip_prefix("Theorem "))
                    .filter_map(|l| l.split_once("_holds : "))
                    .map(|(id, _)| id.to_string()),
            );
        }
    }
    out
}
