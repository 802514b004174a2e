//! fsmooth: the F̃ language of Shaikhha et al. with a formal reference
//! semantics. See ARCHITECTURE.md for the pipeline and its invariants.
//!
//! The passes, in pipeline order: [`syntax`] (lexer, parser, printer) →
//! [`ir`] (the core IR) → [`types`] (inference, monomorphisation) →
//! [`eval`] (the reference evaluator). [`pipeline`] sequences them; the
//! `fsmooth` binary's [`cli`] is the only module that prints.

pub mod ad;
pub mod adbench;
pub mod anf;
pub mod cli;
pub mod codegen;
pub mod diagnostic;
pub mod difftest;
pub mod eval;
pub mod fuzz;
pub mod gate;
pub mod gradbench;
pub mod gradient;
pub mod interchange;
pub mod ir;
pub mod numeric;
pub mod opt;
pub mod pipeline;
pub mod prove;
pub mod rulecheck;
pub mod syntax;
pub mod tape;
pub mod testgen;
pub mod types;
