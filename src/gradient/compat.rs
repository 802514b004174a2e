//! Temporary: the former gradient functions over the compat derivatives,
//! so the test suite runs unchanged while it is being split.

use super::{Columns, How, Plan};
use crate::eval::{EvalError, Limits, Value};
use crate::pipeline::{Derivative, ReverseDerivative, RowsDerivative, RunError};

pub enum Engine {
    Eval(Limits),
    Native,
}

impl Engine {
    pub fn native() -> Engine {
        Engine::Native
    }
    fn split(&self) -> (crate::pipeline::Engine, Limits) {
        match self {
            Engine::Eval(l) => (crate::pipeline::Engine::Eval, *l),
            Engine::Native => (crate::pipeline::Engine::Native, Limits::default()),
        }
    }
    pub fn run(
        &self,
        e: &crate::pipeline::Entry,
        args: Vec<Value>,
    ) -> Result<(Value, crate::eval::Stats), RunError> {
        let (en, l) = self.split();
        e.run_on(en, args, l)
    }
}

pub fn forward(d: &Derivative, args: Vec<Value>, limits: Limits) -> Result<Columns, EvalError> {
    forward_on(d, args, &Engine::Eval(limits)).map_err(RunError::into_eval)
}

pub fn forward_on(d: &Derivative, args: Vec<Value>, engine: &Engine) -> Result<Columns, RunError> {
    let plan = Plan {
        base: d.base.clone(),
        wrt: d.wrt,
        how: if d.tangent_only {
            How::Tangents(d.wrapper.clone())
        } else {
            How::Duals(d.wrapper.clone())
        },
    };
    let (en, l) = engine.split();
    plan.columns(args, en, l)
}

pub fn rows_on(d: &RowsDerivative, args: Vec<Value>, engine: &Engine) -> Result<Columns, RunError> {
    let plan = Plan {
        base: d.base.clone(),
        wrt: d.wrt,
        how: How::Rows(d.rows.clone()),
    };
    let (en, l) = engine.split();
    plan.columns(args, en, l)
}

pub fn reverse(
    d: &ReverseDerivative,
    args: Vec<Value>,
    limits: Limits,
) -> Result<Columns, EvalError> {
    reverse_on(d, args, &Engine::Eval(limits)).map_err(RunError::into_eval)
}

pub fn reverse_on(
    d: &ReverseDerivative,
    args: Vec<Value>,
    engine: &Engine,
) -> Result<Columns, RunError> {
    let plan = Plan {
        base: d.base.clone(),
        wrt: d.wrt,
        how: How::Reverse {
            rev: d.rev.clone(),
            seeded: d.seeded,
        },
    };
    let (en, l) = engine.split();
    plan.columns(args, en, l)
}

impl Engine {
    pub fn run_flat(
        &self,
        e: &crate::pipeline::Entry,
        args: &[Value],
    ) -> Option<Result<Vec<f64>, RunError>> {
        e.run_flat(self.split().0, args)
    }
}
