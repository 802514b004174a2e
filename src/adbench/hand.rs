//! ADBench hand tracking (formats in `shared/data/adbench/README.md`,
//! section "Hand tracking"): the readers of the model directory's three
//! files (`bones.txt`, `vertices.txt`, `triangles.txt`, `:`-separated) and
//! of an instance file, the arguments of the F̃ objectives of
//! `examples/adbench/hand.fsm`, and the dense Jacobian in the golden's
//! layout.
//!
//! An instance file does not say whether it is simple or complicated; the
//! caller says (`complicated`). Reading one mode's file in the other ends
//! in an end-of-file or trailing-data error whose note says so.
//!
//! Invariants: no input makes a reader panic; reading allocates only as
//! tokens arrive; every index read from a file (a parent, a weight's bone,
//! a triangle's vertex, a correspondence) is checked against what it
//! indexes before any F̃ code runs, so the objective never reads out of
//! bounds; the Jacobian's columns are the derivative columns of the entry,
//! in order (see Note [Packed u columns]).
//!
//! Note [Packed u columns]: in complicated mode residual 3 i + j depends on
//! theta and on the barycentric weights u_i of its own correspondence
//! only, so the 3N × 2N u-block of the Jacobian is block-diagonal.
//! ADBench packs it into 2 columns: column k of row 3 i + j holds
//! ∂err_{3i+j}/∂u_{ik}. The entry `handObjectiveComplicatedPacked` takes
//! [s0, s1, theta] and uses u_i + (s0, s1), at s = 0: its derivative along
//! s_k is Σ_i ∂err/∂u_{ik}, which for row 3 i + j is exactly the packed
//! entry (the standard column compression of a block-diagonal Jacobian).
//! So every mode yields the 3N × 28 Jacobian in 28 columns, not 2N + 26.

use crate::eval::Value;
use crate::gradient::Columns;

pub use super::read::DATA_SOURCE;
use super::read::{AdbenchError, Tokens};

/// The number of pose parameters ADBench's hand model takes.
pub const N_THETA: usize = 26;

/// The fewest bones the pose parameters address: the wrist and five
/// fingers of four bones (upstream's `to_pose_params` writes up to bone 20).
pub const MIN_BONES: usize = 21;

/// The bones of a hand model, in file order (parents first).
#[derive(Clone, Debug, PartialEq)]
pub struct Bones {
    pub names: Vec<String>,
    /// -1 for the root; otherwise an earlier bone.
    pub parents: Vec<i64>,
    /// 4 × 4, row-major (16 values) per bone.
    pub base_relatives: Vec<Vec<f64>>,
    pub inverse_base_absolutes: Vec<Vec<f64>>,
}

/// The vertices of a hand model: positions and skinning weights.
#[derive(Clone, Debug, PartialEq)]
pub struct Vertices {
    /// x y z per vertex.
    pub positions: Vec<[f64; 3]>,
    /// One row per vertex, one weight per bone (0 where the file lists none).
    pub weights: Vec<Vec<f64>>,
}

/// A hand model: what `read_bones`, `read_vertices` and `read_triangles`
/// read from a model directory.
#[derive(Clone, Debug, PartialEq)]
pub struct HandModel {
    pub bones: Bones,
    pub vertices: Vertices,
    /// Three vertex indices per triangle.
    pub triangles: Vec<[usize; 3]>,
}

/// One instance: correspondences, measured points, the barycentric
/// weights (complicated mode only) and theta.
#[derive(Clone, Debug, PartialEq)]
pub struct HandInput {
    /// A vertex index (simple) or a triangle index (complicated) per point.
    pub correspondences: Vec<usize>,
    pub points: Vec<[f64; 3]>,
    /// `Some` in complicated mode: (u_i0, u_i1) per point.
    pub us: Option<Vec<[f64; 2]>>,
    pub theta: Vec<f64>,
}

/// Reads `bones.txt`: per bone `name:parent:` then 16 values of the
/// base-relative transform and 16 of the inverse base-absolute transform,
/// both row-major.
pub fn read_bones(text: &str) -> Result<Bones, AdbenchError> {
    let mut t = Tokens::with_colons(text);
    let mut bones = Bones {
        names: Vec::new(),
        parents: Vec::new(),
        base_relatives: Vec::new(),
        inverse_base_absolutes: Vec::new(),
    };
    while !t.at_end() {
        let b = bones.names.len();
        bones
            .names
            .push(t.word(&format!("the name of bone {b}"))?.to_string());
        let (parent, at) = t.integer_at(&format!("the parent of bone {b}"))?;
        if parent != -1 && !(0..b as i64).contains(&parent) {
            return Err(t.bad_size(
                "parent",
                at,
                format!("is neither -1 nor an earlier bone (bone {b}: parents come first)"),
            ));
        }
        bones.parents.push(parent);
        bones.base_relatives.push(t.doubles(16, |j| {
            format!("bone {b}'s base-relative transform, entry {j}")
        })?);
        bones.inverse_base_absolutes.push(t.doubles(16, |j| {
            format!("bone {b}'s inverse base-absolute transform, entry {j}")
        })?);
    }
    if bones.names.len() < MIN_BONES {
        return Err(t.ends_early(format!(
            "bone {} (the pose parameters address {MIN_BONES} bones: the wrist and 5 fingers of 4)",
            bones.names.len()
        )));
    }
    Ok(bones)
}

/// Reads `vertices.txt`: per vertex `x:y:z`, five ignored values, a count
/// `nb`, then `nb` pairs `bone:weight` (a bone listed twice keeps its last
/// weight, as upstream).
pub fn read_vertices(text: &str, n_bones: usize) -> Result<Vertices, AdbenchError> {
    let mut t = Tokens::with_colons(text);
    let mut v = Vertices {
        positions: Vec::new(),
        weights: Vec::new(),
    };
    while !t.at_end() {
        let i = v.positions.len();
        let p = t.doubles(3, |j| format!("coordinate {j} of vertex {i}"))?;
        v.positions.push([p[0], p[1], p[2]]);
        t.doubles(5, |j| format!("ignored value {j} of vertex {i}"))?;
        let (nb, _) = t.size("nb", "the number of bone weights of a vertex")?;
        let mut w = vec![0.0; n_bones];
        for k in 0..nb {
            let bone = t.index_below(
                "bone",
                &format!("the bone of weight {k} of vertex {i}"),
                n_bones,
                "bones",
            )?;
            w[bone] = t.double(|| format!("weight {k} of vertex {i}"))?;
        }
        v.weights.push(w);
    }
    Ok(v)
}

/// Reads `triangles.txt`: per triangle `v0:v1:v2`.
pub fn read_triangles(text: &str, n_vertices: usize) -> Result<Vec<[usize; 3]>, AdbenchError> {
    let mut t = Tokens::with_colons(text);
    let mut out = Vec::new();
    while !t.at_end() {
        let i = out.len();
        let mut tri = [0; 3];
        for (k, v) in tri.iter_mut().enumerate() {
            *v = t.index_below(
                "vertex",
                &format!("vertex {k} of triangle {i}"),
                n_vertices,
                "vertices",
            )?;
        }
        out.push(tri);
    }
    Ok(out)
}

/// Reads an instance file: `N n_theta`, N lines `corr y1 y2 y3`, in
/// complicated mode N lines `u1 u2`, then n_theta values (26).
pub fn read_hand_instance(
    text: &str,
    complicated: bool,
    model: &HandModel,
) -> Result<HandInput, AdbenchError> {
    let mut t = Tokens::new(text);
    let (n, _) = t.size("N", "the number of correspondences N")?;
    let (n_theta, at) = t.size("n_theta", "the number of pose parameters n_theta")?;
    if n_theta != N_THETA {
        return Err(t.bad_size(
            "n_theta",
            at,
            format!("is not {N_THETA}, the pose parameters of the hand model"),
        ));
    }
    let per_point: usize = if complicated { 6 } else { 4 };
    t.needed = n
        .checked_mul(per_point)
        .and_then(|x| x.checked_add(2 + N_THETA));
    if complicated {
        t.eof_note = Some("a simple-mode file has no u lines: leave out --complicated");
    } else {
        t.trailing_note =
            Some("a complicated-mode file has 2 N u values before theta: pass --complicated");
    }
    let (of, bound) = if complicated {
        ("triangles", model.triangles.len())
    } else {
        ("vertices", model.vertices.positions.len())
    };
    let mut correspondences = Vec::new();
    let mut points = Vec::new();
    for i in 0..n {
        correspondences.push(t.index_below(
            "corr",
            &format!("the correspondence of point {i}"),
            bound,
            of,
        )?);
        let y = t.doubles(3, |j| format!("coordinate {j} of point {i}"))?;
        points.push([y[0], y[1], y[2]]);
    }
    let us = if complicated {
        let mut us = Vec::new();
        for i in 0..n {
            let u = t.doubles(2, |k| format!("u_{i}{k}"))?;
            us.push([u[0], u[1]]);
        }
        Some(us)
    } else {
        None
    };
    let theta = t.doubles(N_THETA, |j| format!("theta[{j}]"))?;
    t.finish()?;
    Ok(HandInput {
        correspondences,
        points,
        us,
        theta,
    })
}

fn vector(v: &[f64]) -> Value {
    Value::array(v.iter().map(|&a| Value::Double(a)).collect())
}

fn indices(v: impl IntoIterator<Item = usize>) -> Value {
    // Every index was checked against a Vec's length, so it fits in i64.
    Value::array(v.into_iter().map(|i| Value::Index(i as i64)).collect())
}

/// A row-major 4 × 4 as an array of rows.
fn matrix4(m: &[f64]) -> Value {
    Value::array(m.chunks(4).map(vector).collect())
}

impl HandInput {
    /// The F̃ entry of this instance's mode.
    pub fn entry(&self) -> &'static str {
        if self.us.is_some() {
            "handObjectiveComplicatedPacked"
        } else {
            "handObjective"
        }
    }

    /// The entry's independent variable: theta (26) in simple mode,
    /// [s0, s1, theta] (28) in complicated mode (Note [Packed u columns]).
    pub fn wrt(&self) -> &'static str {
        if self.us.is_some() { "params" } else { "theta" }
    }

    /// The arguments of [`HandInput::entry`], in its parameter order.
    pub fn args(&self, model: &HandModel) -> Vec<Value> {
        let b = &model.bones;
        let v = &model.vertices;
        let rows3 = |m: &[[f64; 3]]| Value::array(m.iter().map(|r| vector(r)).collect());
        let model_args = [
            Value::array(b.parents.iter().map(|&p| Value::Index(p)).collect()),
            Value::array(b.base_relatives.iter().map(|m| matrix4(m)).collect()),
            Value::array(
                b.inverse_base_absolutes
                    .iter()
                    .map(|m| matrix4(m))
                    .collect(),
            ),
            rows3(&v.positions),
            Value::array(v.weights.iter().map(|r| vector(r)).collect()),
        ];
        let correspondences = indices(self.correspondences.iter().copied());
        let points = rows3(&self.points);
        match &self.us {
            None => {
                let mut args = vec![vector(&self.theta)];
                args.extend(model_args);
                args.extend([correspondences, points]);
                args
            }
            Some(us) => {
                let mut params = vec![0.0, 0.0];
                params.extend(&self.theta);
                let mut args = vec![
                    vector(&params),
                    Value::array(us.iter().map(|u| vector(u)).collect()),
                ];
                args.extend(model_args);
                args.push(Value::array(
                    model
                        .triangles
                        .iter()
                        .map(|t| indices(t.iter().copied()))
                        .collect(),
                ));
                args.extend([correspondences, points]);
                args
            }
        }
    }
}

/// The residuals and the dense Jacobian of an instance.
#[derive(Clone, Debug, PartialEq)]
pub struct HandResult {
    /// `err[3 i + j]`.
    pub objective: Vec<f64>,
    pub nrows: usize,
    pub ncols: usize,
    /// Column after column (ADBench's order): entry `c * nrows + r`.
    pub colmajor: Vec<f64>,
}

impl HandResult {
    /// The residuals and Jacobian from the entry's value and derivative
    /// columns (in order: the packed u columns first in complicated mode).
    pub fn from_columns(c: &Columns) -> HandResult {
        let mut objective = Vec::new();
        crate::eval::flatten(&c.value, &mut objective);
        let nrows = objective.len();
        let colmajor = c
            .columns
            .iter()
            .flat_map(|col| (0..nrows).map(|r| col.get(r).copied().unwrap_or(f64::NAN)))
            .collect();
        HandResult {
            objective,
            nrows,
            ncols: c.columns.len(),
            colmajor,
        }
    }

    /// Row r of the Jacobian.
    pub fn row(&self, r: usize) -> Vec<f64> {
        (0..self.ncols)
            .map(|c| self.colmajor[c * self.nrows + r])
            .collect()
    }
}

/// The hand objectives in F̃ (`examples/adbench/hand.fsm`), embedded so the
/// `adbench` command works from any directory.
pub const HAND_SOURCE: &str = include_str!("../../examples/adbench/hand.fsm");
