//! GradBench's output formats, where they are not an F̃ value's own JSON
//! (`eval::Value`'s serialisation: arrays, pairs as 2-element arrays).

use serde_json::Value as Json;

use crate::eval::Value;

/// How a function's result becomes the eval's `output`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// The value's JSON.
    Value,
    /// A one-element array as the number it holds (`particle`'s w*).
    Scalar,
}

impl Output {
    pub fn render(self, v: &Value, _input: &Json) -> Result<Json, String> {
        let plain = || serde_json::to_value(v).map_err(|e| e.to_string());
        match self {
            Output::Value => plain(),
            Output::Scalar => match v.with_elements(|xs| xs.first().and_then(Value::as_f64)) {
                Some(Some(x)) => Ok(Json::from(x)),
                _ => v
                    .as_f64()
                    .map(Json::from)
                    .ok_or_else(|| format!("expected a number, the function gave {v}")),
            },
        }
    }
}
