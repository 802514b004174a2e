//! `log` and `exp` over a block of Doubles in place, four at a time in
//! 256-bit registers, for the relaxed contract's lane sums (Note [Math
//! kernels]).
//!
//! # Note [Math kernels]
//!
//! Under `--fp relaxed` a lane sum computes `log` and `exp` by fdlibm's
//! methods in `f64x2` lanes (`lower/vmath.rs`), two Doubles per
//! instruction. On a host with AVX2 and FMA3 the JIT instead runs a sum
//! whose terms take a `log` or an `exp` in blocks of [`MATH_BLOCK`]
//! iterations (`Lower::math_blocks` in `lower/lane_sums.rs`): the
//! arguments of the block's `log`s and `exp`s, in lanes, into a buffer on
//! the stack; [`fsmooth_vlog`] and [`fsmooth_vexp`] on it, in place; then
//! the block's terms in lanes, each `log` or `exp` read from the buffer.
//! The kernels compute exactly what the lanes compute — the same
//! operations in the same order, with the fused multiply–adds of Note
//! [Fused polynomials] — four Doubles per instruction, so the values and
//! the bound of spec/semantics.md §7 (change 2) are the lanes'.
//! `log` runs eight at a time where the CPU has AVX-512F (thirty-two
//! registers: its constants stay in them; half the instructions per
//! Double). NNMF's objective (m = n = 1 000, `--fp relaxed`, best of 3
//! alternating rounds): 3.50 ms in lanes, 3.07 with the kernel in
//! blocks, 2.13 once the block's sums no longer lived across the
//! kernels' calls (they had stayed in a stack slot, stored and loaded
//! every pair), 1.61 with AVX-512. A sum with only `exp`s keeps the
//! lanes: GMM's log-sum-exp runs over K components (5 to 200), fewer
//! than a block, and the calls in its loop kept the lanes' hoisted
//! constants on the stack (d2_K200's objective 1.52 → 1.72 ms). A kernel
//! returns non-zero when an argument is one the method does not cover
//! (for `log`: not a normal positive finite Double; for `exp`: NaN or of
//! magnitude over 708), and the sum then runs the rest of its pairs,
//! from that block on, as before: deferred, and from a failing pair on
//! as written.
//!
//! [`MATH_BLOCK`]: crate::codegen::abi::MATH_BLOCK

use super::kernels::avx2_fma;
use crate::codegen::lower::vmath::{
    EXP_LIMIT, INV_LN2, LG, LN2_HI, LN2_LO, MIN_NORMAL, P, PIVOT, SHIFTER, TWO52,
};

/// `x[i] = log x[i]` for `i < n` by fdlibm's method; non-zero when some
/// `x[i]` is not a normal positive finite Double (those elements then
/// hold no logarithm). Note [Math kernels].
///
/// # Safety
///
/// `x` holds `n` Doubles nothing else touches during the call.
pub unsafe extern "C" fn fsmooth_vlog(x: *mut f64, n: i64) -> i64 {
    // SAFETY: the caller's contract, passed on.
    unsafe { each(x, n, log_wide, log1) }
}

/// `x[i] = exp x[i]` for `i < n` by fdlibm's method; non-zero when some
/// `x[i]` is NaN or of magnitude over 708 (those elements then hold no
/// exponential). Note [Math kernels].
///
/// # Safety
///
/// As [`fsmooth_vlog`].
pub unsafe extern "C" fn fsmooth_vexp(x: *mut f64, n: i64) -> i64 {
    // SAFETY: the caller's contract, passed on.
    unsafe { each(x, n, exp_avx2, exp1) }
}

/// `wide` on the whole fours, `one` on the rest; whether any was
/// outside its method's arguments.
///
/// # Safety
///
/// As [`fsmooth_vlog`].
unsafe fn each(
    x: *mut f64,
    n: i64,
    wide: unsafe fn(*mut f64, usize) -> bool,
    one: fn(f64) -> (f64, bool),
) -> i64 {
    let n = n.max(0) as usize;
    let mut from = 0;
    let mut bad = false;
    if avx2_fma() {
        from = n - n % 4;
        // SAFETY: x holds n ≥ from Doubles; the CPU has AVX2 and FMA3.
        bad = unsafe { wide(x, from) };
    }
    for i in from..n {
        // SAFETY: i < n.
        unsafe {
            let (y, b) = one(*x.add(i));
            *x.add(i) = y;
            bad |= b;
        }
    }
    i64::from(bad)
}

fn c(bits: u64) -> f64 {
    f64::from_bits(bits)
}

/// `log` of one Double as the lanes compute it (`Lower::vlog`), and
/// whether it is outside the method's arguments.
fn log1(x: f64) -> (f64, bool) {
    let bad = !(MIN_NORMAL..f64::INFINITY).contains(&x);
    let u = x.to_bits().wrapping_add(0x3FF0_0000_0000_0000 - PIVOT);
    let k = f64::from_bits((u >> 52) | TWO52) - (f64::from_bits(TWO52) + 1023.0);
    let f = f64::from_bits((u & ((1 << 52) - 1)) + PIVOT) - 1.0;
    let hfsq = 0.5 * f * f;
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * horner1(w, &[LG[1], LG[3], LG[5]]);
    let r = z.mul_add(horner1(w, &[LG[0], LG[2], LG[4], LG[6]]), t1);
    let a = s.mul_add(hfsq + r, k * c(LN2_LO));
    let a = (a - hfsq) + f;
    (k.mul_add(c(LN2_HI), a), bad)
}

/// `exp` of one Double as the lanes compute it (`Lower::vexp`), and
/// whether it is outside the method's arguments.
fn exp1(x: f64) -> (f64, bool) {
    let bad = !(-EXP_LIMIT..=EXP_LIMIT).contains(&x);
    let kd = x * c(INV_LN2) + SHIFTER;
    let k = kd - SHIFTER;
    let hi = x - k * c(LN2_HI);
    let lo = k * c(LN2_LO);
    let r = hi - lo;
    let t = r * r;
    let cc = (-t).mul_add(horner1(t, &P), r);
    let q = (r * cc) / (2.0 - cc);
    let y = 1.0 - ((lo - q) - hi);
    let scale = f64::from_bits(kd.to_bits().wrapping_add(1023) << 52);
    (y * scale, bad)
}

/// c₀ + w (c₁ + w (c₂ + …)), each step fused.
fn horner1(w: f64, cs: &[u64]) -> f64 {
    let (last, rest) = cs.split_last().expect("a coefficient");
    rest.iter().rev().fold(c(*last), |p, k| w.mul_add(p, c(*k)))
}

#[cfg(target_arch = "x86_64")]
mod wide {
    use std::arch::x86_64::*;

    use super::*;

    /// One constant in four lanes.
    #[inline(always)]
    fn k(x: f64) -> __m256d {
        // SAFETY: AVX is implied by the callers' target features.
        unsafe { _mm256_set1_pd(x) }
    }

    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn horner(w: __m256d, cs: &[u64]) -> __m256d {
        let (last, rest) = cs.split_last().expect("a coefficient");
        rest.iter()
            .rev()
            .fold(k(c(*last)), |p, q| _mm256_fmadd_pd(w, p, k(c(*q))))
    }

    /// [`log1`] four at a time over `x[..n]`, `n` a multiple of four.
    ///
    /// # Safety
    ///
    /// `x` holds `n` Doubles; the CPU has AVX2 and FMA3.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn log_avx2(x: *mut f64, n: usize) -> bool {
        let mut bad = _mm256_setzero_pd();
        let mut i = 0;
        while i < n {
            // SAFETY: i + 4 ≤ n.
            let v = unsafe { _mm256_loadu_pd(x.add(i)) };
            let small = _mm256_cmp_pd::<_CMP_NGE_UQ>(v, k(MIN_NORMAL));
            let large = _mm256_cmp_pd::<_CMP_NLT_UQ>(v, k(f64::INFINITY));
            bad = _mm256_or_pd(bad, _mm256_or_pd(small, large));
            let u = _mm256_add_epi64(
                _mm256_castpd_si256(v),
                _mm256_set1_epi64x((0x3FF0_0000_0000_0000 - PIVOT) as i64),
            );
            let e = _mm256_or_si256(_mm256_srli_epi64::<52>(u), _mm256_set1_epi64x(TWO52 as i64));
            let kk = _mm256_sub_pd(_mm256_castsi256_pd(e), k(f64::from_bits(TWO52) + 1023.0));
            let m = _mm256_add_epi64(
                _mm256_and_si256(u, _mm256_set1_epi64x((1 << 52) - 1)),
                _mm256_set1_epi64x(PIVOT as i64),
            );
            let f = _mm256_sub_pd(_mm256_castsi256_pd(m), k(1.0));
            let hfsq = _mm256_mul_pd(_mm256_mul_pd(k(0.5), f), f);
            let s = _mm256_div_pd(f, _mm256_add_pd(k(2.0), f));
            let z = _mm256_mul_pd(s, s);
            let w = _mm256_mul_pd(z, z);
            // SAFETY: the same target features.
            let (h1, h2) = unsafe {
                (
                    horner(w, &[LG[1], LG[3], LG[5]]),
                    horner(w, &[LG[0], LG[2], LG[4], LG[6]]),
                )
            };
            let t1 = _mm256_mul_pd(w, h1);
            let r = _mm256_fmadd_pd(z, h2, t1);
            let klo = _mm256_mul_pd(kk, k(c(LN2_LO)));
            let a = _mm256_fmadd_pd(s, _mm256_add_pd(hfsq, r), klo);
            let a = _mm256_add_pd(_mm256_sub_pd(a, hfsq), f);
            let y = _mm256_fmadd_pd(kk, k(c(LN2_HI)), a);
            // SAFETY: i + 4 ≤ n.
            unsafe { _mm256_storeu_pd(x.add(i), y) };
            i += 4;
        }
        _mm256_movemask_pd(bad) != 0
    }

    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn horner8(w: __m512d, cs: &[u64]) -> __m512d {
        let (last, rest) = cs.split_last().expect("a coefficient");
        rest.iter().rev().fold(_mm512_set1_pd(c(*last)), |p, q| {
            _mm512_fmadd_pd(w, p, _mm512_set1_pd(c(*q)))
        })
    }

    /// [`log1`] eight at a time over `x[..n]`, `n` a multiple of eight:
    /// the same operations as [`log_avx2`], with half its instructions
    /// per Double and thirty-two registers, where the constants stay.
    ///
    /// # Safety
    ///
    /// `x` holds `n` Doubles; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn log_avx512(x: *mut f64, n: usize) -> bool {
        let k8 = _mm512_set1_pd;
        let i8 = _mm512_set1_epi64;
        let mut bad: __mmask8 = 0;
        let mut i = 0;
        while i < n {
            // SAFETY: i + 8 ≤ n.
            let v = unsafe { _mm512_loadu_pd(x.add(i)) };
            let small = _mm512_cmp_pd_mask::<_CMP_NGE_UQ>(v, k8(MIN_NORMAL));
            let large = _mm512_cmp_pd_mask::<_CMP_NLT_UQ>(v, k8(f64::INFINITY));
            bad |= small | large;
            let u = _mm512_add_epi64(
                _mm512_castpd_si512(v),
                i8((0x3FF0_0000_0000_0000 - PIVOT) as i64),
            );
            let e = _mm512_or_si512(_mm512_srli_epi64::<52>(u), i8(TWO52 as i64));
            let kk = _mm512_sub_pd(_mm512_castsi512_pd(e), k8(f64::from_bits(TWO52) + 1023.0));
            let m = _mm512_add_epi64(_mm512_and_si512(u, i8((1 << 52) - 1)), i8(PIVOT as i64));
            let f = _mm512_sub_pd(_mm512_castsi512_pd(m), k8(1.0));
            let hfsq = _mm512_mul_pd(_mm512_mul_pd(k8(0.5), f), f);
            let s = _mm512_div_pd(f, _mm512_add_pd(k8(2.0), f));
            let z = _mm512_mul_pd(s, s);
            let w = _mm512_mul_pd(z, z);
            // SAFETY: the same target features.
            let (h1, h2) = unsafe {
                (
                    horner8(w, &[LG[1], LG[3], LG[5]]),
                    horner8(w, &[LG[0], LG[2], LG[4], LG[6]]),
                )
            };
            let t1 = _mm512_mul_pd(w, h1);
            let r = _mm512_fmadd_pd(z, h2, t1);
            let klo = _mm512_mul_pd(kk, k8(c(LN2_LO)));
            let a = _mm512_fmadd_pd(s, _mm512_add_pd(hfsq, r), klo);
            let a = _mm512_add_pd(_mm512_sub_pd(a, hfsq), f);
            let y = _mm512_fmadd_pd(kk, k8(c(LN2_HI)), a);
            // SAFETY: i + 8 ≤ n.
            unsafe { _mm512_storeu_pd(x.add(i), y) };
            i += 8;
        }
        bad != 0
    }

    /// [`exp1`] four at a time over `x[..n]`, `n` a multiple of four.
    ///
    /// # Safety
    ///
    /// `x` holds `n` Doubles; the CPU has AVX2 and FMA3.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn exp_avx2(x: *mut f64, n: usize) -> bool {
        let mut bad = _mm256_setzero_pd();
        let mut i = 0;
        while i < n {
            // SAFETY: i + 4 ≤ n.
            let v = unsafe { _mm256_loadu_pd(x.add(i)) };
            let below = _mm256_cmp_pd::<_CMP_LE_OQ>(v, k(EXP_LIMIT));
            let above = _mm256_cmp_pd::<_CMP_GE_OQ>(v, k(-EXP_LIMIT));
            let inside = _mm256_and_pd(below, above);
            bad = _mm256_or_pd(
                bad,
                _mm256_xor_pd(inside, _mm256_castsi256_pd(_mm256_set1_epi64x(-1))),
            );
            let kd = _mm256_add_pd(_mm256_mul_pd(v, k(c(INV_LN2))), k(SHIFTER));
            let kk = _mm256_sub_pd(kd, k(SHIFTER));
            let hi = _mm256_sub_pd(v, _mm256_mul_pd(kk, k(c(LN2_HI))));
            let lo = _mm256_mul_pd(kk, k(c(LN2_LO)));
            let r = _mm256_sub_pd(hi, lo);
            let t = _mm256_mul_pd(r, r);
            // SAFETY: the same target features.
            let p = unsafe { horner(t, &P) };
            let cc = _mm256_fnmadd_pd(t, p, r);
            let q = _mm256_div_pd(_mm256_mul_pd(r, cc), _mm256_sub_pd(k(2.0), cc));
            let y = _mm256_sub_pd(k(1.0), _mm256_sub_pd(_mm256_sub_pd(lo, q), hi));
            let e = _mm256_slli_epi64::<52>(_mm256_add_epi64(
                _mm256_castpd_si256(kd),
                _mm256_set1_epi64x(1023),
            ));
            // SAFETY: i + 4 ≤ n.
            unsafe { _mm256_storeu_pd(x.add(i), _mm256_mul_pd(y, _mm256_castsi256_pd(e))) };
            i += 4;
        }
        _mm256_movemask_pd(bad) != 0
    }
}

#[cfg(target_arch = "x86_64")]
use wide::{exp_avx2, log_avx2, log_avx512};

/// Whether this CPU has AVX-512F, asked once.
#[cfg(target_arch = "x86_64")]
fn avx512() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| is_x86_feature_detected!("avx512f"))
}

/// [`log_avx512`] on the whole eights where the CPU has AVX-512F, then
/// [`log_avx2`] on the fours left.
///
/// # Safety
///
/// As [`log_avx2`].
#[cfg(target_arch = "x86_64")]
unsafe fn log_wide(x: *mut f64, n: usize) -> bool {
    let eights = if avx512() { n - n % 8 } else { 0 };
    // SAFETY: x holds n ≥ eights Doubles; the CPU has what each needs.
    unsafe {
        let bad = eights > 0 && log_avx512(x, eights);
        log_avx2(x.add(eights), n - eights) | bad
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn log_wide(_: *mut f64, _: usize) -> bool {
    unreachable!("no AVX2 here")
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn exp_avx2(_: *mut f64, _: usize) -> bool {
    unreachable!("no AVX2 here")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernels' values are the one-at-a-time method's, bit for bit,
    /// within 2 ulp of the evaluator's functions, and the flag says
    /// exactly when an argument is outside the method's.
    #[test]
    fn kernels_are_the_method_and_flag_what_it_does_not_cover() {
        let ulps = |a: f64, b: f64| (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs();
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let logs: Vec<f64> = (0..4001)
            .map(|_| f64::from_bits(next() % 0x7FDF_FFFF_FFFF_FFFF + 0x0010_0000_0000_0000))
            .collect();
        let exps: Vec<f64> = (0..4001)
            .map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64 * 1400.0 - 700.0)
            .collect();
        for (xs, kernel, one, reference) in [
            (
                &logs,
                fsmooth_vlog as unsafe extern "C" fn(*mut f64, i64) -> i64,
                log1 as fn(f64) -> (f64, bool),
                f64::ln as fn(f64) -> f64,
            ),
            (&exps, fsmooth_vexp, exp1, f64::exp),
        ] {
            let mut ys = xs.clone();
            // SAFETY: ys holds its length of Doubles.
            let bad = unsafe { kernel(ys.as_mut_ptr(), ys.len() as i64) };
            assert_eq!(bad, 0);
            for (x, y) in xs.iter().zip(&ys) {
                assert_eq!(y.to_bits(), one(*x).0.to_bits(), "{x}");
                assert!(
                    ulps(*y, reference(*x)) <= 2,
                    "{x}: {y} vs {}",
                    reference(*x)
                );
            }
            // Each argument outside the method, at each place of a four.
            let outside: &[f64] = if xs == &logs {
                &[0.0, -1.0, f64::NAN, f64::INFINITY, 1e-310]
            } else {
                &[f64::NAN, 709.0, -709.0, f64::INFINITY]
            };
            for &o in outside {
                for at in 0..6 {
                    let mut ys: Vec<f64> = xs[..6].to_vec();
                    ys[at] = o;
                    // SAFETY: ys holds six Doubles.
                    let bad = unsafe { kernel(ys.as_mut_ptr(), 6) };
                    assert_eq!(bad, 1, "{o} at {at}");
                }
            }
        }
    }
}
