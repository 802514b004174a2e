//! End-to-end tests of the `fsmooth` binary (being written).
