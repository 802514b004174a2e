//! The table of primitives (`ir::prim`) against every layer that reads
//! it: each primitive has its row, in `Prim::ALL` order; its rule names
//! are defined in spec/; its optimiser symbol parses to its e-node and
//! prints back; a small program applying it type-checks, evaluates, and
//! runs natively with the evaluator's value; each way the table says it
//! can be ⊥ is reached, with the same code, by the evaluator and by native
//! code; and a differentiable one differentiates in `fwd`, `rev` and by
//! the tape, which agree. A primitive added without an example here does
//! not compile (the matches below are exhaustive).

use std::collections::BTreeSet;

use fsmooth::diagnostic::Diagnose;
use fsmooth::eval::Limits;
use fsmooth::gradient::{Columns, Mode};
use fsmooth::ir::prim::{Bottom, ForwardRule, ReverseRule, Term};
use fsmooth::ir::{Expr, ExprId, Prim, Program};
use fsmooth::numeric::rho;
use fsmooth::opt::lang::{Fsm, is_operator, node_prim, prim_node};
use fsmooth::pipeline::{Engine, Session};

use crate::common::{plan, spec_rules};

/// A program `main : Double -> Double` applying `p` (and little else), at
/// `x = 0.7`; Index arithmetic where the primitive has it too.
fn example(p: Prim) -> &'static str {
    match p {
        Prim::Add => "x + 1.5 + toDouble (2 + 3)",
        Prim::Sub => "x - 1.5 + toDouble (2 - 3)",
        Prim::Mul => "x * x * toDouble (2 * 3)",
        Prim::Div => "1.0 / x + toDouble (7 / 2)",
        Prim::Pow => "x ** 2.5 + 2.0 ** x + toDouble (2 ** 3)",
        Prim::Neg => "-x + toDouble (-(length [x]))",
        Prim::Lt => "if x < 1.0 then (if 1 < 2 then 3.0 * x else x) else x",
        Prim::Gt => "if x > 1.0 then x else (if 2 > 1 then 3.0 * x else x)",
        Prim::Le => "if x <= 1.0 then (if 1 <= 1 then 3.0 * x else x) else x",
        Prim::Ge => "if x >= 1.0 then x else (if 2 >= 1 then 3.0 * x else x)",
        Prim::Eq => "if x = 0.7 then (if 1 = 1 then 3.0 * x else x) else x",
        Prim::Ne => "if x <> 0.7 then x else (if 1 <> 2 then 3.0 * x else x)",
        Prim::Not => "if not (x > 1.0) then 3.0 * x else x",
        Prim::Sin => "sin x",
        Prim::Cos => "cos x",
        Prim::Tan => "tan x",
        Prim::Log => "log x",
        Prim::Exp => "exp x",
        Prim::Sqrt => "sqrt x",
        Prim::ToDouble => "x * toDouble (length [x, x])",
        Prim::Build => "let v = build 3 (fun i -> x * toDouble i) in v[2]",
        Prim::IFold => "ifold (fun s i -> s * x + toDouble i) 1.0 3",
        Prim::Get => "[x, 2.0 * x][1]",
        Prim::Length => "x * toDouble (length [x, x, x])",
        Prim::Pair => "snd (pair x (2.0 * x))",
        Prim::Fst => "fst (x * x, 2.0)",
        Prim::Snd => "snd (2.0, x * x)",
        Prim::IScan => "let s = iscan (fun s i -> s * x) 1.0 3 in s[3]",
        Prim::Concat => "let c = concat [[x], [2.0 * x, x * x]] in c[2]",
        Prim::Accum => "let a = accum 0.0 2 [(1, x), (1, x * x)] in a[1]",
        Prim::AddAt => "let a = addAt [x, 1.0] 0 (x * x) in a[0]",
        Prim::While => "while (fun s -> s < 10.0) (fun s -> s * (1.0 + x) + x) x",
    }
}

/// A program `main : Double -> Double` in which `p` is ⊥ for reason `b`
/// at `x = 0.7`, for every ⊥ the table lists.
fn failing(p: Prim, b: Bottom) -> Option<&'static str> {
    Some(match (p, b) {
        (Prim::Add, Bottom::Overflow) => "x + toDouble (9223372036854775807 + length [x])",
        (Prim::Sub, Bottom::Overflow) => "x + toDouble ((0 - 9223372036854775807) - 2)",
        (Prim::Mul, Bottom::Overflow) => "x * toDouble (4611686018427387904 * 2)",
        (Prim::Div, Bottom::DivisionByZero) => "x / (x - 0.7)",
        (Prim::Div, Bottom::Overflow) => "x * toDouble ((0 - 9223372036854775807 - 1) / (0 - 1))",
        (Prim::Pow, Bottom::Domain) => "(x - 1.0) ** 0.5",
        (Prim::Pow, Bottom::Overflow) => "x * toDouble (2 ** 64)",
        (Prim::Neg, Bottom::Overflow) => "x * toDouble (-(0 - 9223372036854775807 - 1))",
        (Prim::Tan, Bottom::Domain) => "tan (x * 1e999)",
        (Prim::Log, Bottom::Domain) => "log (x - 0.7)",
        (Prim::Sqrt, Bottom::Domain) => "sqrt (x - 1.0)",
        (Prim::Build, Bottom::NegativeSize) => {
            "let v = build (0 - 1) (fun i -> x) in x + toDouble (length v)"
        }
        (Prim::IFold, Bottom::NegativeCount) => "ifold (fun s i -> s * x) x (0 - 1)",
        (Prim::IScan, Bottom::NegativeCount) => {
            "let s = iscan (fun s i -> s * x) x (0 - 1) in s[0]"
        }
        (Prim::Get, Bottom::OutOfBounds) => "[x, x][2]",
        (Prim::Accum, Bottom::NegativeSize) => {
            "let a = accum 0.0 (0 - 1) [(0, x)] in x + toDouble (length a)"
        }
        (Prim::Accum, Bottom::OutOfBounds) => "let a = accum 0.0 2 [(2, x)] in a[0]",
        (Prim::AddAt, Bottom::OutOfBounds) => "let a = addAt [x, x] 2 x in a[0]",
        // Under the small fuel of `DIVERGES`.
        (Prim::While, Bottom::Diverges) => "while (fun s -> s > 0.0) (fun s -> s + x) x",
        _ => return None,
    })
}

fn program(body: &str) -> String {
    format!("let main = fun (x: Double) ->\n  {body}\n")
}

const INPUT: &str = r#"{"x": 0.7}"#;

/// Whether `p` is applied in the body of definition `main`.
fn applies(prog: &Program, p: Prim) -> bool {
    let main = prog.def("main").expect("main");
    let mut work: Vec<ExprId> = vec![main.body];
    while let Some(e) = work.pop() {
        if matches!(prog.expr(e), Expr::Prim { op, .. } if *op == p) {
            return true;
        }
        work.extend(prog.expr(e).children());
    }
    false
}

#[test]
fn the_table_has_one_row_per_primitive_in_order() {
    let mut names = BTreeSet::new();
    let mut symbols = BTreeSet::new();
    for (k, p) in Prim::ALL.into_iter().enumerate() {
        let info = p.info();
        assert_eq!(p as usize, k, "{p:?} is declared out of order");
        assert_eq!(info.prim, p, "row {k} of the table is not {p:?}'s");
        assert!(names.insert(info.name), "{p:?}: name `{}` twice", info.name);
        assert!(
            symbols.insert(info.egg),
            "{p:?}: symbol `{}` twice",
            info.egg
        );
        assert_eq!(info.arity, info.typing.sig.params.len(), "{p:?}: arity");
        let scalar = info.partials.len();
        assert_eq!(
            scalar > 0,
            info.forward.1 == ForwardRule::Partials,
            "{p:?}: partials iff forward mode uses them"
        );
        assert_eq!(
            scalar > 0,
            info.reverse.1 == ReverseRule::Partials,
            "{p:?}: partials iff reverse mode uses them"
        );
        if scalar > 0 {
            assert_eq!(scalar, info.arity, "{p:?}: one partial per argument");
            assert!(info.eval.compute.is_some(), "{p:?}: partials of a scalar");
            for part in info.partials {
                for t in [&part.num, &part.den].into_iter().flatten() {
                    check_term(p, t);
                }
            }
        }
        // Every primitive has a reverse rule, reverse mode's own output
        // included (R-Concat, R-Accum, R-AddAt): reverse over reverse.
        assert!(info.reverse.0.is_some(), "{p:?}: an R rule");
    }
    // The primitives whose forward rule binds the primal result (D-Div,
    // D-Pow, D-Exp, D-Sqrt), now derived from the terms.
    let bound: Vec<Prim> = Prim::ALL
        .into_iter()
        .filter(|p| p.info().needs_result())
        .collect();
    assert_eq!(bound, [Prim::Div, Prim::Pow, Prim::Exp, Prim::Sqrt]);
}

/// A term mentions arguments the primitive has, and applies scalar
/// primitives to as many operands as they take.
fn check_term(p: Prim, t: &Term) {
    match t {
        Term::Arg(k) => assert!(*k < p.arity(), "{p:?}: argument {k}"),
        Term::Result | Term::Lit(_) => {}
        Term::Op(q, ts) => {
            assert_eq!(ts.len(), q.arity(), "{p:?}: {q:?}'s operands");
            assert!(q.info().eval.compute.is_some(), "{p:?}: {q:?} in a partial");
            ts.iter().for_each(|t| check_term(p, t));
        }
        Term::If(c, a, b) => [c, a, b].into_iter().for_each(|t| check_term(p, t)),
        Term::ZeroWhenZero { test, value } => {
            check_term(p, test);
            check_term(p, value);
        }
    }
}

#[test]
fn every_rule_the_table_names_is_defined_in_the_spec() {
    let spec = spec_rules();
    for p in Prim::ALL {
        let info = p.info();
        let mut rules = vec![info.typing.rule, info.forward.0];
        rules.extend(info.eval.rules);
        rules.extend(info.bottoms.iter().map(|(_, r)| *r));
        rules.extend(info.reverse.0);
        for r in rules {
            assert!(spec.contains(r), "{p:?}: `{r}` is not a rule of spec/");
        }
    }
}

#[test]
fn every_symbol_parses_to_its_node_and_back() {
    for p in Prim::ALL {
        let sym = p.info().egg;
        assert!(is_operator(sym), "{p:?}: `{sym}` is not a rule operator");
        let text = format!("({sym}{})", " 1".repeat(p.arity()));
        let rec: egg::RecExpr<Fsm> = text
            .parse()
            .unwrap_or_else(|e| panic!("{p:?}: `{text}` does not parse: {e}"));
        let root = rec.as_ref().last().expect("a root");
        assert_eq!(node_prim(root), Some(p), "{p:?}: `{text}`");
        let children = egg::Language::children(root).to_vec();
        assert_eq!(&prim_node(p, children), root, "{p:?}: its node");
        assert_eq!(rec.to_string(), text, "{p:?}: printed back");
    }
}

#[test]
fn every_primitive_evaluates_and_runs_natively() {
    for p in Prim::ALL {
        let src = program(example(p));
        let session = Session::load(&src).unwrap_or_else(|d| panic!("{p:?}: {d}\n{src}"));
        assert!(applies(session.program(), p), "{p:?}: not applied\n{src}");
        let e = session.entry("main").expect("an entry");
        let args = e.read_input(Some(INPUT)).expect("input");
        let (v, _) = e
            .run(args.clone(), Limits::default(), &mut |_, _| {})
            .unwrap_or_else(|err| panic!("{p:?}: {err}\n{src}"));
        let native = e.native().unwrap_or_else(|err| panic!("{p:?}: {err}"));
        let n = native
            .call(&args)
            .unwrap_or_else(|err| panic!("{p:?}: {err}"));
        assert!(
            v.max_rho(&n).is_some_and(|r| r <= 1e-12),
            "{p:?}: evaluator {v}, native {n}"
        );
    }
}

#[test]
fn every_bottom_of_the_table_is_reached_with_its_code() {
    for p in Prim::ALL {
        for (b, rule) in p.info().bottoms {
            let body =
                failing(p, *b).unwrap_or_else(|| panic!("{p:?}: no example of {b:?} ({rule})"));
            let src = program(body);
            let session = Session::load(&src).unwrap_or_else(|d| panic!("{p:?}: {d}\n{src}"));
            assert!(applies(session.program(), p), "{p:?}: not applied\n{src}");
            let e = session.entry("main").expect("an entry");
            let args = e.read_input(Some(INPUT)).expect("input");
            // A loop that does not end is stopped by a small fuel.
            let limits = if *b == Bottom::Diverges {
                Limits::with_fuel(100_000)
            } else {
                Limits::default()
            };
            let err = match e.run(args.clone(), limits, &mut |_, _| {}) {
                Ok((v, _)) => panic!("{p:?} {b:?}: evaluates to {v}\n{src}"),
                Err(err) => err,
            };
            assert_eq!(err.code(), b.code(), "{p:?} {b:?} ({rule}): {err}");
            let native = e.native().unwrap_or_else(|err| panic!("{p:?}: {err}"));
            match native.call_with(&args, fsmooth::codegen::NativeLimits::of(limits)) {
                Ok(v) => panic!("{p:?} {b:?}: native code returns {v}\n{src}"),
                Err(err) => assert_eq!(err.code(), b.code(), "{p:?} {b:?}: native {err}"),
            }
        }
    }
}

fn columns(p: Prim, src: &str, mode: Mode, engine: Engine) -> Columns {
    let plan = plan(src, "main", "x", mode).unwrap_or_else(|d| panic!("{p:?} {mode:?}: {d}"));
    let args = plan.base.read_input(Some(INPUT)).expect("input");
    plan.columns(args, engine, Limits::default())
        .unwrap_or_else(|err| panic!("{p:?} {mode:?} on {engine:?}: {err}"))
}

/// The derivative of each example at `x = 0.7`: forward mode, reverse
/// mode (where it has a rule) and the tape agree, on the evaluator and
/// on native code.
#[test]
fn every_primitive_differentiates_in_every_mode_alike() {
    for p in Prim::ALL {
        let src = program(example(p));
        let fwd = columns(p, &src, Mode::Fwd, Engine::Eval);
        let dx = fwd.columns[0][0];
        let mut others = vec![
            ("tape", columns(p, &src, Mode::Tape, Engine::Eval)),
            ("fwd native", columns(p, &src, Mode::Fwd, Engine::Native)),
        ];
        others.push(("rev", columns(p, &src, Mode::Rev, Engine::Eval)));
        others.push(("rev native", columns(p, &src, Mode::Rev, Engine::Native)));
        for (what, c) in others {
            let d = c.columns[0][0];
            assert!(rho(dx, d) <= 1e-12, "{p:?}: fwd {dx}, {what} {d}\n{src}");
            assert!(
                fwd.value.max_rho(&c.value).is_some_and(|r| r <= 1e-12),
                "{p:?}: values of fwd and {what}"
            );
        }
    }
}
