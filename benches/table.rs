//! The benchmark table of issue 7 (`benches/README.md`): seed 001 §7's
//! micro benchmarks, NNMF, the bundle-adjustment `project` Jacobian and
//! the ADBench GMM gradient, as native code, each mode against the
//! objective on the same engine (J/F) and against a hand-written Rust
//! gradient.
//!
//! Every native time is one `Native::call_slices` (arguments read in
//! place, results left in the call's arena: no `Value` marshalling), the
//! arena's allocation and release included. Modes:
//!
//! - `objective`: the function itself;
//! - `fwd`: forward mode, the tangent-only wrapper
//!   (`Mode::tangent_program`), not optimised;
//! - `fwd-opt`: the same wrapper after the optimiser (the dF̃ result);
//! - `fwd-vec`, `fwd-rows` (BA): vector forward mode, the tangent-only
//!   wrapper (columns, D-Vec-Deriv) and the Jacobian's rows (D-Vec-Rows,
//!   checked against the hand-written columns transposed);
//! - `rev`: source-to-source reverse mode; for a Jacobian one seeded run
//!   per output element (the rows copied into one buffer);
//! - `hand`/`hand-objective`: plain Rust (`hand` module below).
//!
//! Before timing, each fsmooth result is checked against the hand-written
//! one where there is one (`check`).
//!
//! Besides criterion's timings, `main` measures once per program and mode
//! the compile time (parse → native code, the optimiser included for
//! `fwd-opt`) and the bytes of the call's arena (`Outputs::arena_bytes`,
//! the peak of the call's own memory), and writes them to
//! `target/bench-table-extra.json` (appended) for `benches/table.py`.
//!
//! Run with `cargo bench --bench table -- --warm-up-time 1
//! --measurement-time 3`, then `python3 benches/table.py`;
//! `FSMOOTH_TABLE=micro-gradients,micro-jacobians,nnmf,ba,gmm` picks groups.

mod common;

use std::cell::RefCell;
use std::hint::black_box;
use std::rc::Rc;
use std::time::{Duration, Instant};

use common::numbers;
use criterion::{BenchmarkId, Criterion};
use fsmooth::adbench::gmm::{GMM_SOURCE, read_gmm};
use fsmooth::codegen::{Arg, Native, Out};
use fsmooth::gradient::{How, Mode, Plan};
use fsmooth::pipeline::{Checkpointing, Engine, Entry, Session};

const DOT: &str = "let f = fun (v1: Vector) (v2: Vector) -> vectorDot v1 v2\n";
const VMAX: &str = "let f = fun (v: Vector) -> vectorMax v\n";
const VADD: &str = "let f = fun (v1: Vector) (v2: Vector) -> vectorAdd v1 v2\n";
const SMUL: &str = "let f = fun (s: Double) (v: Vector) -> vectorSMul v s\n";
const NNMF: &str = include_str!("../examples/nnmf.fsm");
/// `project` over N points, its 2N outputs flattened into one vector (so
/// that the Jacobian is a matrix, which `call_slices` returns as rows).
const BA: &str = concat!(
    include_str!("../examples/ba_project.fsm"),
    "\nlet projectAll = fun (cam: Vector) (xs: Matrix) ->\n",
    "  let ps = build (length xs) (fun i -> project cam xs[i])\n",
    "  build (2 * length xs) (fun k -> ps[k / 2][k - 2 * (k / 2)])\n"
);

/// What `main` records besides criterion's timings, as JSON lines.
struct Extra {
    lines: RefCell<Vec<String>>,
}

impl Extra {
    fn compile(&self, program: &str, mode: &str, t: Duration) {
        self.lines.borrow_mut().push(format!(
            "{{\"kind\": \"compile\", \"program\": \"{program}\", \"mode\": \"{mode}\", \"ms\": {:.3}}}",
            t.as_secs_f64() * 1e3
        ));
    }
    fn fastest(&self, program: &str, mode: &str, n: usize, t: Duration) {
        self.lines.borrow_mut().push(format!(
            "{{\"kind\": \"fastest\", \"program\": \"{program}\", \"mode\": \"{mode}\", \"n\": {n}, \"ns\": {:.1}}}",
            t.as_secs_f64() * 1e9
        ));
    }
    fn memory(&self, program: &str, mode: &str, n: usize, bytes: usize) {
        self.lines.borrow_mut().push(format!(
            "{{\"kind\": \"memory\", \"program\": \"{program}\", \"mode\": \"{mode}\", \"n\": {n}, \"arena_bytes\": {bytes}}}"
        ));
    }
}

impl Extra {
    /// Appends the records so far to `target/bench-table-extra.json`
    /// (after each group, so that an interrupted run keeps them, and runs
    /// of some groups add to earlier ones: `table.py` keeps the last
    /// record of each key).
    fn flush(&self) {
        let out =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-table-extra.json");
        let lines = std::mem::take(&mut *self.lines.borrow_mut());
        let text = lines.join("\n") + "\n";
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&out)
            .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()));
        if let Err(e) = written {
            eprintln!("cannot write {}: {e}", out.display());
        }
    }
}

/// A program compiled in every mode.
struct Modes {
    objective: Native,
    fwd: Native,
    fwd_opt: Option<Native>,
    /// Vector forward mode (spec/ad-forward.md §4.6), for the Jacobians
    /// with few directions.
    fwd_vec: Option<Native>,
    /// Its Jacobian as rows (D-Vec-Rows), with `fwd_vec`.
    fwd_rows: Option<Native>,
    rev: Native,
    /// The reverse program takes a cotangent (a Vector-valued function).
    seeded: bool,
}

/// The tangent-only program of forward mode `mode` (`Mode::tangent_program`)
/// for `f` of `src` w.r.t. `wrt`, from a session of its own (so that its
/// compile time counts parsing).
fn tangent_program(src: &str, f: &str, wrt: &str, mode: Mode) -> Rc<Entry> {
    let session = Session::load(src).expect("loads");
    let k = session.param(f, wrt).expect("parameter");
    let tangents = mode
        .tangent_program(Rc::from(f), k)
        .expect("a forward mode");
    session
        .get(&tangents)
        .unwrap_or_else(|d| panic!("{}: {d}", mode.name()))
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let t = f();
    (t, start.elapsed())
}

/// Compiles `f` of `src` in every mode (w.r.t. `wrt`), recording the
/// compile times under `program`; `fwd-opt` only when `opt`.
fn modes(extra: &Extra, program: &str, src: &str, f: &str, wrt: &str, opt: bool) -> Modes {
    modes_with(extra, program, src, f, wrt, opt, false)
}

/// [`modes`], and `fwd-vec` and `fwd-rows` when `vector`.
fn modes_with(
    extra: &Extra,
    program: &str,
    src: &str,
    f: &str,
    wrt: &str,
    opt: bool,
    vector: bool,
) -> Modes {
    let (objective, t) = timed(|| {
        let e = Session::load(src).expect("loads").entry(f).expect("entry");
        Native::compile(&e.normal().expect("normalises")).expect("objective compiles")
    });
    extra.compile(program, "objective", t);
    let (fwd, t) = timed(|| {
        Native::compile(
            &tangent_program(src, f, wrt, Mode::Fwd)
                .normal()
                .expect("normalises"),
        )
        .expect("fwd compiles")
    });
    extra.compile(program, "fwd", t);
    let fwd_opt = opt.then(|| {
        let (n, t) = timed(|| {
            Native::compile(
                &tangent_program(src, f, wrt, Mode::FwdOpt)
                    .normal()
                    .expect("normalises"),
            )
            .expect("fwd-opt compiles")
        });
        extra.compile(program, "fwd-opt", t);
        n
    });
    let fwd_vec = vector.then(|| {
        let (n, t) = timed(|| {
            Native::compile(
                &tangent_program(src, f, wrt, Mode::FwdVec)
                    .normal()
                    .expect("normalises"),
            )
            .expect("fwd-vec compiles")
        });
        extra.compile(program, "fwd-vec", t);
        n
    });
    let fwd_rows = vector.then(|| {
        let (n, t) = timed(|| {
            Native::compile(
                &tangent_program(src, f, wrt, Mode::FwdRows)
                    .normal()
                    .expect("normalises"),
            )
            .expect("fwd-rows compiles")
        });
        extra.compile(program, "fwd-rows", t);
        n
    });
    let ((rev, seeded), t) = timed(|| {
        let session = Session::load(src).expect("loads");
        let plan = Plan::new(
            &session,
            f,
            wrt,
            Mode::Rev,
            Engine::Native,
            Checkpointing::default(),
        )
        .expect("rev");
        let How::Reverse { rev, seeded } = &plan.how else {
            unreachable!("`rev` is reverse mode")
        };
        (
            Native::compile(&rev.normal().expect("normalises")).expect("rev compiles"),
            *seeded,
        )
    });
    extra.compile(program, "rev", t);
    Modes {
        objective,
        fwd,
        fwd_opt,
        fwd_vec,
        fwd_rows,
        rev,
        seeded,
    }
}

fn vector(n: usize, seed: u64) -> Vec<f64> {
    numbers(seed).take(n).collect()
}

/// The doubles of leaf `k` of a result (a matrix row by row).
fn leaf(o: &fsmooth::codegen::Outputs, k: usize) -> Vec<f64> {
    match o.get(k) {
        Some(Out::F64(x)) => vec![x],
        Some(Out::F64s(xs)) => xs.to_vec(),
        Some(Out::F64Rows(rows)) => rows.iter().flatten().copied().collect(),
        other => panic!("leaf {k} is {other:?}"),
    }
}

/// The table times correct code: the objective's result (leaf 0) and
/// each gradient (leaf 0 of a forward-mode wrapper, leaf 1 of a reverse
/// program) equal the hand-written ones, ρ ≤ 1e-9.
fn check(what: &str, mode: &str, native: &Native, args: &[Arg], f: &[f64], j: &[f64]) {
    let o = native.call_slices(args).expect("runs");
    let (got, want) = match mode {
        "objective" => (leaf(&o, 0), f),
        "rev" => (leaf(&o, 1), j),
        _ => (leaf(&o, 0), j),
    };
    let rho = |x: f64, y: f64| (x - y).abs() / (1.0f64).max(x.abs() + y.abs());
    assert!(
        got.len() == want.len() && got.iter().zip(want).all(|(x, y)| rho(*x, *y) <= 1e-9),
        "{what} {mode}: fsmooth and the hand-written Rust disagree"
    );
}

/// [`check`] for a Jacobian returned as rows of `directions` (mode
/// `fwd-rows`) against the hand-written one's columns.
fn check_rows(what: &str, native: &Native, args: &[Arg], j: &[f64], directions: usize) {
    let o = native.call_slices(args).expect("runs");
    let rows = leaf(&o, 0);
    let n = rows.len() / directions.max(1);
    let columns: Vec<f64> = (0..directions)
        .flat_map(|k| (0..n).map(move |i| (i, k)))
        .map(|(i, k)| rows[i * directions + k])
        .collect();
    let rho = |x: f64, y: f64| (x - y).abs() / (1.0f64).max(x.abs() + y.abs());
    assert!(
        columns.len() == j.len() && columns.iter().zip(j).all(|(x, y)| rho(*x, *y) <= 1e-9),
        "{what} fwd-rows: fsmooth and the hand-written Rust disagree"
    );
}

/// One call; the arena's bytes.
fn arena(n: &Native, args: &[Arg]) -> usize {
    n.call_slices(args).expect("runs").arena_bytes()
}

/// The Jacobian by reverse mode: one run of the seeded program per output
/// element, row i of the result copied into `jac[i·cols ..]`. Returns the
/// largest arena of a run.
fn rev_jacobian(rev: &Native, args: &[Arg], outputs: usize, jac: &mut [f64]) -> usize {
    let mut seed = vec![0.0; outputs];
    let cols = jac.len() / outputs.max(1);
    let mut bytes = 0;
    for i in 0..outputs {
        seed[i] = 1.0;
        if i > 0 {
            seed[i - 1] = 0.0;
        }
        let mut a = args.to_vec();
        a.push(Arg::F64s(&seed));
        let o = rev.call_slices(&a).expect("rev runs");
        match o.get(1) {
            Some(Out::F64s(g)) => jac[i * cols..(i + 1) * cols].copy_from_slice(g),
            Some(Out::F64(g)) => jac[i] = g,
            other => panic!("rev returned {other:?}"),
        }
        bytes = bytes.max(o.arena_bytes());
    }
    bytes
}

/// Plain Rust references.
mod hand {
    pub fn dot(u: &[f64], v: &[f64]) -> f64 {
        u.iter().zip(v).map(|(a, b)| a * b).sum()
    }
    /// ∇ᵤ(u·v) = v.
    pub fn dot_grad(_u: &[f64], v: &[f64]) -> Vec<f64> {
        v.to_vec()
    }
    /// The prelude's `vectorMax`: the first maximum.
    pub fn max(v: &[f64]) -> f64 {
        v[1..].iter().fold(v[0], |m, &x| if x > m { x } else { m })
    }
    /// One-hot at the prelude's maximum.
    pub fn max_grad(v: &[f64]) -> Vec<f64> {
        let mut k = 0;
        for (i, &x) in v.iter().enumerate() {
            if x > v[k] {
                k = i;
            }
        }
        let mut g = vec![0.0; v.len()];
        g[k] = 1.0;
        g
    }
    pub fn add(u: &[f64], v: &[f64]) -> Vec<f64> {
        u.iter().zip(v).map(|(a, b)| a + b).collect()
    }
    /// ∂(u + v)/∂u = I, row-major.
    pub fn add_jacobian(u: &[f64]) -> Vec<f64> {
        let n = u.len();
        let mut j = vec![0.0; n * n];
        for i in 0..n {
            j[i * n + i] = 1.0;
        }
        j
    }
    pub fn smul(s: f64, v: &[f64]) -> Vec<f64> {
        v.iter().map(|x| x * s).collect()
    }
    /// ∂(s v)/∂s = v.
    pub fn smul_jacobian(v: &[f64]) -> Vec<f64> {
        v.to_vec()
    }
    /// Σᵢⱼ log(uᵢvⱼ) + Aᵢⱼ/(uᵢvⱼ).
    pub fn nnmf(u: &[f64], v: &[f64], a: &[Vec<f64>]) -> f64 {
        let mut s = 0.0;
        for (i, ui) in u.iter().enumerate() {
            let mut r = 0.0;
            for (j, vj) in v.iter().enumerate() {
                let w = ui * vj;
                r += w.ln() + a[i][j] / w;
            }
            s += r;
        }
        s
    }
    /// ∂D/∂vⱼ = Σᵢ uᵢ (1/(uᵢvⱼ) − Aᵢⱼ/(uᵢvⱼ)²).
    pub fn nnmf_grad(u: &[f64], v: &[f64], a: &[Vec<f64>]) -> Vec<f64> {
        let mut g = vec![0.0; v.len()];
        for (i, ui) in u.iter().enumerate() {
            for (j, vj) in v.iter().enumerate() {
                let w = ui * vj;
                g[j] += ui * (1.0 / w - a[i][j] / (w * w));
            }
        }
        g
    }

    /// Bundle adjustment's `project` (examples/ba_project.fsm), generic
    /// over the number type: `f64` for the objective, [`Dual`] for the
    /// Jacobian by forward mode written out by hand.
    pub trait Num:
        Copy
        + std::ops::Add<Output = Self>
        + std::ops::Sub<Output = Self>
        + std::ops::Mul<Output = Self>
        + std::ops::Div<Output = Self>
    {
        fn c(x: f64) -> Self;
        fn sqrt(self) -> Self;
        fn sin(self) -> Self;
        fn cos(self) -> Self;
    }

    impl Num for f64 {
        fn c(x: f64) -> f64 {
            x
        }
        fn sqrt(self) -> f64 {
            f64::sqrt(self)
        }
        fn sin(self) -> f64 {
            f64::sin(self)
        }
        fn cos(self) -> f64 {
            f64::cos(self)
        }
    }

    /// A value and its 11 partial derivatives with respect to the camera.
    #[derive(Clone, Copy)]
    pub struct Dual {
        v: f64,
        d: [f64; 11],
    }

    impl Dual {
        fn var(v: f64, k: usize) -> Dual {
            let mut d = [0.0; 11];
            d[k] = 1.0;
            Dual { v, d }
        }
        /// Value `v`, tangent `a·self + b·o`.
        fn zip(self, o: Dual, v: f64, a: f64, b: f64) -> Dual {
            let mut d = [0.0; 11];
            for (k, x) in d.iter_mut().enumerate() {
                *x = a * self.d[k] + b * o.d[k];
            }
            Dual { v, d }
        }
        fn scale(self, v: f64, a: f64) -> Dual {
            self.zip(self, v, a, 0.0)
        }
    }

    impl std::ops::Add for Dual {
        type Output = Dual;
        fn add(self, o: Dual) -> Dual {
            self.zip(o, self.v + o.v, 1.0, 1.0)
        }
    }
    impl std::ops::Sub for Dual {
        type Output = Dual;
        fn sub(self, o: Dual) -> Dual {
            self.zip(o, self.v - o.v, 1.0, -1.0)
        }
    }
    impl std::ops::Mul for Dual {
        type Output = Dual;
        fn mul(self, o: Dual) -> Dual {
            self.zip(o, self.v * o.v, o.v, self.v)
        }
    }
    impl std::ops::Div for Dual {
        type Output = Dual;
        fn div(self, o: Dual) -> Dual {
            let v = self.v / o.v;
            self.zip(o, v, 1.0 / o.v, -v / o.v)
        }
    }
    impl Num for Dual {
        fn c(x: f64) -> Dual {
            Dual { v: x, d: [0.0; 11] }
        }
        fn sqrt(self) -> Dual {
            let s = self.v.sqrt();
            self.scale(s, 0.5 / s)
        }
        fn sin(self) -> Dual {
            self.scale(self.v.sin(), self.v.cos())
        }
        fn cos(self) -> Dual {
            self.scale(self.v.cos(), -self.v.sin())
        }
    }

    /// `project cam x`: Rodrigues' rotation, perspective division, radial
    /// distortion, focal length and principal point.
    pub fn project<T: Num>(cam: &[T; 11], x: &[f64]) -> [T; 2] {
        let y = [
            T::c(x[0]) - cam[3],
            T::c(x[1]) - cam[4],
            T::c(x[2]) - cam[5],
        ];
        let rot = [cam[0], cam[1], cam[2]];
        let theta = (rot[0] * rot[0] + rot[1] * rot[1] + rot[2] * rot[2]).sqrt();
        let inv = T::c(1.0) / theta;
        let w = [rot[0] * inv, rot[1] * inv, rot[2] * inv];
        let cross = [
            w[1] * y[2] - w[2] * y[1],
            w[2] * y[0] - w[0] * y[2],
            w[0] * y[1] - w[1] * y[0],
        ];
        let (c, s) = (theta.cos(), theta.sin());
        let tmp = (w[0] * y[0] + w[1] * y[1] + w[2] * y[2]) * (T::c(1.0) - c);
        let xc: Vec<T> = (0..3)
            .map(|k| y[k] * c + cross[k] * s + w[k] * tmp)
            .collect();
        let f = T::c(1.0) / xc[2];
        let p = [xc[0] * f, xc[1] * f];
        let rsq = p[0] * p[0] + p[1] * p[1];
        let l = T::c(1.0) + cam[9] * rsq + cam[10] * rsq * rsq;
        [cam[7] + p[0] * l * cam[6], cam[8] + p[1] * l * cam[6]]
    }

    /// The objective: `project` of every point, 2N numbers.
    pub fn project_all(cam: &[f64], xs: &[Vec<f64>]) -> Vec<f64> {
        let cam: [f64; 11] = cam.try_into().expect("11 camera parameters");
        xs.iter().flat_map(|x| project(&cam, x)).collect()
    }

    /// The 2N×11 Jacobian by forward mode with 11 tangents at once, laid
    /// out as fsmooth's forward-mode wrapper returns it: one row of 2N
    /// per camera parameter.
    pub fn project_all_jacobian(cam: &[f64], xs: &[Vec<f64>]) -> Vec<f64> {
        let cam: [Dual; 11] = std::array::from_fn(|k| Dual::var(cam[k], k));
        let rows = 2 * xs.len();
        let mut j = vec![0.0; 11 * rows];
        for (i, x) in xs.iter().enumerate() {
            for (r, out) in project(&cam, x).iter().enumerate() {
                for k in 0..11 {
                    j[k * rows + 2 * i + r] = out.d[k];
                }
            }
        }
        j
    }

    /// ADBench's GMM (shared/data/adbench/README.md, "GMM") on the flat
    /// θ = [alphas (k), means (k×d), icf (k×T)], T = d(d+1)/2, as
    /// examples/adbench/gmm.fsm lays it out: row c of icf holds the d logs
    /// of Q_c's diagonal, then the strictly lower entries column by column.
    pub struct Gmm<'a> {
        pub d: usize,
        pub k: usize,
        pub t: usize,
        pub alphas: &'a [f64],
        pub means: &'a [f64],
        pub icf: &'a [f64],
    }

    impl<'a> Gmm<'a> {
        pub fn new(theta: &'a [f64], d: usize) -> Gmm<'a> {
            let t = d * (d + 1) / 2;
            let k = theta.len() / (1 + d + t);
            let (alphas, rest) = theta.split_at(k);
            let (means, icf) = rest.split_at(k * d);
            Gmm {
                d,
                k,
                t,
                alphas,
                means,
                icf,
            }
        }

        /// The offset in an icf row of Q[r][s], s < r.
        fn lower(&self, r: usize, s: usize) -> usize {
            self.d + s * self.d - s * (s + 1) / 2 + (r - s - 1)
        }

        /// exp of each diagonal log, component-major (computed once).
        fn diagonals(&self) -> Vec<f64> {
            (0..self.k)
                .flat_map(|c| {
                    self.icf[c * self.t..c * self.t + self.d]
                        .iter()
                        .map(|q| q.exp())
                })
                .collect()
        }

        /// Σ_j q_c,j per component.
        fn sum_qs(&self) -> Vec<f64> {
            (0..self.k)
                .map(|c| self.icf[c * self.t..c * self.t + self.d].iter().sum())
                .collect()
        }

        /// For point `x` and component `c`: x − μ_c into `xc`, Q_c (x − μ_c)
        /// into `y`; returns α_c + Σ_j q_c,j − ½‖y‖².
        fn main_term(
            &self,
            c: usize,
            x: &[f64],
            qd: &[f64],
            sq: &[f64],
            xc: &mut [f64],
            y: &mut [f64],
        ) -> f64 {
            let (d, q) = (self.d, &self.icf[c * self.t..(c + 1) * self.t]);
            for s in 0..d {
                xc[s] = x[s] - self.means[c * d + s];
            }
            let mut norm = 0.0;
            for r in 0..d {
                let mut v = qd[c * d + r] * xc[r];
                for s in 0..r {
                    v += q[self.lower(r, s)] * xc[s];
                }
                y[r] = v;
                norm += v * v;
            }
            self.alphas[c] + sq[c] - 0.5 * norm
        }

        /// Everything but the data term: −n logsumexp(α) + the Wishart
        /// prior − k C − (n d / 2) log(2π), with ADBench's π literal.
        fn rest(&self, n: usize, gamma: f64, m: i64) -> f64 {
            #[allow(clippy::approx_constant, reason = "ADBench's literal PI (defs.h)")]
            let pi = 3.14159265359f64;
            let (d, k) = (self.d, self.k);
            let mut prior = 0.0;
            let sq = self.sum_qs();
            for (c, sq_c) in sq.iter().enumerate() {
                let q = &self.icf[c * self.t..(c + 1) * self.t];
                let frob: f64 = q[..d].iter().map(|v| (2.0 * v).exp()).sum::<f64>()
                    + q[d..].iter().map(|v| v * v).sum::<f64>();
                prior += 0.5 * gamma * gamma * frob - m as f64 * sq_c;
            }
            let big_n = d as i64 + m + 1;
            let lgamma_d = 0.25 * (d * (d - 1)) as f64 * pi.ln()
                + (0..d)
                    .map(|j| lgamma(0.5 * (big_n - j as i64) as f64))
                    .sum::<f64>();
            let wishart = (big_n * d as i64) as f64 * (gamma.ln() - 0.5 * 2f64.ln()) - lgamma_d;
            -((n * d) as f64) * 0.5 * (2.0 * pi).ln() - n as f64 * logsumexp(self.alphas) + prior
                - k as f64 * wishart
        }
    }

    fn lgamma(x: f64) -> f64 {
        unsafe extern "C" {
            safe fn lgamma(x: f64) -> f64;
        }
        lgamma(x)
    }

    fn logsumexp(v: &[f64]) -> f64 {
        let mx = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        mx + v.iter().map(|x| (x - mx).exp()).sum::<f64>().ln()
    }

    pub fn gmm(theta: &[f64], x: &[Vec<f64>], gamma: f64, m: i64) -> f64 {
        let g = Gmm::new(theta, x[0].len());
        let (qd, sq) = (g.diagonals(), g.sum_qs());
        let (mut xc, mut y, mut main) = (vec![0.0; g.d], vec![0.0; g.d], vec![0.0; g.k]);
        let mut data = 0.0;
        for xi in x {
            for (c, mc) in main.iter_mut().enumerate() {
                *mc = g.main_term(c, xi, &qd, &sq, &mut xc, &mut y);
            }
            data += logsumexp(&main);
        }
        data + g.rest(x.len(), gamma, m)
    }

    /// ∇θ of [`gmm`], reverse mode written out: per point, the softmax
    /// weights w_c of the main terms are their adjoints; ȳ = −w_c y flows
    /// back through y = Q_c (x − μ_c) into Q_c's entries (the diagonal's
    /// through exp) and into μ_c; then logsumexp(α) and the prior.
    pub fn gmm_grad(theta: &[f64], x: &[Vec<f64>], gamma: f64, m: i64) -> Vec<f64> {
        let g = Gmm::new(theta, x[0].len());
        let (d, k, t) = (g.d, g.k, g.t);
        let (qd, sq) = (g.diagonals(), g.sum_qs());
        let mut grad = vec![0.0; theta.len()];
        let (ga, rest) = grad.split_at_mut(k);
        let (gm, gq) = rest.split_at_mut(k * d);
        let (mut xcs, mut ys, mut main) = (vec![0.0; k * d], vec![0.0; k * d], vec![0.0; k]);
        let mut dxc = vec![0.0; d];
        for xi in x {
            for c in 0..k {
                let (xc, y) = (&mut xcs[c * d..(c + 1) * d], &mut ys[c * d..(c + 1) * d]);
                main[c] = g.main_term(c, xi, &qd, &sq, xc, y);
            }
            let lse = logsumexp(&main);
            for c in 0..k {
                let w = (main[c] - lse).exp();
                let (xc, y) = (&xcs[c * d..(c + 1) * d], &ys[c * d..(c + 1) * d]);
                let q = &g.icf[c * t..(c + 1) * t];
                let gqc = &mut gq[c * t..(c + 1) * t];
                ga[c] += w;
                dxc.iter_mut().for_each(|v| *v = 0.0);
                for r in 0..d {
                    gqc[r] += w;
                    let dy = -w * y[r];
                    gqc[r] += dy * xc[r] * qd[c * d + r];
                    dxc[r] += dy * qd[c * d + r];
                    for s in 0..r {
                        let l = g.lower(r, s);
                        gqc[l] += dy * xc[s];
                        dxc[s] += dy * q[l];
                    }
                }
                for s in 0..d {
                    gm[c * d + s] -= dxc[s];
                }
            }
        }
        let lse = logsumexp(g.alphas);
        for c in 0..k {
            ga[c] -= x.len() as f64 * (g.alphas[c] - lse).exp();
            let q = &g.icf[c * t..(c + 1) * t];
            for j in 0..d {
                gq[c * t + j] += gamma * gamma * (2.0 * q[j]).exp() - m as f64;
            }
            for j in d..t {
                gq[c * t + j] += gamma * gamma * q[j];
            }
        }
        grad
    }
}

/// Benchmarks one native call of `native` on `args` under criterion, and
/// first records the fastest of many single calls (at least 30 over at
/// least half a second, at most [`SINGLE_CALLS`] or two seconds of them)
/// for the JAX comparison: `benches/jax_compare.py` reports the minimum
/// over single calls of a jitted function, so fsmooth's side is the same
/// statistic rather than the fastest of criterion's samples, each of
/// which averages a batch of calls (`table.py` takes the lesser of the
/// two: a batch's mean is never below its fastest call).
fn bench_native(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    extra: &Extra,
    (program, mode, n): (&str, &str, usize),
    native: &Native,
    args: &[Arg],
) {
    let started = Instant::now();
    let mut best = Duration::MAX;
    for k in 0..SINGLE_CALLS {
        let spent = started.elapsed();
        if (k >= 30 && spent > Duration::from_millis(500))
            || (k >= 3 && spent > Duration::from_secs(2))
        {
            break;
        }
        let t = Instant::now();
        // The release of the call's arena included, as in criterion's loop.
        drop(black_box(native.call_slices(args).expect("runs")));
        best = best.min(t.elapsed());
    }
    extra.fastest(program, mode, n, best);
    g.bench_with_input(BenchmarkId::new(mode, n), args, |b, a| {
        b.iter(|| native.call_slices(a).expect("runs"))
    });
}

/// The most single calls [`bench_native`] times.
const SINGLE_CALLS: usize = 1000;

fn configure<'c>(
    c: &'c mut Criterion,
    name: &str,
) -> criterion::BenchmarkGroup<'c, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group(name);
    g.sample_size(10);
    g
}

/// dot and vector max: gradients of Vector → Double functions.
fn micro_gradients(c: &mut Criterion, extra: &Extra) {
    let dot = modes(extra, "dot", DOT, "f", "v1", true);
    let vmax = modes(extra, "vmax", VMAX, "f", "v", true);
    for (name, m) in [("dot", &dot), ("vmax", &vmax)] {
        let mut g = configure(c, name);
        for n in [10, 100, 1_000, 10_000, 100_000, 1_000_000] {
            let (u, v) = (vector(n, 1), vector(n, 2));
            let args: Vec<Arg> = if name == "dot" {
                vec![Arg::F64s(&u), Arg::F64s(&v)]
            } else {
                vec![Arg::F64s(&u)]
            };
            let fo = m.fwd_opt.as_ref().expect("fwd-opt");
            let mut natives = vec![
                ("objective", &m.objective),
                ("fwd-opt", fo),
                ("rev", &m.rev),
            ];
            // Unoptimised forward mode is O(n²) here (one one-hot tangent
            // vector per element): 11 s per call at n = 10⁴.
            if n <= 1_000 {
                natives.push(("fwd", &m.fwd));
            }
            let (f, j) = if name == "dot" {
                (vec![hand::dot(&u, &v)], hand::dot_grad(&u, &v))
            } else {
                (vec![hand::max(&u)], hand::max_grad(&u))
            };
            for (mode, native) in natives {
                check(name, mode, native, &args, &f, &j);
                extra.memory(name, mode, n, arena(native, &args));
                bench_native(&mut g, extra, (name, mode, n), native, &args);
            }
            if name == "dot" {
                g.bench_function(BenchmarkId::new("hand-objective", n), |b| {
                    b.iter(|| hand::dot(black_box(&u), black_box(&v)))
                });
                g.bench_function(BenchmarkId::new("hand", n), |b| {
                    b.iter(|| hand::dot_grad(black_box(&u), black_box(&v)))
                });
            } else {
                g.bench_function(BenchmarkId::new("hand-objective", n), |b| {
                    b.iter(|| hand::max(black_box(&u)))
                });
                g.bench_function(BenchmarkId::new("hand", n), |b| {
                    b.iter(|| hand::max_grad(black_box(&u)))
                });
            }
        }
        g.finish();
    }
}

/// Vector addition (∂/∂v1, n×n) and scalar–vector multiplication (∂/∂s,
/// n×1): Jacobians of Vector-valued functions.
fn micro_jacobians(c: &mut Criterion, extra: &Extra) {
    let vadd = modes(extra, "vadd", VADD, "f", "v1", true);
    let mut g = configure(c, "vadd");
    // The Jacobian is n×n doubles: 8 MB at n = 10³, 800 MB at 10⁴.
    for n in [10, 100, 1_000] {
        let (u, v) = (vector(n, 1), vector(n, 2));
        let args = vec![Arg::F64s(&u), Arg::F64s(&v)];
        let fo = vadd.fwd_opt.as_ref().expect("fwd-opt");
        for (mode, native) in [
            ("objective", &vadd.objective),
            ("fwd", &vadd.fwd),
            ("fwd-opt", fo),
        ] {
            check(
                "vadd",
                mode,
                native,
                &args,
                &hand::add(&u, &v),
                &hand::add_jacobian(&u),
            );
            extra.memory("vadd", mode, n, arena(native, &args));
            bench_native(&mut g, extra, ("vadd", mode, n), native, &args);
        }
        assert!(vadd.seeded);
        let mut jac = vec![0.0; n * n];
        extra.memory(
            "vadd",
            "rev",
            n,
            rev_jacobian(&vadd.rev, &args, n, &mut jac),
        );
        g.bench_function(BenchmarkId::new("rev", n), |b| {
            b.iter(|| rev_jacobian(&vadd.rev, &args, n, &mut jac))
        });
        g.bench_function(BenchmarkId::new("hand-objective", n), |b| {
            b.iter(|| hand::add(black_box(&u), black_box(&v)))
        });
        g.bench_function(BenchmarkId::new("hand", n), |b| {
            b.iter(|| hand::add_jacobian(black_box(&u)))
        });
    }
    g.finish();

    let smul = modes(extra, "smul", SMUL, "f", "s", true);
    let mut g = configure(c, "smul");
    for n in [10, 100, 1_000, 10_000, 100_000, 1_000_000] {
        let v = vector(n, 2);
        let args = vec![Arg::F64(0.75), Arg::F64s(&v)];
        let fo = smul.fwd_opt.as_ref().expect("fwd-opt");
        for (mode, native) in [
            ("objective", &smul.objective),
            ("fwd", &smul.fwd),
            ("fwd-opt", fo),
        ] {
            check(
                "smul",
                mode,
                native,
                &args,
                &hand::smul(0.75, &v),
                &hand::smul_jacobian(&v),
            );
            extra.memory("smul", mode, n, arena(native, &args));
            bench_native(&mut g, extra, ("smul", mode, n), native, &args);
        }
        // n reverse runs of O(n) each.
        if n <= 1_000 {
            let mut jac = vec![0.0; n];
            extra.memory(
                "smul",
                "rev",
                n,
                rev_jacobian(&smul.rev, &args, n, &mut jac),
            );
            g.bench_function(BenchmarkId::new("rev", n), |b| {
                b.iter(|| rev_jacobian(&smul.rev, &args, n, &mut jac))
            });
        }
        g.bench_function(BenchmarkId::new("hand-objective", n), |b| {
            b.iter(|| hand::smul(black_box(0.75), black_box(&v)))
        });
        g.bench_function(BenchmarkId::new("hand", n), |b| {
            b.iter(|| hand::smul_jacobian(black_box(&v)))
        });
    }
    g.finish();
}

/// NNMF: ∂D/∂v for an m×n matrix A (m = n).
fn nnmf(c: &mut Criterion, extra: &Extra) {
    let m = modes(extra, "nnmf", NNMF, "nnmf", "v", true);
    let mut g = configure(c, "nnmf");
    for n in [10, 100, 1_000] {
        // Positive factors and data, as in NNMF.
        let u: Vec<f64> = numbers(1).take(n).map(|x| 1.5 + x).collect();
        let v: Vec<f64> = numbers(2).take(n).map(|x| 1.5 + x).collect();
        let a: Vec<Vec<f64>> = (0..n)
            .map(|i| numbers(100 + i as u64).take(n).map(|x| 1.5 + x).collect())
            .collect();
        let rows: Vec<&[f64]> = a.iter().map(|r| &r[..]).collect();
        let args = vec![Arg::F64s(&u), Arg::F64s(&v), Arg::F64Rows(&rows)];
        let fo = m.fwd_opt.as_ref().expect("fwd-opt");
        let mut natives = vec![
            ("objective", &m.objective),
            ("rev", &m.rev),
            ("fwd-opt", fo),
        ];
        // Plain forward mode is O(n³) here (one pass per element of v):
        // 25 ms at n = 10², about 25 s per call at 10³. The optimised one
        // is the paper's update rule, one pass over A: O(n²).
        if n <= 100 {
            natives.push(("fwd", &m.fwd));
        }
        for (mode, native) in natives {
            check(
                "nnmf",
                mode,
                native,
                &args,
                &[hand::nnmf(&u, &v, &a)],
                &hand::nnmf_grad(&u, &v, &a),
            );
            extra.memory("nnmf", mode, n, arena(native, &args));
            bench_native(&mut g, extra, ("nnmf", mode, n), native, &args);
        }
        g.bench_function(BenchmarkId::new("hand-objective", n), |b| {
            b.iter(|| hand::nnmf(black_box(&u), black_box(&v), black_box(&a)))
        });
        g.bench_function(BenchmarkId::new("hand", n), |b| {
            b.iter(|| hand::nnmf_grad(black_box(&u), black_box(&v), black_box(&a)))
        });
    }
    g.finish();
}

/// Bundle adjustment: the 2N×11 Jacobian of `project` over N points with
/// respect to the camera.
fn ba(c: &mut Criterion, extra: &Extra) {
    let m = modes_with(extra, "ba", BA, "projectAll", "cam", true, true);
    let cam = [
        0.1, -0.2, 0.3, 0.5, -0.4, -3.0, 2.0, 0.25, -0.125, 0.01, -0.002,
    ];
    let mut g = configure(c, "ba");
    for n in [10, 1_000, 100_000] {
        let xs: Vec<Vec<f64>> = (0..n).map(|i| vector(3, 7 + i as u64)).collect();
        let rows: Vec<&[f64]> = xs.iter().map(|r| &r[..]).collect();
        let args = vec![Arg::F64s(&cam), Arg::F64Rows(&rows)];
        let fo = m.fwd_opt.as_ref().expect("fwd-opt");
        let fv = m.fwd_vec.as_ref().expect("fwd-vec");
        let (f, j) = (
            hand::project_all(&cam, &xs),
            hand::project_all_jacobian(&cam, &xs),
        );
        let fr = m.fwd_rows.as_ref().expect("fwd-rows");
        check_rows("ba", fr, &args, &j, cam.len());
        for (mode, native) in [
            ("objective", &m.objective),
            ("fwd", &m.fwd),
            ("fwd-opt", fo),
            ("fwd-vec", fv),
            ("fwd-rows", fr),
        ] {
            if mode != "fwd-rows" {
                check("ba", mode, native, &args, &f, &j);
            }
            extra.memory("ba", mode, n, arena(native, &args));
            bench_native(&mut g, extra, ("ba", mode, n), native, &args);
        }
        g.bench_function(BenchmarkId::new("hand-objective", n), |b| {
            b.iter(|| hand::project_all(black_box(&cam), black_box(&xs)))
        });
        g.bench_function(BenchmarkId::new("hand", n), |b| {
            b.iter(|| hand::project_all_jacobian(black_box(&cam), black_box(&xs)))
        });
        // 2N reverse runs of O(N) each.
        if n <= 1_000 {
            assert!(m.seeded);
            let mut jac = vec![0.0; 2 * n * 11];
            extra.memory("ba", "rev", n, rev_jacobian(&m.rev, &args, 2 * n, &mut jac));
            g.bench_function(BenchmarkId::new("rev", n), |b| {
                b.iter(|| rev_jacobian(&m.rev, &args, 2 * n, &mut jac))
            });
        }
    }
    g.finish();
}

/// GMM on ADBench's 1k files: the gradient with respect to θ = [alphas,
/// means, icf].
fn gmm(c: &mut Criterion, extra: &Extra) {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/adbench/data/gmm/1k");
    for file in ["gmm_d2_K5", "gmm_d10_K25"] {
        let path = dir.join(format!("{file}.txt"));
        let Ok(text) = std::fs::read_to_string(&path) else {
            eprintln!("skipping {file}: {} is not readable", path.display());
            continue;
        };
        let input = read_gmm(&text).expect("an ADBench GMM file");
        let m = modes(extra, file, GMM_SOURCE, "gmmObjectiveFlat", "theta", true);
        let mut theta = input.alphas.clone();
        theta.extend(input.means.iter().flatten());
        theta.extend(input.icf.iter().flatten());
        let rows: Vec<&[f64]> = input.x.iter().map(|r| &r[..]).collect();
        let args = vec![
            Arg::F64s(&theta),
            Arg::F64Rows(&rows),
            Arg::F64(input.gamma),
            Arg::I64(input.m),
        ];
        let mut g = configure(c, file);
        let fo = m.fwd_opt.as_ref().expect("fwd-opt");
        let mut natives = vec![("objective", &m.objective), ("rev", &m.rev)];
        // |θ| forward passes: 30 for d2_K5, 1650 for d10_K25 (51 s per
        // call with fwd-opt).
        if theta.len() <= 100 {
            natives.extend([("fwd", &m.fwd), ("fwd-opt", fo)]);
        }
        let (x, gamma, wm) = (&input.x, input.gamma, input.m);
        let (f, j) = (
            hand::gmm(&theta, x, gamma, wm),
            hand::gmm_grad(&theta, x, gamma, wm),
        );
        for (mode, native) in natives {
            check(file, mode, native, &args, &[f], &j);
            extra.memory(file, mode, input.n, arena(native, &args));
            bench_native(&mut g, extra, (file, mode, input.n), native, &args);
        }
        g.bench_function(BenchmarkId::new("hand-objective", input.n), |b| {
            b.iter(|| hand::gmm(black_box(&theta), black_box(x), gamma, wm))
        });
        g.bench_function(BenchmarkId::new("hand", input.n), |b| {
            b.iter(|| hand::gmm_grad(black_box(&theta), black_box(x), gamma, wm))
        });
        g.finish();
    }
}

fn main() {
    // The transformations recurse on the program's nesting; give them the
    // binary's stack.
    let run = std::thread::Builder::new()
        .stack_size(1 << 30)
        .spawn(|| {
            let extra = Extra {
                lines: RefCell::new(Vec::new()),
            };
            let mut c = Criterion::default().configure_from_args();
            // FSMOOTH_TABLE=micro-gradients,nnmf runs only those groups' functions
            // (criterion's filter would still compile every program).
            let only = std::env::var("FSMOOTH_TABLE").ok();
            let wanted = |name: &str| {
                only.as_deref()
                    .is_none_or(|o| o.split(',').any(|w| w == name))
            };
            type Group = fn(&mut Criterion, &Extra);
            let groups: [(&str, Group); 5] = [
                ("micro-gradients", micro_gradients),
                ("micro-jacobians", micro_jacobians),
                ("nnmf", nnmf),
                ("ba", ba),
                ("gmm", gmm),
            ];
            for (name, group) in groups {
                if wanted(name) {
                    group(&mut c, &extra);
                    extra.flush();
                }
            }
            c.final_summary();
        })
        .expect("benchmark thread starts");
    run.join().expect("benchmarks finish");
}
