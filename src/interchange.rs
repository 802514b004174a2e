//! Reading program inputs from JSON, guided by the entry's parameter types
//! (spec/syntax.md, "Inputs and outputs"). Numbers become Double or Index as
//! the type says, arrays become arrays, tuples are JSON arrays of two
//! elements (an n-tuple is a right-nested pair: `[a, [b, c]]`). Output
//! formatting is `Value`'s `Display`.

use thiserror::Error;

use crate::diagnostic::{Diagnose, Span};
use crate::eval::Value;
use crate::ir::Type;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum InputError {
    #[error("input is not valid JSON: {message}")]
    Json { message: String, span: Span },
    #[error("input {path}: expected {expected}, found {found}")]
    Shape {
        path: String,
        expected: String,
        found: String,
        span: Span,
    },
    #[error("{message}")]
    Params { message: String, span: Span },
}

impl Diagnose for InputError {
    fn code(&self) -> &'static str {
        match self {
            InputError::Json { .. } => "invalid-json",
            InputError::Shape { .. } => "input-mismatch",
            InputError::Params { .. } => "input-parameters",
        }
    }

    fn span(&self) -> Span {
        match self {
            InputError::Json { span, .. }
            | InputError::Shape { span, .. }
            | InputError::Params { span, .. } => *span,
        }
    }
}

fn describe(j: &serde_json::Value) -> String {
    match j {
        serde_json::Value::Null => "null".to_string(),
        serde_json::Value::Bool(b) => format!("`{b}`"),
        serde_json::Value::Number(n) => format!("the number {n}"),
        serde_json::Value::String(s) => format!("the string {s:?}"),
        serde_json::Value::Array(a) => format!("an array of {} elements", a.len()),
        serde_json::Value::Object(_) => "an object".to_string(),
    }
}

/// Converts `j` to a value of type `t`; `path` names it in errors
/// (`x[3]`), `span` is where the parameter is declared.
pub fn value_from_json(
    j: &serde_json::Value,
    t: &Type,
    path: &str,
    span: Span,
) -> Result<Value, InputError> {
    let mismatch = |expected: String| InputError::Shape {
        path: path.to_string(),
        expected,
        found: describe(j),
        span,
    };
    match t {
        Type::Double => match j {
            serde_json::Value::Number(n) => n
                .as_f64()
                .map(Value::Double)
                .ok_or_else(|| mismatch("a Double".into())),
            serde_json::Value::String(s) => match s.as_str() {
                "NaN" => Ok(Value::Double(f64::NAN)),
                "Infinity" => Ok(Value::Double(f64::INFINITY)),
                "-Infinity" => Ok(Value::Double(f64::NEG_INFINITY)),
                _ => Err(mismatch("a Double".into())),
            },
            _ => Err(mismatch("a Double".into())),
        },
        Type::Index => j
            .as_i64()
            .map(Value::Index)
            .ok_or_else(|| mismatch("an Index (an integer)".into())),
        Type::Bool => j
            .as_bool()
            .map(Value::Bool)
            .ok_or_else(|| mismatch("a Bool".into())),
        Type::Array(e) => match j {
            serde_json::Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, x) in items.iter().enumerate() {
                    out.push(value_from_json(x, e, &format!("{path}[{i}]"), span)?);
                }
                Ok(Value::array(out))
            }
            _ => Err(mismatch(format!("an array ({t})"))),
        },
        Type::Pair(a, b) => match j {
            serde_json::Value::Array(items) if items.len() == 2 => Ok(Value::pair(
                value_from_json(&items[0], a, &format!("{path}.0"), span)?,
                value_from_json(&items[1], b, &format!("{path}.1"), span)?,
            )),
            _ => Err(mismatch(format!(
                "a pair ({t}) written as a 2-element array"
            ))),
        },
        Type::Fun(..) => Err(mismatch(format!("{t}, but functions cannot be inputs"))),
    }
}
