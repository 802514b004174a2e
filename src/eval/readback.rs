//! Read-back: turns a machine state into the term it stands for
//! (spec/semantics.md, "Read-back"), by substituting environments into
//! code and plugging the current expression into the continuation's
//! frames. Used to state subject reduction for the machine (a well-typed
//! program's every state reads back to a well-typed term of the same
//! type) and to show full terms when tracing.

use std::rc::Rc;

use super::machine::{Frame, Snapshot, State, VarRef};
use super::value::{Env, Value, env_get};
use crate::diagnostic::Span;
use crate::ir::{Def, Expr, ExprId, Lit, Name, Prim, Program};

impl Snapshot<'_> {
    /// The definition being evaluated, or None while the entry is applied
    /// to its arguments.
    pub fn current_def(&self) -> Option<usize> {
        self.ev.current
    }

    /// A copy of the program extended with a definition `name` whose body
    /// is the term this state stands for.
    pub fn readback(&self, name: &str) -> Program {
        let mut rb = Readback {
            src: self.ev.prog,
            ev: self.ev,
            out: self.ev.prog.clone(),
        };
        let mut h = match self.state {
            State::Eval(e, env) => rb.sub(*e, env, 0),
            State::Ret(v) => rb.value(v),
        };
        let mut vi = self.ev.vals.len();
        for frame in self.ev.frames[self.base..].iter().rev() {
            h = rb.plug(frame, h, &mut vi);
        }
        rb.out.defs.push(Def {
            name: Rc::from(name),
            span: Span::generated(),
            ann: None,
            body: h,
            prelude: false,
        });
        rb.out
    }
}

struct Readback<'a> {
    src: &'a Program,
    ev: &'a super::machine::Evaluator<'a>,
    out: Program,
}

impl Readback<'_> {
    fn add(&mut self, e: Expr) -> ExprId {
        self.out.add(e, Span::generated())
    }

    fn lit(&mut self, l: Lit) -> ExprId {
        self.add(Expr::Lit(l))
    }

    fn value(&mut self, v: &Value) -> ExprId {
        match v {
            Value::Double(x) => self.lit(Lit::Double(*x)),
            Value::Index(i) => self.lit(Lit::Int(*i)),
            Value::Bool(b) => self.lit(Lit::Bool(*b)),
            Value::Pair(p) => {
                let a = self.value(&p.0);
                let b = self.value(&p.1);
                self.add(Expr::Prim {
                    op: Prim::Pair,
                    args: Box::new([a, b]),
                })
            }
            Value::Array(items) => {
                let ids: Vec<ExprId> = items.iter().map(|x| self.value(x)).collect();
                self.add(Expr::Array(ids.into()))
            }
            Value::Persistent(_) => self.value(&v.frozen()),
            Value::Closure(c) => self.sub(c.lam, &c.env, 0),
        }
    }

    /// Copies `e` (a node of the evaluated program), replacing each local
    /// variable bound outside `e` — `k` binders are crossed inside — by the
    /// read-back of its value in `env`.
    fn sub(&mut self, e: ExprId, env: &Env, k: u32) -> ExprId {
        let new = match self.src.expr(e).clone() {
            Expr::Var(x) => match self.ev.refs[e] {
                VarRef::Local(d) if d >= k => match env_get(env, d - k) {
                    Some(v) => return self.value(&v.clone()),
                    None => Expr::Var(x),
                },
                _ => Expr::Var(x),
            },
            Expr::Lit(l) => Expr::Lit(l),
            Expr::Lam { param, ann, body } => Expr::Lam {
                param,
                ann,
                body: self.sub(body, env, k + 1),
            },
            Expr::App { fun, arg } => Expr::App {
                fun: self.sub(fun, env, k),
                arg: self.sub(arg, env, k),
            },
            Expr::Let {
                name,
                ann,
                value,
                body,
            } => Expr::Let {
                name,
                ann,
                value: self.sub(value, env, k),
                body: self.sub(body, env, k + 1),
            },
            Expr::If { cond, then_, else_ } => Expr::If {
                cond: self.sub(cond, env, k),
                then_: self.sub(then_, env, k),
                else_: self.sub(else_, env, k),
            },
            Expr::Prim { op, args } => Expr::Prim {
                op,
                args: args.iter().map(|a| self.sub(*a, env, k)).collect(),
            },
            Expr::Array(items) => Expr::Array(items.iter().map(|a| self.sub(*a, env, k)).collect()),
            Expr::Deriv { body, wrt } => Expr::Deriv {
                body: self.sub(body, env, k),
                wrt,
            },
            Expr::Diff { op, fun, at, dir } => Expr::Diff {
                op,
                fun: self.sub(fun, env, k),
                at: self.sub(at, env, k),
                dir: self.sub(dir, env, k),
            },
        };
        self.add(new)
    }

    /// The values of the `count` arguments already computed for a frame.
    fn pending(&mut self, count: usize, vi: &mut usize) -> Vec<ExprId> {
        let start = *vi - count;
        let vals: Vec<Value> = self.ev.vals[start..*vi].to_vec();
        *vi = start;
        vals.iter().map(|v| self.value(v)).collect()
    }

    /// `ifold (fun s j -> f s (j + from)) init (n - from)`: the iterations
    /// from `from` on, or just `init` when there are none.
    fn rest_of_fold(&mut self, f: &Value, init: ExprId, from: i64, n: i64) -> ExprId {
        if from >= n {
            return init;
        }
        let (s, j): (Name, Name) = (Rc::from("s'rb"), Rc::from("j'rb"));
        let fv = self.value(f);
        let sv = self.add(Expr::Var(s.clone()));
        let jv = self.add(Expr::Var(j.clone()));
        let off = self.lit(Lit::Int(from));
        let idx = self.add(Expr::Prim {
            op: Prim::Add,
            args: Box::new([jv, off]),
        });
        let app1 = self.add(Expr::App { fun: fv, arg: sv });
        let app2 = self.add(Expr::App {
            fun: app1,
            arg: idx,
        });
        let inner = self.add(Expr::Lam {
            param: j,
            ann: None,
            body: app2,
        });
        let step = self.add(Expr::Lam {
            param: s,
            ann: None,
            body: inner,
        });
        let count = self.lit(Lit::Int(n - from));
        self.add(Expr::Prim {
            op: Prim::IFold,
            args: Box::new([step, init, count]),
        })
    }

    /// The rest of an `ifold`, or of an `iscan` whose earlier states are
    /// `scan`: `concat [[s₀, …], iscan (fun s j -> f s (j + from)) init (n - from)]`.
    fn rest_of_loop(
        &mut self,
        f: &Value,
        init: ExprId,
        from: i64,
        n: i64,
        scan: Option<&[Value]>,
    ) -> ExprId {
        let Some(states) = scan else {
            return self.rest_of_fold(f, init, from, n);
        };
        let folded = self.rest_of_fold(f, init, from, n.max(from));
        // rest_of_fold built `ifold …` (or returned `init` when nothing is
        // left); an iscan over the same step gives all remaining states.
        let rest = match self.out.expr(folded).clone() {
            Expr::Prim {
                op: Prim::IFold,
                args,
            } => self.add(Expr::Prim {
                op: Prim::IScan,
                args,
            }),
            _ => self.add(Expr::Array(Box::new([init]))),
        };
        let done: Vec<ExprId> = states.iter().map(|v| self.value(v)).collect();
        let done = self.add(Expr::Array(done.into()));
        let parts = self.add(Expr::Array(Box::new([done, rest])));
        self.add(Expr::Prim {
            op: Prim::Concat,
            args: Box::new([parts]),
        })
    }

    fn plug(&mut self, frame: &Frame, h: ExprId, vi: &mut usize) -> ExprId {
        match frame {
            Frame::AppArg(arg, env) => {
                let a = self.sub(*arg, env, 0);
                self.add(Expr::App { fun: h, arg: a })
            }
            Frame::AppCall(f, _) => {
                let fv = self.value(f);
                self.add(Expr::App { fun: fv, arg: h })
            }
            Frame::LetBody(e, env) => {
                let Expr::Let {
                    name, ann, body, ..
                } = self.src.expr(*e).clone()
                else {
                    return h;
                };
                let b = self.sub(body, env, 1);
                self.add(Expr::Let {
                    name,
                    ann,
                    value: h,
                    body: b,
                })
            }
            Frame::IfBranch(e, env) => {
                let Expr::If { then_, else_, .. } = self.src.expr(*e).clone() else {
                    return h;
                };
                let t = self.sub(then_, env, 0);
                let f = self.sub(else_, env, 0);
                self.add(Expr::If {
                    cond: h,
                    then_: t,
                    else_: f,
                })
            }
            Frame::PrimArg { e, env, next } => {
                let Expr::Prim { op, args } = self.src.expr(*e).clone() else {
                    return h;
                };
                let mut new = self.pending(next - 1, vi);
                new.push(h);
                for a in &args[*next..] {
                    new.push(self.sub(*a, env, 0));
                }
                self.add(Expr::Prim {
                    op,
                    args: new.into(),
                })
            }
            Frame::ArrayElem { e, env, next } => {
                let Expr::Array(items) = self.src.expr(*e).clone() else {
                    return h;
                };
                let mut new = self.pending(next - 1, vi);
                new.push(h);
                for a in &items[*next..] {
                    new.push(self.sub(*a, env, 0));
                }
                self.add(Expr::Array(new.into()))
            }
            Frame::BuildElem { f, n, acc, .. } => {
                let mut items: Vec<ExprId> = acc.iter().map(|v| self.value(v)).collect();
                items.push(h);
                for i in acc.len() as i64 + 1..*n {
                    let fv = self.value(f);
                    let iv = self.lit(Lit::Int(i));
                    items.push(self.add(Expr::App { fun: fv, arg: iv }));
                }
                self.add(Expr::Array(items.into()))
            }
            Frame::IFoldIndex { f, i, n, scan, .. } => {
                let iv = self.lit(Lit::Int(*i));
                let state = self.add(Expr::App { fun: h, arg: iv });
                self.rest_of_loop(f, state, i + 1, *n, scan.as_deref())
            }
            Frame::IFoldState { f, i, n, scan, .. } => {
                self.rest_of_loop(f, h, i + 1, *n, scan.as_deref())
            }
            // `if h then while c f (f s) else s`.
            Frame::WhileTest { cond, step, s, .. } => {
                let (c, f, sv) = (self.value(cond), self.value(step), self.value(s));
                let stepped = self.add(Expr::App { fun: f, arg: sv });
                let f = self.value(step);
                let again = self.add(Expr::Prim {
                    op: Prim::While,
                    args: Box::new([c, f, stepped]),
                });
                let sv = self.value(s);
                self.add(Expr::If {
                    cond: h,
                    then_: again,
                    else_: sv,
                })
            }
            // `while c f h`.
            Frame::WhileStep { cond, step, .. } => {
                let (c, f) = (self.value(cond), self.value(step));
                self.add(Expr::Prim {
                    op: Prim::While,
                    args: Box::new([c, f, h]),
                })
            }
        }
    }
}
