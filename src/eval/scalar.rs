//! The scalar primitives on values (E-Arith, E-Arith-Bot, E-Neg, E-Cmp,
//! E-Not, E-Math, E-Math-Bot, E-ToDouble): the table's arithmetic
//! (`ir::prim::Compute`) applied to [`Value`]s, its ⊥ turned into the
//! evaluator's errors. Shared by the machine, the tape-based reverse mode
//! (`tape`) and the optimiser's constant folding, so all three compute
//! with the same Rust functions.

use super::EvalError;
use super::value::Value;
use crate::diagnostic::Span;
use crate::ir::Prim;
use crate::ir::prim::{Bottom, Compute};

/// `op` applied to `vals`, with the rule the application uses.
pub fn scalar(op: Prim, vals: &[Value], span: Span) -> Result<(Value, &'static str), EvalError> {
    let bad = |what: &str| EvalError::Internal {
        message: format!("{what} (`{}`)", op.name()),
        span,
    };
    let info = op.info();
    let Some(compute) = info.eval.compute else {
        return Err(bad("not a scalar primitive"));
    };
    let v = match compute {
        Compute::Arith {
            double,
            double_bottom,
            index,
        } => match (&vals[0], &vals[1]) {
            (Value::Double(x), Value::Double(y)) => {
                let (x, y) = (*x, *y);
                if let Some(b) = double_bottom(x, y) {
                    return Err(bottom(op.name(), b, || format!("({x:?}, {y:?})"), span));
                }
                Value::Double(double(x, y))
            }
            (Value::Index(x), Value::Index(y)) => {
                let (x, y) = (*x, *y);
                let r = index(x, y);
                Value::Index(
                    r.map_err(|b| bottom(op.name(), b, || format!("({x}, {y}) on Index"), span))?,
                )
            }
            _ => {
                return Err(EvalError::Internal {
                    message: "arithmetic on mismatched values".to_string(),
                    span,
                });
            }
        },
        Compute::Unary { double, index } => match &vals[0] {
            Value::Double(x) => Value::Double(double(*x)),
            // E-Neg's overflow, −(−2⁶³), names the operator as programs
            // write it.
            Value::Index(i) => {
                Value::Index(index(*i).map_err(|b| bottom("-", b, String::new, span))?)
            }
            _ => return Err(bad("negation of a non-number")),
        },
        Compute::Compare(f) => {
            let ord = match (&vals[0], &vals[1]) {
                (Value::Double(a), Value::Double(b)) => a.partial_cmp(b),
                (Value::Index(a), Value::Index(b)) => Some(a.cmp(b)),
                _ => return Err(bad("comparison of non-numbers")),
            };
            Value::Bool(f(ord))
        }
        Compute::Logic(f) => match vals[0] {
            Value::Bool(b) => Value::Bool(f(b)),
            _ => return Err(bad("`not` of a non-boolean")),
        },
        Compute::Math { f, domain } => {
            let Value::Double(x) = vals[0] else {
                return Err(bad("math function of a non-double"));
            };
            if !domain(x) {
                // E-Math-Bot
                return Err(bottom(op.name(), Bottom::Domain, || format!("{x:?}"), span));
            }
            Value::Double(f(x))
        }
        Compute::Convert(f) => match vals[0] {
            Value::Index(i) => Value::Double(f(i)),
            _ => return Err(bad("toDouble of a non-index")),
        },
    };
    Ok((v, info.eval_rule()))
}

/// The error of a scalar ⊥ (E-Arith-Bot, E-Neg, E-Math-Bot): `name` is
/// the operator the message names, `arg` the operands as it shows them.
fn bottom(name: &'static str, b: Bottom, arg: impl FnOnce() -> String, span: Span) -> EvalError {
    match b {
        Bottom::DivisionByZero => EvalError::DivisionByZero { span },
        Bottom::Domain => EvalError::Domain {
            op: name,
            arg: arg(),
            span,
        },
        Bottom::Overflow => EvalError::Overflow { op: name, span },
        Bottom::OutOfBounds | Bottom::NegativeSize | Bottom::NegativeCount | Bottom::Diverges => {
            EvalError::Internal {
                message: format!("`{name}` is not a scalar primitive's ⊥ ({b:?})"),
                span,
            }
        }
    }
}
