//! Tidy checks that keep the spec, the code and the tests in step:
//! every rule defined in `spec/` (a `**(X-Name)**` heading, X one of
//! T, E, D, R) is cited in `src/` and named in `tests/`; every rule name
//! cited in `src/` is defined in `spec/`; every Rust source file starts
//! with a `//!` summary.

use crate::common::{files, read_all, root, rule_names, spec_rules};

#[test]
fn every_spec_rule_is_implemented_and_tested() {
    let spec = spec_rules();
    assert!(spec.len() >= 60, "spec defines only {} rules", spec.len());
    let src = rule_names(&read_all("src", "rs"));
    let mut tests = rule_names(&read_all("tests", "rs"));
    tests.extend(rule_names(&read_all("tests", "fsm")));
    let missing_code: Vec<_> = spec.iter().filter(|r| !src.contains(*r)).collect();
    let missing_test: Vec<_> = spec.iter().filter(|r| !tests.contains(*r)).collect();
    assert!(
        missing_code.is_empty(),
        "rules in spec/ never cited in src/: {missing_code:?}"
    );
    assert!(
        missing_test.is_empty(),
        "rules in spec/ never named in tests/: {missing_test:?}"
    );
}

#[test]
fn every_rule_cited_in_code_is_specified() {
    let spec = spec_rules();
    let src = rule_names(&read_all("src", "rs"));
    let unknown: Vec<_> = src.iter().filter(|r| !spec.contains(*r)).collect();
    assert!(
        unknown.is_empty(),
        "src/ cites rules that spec/ does not define: {unknown:?}"
    );
}

#[test]
fn every_rust_file_starts_with_a_summary() {
    let mut fs = Vec::new();
    for d in ["src", "tests", "benches"] {
        files(&root().join(d), "rs", &mut fs);
    }
    let bad: Vec<_> = fs
        .iter()
        .filter(|f| {
            !std::fs::read_to_string(f)
                .expect("readable")
                .trim_start()
                .starts_with("//!")
        })
        .collect();
    assert!(bad.is_empty(), "files without a `//!` summary: {bad:?}");
}

#[test]
fn rule_name_scanner_finds_names() {
    let names = rule_names("see (E-Beta) and `T-IFold`, not ONE-HOT or x-E-Foo; D-Mult.");
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        vec!["D-Mult", "E-Beta", "T-IFold"]
    );
}

/// Every rewrite rule has a proof file `proofs/<family>/<rule>.md` whose
/// first line is `# <rule>`, and every proof names an existing rule.
#[test]
fn every_rewrite_rule_has_a_proof_and_every_proof_a_rule() {
    let rules = fsmooth::opt::load(None).expect("the default rules load");
    assert!(rules.len() >= 70, "only {} rules", rules.len());
    for r in &rules {
        let p = root().join(format!("proofs/{}/{}.md", r.family, r.name));
        let text = std::fs::read_to_string(&p)
            .unwrap_or_else(|_| panic!("rule `{}` has no proof at {}", r.name, p.display()));
        assert_eq!(
            text.lines().next().map(str::trim),
            Some(format!("# {}", r.name).as_str()),
            "{}: the first line must name the rule",
            p.display()
        );
    }
    let mut proofs = Vec::new();
    files(&root().join("proofs"), "md", &mut proofs);
    for p in proofs {
        // `proofs/README.md` and `proofs/unproved.md` (tests/it/prove.rs)
        // are about all rules; `proofs/coq/` is the Coq development
        // (tests/it/coq.rs).
        if p.parent() == Some(root().join("proofs").as_path())
            || p.starts_with(root().join("proofs/coq"))
        {
            continue;
        }
        let stem = p.file_stem().and_then(|s| s.to_str()).expect("name");
        let family = p
            .parent()
            .and_then(|d| d.file_name())
            .and_then(|s| s.to_str())
            .expect("family");
        assert!(
            rules.iter().any(|r| r.name == stem && r.family == family),
            "{} proves no rule of family `{family}`",
            p.display()
        );
    }
}
