//! Reader for ADBench's GMM input files (format in
//! `shared/data/adbench/README.md`, section "GMM"): whitespace-separated
//! tokens `d k n`, k alphas, k × d means, k × T icf (T = d(d+1)/2), n × d
//! points, then `gamma m`. Line breaks carry no meaning, as in upstream's
//! `fscanf` reader. The output, [`GmmInput`], turns into the six arguments
//! of `gmmObjective` (`examples/adbench/gmm.fsm`) with [`GmmInput::args`].
//!
//! Invariants: no input makes the reader panic or allocate more than the
//! file's own size justifies (every stored number needs a token, except in
//! replicated-point mode, whose replication is capped by
//! [`MAX_REPLICATED_WORDS`]); every error carries the span of the token at
//! fault (byte offsets into the file text, source [`DATA_SOURCE`]) and its
//! 1-based token number. Trailing tokens are an error, which also catches a
//! replicated-point file read in normal mode and vice versa.

use crate::eval::Value;

use super::read::Tokens;
pub use super::read::{AdbenchError, DATA_SOURCE};

/// The most words replicated-point mode will allocate for the points,
/// counting each of the n rows as d numbers plus a 4-word row overhead
/// (about 4 GiB). Upstream's largest replicated files (n = 2.5 × 10⁶,
/// d = 128) need 3.3 × 10⁸.
pub const MAX_REPLICATED_WORDS: usize = 1 << 29;

/// One GMM problem as read from a file. `means`, `icf` and `x` are row per
/// component / point.
#[derive(Clone, Debug, PartialEq)]
pub struct GmmInput {
    pub d: usize,
    pub k: usize,
    pub n: usize,
    pub alphas: Vec<f64>,
    pub means: Vec<Vec<f64>>,
    pub icf: Vec<Vec<f64>>,
    pub x: Vec<Vec<f64>>,
    pub gamma: f64,
    pub m: i64,
}

impl GmmInput {
    /// The arguments of `gmmObjective`, in its parameter order: alphas,
    /// means, icf, x, wishartGamma, wishartM.
    pub fn args(&self) -> Vec<Value> {
        let vector = |v: &[f64]| Value::array(v.iter().map(|&a| Value::Double(a)).collect());
        let matrix = |m: &[Vec<f64>]| Value::array(m.iter().map(|r| vector(r)).collect());
        vec![
            vector(&self.alphas),
            matrix(&self.means),
            matrix(&self.icf),
            matrix(&self.x),
            Value::Double(self.gamma),
            Value::Index(self.m),
        ]
    }
}

/// Reads a GMM file with all n points written out.
pub fn read_gmm(text: &str) -> Result<GmmInput, AdbenchError> {
    read(text, false)
}

/// Reads a GMM file in ADBench's replicated-point mode: the file holds one
/// point line, used for all n points.
pub fn read_gmm_replicated(text: &str) -> Result<GmmInput, AdbenchError> {
    read(text, true)
}

fn read(text: &str, replicated: bool) -> Result<GmmInput, AdbenchError> {
    let mut t = Tokens::new(text);
    if replicated {
        t.trailing_note = Some(
            "in replicated-point mode the file holds one point line; a file with all n points written out is read with `read_gmm`",
        );
    } else {
        t.eof_note = Some(
            "ADBench's replicated-point files hold one point line for all n points; read them in replicated-point mode (`read_gmm_replicated`)",
        );
    }
    let d = t.size("d", "the dimension d")?;
    let k = t.size("k", "the number of components k")?;
    let n = t.size("n", "the number of points n")?;
    for (what, (v, at)) in [("d", d), ("k", k)] {
        if v == 0 {
            return Err(t.bad_size(what, at, "must be at least 1"));
        }
    }
    let ((d, d_at), (k, k_at), (n, n_at)) = (d, k, n);
    // Check the sizes before reading on: the token count the header asks
    // for must be addressable, and replication must stay bounded. (Reading
    // itself allocates only as tokens arrive.)
    let point_lines = if replicated { 1 } else { n };
    let Some(tri) = d
        .checked_add(1)
        .and_then(|d1| d.checked_mul(d1))
        .map(|x| x / 2)
    else {
        return Err(t.bad_size("d", d_at, "is too large: d(d+1)/2 overflows"));
    };
    // d + 1 cannot overflow: it was computed above.
    let Some(components) = (d + 1).checked_add(tri).and_then(|c| k.checked_mul(c)) else {
        return Err(t.bad_size("k", k_at, "is too large: k(1 + d + d(d+1)/2) overflows"));
    };
    let Some(needed) = point_lines
        .checked_mul(d)
        .and_then(|p| p.checked_add(components))
        .and_then(|c| c.checked_add(5))
    else {
        return Err(t.bad_size("n", n_at, "is too large: n d overflows"));
    };
    if replicated
        && n.checked_mul(d + 4)
            .is_none_or(|v| v > MAX_REPLICATED_WORDS)
    {
        return Err(t.bad_size(
            "n",
            n_at,
            format!("is too large to replicate: n (d + 4) exceeds {MAX_REPLICATED_WORDS} words"),
        ));
    }
    t.needed = Some(needed);

    let alphas = t.doubles(k, |i| format!("alphas[{i}]"))?;
    let means = t.rows(k, d, "means")?;
    let icf = t.rows(k, tri, "icf")?;
    let x = if replicated {
        let point = t.doubles(d, |j| format!("the replicated point's coordinate {j}"))?;
        vec![point; n]
    } else {
        t.rows(n, d, "x")?
    };
    let gamma = t.double(|| "the Wishart gamma".to_string())?;
    let m = t.integer("the Wishart m")?;
    t.finish()?;
    Ok(GmmInput {
        d,
        k,
        n,
        alphas,
        means,
        icf,
        x,
        gamma,
        m,
    })
}

impl GmmInput {
    /// The arguments of `gmmObjectiveFlat`: θ = [alphas, means, icf] in
    /// ADBench's order, then x, gamma and m.
    pub fn flat_args(&self) -> Vec<Value> {
        let mut theta = self.alphas.clone();
        theta.extend(self.means.iter().flatten());
        theta.extend(self.icf.iter().flatten());
        let args = self.args();
        vec![
            Value::array(theta.into_iter().map(Value::Double).collect()),
            args[3].clone(),
            args[4].clone(),
            args[5].clone(),
        ]
    }
}

/// The GMM objective in F̃ (`examples/adbench/gmm.fsm`), embedded so the
/// `adbench` command works from any directory.
pub const GMM_SOURCE: &str = include_str!("../../examples/adbench/gmm.fsm");
