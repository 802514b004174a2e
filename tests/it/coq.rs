//! The Coq route of the machine-checked rules (spec/rules-format.md §15,
//! proofs/coq/README.md): the statements are generated from the rule
//! files, the development builds with no `Admitted` and no axiom beyond
//! those its README lists, every stated rule has its theorem, and the
//! statements of the unsound fixtures are refuted. These tests need `coqc`
//! on the PATH (`.ci/deps` installs Debian's `coq`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{cli, root};

fn coq_dir() -> PathBuf {
    root().join("proofs/coq")
}

fn coqc_available() {
    let ok = Command::new("coqc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "these tests need the Coq proof assistant `coqc` on the PATH (Debian: `apt-get install coq`; `.ci/deps` installs it)"
    );
}

/// The files of the development, in `_CoqProject` order.
fn project_files() -> Vec<String> {
    std::fs::read_to_string(coq_dir().join("_CoqProject"))
        .expect("proofs/coq/_CoqProject")
        .lines()
        .map(str::trim)
        .filter(|l| l.ends_with(".v"))
        .map(str::to_string)
        .collect()
}

/// Copies proofs/coq to a scratch directory named `name`, replaces or adds
/// `extra` files, and compiles `order` there with `coqc`: the output of
/// the last file, or the first failure.
fn build(name: &str, extra: &[(&str, String)], order: &[String]) -> Result<String, String> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    for entry in std::fs::read_dir(coq_dir()).expect("proofs/coq") {
        let p = entry.expect("entry").path();
        if p.extension().is_some_and(|x| x == "v") {
            std::fs::copy(&p, dir.join(p.file_name().unwrap())).expect("copy");
        }
    }
    for (file, text) in extra {
        std::fs::write(dir.join(file), text).expect("write");
    }
    let mut last = String::new();
    for file in order {
        let out = Command::new("coqc")
            .args(["-Q", ".", "Fsmooth", file])
            .current_dir(&dir)
            .output()
            .expect("coqc runs");
        if !out.status.success() {
            return Err(format!(
                "coqc {file}:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        last = String::from_utf8_lossy(&out.stdout).into_owned();
    }
    Ok(last)
}

/// `Theorem <name>_holds : <name>.` in the family files: (file, rule id).
fn theorems() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for file in project_files() {
        let text = std::fs::read_to_string(coq_dir().join(&file)).expect("read");
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("Theorem ")
                && let Some((name, stmt)) = rest.split_once(" : ")
                && let Some(id) = name.strip_suffix("_holds")
            {
                assert_eq!(
                    stmt.trim_end_matches('.'),
                    id,
                    "{file}: `{line}` must prove the statement of its own rule"
                );
                out.push((file.clone(), id.to_string()));
            }
        }
    }
    out
}

fn stated(statements: &str) -> Vec<String> {
    statements
        .lines()
        .filter_map(|l| l.strip_prefix("Definition "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect()
}

/// The checked-in `Statements.v` is exactly what `fsmooth rules coq`
/// generates from `rewrite-rules/`: a statement cannot drift from its rule.
#[test]
fn the_coq_statements_are_generated_from_the_rule_files() {
    let out = cli(&["rules", "coq"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let generated = String::from_utf8(out.stdout).expect("utf-8");
    let checked_in = std::fs::read_to_string(coq_dir().join("Statements.v")).expect("Statements.v");
    assert!(
        generated == checked_in,
        "proofs/coq/Statements.v is out of date: run `fsmooth rules coq > proofs/coq/Statements.v` and re-prove"
    );
    // Every rule with a binder, a loop, an array, a tuple or a conditional
    // is stated.
    let rules = fsmooth::opt::load(None).expect("default rules");
    let ids = stated(&generated);
    for r in &rules {
        let covered = fsmooth::prove::coq::covered(r);
        assert_eq!(
            covered,
            ids.contains(&fsmooth::prove::coq::ident(&r.name)),
            "{}",
            r.name
        );
    }
    assert!(ids.len() >= 75, "{} statements", ids.len());
}

/// The development builds; it has no `Admitted`, `admit`, `Axiom` or
/// `Parameter`; `Print Assumptions` of every theorem lists only the axioms
/// of proofs/coq/README.md ("Axioms"); every statement has exactly one
/// theorem.
#[test]
fn the_coq_development_proves_every_stated_rule_without_axioms() {
    coqc_available();
    let statements = std::fs::read_to_string(coq_dir().join("Statements.v")).expect("Statements.v");
    let ids = stated(&statements);
    let thms = theorems();
    for id in &ids {
        let n = thms.iter().filter(|(_, t)| t == id).count();
        assert_eq!(n, 1, "rule `{id}` has {n} theorem(s) `{id}_holds`");
    }
    for (file, t) in &thms {
        assert!(ids.contains(t), "{file}: `{t}_holds` proves no stated rule");
    }
    // The hand proof of each rule names its machine proof.
    let rules = fsmooth::opt::load(None).expect("default rules");
    for r in rules.iter().filter(|r| {
        thms.iter()
            .any(|(_, t)| *t == fsmooth::prove::coq::ident(&r.name))
    }) {
        let md = root().join(format!("proofs/{}/{}.md", r.family, r.name));
        let text = std::fs::read_to_string(&md).expect("hand proof");
        assert!(
            text.contains(&format!("`{}_holds`", fsmooth::prove::coq::ident(&r.name))),
            "{}: the section \"Machine proof\" must name the Coq theorem",
            md.display()
        );
    }
    for file in project_files() {
        let text = std::fs::read_to_string(coq_dir().join(&file)).expect("read");
        for word in ["Admitted", "admit", "Axiom", "Parameter", "Conjecture"] {
            assert!(
                !text
                    .split(|c: char| !c.is_alphanumeric() && c != '_')
                    .any(|w| w == word),
                "{file} uses `{word}`"
            );
        }
    }
    let allowed = allowed_axioms();
    let mut check = String::from("From Fsmooth Require Import");
    for f in project_files() {
        check.push(' ');
        check.push_str(f.trim_end_matches(".v"));
    }
    check.push_str(".\n");
    for (_, t) in &thms {
        check.push_str(&format!("Print Assumptions {t}_holds.\n"));
    }
    let mut order = project_files();
    order.push("Assumptions.v".into());
    let out =
        build("coq-proofs", &[("Assumptions.v", check)], &order).unwrap_or_else(|e| panic!("{e}"));
    let closed = out.matches("Closed under the global context").count();
    let mut axioms = Vec::new();
    let mut in_list = false;
    for line in out.lines() {
        if line.starts_with("Axioms:") {
            in_list = true;
        } else if in_list && !line.starts_with(' ') {
            in_list = false;
        }
        if in_list
            && let Some(name) = line.trim().split(" :").next()
            && !name.is_empty()
            && line.starts_with(|c: char| c.is_alphabetic())
        {
            axioms.push(name.to_string());
        }
    }
    for a in &axioms {
        assert!(
            allowed.contains(a),
            "axiom `{a}` is not listed in proofs/coq/README.md"
        );
    }
    assert!(
        closed + out.matches("Axioms:").count() == thms.len(),
        "one answer per theorem:\n{out}"
    );
}

/// The axioms proofs/coq/README.md allows: the items of its "Axioms"
/// section (`- \`name\``).
fn allowed_axioms() -> Vec<String> {
    let readme =
        std::fs::read_to_string(coq_dir().join("README.md")).expect("proofs/coq/README.md");
    let section = readme
        .split("## Axioms")
        .nth(1)
        .expect("proofs/coq/README.md has a section \"## Axioms\"");
    let section = section.split("\n## ").next().unwrap_or("");
    section
        .lines()
        .filter_map(|l| l.strip_prefix("- `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect()
}

/// The statements of the deliberately unsound fixtures are false: Coq
/// refutes each (tests/data/unsound-rules/coq/Refuted.v), so a wrong rule
/// cannot be proved, capture included.
#[test]
fn the_coq_statements_of_the_unsound_fixtures_are_refuted() {
    coqc_available();
    let fixtures = root().join("tests/data/unsound-rules");
    let out = cli(&["rules", "coq", "--rules", fixtures.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let statements = String::from_utf8(out.stdout).expect("utf-8");
    for id in [
        "unsound_let_dead",
        "unsound_get_of_build",
        "unsound_let_lam_capture",
        "boundary_out_of_range",
        "boundary_empty",
    ] {
        assert!(
            stated(&statements).contains(&id.to_string()),
            "{id} is stated"
        );
    }
    let refuted = std::fs::read_to_string(fixtures.join("coq/Refuted.v")).expect("Refuted.v");
    build(
        "coq-refuted",
        &[("Statements.v", statements), ("Refuted.v", refuted)],
        &[
            "Semantics.v".into(),
            "Statements.v".into(),
            "Refuted.v".into(),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
}
