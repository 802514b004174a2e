//! The calling interface of native code: `Native::call_slices` against
//! `Native::call` (arguments read in place, results as slices of the
//! arena), arenas reused across calls, tangent columns read through
//! slices (`gradient::forward_on`), and batched entries through
//! `Engine::run_flat`.

use fsmooth::codegen::CodegenError;
use fsmooth::diagnostic::Diagnose;
use fsmooth::eval::{Limits, Value};
use fsmooth::gradient::Mode;
use fsmooth::ir::Type;
use fsmooth::pipeline::{Artefact, Engine, Entry, Session};

use super::{FUEL, compile, example, load_entry, vector};

/// A call's arena is kept for the next call (`Arena::reset`): results of
/// reused chunks are right, results alive at once do not share an arena,
/// and the memory limit still holds per call, spare chunks or not.
#[test]
fn native_arenas_are_reused_across_calls() {
    use fsmooth::codegen::{Arg, Out};
    let mut n = compile(&load_entry(
        "let f (n: Index) = build n (fun i -> toDouble i * 0.5)\n",
        "f",
    ));
    let check = |o: &fsmooth::codegen::Outputs<'_>, len: usize| match o.get(0) {
        Some(Out::F64s(xs)) => {
            assert_eq!(xs.len(), len);
            assert!(xs.iter().enumerate().all(|(i, x)| *x == i as f64 * 0.5));
        }
        other => panic!("{other:?}"),
    };
    let big = 300_000; // 2.4 MB: a chunk of its own
    let first = n.call_slices(&[Arg::I64(big as i64)]).expect("runs");
    let bytes = first.arena_bytes();
    // Alive at the same time: a second arena.
    let small = n.call_slices(&[Arg::I64(1000)]).expect("runs");
    check(&first, big);
    check(&small, 1000);
    drop(first);
    drop(small);
    for _ in 0..3 {
        let again = n.call_slices(&[Arg::I64(big as i64)]).expect("runs");
        check(&again, big);
        assert_eq!(again.arena_bytes(), bytes);
        let v = n.call(&[Value::Index(5)]).expect("runs");
        assert_eq!(v.to_string(), "[0.0, 0.5, 1.0, 1.5, 2.0]");
    }
    // A spare 2.4 MB chunk does not lift a 1 MiB limit.
    n.limits.memory_bytes = 1 << 20;
    let e = n
        .call_slices(&[Arg::I64(big as i64)])
        .err()
        .expect("over the limit");
    assert_eq!(e.code(), "out-of-memory", "{e}");
    assert!(n.call(&[Value::Index(1000)]).is_ok());
}

/// The leaves of a value of type `t` (a tuple's components, in order).
fn value_leaves(v: &Value, t: &Type, out: &mut Vec<Value>) {
    match (v, t) {
        (Value::Pair(p), Type::Pair(a, b)) => {
            value_leaves(&p.0, a, out);
            value_leaves(&p.1, b, out);
        }
        _ => out.push(v.clone()),
    }
}

/// `Native::call_slices` (arguments read in place, results as slices of
/// the arena) returns exactly what `Native::call` returns, ⊥ included,
/// and a result may share an argument's buffer; matrices go in and come
/// out as rows.
#[test]
fn native_call_slices_agrees_with_call() {
    use fsmooth::codegen::{Arg, Out};
    let src = example("dot.fsm");
    let extra = "\nlet mixed = fun (xs: Array<Double>) (ks: Array<Index>) (k: Index) (b: Bool) ->\n  \
                 (xs, build k (fun i -> i * k + ks[i]), if b then xs[0] else 0.0, not b)\n\
                 let rows = fun (m: Matrix) (k: Index) -> (m, build k (fun i -> vectorSMul m[i] 2.0))\n";
    let src = format!("{src}{extra}");
    let dot = load_entry(&src, "dot");
    let rev = crate::common::plan(&src, "dot", "u", Mode::Rev).unwrap();
    let rev = rev.program().unwrap();
    let mixed = load_entry(&src, "mixed");
    let rows = load_entry(&src, "rows");
    let (r0, r1, r2) = ([1.0, 2.0], [-0.5], [3.0, 4.0, 5.0]);
    let m: [&[f64]; 3] = [&r0, &r1, &r2];
    let u = [0.5, -2.25, 1e3, 1.0 / 3.0];
    let v = [3.0, 0.125, -7.0, 0.1];
    let ks = [7, -8, 9];
    let to_value = |a: &Arg| match a {
        Arg::F64(x) => Value::Double(*x),
        Arg::I64(i) => Value::Index(*i),
        Arg::Bool(b) => Value::Bool(*b),
        Arg::F64s(xs) => vector(xs),
        Arg::I64s(xs) => Value::array(xs.iter().map(|i| Value::Index(*i)).collect()),
        Arg::F64Rows(rs) => Value::array(rs.iter().map(|r| vector(r)).collect()),
    };
    let cases: Vec<(&Entry, Vec<Arg>)> = vec![
        (&dot, vec![Arg::F64s(&u), Arg::F64s(&v)]),
        (&dot, vec![Arg::F64s(&[]), Arg::F64s(&[])]),
        (rev, vec![Arg::F64s(&u), Arg::F64s(&v)]),
        (&dot, vec![Arg::F64s(&u), Arg::F64s(&v[..2])]), // ⊥
        (
            &mixed,
            vec![Arg::F64s(&u), Arg::I64s(&ks), Arg::I64(3), Arg::Bool(true)],
        ),
        (
            &mixed,
            vec![
                Arg::F64s(&[]),
                Arg::I64s(&ks),
                Arg::I64(0),
                Arg::Bool(false),
            ],
        ),
        (
            &mixed,
            vec![Arg::F64s(&[]), Arg::I64s(&ks), Arg::I64(1), Arg::Bool(true)],
        ), // ⊥
        (
            &mixed,
            vec![Arg::F64s(&u), Arg::I64s(&ks), Arg::I64(4), Arg::Bool(true)],
        ), // ⊥
        (&rows, vec![Arg::F64Rows(&m), Arg::I64(3)]),
        (&rows, vec![Arg::F64Rows(&[]), Arg::I64(0)]),
        (&rows, vec![Arg::F64Rows(&m), Arg::I64(4)]), // ⊥
    ];
    let (mut bottoms, mut shared) = (0, 0);
    for (entry, args) in &cases {
        let native = compile(entry);
        let values: Vec<Value> = args.iter().map(to_value).collect();
        let what = format!("{} on {args:?}", entry.name);
        match (native.call(&values), native.call_slices(args)) {
            (Ok(v), Ok(outs)) => {
                let mut want = Vec::new();
                value_leaves(&v, native.result(), &mut want);
                assert_eq!(outs.len(), want.len(), "{what}");
                for (k, w) in want.iter().enumerate() {
                    let got = match outs.get(k).unwrap() {
                        Out::F64(x) => Value::Double(x),
                        Out::I64(i) => Value::Index(i),
                        Out::Bool(b) => Value::Bool(b),
                        Out::F64s(xs) => vector(xs),
                        Out::I64s(xs) => {
                            Value::array(xs.iter().map(|i| Value::Index(*i)).collect())
                        }
                        Out::F64Rows(rs) => Value::array(rs.iter().map(vector).collect()),
                    };
                    assert!(got.same(w), "{what}: leaf {k}: {got} vs {w}");
                }
                if entry.name == "mixed"
                    && let (Arg::F64s(xs), Some(Out::F64s(r))) = (args[0], outs.get(0))
                    && !xs.is_empty()
                {
                    assert_eq!(xs.as_ptr(), r.as_ptr(), "{what}: the result shares `xs`");
                    shared += 1;
                }
                if let (Arg::F64Rows(ms), Some(Out::F64Rows(r))) = (args[0], outs.get(0))
                    && !ms.is_empty()
                {
                    assert_eq!(ms[1].as_ptr(), r.row(1).as_ptr(), "{what}: rows shared");
                    assert!(outs.arena_bytes() > 0, "{what}: the arena was used");
                    shared += 1;
                }
            }
            (Err(a), Err(b)) => {
                bottoms += 1;
                assert_eq!(a, b, "{what}");
            }
            (a, b) => panic!("{what}: call {a:?}, call_slices {:?}", b.map(|o| o.len())),
        }
    }
    assert_eq!((bottoms, shared), (4, 2));
    // Arguments of the wrong type, and layouts it does not take.
    let n = compile(&dot);
    let e = n
        .call_slices(&[Arg::F64s(&u), Arg::I64s(&ks)])
        .map(|o| o.len());
    assert!(matches!(e, Err(CodegenError::Argument { .. })), "{e:?}");
    let e = n.call_slices(&[Arg::F64s(&u)]).map(|o| o.len());
    assert!(matches!(e, Err(CodegenError::Argument { .. })), "{e:?}");
    let pairs = load_entry("let f = fun (v: Vector) -> vectorZip v v\n", "f");
    let e = compile(&pairs)
        .call_slices(&[Arg::F64s(&u)])
        .map(|o| o.len());
    assert!(matches!(e, Err(CodegenError::Argument { .. })), "{e:?}");
}

/// A tangent-only forward program on native code reads its arguments and
/// result as slices when they are Doubles, vectors and matrices of
/// Doubles (`Plan::columns` with `How::Tangents`, ADBench BA's `fwd-opt` per
/// observation): the value and every column equal the evaluator's, bit
/// for bit, for each shape of variable and result it takes; a pair result
/// takes the `Value` path and agrees too.
#[test]
fn tangent_columns_through_slices_equal_the_evaluators() {
    use fsmooth::gradient::{How, Plan};
    let src = "let vv (v: Vector) (s: Double) = build 3 (fun i -> v[i] * v[i] * s + sin s)\n\
               let vd (v: Vector) (s: Double) = vectorSum v * s\n\
               let dv (v: Vector) (s: Double) = build (length v) (fun i -> v[i] / s)\n\
               let dd (v: Vector) (s: Double) = s * s * v[0]\n\
               let vm (v: Vector) (m: Matrix) = build (length m) (fun i -> vectorDot m[i] v)\n\
               let vp (v: Vector) (s: Double) = (vectorSum v, v[1] * s)\n";
    let v = vector(&[0.5, -1.25, 2.0]);
    let m = Value::array(vec![vector(&[1.0, 2.0, 3.0]), vector(&[-0.5, 0.25, 4.0])]);
    for (f, wrt, args) in [
        ("vv", "v", vec![v.clone(), Value::Double(1.5)]),
        ("vv", "s", vec![v.clone(), Value::Double(1.5)]),
        ("vd", "v", vec![v.clone(), Value::Double(-0.75)]),
        ("dv", "s", vec![v.clone(), Value::Double(2.5)]),
        ("dd", "s", vec![v.clone(), Value::Double(2.5)]),
        ("vm", "v", vec![v.clone(), m.clone()]),
        ("vp", "v", vec![v.clone(), Value::Double(3.0)]),
    ] {
        let session = Session::load(src).expect("loads");
        let k = session.param(f, wrt).expect("parameter");
        let tangents = Mode::Fwd.tangent_program(f.into(), k).expect("tangents");
        let d = Plan {
            base: session.entry(f).expect("entry"),
            wrt: k,
            how: How::Tangents(session.get(&tangents).expect("derivative")),
        };
        let e = d
            .columns(args.clone(), Engine::Eval, FUEL)
            .expect("evaluator");
        let n = d
            .columns(args, Engine::Native, Limits::default())
            .expect("native");
        assert!(
            e.value.same(&n.value),
            "{f}/{wrt}: {} vs {}",
            e.value,
            n.value
        );
        let bits = |c: &[Vec<f64>]| -> Vec<Vec<u64>> {
            c.iter()
                .map(|x| x.iter().map(|y| y.to_bits()).collect())
                .collect()
        };
        assert_eq!(bits(&e.columns), bits(&n.columns), "{f}/{wrt}");
        assert!(!e.columns.is_empty(), "{f}/{wrt}");
    }
}

/// `Artefact::Batched`: the entry on every element of its argument lists
/// in one program (a matrix result's rows concatenated), on the
/// evaluator and natively through `Entry::run_flat` (ADBench BA's
/// per-observation Jacobians in one call); a shorter list is E-Get-Bot.
#[test]
fn batched_entries_run_every_element() {
    // Entries named like the batch's binders (found in review: a
    // generated binder shadowed the entry it calls).
    let src = "let f (v: Vector) (s: Double) = build 2 (fun i -> build (length v) (fun j -> v[j] * s + toDouble i))\n\
               let g (v: Vector) (s: Double) = vectorSum v * s\n\
               let xs1 (v: Vector) (s: Double) = v[0] * s\n\
               let i (v: Vector) (s: Double) = v[1] - s\n";
    let vs = [vector(&[1.0, -2.0, 0.5]), vector(&[3.0, 0.25, -1.0])];
    let ss = [Value::Double(1.5), Value::Double(-0.5)];
    for f in ["f", "g", "xs1", "i"] {
        let session = Session::load(src).expect("loads");
        let e = session.entry(f).expect("entry");
        let b = session.get(&Artefact::entry(f).batched()).expect("batched");
        let args = vec![Value::array(vs.to_vec()), Value::array(ss.to_vec())];
        let (got, _) = b
            .run(args.clone(), FUEL, &mut |_, _| {})
            .expect("batch runs");
        let mut flat = Vec::new();
        fsmooth::eval::flatten(&got, &mut flat);
        let mut want = Vec::new();
        for (v, s) in vs.iter().zip(&ss) {
            let (one, _) = e
                .run(vec![v.clone(), s.clone()], FUEL, &mut |_, _| {})
                .expect("runs");
            fsmooth::eval::flatten(&one, &mut want);
        }
        assert_eq!(flat, want, "{f}");
        let native = b
            .run_flat(Engine::Native, &args, FUEL)
            .expect("slices")
            .expect("native runs");
        assert_eq!(native, want, "{f}");
        let short = vec![Value::array(vs.to_vec()), Value::array(ss[..1].to_vec())];
        let err = b.run(short, FUEL, &mut |_, _| {}).expect_err("short list");
        assert_eq!(err.code(), "index-out-of-bounds", "{f}");
    }
}
