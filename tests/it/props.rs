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
use fsmooth::types::{infer_program, monomorphise};

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
        let typing = infer_program(&full).expect("generated programs are well typed");
        let mono = monomorphise(&full, &typing, "typed'check").expect("entry exists").program;
        let main_idx = mono.defs.iter().position(|d| &*d.name == "main").expect("main is used");
        let mut bad: Option<String> = None;
        let mut states = 0usize;
        let mut ev = fsmooth::eval::Evaluator::new(&mono, Limits { fuel: 3_000 });
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
    let limits = Limits { fuel: 200_000 };
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
    use proptest::test_runner::TestCaseError;

    let cases = env_u32("FSMOOTH_OPTTEST_CASES", 24);
    let limits = Limits { fuel: 200_000 };
    let compared = scalar_campaign(cases, 4, |src| {
        let fail = |what: &str, d: fsmooth::diagnostic::Diagnostic| {
            TestCaseError::fail(format!("{what}: {}\n{src}", d.message))
        };
        let loaded = pipeline::load(src).map_err(|d| fail("load", d))?;
        let e = pipeline::entry(&loaded, "main").map_err(|d| fail("entry", d))?;
        let o =
            pipeline::optimise_entry(&e, &crate::common::checked()).map_err(|d| fail("opt", d))?;
        let printed = print_program(&o.entry.program);
        let mut compared = 0usize;
        for x in fsmooth::difftest::POINTS {
            let args = vec![fsmooth::eval::Value::Double(x)];
            let Ok((a, _)) = e.run(args.clone(), limits, &mut |_, _| {}) else {
                continue;
            };
            let b = o.entry.run(args, limits, &mut |_, _| {});
            prop_assert!(
                b.is_ok(),
                "p = {x}: {a} became ⊥ ({:?})\n{src}\noptimised:\n{printed}",
                b.err()
            );
            let b = b
                .map(|(b, _)| b)
                .unwrap_or(fsmooth::eval::Value::Double(f64::NAN));
            prop_assert!(
                a.max_rho(&b).is_some_and(|r| r <= 1e-9),
                "p = {x}: {a} became {b}\n{src}\noptimised:\n{printed}"
            );
            compared += 1;
        }
        Ok(compared)
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
/// program seeded with a dense cotangent w), ρ ≤ 1e-9; and the tape's
/// Jacobian equals forward mode's.
#[test]
fn dot_product_test_of_forward_and_reverse() {
    use fsmooth::eval::Value;
    use proptest::test_runner::{Config, TestCaseError, TestRunner};
    use std::sync::atomic::{AtomicUsize, Ordering};

    let compared = AtomicUsize::new(0);
    let mut runner = TestRunner::new(Config {
        cases: 150,
        ..Config::default()
    });
    let limits = Limits { fuel: 200_000 };
    let vector = |xs: &[f64]| Value::array(xs.iter().map(|x| Value::Double(*x)).collect());
    let result = runner.run(&prop::collection::vec(any::<u32>(), 0..200), |cs| {
        let p = testgen::function(&cs, 4, testgen::GenType::Vector, testgen::GenType::Vector);
        let src = print_program(&p);
        let fwd = pipeline::derivative(&src, "main", "p")
            .map_err(|d| TestCaseError::fail(format!("fwd: {}\n{src}", d.message)))?;
        let rev = pipeline::reverse_derivative(&src, "main", "p")
            .map_err(|d| TestCaseError::fail(format!("rev: {}\n{src}", d.message)))?;
        let x = [0.7, -1.3, 2.9, 0.4];
        let args = vec![vector(&x)];
        let Ok((primal, _)) = fwd.base.run(args.clone(), limits, &mut |_, _| {}) else {
            return Ok(());
        };
        let mut ys = Vec::new();
        fsmooth::gradient::flatten(&primal, &mut ys);
        if ys.iter().any(|y| !y.is_finite()) {
            return Ok(());
        }
        let (Ok(j), Ok(t)) = (
            fsmooth::gradient::forward(&fwd, args.clone(), limits),
            fsmooth::gradient::tape(&rev.base, 0, args.clone(), limits),
        ) else {
            return Ok(());
        };
        let u = [0.3, -0.8, 1.1, 0.25];
        let w: Vec<f64> = (0..ys.len()).map(|i| 1.0 - 0.37 * i as f64).collect();
        let mut seed = w.iter().copied();
        let seed = fsmooth::gradient::unflatten(&primal, &mut seed);
        let Ok((r, _)) = rev.rev.run(vec![vector(&x), seed], limits, &mut |_, _| {}) else {
            return Ok(());
        };
        let Value::Pair(r) = r else {
            return Err(TestCaseError::fail(format!("rev returned {r}\n{src}")));
        };
        let mut jtw = Vec::new();
        fsmooth::gradient::flatten(&r.1, &mut jtw);
        prop_assert_eq!(jtw.len(), u.len());
        // ⟨J u, w⟩ with J's columns from forward mode.
        let ju_w: f64 = (0..ys.len())
            .map(|i| (0..u.len()).map(|k| j.columns[k][i] * u[k]).sum::<f64>() * w[i])
            .sum();
        let u_jtw: f64 = u.iter().zip(&jtw).map(|(a, b)| a * b).sum();
        if !(ju_w.is_finite() && u_jtw.is_finite()) {
            return Ok(());
        }
        prop_assert!(
            fsmooth::numeric::rho(ju_w, u_jtw) <= 1e-9,
            "<Ju, w> = {ju_w} but <u, J^T w> = {u_jtw}\n{src}"
        );
        for k in 0..u.len() {
            for i in 0..ys.len() {
                let (a, b) = (j.columns[k][i], t.columns[k][i]);
                prop_assert!(
                    fsmooth::numeric::rho(a, b) <= 1e-9,
                    "J[{i}][{k}]: fwd {a} vs tape {b}\n{src}"
                );
            }
        }
        compared.fetch_add(1, Ordering::Relaxed);
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
        let k = fsmooth::difftest::check_scalar(&src, Limits { fuel: 200_000 });
        assert!(
            k.as_ref().is_ok_and(|k| k.compared > 0),
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
    use proptest::test_runner::TestCaseError;

    let cases = env_u32("FSMOOTH_OPTTEST_CASES", 24);
    let limits = Limits { fuel: 200_000 };
    let compared = scalar_campaign(cases, 4, |src| {
        let fail = |what: &str, d: fsmooth::diagnostic::Diagnostic| {
            TestCaseError::fail(format!("{what}: {}\n{src}", d.message))
        };
        let fwd = pipeline::derivative(src, "main", "p").map_err(|d| fail("fwd", d))?;
        let t = pipeline::tangent_derivative(src, "main", "p").map_err(|d| fail("tangent", d))?;
        let o = pipeline::optimise_entry(&t.wrapper, &crate::common::checked())
            .map_err(|d| fail("opt", d))?;
        let printed = print_program(&o.entry.program);
        let opt = pipeline::Derivative {
            wrapper: o.entry,
            ..t
        };
        let mut compared = 0usize;
        for x in fsmooth::difftest::POINTS {
            let args = vec![fsmooth::eval::Value::Double(x)];
            let Ok(a) = fsmooth::gradient::forward(&fwd, args.clone(), limits) else {
                continue;
            };
            let b = fsmooth::gradient::forward(&opt, args, limits);
            prop_assert!(
                b.is_ok(),
                "p = {x}: fwd-opt is ⊥ ({:?})\n{src}\noptimised:\n{printed}",
                b.err()
            );
            let (da, db) = (
                a.columns[0][0],
                b.map(|b| b.columns[0][0]).unwrap_or(f64::NAN),
            );
            prop_assert!(
                fsmooth::numeric::rho(da, db) <= 1e-9,
                "p = {x}: fwd {da}, fwd-opt {db}\n{src}\noptimised:\n{printed}"
            );
            compared += 1;
        }
        Ok(compared)
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
            fsmooth::difftest::check_scalar(&src, fsmooth::eval::Limits { fuel: 200_000 })
                .unwrap_or_else(|e| panic!("{e}\n{src}"));
        }
    }
    assert!(nested >= 10, "only {nested} of 400 programs nest deriv");
}
