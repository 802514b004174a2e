//! ADBench workloads: readers for ADBench's file formats (`read.rs` holds
//! the token reader and error shared by all of them; the formats are
//! described in ../shared/data/adbench/README.md), the objectives' F̃
//! sources (`examples/adbench/*.fsm`, embedded), and the one place that
//! turns a gradient mode into derivative programs and runs them
//! (`modes.rs`), shared by GMM, BA, LSTM and hand tracking.

pub mod ba;
pub mod gmm;
pub mod hand;
pub mod lstm;
pub mod modes;
pub mod read;
