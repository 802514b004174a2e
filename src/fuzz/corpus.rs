//! The seeds that mutation starts from: source programs and rule files.
//! Built in: the prelude, the four ADBench objectives and the default
//! rule families (all compiled into the binary). The command line adds
//! the repository's examples, golden files and rule files
//! (`examples/**/*.fsm`, `tests/golden/**/*.fsm`, `rewrite-rules/*.rules`),
//! which it reads: the library reads no files.
//!
//! For JSON inputs the corpus also knows each seed program's entries:
//! the definitions that take data and return data, with their parameter
//! types (found by loading the seed once, [`Corpus::index`]).

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::ir::Type;
use crate::pipeline::Session;

/// One seed file.
#[derive(Clone, Debug)]
pub struct Seed {
    /// Where it comes from (a path, or `<prelude>`).
    pub name: String,
    pub text: Vec<u8>,
}

/// An entry of a seed program: its name and parameters.
#[derive(Clone, Debug)]
pub struct SeedEntry {
    pub seed: usize,
    pub name: String,
    pub params: Vec<(String, Type)>,
    pub result: Type,
}

/// The seeds of a campaign.
#[derive(Clone, Debug, Default)]
pub struct Corpus {
    pub programs: Vec<Seed>,
    pub rules: Vec<Seed>,
    /// The entries of [`Corpus::programs`] that take data parameters.
    pub entries: Vec<SeedEntry>,
}

impl Corpus {
    /// The seeds compiled into the binary.
    pub fn builtin() -> Corpus {
        let mut c = Corpus::default();
        let programs = [
            ("<prelude>", crate::pipeline::PRELUDE),
            ("examples/adbench/gmm.fsm", crate::adbench::gmm::GMM_SOURCE),
            ("examples/adbench/ba.fsm", crate::adbench::ba::BA_SOURCE),
            (
                "examples/adbench/lstm.fsm",
                crate::adbench::lstm::LSTM_SOURCE,
            ),
            (
                "examples/adbench/hand.fsm",
                crate::adbench::hand::HAND_SOURCE,
            ),
        ];
        for (name, text) in programs {
            c.add_program(name, text.as_bytes().to_vec());
        }
        for (family, text) in crate::opt::rules::DEFAULT_FAMILIES {
            c.add_rules(&format!("{family}.rules"), text.as_bytes().to_vec());
        }
        c
    }

    /// Adds a program seed (a file of the same name replaces the
    /// built-in copy).
    pub fn add_program(&mut self, name: &str, text: Vec<u8>) {
        if let Some(s) = self.programs.iter_mut().find(|s| s.name == name) {
            s.text = text;
        } else {
            self.programs.push(Seed {
                name: name.to_string(),
                text,
            });
        }
    }

    /// Adds a rule-file seed; its file name names its family.
    pub fn add_rules(&mut self, name: &str, text: Vec<u8>) {
        self.rules.push(Seed {
            name: name.to_string(),
            text,
        });
    }

    /// Finds the entries of every program seed: loads each once (a seed
    /// that does not load, or panics, has none; the campaign is what
    /// looks for panics).
    pub fn index(&mut self) {
        self.entries.clear();
        for (k, seed) in self.programs.iter().enumerate() {
            let Ok(src) = std::str::from_utf8(&seed.text) else {
                continue;
            };
            let found = catch_unwind(AssertUnwindSafe(|| entries_of(k, src))).unwrap_or_default();
            self.entries.extend(found);
        }
    }
}

/// The user definitions of `src` (seed `seed`) that are entries taking
/// data.
fn entries_of(seed: usize, src: &str) -> Vec<SeedEntry> {
    let Ok(session) = Session::load(src) else {
        return Vec::new();
    };
    let names: Vec<String> = session
        .program()
        .defs
        .iter()
        .filter(|d| !d.prelude)
        .map(|d| d.name.to_string())
        .collect();
    let mut out: Vec<SeedEntry> = Vec::new();
    for name in names {
        if out.iter().any(|e| e.name == name) {
            continue;
        }
        if let Ok(e) = session.entry(&name)
            && !e.params.is_empty()
        {
            out.push(SeedEntry {
                seed,
                name,
                params: e.params.clone(),
                result: e.result.clone(),
            });
        }
    }
    out
}
