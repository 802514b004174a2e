//! Property tests over random well-typed programs (`fsmooth::testgen`):
//! the printer round trip, subject reduction of the machine via read-back,
//! and type safety of evaluation.

use proptest::prelude::*;

use fsmooth::diagnostic::{Diagnose, SourceId};
use fsmooth::eval::{EvalError, Limits};
use fsmooth::ir::{Def, Expr, Program};
use fsmooth::pipeline::{self, PRELUDE};
use fsmooth::syntax::{parse_into, print_program};
use fsmooth::testgen;
use fsmooth::types::infer_program;

/// The generated program with the prelude in front, as the pipeline sees
/// it, and a last definition `typed'check` that uses `main` at the type
/// it was generated at (an integer literal alone would default to Double).
fn with_prelude(p: &Program, ty: testgen::GenType) -> Program {
    let mut full = Program::new();
    parse_into(&mut full, PRELUDE, SourceId::PRELUDE, true).expect("prelude parses");
    let printed = format!(
        "{}let typed'check = (fun (x: {}) -> x) main\n",
        print_program(p),
        ty.to_type()
    );
    parse_into(&mut full, &printed, SourceId::MAIN, false).expect("printed program parses");
    full
}

fn choices() -> impl Strategy<Value = Vec<u32>> {
    prop::collection::vec(any::<u32>(), 0..400)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// parse(print(p)) == p.
    #[test]
    fn print_then_parse_is_identity(cs in choices()) {
        let (p, _) = testgen::program(&cs, 6);
        let printed = print_program(&p);
        let again = pipeline::parse(&printed);
        prop_assert!(again.is_ok(), "does not re-parse: {:?}\n{printed}", again.err());
        let again = again.unwrap();
        let user: Vec<_> = again.defs.iter().filter(|d| !d.prelude).collect();
        prop_assert_eq!(user.len(), 1);
        prop_assert!(p.same_expr(p.defs[0].body, &again, user[0].body), "round trip changed:\n{}", printed);
    }

    /// Generated programs are well typed, with the type they were made at.
    #[test]
    fn generated_programs_are_well_typed(cs in choices()) {
        let (p, ty) = testgen::program(&cs, 6);
        let full = with_prelude(&p, ty);
        let typing = infer_program(&full);
        prop_assert!(typing.is_ok(), "{:?}\n{}", typing.err(), print_program(&p));
        let typing = typing.unwrap();
        prop_assert_eq!(typing.def_type(full.defs.len() - 1), Some(ty.to_type()));
    }

    /// Subject reduction (spec/semantics.md): every state of the machine
    /// evaluating a well-typed program reads back to a term of the same
    /// type; and evaluation ends in a value or a ⊥ of the semantics, never
    /// in an internal error (progress).
    #[test]
    fn every_state_reads_back_to_a_well_typed_term(cs in prop::collection::vec(any::<u32>(), 0..120)) {
        let (p, ty) = testgen::program(&cs, 4);
        let full = with_prelude(&p, ty);
        // The entry as the pipeline builds it: monomorphised, its `deriv`,
        // `jvp` and `vjp` expanded (after specialisation where needed).
        let session = pipeline::Session::of_program(full).expect("generated programs are well typed");
        let entry = session.entry("typed'check").expect("AD expands");
        let mono = &entry.program;
        let main_idx = mono.defs.iter().position(|d| &*d.name == "main").expect("main is used");
        let mut bad: Option<String> = None;
        let mut states = 0usize;
        let mut ev = fsmooth::eval::Evaluator::new(mono, Limits::with_fuel(3_000));
        let result = ev.call("typed'check", Vec::new(), &mut |event, snap| {
            if bad.is_some() || snap.current_def() != Some(main_idx) {
                return;
            }
            states += 1;
            let mut rb = snap.readback("state'rb");
            // The read-back term must have main's type: `(fun (x: T) -> x)
            // state'rb` type-checks (a literal alone is polymorphic).
            let span = fsmooth::diagnostic::Span::generated();
            let x: fsmooth::ir::Name = "x".into();
            let var = rb.add(Expr::Var(x.clone()), span);
            let lam = rb.add(Expr::Lam { param: x, ann: Some(ty.to_type()), body: var }, span);
            let st = rb.add(Expr::Var("state'rb".into()), span);
            let app = rb.add(Expr::App { fun: lam, arg: st }, span);
            rb.defs.push(Def { name: "check'rb".into(), span, ann: None, body: app, prelude: false });
            if let Err(e) = infer_program(&rb) {
                bad = Some(format!("after {} ({}): {e}\n{}", event.step, event.rule, print_program(&rb)));
            }
        });
        prop_assert!(bad.is_none(), "{}\nprogram:\n{}", bad.unwrap_or_default(), print_program(&p));
        if let Err(e) = result {
            prop_assert!(!matches!(e, EvalError::Internal { .. }), "stuck: {e} ({})\n{}", e.code(), print_program(&p));
        }
        prop_assert!(states > 0, "no state of main was checked");
    }
}

/// Differential testing of the AD modes (issue 6's property (a),
/// `fsmooth::difftest::check_scalar`): fwd = rev = tape (ρ ≤ 1e-9) and =
/// finite differences within their error bound where the stencil is
/// smooth, on random `fun (p: Double) -> e`, with proptest's shrinking.
/// Enough points must be compared for the test to mean something.
/// FSMOOTH_DIFFTEST_CASES=N (and FSMOOTH_DIFFTEST_DEPTH=D) run a longer
/// campaign; `fsmooth difftest` runs one from the command line.
#[test]
fn forward_reverse_and_tape_gradients_agree() {
    use fsmooth::difftest::check_scalar;
    use proptest::test_runner::TestCaseError;

    let (cases, depth) = (
        env_u32("FSMOOTH_DIFFTEST_CASES", 200),
        env_u32("FSMOOTH_DIFFTEST_DEPTH", 4),
    );
    let limits = Limits::with_fuel(200_000);
    let k = scalar_campaign(cases, depth, |src| {
        check_scalar(src, limits).map_err(|m| TestCaseError::fail(format!("{m}\n{src}")))
    });
    eprintln!(
        "AD modes compared at {} of {} defined points, finite differences at {}, {} IEEE overflows ({cases} programs)",
        k.compared, k.defined, k.fd, k.ieee
    );
    assert!(k.compared >= cases as usize, "only {k:?}");
    assert!(k.fd >= cases as usize, "only {k:?}");
}

/// Property (c) of issue 6 on random programs: optimisation refines.
/// Where `p` evaluates to a value, `opt(p)` evaluates to the same value
/// (ρ ≤ 1e-9: some rules are exact only over the reals); where `p` is ⊥,
/// `opt(p)` may be anything. Equality saturation is the slow part, so CI
/// runs few programs; `FSMOOTH_OPTTEST_CASES=N` runs more.
#[test]
fn optimisation_refines_random_programs() {
    let cases = env_u32("FSMOOTH_OPTTEST_CASES", 24);
    let limits = Limits::with_fuel(200_000);
    let compared = scalar_campaign(cases, 4, |src| {
        fsmooth::difftest::check_opt_refines(src, limits)
            .map_err(|e| proptest::test_runner::TestCaseError::fail(format!("{e}\n{src}")))
    });
    eprintln!("optimised and original compared at {compared} points ({cases} programs)");
    assert!(
        compared >= cases as usize,
        "only {compared} points compared"
    );
}

/// Property (e) of issue 6, the dot-product test: for random
/// `f : Vector → Vector`, ⟨J u, w⟩ (forward mode's Jacobian applied to a
/// direction u) equals ⟨u, Jᵀ w⟩ (one run of the source-to-source reverse
/// program seeded with a dense cotangent w), ρ ≤ 1e-9; the tape's
/// Jacobian equals forward mode's; and vector forward mode's (D-Vec-Deriv)
/// equals forward mode's bit for bit.
#[test]
fn dot_product_test_of_forward_and_reverse() {
    use proptest::test_runner::{Config, TestCaseError, TestRunner};
    use std::sync::atomic::{AtomicUsize, Ordering};

    let compared = AtomicUsize::new(0);
    let mut runner = TestRunner::new(Config {
        cases: 150,
        ..Config::default()
    });
    let limits = Limits::with_fuel(200_000);
    let dot = fsmooth::difftest::Property::Dot;
    let result = runner.run(&prop::collection::vec(any::<u32>(), 0..200), |cs| {
        let src = dot.source(&cs, 4);
        let n = fsmooth::difftest::check_dot_product(&src, limits)
            .map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
        compared.fetch_add(n, Ordering::Relaxed);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let c = compared.into_inner();
    eprintln!("dot-product test passed on {c} of 150 programs");
    assert!(c >= 75, "only {c} of 150 programs compared");
}

/// Every program `fsmooth difftest` (or a property test) found and saved
/// under `tests/difftest/` passes the check now: the regression suite of
/// differential testing.
#[test]
fn saved_difftest_cases_pass() {
    let dir = crate::common::root().join("tests/difftest");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("tests/difftest exists") {
        let path = entry.expect("readable").path();
        if path.extension().is_none_or(|x| x != "fsm") {
            continue;
        }
        let src = std::fs::read_to_string(&path).expect("readable");
        let property = fsmooth::difftest::Property::of_saved(&src)
            .unwrap_or_else(|| panic!("{}: unknown property", path.display()));
        let k = property.check(&src, Limits::with_fuel(200_000));
        // Something was compared: values, or (the `native` property) the
        // same ⊥ from native code and the evaluator.
        assert!(
            k.as_ref().is_ok_and(|k| k.compared + k.bottoms > 0),
            "{}: {k:?}",
            path.display()
        );
        n += 1;
    }
    assert!(n >= 1, "no saved cases in {}", dir.display());
}

/// Property (b) of issue 6, the property at the centre of dF̃: optimised
/// forward-mode derivatives equal forward mode's (and so, by property (a),
/// reverse mode's) on random `fun (p: Double) -> e`. Refinement: where
/// forward mode is defined, the optimised derivative is defined and equal
/// (ρ ≤ 1e-9). `FSMOOTH_OPTTEST_CASES=N` runs more programs.
#[test]
fn optimised_forward_derivatives_agree() {
    let cases = env_u32("FSMOOTH_OPTTEST_CASES", 24);
    let limits = Limits::with_fuel(200_000);
    let compared = scalar_campaign(cases, 4, |src| {
        fsmooth::difftest::check_optimised(src, limits)
            .map_err(|e| proptest::test_runner::TestCaseError::fail(format!("{e}\n{src}")))
    });
    eprintln!("fwd and fwd-opt compared at {compared} points ({cases} programs)");
    assert!(
        compared >= cases as usize,
        "only {compared} points compared"
    );
}

/// `name` from the environment, or `default`: how long campaigns are asked for.
fn env_u32(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// Runs `check` on `cases` random `fun (p: Double) -> e` of nesting depth
/// `depth` (printed as source), with proptest's shrinking, and returns the
/// sum of what the checks report; panics with the shrunk failure.
fn scalar_campaign<T: Default + std::ops::AddAssign>(
    cases: u32,
    depth: u32,
    check: impl Fn(&str) -> Result<T, proptest::test_runner::TestCaseError>,
) -> T {
    use proptest::test_runner::{Config, TestRunner};
    let total = std::sync::Mutex::new(T::default());
    let mut runner = TestRunner::new(Config {
        cases,
        ..Config::default()
    });
    let strategy = prop::collection::vec(any::<u32>(), 0..(50 * depth as usize));
    let result = runner.run(&strategy, |cs| {
        let p = testgen::function(
            &cs,
            depth,
            testgen::GenType::Double,
            testgen::GenType::Double,
        );
        *total.lock().expect("not poisoned") += check(&print_program(&p))?;
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    total.into_inner().expect("not poisoned")
}

/// `fsmooth difftest`'s shrinker reduces a failing program to a small
/// one: with "fails when the program applies `sin`" as the failure, random
/// programs of 200+ characters that apply `sin` shrink to a few tokens
/// around `sin` (greedy shrinking finds a local minimum such as
/// `let x1 = p in sin x1`), from which no single choice can be dropped.
#[test]
fn difftest_shrinks_to_a_minimal_program() {
    use fsmooth::difftest::{shrink_with, source};
    let fails = |cs: &[u32]| {
        source(cs, 5)
            .contains("sin ")
            .then(|| "uses sin".to_string())
    };
    let mut seed = 12345u64;
    let mut found = 0;
    for _ in 0..200 {
        let cs: Vec<u32> = (0..250)
            .map(|_| {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                (seed >> 33) as u32
            })
            .collect();
        if fails(&cs).is_none() || source(&cs, 5).len() < 200 {
            continue;
        }
        let (small, message, shrinks) = shrink_with(cs, "uses sin".into(), fails);
        let program = source(&small, 5);
        assert_eq!(message, "uses sin");
        assert!(shrinks > 0);
        assert!(program.len() <= 80, "not small:\n{program}");
        for i in 0..small.len() {
            let mut t = small.clone();
            t.remove(i);
            assert!(
                fails(&t).is_none(),
                "dropping choice {i} still fails:\n{program}"
            );
        }
        found += 1;
        if found == 3 {
            break;
        }
    }
    assert_eq!(found, 3, "too few large programs applying sin");
}

/// The generator reaches nested AD: some random programs differentiate
/// inside themselves (`deriv` in the program that every AD mode then
/// differentiates again), and the campaign check passes on them.
#[test]
fn generated_programs_nest_deriv() {
    let mut rng = 42u64;
    let mut nested = 0;
    for _ in 0..400 {
        let cs: Vec<u32> = (0..200)
            .map(|_| (fsmooth::difftest::next(&mut rng) >> 33) as u32)
            .collect();
        let src = fsmooth::difftest::source(&cs, 4);
        if src.contains("deriv ") {
            nested += 1;
            fsmooth::difftest::check_scalar(&src, fsmooth::eval::Limits::with_fuel(200_000))
                .unwrap_or_else(|e| panic!("{e}\n{src}"));
        }
    }
    assert!(nested >= 10, "only {nested} of 400 programs nest deriv");
}

/// The `native` property (issue 7): native code agrees with the evaluator
/// on random `fun (p: Double) -> e` and on their fwd, fwd-opt and rev
/// gradients — equal values (ρ ≤ 1e-12), or ⊥ with the same error code.
/// A fixed-seed campaign of `fsmooth::difftest` (so the counts below are
/// deterministic); `FSMOOTH_NATIVE_DIFFTEST_CASES=N` runs a longer one, and
/// `fsmooth difftest --property native` one from the command line.
#[test]
fn native_difftest_campaign_agrees_with_the_evaluator() {
    use fsmooth::difftest::{Campaign, Property, run};
    let cases = u64::from(env_u32("FSMOOTH_NATIVE_DIFFTEST_CASES", 40));
    let s = run(Campaign {
        cases,
        seed: 11,
        max_size: 4,
        limits: Limits::with_fuel(200_000),
        property: Property::Native,
        only_while: false,
        only_operators: false,
    });
    if let Some(f) = s.failure {
        panic!(
            "case {} ({} shrinks): {}\n{}",
            f.case, f.shrinks, f.message, f.program
        );
    }
    let k = s.counts;
    eprintln!(
        "native = evaluator: {} values and {} ⊥ compared at {} defined points ({cases} programs)",
        k.compared, k.bottoms, k.defined
    );
    // Four programs per point: main, fwd, fwd-opt, rev.
    assert!(k.compared >= 4 * cases as usize, "only {k:?}");
    assert!(k.bottoms >= 1, "no ⊥ compared: {k:?}");
}

/// A `deriv` that `testgen` places inside a program never has a free
/// function variable (D-Deriv rejects those with `deriv-free-function`):
/// its body sees no function-typed variable, nor a name one of them
/// shadows. Seed 9801's case 343 of `difftest --property native` was
/// `let x1 = fun x1 -> x1 in fst (deriv (x1 p) p)` before; 3 000
/// campaign programs now differentiate.
#[test]
fn generated_derivs_have_no_free_function_variables() {
    use fsmooth::difftest::{next, source};
    let mut rng = 9801u64 ^ 0x9e37_79b9_7f4a_7c15;
    for case in 0..3000 {
        let len = (next(&mut rng) % 400) as usize;
        let choices: Vec<u32> = (0..len).map(|_| next(&mut rng) as u32).collect();
        let src = source(&choices, 8);
        if let Err(d) = crate::common::plan(&src, "main", "p", fsmooth::gradient::Mode::Fwd) {
            assert_ne!(d.code, "deriv-free-function", "case {case}:\n{src}");
        }
    }
}

/// The `fwd-opt` property tells rounding from a wrong rewrite: `sqrt` of
/// the derivative of `p / p`, which forward mode computes as exactly 0 and
/// the optimiser (with `div-div`, exact only over the reals) as 1e-17, is
/// a difference of 1e-9 after `sqrt`'s tangent — a point counted as
/// rounding because the optimiser without its `ieee-inexact` rules agrees
/// there (`tests/difftest/fwd-opt-seed3203-case44.fsm`); other points are
/// compared as usual.
#[test]
fn optimised_derivatives_count_rounding_apart() {
    let src = "let main = fun (p: Double) -> sqrt (snd (deriv (p / p) p))\n";
    let k = fsmooth::difftest::check_optimised_counts(src, Limits::with_fuel(200_000))
        .expect("no failure");
    assert!(k.rounding >= 1, "{k:?}");
    assert!(k.compared >= 1, "{k:?}");
    assert_eq!(k.defined, k.compared + k.rounding, "{k:?}");
}

/// The `opt` property counts rounding apart too: `(p / 3) / 21 − p / 63`
/// is 0 after `div-div` and `sub-self` (rules exact over the reals only),
/// and 6.9e-18 in binary64 at p = 2.9, which `sqrt` makes 2.6e-9; the
/// optimiser without its `ieee-inexact` rules keeps the original's value.
#[test]
fn optimised_programs_count_rounding_apart() {
    let src = "let main = fun (p: Double) -> sqrt (p / 3.0 / 21.0 - p / 63.0)\n";
    let k = fsmooth::difftest::check_opt_refines_counts(src, Limits::with_fuel(200_000))
        .expect("no failure");
    assert_eq!((k.compared, k.rounding), (2, 1), "{k:?}");
}
