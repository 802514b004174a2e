//! One build per command: every command that reads a program parses it
//! once and infers its types once, and builds each derived program once
//! (`fsmooth --passes`, `pipeline::passes`). The table below is the plan of
//! each command on `examples/hello.fsm`: a pass that runs more often than
//! it says is a program built twice.

use std::collections::BTreeMap;

use crate::common::{cli, root};

/// The passes `args` ran, from `--passes`, by name.
fn passes(args: &[&str]) -> BTreeMap<String, u64> {
    let mut all: Vec<&str> = vec!["--passes"];
    all.extend(args);
    let o = cli(&all);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{args:?}: {stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("{\"passes\""))
        .unwrap_or_else(|| panic!("{args:?}: no --passes line in {stderr}"));
    let j: serde_json::Value = serde_json::from_str(line).expect("JSON");
    j["passes"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|p| {
            (
                p["pass"].as_str().expect("name").to_string(),
                p["count"].as_u64().expect("count"),
            )
        })
        .collect()
}

/// `name=count` pairs.
fn counts(spec: &str) -> BTreeMap<String, u64> {
    spec.split_whitespace()
        .map(|kv| {
            let (k, v) = kv.split_once('=').expect("name=count");
            (k.to_string(), v.parse().expect("a count"))
        })
        .collect()
}

#[test]
fn every_command_parses_and_infers_its_program_once() {
    let hello = root().join("examples/hello.fsm").display().to_string();
    let h = hello.as_str();
    let input = r#"{"v1": [1, 2, 3], "v2": [4, 5, 6]}"#;
    // Native runs without the validation gate, which builds the other
    // modes' programs to compare with (its own test is below).
    let grad = |mode: &'static str, engine: &'static str| {
        let mut args = vec![
            "grad", h, "--wrt", "v1", "--mode", mode, "--engine", engine, "--input", input,
        ];
        if engine == "native" {
            args.push("--no-gate");
        }
        args
    };
    let out = std::env::temp_dir().join(format!("fsmooth-passes-{}.o", std::process::id()));
    let o = out.display().to_string();
    // Per derived program: a forward wrapper is inferred alone, expanded,
    // checked, monomorphised and checked again; an entry is monomorphised
    // and checked; reverse mode and the optimiser start from the entry's
    // normal form, and the optimiser's output is checked and monomorphised
    // twice (before and after sharing is restored); native code compiles
    // each program it runs once, from its normal form.
    let plan: Vec<(Vec<&str>, &str)> = vec![
        (vec!["check", h], "parse=1 infer=1"),
        (vec!["print", h], "parse=1"),
        (
            vec!["run", h, "--input", input],
            "parse=1 infer=1 check=1 monomorphise=1",
        ),
        (
            vec!["run", h, "--engine", "native", "--input", input],
            "parse=1 infer=1 check=1 monomorphise=1 normalise=1 compile=1",
        ),
        (
            grad("fwd", "eval"),
            "parse=1 infer=1 infer-appended=1 check=3 monomorphise=3 forward=1",
        ),
        (
            grad("fwd", "native"),
            "parse=1 infer=1 infer-appended=1 check=3 monomorphise=3 forward=1 normalise=1 compile=1",
        ),
        (
            grad("fwd-opt", "native"),
            "parse=1 infer=1 infer-appended=1 check=7 monomorphise=5 forward=1 normalise=4 optimise=1 compile=2",
        ),
        (
            grad("fwd-vec", "native"),
            "parse=1 infer=1 infer-appended=1 check=3 monomorphise=3 forward=1 normalise=2 compile=2",
        ),
        (
            grad("fwd-rows", "native"),
            "parse=1 infer=1 infer-appended=1 check=3 monomorphise=3 forward=1 normalise=2 compile=2",
        ),
        (
            grad("rev", "eval"),
            "parse=1 infer=1 check=3 monomorphise=2 normalise=1 reverse=1",
        ),
        (
            grad("rev", "native"),
            "parse=1 infer=1 check=3 monomorphise=2 normalise=2 reverse=1 compile=1",
        ),
        (
            grad("tape", "eval"),
            "parse=1 infer=1 check=1 monomorphise=1",
        ),
        (
            vec!["ad", h, "--wrt", "v1", "--mode", "fwd-opt"],
            "parse=1 infer=1 infer-appended=1 check=7 monomorphise=5 forward=1 normalise=2 optimise=1",
        ),
        (
            vec!["opt", h],
            "parse=1 infer=1 check=5 monomorphise=3 normalise=2 optimise=1",
        ),
        (
            vec![
                "compile",
                h,
                "--mode",
                "rev",
                "--wrt",
                "v1",
                "-o",
                &o,
                "--no-gate",
            ],
            "parse=1 infer=1 check=3 monomorphise=2 normalise=2 reverse=1 compile=1",
        ),
    ];
    for (args, want) in plan {
        assert_eq!(passes(&args), counts(want), "fsmooth {}", args.join(" "));
    }
    // The gate builds reverse mode to compare with, in the same session:
    // still one parse and one inference, and each program built once.
    let gated = passes(&["compile", h, "--mode", "fwd-opt", "--wrt", "v1", "-o", &o]);
    assert_eq!(gated.get("parse"), Some(&1), "{gated:?}");
    assert_eq!(gated.get("infer"), Some(&1), "{gated:?}");
    assert_eq!(gated.get("reverse"), Some(&1), "{gated:?}");
    assert_eq!(gated.get("optimise"), Some(&1), "{gated:?}");
}

/// `adbench` builds its programs once, however many observations it
/// differentiates: BA's Jacobian on native code runs one batched program.
#[test]
fn adbench_builds_its_programs_once() {
    let ba = root().join("tests/data/adbench/data/ba/test.txt");
    let got = passes(&[
        "adbench",
        "ba",
        ba.to_str().expect("path"),
        "--mode",
        "fwd",
        "--engine",
        "native",
    ]);
    assert_eq!(got["parse"], 1);
    assert_eq!(got["infer"], 1);
    // The tangent-only wrapper and the entry, each batched; the objective.
    assert_eq!(got["infer-appended"], 1, "{got:?}");
    assert_eq!(got["compile"], 3, "{got:?}");
}
