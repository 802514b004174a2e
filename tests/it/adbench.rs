//! ADBench workloads (placeholder; being written).
