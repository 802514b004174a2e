//! The reference evaluator's resource limits and cost counters.

use fsmooth::diagnostic::Diagnose;
use fsmooth::eval::{EvalError, Limits};
use fsmooth::pipeline::{Entry, Session};

fn entry(src: &str, name: &str) -> std::rc::Rc<Entry> {
    let loaded = Session::load(src).expect("loads");
    loaded.entry(name).expect("entry")
}

/// E-Fuel: running out of steps is ⊥ with its own code, at any limit.
#[test]
fn exhausted_fuel_is_bottom() {
    let e = entry("let main = ifold (fun s i -> s + 1.0) 0.0 1000000", "main");
    for fuel in [0, 1, 10, 1000] {
        let r = e.run(Vec::new(), Limits::with_fuel(fuel), &mut |_, _| {});
        match r {
            Err(err @ EvalError::OutOfFuel { .. }) => assert_eq!(err.code(), "out-of-fuel"),
            other => panic!("fuel {fuel}: expected out-of-fuel, got {other:?}"),
        }
    }
    let (v, stats) = e
        .run(Vec::new(), Limits::default(), &mut |_, _| {})
        .expect("enough fuel");
    assert_eq!(v.to_string(), "1000000.0");
    assert!(stats.steps > 1_000_000);
}

/// `ops` counts primitive operations: for the dot product of length n,
/// n multiplications, n additions, 2n array reads (`vectorEMul`), n
/// writes (its `build`) and n reads (`vectorSum`): 6n.
#[test]
fn ops_of_the_dot_product_are_6n() {
    let e = entry(
        "let main = fun (a: Vector) (b: Vector) -> vectorDot a b",
        "main",
    );
    for n in [1usize, 10, 100] {
        let v: Vec<String> = (0..n).map(|i| format!("{i}.5")).collect();
        let input = format!("[[{}], [{}]]", v.join(","), v.join(","));
        let args = e.read_input(Some(&input)).expect("input");
        let (_, stats) = e
            .run(args, Limits::default(), &mut |_, _| {})
            .expect("runs");
        assert_eq!(stats.ops, 6 * n as u64, "n = {n}");
    }
}

/// The trace reports one event per step, numbered from 1.
#[test]
fn trace_has_one_event_per_step() {
    let e = entry("let main = vectorSum [1.0, 2.0, 3.0]", "main");
    let mut seen = Vec::new();
    let (_, stats) = e
        .run(Vec::new(), Limits::default(), &mut |ev, _| {
            seen.push(ev.step)
        })
        .expect("runs");
    assert_eq!(seen.len() as u64, stats.steps);
    assert!(seen.iter().enumerate().all(|(i, s)| *s == i as u64 + 1));
}

/// Note [Persistent arrays] against a model that copies: from one array
/// of four zeros, every operation either reads a version (any earlier one,
/// so rerooting runs in every direction) or updates one into a new
/// version; every version always holds what the copying model says.
/// (quickcheck: shrinks a failing sequence of operations.)
#[test]
fn persistent_arrays_behave_like_copies() {
    use fsmooth::eval::{PArray, Value};
    use std::rc::Rc;

    fn holds(p: &Rc<PArray>, want: &[f64]) -> bool {
        PArray::with(p, |items| {
            items.len() == want.len() && items.iter().zip(want).all(|(x, w)| x.as_f64() == Some(*w))
        })
    }

    fn prop(ops: Vec<(u8, u8, i8, bool)>) -> bool {
        let mut versions = vec![PArray::new(vec![Value::Double(0.0); 4])];
        let mut model = vec![vec![0.0; 4]];
        for (which, slot, delta, read) in ops {
            let v = which as usize % versions.len();
            if read {
                if !holds(&versions[v], &model[v]) {
                    return false;
                }
                continue;
            }
            let k = slot as usize % 4;
            let d = f64::from(delta);
            let next = PArray::update(&versions[v], k, |old| {
                Value::Double(old.as_f64().unwrap_or(f64::NAN) + d)
            });
            let mut m = model[v].clone();
            m[k] += d;
            versions.push(next);
            model.push(m);
        }
        versions.iter().zip(&model).all(|(p, m)| holds(p, m))
    }

    quickcheck::QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(Vec<(u8, u8, i8, bool)>) -> bool);
}
