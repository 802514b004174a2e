//! `adbench`: the four ADBench workloads read from ADBench's files, their
//! objective and derivative computed in a gradient mode on either engine,
//! printed as JSON, with `--repeat N` timings.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use super::args::{AdbenchCmd, WorkloadArgs};
use super::derivative::native_runs;
use super::json::{Doubles, rounded};
use super::{Failure, out_json, read, render_diagnostic, stats_line};
use crate::adbench::{ba, gmm, hand, lstm};
use crate::diagnostic::{Diagnostic, SourceId};
use crate::eval::Value;
use crate::gradient::Plan;
use crate::pipeline::{Engine, RunError, Session};

pub fn adbench(cmd: AdbenchCmd) -> Result<(), Failure> {
    match cmd {
        AdbenchCmd::Gmm {
            file,
            replicate_point,
            batched,
            run,
        } => {
            let input = read_data(&file, |t| {
                if replicate_point {
                    gmm::read_gmm_replicated(t)
                } else {
                    gmm::read_gmm(t)
                }
            })?;
            let source = ("examples/adbench/gmm.fsm", gmm::GMM_SOURCE);
            let entry = if batched {
                "gmmObjectiveBatchedFlat"
            } else {
                "gmmObjectiveFlat"
            };
            scalar(source, entry, input.flat_args(), &run)
        }
        AdbenchCmd::Lstm { file, run } => {
            let input = read_data(&file, lstm::read_lstm)?;
            let source = ("examples/adbench/lstm.fsm", lstm::LSTM_SOURCE);
            scalar(source, "lstmObjectiveFlat", input.flat_args(), &run)
        }
        AdbenchCmd::Ba { file, run } => bundle(&read_data(&file, ba::read_ba)?, &run),
        AdbenchCmd::Hand {
            file,
            model,
            complicated,
            run,
        } => {
            let bones = read_data(&model.join("bones.txt"), hand::read_bones)?;
            let vertices = read_data(&model.join("vertices.txt"), |t| {
                hand::read_vertices(t, bones.names.len())
            })?;
            let triangles = read_data(&model.join("triangles.txt"), |t| {
                hand::read_triangles(t, vertices.positions.len())
            })?;
            let model = hand::HandModel {
                bones,
                vertices,
                triangles,
            };
            let input = read_data(&file, |t| hand::read_hand_instance(t, complicated, &model))?;
            hand_tracking(&input, &model, &run)
        }
    }
}

/// Reads an ADBench data file with `reader`, rendering its errors against
/// the file.
fn read_data<T>(
    file: &Path,
    reader: impl FnOnce(&str) -> Result<T, crate::adbench::read::AdbenchError>,
) -> Result<T, Failure> {
    let text = read(file)?;
    reader(&text).map_err(|e| {
        // The span points into the data file, which is rendered as the
        // main file here.
        let mut d = Diagnostic::from(&e);
        d.span.source = SourceId::MAIN;
        Failure::Error(render_diagnostic(&d, &file.display().to_string(), &text))
    })
}

/// A workload's embedded source and the failures rendered against it.
struct Workload {
    label: &'static str,
    src: &'static str,
}

impl Workload {
    fn fail(&self, d: &Diagnostic) -> Failure {
        Failure::Error(render_diagnostic(d, self.label, self.src))
    }

    fn run_fail(&self, e: &RunError) -> Failure {
        self.fail(&Diagnostic::from(e))
    }

    /// The session of the workload's source (with `FSMOOTH_OPT_CHECK`),
    /// its native code compiled as `run` says.
    fn session(&self, run: &WorkloadArgs) -> Result<Session, Failure> {
        let native = run.engine.native();
        let s = Session::load(self.src)
            .map_err(|d| self.fail(&d))?
            .with_native(native);
        Ok(s.with_options(crate::pipeline::OptOptions {
            check: super::derivative::check_from_env(),
            ..Default::default()
        }))
    }
}

/// `"timings"`: objective and derivative, minimum of N runs after a
/// warm-up run (which compiles native code), and their ratio.
#[derive(Serialize)]
struct Timings {
    engine: &'static str,
    repeat: u32,
    objective_ms: f64,
    #[serde(flatten)]
    derivative: std::collections::BTreeMap<String, f64>,
    ratio: f64,
}

impl Timings {
    fn new(run: &WorkloadArgs, n: u32, f_ms: f64, j_ms: f64, j_name: &str) -> Timings {
        Timings {
            engine: match run.engine.engine {
                Engine::Native => "native",
                Engine::Eval => "eval",
            },
            repeat: n.max(1),
            objective_ms: rounded(f_ms, 4),
            derivative: [(format!("{j_name}_ms"), rounded(j_ms, 4))].into(),
            ratio: rounded(j_ms / f_ms, 3),
        }
    }
}

/// The plan of the workload's mode, after checking that the engine can
/// run it.
fn plan(
    w: &Workload,
    session: &Session,
    entry: &str,
    wrt: &str,
    run: &WorkloadArgs,
) -> Result<Plan, Failure> {
    native_runs(run.mode, run.engine.engine)?;
    Plan::new(
        session,
        entry,
        wrt,
        run.mode,
        run.engine.engine,
        run.checkpoint.policy,
    )
    .map_err(|d| w.fail(&d))
}

/// The derivative's columns, the time they took, and with `--repeat N`
/// the timings.
fn timed_columns(
    w: &Workload,
    plan: &Plan,
    args: &[Value],
    run: &WorkloadArgs,
    j_name: &str,
) -> Result<
    (
        crate::gradient::Columns,
        std::time::Duration,
        Option<Timings>,
    ),
    Failure,
> {
    let (engine, limits) = (run.engine.engine, run.engine.limits());
    let columns = || {
        plan.columns(args.to_vec(), engine, limits)
            .map_err(|e| w.run_fail(&e))
    };
    let objective = || {
        plan.base
            .run_on(engine, args.to_vec(), limits)
            .map(|_| ())
            .map_err(|e| w.run_fail(&e))
    };
    let start = Instant::now();
    let cols = columns()?;
    let elapsed = start.elapsed();
    let mut timings = None;
    if let Some(n) = run.repeat {
        objective()?; // warm-up
        // Natively, the compiled objective and derivative program on the
        // arguments converted once (as `grad --repeat`, and as JAX is
        // timed with its arguments on the device); else each whole run.
        let f_ms = match (engine == Engine::Native)
            .then(|| plan.base.time_native(args, limits, n))
            .flatten()
        {
            Some(t) => t.map_err(|e| w.run_fail(&e))?,
            None => super::min_ms(n, &mut || objective())?,
        };
        let j_ms = match super::derivative::time_program(plan, engine, args, limits, n) {
            Some(t) => t.map_err(|e| w.run_fail(&e))?,
            None => super::min_ms(n, &mut || columns().map(|_| ()))?,
        };
        timings = Some(Timings::new(run, n, f_ms, j_ms, j_name));
    }
    Ok((cols, elapsed, timings))
}

/// A workload with a Double objective of a flat parameter vector `theta`
/// (GMM, LSTM): prints `{"objective", "gradient"[, "timings"]}`.
fn scalar(
    (label, src): (&'static str, &'static str),
    entry: &str,
    args: Vec<Value>,
    run: &WorkloadArgs,
) -> Result<(), Failure> {
    let w = Workload { label, src };
    let session = w.session(run)?;
    let plan = plan(&w, &session, entry, "theta", run)?;
    let (cols, elapsed, timings) = timed_columns(&w, &plan, &args, run, "gradient")?;
    #[derive(Serialize)]
    struct Out<'a> {
        objective: &'a Value,
        gradient: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        timings: Option<Timings>,
    }
    out_json(&Out {
        objective: &cols.value,
        gradient: cols.gradient(&args[0]),
        timings,
    })?;
    if run.stats {
        stats_line(cols.stats, elapsed);
    }
    Ok(())
}

/// Bundle adjustment: the residuals and the Jacobian in ADBench's CSR
/// layout (`adbench::ba::BaDerivative`).
fn bundle(input: &ba::BaInput, run: &WorkloadArgs) -> Result<(), Failure> {
    let w = Workload {
        label: "examples/adbench/ba.fsm",
        src: ba::BA_SOURCE,
    };
    let (engine, limits) = (run.engine.engine, run.engine.limits());
    native_runs(run.mode, engine)?;
    let session = w.session(run)?;
    let d = ba::BaDerivative::new(&session, run.mode, engine, run.checkpoint.policy)
        .map_err(|e| w.fail(&e))?;
    let jacobian = || {
        d.jacobian(input, engine, limits)
            .map_err(|e| w.run_fail(&e))
    };
    let residuals = || {
        d.residuals(input, engine, limits)
            .map_err(|e| w.run_fail(&e))
    };
    let start = Instant::now();
    let (result, stats) = jacobian()?;
    let elapsed = start.elapsed();
    let (reproj_err, w_err) = residuals()?;
    let mut timings = None;
    if let Some(n) = run.repeat {
        let f_ms = super::min_ms(n, &mut || residuals().map(|_| ()))?;
        let j_ms = super::min_ms(n, &mut || jacobian().map(|_| ()))?;
        timings = Some(Timings::new(run, n, f_ms, j_ms, "jacobian"));
    }
    #[derive(Serialize)]
    struct Csr<'a> {
        nrows: usize,
        ncols: usize,
        rows: &'a [usize],
        cols: &'a [usize],
        vals: Doubles<'a>,
    }
    #[derive(Serialize)]
    struct Out<'a> {
        reproj_err: Value,
        w_err: Value,
        jacobian: Csr<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timings: Option<Timings>,
    }
    let j = &result.jacobian;
    out_json(&Out {
        reproj_err,
        w_err,
        jacobian: Csr {
            nrows: j.nrows,
            ncols: j.ncols,
            rows: &j.rows,
            cols: &j.cols,
            vals: Doubles(&j.vals),
        },
        timings,
    })?;
    if run.stats {
        stats_line(stats, elapsed);
    }
    Ok(())
}

/// Hand tracking: the residuals and the dense Jacobian of the instance's
/// entry (26 theta columns, or 2 packed u columns and 26 theta columns).
fn hand_tracking(
    input: &hand::HandInput,
    model: &hand::HandModel,
    run: &WorkloadArgs,
) -> Result<(), Failure> {
    let w = Workload {
        label: "examples/adbench/hand.fsm",
        src: hand::HAND_SOURCE,
    };
    let session = w.session(run)?;
    let plan = plan(&w, &session, input.entry(), input.wrt(), run)?;
    let args = input.args(model);
    let (cols, elapsed, timings) = timed_columns(&w, &plan, &args, run, "jacobian")?;
    let r = hand::HandResult::from_columns(&cols);
    let rows: Vec<Vec<f64>> = (0..r.nrows).map(|i| r.row(i)).collect();
    #[derive(Serialize)]
    struct Shape {
        nrows: usize,
        ncols: usize,
    }
    #[derive(Serialize)]
    struct Out<'a> {
        objective: Doubles<'a>,
        jacobian_shape: Shape,
        jacobian_colmajor: Doubles<'a>,
        jacobian_rows: Vec<Doubles<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timings: Option<Timings>,
    }
    out_json(&Out {
        objective: Doubles(&r.objective),
        jacobian_shape: Shape {
            nrows: r.nrows,
            ncols: r.ncols,
        },
        jacobian_colmajor: Doubles(&r.colmajor),
        jacobian_rows: rows.iter().map(|x| Doubles(x)).collect(),
        timings,
    })?;
    if run.stats {
        stats_line(cols.stats, elapsed);
    }
    Ok(())
}
