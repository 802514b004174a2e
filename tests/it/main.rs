//! The one integration-test binary (one link on a 2-core machine); each
//! module covers one area.

mod adbench;
mod adbench_ba;
mod adbench_hand;
mod adbench_lstm;
mod aot;
mod architecture;
mod cli;
mod common;
mod conditions;
mod coq;
mod diagnostics;
mod eval;
mod forward;
mod fuzz;
mod gate;
mod golden;
mod gradbench;
mod native;
mod operators;
mod opt;
mod passes;
mod prims;
mod props;
mod prove;
mod regressions;
mod reliability;
mod reverse;
mod rulecheck;
mod tidy;
mod vector_mode;
mod while_loops;
