//! The CEK machine. One call of [`Evaluator::step`] is one transition and
//! applies exactly one `E-*` rule of spec/semantics.md (each arm cites it).
//! Control is an expression with its environment (`Eval`) or a value
//! (`Ret`); the continuation is an explicit stack of frames, so evaluation
//! never recurses on the Rust stack. Argument values waiting for their
//! primitive live on a separate value stack, so a primitive application
//! allocates nothing.

use std::collections::HashMap;
use std::rc::Rc;

use cranelift_entity::SecondaryMap;

use super::EvalError;
use super::scalar::scalar;
use super::value::{Closure, Env, PArray, Value, env_get, env_push};
use crate::diagnostic::Span;
use crate::ir::{Expr, ExprId, Lit, Prim, Program};

/// Resource limits of one evaluation (spec/semantics.md §3.8); native
/// code honours them too (`codegen::NativeLimits`).
#[derive(Copy, Clone, Debug)]
pub struct Limits {
    /// Maximum number of machine steps before ⊥ (E-Fuel).
    pub fuel: u64,
    /// Maximum number of elements of an array a `build`, `iscan` or
    /// `accum` makes (E-Limit).
    pub elements: u64,
}

impl Limits {
    /// The default limits with `fuel` steps.
    pub const fn with_fuel(fuel: u64) -> Limits {
        Limits {
            fuel,
            elements: Limits::ELEMENTS,
        }
    }

    /// The default array-size limit: 2²⁸ elements (2 GiB of Doubles in
    /// native code).
    pub const ELEMENTS: u64 = 1 << 28;
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::with_fuel(2_000_000_000)
    }
}

/// Cost counters: `steps` are machine transitions; `ops` are primitive
/// operations (arithmetic, transcendental functions, comparisons, `not`,
/// `toDouble`, array reads by `get`, and array element writes by `build`
/// and array literals).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub steps: u64,
    pub ops: u64,
}

/// One transition, for `--trace`.
#[derive(Copy, Clone, Debug)]
pub struct TraceEvent {
    pub step: u64,
    pub rule: &'static str,
    /// The expression the rule acts on, where there is one.
    pub focus: Option<ExprId>,
}

#[derive(Copy, Clone, Debug, Default)]
pub(super) enum VarRef {
    #[default]
    Unresolved,
    Local(u32),
    Global(u32),
}

pub(super) enum State {
    Eval(ExprId, Env),
    Ret(Value),
}

/// The machine after a transition, for observers such as read-back
/// (`readback.rs`) that turn it into a term.
pub struct Snapshot<'a> {
    pub(super) ev: &'a Evaluator<'a>,
    pub(super) state: &'a State,
    /// Frames below this index belong to an enclosing run.
    pub(super) base: usize,
}

pub(super) enum Frame {
    /// Function evaluated next; then the argument.
    AppArg(ExprId, Env),
    /// Argument evaluated next; then E-Beta.
    AppCall(Value, ExprId),
    /// The `let` node whose bound expression is being evaluated.
    LetBody(ExprId, Env),
    IfBranch(ExprId, Env),
    /// Evaluating argument `next - 1` of primitive node `e`; earlier
    /// arguments are on the value stack.
    PrimArg {
        e: ExprId,
        env: Env,
        next: usize,
    },
    ArrayElem {
        e: ExprId,
        env: Env,
        next: usize,
    },
    BuildElem {
        f: Value,
        n: i64,
        acc: Vec<Value>,
        e: ExprId,
    },
    /// `f` was applied to the state; apply the result to `i`. For `iscan`,
    /// `scan` holds the states so far.
    IFoldIndex {
        f: Value,
        i: i64,
        n: i64,
        e: ExprId,
        scan: Option<Vec<Value>>,
    },
    /// The new state is being computed.
    IFoldState {
        f: Value,
        i: i64,
        n: i64,
        e: ExprId,
        scan: Option<Vec<Value>>,
    },
    /// `cond` was applied to the state `s` of `while cond step`: the
    /// Bool decides between another step and the result.
    WhileTest {
        cond: Value,
        step: Value,
        s: Value,
        e: ExprId,
    },
    /// `step` was applied to the state: the new state is tested next.
    WhileStep {
        cond: Value,
        step: Value,
        e: ExprId,
    },
}

impl Frame {
    /// The expression the frame belongs to.
    fn expr(&self) -> ExprId {
        match self {
            Frame::AppArg(e, _)
            | Frame::AppCall(_, e)
            | Frame::LetBody(e, _)
            | Frame::IfBranch(e, _) => *e,
            Frame::PrimArg { e, .. }
            | Frame::ArrayElem { e, .. }
            | Frame::BuildElem { e, .. }
            | Frame::IFoldIndex { e, .. }
            | Frame::IFoldState { e, .. }
            | Frame::WhileTest { e, .. }
            | Frame::WhileStep { e, .. } => *e,
        }
    }
}

/// Evaluates definitions of one (monomorphic) program.
pub struct Evaluator<'p> {
    pub(super) prog: &'p Program,
    pub(super) refs: SecondaryMap<ExprId, VarRef>,
    globals: Vec<Option<Value>>,
    pub stats: Stats,
    pub limits: Limits,
    pub(super) frames: Vec<Frame>,
    pub(super) vals: Vec<Value>,
    /// The definition being evaluated (None while applying the entry).
    pub(super) current: Option<usize>,
}

/// Evaluates the definition `name` applied to `args` (a convenience over
/// [`Evaluator`]).
pub fn eval_def(
    prog: &Program,
    name: &str,
    args: Vec<Value>,
    limits: Limits,
) -> Result<(Value, Stats), EvalError> {
    let mut ev = Evaluator::new(prog, limits);
    let v = ev.call(name, args, &mut |_, _| {})?;
    Ok((v, ev.stats))
}

impl<'p> Evaluator<'p> {
    pub fn new(prog: &'p Program, limits: Limits) -> Evaluator<'p> {
        Evaluator {
            prog,
            refs: resolve(prog),
            globals: vec![None; prog.defs.len()],
            stats: Stats::default(),
            limits,
            frames: Vec::new(),
            vals: Vec::new(),
            current: None,
        }
    }

    /// Evaluates every definition up to and including the last one named
    /// `name`, then applies it to `args` one at a time.
    pub fn call(
        &mut self,
        name: &str,
        args: Vec<Value>,
        trace: &mut dyn FnMut(TraceEvent, Snapshot<'_>),
    ) -> Result<Value, EvalError> {
        let Some(idx) = self.prog.defs.iter().rposition(|d| &*d.name == name) else {
            return Err(EvalError::Internal {
                message: format!("no definition `{name}`"),
                span: Span::default(),
            });
        };
        for i in 0..=idx {
            if self.globals[i].is_none() {
                self.current = Some(i);
                let v = self.run(State::Eval(self.prog.defs[i].body, None), trace)?;
                self.globals[i] = Some(v);
            }
        }
        self.current = None;
        let mut f = self.globals[idx].clone().expect("just evaluated");
        let at = self.prog.defs[idx].body;
        for a in args {
            let start = self.apply(f, a, at)?;
            f = self.run(start, trace)?;
        }
        // No persistent array leaves the machine (Note [Persistent arrays]).
        Ok(f.frozen())
    }

    fn run(
        &mut self,
        mut state: State,
        trace: &mut dyn FnMut(TraceEvent, Snapshot<'_>),
    ) -> Result<Value, EvalError> {
        let base = self.frames.len();
        loop {
            if let State::Ret(v) = &state
                && self.frames.len() == base
            {
                return Ok(v.clone());
            }
            if self.stats.steps >= self.limits.fuel {
                // E-Fuel
                // The expression being evaluated, or the one a value
                // returns to.
                let span = match &state {
                    State::Eval(e, _) => self.prog.span(*e),
                    State::Ret(_) => self.frames[base..]
                        .iter()
                        .rev()
                        .map(Frame::expr)
                        .next()
                        .map_or(Span::default(), |e| self.prog.span(e)),
                };
                self.frames.truncate(base);
                return Err(EvalError::OutOfFuel {
                    steps: self.stats.steps,
                    span,
                });
            }
            self.stats.steps += 1;
            let (next, rule, focus) = match self.step(state) {
                Ok(x) => x,
                Err(e) => {
                    self.frames.truncate(base);
                    self.vals.clear();
                    return Err(e);
                }
            };
            state = next;
            trace(
                TraceEvent {
                    step: self.stats.steps,
                    rule,
                    focus,
                },
                Snapshot {
                    ev: self,
                    state: &state,
                    base,
                },
            );
        }
    }

    fn apply(&mut self, f: Value, arg: Value, at: ExprId) -> Result<State, EvalError> {
        match f {
            Value::Closure(c) => match self.prog.expr(c.lam) {
                Expr::Lam { body, .. } => Ok(State::Eval(*body, env_push(&c.env, arg))),
                _ => Err(self.internal("closure without a lambda", at)),
            },
            _ => Err(self.internal("applied a non-function", at)),
        }
    }

    /// E-Limit: an array of `n` elements is within `Limits::elements`.
    fn within_limit(&self, n: i64, span: crate::diagnostic::Span) -> Result<(), EvalError> {
        if n as u64 > self.limits.elements {
            return Err(EvalError::TooLarge {
                n,
                limit: self.limits.elements,
                span,
            });
        }
        Ok(())
    }

    fn internal(&self, message: &str, at: ExprId) -> EvalError {
        EvalError::Internal {
            message: message.to_string(),
            span: self.prog.span(at),
        }
    }

    /// One transition: the new state, the rule applied, its focus.
    fn step(&mut self, state: State) -> Result<(State, &'static str, Option<ExprId>), EvalError> {
        match state {
            State::Eval(e, env) => self.step_eval(e, env),
            State::Ret(v) => self.step_ret(v),
        }
    }

    fn step_eval(
        &mut self,
        e: ExprId,
        env: Env,
    ) -> Result<(State, &'static str, Option<ExprId>), EvalError> {
        let prog = self.prog;
        Ok(match prog.expr(e) {
            Expr::Var(_) => match self.refs[e] {
                VarRef::Local(d) => match env_get(&env, d) {
                    Some(v) => (State::Ret(v.clone()), "E-Var", Some(e)),
                    None => return Err(self.internal("unbound local variable", e)),
                },
                VarRef::Global(g) => match &self.globals[g as usize] {
                    Some(v) => (State::Ret(v.clone()), "E-Global", Some(e)),
                    None => return Err(self.internal("definition used before it is evaluated", e)),
                },
                VarRef::Unresolved => return Err(self.internal("unbound variable", e)),
            },
            Expr::Lit(l) => {
                let v = match *l {
                    Lit::Int(n) => Value::Index(n),
                    Lit::Double(x) => Value::Double(x),
                    Lit::Bool(b) => Value::Bool(b),
                };
                (State::Ret(v), "E-Lit", Some(e))
            }
            // E-Abs: a lambda evaluates to a closure over the current environment.
            Expr::Lam { .. } => (
                State::Ret(Value::Closure(Rc::new(Closure { lam: e, env }))),
                "E-Abs",
                Some(e),
            ),
            Expr::App { fun, arg } => {
                // E-App: evaluate the function first.
                self.frames.push(Frame::AppArg(*arg, env.clone()));
                (State::Eval(*fun, env), "E-App", Some(e))
            }
            Expr::Let { value, .. } => {
                // E-Let: evaluate the bound expression first.
                self.frames.push(Frame::LetBody(e, env.clone()));
                (State::Eval(*value, env), "E-Let", Some(e))
            }
            Expr::If { cond, .. } => {
                // E-If: evaluate the condition first.
                self.frames.push(Frame::IfBranch(e, env.clone()));
                (State::Eval(*cond, env), "E-If", Some(e))
            }
            Expr::Prim { args, .. } => {
                // E-Prim-Arg: arguments left to right.
                self.frames.push(Frame::PrimArg {
                    e,
                    env: env.clone(),
                    next: 1,
                });
                (State::Eval(args[0], env), "E-Prim-Arg", Some(e))
            }
            Expr::Deriv { .. } | Expr::Diff { .. } => {
                return Err(self.internal(
                    "`deriv`, `jvp` or `vjp` reached the evaluator (ad::expand runs first)",
                    e,
                ));
            }
            Expr::Array(items) => {
                if items.is_empty() {
                    // E-Array: all (zero) elements are values.
                    (State::Ret(Value::array(Vec::new())), "E-Array", Some(e))
                } else {
                    // E-Array-Elem: elements left to right.
                    self.frames.push(Frame::ArrayElem {
                        e,
                        env: env.clone(),
                        next: 1,
                    });
                    (State::Eval(items[0], env), "E-Array-Elem", Some(e))
                }
            }
        })
    }

    fn step_ret(&mut self, v: Value) -> Result<(State, &'static str, Option<ExprId>), EvalError> {
        let frame = self.frames.pop().expect("run() stops at the base frame");
        Ok(match frame {
            Frame::AppArg(arg, env) => {
                // E-App-Arg: the function is a value; evaluate the argument.
                self.frames.push(Frame::AppCall(v, arg));
                (State::Eval(arg, env), "E-App-Arg", Some(arg))
            }
            Frame::AppCall(f, at) => {
                // E-Beta
                (self.apply(f, v, at)?, "E-Beta", Some(at))
            }
            Frame::LetBody(e, env) => {
                let Expr::Let { body, .. } = self.prog.expr(e) else {
                    return Err(self.internal("let frame without let", e));
                };
                // E-Let-Subst: bind the value, continue with the body.
                (
                    State::Eval(*body, env_push(&env, v)),
                    "E-Let-Subst",
                    Some(e),
                )
            }
            Frame::IfBranch(e, env) => {
                let Expr::If { then_, else_, .. } = self.prog.expr(e) else {
                    return Err(self.internal("if frame without if", e));
                };
                match v {
                    Value::Bool(true) => (State::Eval(*then_, env), "E-If-True", Some(e)),
                    Value::Bool(false) => (State::Eval(*else_, env), "E-If-False", Some(e)),
                    _ => return Err(self.internal("non-boolean condition", e)),
                }
            }
            Frame::PrimArg { e, env, next } => {
                let Expr::Prim { op, args } = self.prog.expr(e) else {
                    return Err(self.internal("prim frame without prim", e));
                };
                self.vals.push(v);
                if next < args.len() {
                    // E-Prim-Arg
                    self.frames.push(Frame::PrimArg {
                        e,
                        env: env.clone(),
                        next: next + 1,
                    });
                    (State::Eval(args[next], env), "E-Prim-Arg", Some(args[next]))
                } else {
                    let at = self.vals.len() - args.len();
                    let vals: Vec<Value> = self.vals.drain(at..).collect();
                    self.prim(*op, vals, e)?
                }
            }
            Frame::ArrayElem { e, env, next } => {
                let Expr::Array(items) = self.prog.expr(e) else {
                    return Err(self.internal("array frame without array", e));
                };
                self.vals.push(v);
                if next < items.len() {
                    self.frames.push(Frame::ArrayElem {
                        e,
                        env: env.clone(),
                        next: next + 1,
                    });
                    (
                        State::Eval(items[next], env),
                        "E-Array-Elem",
                        Some(items[next]),
                    )
                } else {
                    // E-Array: every element is a value.
                    let at = self.vals.len() - items.len();
                    let vals: Vec<Value> = self.vals.drain(at..).collect();
                    self.stats.ops += vals.len() as u64;
                    (State::Ret(Value::array(vals)), "E-Array", Some(e))
                }
            }
            Frame::BuildElem { f, n, mut acc, e } => {
                // E-Build-Elem: element `acc.len()` is a value.
                grow(&mut acc, self.prog.span(e))?;
                acc.push(v);
                self.stats.ops += 1;
                let i = acc.len() as i64;
                if i < n {
                    let next = self.apply(f.clone(), Value::Index(i), e)?;
                    self.frames.push(Frame::BuildElem { f, n, acc, e });
                    (next, "E-Build-Elem", Some(e))
                } else {
                    (State::Ret(Value::array(acc)), "E-Build-Elem", Some(e))
                }
            }
            Frame::IFoldIndex { f, i, n, e, scan } => {
                // E-IFold-Succ / E-IScan-Succ (second half): apply the
                // partial application to i.
                let rule = if scan.is_some() {
                    "E-IScan-Succ"
                } else {
                    "E-IFold-Succ"
                };
                self.frames.push(Frame::IFoldState { f, i, n, e, scan });
                (self.apply(v, Value::Index(i), e)?, rule, Some(e))
            }
            Frame::IFoldState {
                f,
                i,
                n,
                e,
                mut scan,
            } => {
                // v = ifold f z (i+1)
                if let Some(states) = &mut scan {
                    grow(states, self.prog.span(e))?;
                    states.push(v.clone());
                    self.stats.ops += 1;
                }
                if i + 1 < n {
                    // E-IFold-Succ / E-IScan-Succ: apply f to the state.
                    let rule = if scan.is_some() {
                        "E-IScan-Succ"
                    } else {
                        "E-IFold-Succ"
                    };
                    self.frames.push(Frame::IFoldIndex {
                        f: f.clone(),
                        i: i + 1,
                        n,
                        e,
                        scan,
                    });
                    (self.apply(f, v, e)?, rule, Some(e))
                } else {
                    match scan {
                        // E-IScan-Done
                        Some(states) => (State::Ret(Value::array(states)), "E-IScan-Done", Some(e)),
                        None => (State::Ret(v), "E-IFold-Done", Some(e)),
                    }
                }
            }
            Frame::WhileTest { cond, step, s, e } => match v {
                // E-While-Step: the test holds; step the state.
                Value::Bool(true) => {
                    self.frames.push(Frame::WhileStep {
                        cond,
                        step: step.clone(),
                        e,
                    });
                    (self.apply(step, s, e)?, "E-While-Step", Some(e))
                }
                // E-While-Done: the state is the result.
                Value::Bool(false) => (State::Ret(s), "E-While-Done", Some(e)),
                _ => return Err(self.internal("`while`'s test is not a Bool", e)),
            },
            Frame::WhileStep { cond, step, e } => {
                // E-While: test the new state.
                self.frames.push(Frame::WhileTest {
                    cond: cond.clone(),
                    step,
                    s: v.clone(),
                    e,
                });
                (self.apply(cond, v, e)?, "E-While", Some(e))
            }
        })
    }

    /// A primitive applied to values.
    fn prim(
        &mut self,
        op: Prim,
        mut vals: Vec<Value>,
        e: ExprId,
    ) -> Result<(State, &'static str, Option<ExprId>), EvalError> {
        let span = self.prog.span(e);
        let ret = |v: Value, rule: &'static str| Ok((State::Ret(v), rule, Some(e)));
        if op.info().eval.compute.is_some() {
            // E-Arith, E-Neg, E-Cmp, E-Not, E-Math, E-ToDouble: the table's
            // arithmetic.
            self.stats.ops += 1;
            let (v, rule) = scalar(op, &vals, span)?;
            return ret(v, rule);
        }
        match op {
            Prim::Pair => {
                let b = vals.pop().expect("arity 2");
                let a = vals.pop().expect("arity 2");
                ret(Value::pair(a, b), "E-Pair")
            }
            Prim::Fst | Prim::Snd => match &vals[0] {
                Value::Pair(p) => {
                    if op == Prim::Fst {
                        ret(p.0.clone(), "E-Fst")
                    } else {
                        ret(p.1.clone(), "E-Snd")
                    }
                }
                _ => Err(self.internal("projection of a non-pair", e)),
            },
            Prim::Length => match vals[0].with_elements(|a| a.len()) {
                Some(n) => ret(Value::Index(n as i64), "E-Length"),
                None => Err(self.internal("length of a non-array", e)),
            },
            Prim::Get => {
                self.stats.ops += 1;
                let Value::Index(i) = vals[1] else {
                    return Err(self.internal("get at a non-index", e));
                };
                let read = vals[0].with_elements(|a| {
                    if i >= 0 && (i as usize) < a.len() {
                        Ok(a[i as usize].clone())
                    } else {
                        Err(a.len())
                    }
                });
                match read {
                    // E-Get
                    Some(Ok(v)) => ret(v, "E-Get"),
                    // E-Get-Bot
                    Some(Err(len)) => Err(EvalError::IndexOutOfBounds {
                        index: i,
                        len,
                        span,
                    }),
                    None => Err(self.internal("get on a non-array", e)),
                }
            }
            Prim::AddAt => {
                let c = vals.pop().expect("arity 3");
                let Value::Index(i) = vals[1] else {
                    return Err(self.internal("addAt at a non-index", e));
                };
                let len = match vals[0].with_elements(|a| a.len()) {
                    Some(n) => n,
                    None => return Err(self.internal("addAt of a non-array", e)),
                };
                if i < 0 || i as usize >= len {
                    // E-AddAt-Bot
                    return Err(EvalError::IndexOutOfBounds {
                        index: i,
                        len,
                        span,
                    });
                }
                // E-AddAt: a new version of a persistent array (Note
                // [Persistent arrays]); a plain array is copied into one
                // first.
                let base = match &vals[0] {
                    Value::Persistent(p) => p.clone(),
                    Value::Array(items) => PArray::new(items.to_vec()),
                    _ => unreachable!("an array"),
                };
                let ops = &mut self.stats.ops;
                *ops += 1;
                let new = PArray::update(&base, i as usize, |old| cotangent_sum(old, &[&c], ops));
                ret(Value::Persistent(new), "E-AddAt")
            }
            Prim::Build => {
                let f = vals.pop().expect("arity 2");
                let Value::Index(n) = vals[0] else {
                    return Err(self.internal("build with a non-index size", e));
                };
                if n < 0 {
                    // E-Build-Bot
                    return Err(EvalError::NegativeSize { n, span });
                }
                self.within_limit(n, span)?; // E-Limit
                if n == 0 {
                    return ret(Value::array(Vec::new()), "E-Build");
                }
                // E-Build: compute f 0, ..., f (n-1) in order.
                let next = self.apply(f.clone(), Value::Index(0), e)?;
                let acc = Vec::with_capacity((n as usize).min(1 << 20));
                self.frames.push(Frame::BuildElem { f, n, acc, e });
                Ok((next, "E-Build", Some(e)))
            }
            Prim::IFold | Prim::IScan => {
                let count = vals.pop().expect("arity 3");
                let z = vals.pop().expect("arity 3");
                let f = vals.pop().expect("arity 3");
                let Value::Index(n) = count else {
                    return Err(self.internal("ifold with a non-index count", e));
                };
                if n < 0 {
                    // E-IFold-Bot (and E-IScan-Bot)
                    return Err(EvalError::NegativeCount { n, span });
                }
                if op == Prim::IScan {
                    // E-Limit: the n + 1 states.
                    self.within_limit(n.saturating_add(1), span)?;
                }
                let scan = (op == Prim::IScan).then(|| {
                    self.stats.ops += 1;
                    let mut v = Vec::with_capacity((n as usize).min(1 << 20) + 1);
                    v.push(z.clone());
                    v
                });
                if n == 0 {
                    return match scan {
                        // E-IScan-Zero
                        Some(states) => ret(Value::array(states), "E-IScan-Zero"),
                        // E-IFold-Zero
                        None => ret(z, "E-IFold-Zero"),
                    };
                }
                // E-IFold-Succ: apply f to the state, then to the index.
                let rule = if scan.is_some() {
                    "E-IScan-Succ"
                } else {
                    "E-IFold-Succ"
                };
                self.frames.push(Frame::IFoldIndex {
                    f: f.clone(),
                    i: 0,
                    n,
                    e,
                    scan,
                });
                Ok((self.apply(f, z, e)?, rule, Some(e)))
            }
            Prim::Concat => {
                // E-Concat
                let joined = vals[0].with_elements(|parts| {
                    let mut out = Vec::new();
                    for p in parts.iter() {
                        p.with_elements(|items| out.extend(items.iter().cloned()))?;
                    }
                    Some(out)
                });
                let Some(Some(out)) = joined else {
                    return Err(self.internal("concat of a non-array", e));
                };
                self.within_limit(out.len() as i64, span)?; // E-Limit
                self.stats.ops += out.len() as u64;
                ret(Value::array(out), "E-Concat")
            }
            Prim::Accum => {
                let cs = vals.pop().expect("arity 3");
                let count = vals.pop().expect("arity 3");
                let zero = vals.pop().expect("arity 3");
                let (Value::Index(n), Some(cs)) = (count, cs.with_elements(|c| c.to_vec())) else {
                    return Err(self.internal("accum with a non-index size or non-array", e));
                };
                if n < 0 {
                    // E-Accum-Bot
                    return Err(EvalError::NegativeSize { n, span });
                }
                self.within_limit(n, span)?; // E-Limit
                // Every element is written once: an array larger than the
                // remaining fuel could never be finished (E-Fuel).
                if n as u64 > self.limits.fuel.saturating_sub(self.stats.steps) {
                    return Err(EvalError::OutOfFuel {
                        steps: self.stats.steps,
                        span,
                    });
                }
                // E-Accum: each slot is zero ⊕ its contributions, in order.
                // Contributions are gathered per slot first and combined in
                // one pass, so a slot receiving k lists costs their total
                // length, not k copies of a growing list.
                let mut parts: Vec<Vec<&Value>> = vec![Vec::new(); n as usize];
                for c in cs.iter() {
                    let Value::Pair(p) = c else {
                        return Err(self.internal("accum contribution is not a pair", e));
                    };
                    let Value::Index(j) = p.0 else {
                        return Err(self.internal("accum index is not an Index", e));
                    };
                    if j < 0 || j >= n {
                        // E-Accum-Bot
                        return Err(EvalError::IndexOutOfBounds {
                            index: j,
                            len: n as usize,
                            span,
                        });
                    }
                    parts[j as usize].push(&p.1);
                }
                let out: Vec<Value> = parts
                    .iter()
                    .map(|ps| cotangent_sum(&zero, ps, &mut self.stats.ops))
                    .collect();
                self.stats.ops += n as u64;
                ret(Value::array(out), "E-Accum")
            }
            Prim::While => {
                let s = vals.pop().expect("arity 3");
                let step = vals.pop().expect("arity 3");
                let cond = vals.pop().expect("arity 3");
                // E-While: test the initial state.
                self.frames.push(Frame::WhileTest {
                    cond: cond.clone(),
                    step,
                    s: s.clone(),
                    e,
                });
                Ok((self.apply(cond, s, e)?, "E-While", Some(e)))
            }
            // The scalar primitives returned above.
            _ => Err(self.internal("a primitive without a rule", e)),
        }
    }
}

/// Room for one more element in an array being built: memory that runs
/// out is `out-of-memory`, not an abort.
fn grow(v: &mut Vec<Value>, span: crate::diagnostic::Span) -> Result<(), EvalError> {
    if v.len() < v.capacity() {
        return Ok(());
    }
    v.try_reserve(v.len().max(16))
        .map_err(|_| EvalError::OutOfMemory {
            n: v.len() as u64 + 1,
            span,
        })
}

/// Cotangent addition ⊕ (spec/semantics.md, E-Accum): doubles add, arrays
/// (sparse contribution lists) concatenate, pairs add componentwise, and
/// the placeholders for Index and Bool keep the left operand. This computes
/// `zero ⊕ p₁ ⊕ … ⊕ pₖ` in one pass (linear in the total size).
pub fn cotangent_sum(zero: &Value, parts: &[&Value], ops: &mut u64) -> Value {
    if parts.is_empty() {
        return zero.clone();
    }
    match zero {
        Value::Double(z) => {
            let mut acc = *z;
            for p in parts {
                if let Value::Double(x) = p {
                    acc += x;
                    *ops += 1;
                }
            }
            Value::Double(acc)
        }
        Value::Array(_) | Value::Persistent(_) => {
            let mut v: Vec<Value> = zero.with_elements(|z| z.to_vec()).unwrap_or_default();
            for p in parts {
                p.with_elements(|xs| {
                    *ops += xs.len() as u64;
                    v.extend(xs.iter().cloned());
                });
            }
            Value::array(v)
        }
        Value::Pair(z) => {
            let firsts: Vec<&Value> = parts
                .iter()
                .filter_map(|p| match p {
                    Value::Pair(q) => Some(&q.0),
                    _ => None,
                })
                .collect();
            let seconds: Vec<&Value> = parts
                .iter()
                .filter_map(|p| match p {
                    Value::Pair(q) => Some(&q.1),
                    _ => None,
                })
                .collect();
            Value::pair(
                cotangent_sum(&z.0, &firsts, ops),
                cotangent_sum(&z.1, &seconds, ops),
            )
        }
        other => other.clone(),
    }
}

/// Resolves every variable to a de Bruijn depth or a definition index. A
/// definition sees only earlier definitions; later ones shadow earlier
/// ones of the same name.
fn resolve(prog: &Program) -> SecondaryMap<ExprId, VarRef> {
    let mut refs = SecondaryMap::new();
    let mut globals: HashMap<&str, u32> = HashMap::new();
    for (i, d) in prog.defs.iter().enumerate() {
        let mut scope: Vec<&str> = Vec::new();
        // Iterative walk: (expr, scope length to restore, binder to push).
        enum W<'a> {
            Visit(ExprId),
            Push(&'a str),
            Pop,
        }
        let mut work = vec![W::Visit(d.body)];
        while let Some(w) = work.pop() {
            match w {
                W::Push(n) => scope.push(n),
                W::Pop => {
                    scope.pop();
                }
                W::Visit(e) => match prog.expr(e) {
                    Expr::Var(x) => {
                        refs[e] = match scope.iter().rev().position(|n| *n == &**x) {
                            Some(d) => VarRef::Local(d as u32),
                            None => match globals.get(&**x) {
                                Some(g) => VarRef::Global(*g),
                                None => VarRef::Unresolved,
                            },
                        }
                    }
                    Expr::Lam { param, body, .. } => {
                        work.push(W::Pop);
                        work.push(W::Visit(*body));
                        work.push(W::Push(param));
                    }
                    Expr::Let {
                        name, value, body, ..
                    } => {
                        work.push(W::Pop);
                        work.push(W::Visit(*body));
                        work.push(W::Push(name));
                        work.push(W::Visit(*value));
                    }
                    other => {
                        for c in other.children().into_iter().rev() {
                            work.push(W::Visit(c));
                        }
                    }
                },
            }
        }
        globals.insert(&d.name, i as u32);
    }
    refs
}
