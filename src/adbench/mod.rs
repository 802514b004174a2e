//! Readers for ADBench input files (the formats are described in
//! ../shared/data/adbench/README.md). `read.rs` holds the token reader and
//! the error type shared by every format.

pub mod gmm;
pub mod read;
