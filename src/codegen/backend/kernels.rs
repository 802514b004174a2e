//! Kernels that JIT code calls for loops Cranelift's 128-bit vectors run
//! at half the machine's width (Note [Row kernels]).
//!
//! # Note [Row kernels]
//!
//! Cranelift 0.135 lowers vectors of at most 128 bits on x86-64, so an
//! interchanged sum of products (Note [Interchange], blocks) runs two
//! Doubles per `mulpd` and `addpd`: at most four products and four sums
//! a cycle on this machine's two multiply and two add pipes, which the
//! batched GMM's triangular products reach (`benches/README.md`). With
//! 256-bit registers and fused multiply–add the same pipes do eight of
//! each. So under the relaxed contract (spec/semantics.md §7, change 3),
//! on a host with AVX2 and FMA3, the JIT lowers an interchanged `build`
//! of sums whose every term is `c_i · r_i[j]` — a Double `c_i` and a row
//! `r_i` that do not depend on the element `j` — to calls of
//! [`fsmooth_row_sums`] (`Lower::row_sums` in
//! `codegen/lower/loop_interchange.rs`): the lowering writes up to
//! `abi::ROW_TERMS` pairs `(c_i, r_i)` at a time, i ascending, into a buffer
//! on its stack, and the kernel adds them to every element.
//!
//! Each element adds the same terms in the same order as the evaluator,
//! each as one `fma(c_i, r_i[j], x_j)`: the product is not rounded
//! before it is added (the bound of §7 counts one more u per addend).
//! The kernel runs sixteen elements at a time in four `ymm` registers
//! over all the buffer's terms, then four at a time, then one at a time
//! with `f64::mul_add` — the same fused operation, so the result does not
//! depend on where an element falls. Object files do not call it: they
//! need only libc and libm, and keep the lanes.

use std::sync::OnceLock;

/// One term of a row sum (`abi::ROW_TERMS`): the coefficient, and the
/// row it multiplies (at least as long as the sum's elements; the guard
/// of the nest tested it).
#[repr(C)]
pub struct RowTerm {
    pub coef: f64,
    pub row: *const f64,
}

/// `out[j] = fma(c_i, r_i[j], out[j])` for `i` in `0 .. m` in order, for
/// every `j < n` (Note [Row kernels]).
///
/// # Safety
///
/// `out` holds `n` Doubles that nothing else reads or writes during the
/// call; `terms` holds `m` terms, each row at least `n` Doubles.
pub unsafe extern "C" fn fsmooth_row_sums(out: *mut f64, n: i64, terms: *const RowTerm, m: i64) {
    if n <= 0 || m <= 0 {
        return;
    }
    let (n, m) = (n as usize, m as usize);
    // SAFETY: the caller's contract, passed on.
    unsafe {
        let terms = std::slice::from_raw_parts(terms, m);
        #[cfg(target_arch = "x86_64")]
        if avx2_fma() {
            return row_sums_avx2(out, n, terms);
        }
        row_sums_scalar(out, 0, n, terms);
    }
}

/// Whether this CPU has AVX2 and FMA3, asked once.
fn avx2_fma() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

/// Elements `from .. n`, one at a time.
///
/// # Safety
///
/// As [`fsmooth_row_sums`].
unsafe fn row_sums_scalar(out: *mut f64, from: usize, n: usize, terms: &[RowTerm]) {
    for j in from..n {
        // SAFETY: j < n, the length of `out` and of every row.
        unsafe {
            let mut x = *out.add(j);
            for t in terms {
                x = t.coef.mul_add(*t.row.add(j), x);
            }
            *out.add(j) = x;
        }
    }
}

/// Sixteen elements at a time in four `ymm` sums, then four, then the
/// rest one at a time.
///
/// # Safety
///
/// As [`fsmooth_row_sums`], on a CPU with AVX2 and FMA3.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn row_sums_avx2(out: *mut f64, n: usize, terms: &[RowTerm]) {
    use std::arch::x86_64::{
        _mm256_broadcast_sd, _mm256_fmadd_pd, _mm256_loadu_pd, _mm256_storeu_pd,
    };
    let mut j = 0;
    // SAFETY: every load and store is at j + 16 ≤ n or j + 4 ≤ n.
    unsafe {
        while j + 16 <= n {
            let o = out.add(j);
            let mut s0 = _mm256_loadu_pd(o);
            let mut s1 = _mm256_loadu_pd(o.add(4));
            let mut s2 = _mm256_loadu_pd(o.add(8));
            let mut s3 = _mm256_loadu_pd(o.add(12));
            for t in terms {
                let c = _mm256_broadcast_sd(&t.coef);
                let r = t.row.add(j);
                s0 = _mm256_fmadd_pd(c, _mm256_loadu_pd(r), s0);
                s1 = _mm256_fmadd_pd(c, _mm256_loadu_pd(r.add(4)), s1);
                s2 = _mm256_fmadd_pd(c, _mm256_loadu_pd(r.add(8)), s2);
                s3 = _mm256_fmadd_pd(c, _mm256_loadu_pd(r.add(12)), s3);
            }
            _mm256_storeu_pd(o, s0);
            _mm256_storeu_pd(o.add(4), s1);
            _mm256_storeu_pd(o.add(8), s2);
            _mm256_storeu_pd(o.add(12), s3);
            j += 16;
        }
        while j + 4 <= n {
            let o = out.add(j);
            let mut s = _mm256_loadu_pd(o);
            for t in terms {
                let c = _mm256_broadcast_sd(&t.coef);
                s = _mm256_fmadd_pd(c, _mm256_loadu_pd(t.row.add(j)), s);
            }
            _mm256_storeu_pd(o, s);
            j += 4;
        }
        row_sums_scalar(out, j, n, terms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element, in each of the kernel's three paths, is the terms
    /// fused in order onto its initial value.
    #[test]
    fn each_element_fuses_its_terms_in_order() {
        for n in [0usize, 1, 3, 4, 5, 16, 17, 21, 37] {
            let rows: Vec<Vec<f64>> = (0..5)
                .map(|i| (0..n).map(|j| 0.1 * (i * 7 + j) as f64 + 1e-3).collect())
                .collect();
            let coefs = [1.0 / 3.0, -2.5, 1e-8, 7.25, -0.125];
            let terms: Vec<RowTerm> = rows
                .iter()
                .zip(coefs)
                .map(|(r, c)| RowTerm {
                    coef: c,
                    row: r.as_ptr(),
                })
                .collect();
            let init: Vec<f64> = (0..n).map(|j| j as f64 / 7.0).collect();
            let mut out = init.clone();
            // SAFETY: `out` and every row hold n Doubles.
            unsafe { fsmooth_row_sums(out.as_mut_ptr(), n as i64, terms.as_ptr(), 5) };
            for j in 0..n {
                let want = rows
                    .iter()
                    .zip(coefs)
                    .fold(init[j], |x, (r, c)| c.mul_add(r[j], x));
                assert_eq!(out[j].to_bits(), want.to_bits(), "element {j} of {n}");
            }
        }
    }
}
