//! Random programs from `testgen`, natively and by the evaluator: closed
//! programs of every generated type, and random `fun (p: P) -> e` with
//! their forward- and reverse-mode programs. `FSMOOTH_NATIVE_CASES=N`
//! runs more.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use fsmooth::codegen::Native;
use fsmooth::eval::Value;
use fsmooth::gradient::{How, Mode};
use fsmooth::syntax::print_program;
use fsmooth::testgen;

use super::{FUEL, Outcome, compare, load_entry, seed_like, vector};

fn env_u32(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Closed random programs of every generated type: native = evaluator
/// (value, or ⊥ with the same code). FSMOOTH_NATIVE_CASES=N runs more.
#[test]
fn native_random_programs_agree_with_the_evaluator() {
    use std::cell::Cell;
    let (values, bottoms) = (Cell::new(0usize), Cell::new(0usize));
    let cases = env_u32("FSMOOTH_NATIVE_CASES", 300);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&prop::collection::vec(any::<u32>(), 0..400), |cs| {
        let (p, ty) = testgen::program(&cs, 6);
        let src = format!(
            "{}let typed'check = (fun (x: {}) -> x) main\n",
            print_program(&p),
            ty.to_type()
        );
        let e = load_entry(&src, "typed'check");
        let n = Native::compile(&e.normal().expect("normalises"))
            .map_err(|m| TestCaseError::fail(format!("{m}\n{src}")))?;
        match compare(&e, &n, &[]) {
            Ok(Outcome::Value) => values.set(values.get() + 1),
            Ok(Outcome::Bottom) => bottoms.set(bottoms.get() + 1),
            Ok(Outcome::Skipped) => {}
            Err(m) => return Err(TestCaseError::fail(format!("{m}\n{src}"))),
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    eprintln!(
        "native random programs: {} values, {} ⊥ ({cases} programs)",
        values.get(),
        bottoms.get()
    );
    assert!(
        values.get() >= cases as usize / 2,
        "only {} values",
        values.get()
    );
    assert!(bottoms.get() >= 1, "no ⊥ compared");
}

/// Random `fun (p: P) -> e`: the function itself, its forward-mode
/// derivative program and its reverse-mode program, native = evaluator at
/// the difftest points (Double) or on a fixed vector.
#[test]
fn native_random_gradient_programs_agree_with_the_evaluator() {
    use std::cell::Cell;
    let compared = Cell::new(0usize);
    let cases = env_u32("FSMOOTH_NATIVE_CASES", 300) / 3;
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(
        &(prop::collection::vec(any::<u32>(), 0..200), any::<bool>()),
        |(cs, vec_param)| {
            let (param, result) = if vec_param {
                (testgen::GenType::Vector, testgen::GenType::Vector)
            } else {
                (testgen::GenType::Double, testgen::GenType::Double)
            };
            let src = print_program(&testgen::function(&cs, 4, param, result));
            let points: Vec<Value> = if vec_param {
                vec![vector(&[0.7, -1.3, 2.9, 0.4])]
            } else {
                fsmooth::difftest::POINTS
                    .iter()
                    .map(|x| Value::Double(*x))
                    .collect()
            };
            let fail = |m: String| TestCaseError::fail(format!("{m}\n{src}"));
            let plan = |mode| {
                crate::common::plan(&src, "main", "p", mode).map_err(|d| fail(d.to_string()))
            };
            let rev = plan(Mode::Rev)?;
            let fwd = plan(Mode::Fwd)?;
            let How::Reverse {
                rev: rev_program,
                seeded,
            } = &rev.how
            else {
                return Err(fail("not a reverse-mode plan".to_string()));
            };
            let wrapper = fwd
                .program()
                .ok_or_else(|| fail("no wrapper".to_string()))?;
            let programs = [(&rev.base, false), (wrapper, false), (rev_program, *seeded)];
            for (entry, seeded) in programs {
                let n = Native::compile(&entry.normal().expect("normalises"))
                    .map_err(|e| fail(format!("{}: {e}", entry.name)))?;
                for x in &points {
                    let mut args = vec![x.clone()];
                    if seeded {
                        // A dense cotangent shaped like the result.
                        let Ok((out, _)) = rev.base.run(args.clone(), FUEL, &mut |_, _| {}) else {
                            continue;
                        };
                        args.push(seed_like(&out));
                    }
                    match compare(entry, &n, &args) {
                        Ok(Outcome::Value) => compared.set(compared.get() + 1),
                        Ok(_) => {}
                        Err(m) => return Err(fail(format!("{} at {x}: {m}", entry.name))),
                    }
                }
            }
            Ok(())
        },
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    eprintln!(
        "native gradient programs: {} values compared",
        compared.get()
    );
    assert!(
        compared.get() >= cases as usize,
        "only {} values",
        compared.get()
    );
}
