//! GradBench's output formats, where they are not an F̃ value's own JSON
//! (`eval::Value`'s serialisation: arrays, pairs as 2-element arrays):
//! a one-element array as a number (particle), a tuple as an object with
//! named fields (GMM's Jacobian), several arrays as one flat list (LSTM's
//! Jacobian), and BA's compressed objective and truncated CSR Jacobian
//! (GradBench's `cpp/gradbench/evals/ba.hpp`, `../shared/gradbench/
//! SNAPSHOT.md`: the validator compares these, not the README's types).

use serde_json::{Value as Json, json};

use crate::eval::{Value, flatten};

/// How a function's result becomes the eval's `output`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// The value's JSON.
    Value,
    /// A one-element array as the number it holds (`particle`'s w*).
    Scalar,
    /// A right-nested tuple `(a, (b, …))` as an object with these keys.
    Object(&'static [&'static str]),
    /// Every Double of the value, in order, as one list.
    Flat,
    /// BA's objective from `(reproj: p × 2, werr: p)`: GradBench's
    /// compressed form, every observation being a copy of the first.
    BaObjective,
    /// BA's Jacobian from `(blocks, wderivs)`: the 2 × 15 blocks of the
    /// observations in order (flattened, observation 0's two rows first)
    /// and each ∂werrᵢ/∂wᵢ; GradBench's CSR of the whole sparse Jacobian,
    /// each array cut to its first 30 entries and its last.
    BaJacobian,
}

impl Output {
    /// The output of `v`, computed for the eval's `input`.
    pub fn render(self, v: &Value, input: &Json) -> Result<Json, String> {
        let plain = |v: &Value| serde_json::to_value(v).map_err(|e| e.to_string());
        match self {
            Output::Value => plain(v),
            Output::Scalar => match v.with_elements(|xs| xs.first().and_then(Value::as_f64)) {
                Some(Some(x)) => Ok(Json::from(x)),
                _ => v
                    .as_f64()
                    .map(Json::from)
                    .ok_or_else(|| format!("expected a number, the function gave {v}")),
            },
            Output::Object(keys) => {
                let mut map = serde_json::Map::new();
                let mut rest = v.clone();
                for (k, key) in keys.iter().enumerate() {
                    let item = if k + 1 == keys.len() {
                        rest.clone()
                    } else {
                        let Value::Pair(p) = &rest else {
                            return Err(format!("expected a tuple of {} values", keys.len()));
                        };
                        let (a, b) = (p.0.clone(), p.1.clone());
                        rest = b;
                        a
                    };
                    map.insert((*key).to_string(), plain(&item)?);
                }
                Ok(Json::Object(map))
            }
            Output::Flat => {
                let mut xs = Vec::new();
                flatten(v, &mut xs);
                Ok(json!(xs))
            }
            Output::BaObjective => {
                let p = field(input, "p")?;
                let (reproj, werr) = pair(v)?;
                let mut e = Vec::new();
                flatten(&reproj, &mut e);
                let mut w = Vec::new();
                flatten(&werr, &mut w);
                if e.len() < 2 || w.is_empty() {
                    return Err("BA's objective has no observation".into());
                }
                Ok(json!({
                    "reproj_error": {"elements": [e[0], e[1]], "repeated": p},
                    "w_err": {"element": w[0], "repeated": p},
                }))
            }
            Output::BaJacobian => {
                let (n, m, p) = (field(input, "n")?, field(input, "m")?, field(input, "p")?);
                let (blocks, wderivs) = pair(v)?;
                // Only observation 0's block and the last weight's
                // derivative are printed: read just those.
                let mut vals = Vec::new();
                blocks.with_elements(|bs| {
                    if let Some(b) = bs.first() {
                        flatten(b, &mut vals);
                    }
                });
                let wd: Vec<f64> = wderivs
                    .with_elements(|ws| ws.iter().filter_map(Value::as_f64).collect())
                    .unwrap_or_default();
                if p == 0 || vals.len() != 30 || wd.len() != p as usize {
                    return Err(format!(
                        "BA's Jacobian: {} entries in the first block and {} weight derivatives for {p} observations",
                        vals.len(),
                        wd.len()
                    ));
                }
                // Row pointers: 2p rows of 15 entries, then p rows of one.
                let rows: Vec<i64> = (0..30).map(|r| 15 * r).chain([31 * p]).collect();
                // Observation 0 uses camera 0 and point 0; the last row is
                // the last observation's weight.
                let obs0: Vec<i64> = (0..11)
                    .chain((0..3).map(|j| 11 * n + j))
                    .chain([11 * n + 3 * m])
                    .collect();
                let cols: Vec<i64> = obs0
                    .iter()
                    .chain(&obs0)
                    .copied()
                    .chain([11 * n + 3 * m + p - 1])
                    .collect();
                let vals: Vec<f64> = vals[..30]
                    .iter()
                    .copied()
                    .chain([wd[wd.len() - 1]])
                    .collect();
                Ok(json!({"rows": rows, "cols": cols, "vals": vals}))
            }
        }
    }
}

/// An integer field of the input.
fn field(input: &Json, name: &str) -> Result<i64, String> {
    input
        .get(name)
        .and_then(Json::as_i64)
        .ok_or_else(|| format!("the input has no integer `{name}`"))
}

fn pair(v: &Value) -> Result<(Value, Value), String> {
    match v {
        Value::Pair(p) => Ok((p.0.clone(), p.1.clone())),
        _ => Err(format!("expected a pair, the function gave {v}")),
    }
}
