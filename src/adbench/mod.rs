//! Readers for ADBench input files (the formats are described in
//! ../shared/data/adbench/README.md).

pub mod gmm;
