//! Runtime values of the reference evaluator (spec/semantics.md, "Values").
//! Closures pair a lambda node with its environment; environments are
//! persistent linked lists indexed by de Bruijn depth.

use std::fmt;
use std::rc::Rc;

use crate::ir::ExprId;

#[derive(Clone, Debug)]
pub enum Value {
    Double(f64),
    Index(i64),
    Bool(bool),
    Pair(Rc<(Value, Value)>),
    Array(Rc<Vec<Value>>),
    Closure(Rc<Closure>),
}

#[derive(Debug)]
pub struct Closure {
    /// The `Expr::Lam` node.
    pub lam: ExprId,
    pub env: Env,
}

/// A persistent environment: innermost binding first.
pub type Env = Option<Rc<EnvNode>>;

#[derive(Debug)]
pub struct EnvNode {
    pub value: Value,
    pub next: Env,
}

pub fn env_push(env: &Env, value: Value) -> Env {
    Some(Rc::new(EnvNode {
        value,
        next: env.clone(),
    }))
}

pub fn env_get(env: &Env, depth: u32) -> Option<&Value> {
    let mut cur = env.as_ref()?;
    for _ in 0..depth {
        cur = cur.next.as_ref()?;
    }
    Some(&cur.value)
}

impl Value {
    pub fn pair(a: Value, b: Value) -> Value {
        Value::Pair(Rc::new((a, b)))
    }

    pub fn array(items: Vec<Value>) -> Value {
        Value::Array(Rc::new(items))
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Double(x) => Some(*x),
            _ => None,
        }
    }

    /// Structural equality with bitwise comparison of doubles; closures are
    /// never equal.
    pub fn same(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Double(a), Value::Double(b)) => a.to_bits() == b.to_bits(),
            (Value::Index(a), Value::Index(b)) => a == b,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Pair(a), Value::Pair(b)) => a.0.same(&b.0) && a.1.same(&b.1),
            (Value::Array(a), Value::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.same(y))
            }
            _ => false,
        }
    }

    /// The largest ADBench ρ(x, y) = |x−y| / max(1, |x|+|y|) over matching
    /// doubles, or None when the shapes differ.
    pub fn max_rho(&self, other: &Value) -> Option<f64> {
        match (self, other) {
            (Value::Double(a), Value::Double(b)) => Some(crate::numeric::rho(*a, *b)),
            (Value::Index(a), Value::Index(b)) => (a == b).then_some(0.0),
            (Value::Bool(a), Value::Bool(b)) => (a == b).then_some(0.0),
            (Value::Pair(a), Value::Pair(b)) => Some(a.0.max_rho(&b.0)?.max(a.1.max_rho(&b.1)?)),
            (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
                let mut m: f64 = 0.0;
                for (x, y) in a.iter().zip(b.iter()) {
                    m = m.max(x.max_rho(y)?);
                }
                Some(m)
            }
            _ => None,
        }
    }
}

impl fmt::Display for Value {
    /// JSON: numbers, `true`/`false`, arrays and tuples as JSON arrays.
    /// Doubles always carry a decimal point or exponent; non-finite doubles
    /// print as the strings "NaN", "Infinity", "-Infinity".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Double(x) => {
                if x.is_nan() {
                    write!(f, "\"NaN\"")
                } else if x.is_infinite() {
                    write!(f, "\"{}Infinity\"", if *x < 0.0 { "-" } else { "" })
                } else {
                    write!(f, "{x:?}")
                }
            }
            Value::Index(i) => write!(f, "{i}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Pair(p) => write!(f, "[{}, {}]", p.0, p.1),
            Value::Array(a) => {
                write!(f, "[")?;
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{x}")?;
                }
                write!(f, "]")
            }
            Value::Closure(_) => write!(f, "\"<function>\""),
        }
    }
}
