//! Reader for ADBench's LSTM input files (format in
//! `shared/data/adbench/README.md`, section "LSTM"): tokens `l c b`, then
//! main_params (2l lines of 4b), extra_params (3 lines of b), state (2l
//! lines of b) and the sequence (c lines of b bits). Blank lines carry no
//! meaning. The output, [`LstmInput`], turns into the arguments of
//! `lstmObjectiveFlat` (`examples/adbench/lstm.fsm`) with
//! [`LstmInput::flat_args`].
//!
//! Invariants: no input makes the reader panic; the header's sizes are
//! checked for overflow before anything is read, and reading allocates
//! only as tokens arrive; trailing tokens are an error.

use crate::eval::Value;

pub use super::read::DATA_SOURCE;
use super::read::{AdbenchError, Tokens};

/// One LSTM problem as read. `main_params` and `extra_params` are flat, in
/// file order; `state` has 2l rows (hidden, cell per layer) of b values,
/// `sequence` c rows of b.
#[derive(Clone, Debug, PartialEq)]
pub struct LstmInput {
    pub l: usize,
    pub c: usize,
    pub b: usize,
    pub main_params: Vec<f64>,
    pub extra_params: Vec<f64>,
    pub state: Vec<Vec<f64>>,
    pub sequence: Vec<Vec<f64>>,
}

impl LstmInput {
    /// The arguments of `lstmObjectiveFlat`: θ = [main_params,
    /// extra_params], the state and the sequence.
    pub fn flat_args(&self) -> Vec<Value> {
        let vector = |v: &[f64]| Value::array(v.iter().map(|&a| Value::Double(a)).collect());
        let matrix = |m: &[Vec<f64>]| Value::array(m.iter().map(|r| vector(r)).collect());
        let mut theta = self.main_params.clone();
        theta.extend(&self.extra_params);
        vec![vector(&theta), matrix(&self.state), matrix(&self.sequence)]
    }
}

/// Reads an LSTM file.
pub fn read_lstm(text: &str) -> Result<LstmInput, AdbenchError> {
    let mut t = Tokens::new(text);
    let (l, _) = t.size("l", "the number of layers l")?;
    let (c, c_at) = t.size("c", "the number of characters c")?;
    let (b, b_at) = t.size("b", "the number of bits b")?;
    if b == 0 {
        return Err(t.bad_size("b", b_at, "must be at least 1"));
    }
    if c < 2 {
        return Err(t.bad_size(
            "c",
            c_at,
            "must be at least 2: each character predicts the next",
        ));
    }
    // 3 + 8 l b + 3 b + 2 l b + c b tokens.
    let needed = l
        .checked_mul(10)
        .and_then(|x| x.checked_add(3))
        .and_then(|x| x.checked_add(c))
        .and_then(|x| x.checked_mul(b))
        .and_then(|x| x.checked_add(3));
    let Some(needed) = needed else {
        return Err(t.bad_size(
            "b",
            b_at,
            "is too large: the token count (10 l + 3 + c) b + 3 overflows",
        ));
    };
    t.needed = Some(needed);
    let main_params = t.doubles(8 * l * b, |j| format!("main_params[{j}]"))?;
    let extra_params = t.doubles(3 * b, |j| format!("extra_params[{j}]"))?;
    let state = t.rows(2 * l, b, "state")?;
    let sequence = t.rows(c, b, "sequence")?;
    t.finish()?;
    Ok(LstmInput {
        l,
        c,
        b,
        main_params,
        extra_params,
        state,
        sequence,
    })
}

/// The LSTM objective in F̃ (`examples/adbench/lstm.fsm`), embedded so the
/// `adbench` command works from any directory.
pub const LSTM_SOURCE: &str = include_str!("../../examples/adbench/lstm.fsm");
