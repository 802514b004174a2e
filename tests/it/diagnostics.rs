//! Rendered diagnostics as insta snapshots (being written).
