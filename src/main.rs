//! The `fsmooth` command. Runs the CLI on a thread with a large stack, so
//! the recursive passes handle programs nested up to
//! `syntax::MAX_NESTING` levels.

use std::process::ExitCode;

fn main() -> ExitCode {
    let worker = std::thread::Builder::new()
        .name("fsmooth".to_string())
        .stack_size(1 << 30)
        .spawn(fsmooth::cli::main);
    match worker.map(|h| h.join()) {
        Ok(Ok(code)) => code,
        _ => {
            eprintln!("fsmooth: internal error (the worker thread failed); please report this");
            ExitCode::from(70)
        }
    }
}
