//! ADBench workloads: readers for ADBench's file formats (`read.rs` holds
//! the token reader and error shared by all of them; the formats are
//! described in ../shared/data/adbench/README.md), the objectives' F̃
//! sources (`examples/adbench/*.fsm`, embedded), and what is particular to
//! a workload's derivative (BA's batched Jacobian in its sparse layout,
//! hand tracking's packed columns). Derivative programs come from
//! `gradient::Plan`, as for every command.

pub mod ba;
pub mod gmm;
pub mod hand;
pub mod lstm;
pub mod read;
