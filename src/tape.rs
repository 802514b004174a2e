//! Reverse mode by taping (seed 002 ch. 3, dual-numbers reverse AD made
//! efficient): an independent gradient oracle. A big-step interpreter of
//! the core language in which every Double carries the index of its node
//! on a tape; each differentiable primitive records its partial
//! derivatives (numerically: the partials' terms of the one table of
//! primitives, `ir::prim`, evaluated with its own arithmetic), and one
//! backward sweep over a dense adjoint array yields the gradient.
//!
//! It shares nothing with the source-to-source transformations except
//! that table, and nothing with the reference machine except the scalar
//! semantics (`eval::scalar`, the table's arithmetic), so agreement
//! between the three is evidence.
//! Loops run as Rust loops; recursion depth is bounded by the program's
//! nesting. `steps` here counts interpreter calls, `ops` as the machine.

use std::collections::HashMap;
use std::rc::Rc;

use crate::diagnostic::Span;
use crate::eval::{EvalError, Limits, Stats, Value, scalar};
use crate::ir::prim::{Compute, Term};
use crate::ir::{Expr, ExprId, Lit, Name, Prim, Program};

const CONST: u32 = u32::MAX;

#[derive(Clone)]
enum TV {
    /// A Double and its tape node (`CONST` when it depends on no input).
    D(f64, u32),
    I(i64),
    B(bool),
    P(Rc<(TV, TV)>),
    A(Rc<Vec<TV>>),
    F(Rc<(ExprId, Env)>),
}

type Env = Option<Rc<EnvNode>>;

struct EnvNode {
    name: Name,
    value: TV,
    next: Env,
}

/// The tape: node k's parents and partials are `edges[start[k]..start[k+1]]`.
struct Tape {
    start: Vec<u32>,
    edges: Vec<(u32, f64)>,
}

impl Tape {
    fn push(&mut self, parents: &[(u32, f64)]) -> u32 {
        let id = self.start.len() as u32;
        self.start.push(self.edges.len() as u32);
        self.edges
            .extend(parents.iter().filter(|(p, _)| *p != CONST).copied());
        id
    }

    /// Adjoints of every node for the given seeds (one backward sweep).
    fn sweep(&self, seeds: &[(u32, f64)]) -> Vec<f64> {
        let n = self.start.len();
        let mut adj = vec![0.0; n];
        for (k, s) in seeds {
            if *k != CONST {
                adj[*k as usize] += s;
            }
        }
        for k in (0..n).rev() {
            let a = adj[k];
            if a == 0.0 {
                continue;
            }
            let end = if k + 1 < n {
                self.start[k + 1] as usize
            } else {
                self.edges.len()
            };
            for &(p, w) in &self.edges[self.start[k] as usize..end] {
                adj[p as usize] += a * w;
            }
        }
        adj
    }
}

struct Interp<'p> {
    prog: &'p Program,
    globals: HashMap<Name, TV>,
    tape: Tape,
    stats: Stats,
    fuel: u64,
    /// Some taped primitive had a non-finite partial at a finite result.
    singular: bool,
}

/// The result of a taped run: the value, and the gradient of
/// ⟨seed, result⟩ with respect to argument `wrt`, shaped like it.
pub struct Taped {
    pub value: Value,
    pub gradient: Value,
    /// The run passed through a point where a primitive is not
    /// differentiable: a partial derivative was not finite where the
    /// primitive's result was (`sqrt` at 0, `x ** y` at x = 0 with y < 1,
    /// …). There the chain rule multiplies ∞ by the other factors, and the
    /// AD modes may legitimately differ (spec/ad-forward.md, "Singular
    /// points"); differential testing counts such points apart.
    pub singular: bool,
    pub stats: Stats,
    pub tape_len: usize,
}

/// Runs definition `name` of the monomorphic, `deriv`-free `prog` on
/// `args`, taping argument `wrt`, and returns the vector–Jacobian product
/// with `seed` (a value shaped like the result; None means 1.0 for a
/// Double result).
pub fn vjp(
    prog: &Program,
    name: &str,
    args: Vec<Value>,
    wrt: usize,
    seed: Option<&Value>,
    limits: Limits,
) -> Result<Taped, EvalError> {
    let mut it = Interp {
        prog,
        globals: HashMap::new(),
        tape: Tape {
            start: Vec::new(),
            edges: Vec::new(),
        },
        stats: Stats::default(),
        fuel: limits.fuel,
        singular: false,
    };
    let Some(idx) = prog.defs.iter().rposition(|d| &*d.name == name) else {
        return Err(internal(format!("no definition `{name}`"), Span::default()));
    };
    for d in &prog.defs[..=idx] {
        let v = it.eval(d.body, &None)?;
        it.globals.insert(d.name.clone(), v);
    }
    let mut f = it.globals[&prog.defs[idx].name].clone();
    let mut leaves = Vec::new();
    for (k, a) in args.iter().enumerate() {
        let tv = if k == wrt {
            it.leaves(a, &mut leaves)
        } else {
            constant(a)
        };
        f = it.apply(&f, tv, prog.defs[idx].body)?;
    }
    let mut outs = Vec::new();
    output_nodes(&f, &mut outs);
    let mut ws = Vec::new();
    match seed {
        Some(s) => crate::eval::flatten(s, &mut ws),
        None => ws.push(1.0),
    }
    if ws.len() != outs.len() {
        return Err(internal(
            format!(
                "the seed has {} numbers, the result {}",
                ws.len(),
                outs.len()
            ),
            Span::default(),
        ));
    }
    let seeds: Vec<(u32, f64)> = outs.into_iter().zip(ws).collect();
    let adj = it.tape.sweep(&seeds);
    let mut g = leaves.iter().map(|l| adj[*l as usize]);
    let gradient = crate::eval::unflatten(&args[wrt], &mut g);
    Ok(Taped {
        value: to_value(&f),
        gradient,
        singular: it.singular,
        stats: it.stats,
        tape_len: it.tape.start.len(),
    })
}

fn internal(message: String, span: Span) -> EvalError {
    EvalError::Internal { message, span }
}

fn constant(v: &Value) -> TV {
    match v {
        Value::Double(x) => TV::D(*x, CONST),
        Value::Index(i) => TV::I(*i),
        Value::Bool(b) => TV::B(*b),
        Value::Pair(p) => TV::P(Rc::new((constant(&p.0), constant(&p.1)))),
        Value::Array(a) => TV::A(Rc::new(a.iter().map(constant).collect())),
        Value::Persistent(_) => constant(&v.frozen()),
        Value::Closure(_) => TV::B(false),
    }
}

fn to_value(v: &TV) -> Value {
    match v {
        TV::D(x, _) => Value::Double(*x),
        TV::I(i) => Value::Index(*i),
        TV::B(b) => Value::Bool(*b),
        TV::P(p) => Value::pair(to_value(&p.0), to_value(&p.1)),
        TV::A(a) => Value::array(a.iter().map(to_value).collect()),
        TV::F(_) => Value::Bool(false),
    }
}

/// The tape nodes of a result's doubles, in `eval::flatten` order.
fn output_nodes(v: &TV, out: &mut Vec<u32>) {
    match v {
        TV::D(_, k) => out.push(*k),
        TV::I(_) | TV::B(_) | TV::F(_) => {}
        TV::P(p) => {
            output_nodes(&p.0, out);
            output_nodes(&p.1, out);
        }
        TV::A(a) => a.iter().for_each(|x| output_nodes(x, out)),
    }
}

fn lookup(env: &Env, x: &Name) -> Option<TV> {
    let mut cur = env.as_ref();
    while let Some(n) = cur {
        if n.name == *x {
            return Some(n.value.clone());
        }
        cur = n.next.as_ref();
    }
    None
}

fn push(env: &Env, name: Name, value: TV) -> Env {
    Some(Rc::new(EnvNode {
        name,
        value,
        next: env.clone(),
    }))
}

impl Interp<'_> {
    /// A taped copy of an input: every Double becomes a leaf node.
    fn leaves(&mut self, v: &Value, out: &mut Vec<u32>) -> TV {
        match v {
            Value::Double(x) => {
                let k = self.tape.push(&[]);
                out.push(k);
                TV::D(*x, k)
            }
            Value::Array(a) => TV::A(Rc::new(a.iter().map(|x| self.leaves(x, out)).collect())),
            Value::Pair(p) => {
                let a = self.leaves(&p.0, out);
                let b = self.leaves(&p.1, out);
                TV::P(Rc::new((a, b)))
            }
            other => constant(other),
        }
    }

    fn tick(&mut self, e: ExprId) -> Result<(), EvalError> {
        self.stats.steps += 1;
        if self.stats.steps > self.fuel {
            return Err(EvalError::OutOfFuel {
                steps: self.stats.steps,
                span: self.prog.span(e),
            });
        }
        Ok(())
    }

    fn apply(&mut self, f: &TV, arg: TV, at: ExprId) -> Result<TV, EvalError> {
        self.tick(at)?;
        let TV::F(c) = f else {
            return Err(internal(
                "applied a non-function".into(),
                self.prog.span(at),
            ));
        };
        let Expr::Lam { param, body, .. } = self.prog.expr(c.0) else {
            return Err(internal(
                "closure without lambda".into(),
                self.prog.span(at),
            ));
        };
        let env = push(&c.1, param.clone(), arg);
        self.eval(*body, &env)
    }

    fn eval(&mut self, e: ExprId, env: &Env) -> Result<TV, EvalError> {
        self.tick(e)?;
        let span = self.prog.span(e);
        Ok(match self.prog.expr(e) {
            Expr::Var(x) => match lookup(env, x).or_else(|| self.globals.get(x).cloned()) {
                Some(v) => v,
                None => return Err(internal(format!("unbound `{x}`"), span)),
            },
            Expr::Lit(Lit::Double(x)) => TV::D(*x, CONST),
            Expr::Lit(Lit::Int(i)) => TV::I(*i),
            Expr::Lit(Lit::Bool(b)) => TV::B(*b),
            Expr::Lam { .. } => TV::F(Rc::new((e, env.clone()))),
            Expr::App { fun, arg } => {
                let f = self.eval(*fun, env)?;
                let a = self.eval(*arg, env)?;
                self.apply(&f, a, e)?
            }
            Expr::Let {
                name, value, body, ..
            } => {
                let v = self.eval(*value, env)?;
                let env = push(env, name.clone(), v);
                self.eval(*body, &env)?
            }
            Expr::If { cond, then_, else_ } => match self.eval(*cond, env)? {
                TV::B(true) => self.eval(*then_, env)?,
                TV::B(false) => self.eval(*else_, env)?,
                _ => return Err(internal("non-boolean condition".into(), span)),
            },
            Expr::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for i in items.iter() {
                    out.push(self.eval(*i, env)?);
                }
                self.stats.ops += out.len() as u64;
                TV::A(Rc::new(out))
            }
            Expr::Deriv { .. } | Expr::Diff { .. } => {
                return Err(internal(
                    "`deriv`, `jvp` or `vjp` reached the tape interpreter".into(),
                    span,
                ));
            }
            Expr::Prim { op, args } => {
                let mut vals = Vec::with_capacity(args.len());
                for a in args.iter() {
                    vals.push(self.eval(*a, env)?);
                }
                self.prim(*op, vals, e)?
            }
        })
    }

    fn prim(&mut self, op: Prim, mut vals: Vec<TV>, e: ExprId) -> Result<TV, EvalError> {
        let span = self.prog.span(e);
        match op {
            Prim::Build => {
                let f = vals.pop().expect("arity");
                let TV::I(n) = vals[0] else {
                    return Err(internal("build size".into(), span));
                };
                if n < 0 {
                    return Err(EvalError::NegativeSize { n, span });
                }
                let mut out = Vec::with_capacity((n as usize).min(1 << 20));
                for i in 0..n {
                    out.push(self.apply(&f, TV::I(i), e)?);
                    self.stats.ops += 1;
                }
                Ok(TV::A(Rc::new(out)))
            }
            Prim::IFold | Prim::IScan => {
                let count = vals.pop().expect("arity");
                let mut s = vals.pop().expect("arity");
                let f = vals.pop().expect("arity");
                let TV::I(n) = count else {
                    return Err(internal("ifold count".into(), span));
                };
                if n < 0 {
                    return Err(EvalError::NegativeCount { n, span });
                }
                let mut states = Vec::new();
                for i in 0..n {
                    if op == Prim::IScan {
                        states.push(s.clone());
                    }
                    let g = self.apply(&f, s, e)?;
                    s = self.apply(&g, TV::I(i), e)?;
                }
                if op == Prim::IScan {
                    states.push(s);
                    self.stats.ops += states.len() as u64;
                    return Ok(TV::A(Rc::new(states)));
                }
                Ok(s)
            }
            Prim::While => {
                // E-While, E-While-Step, E-While-Done: the test and the
                // step taped like any code; each application spends fuel.
                let mut s = vals.pop().expect("arity");
                let step = vals.pop().expect("arity");
                let cond = vals.pop().expect("arity");
                loop {
                    match self.apply(&cond, s.clone(), e)? {
                        TV::B(true) => s = self.apply(&step, s, e)?,
                        TV::B(false) => return Ok(s),
                        _ => return Err(internal("while test".into(), span)),
                    }
                }
            }
            Prim::Concat => {
                let TV::A(parts) = &vals[0] else {
                    return Err(internal("concat".into(), span));
                };
                let mut out = Vec::new();
                for p in parts.iter() {
                    let TV::A(items) = p else {
                        return Err(internal("concat element".into(), span));
                    };
                    out.extend(items.iter().cloned());
                }
                self.stats.ops += out.len() as u64;
                Ok(TV::A(Rc::new(out)))
            }
            Prim::Accum => {
                let cs = vals.pop().expect("arity");
                let count = vals.pop().expect("arity");
                let zero = vals.pop().expect("arity");
                let (TV::I(n), TV::A(cs)) = (count, cs) else {
                    return Err(internal("accum".into(), span));
                };
                if n < 0 {
                    return Err(EvalError::NegativeSize { n, span });
                }
                if n as u64 > self.fuel.saturating_sub(self.stats.steps) {
                    return Err(EvalError::OutOfFuel {
                        steps: self.stats.steps,
                        span,
                    });
                }
                let mut out = vec![zero; n as usize];
                for c in cs.iter() {
                    let (TV::P(p), n) = (c, n) else {
                        return Err(internal("accum contribution".into(), span));
                    };
                    let TV::I(j) = p.0 else {
                        return Err(internal("accum index".into(), span));
                    };
                    if j < 0 || j >= n {
                        return Err(EvalError::IndexOutOfBounds {
                            index: j,
                            len: n as usize,
                            span,
                        });
                    }
                    let slot = out[j as usize].clone();
                    out[j as usize] = self.cotangent_add(&slot, &p.1);
                }
                self.stats.ops += n as u64;
                Ok(TV::A(Rc::new(out)))
            }
            Prim::AddAt => {
                // E-AddAt / E-AddAt-Bot. The oracle copies the array (it
                // runs small programs; the evaluator's persistent arrays
                // are what makes reverse mode's accumulators O(1)).
                let c = vals.pop().expect("arity");
                let (TV::A(a), TV::I(i)) = (&vals[0], &vals[1]) else {
                    return Err(internal("addAt".into(), span));
                };
                if *i < 0 || *i as usize >= a.len() {
                    return Err(EvalError::IndexOutOfBounds {
                        index: *i,
                        len: a.len(),
                        span,
                    });
                }
                let mut out = a.to_vec();
                let slot = out[*i as usize].clone();
                out[*i as usize] = self.cotangent_add(&slot, &c);
                self.stats.ops += 1;
                Ok(TV::A(Rc::new(out)))
            }
            Prim::Get => {
                self.stats.ops += 1;
                match (&vals[0], &vals[1]) {
                    (TV::A(a), TV::I(i)) => {
                        if *i >= 0 && (*i as usize) < a.len() {
                            Ok(a[*i as usize].clone())
                        } else {
                            Err(EvalError::IndexOutOfBounds {
                                index: *i,
                                len: a.len(),
                                span,
                            })
                        }
                    }
                    _ => Err(internal("get".into(), span)),
                }
            }
            Prim::Length => match &vals[0] {
                TV::A(a) => Ok(TV::I(a.len() as i64)),
                _ => Err(internal("length".into(), span)),
            },
            Prim::Pair => {
                let b = vals.pop().expect("arity");
                let a = vals.pop().expect("arity");
                Ok(TV::P(Rc::new((a, b))))
            }
            Prim::Fst | Prim::Snd => match &vals[0] {
                TV::P(p) => Ok(if op == Prim::Fst {
                    p.0.clone()
                } else {
                    p.1.clone()
                }),
                _ => Err(internal("projection".into(), span)),
            },
            _ => {
                self.stats.ops += 1;
                let plain: Vec<Value> = vals.iter().map(to_value).collect();
                let (r, _) = scalar(op, &plain, span)?;
                match r {
                    Value::Double(y) if !op.info().partials.is_empty() => {
                        let nodes: Vec<u32> = vals
                            .iter()
                            .map(|v| match v {
                                TV::D(_, k) => *k,
                                _ => CONST,
                            })
                            .collect();
                        let xs: Vec<f64> =
                            plain.iter().map(|v| v.as_f64().unwrap_or(0.0)).collect();
                        let ws = numeric_partials(op, &xs, y);
                        // A singular point is one of the run, not of the
                        // active part: a transformation that cannot see that
                        // an argument is constant still multiplies by ∞ there
                        // (ad-forward.md §7.2).
                        if y.is_finite() && ws.iter().any(|w| !w.is_finite()) {
                            self.singular = true;
                        }
                        if nodes.iter().all(|k| *k == CONST) {
                            return Ok(TV::D(y, CONST));
                        }
                        let parents: Vec<(u32, f64)> = nodes.into_iter().zip(ws).collect();
                        Ok(TV::D(y, self.tape.push(&parents)))
                    }
                    Value::Double(y) => Ok(TV::D(y, CONST)),
                    Value::Index(i) => Ok(TV::I(i)),
                    Value::Bool(b) => Ok(TV::B(b)),
                    _ => Err(internal("scalar result".into(), span)),
                }
            }
        }
    }

    /// ⊕ on taped values (as `eval::cotangent_add`), recording additions.
    fn cotangent_add(&mut self, a: &TV, b: &TV) -> TV {
        match (a, b) {
            (TV::D(x, k), TV::D(y, l)) => {
                self.stats.ops += 1;
                if *k == CONST && *l == CONST {
                    TV::D(x + y, CONST)
                } else {
                    TV::D(x + y, self.tape.push(&[(*k, 1.0), (*l, 1.0)]))
                }
            }
            (TV::A(x), TV::A(y)) => {
                let mut v: Vec<TV> = x.iter().cloned().collect();
                v.extend(y.iter().cloned());
                TV::A(Rc::new(v))
            }
            (TV::P(x), TV::P(y)) => {
                let f = self.cotangent_add(&x.0, &y.0);
                let s = self.cotangent_add(&x.1, &y.1);
                TV::P(Rc::new((f, s)))
            }
            (a, _) => a.clone(),
        }
    }
}

/// The partials of `op` at arguments `xs` and result `y`: the table's
/// terms (`ir::prim::PartialTerm`) evaluated on `f64`. No zero-seed guard
/// is needed: the sweep skips nodes whose adjoint is zero.
fn numeric_partials(op: Prim, xs: &[f64], y: f64) -> Vec<f64> {
    op.info()
        .partials
        .iter()
        .map(|p| {
            let mut w = if p.negative { -1.0 } else { 1.0 };
            if let Some(n) = &p.num {
                w *= num(n, xs, y);
            }
            if let Some(d) = &p.den {
                w /= num(d, xs, y);
            }
            w
        })
        .collect()
}

/// A partial's term at arguments `xs` and result `y`, with the table's
/// raw IEEE operations (a Bool is 1.0 or 0.0).
fn num(t: &Term, xs: &[f64], y: f64) -> f64 {
    let arg = |k: usize| xs.get(k).copied().unwrap_or(0.0);
    match t {
        Term::Arg(k) => arg(*k),
        Term::Result => y,
        Term::Lit(x) => *x,
        Term::If(c, a, b) => {
            if num(c, xs, y) != 0.0 {
                num(a, xs, y)
            } else {
                num(b, xs, y)
            }
        }
        Term::ZeroWhenZero { test, value } => {
            if num(test, xs, y) == 0.0 {
                0.0
            } else {
                num(value, xs, y)
            }
        }
        Term::Op(op, args) => {
            let a = num(&args[0], xs, y);
            let b = args.get(1).map(|x| num(x, xs, y)).unwrap_or(0.0);
            match op.info().eval.compute {
                Some(Compute::Arith { double, .. }) => double(a, b),
                Some(Compute::Unary { double, .. }) => double(a),
                Some(Compute::Math { f, .. }) => f(a),
                Some(Compute::Compare(f)) => f64::from(u8::from(f(a.partial_cmp(&b)))),
                _ => unreachable!("the derivative table does not use {op:?}"),
            }
        }
    }
}
