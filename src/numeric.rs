//! Floating-point comparison used throughout: ADBench's
//! ρ(x, y) = |x − y| / max(1, |x| + |y|), an absolute difference near zero
//! and a relative one elsewhere.

/// ADBench's ρ. Two NaNs compare equal (ρ = 0); NaN against a number, or
/// infinities of different sign, are infinitely far apart.
pub fn rho(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() {
        return if x.is_nan() && y.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if x == y {
        return 0.0;
    }
    if x.is_infinite() || y.is_infinite() {
        return f64::INFINITY;
    }
    (x - y).abs() / (x.abs() + y.abs()).max(1.0)
}
