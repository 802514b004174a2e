//! fsmooth as a GradBench tool (`fsmooth gradbench`; GradBench's
//! `CONTRIBUTING.md`, "Protocol"). The eval sends one JSON message per
//! line; [`Tool::respond`] answers each with one JSON value, which the
//! command line prints as one line.
//!
//! Every eval is an F̃ program in `tools/fsmooth/<module>.fsm`, embedded
//! here: each GradBench function of the module is an entry of the same
//! name whose parameters are named like the fields of the eval's input,
//! and whose derivatives are taken inside the language (`gradient`,
//! `vjp`, `jvp`, …; spec/ad-forward.md §10). `define` builds every
//! function's program and compiles it to native code once (its time is the
//! `compile` timing); `evaluate` converts the input to values, runs the
//! native code at least `min_runs` times and until `min_seconds` have
//! passed (one `evaluate` timing per run, the call alone), and converts
//! the result back, through the module's output adapter where GradBench's
//! output format is not the value's own JSON (`outputs.rs`).
//!
//! Nothing here panics on bad input: a message that is not understood, a
//! module fsmooth does not implement, an input of the wrong shape or a run
//! that fails is a response with `"success": false` and an `"error"`.

mod outputs;

use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};

use crate::eval::{Limits, Value};
use crate::interchange::value_from_json;
use crate::pipeline::{Engine, Entry, Session};
use outputs::Output;

/// An eval fsmooth implements: its module name, its F̃ program, and each
/// GradBench function (an entry of the program) with its output adapter.
struct Eval {
    module: &'static str,
    source: &'static str,
    functions: &'static [(&'static str, Output)],
}

/// The evals fsmooth implements.
const MODULES: &[Eval] = &[
    Eval {
        module: "hello",
        source: include_str!("../../tools/fsmooth/hello.fsm"),
        functions: &[("square", Output::Value), ("double", Output::Value)],
    },
    Eval {
        module: "lse",
        source: include_str!("../../tools/fsmooth/lse.fsm"),
        functions: &[("primal", Output::Value), ("gradient", Output::Value)],
    },
    Eval {
        module: "llsq",
        source: include_str!("../../tools/fsmooth/llsq.fsm"),
        functions: &[("primal", Output::Value), ("gradient", Output::Value)],
    },
    Eval {
        module: "det",
        source: include_str!("../../tools/fsmooth/det.fsm"),
        functions: &[("primal", Output::Value), ("gradient", Output::Value)],
    },
    Eval {
        module: "ode",
        source: include_str!("../../tools/fsmooth/ode.fsm"),
        functions: &[("primal", Output::Value), ("gradient", Output::Value)],
    },
    Eval {
        module: "kmeans",
        source: include_str!("../../tools/fsmooth/kmeans.fsm"),
        functions: &[("cost", Output::Value), ("dir", Output::Value)],
    },
    Eval {
        module: "gmm",
        source: include_str!("../../tools/fsmooth/gmm.fsm"),
        functions: &[
            ("objective", Output::Value),
            ("jacobian", Output::Object(&["alpha", "mu", "q", "l"])),
        ],
    },
    Eval {
        module: "lstm",
        source: include_str!("../../tools/fsmooth/lstm.fsm"),
        functions: &[("objective", Output::Value), ("jacobian", Output::Flat)],
    },
    Eval {
        module: "ba",
        source: include_str!("../../tools/fsmooth/ba.fsm"),
        functions: &[
            ("objective", Output::BaObjective),
            ("jacobian", Output::BaJacobian),
        ],
    },
    Eval {
        module: "ht",
        source: include_str!("../../tools/fsmooth/ht.fsm"),
        functions: &[("objective", Output::Value), ("jacobian", Output::Value)],
    },
    Eval {
        module: "particle",
        source: include_str!("../../examples/stalingrad/particle.fsm"),
        functions: &[
            ("ff", Output::Scalar),
            ("fr", Output::Scalar),
            ("rf", Output::Scalar),
            ("rr", Output::Scalar),
        ],
    },
    Eval {
        module: "saddle",
        source: include_str!("../../examples/stalingrad/saddle.fsm"),
        functions: &[
            ("ff", Output::Value),
            ("fr", Output::Value),
            ("rf", Output::Value),
            ("rr", Output::Value),
        ],
    },
];

/// The names of the modules fsmooth implements (`evals.txt`).
pub fn modules() -> Vec<&'static str> {
    MODULES.iter().map(|e| e.module).collect()
}

/// A defined module: its functions' entries, compiled.
struct Module {
    functions: HashMap<String, (Rc<Entry>, Output)>,
}

/// The tool's state across one session of the protocol.
pub struct Tool {
    engine: Engine,
    limits: Limits,
    modules: HashMap<String, Module>,
}

impl Tool {
    pub fn new(engine: Engine, limits: Limits) -> Tool {
        Tool {
            engine,
            limits,
            modules: HashMap::new(),
        }
    }

    /// The response to one line of the eval (a message), never failing:
    /// an error is `"success": false` with its message.
    pub fn respond(&mut self, line: &str) -> Json {
        let msg: Json = match serde_json::from_str(line) {
            Ok(m) => m,
            Err(e) => {
                return json!({"id": null, "success": false, "error": format!("not a JSON message: {e}")});
            }
        };
        let id = msg.get("id").cloned().unwrap_or(Json::Null);
        let kind = msg.get("kind").and_then(Json::as_str).unwrap_or("");
        match kind {
            "start" => json!({"id": id, "tool": "fsmooth"}),
            "define" => {
                let module = msg.get("module").and_then(Json::as_str).unwrap_or("");
                let start = Instant::now();
                match self.define(module) {
                    Ok(()) => json!({
                        "id": id,
                        "success": true,
                        "timings": [timing("compile", start.elapsed())],
                    }),
                    Err(e) => json!({"id": id, "success": false, "error": e}),
                }
            }
            "evaluate" => match self.evaluate(&msg) {
                Ok((output, runs)) => {
                    let timings: Vec<Json> = runs.iter().map(|d| timing("evaluate", *d)).collect();
                    json!({"id": id, "success": true, "output": output, "timings": timings})
                }
                Err(e) => json!({"id": id, "success": false, "error": e}),
            },
            // `analysis` and anything else: acknowledged.
            _ => json!({"id": id}),
        }
    }

    /// `define`: every function of the module built and compiled once.
    fn define(&mut self, module: &str) -> Result<(), String> {
        if self.modules.contains_key(module) {
            return Ok(());
        }
        let Some(Eval {
            source: src,
            functions,
            ..
        }) = MODULES.iter().find(|e| e.module == module)
        else {
            return Err(format!(
                "fsmooth has no implementation of module `{module}` (it implements: {})",
                modules().join(", ")
            ));
        };
        let session = Session::load(src).map_err(|d| d.message)?;
        let mut table = HashMap::new();
        for (name, output) in functions.iter() {
            let entry = session
                .entry(name)
                .map_err(|d| format!("{module}.{name}: {}", d.message))?;
            if self.engine == Engine::Native {
                entry
                    .native()
                    .map_err(|e| format!("{module}.{name}: {e}"))?;
            }
            table.insert((*name).to_string(), (entry, *output));
        }
        self.modules
            .insert(module.to_string(), Module { functions: table });
        Ok(())
    }

    /// `evaluate`: the function run on the input as often as the input's
    /// `min_runs` and `min_seconds` ask; the output and each run's time.
    fn evaluate(&mut self, msg: &Json) -> Result<(Json, Vec<Duration>), String> {
        let module = msg.get("module").and_then(Json::as_str).unwrap_or("");
        let function = msg.get("function").and_then(Json::as_str).unwrap_or("");
        let Some(m) = self.modules.get(module) else {
            return Err(format!("module `{module}` was not defined"));
        };
        let Some((entry, output)) = m.functions.get(function) else {
            return Err(format!("module `{module}` has no function `{function}`"));
        };
        let input = msg.get("input").cloned().unwrap_or(Json::Null);
        let args = arguments(entry, &input)?;
        let runs = input
            .get("min_runs")
            .and_then(Json::as_u64)
            .unwrap_or(1)
            .max(1);
        let seconds = input
            .get("min_seconds")
            .and_then(Json::as_f64)
            .unwrap_or(0.0)
            .max(0.0);
        let mut times = Vec::new();
        let mut total = Duration::ZERO;
        let mut result = None;
        while (times.len() as u64) < runs || total.as_secs_f64() < seconds {
            let call = args.clone();
            let start = Instant::now();
            let r = entry.run_on(self.engine, call, self.limits);
            let d = start.elapsed();
            let (v, _) = r.map_err(|e| format!("{module}.{function}: {e}"))?;
            times.push(d);
            total += d;
            result = Some(v);
        }
        let v = result.expect("at least one run");
        Ok((output.render(&v, &input)?, times))
    }
}

fn timing(name: &str, d: Duration) -> Json {
    json!({"name": name, "nanoseconds": d.as_nanos() as u64})
}

/// The entry's arguments from the eval's input: an object's fields named
/// like the parameters, found at the top level or in the objects nested in
/// it (HT's `data.model.parents`; the others, such as `min_runs` or HT's
/// `bone_names`, are ignored), or, for an entry of one parameter, the
/// input itself.
fn arguments(entry: &Entry, input: &Json) -> Result<Vec<Value>, String> {
    let by_name = entry.params.iter().all(|(n, _)| field(input, n).is_some());
    if !by_name {
        if entry.params.len() == 1 {
            let (n, t) = &entry.params[0];
            let v = value_from_json(input, t, n, entry.span).map_err(|e| e.to_string())?;
            return Ok(vec![v]);
        }
        return Err(format!(
            "the input must be an object with the fields {}",
            entry.signature()
        ));
    }
    entry
        .params
        .iter()
        .map(|(n, t)| {
            let j = field(input, n).expect("checked above");
            value_from_json(j, t, n, entry.span).map_err(|e| e.to_string())
        })
        .collect()
}

/// The field `name` of `input` or of the first object nested in it that
/// has one (breadth first).
fn field<'j>(input: &'j Json, name: &str) -> Option<&'j Json> {
    let mut level = vec![input];
    while !level.is_empty() {
        let mut next = Vec::new();
        for j in level {
            if let Json::Object(map) = j {
                if let Some(v) = map.get(name) {
                    return Some(v);
                }
                next.extend(map.values().filter(|v| v.is_object()));
            }
        }
        level = next;
    }
    None
}
