//! The threads that run the chunks of parallel folds (Note [Parallel
//! folds] in `codegen/passes/parallel.rs`), kept for the life of a
//! compiled entry: a fold hands each its job over a channel and waits
//! for its status, so a fold costs two channel messages per thread rather
//! than a thread's creation (about 30 µs each on the 2-core machine of
//! benches/README.md, against GMM d2_K5's 0.35 ms gradient).

use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;

use super::runtime::{Ctx, EntryFn};
use crate::codegen::abi::OUT_OF_MEMORY;

/// The stack of a thread that runs chunks (compiled code keeps little on
/// the stack; its arrays are in the arena).
const STACK: usize = 16 << 20;

/// One chunk's call.
#[derive(Clone, Copy)]
pub struct Job {
    pub f: EntryFn,
    pub ctx: *mut Ctx,
    pub args: *const u64,
    pub out: *mut u64,
}

// SAFETY: a job's context, arguments and output are used by the thread
// that runs it only, until its status is sent back; the arguments are
// read-only and outlive the job.
unsafe impl Send for Job {}

impl Job {
    pub fn run(self) -> i64 {
        // SAFETY: `fsmooth_parallel`'s caller passes buffers of the chunk
        // function's layout; the context and its arena are this job's.
        unsafe { (self.f)(self.ctx, self.args, self.out) }
    }
}

struct Worker {
    jobs: Sender<Job>,
    statuses: Receiver<i64>,
    thread: Option<JoinHandle<()>>,
}

/// Threads waiting for jobs.
#[derive(Default)]
pub struct Pool {
    workers: Vec<Worker>,
}

impl Pool {
    /// Runs `first` on the calling thread and `rest[t]` on worker t,
    /// returning every status in order. A job with no thread to be had
    /// (the system refused one) runs on the calling thread afterwards.
    pub fn run(&mut self, first: Job, rest: &[Job]) -> Vec<i64> {
        while self.workers.len() < rest.len() {
            match spawn() {
                Some(w) => self.workers.push(w),
                None => break,
            }
        }
        let sent: Vec<bool> = rest
            .iter()
            .zip(&self.workers)
            .map(|(job, w)| w.jobs.send(*job).is_ok())
            .collect();
        let mut statuses = vec![first.run()];
        for (t, job) in rest.iter().enumerate() {
            let status = match (sent.get(t), self.workers.get(t)) {
                // A worker that died (it cannot: compiled code and the
                // helpers never panic) reports an internal failure.
                (Some(true), Some(w)) => w.statuses.recv().unwrap_or(OUT_OF_MEMORY),
                _ => job.run(),
            };
            statuses.push(status);
        }
        statuses
    }
}

fn spawn() -> Option<Worker> {
    let (jobs, job_rx) = channel::<Job>();
    let (status_tx, statuses) = channel::<i64>();
    let thread = std::thread::Builder::new()
        .name("fsmooth-chunk".into())
        .stack_size(STACK)
        .spawn(move || {
            while let Ok(job) = job_rx.recv() {
                if status_tx.send(job.run()).is_err() {
                    break;
                }
            }
        })
        .ok()?;
    Some(Worker {
        jobs,
        statuses,
        thread: Some(thread),
    })
}

impl Drop for Pool {
    fn drop(&mut self) {
        for mut w in self.workers.drain(..) {
            // Closing the channel ends the worker's loop.
            drop(w.jobs);
            if let Some(t) = w.thread.take() {
                let _ = t.join();
            }
        }
    }
}
