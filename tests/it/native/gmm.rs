//! ADBench's GMM objective on native code: ADBench's golden, the 1k-point
//! file, the gradient programs with respect to each parameter block, and
//! the reverse program's in-place accumulators and arena size.

use fsmooth::adbench::gmm::read_gmm;
use fsmooth::codegen::{AotOptions, Native};
use fsmooth::gradient::Mode;
use fsmooth::numeric::rho;
use fsmooth::pipeline::Entry;
use fsmooth::syntax::print_program;

use super::{Outcome, compare, compile, example, gradient_programs_agree, load_entry};
use crate::common;

fn adbench_file(rel: &str) -> String {
    std::fs::read_to_string(common::root().join("tests/data/adbench").join(rel))
        .expect("ADBench data file")
}

fn gmm_native() -> (std::rc::Rc<Entry>, Native) {
    let e = load_entry(&example("adbench/gmm.fsm"), "gmmObjective");
    let n = compile(&e);
    (e, n)
}

#[test]
fn native_gmm_objective_matches_the_adbench_golden() {
    let input = read_gmm(&adbench_file("data/gmm/test.txt")).expect("test.txt reads");
    let golden: serde_json::Value =
        serde_json::from_str(&adbench_file("goldens/gmm_test.json")).expect("golden JSON");
    let expected = golden["objective"].as_f64().expect("objective");
    let (e, n) = gmm_native();
    let got = n.call(&input.args()).expect("native GMM runs");
    let got = got.as_f64().expect("a Double");
    assert!(
        rho(got, expected) <= 1e-8,
        "native {got}, golden {expected}"
    );
    assert_eq!(compare(&e, &n, &input.args()), Ok(Outcome::Value));
}

#[test]
fn native_gmm_1k_agrees_with_the_evaluator() {
    let input = read_gmm(&adbench_file("data/gmm/1k/gmm_d2_K5.txt")).expect("file reads");
    let (e, n) = gmm_native();
    assert_eq!(compare(&e, &n, &input.args()), Ok(Outcome::Value));
}

/// The GMM gradient programs (reverse and forward mode, with respect to
/// each parameter block) natively, on ADBench's test.txt.
#[test]
fn native_gmm_gradients_agree_with_the_evaluator() {
    let input = read_gmm(&adbench_file("data/gmm/test.txt")).expect("test.txt reads");
    let src = example("adbench/gmm.fsm");
    let mut n = 0;
    for p in ["alphas", "means", "icf"] {
        n += gradient_programs_agree(&src, "gmmObjective", p, &input.args());
    }
    n += gradient_programs_agree(&src, "gmmObjectiveFlat", "theta", &input.flat_args());
    assert_eq!(n, 8);
}

/// The batched data term (examples/adbench/gmm.fsm, `batchedDataTerm`)
/// is the pointwise one's bit for bit: `gmmObjectiveBatchedFlat` and
/// `gmmObjectiveFlat` give the same Double from the evaluator and from
/// native code on ADBench's test file and 1k-point files, natively its
/// products run in blocks (Note [Interchange], blocks), and both gradient
/// programs agree with the evaluator on it.
#[test]
fn batched_gmm_is_the_pointwise_objective_bit_for_bit() {
    let src = example("adbench/gmm.fsm");
    let pointwise = load_entry(&src, "gmmObjectiveFlat");
    let batched = load_entry(&src, "gmmObjectiveBatchedFlat");
    let (np, nb) = (compile(&pointwise), compile(&batched));
    // The evaluator on the small files; natively (whose pointwise code is
    // the evaluator's bit for bit) on d10_K25 too.
    for (file, evaluate) in [
        ("data/gmm/test.txt", true),
        ("data/gmm/1k/gmm_d2_K5.txt", true),
        ("data/gmm/1k/gmm_d10_K25.txt", false),
    ] {
        let input = read_gmm(&adbench_file(file)).expect("reads");
        let args = input.flat_args();
        let run = |e: &Entry| {
            e.run(args.clone(), super::FUEL, &mut |_, _| {})
                .map(|v| v.0)
                .ok()
        };
        let want = if evaluate {
            run(&pointwise)
        } else {
            np.call(&args).ok()
        };
        let want = want.and_then(|v| v.as_f64()).expect("a Double");
        let mut got = vec![("native", nb.call(&args).ok())];
        if evaluate {
            got.push(("evaluator", run(&batched)));
            got.push(("native pointwise", np.call(&args).ok()));
        }
        for (what, got) in got {
            let got = got.and_then(|v| v.as_f64()).expect("a Double");
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{file} {what}: {got} vs {want}"
            );
        }
    }
    let listing = super::listing_of(&src, "gmmObjectiveBatchedFlat");
    let blocked = listing
        .lines()
        .find_map(|l| {
            l.strip_prefix(";; interchanged sums in blocks of eight (Note [Interchange], blocks): ")
        })
        .expect("the listing says");
    assert_eq!(blocked.split(", ").count(), 2, "{blocked}");
    let input = read_gmm(&adbench_file("data/gmm/test.txt")).expect("test.txt reads");
    assert_eq!(
        gradient_programs_agree(&src, "gmmObjectiveBatchedFlat", "theta", &input.flat_args()),
        2
    );
    // Its reverse program: the products' forward sweep runs in blocks too
    // (vertical fusion sees through the tape's tuple), and both reverse
    // nests of folds of `addAt`s run term-major (Note [Interchanged
    // folds]); on d2_K5, every bit of its gradient is the evaluator's.
    let rev = common::plan(&src, "gmmObjectiveBatchedFlat", "theta", Mode::Rev).expect("plans");
    let fsmooth::gradient::How::Reverse { rev: program, .. } = &rev.how else {
        panic!("not a reverse-mode plan");
    };
    let options = AotOptions {
        symbol: "batched_rev".into(),
        origin: "test".into(),
        listing: true,
        fp: fsmooth::codegen::FpContract::Strict,
    };
    let listing = program
        .object(&program.params, &options)
        .expect("compiles")
        .listing
        .expect("a listing");
    let says = |prefix: &str| {
        listing
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .expect("the listing says")
            .split(", ")
            .count()
    };
    assert_eq!(
        says(";; interchanged sums in blocks of eight (Note [Interchange], blocks): "),
        4
    );
    assert_eq!(
        says(";; folds of folds of addAts run term-major (Note [Interchanged folds]), over: "),
        2
    );
    let input = read_gmm(&adbench_file("data/gmm/1k/gmm_d2_K5.txt")).expect("reads");
    super::exactly_on(program, &compile(program), "rev", &input.flat_args());
}

/// Dense accumulators (spec/ad-reverse.md §5.6) natively: GMM's reverse
/// program joins no list and densifies none — every contribution is an
/// `addAt` — and each of them updates its accumulator in place (Note
/// [In-place updates]). The loop over the points is checkpointed
/// (R-Checkpoint), and an iteration's cotangent arrays are scratch arrays
/// (Note [Scratch arrays]), so the arena of the gradient on ADBench's
/// 1k-point files is one main chunk and the scratch chunks, as the
/// objective's: 1.1 MiB, where the lists took 5.1 MiB (d2_K5) and the
/// tapes 2.1 MiB (d2_K5) and 14.1 MiB (d10_K25). Its value and gradient
/// are the evaluator's on ADBench's test file.
#[test]
fn gmm_reverse_mode_adds_into_accumulators_in_place() {
    use fsmooth::codegen::Arg;
    let src = example("adbench/gmm.fsm");
    let plan = common::plan(&src, "gmmObjectiveFlat", "theta", Mode::Rev).expect("reverse");
    let rev = plan.program().expect("the reverse program");
    let text = print_program(&rev.program);
    assert!(
        !text.contains("concat") && !text.contains("accum "),
        "{text}"
    );
    assert!(text.matches("addAt").count() >= 10, "{text}");
    let listing = rev
        .object(
            &rev.params,
            &AotOptions {
                symbol: "g".into(),
                origin: "test".into(),
                listing: true,
                fp: fsmooth::codegen::FpContract::Strict,
            },
        )
        .expect("compiles")
        .listing
        .expect("a listing");
    assert!(listing.contains(";; into a copy: none\n"), "{listing}");
    let input = read_gmm(&adbench_file("data/gmm/test.txt")).expect("test.txt reads");
    assert_eq!(
        gradient_programs_agree(&src, "gmmObjectiveFlat", "theta", &input.flat_args()),
        2
    );
    let native = compile(rev);
    for file in ["gmm_d2_K5", "gmm_d10_K25"] {
        let big = read_gmm(&adbench_file(&format!("data/gmm/1k/{file}.txt"))).expect("reads");
        let theta: Vec<f64> = {
            let mut t = big.alphas.clone();
            t.extend(big.means.iter().flatten());
            t.extend(big.icf.iter().flatten());
            t
        };
        let rows: Vec<&[f64]> = big.x.iter().map(Vec::as_slice).collect();
        let o = native
            .call_slices(&[
                Arg::F64s(&theta),
                Arg::F64Rows(&rows),
                Arg::F64(big.gamma),
                Arg::I64(big.m),
            ])
            .expect("runs");
        assert!(
            o.arena_bytes() <= (1 << 20) + (128 << 10),
            "{file}: {} arena bytes",
            o.arena_bytes()
        );
    }
}
