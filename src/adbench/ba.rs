//! ADBench bundle adjustment (format in `shared/data/adbench/README.md`,
//! section "BA"): the reader, the arguments of the F̃ residual functions
//! of `examples/adbench/ba.fsm`, and the assembly of ADBench's sparse
//! Jacobian (CSR) from one small dense Jacobian per observation.
//!
//! A file holds `n m p` and then exactly 17 numbers: one camera (11), one
//! point (3), one weight and one feature (2). Every camera, point, weight
//! and feature of the problem is a copy of these; observation i pairs
//! camera `i % n` with point `i % m`. The copies are not stored: they are
//! made when arguments are built.
//!
//! Invariants: no input makes the reader panic; the replication a header
//! asks for is bounded by [`MAX_BA_WORDS`] (checked before anything is
//! built); the Jacobian's layout is ADBench's whatever the per-observation
//! derivatives are (rows of 15 entries, then rows of 1).

use std::rc::Rc;

use crate::diagnostic::Diagnostic;
use crate::eval::{EvalError, Limits, Stats, Value};
use crate::gradient::{Mode, Plan};
use crate::pipeline::{Artefact, Checkpointing, Engine, Entry, RunError, Session};

pub use super::read::DATA_SOURCE;
use super::read::{AdbenchError, Tokens};

/// The most words the replicated problem may take as F̃ values (about
/// 4 GiB), counting a camera as 15 words, a point as 7, and a weight with
/// its feature as 8. ADBench's largest file (ba20) needs 5.5 × 10⁷.
pub const MAX_BA_WORDS: usize = 1 << 29;

/// Parameters per camera, per point, and per observation row of the
/// Jacobian (11 + 3 + 1).
pub const CAMERA_PARAMS: usize = 11;
pub const POINT_PARAMS: usize = 3;
pub const ROW_ENTRIES: usize = CAMERA_PARAMS + POINT_PARAMS + 1;

/// One BA problem as read: the sizes and the one camera, point, weight and
/// feature that every copy repeats.
#[derive(Clone, Debug, PartialEq)]
pub struct BaInput {
    pub n: usize,
    pub m: usize,
    pub p: usize,
    pub cam: Vec<f64>,
    pub x: Vec<f64>,
    pub w: f64,
    pub feat: Vec<f64>,
}

fn vector(v: &[f64]) -> Value {
    Value::array(v.iter().map(|&a| Value::Double(a)).collect())
}

impl BaInput {
    /// The arguments of `baObjective`: cams (n × 11), points (m × 3),
    /// weights (p), feats (p × 2).
    pub fn objective_args(&self) -> Vec<Value> {
        let copies = |v: &[f64], k: usize| Value::array(vec![vector(v); k]);
        vec![
            copies(&self.cam, self.n),
            copies(&self.x, self.m),
            Value::array(vec![Value::Double(self.w); self.p]),
            copies(&self.feat, self.p),
        ]
    }

    /// The arguments of `baObservation` for observation `i`: its 15
    /// parameters [camera i % n, point i % m, weight i], and feature i.
    pub fn observation_args(&self, _i: usize) -> Vec<Value> {
        // Every camera, point, weight and feature is the file's one copy.
        let mut params = self.cam.clone();
        params.extend(&self.x);
        params.push(self.w);
        vec![vector(&params), vector(&self.feat)]
    }

    /// The arguments of `baObservation` batched (`Artefact::Batched`): a
    /// matrix of every observation's 15 parameters and one of its
    /// features.
    pub fn observations_args(&self) -> Vec<Value> {
        let one = self.observation_args(0);
        let rows = |v: &Value| Value::array(vec![v.clone(); self.p]);
        one.iter().map(rows).collect()
    }
}

/// Reads a BA file.
pub fn read_ba(text: &str) -> Result<BaInput, AdbenchError> {
    let mut t = Tokens::new(text);
    let (n, n_at) = t.size("n", "the number of cameras n")?;
    let (m, m_at) = t.size("m", "the number of points m")?;
    let (p, p_at) = t.size("p", "the number of observations p")?;
    // Observation i uses camera i % n and point i % m.
    for (what, v, at) in [("n", n, n_at), ("m", m, m_at)] {
        if v == 0 {
            return Err(t.bad_size(what, at, "must be at least 1"));
        }
    }
    let words = n
        .checked_mul(15)
        .and_then(|a| m.checked_mul(7).and_then(|b| a.checked_add(b)))
        .and_then(|a| p.checked_mul(8).and_then(|b| a.checked_add(b)));
    if words.is_none_or(|w| w > MAX_BA_WORDS) {
        // Blame the largest size.
        let (what, at) = if p >= n.max(m) {
            ("p", p_at)
        } else if m >= n {
            ("m", m_at)
        } else {
            ("n", n_at)
        };
        return Err(t.bad_size(
            what,
            at,
            format!("is too large to replicate: 15 n + 7 m + 8 p exceeds {MAX_BA_WORDS} words"),
        ));
    }
    t.needed = Some(3 + 17);
    let cam = t.doubles(CAMERA_PARAMS, |j| format!("camera parameter {j}"))?;
    let x = t.doubles(POINT_PARAMS, |j| format!("point coordinate {j}"))?;
    let w = t.double(|| "the weight".to_string())?;
    let feat = t.doubles(2, |j| format!("feature coordinate {j}"))?;
    t.finish()?;
    Ok(BaInput {
        n,
        m,
        p,
        cam,
        x,
        w,
        feat,
    })
}

/// A sparse matrix in compressed-row form, as ADBench's `BASparseMat`:
/// `rows[r]..rows[r + 1]` index the entries of row r in `cols`/`vals`.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseJacobian {
    pub nrows: usize,
    pub ncols: usize,
    pub rows: Vec<usize>,
    pub cols: Vec<usize>,
    pub vals: Vec<f64>,
}

/// The residuals and their Jacobian.
#[derive(Clone, Debug, PartialEq)]
pub struct BaResult {
    /// `e_0x, e_0y, e_1x, …` (2p).
    pub reproj_err: Vec<f64>,
    /// `1 - w_i²` (p).
    pub w_err: Vec<f64>,
    pub jacobian: SparseJacobian,
}

/// Assembles the residuals and ADBench's sparse Jacobian from
/// `observation(i, value, tangents)`, which fills `value` with `[e_x,
/// e_y, z]` of `baObservation` for observation i and `tangents` with its
/// 15 derivative columns of 3, one after the other; called for i = 0 …
/// p−1 with both emptied.
/// Rows 2i, 2i+1 take all 15 entries of outputs 0 and 1 (camera i % n,
/// point i % m, weight i); row 2p + i takes ∂z/∂w (column 14 of output 2).
pub fn assemble<E>(
    input: &BaInput,
    mut observation: impl FnMut(usize, &mut Vec<f64>, &mut Vec<f64>) -> Result<(), E>,
) -> Result<BaResult, E> {
    let (n, m, p) = (input.n, input.m, input.p);
    let weight_col = CAMERA_PARAMS * n + POINT_PARAMS * m;
    let mut reproj_err = Vec::with_capacity(2 * p);
    let mut w_err = Vec::with_capacity(p);
    let mut rows = Vec::with_capacity(3 * p + 1);
    let mut cols = Vec::with_capacity(2 * p * ROW_ENTRIES + p);
    let mut vals = Vec::with_capacity(2 * p * ROW_ENTRIES + p);
    let mut weight_vals = Vec::with_capacity(p);
    let (mut value, mut tangents) = (Vec::new(), Vec::new());
    rows.push(0);
    for i in 0..p {
        value.clear();
        tangents.clear();
        observation(i, &mut value, &mut tangents)?;
        let out = |k: usize| value.get(k).copied().unwrap_or(f64::NAN);
        reproj_err.extend([out(0), out(1)]);
        w_err.push(out(2));
        // Column j of the observation's Jacobian holds ∂out_k/∂param_j
        // at 3j + k.
        let entry = |j: usize, k: usize| tangents.get(3 * j + k).copied().unwrap_or(f64::NAN);
        let (cam, pt) = (i % n, i % m);
        let row_cols = (0..CAMERA_PARAMS)
            .map(|j| CAMERA_PARAMS * cam + j)
            .chain((0..POINT_PARAMS).map(|j| CAMERA_PARAMS * n + POINT_PARAMS * pt + j))
            .chain([weight_col + i]);
        for k in 0..2 {
            cols.extend(row_cols.clone());
            vals.extend((0..ROW_ENTRIES).map(|j| entry(j, k)));
            rows.push(cols.len());
        }
        weight_vals.push(entry(ROW_ENTRIES - 1, 2));
    }
    for (i, v) in weight_vals.into_iter().enumerate() {
        cols.push(weight_col + i);
        vals.push(v);
        rows.push(cols.len());
    }
    Ok(BaResult {
        reproj_err,
        w_err,
        jacobian: SparseJacobian {
            nrows: 3 * p,
            ncols: weight_col + p,
            rows,
            cols,
            vals,
        },
    })
}

/// BA's derivative in one gradient mode, its programs built once: the
/// residuals from one run of `baObjective`; the Jacobian from one small
/// Jacobian of `baObservation` per observation, or — on native code, in
/// the modes with a tangent-only program (`Mode::tangent_program`) — from
/// one run of that program's batch over every observation
/// (`Artefact::Batched`). Mode `fwd-rows` batches the Jacobian's rows (an
/// observation's 3 rows of 15), the others their columns (15 columns of 3).
pub struct BaDerivative {
    objective: Rc<Entry>,
    how: How,
}

/// How [`BaDerivative`] computes the observations' Jacobians.
enum How {
    /// One run of the batched derivative and one of batched
    /// `baObservation`; `rows`: the derivative gives rows.
    Batched {
        derivative: Rc<Entry>,
        base: Rc<Entry>,
        rows: bool,
    },
    /// The mode's plan, once per observation.
    PerObservation(Plan),
}

impl BaDerivative {
    /// The programs of `mode` on `engine` for the session of [`BA_SOURCE`].
    pub fn new(
        session: &Session,
        mode: Mode,
        engine: Engine,
        checkpointing: Checkpointing,
    ) -> Result<BaDerivative, Diagnostic> {
        let objective = session.entry("baObjective")?;
        let (entry, wrt) = ("baObservation", "params");
        let k = session.param(entry, wrt)?;
        let how = match (engine, mode.tangent_program(Rc::from(entry), k)) {
            // Batches of Doubles, vectors and matrices run on slices.
            (Engine::Native, Some(t)) => How::Batched {
                derivative: session.get(&t.batched())?,
                base: session.get(&Artefact::entry(entry).batched())?,
                rows: mode == Mode::FwdRows,
            },
            _ => How::PerObservation(Plan::new(session, entry, wrt, mode, engine, checkpointing)?),
        };
        Ok(BaDerivative { objective, how })
    }

    /// `baObjective`'s residuals: `(reproj_err, w_err)`.
    pub fn residuals(
        &self,
        input: &BaInput,
        engine: Engine,
        limits: Limits,
    ) -> Result<(Value, Value), RunError> {
        match self
            .objective
            .run_on(engine, input.objective_args(), limits)?
            .0
        {
            Value::Pair(p) => Ok((p.0.clone(), p.1.clone())),
            other => Err(internal(
                format!("baObjective returned {other}"),
                &self.objective,
            )),
        }
    }

    /// The residuals and the Jacobian in ADBench's layout, with the
    /// evaluator's counts (none on native code).
    pub fn jacobian(
        &self,
        input: &BaInput,
        engine: Engine,
        limits: Limits,
    ) -> Result<(BaResult, Stats), RunError> {
        let mut stats = Stats::default();
        let plan = match &self.how {
            How::PerObservation(plan) => plan,
            How::Batched {
                derivative,
                base,
                rows,
            } => {
                let obs = input.observations_args();
                let flat = |e: &Rc<Entry>| {
                    e.run_flat(engine, &obs, limits)
                        .unwrap_or_else(|| Err(internal("a batch of Doubles".into(), e)))
                };
                let (tangents, values) = (flat(derivative)?, flat(base)?);
                // Per observation: 3 values, and 15 columns of 3 tangents
                // (or 3 rows of 15).
                let (v, t) = (3, 3 * ROW_ENTRIES);
                let r = assemble(input, |i, value, tangent| {
                    value.extend(values.get(v * i..v * (i + 1)).unwrap_or_default());
                    let mine = tangents.get(t * i..t * (i + 1)).unwrap_or_default();
                    if !rows {
                        tangent.extend(mine);
                    } else if mine.len() == t {
                        let column = |j| (0..3).map(move |k| mine[ROW_ENTRIES * k + j]);
                        tangent.extend((0..ROW_ENTRIES).flat_map(column));
                    }
                    Ok::<_, RunError>(())
                })?;
                return Ok((r, stats));
            }
        };
        let r = assemble(input, |i, value, tangents| {
            let c = plan.columns(input.observation_args(i), engine, limits)?;
            stats.steps += c.stats.steps;
            stats.ops += c.stats.ops;
            crate::eval::flatten(&c.value, value);
            for col in &c.columns {
                tangents.extend((0..3).map(|k| col.get(k).copied().unwrap_or(f64::NAN)));
            }
            Ok::<_, RunError>(())
        })?;
        Ok((r, stats))
    }
}

/// An internal error about `e` (a program that returned what it cannot).
fn internal(message: String, e: &Entry) -> RunError {
    RunError::Eval(EvalError::Internal {
        message,
        span: e.span,
    })
}

/// The BA residual functions in F̃ (`examples/adbench/ba.fsm`), embedded so
/// the `adbench` command works from any directory.
pub const BA_SOURCE: &str = include_str!("../../examples/adbench/ba.fsm");
