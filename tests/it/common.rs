//! Helpers shared by the integration tests: running programs through the
//! library pipeline and through the `fsmooth` binary; the scanner of the
//! rule names spec/ defines.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fsmooth::diagnostic::Diagnostic;
use fsmooth::eval::{Limits, Stats, Value};
use fsmooth::gradient::{Mode, Plan};
use fsmooth::pipeline::{self, Checkpointing, Engine, Session};

/// Loads `src`, monomorphises for `entry`, reads `input` (JSON) and runs it.
pub fn run(src: &str, entry: &str, input: Option<&str>) -> Result<(Value, Stats), Diagnostic> {
    let e = Session::load(src)?.entry(entry)?;
    let args = e.read_input(input)?;
    e.run(args, Limits::default(), &mut |_, _| {})
        .map_err(|err| Diagnostic::from(&err))
}

/// The plan of gradient `mode` for `entry` of `src` with respect to its
/// parameter `wrt`, in a session of its own whose optimisations are
/// checked (`opt --check`): the mode's own program
/// ([`Mode::program`], checkpointing by default), which either engine
/// runs (`plan.columns(args, engine, limits)`).
pub fn plan(src: &str, entry: &str, wrt: &str, mode: Mode) -> Result<Plan, Diagnostic> {
    let session = Session::load(src)?.with_options(checked());
    Plan::new(
        &session,
        entry,
        wrt,
        mode,
        Engine::Eval,
        Checkpointing::default(),
    )
}

/// The result of `run` as JSON text, or `error[code]`.
pub fn run_text(src: &str, entry: &str, input: Option<&str>) -> String {
    match run(src, entry, input) {
        Ok((v, _)) => v.to_string(),
        Err(d) => format!("error[{}]", d.code),
    }
}

/// Optimiser options for tests: `opt --check` is on, so every optimised
/// program in the suite has each rewrite step verified against the rules
/// (an unverifiable step is an `opt-check-failed` error).
pub fn checked() -> pipeline::OptOptions {
    pipeline::OptOptions {
        check: true,
        ..Default::default()
    }
}

/// Runs the `fsmooth` binary with `args`, with `opt --check` on for every
/// optimisation it performs (`FSMOOTH_OPT_CHECK=1`).
pub fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fsmooth"))
        .args(args)
        .env("FSMOOTH_OPT_CHECK", "1")
        .output()
        .expect("fsmooth binary runs")
}

/// `fsmooth grad FILE ARGS…` (the entry, `--wrt`, `--mode`, … in `args`),
/// which must succeed: (value, gradient flattened), the gradient of a
/// Double parameter as one element.
pub fn grad_cli(file: &str, args: &[&str]) -> (f64, Vec<f64>) {
    let mut all = vec!["grad", file];
    all.extend_from_slice(args);
    let o = cli(&all);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&String::from_utf8_lossy(&o.stdout)).expect("JSON");
    let g = match &v["gradient"] {
        serde_json::Value::Array(xs) => xs.iter().map(|x| x.as_f64().expect("a number")).collect(),
        x => vec![x.as_f64().expect("a number")],
    };
    (v["value"].as_f64().expect("value"), g)
}

/// Writes `src` to a fresh temporary file and returns its path.
pub fn temp_file(name: &str, src: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("fsmooth-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let p = dir.join(name);
    std::fs::write(&p, src).expect("write temp file");
    p
}

/// The repository root.
pub fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `*.rules` files of `dir`, read as `fsmooth --rules DIR` reads them
/// (sorted by name).
pub fn rule_files(dir: &std::path::Path) -> Vec<fsmooth::opt::RuleFile> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .expect("rules dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "rules"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| fsmooth::opt::RuleFile {
            text: std::fs::read_to_string(&p).expect("rule file"),
            path: p.display().to_string(),
        })
        .collect()
}

// ----- spec rule names --------------------------------------------------------

/// The files with extension `ext` under `dir`, sorted, `snapshots/` left out.
pub fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.map(|e| e.expect("dir entry").path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "snapshots") {
                continue;
            }
            files(&p, ext, out);
        } else if p.extension().is_some_and(|e| e == ext) {
            out.push(p);
        }
    }
}

/// Rule names (`E-Beta`, `T-IFold`, `D-Mult`, ...) occurring in `text`.
pub fn rule_names(text: &str) -> BTreeSet<String> {
    let b = text.as_bytes();
    let mut out = BTreeSet::new();
    for i in 0..b.len().saturating_sub(2) {
        let prefix_ok = matches!(b[i], b'T' | b'E' | b'D' | b'R')
            && b[i + 1] == b'-'
            && b[i + 2].is_ascii_uppercase()
            && (i == 0
                || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'-' || b[i - 1] == b'_'));
        if !prefix_ok {
            continue;
        }
        let mut j = i + 2;
        while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'-') {
            j += 1;
        }
        let name = text[i..j].trim_end_matches('-');
        out.insert(name.to_string());
    }
    out
}

pub fn read_all(dir: &str, ext: &str) -> String {
    let mut fs = Vec::new();
    files(&root().join(dir), ext, &mut fs);
    fs.iter()
        .map(|f| std::fs::read_to_string(f).expect("readable"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Rules defined in the spec: `**(NAME)**` headings (the tidy checks and
/// the primitive table's test share this scanner).
pub fn spec_rules() -> BTreeSet<String> {
    let spec = read_all("spec", "md");
    let mut out = BTreeSet::new();
    for part in spec.split("**(").skip(1) {
        if let Some(end) = part.find(")**") {
            let name = &part[..end];
            if rule_names(name).contains(name) {
                out.insert(name.to_string());
            }
        }
    }
    out
}
