//! What each target generates ([`generate`]): a [`Case`] decoded from a
//! choice sequence, mixing structured programs (`fuzz::programs`, and
//! `testgen`'s differentiable functions and closed programs), mutated
//! seeds (`fuzz::mutate`), JSON inputs (`fuzz::inputs`) and rule files.
//!
//! Native code runs only programs whose sizes the generator controls
//! (structured ones, `testgen`'s) with inputs of at most 64 KiB: it has
//! no fuel (that it ignores `--fuel` is being fixed elsewhere), so a
//! mutated `build 9223372036854775807` would legitimately run for ever
//! there, where the evaluator stops at its fuel.

use crate::gradient::Mode;
use crate::ir::Type;
use crate::pipeline::Engine;
use crate::syntax::print_program;
use crate::testgen::{self, GenType};

use super::Target;
use super::case::{Case, Command, GradKind};
use super::choices::Choices;
use super::corpus::Corpus;
use super::inputs;
use super::mutate::{self, Kind};
use super::programs::{self, Generated, Shape};

/// Inputs larger than this are not run on native code.
const NATIVE_INPUT: usize = 64 << 10;

/// The case of `target` decoded from `choices`.
pub fn generate(target: Target, choices: &[u32], corpus: &Corpus, fuel: u64) -> Case {
    let c = &mut Choices::new(choices);
    let mut case = match target {
        Target::Check => check(c, corpus),
        Target::Run => run(c, corpus),
        Target::Input => input(c, corpus),
        Target::Grad => grad(c, corpus),
        Target::Opt => opt(c, corpus),
        Target::Rules => rules(c, corpus),
        Target::Native | Target::All => native(c),
    };
    case.target = target;
    case.fuel = fuel;
    case
}

fn blank(program: Vec<u8>, command: Command, origin: String) -> Case {
    Case {
        target: Target::Check,
        command,
        program,
        entry: "main".to_string(),
        input: None,
        rules: None,
        fuel: 0,
        origin,
    }
}

fn structured(c: &mut Choices, shape: Shape) -> Generated {
    let depth = c.range(1, 5) as u32;
    programs::program(c, shape, depth)
}

/// A mutated seed program, and the seed's index.
fn mutated(c: &mut Choices, corpus: &Corpus) -> (Vec<u8>, String, usize) {
    if corpus.programs.is_empty() {
        return (Vec::new(), "an empty program".into(), 0);
    }
    let k = c.below(corpus.programs.len());
    let seed = &corpus.programs[k];
    let others: Vec<&[u8]> = corpus.programs.iter().map(|s| s.text.as_slice()).collect();
    let huge = c.one_in(1000);
    let (bytes, what) = mutate::mutate(c, &seed.text, &others, Kind::Program, huge);
    (bytes, format!("{} mutated: {what}", seed.name), k)
}

/// `testgen`'s differentiable function `fun (p: P) -> e` of result `r`.
fn function(c: &mut Choices, param: GenType, result: GenType) -> Generated {
    let depth = c.range(1, 4) as u32;
    let len = c.range(0, 200);
    let choices: Vec<u32> = (0..len).map(|_| c.raw()).collect();
    let source = print_program(&testgen::function(&choices, depth, param, result));
    Generated {
        source,
        entry: "main".into(),
        params: vec![("p".into(), param.to_type())],
        result: result.to_type(),
        shape: Shape::WellTyped,
        note: format!("testgen function {param:?} -> {result:?}"),
    }
}

/// `testgen`'s closed program `let main = e`.
fn closed(c: &mut Choices) -> Generated {
    let depth = c.range(1, 4) as u32;
    let len = c.range(0, 200);
    let choices: Vec<u32> = (0..len).map(|_| c.raw()).collect();
    let (p, ty) = testgen::program(&choices, depth);
    Generated {
        source: print_program(&p),
        entry: "main".into(),
        params: Vec::new(),
        result: ty.to_type(),
        shape: Shape::WellTyped,
        note: "testgen closed program".into(),
    }
}

fn describe(g: &Generated) -> String {
    match g.shape {
        Shape::WellTyped if g.note.is_empty() => "structured, well-typed".into(),
        Shape::WellTyped => g.note.clone(),
        Shape::NearMiss => format!("structured near miss: {}", g.note),
        Shape::Deep => format!("structured, deep: {}", g.note),
    }
}

/// A case of `g` with valid arguments (vectors of at least `min_len`).
fn with_args(c: &mut Choices, g: &Generated, command: Command, min_len: usize) -> Case {
    let mut case = blank(g.source.clone().into_bytes(), command, describe(g));
    case.entry = g.entry.clone();
    if !g.params.is_empty() {
        case.input = Some(inputs::arguments(c, &g.params, min_len).text().into_bytes());
    }
    case
}

fn check(c: &mut Choices, corpus: &Corpus) -> Case {
    let g = match c.weighted(&[3, 3, 1, 6, 1]) {
        0 => structured(c, Shape::WellTyped),
        1 => structured(c, Shape::NearMiss),
        2 => structured(c, Shape::Deep),
        3 => {
            let (bytes, origin, _) = mutated(c, corpus);
            return blank(bytes, Command::Check, origin);
        }
        _ => closed(c),
    };
    with_args(c, &g, Command::Check, 0)
}

fn run(c: &mut Choices, corpus: &Corpus) -> Case {
    let command = Command::Run {
        engine: Engine::Eval,
    };
    let g = match c.weighted(&[4, 2, 1, 4, 1]) {
        0 => structured(c, Shape::WellTyped),
        1 => structured(c, Shape::NearMiss),
        2 => structured(c, Shape::Deep),
        3 => {
            let (bytes, origin, k) = mutated(c, corpus);
            let mut case = blank(bytes, command, origin);
            // An entry the seed had, with arguments for its parameters.
            let entries: Vec<_> = corpus.entries.iter().filter(|e| e.seed == k).collect();
            if !entries.is_empty() {
                let e = entries[c.below(entries.len())];
                case.entry = e.name.clone();
                case.input = Some(inputs::arguments(c, &e.params, 0).text().into_bytes());
            }
            return case;
        }
        _ => closed(c),
    };
    with_args(c, &g, command, 0)
}

fn input(c: &mut Choices, corpus: &Corpus) -> Case {
    let from_seed = c.one_in(3) && !corpus.entries.is_empty();
    let (program, entry, params, origin, safe) = if from_seed {
        let e = &corpus.entries[c.below(corpus.entries.len())];
        let seed = &corpus.programs[e.seed];
        (
            seed.text.clone(),
            e.name.clone(),
            e.params.clone(),
            format!("{} entry {}", seed.name, e.name),
            false,
        )
    } else {
        let g = structured(c, Shape::WellTyped);
        let o = describe(&g);
        (g.source.into_bytes(), g.entry, g.params, o, true)
    };
    let (bytes, what) = if c.one_in(5) {
        (
            inputs::arguments(c, &params, 0).text().into_bytes(),
            "valid input".to_string(),
        )
    } else {
        let huge = c.one_in(20);
        inputs::malformed(c, &params, huge)
    };
    let command = if safe && bytes.len() <= NATIVE_INPUT {
        Command::Native { wrt: None }
    } else {
        Command::Run {
            engine: Engine::Eval,
        }
    };
    let mut case = blank(program, command, format!("{origin}; input: {what}"));
    case.entry = entry;
    case.input = Some(bytes);
    case
}

/// A variable of `params` that can be differentiated with respect to.
fn variable(c: &mut Choices, params: &[(String, Type)]) -> Option<String> {
    let ok: Vec<&String> = params
        .iter()
        .filter(|(_, t)| {
            *t == Type::Double
                || *t == Type::array(Type::Double)
                || *t == Type::array(Type::array(Type::Double))
        })
        .map(|(n, _)| n)
        .collect();
    if ok.is_empty() {
        return params.first().map(|(n, _)| n.clone());
    }
    Some(ok[c.below(ok.len())].clone())
}

const MODES: [Mode; 7] = [
    Mode::Fwd,
    Mode::Rev,
    Mode::Tape,
    Mode::Fd,
    Mode::FwdOpt,
    Mode::FwdVec,
    Mode::FwdRows,
];

fn differentiable(c: &mut Choices) -> Generated {
    match c.weighted(&[3, 2, 2, 3, 1]) {
        0 => function(c, GenType::Double, GenType::Double),
        1 => function(c, GenType::Vector, GenType::Double),
        2 => function(c, GenType::Vector, GenType::Vector),
        3 => structured(c, Shape::WellTyped),
        _ => structured(c, Shape::NearMiss),
    }
}

fn grad(c: &mut Choices, corpus: &Corpus) -> Case {
    let from_seed = c.one_in(8) && !corpus.entries.is_empty();
    let g = if from_seed {
        let e = &corpus.entries[c.below(corpus.entries.len())];
        let seed = &corpus.programs[e.seed];
        Generated {
            source: String::from_utf8_lossy(&seed.text).into_owned(),
            entry: e.name.clone(),
            params: e.params.clone(),
            result: e.result.clone(),
            shape: Shape::WellTyped,
            note: format!("{} entry {}", seed.name, e.name),
        }
    } else {
        differentiable(c)
    };
    let wrt = variable(c, &g.params).unwrap_or_else(|| "p".into());
    let mode = *c.pick(&MODES);
    // Native code only for programs whose sizes are the generator's.
    let engine = if !from_seed && mode.runs_natively() && c.one_in(3) {
        Engine::Native
    } else {
        Engine::Eval
    };
    let kind = match c.weighted(&[3, 2, 1]) {
        0 => GradKind::Grad,
        1 => GradKind::Jacobian,
        _ => GradKind::Vjp(inputs::valid(c, &g.result, 0).text()),
    };
    with_args(
        c,
        &g,
        Command::Grad {
            kind,
            wrt,
            mode,
            engine,
        },
        4,
    )
}

fn opt(c: &mut Choices, corpus: &Corpus) -> Case {
    let check = c.one_in(3);
    // The ADBench objectives and the prelude take seconds to optimise:
    // not seeds here.
    let small: Vec<_> = corpus
        .entries
        .iter()
        .filter(|e| {
            let n = &corpus.programs[e.seed].name;
            !n.contains("adbench") && !n.starts_with('<')
        })
        .collect();
    if c.one_in(8) && !small.is_empty() {
        let e = small[c.below(small.len())];
        let seed = &corpus.programs[e.seed];
        let mut case = blank(
            seed.text.clone(),
            Command::Opt { check },
            format!("{} entry {}", seed.name, e.name),
        );
        case.entry = e.name.clone();
        case.input = Some(inputs::arguments(c, &e.params, 0).text().into_bytes());
        return case;
    }
    let g = match c.weighted(&[4, 3, 1]) {
        0 => structured(c, Shape::WellTyped),
        1 => function(c, GenType::Double, GenType::Double),
        _ => structured(c, Shape::NearMiss),
    };
    with_args(c, &g, Command::Opt { check }, 4)
}

fn rules(c: &mut Choices, corpus: &Corpus) -> Case {
    if corpus.rules.is_empty() {
        return blank(Vec::new(), Command::RulesList, "no rule seeds".into());
    }
    let k = c.below(corpus.rules.len());
    let seed = &corpus.rules[k];
    let others: Vec<&[u8]> = corpus.rules.iter().map(|s| s.text.as_slice()).collect();
    let (bytes, what) = mutate::mutate(c, &seed.text, &others, Kind::Rules, false);
    let stem = seed
        .name
        .rsplit('/')
        .next()
        .unwrap_or("mine.rules")
        .to_string();
    // Replace the seed's family, or add a new one.
    let name = if c.one_in(3) {
        "mine.rules".to_string()
    } else {
        stem
    };
    let family = name.trim_end_matches(".rules").to_string();
    let command = match c.weighted(&[2, 4, 2]) {
        0 => Command::RulesList,
        1 => Command::RulesOpt,
        _ => Command::RulesCheck { family },
    };
    let origin = format!("{} mutated: {what}", seed.name);
    let mut case = if command == Command::RulesOpt {
        let g = match c.below(2) {
            0 => function(c, GenType::Double, GenType::Double),
            _ => programs::program(c, Shape::WellTyped, 3),
        };
        let mut case = with_args(c, &g, command, 4);
        case.origin = format!("{origin}; program: {}", describe(&g));
        case
    } else {
        blank(Vec::new(), command, origin)
    };
    case.rules = Some((name, bytes));
    case
}

fn native(c: &mut Choices) -> Case {
    let g = match c.weighted(&[5, 2, 2, 1]) {
        0 => structured(c, Shape::WellTyped),
        1 => function(c, GenType::Double, GenType::Double),
        2 => function(c, GenType::Vector, GenType::Vector),
        _ => closed(c),
    };
    let wrt = if c.one_in(2) && !g.params.is_empty() {
        let v = variable(c, &g.params).unwrap_or_else(|| "p".into());
        let mode = match c.weighted(&[3, 3, 1, 1, 1]) {
            0 => Mode::Fwd,
            1 => Mode::Rev,
            2 => Mode::FwdVec,
            3 => Mode::FwdRows,
            _ => Mode::FwdOpt,
        };
        Some((v, mode))
    } else {
        None
    };
    let mut case = with_args(c, &g, Command::Native { wrt }, 4);
    if case.input.as_ref().is_some_and(|i| i.len() > NATIVE_INPUT) {
        case.command = Command::Run {
            engine: Engine::Eval,
        };
    }
    case
}
