//! `fsmooth gradbench`: the GradBench protocol on standard input and
//! output (`crate::gradbench` answers; this loop only reads and prints).
//! Standard output carries protocol lines only; a closed pipe ends the
//! session quietly.

use std::io::{BufRead, Write};

use super::Failure;
use crate::eval::Limits;
use crate::gradbench::{Tool, modules};
use crate::pipeline::Engine;

pub fn serve(engine: Engine, limits: Limits, list: bool) -> Result<(), Failure> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let closed = |_| Failure::ClosedPipe;
    if list {
        for m in modules() {
            writeln!(out, "{m}").map_err(closed)?;
        }
        return out.flush().map_err(closed);
    }
    let mut tool = Tool::new(engine, limits);
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let response = tool.respond(&line);
        let text = super::json::to_line(&response)
            .map_err(|e| Failure::Error(format!("error[internal-error]: {e}\n")))?;
        writeln!(out, "{text}").map_err(closed)?;
        out.flush().map_err(closed)?;
    }
    Ok(())
}
