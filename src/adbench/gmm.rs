//! ADBench GMM reader (placeholder; being written).
