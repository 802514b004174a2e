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

use std::num::IntErrorKind;

use thiserror::Error;

use crate::diagnostic::{Diagnose, SourceId, Span};
use crate::eval::Value;

/// The source id of spans into an ADBench data file.
pub const DATA_SOURCE: SourceId = SourceId(2);

/// The most words replicated-point mode will allocate for the points,
/// counting each of the n rows as d numbers plus a 4-word row overhead
/// (about 4 GiB). Upstream's largest replicated files (n = 2.5 × 10⁶,
/// d = 128) need 3.3 × 10⁸.
pub const MAX_REPLICATED_WORDS: usize = 1 << 29;

/// A malformed ADBench input file.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum AdbenchError {
    #[error("the file ends after {count} token(s){}: expected {expected} as token {position}", asks(.needed))]
    UnexpectedEof {
        expected: String,
        count: usize,
        /// The token count the header asks for, once the header is read.
        needed: Option<usize>,
        replicated: bool,
        position: usize,
        span: Span,
    },
    #[error("token {position} `{found}` is not {expected}")]
    BadToken {
        expected: String,
        found: String,
        position: usize,
        span: Span,
    },
    #[error("token {position}: {what} = {found} {why}")]
    BadSize {
        what: &'static str,
        found: String,
        why: String,
        position: usize,
        span: Span,
    },
    #[error(
        "token {position} `{found}`: the file goes on after its last expected value ({count} extra token(s))"
    )]
    TrailingData {
        found: String,
        count: usize,
        replicated: bool,
        position: usize,
        span: Span,
    },
}

impl Diagnose for AdbenchError {
    fn code(&self) -> &'static str {
        match self {
            AdbenchError::UnexpectedEof { .. } => "adbench-eof",
            AdbenchError::BadToken { .. } => "adbench-format",
            AdbenchError::BadSize { .. } => "adbench-size",
            AdbenchError::TrailingData { .. } => "adbench-trailing-data",
        }
    }

    fn span(&self) -> Span {
        match self {
            AdbenchError::UnexpectedEof { span, .. }
            | AdbenchError::BadToken { span, .. }
            | AdbenchError::BadSize { span, .. }
            | AdbenchError::TrailingData { span, .. } => *span,
        }
    }

    fn notes(&self) -> Vec<String> {
        match self {
            AdbenchError::UnexpectedEof {
                replicated: false,
                ..
            } => vec![
                "ADBench's replicated-point files hold one point line for all n points; read them in replicated-point mode (`read_gmm_replicated`)".to_string(),
            ],
            AdbenchError::TrailingData {
                replicated: true,
                ..
            } => vec![
                "in replicated-point mode the file holds one point line; a file with all n points written out is read with `read_gmm`".to_string(),
            ],
            _ => Vec::new(),
        }
    }
}

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
    let mut t = Tokens::new(text, replicated);
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

/// The file's tokens with their byte ranges, read front to back.
struct Tokens<'a> {
    text: &'a str,
    /// Byte ranges of the tokens.
    spans: Vec<(usize, usize)>,
    pos: usize,
    /// How many tokens the header asks for (once read), for messages.
    needed: Option<usize>,
    /// Replicated-point mode, for messages.
    replicated: bool,
}

impl<'a> Tokens<'a> {
    fn new(text: &'a str, replicated: bool) -> Tokens<'a> {
        let mut spans = Vec::new();
        let mut start = None;
        for (i, c) in text.char_indices() {
            match (c.is_whitespace(), start) {
                (true, Some(s)) => {
                    spans.push((s, i));
                    start = None;
                }
                (false, None) => start = Some(i),
                _ => {}
            }
        }
        if let Some(s) = start {
            spans.push((s, text.len()));
        }
        Tokens {
            text,
            spans,
            pos: 0,
            needed: None,
            replicated,
        }
    }

    fn span(&self, idx: usize) -> Span {
        let (s, e) = self.spans[idx];
        Span::new(DATA_SOURCE, s, e)
    }

    /// The next token, its index, or an end-of-file error naming `expected`.
    fn next(
        &mut self,
        expected: impl FnOnce() -> String,
    ) -> Result<(&'a str, usize), AdbenchError> {
        let Some(&(s, e)) = self.spans.get(self.pos) else {
            let end = self.text.len();
            return Err(AdbenchError::UnexpectedEof {
                expected: expected(),
                count: self.spans.len(),
                needed: self.needed,
                replicated: self.replicated,
                position: self.pos + 1,
                span: Span::new(DATA_SOURCE, end, end),
            });
        };
        self.pos += 1;
        Ok((&self.text[s..e], self.pos - 1))
    }

    fn bad_token(&self, idx: usize, expected: String) -> AdbenchError {
        let (s, e) = self.spans[idx];
        AdbenchError::BadToken {
            expected,
            found: abbreviate(&self.text[s..e]),
            position: idx + 1,
            span: self.span(idx),
        }
    }

    fn bad_size(&self, what: &'static str, idx: usize, why: impl Into<String>) -> AdbenchError {
        let (s, e) = self.spans[idx];
        AdbenchError::BadSize {
            what,
            found: abbreviate(&self.text[s..e]),
            why: why.into(),
            position: idx + 1,
            span: self.span(idx),
        }
    }

    /// A size from the header: a non-negative integer. Returns it and its
    /// token index.
    fn size(&mut self, what: &'static str, expected: &str) -> Result<(usize, usize), AdbenchError> {
        let (tok, idx) = self.next(|| expected.to_string())?;
        // Sizes index arrays of the language, whose indices are i64.
        match tok.parse::<i64>() {
            Ok(v) if v < 0 => Err(self.bad_size(what, idx, "is negative")),
            Ok(v) => usize::try_from(v)
                .map(|v| (v, idx))
                .map_err(|_| self.bad_size(what, idx, "is too large")),
            Err(e) => match e.kind() {
                IntErrorKind::PosOverflow => Err(self.bad_size(what, idx, "is too large")),
                IntErrorKind::NegOverflow => Err(self.bad_size(what, idx, "is negative")),
                _ => Err(self.bad_token(idx, format!("{expected} (a non-negative integer)"))),
            },
        }
    }

    fn double(&mut self, expected: impl Fn() -> String) -> Result<f64, AdbenchError> {
        let (tok, idx) = self.next(&expected)?;
        tok.parse::<f64>()
            .map_err(|_| self.bad_token(idx, format!("a number for {}", expected())))
    }

    fn integer(&mut self, expected: &str) -> Result<i64, AdbenchError> {
        let (tok, idx) = self.next(|| expected.to_string())?;
        tok.parse::<i64>()
            .map_err(|_| self.bad_token(idx, format!("an integer for {expected}")))
    }

    fn doubles(
        &mut self,
        count: usize,
        name: impl Fn(usize) -> String,
    ) -> Result<Vec<f64>, AdbenchError> {
        // Not `with_capacity(count)`: `count` is from the file; the vector
        // grows only as real tokens arrive.
        let mut out = Vec::new();
        for i in 0..count {
            out.push(self.double(|| name(i))?);
        }
        Ok(out)
    }

    fn rows(
        &mut self,
        rows: usize,
        cols: usize,
        name: &str,
    ) -> Result<Vec<Vec<f64>>, AdbenchError> {
        let mut out = Vec::new();
        for r in 0..rows {
            out.push(self.doubles(cols, |c| format!("{name}[{r}][{c}]"))?);
        }
        Ok(out)
    }

    fn finish(&self) -> Result<(), AdbenchError> {
        if self.pos < self.spans.len() {
            let (s, e) = self.spans[self.pos];
            return Err(AdbenchError::TrailingData {
                found: abbreviate(&self.text[s..e]),
                count: self.spans.len() - self.pos,
                replicated: self.replicated,
                position: self.pos + 1,
                span: self.span(self.pos),
            });
        }
        Ok(())
    }
}

fn asks(needed: &Option<usize>) -> String {
    needed.map_or(String::new(), |n| format!(", but its header asks for {n}"))
}

/// A token for an error message, cut short if it is long.
fn abbreviate(tok: &str) -> String {
    const MAX: usize = 40;
    match tok.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &tok[..i]),
        None => tok.to_string(),
    }
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
